//! The broker as a whole process: exactly-once delivery, bad peers, back
//! pressure, limits, shutdown by signal, bad flags.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::process::Command;
use std::time::Duration;

use labkit::limited::Limits;
use mq::protocol::{self, HELLO_RECV, HELLO_SEND, LEN, Stamp};

use crate::common::*;

fn exactly_once(pools: &[&str], threads: usize) {
    let b = broker(&[pools, &["--queues", "3"]].concat());
    let (out, r) =
        load(&b.addr, &["--senders", "6", "--receivers", "5", "--queues", "3"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = r.unwrap();
    assert_eq!((r.lost, r.duplicated, r.corrupt), (0, 0, 0));
    let sent = r.sent;
    assert!(sent > 0);
    assert_eq!(r.received, sent);
    let (stats, err) = stop(b, "TERM");
    assert_eq!(stats.messages_in, sent);
    assert_eq!(stats.messages_out, sent);
    assert_eq!(stats.connections, 11);
    assert_eq!(stats.closed_bad, 0, "{err}");
    assert_eq!(stats.threads_joined, threads);
}

fn bad_peers(mode: &[&str]) {
    let b = broker(&[mode, &["--queues", "2", "--max-frame", "4K"]].concat());
    let addr = b.addr.clone();
    let mut r0 = connect(&addr, Some(protocol::hello(HELLO_RECV, 0)));
    let mut r1 = connect(&addr, Some(protocol::hello(HELLO_RECV, 1)));
    let send = || connect(&addr, Some(protocol::hello(HELLO_SEND, 0)));

    // Oversized length after 5 good messages.
    let mut a = send();
    publish(&mut a, 1, 0, 5);
    a.write_all(&[0xff, 0xff, 0xff, 0xff, 3]).unwrap();
    // Truncated: 3 good messages, then half a frame and the end.
    let mut t = send();
    publish(&mut t, 2, 1, 3);
    t.write_all(&[0, 0, 0, 100, 3, 0, 1, 9, 9]).unwrap();
    t.shutdown(Shutdown::Write).unwrap();
    // Malformed kind after 2 good messages.
    let mut c = send();
    publish(&mut c, 3, 0, 2);
    c.write_all(&[0, 0, 0, 1, 9]).unwrap();
    // One good message, half a frame, then a reset, once the good one has
    // come through (with a's five and c's two, all for queue 0).
    let mut d = send();
    publish(&mut d, 4, 0, 1);
    d.write_all(&[0, 0, 0, 50, 3]).unwrap();
    let mut first0: Vec<(u32, u64)> = (0..5).map(|s| (1, s)).collect();
    first0.extend([(3, 0), (3, 1), (4, 0)]);
    assert_eq!(take(&mut r0, 0, first0.len()), first0);
    reset(d);
    // No hello; a queue that does not exist; a zero length.
    let mut e = connect(&addr, None);
    publish(&mut e, 5, 0, 1);
    let mut f = send();
    publish(&mut f, 6, 7, 1);
    let mut z = send();
    z.write_all(&[0, 0, 0, 0]).unwrap();
    // And a well-behaved sender afterwards.
    let mut h = send();
    publish(&mut h, 8, 0, 4);
    h.shutdown(Shutdown::Write).unwrap();

    let want0: Vec<(u32, u64)> = (0..4).map(|s| (8, s)).collect();
    assert_eq!(take(&mut r0, 0, want0.len()), want0);
    assert_eq!(take(&mut r1, 1, 3), vec![(2, 0), (2, 1), (2, 2)]);
    // The bad connections were closed by the broker: reads see the end.
    for mut s in [a, c, e, f, z] {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut byte = [0u8];
        assert!(matches!(s.read(&mut byte), Ok(0) | Err(_)));
    }
    let (stats, err) = stop(b, "TERM");
    assert_eq!(stats.messages_in, 15, "{err}");
    assert_eq!(stats.messages_out, 15);
    assert_eq!(stats.closed_bad, 7, "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 7, "one line per bad connection:\n{err}");
    for needle in [
        "oversized frame: length 4294967295 > max 4096",
        "truncated frame",
        "unknown kind 9",
        "PUBLISH before HELLO_SEND",
        "no such queue 7",
        "length 0",
    ] {
        assert!(err.contains(needle), "no '{needle}' in:\n{err}");
    }
}

fn shutdown_joins_everything(mode: &[&str], threads: usize, signal: &str) {
    let mut b = broker(mode);
    // A receiver, a sender in the middle of a frame, a silent connection.
    let mut r = connect(&b.addr, Some(protocol::hello(HELLO_RECV, 0)));
    let mut s = connect(&b.addr, Some(protocol::hello(HELLO_SEND, 0)));
    publish(&mut s, 1, 0, 3);
    s.write_all(&[0, 0, 0, 40, 3]).unwrap();
    let _quiet = connect(&b.addr, None);
    // The three messages went through before the signal.
    assert_eq!(take(&mut r, 0, 3).len(), 3);
    // Every worker thread has started (the pools start before the broker
    // prints its address, but a loaded machine may still be creating the
    // last ones): wait for the count, bounded, rather than for a fixed time.
    // A broker that fails to start one ends instead.
    while tasks(b.child.id()) != threads + 1 {
        assert!(b.child.try_wait().unwrap().is_none(), "the broker ended");
        std::thread::yield_now();
    }
    let (stats, _) = stop(b, signal);
    assert_eq!(stats.threads_joined, threads);
    assert_eq!(stats.messages_in, 3);
    assert_eq!(stats.messages_out, 3);
}

fn back_pressure(mode: &[&str]) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicI32, AtomicU64, Ordering::SeqCst};
    let b = broker(&[mode, &["--capacity", "4", "--outbox", "2"]].concat());
    let pid = b.child.id();
    let mut r = connect(&b.addr, Some(protocol::hello(HELLO_RECV, 0)));
    let mut s = connect(&b.addr, Some(protocol::hello(HELLO_SEND, 0)));
    // 64 MiB of messages, far more than the socket buffers and the queues.
    const N: u64 = 4096;
    let (tid, written) = (Arc::new(AtomicI32::new(0)), Arc::new(AtomicU64::new(0)));
    let (me, done) = (tid.clone(), written.clone());
    let sender = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        me.store(unsafe { libc::gettid() }, SeqCst);
        let mut buf = Vec::new();
        for seq in 0..N {
            buf.clear();
            Stamp { sender: 1, seq, sent_ns: 0 }.publish(0, 16 << 10, &mut buf);
            s.write_all(&buf).unwrap();
            done.store(seq + 1, SeqCst);
        }
        s.shutdown(Shutdown::Write).unwrap();
    });
    // The receiver reads nothing until the sender is stopped in write(2),
    // past what the broker's queue and outbox hold (an event, not a time):
    // the broker has stopped reading it, as it must.
    loop {
        let t = tid.load(SeqCst);
        let n = written.load(SeqCst);
        assert!(!sender.is_finished(), "all {N} messages went in unread");
        if t != 0 && n > 6 && thread_state(t) == 'S' && written.load(SeqCst) == n {
            break;
        }
        std::thread::yield_now();
    }
    let rss_kib = status_kib(pid, "VmRSS");
    assert!(rss_kib < 32 << 10, "broker RSS {rss_kib} KiB while a receiver stalls");
    r.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut body = vec![0u8; 3 + (16 << 10)];
    for seq in 0..N {
        let mut len = [0u8; LEN];
        r.read_exact(&mut len).unwrap();
        r.read_exact(&mut body).unwrap();
        let stamp = Stamp::check(&body, 0, 16 << 10).unwrap();
        assert_eq!(stamp.seq, seq, "one sender, one receiver: in order");
    }
    sender.join().unwrap();
    // The broker never held more than a few MiB of the 64 sent through it.
    let peak_kib = status_kib(pid, "VmHWM");
    assert!(peak_kib < 32 << 10, "broker peak RSS {peak_kib} KiB");
    let (stats, _) = stop(b, "TERM");
    assert_eq!(stats.messages_out, N);
}

