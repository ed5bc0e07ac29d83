//! The broker under pipelined loads (`load --pipeline N`: N messages per
//! write): exactly-once delivery, a slow consumer's back pressure, and a
//! sender that dies in the middle of a batch. Redis and NATS at N = 16 are
//! in the runner's `tests/mq_sweep.rs`, which starts those servers.

use std::io::{Read, Write};
use std::net::Shutdown;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering::SeqCst};
use std::time::Duration;

use mq::protocol::{self, HELLO_RECV, HELLO_SEND, LEN, Stamp};

use crate::common::*;

/// `n` PUBLISH frames of `size` bytes for `queue`, from `sender`, numbered
/// from `first`, in one buffer: what a pipelined sender writes at once.
fn batch(sender: u32, queue: u16, first: u64, n: u64, size: usize) -> Vec<u8> {
    let mut buf = Vec::new();
    for seq in first..first + n {
        Stamp { sender, seq, sent_ns: 0 }.publish(queue, size, &mut buf);
    }
    buf
}

/// Read `n` messages of `size` bytes from one sender on `queue` and check
/// they come whole and in order from `first` on.
fn take_in_order(
    s: &mut std::net::TcpStream,
    queue: u16,
    size: usize,
    first: u64,
    n: u64,
) {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut body = vec![0u8; 3 + size];
    for seq in first..first + n {
        let mut len = [0u8; LEN];
        s.read_exact(&mut len).unwrap();
        assert_eq!(u32::from_be_bytes(len) as usize, body.len());
        s.read_exact(&mut body).unwrap();
        let stamp = Stamp::check(&body, queue, size).expect("an intact message");
        assert_eq!(stamp.seq, seq, "one sender, one queue: in order");
    }
}

fn exactly_once_at_16(mode: &[&str]) {
    let b = broker(&[mode, &["--queues", "3"]].concat());
    let (out, r) = load(
        &b.addr,
        &["--senders", "6", "--receivers", "5", "--queues", "3", "--pipeline", "16"],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = r.unwrap();
    assert_eq!(r.pipeline, 16);
    assert_eq!((r.lost, r.duplicated, r.corrupt), (0, 0, 0));
    assert!(r.sent > 0);
    assert_eq!(r.sent % 16, 0, "whole writes of 16 only");
    assert_eq!(r.received, r.sent);
    assert!(r.cpu_us_per_message > 0.0, "the generator's own CPU per message");
    let (stats, err) = stop(b, "TERM");
    assert_eq!((stats.messages_in, stats.messages_out), (r.sent, r.sent));
    assert_eq!(stats.closed_bad, 0, "{err}");
}

/// Queue 0's one receiver reads nothing while its sender pushes batches of
/// 16 messages of 16 KiB; the broker stops reading that sender once the
/// queue and the outbox are full, queue 1 keeps moving meanwhile, and the
/// broker's memory stays within what its flags allow.
fn slow_consumer(mode: &[&str]) {
    const SIZE: usize = 16 << 10;
    const BATCHES: u64 = 64; // 16 MiB through queue 0
    let (capacity, outbox, max_frame) = (64u64, 16u64, 32u64 << 10);
    let flags = [
        "--queues",
        "2",
        "--capacity",
        &capacity.to_string(),
        "--outbox",
        &outbox.to_string(),
        "--max-frame",
        "32K",
    ];
    let b = broker(&[mode, &flags[..]].concat());
    let pid = b.child.id();
    let before_kib = status_kib(pid, "VmRSS");
    let mut slow = connect(&b.addr, Some(protocol::hello(HELLO_RECV, 0)));
    let mut s0 = connect(&b.addr, Some(protocol::hello(HELLO_SEND, 0)));
    let (tid, written) = (Arc::new(AtomicI32::new(0)), Arc::new(AtomicU64::new(0)));
    let (me, done) = (tid.clone(), written.clone());
    let sender = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        me.store(unsafe { libc::gettid() }, SeqCst);
        for k in 0..BATCHES {
            s0.write_all(&batch(1, 0, 16 * k, 16, SIZE)).unwrap();
            done.store(k + 1, SeqCst);
        }
        s0.shutdown(Shutdown::Write).unwrap();
    });
    // Until the sender sits in write(2) past what the queue and outbox
    // hold (an event, not a time): the broker has stopped reading it.
    let held = (capacity + outbox) / 16 + 1;
    loop {
        let (t, n) = (tid.load(SeqCst), written.load(SeqCst));
        assert!(!sender.is_finished(), "all of queue 0 went in unread");
        if t != 0 && n > held && thread_state(t) == 'S' && written.load(SeqCst) == n
        {
            break;
        }
        std::thread::yield_now();
    }
    // Queue 1 moves meanwhile: 1024 messages in 64 pipelined writes.
    let mut r1 = connect(&b.addr, Some(protocol::hello(HELLO_RECV, 1)));
    let mut s1 = connect(&b.addr, Some(protocol::hello(HELLO_SEND, 0)));
    for k in 0..64 {
        s1.write_all(&batch(2, 1, 16 * k, 16, 1024)).unwrap();
    }
    take_in_order(&mut r1, 1, 1024, 0, 1024);
    assert!(!sender.is_finished(), "queue 0 still held back");
    // Then the slow consumer reads, and everything arrives.
    take_in_order(&mut slow, 0, SIZE, 0, 16 * BATCHES);
    sender.join().unwrap();
    // The bound the flags give: the queue and one receiver's outbox, each
    // connection's read chunk and one unfinished frame; with room for the
    // allocator's own and the threads' stacks.
    let frame = (SIZE + protocol::HEADER) as u64;
    let bound_kib = ((capacity + outbox) * frame + 4 * (max_frame + (64 << 10)))
        / 1024
        + (16 << 10);
    let grown_kib = status_kib(pid, "VmHWM").saturating_sub(before_kib);
    assert!(
        grown_kib < bound_kib,
        "broker peak grew {grown_kib} KiB, bound {bound_kib} KiB"
    );
    let (stats, err) = stop(b, "TERM");
    assert_eq!(stats.messages_out, 16 * BATCHES + 1024);
    assert_eq!(stats.closed_bad, 0, "{err}");
}