fn unfinished_frames(mode: &[&str]) {
    let b = broker(mode);
    let before = status_kib(b.child.id(), "VmRSS");
    // 200 connections, each announcing a frame of 1 MiB - 1 and sending
    // 100 bytes of it.
    let mut held = Vec::new();
    for _ in 0..200 {
        let mut s = connect(&b.addr, Some(protocol::hello(HELLO_SEND, 0)));
        let mut frame = ((1u32 << 20) - 1).to_be_bytes().to_vec();
        frame.extend([protocol::PUBLISH, 0, 0]);
        frame.extend([7u8; 100]);
        s.write_all(&frame).unwrap();
        held.push(s);
    }
    // A message through the same broker: the reads above are done by then
    // in the event loop, and very likely in the pools.
    let mut r = connect(&b.addr, Some(protocol::hello(HELLO_RECV, 1)));
    let mut s = connect(&b.addr, Some(protocol::hello(HELLO_SEND, 0)));
    publish(&mut s, 1, 1, 1);
    assert_eq!(take(&mut r, 1, 1), vec![(1, 0)]);
    let grown = status_kib(b.child.id(), "VmRSS").saturating_sub(before);
    // Announced: 200 MiB. Received: 200 x 107 bytes.
    assert!(grown < 16 << 10, "RSS grew by {grown} KiB");
    drop(held);
    stop(b, "TERM");
}