/// Two senders die in the middle of a batch, each with a partial frame
/// written after 16 whole ones: one closes (FIN, as a process that exits),
/// one resets. The broker delivers their whole frames, drops those two
/// connections, and a third sender's batches before and after go through.
fn dies_mid_batch(mode: &[&str]) {
    let b = broker(&[mode, &["--queues", "2"]].concat());
    let mut r0 = connect(&b.addr, Some(protocol::hello(HELLO_RECV, 0)));
    let mut r1 = connect(&b.addr, Some(protocol::hello(HELLO_RECV, 1)));
    let mut good = connect(&b.addr, Some(protocol::hello(HELLO_SEND, 0)));
    good.write_all(&batch(9, 1, 0, 16, 32)).unwrap();
    let mut dying = Vec::new();
    for sender in [1, 2] {
        let mut s = connect(&b.addr, Some(protocol::hello(HELLO_SEND, 0)));
        let mut buf = batch(sender, 0, 0, 16, 32);
        let partial = batch(sender, 0, 16, 1, 32);
        buf.extend_from_slice(&partial[..partial.len() / 2]);
        s.write_all(&buf).unwrap();
        dying.push(s);
    }
    // Their 16 whole frames each are through before they die.
    let want: Vec<(u32, u64)> =
        [1, 2].iter().flat_map(|&s| (0..16).map(move |q| (s, q))).collect();
    assert_eq!(take(&mut r0, 0, 32), want);
    let (fin, rst) = (dying.remove(0), dying.remove(0));
    let open = open_sockets(b.child.id());
    drop(fin);
    reset(rst);
    // Both closed by the broker before it is stopped: with a pool of
    // readers, one may not yet have read its end of stream when the
    // SIGTERM comes, and would not count it.
    sockets_fall_to(b.child.id(), open - 2);
    good.write_all(&batch(9, 1, 16, 16, 32)).unwrap();
    good.shutdown(Shutdown::Write).unwrap();
    assert_eq!(take(&mut r1, 1, 32), (0..32).map(|q| (9, q)).collect::<Vec<_>>());
    let (stats, err) = stop(b, "TERM");
    assert_eq!((stats.messages_in, stats.messages_out), (64, 64));
    assert_eq!(stats.closed_bad, 2, "{err}");
    assert_eq!(err.matches("closed connection").count(), 2, "{err}");
}

with_both_designs! {
    exactly_once_at_16_per_write: exactly_once_at_16(["-r", "2", "-w", "2", "-d", "2"]);
    a_slow_consumer_under_pipelining_holds_only_its_queue:
        slow_consumer(["-r", "1", "-w", "1", "-d", "1"]);
    a_sender_dying_mid_batch_drops_only_its_connection:
        dies_mid_batch(["-r", "2", "-w", "2", "-d", "2"]);
}