fn max_connections(mode: &[&str]) {
    let b = broker(&[mode, &["--max-connections", "2"]].concat());
    let mut r = connect(&b.addr, Some(protocol::hello(HELLO_RECV, 0)));
    let mut s = connect(&b.addr, Some(protocol::hello(HELLO_SEND, 0)));
    // Both served: a message goes through.
    publish(&mut s, 1, 0, 1);
    assert_eq!(take(&mut r, 0, 1), vec![(1, 0)]);
    assert!(!served(&b.addr, &mut r, 0, 2), "the third connection was served");
    // Room again once one has gone: the broker has closed it, and gives
    // its slot back just after (the thread pools), so a connection may
    // still be refused; each try is decided by what the broker did.
    s.shutdown(Shutdown::Write).unwrap();
    closed_by_broker(&mut s);
    let mut refused = 1;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !served(&b.addr, &mut r, 0, 10 + refused) {
        assert!(
            std::time::Instant::now() < deadline,
            "{refused} refused since one closed"
        );
        refused += 1;
    }
    let (stats, err) = stop(b, "TERM");
    // Nothing a refused connection sent went in.
    assert_eq!((stats.messages_in, stats.messages_out), (2, 2), "{stats:?}");
    assert_eq!(
        (stats.connections, stats.refused),
        (3, u64::from(refused)),
        "{stats:?}"
    );
    assert!(err.contains("(--max-connections)"), "{err}");
    assert!(err.lines().count() <= 2, "one line per 5 s at most:\n{err}");
}

fn out_of_descriptors(mode: &[&str]) {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_broker"));
    cmd.args(mode).args(["--json", "--drain", "0"]);
    // SAFETY: the child only calls setrlimit(2), which is async-signal-safe,
    // between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit { rlim_cur: 24, rlim_max: 24 };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let (mut child, out, addr) = labtest::start_server(&mut cmd);
    // Its stderr, line by line, as it comes.
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let b = Broker { child, out, addr };
    // 40 connections against 24 descriptors: the last ones wait in the
    // listen queue while accept fails with EMFILE, again and again.
    let held: Vec<TcpStream> = (0..40).map(|_| connect(&b.addr, None)).collect();
    let first = rx.iter().find(|l| l.contains("accept:"));
    let first = first.expect("the broker ended without logging an accept error");
    assert!(first.contains("EMFILE") && first.contains("retrying every"), "{first}");
    // Not a synchronisation: ten more back-off periods of failing accepts,
    // for the throttle to show that it logs them once per 5 s at most.
    std::thread::sleep(10 * mq::ACCEPT_BACKOFF);
    drop(held);
    let (_, _) = stop(b, "TERM");
    reader.join().unwrap();
    let more: Vec<String> = rx.iter().filter(|l| l.contains("accept:")).collect();
    assert!(more.len() <= 1, "{} more accept lines: {more:?}", more.len());
}

#[test]
fn exactly_once_across_queues_with_thread_pools() {
    // acceptor + 2 readers + 3 deliverers + 2 writers
    exactly_once(&["--readers", "2", "--deliverers", "3", "--writers", "2"], 8);
}

#[test]
fn exactly_once_across_queues_with_the_event_loop() {
    exactly_once(&["--event-loop"], 0);
}

with_both_designs! {
    bad_peers_close_only_their_connection:
        bad_peers(["-r", "2", "-w", "2", "-d", "2"]);
    a_stalled_receiver_holds_senders_back:
        back_pressure(["-r", "1", "-w", "1", "-d", "1"]);
    unfinished_frames_cost_what_arrived:
        unfinished_frames(["-r", "2", "-w", "2", "-d", "2"]);
    max_connections_refuses_the_next:
        max_connections(["-r", "2", "-w", "2", "-d", "2"]);
    out_of_descriptors_backs_off_and_logs_once:
        out_of_descriptors(["-r", "1", "-w", "1", "-d", "1"]);
}

#[test]
fn sigterm_joins_every_pool_thread() {
    shutdown_joins_everything(&["-r", "3", "-w", "2", "-d", "4"], 10, "TERM");
}

#[test]
fn sigint_stops_the_event_loop() {
    shutdown_joins_everything(&["--event-loop"], 0, "INT");
}

#[test]
fn bad_flags_exit_2() {
    use labtest::{usage_error, usage_errors};
    usage_errors(
        env!("CARGO_BIN_EXE_broker"),
        &[
            &["--readers", "0"],
            &["--listen", "nowhere"],
            &["--queues", "0"],
            &["--max-frame", "lots"],
            &["--drain", "-1"],
        ],
    );
    let load = env!("CARGO_BIN_EXE_load");
    usage_errors(
        load,
        &[
            &["--senders", "1"],
            &["--addr", "127.0.0.1:1", "--size", "5"],
            &["--addr", "127.0.0.1:1", "--duration", "soon"],
        ],
    );
    let mut cmd = Command::new(load);
    cmd.args(["--addr", "127.0.0.1:1", "--receivers", "2", "--queues", "4"]);
    let err = usage_error("load", &mut cmd);
    assert!(err.contains("--receivers"), "{err}");
}

#[test]
fn a_broker_out_of_address_space_names_the_thread_and_stops_the_rest() {
    // What a small broker maps, plus 40 MiB: room for some of 500 readers
    // (256 KiB of stack and a 64 KiB buffer each), not for all of them.
    let small = broker(&["-r", "1", "-w", "1", "-d", "1"]);
    let limit = (status_kib(small.child.id(), "VmSize") + (40 << 10)) << 10;
    stop(small, "TERM");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_broker"));
    let limits = Limits { address_space: Some(limit), ..Limits::default() };
    let out = labkit::limited::apply(&mut cmd, limits)
        .args(["--readers", "500", "--json"])
        .output()
        .unwrap();
    let err = labtest::failed("broker", &out);
    assert!(err.starts_with("broker: cannot start reader "), "{err}");
    assert!(err.contains(" of 500: "), "{err}");
    assert!(err.contains("; stopped the "), "{err}");
}
