//! The rungs' loops: the writer's `write` or `vmsplice`, the reader's
//! `read` (checked) or `splice` to /dev/null, and what each loop cost.

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::errno::Errno;
use serde::{Deserialize, Serialize};

#[cfg(doc)]
use super::min_ring;
use super::stream::{Bad, Expect, Ring};

/// What one thread's loop cost: its system calls (counted by the loop)
/// and the kernel's own counts for the thread (`RUSAGE_THREAD`).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Cost {
    pub calls: u64,
    pub minor_faults: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    pub user_s: f64,
    pub sys_s: f64,
}

/// This thread's counts so far, for [`Cost::since`].
pub(super) fn thread_usage() -> libc::rusage {
    labkit::measure::rusage(libc::RUSAGE_THREAD)
}

impl Cost {
    pub(super) fn since(before: &libc::rusage, calls: u64) -> Cost {
        let now = thread_usage();
        let secs = labkit::measure::seconds;
        Cost {
            calls,
            minor_faults: (now.ru_minflt - before.ru_minflt) as u64,
            voluntary_switches: (now.ru_nvcsw - before.ru_nvcsw) as u64,
            involuntary_switches: (now.ru_nivcsw - before.ru_nivcsw) as u64,
            user_s: secs(now.ru_utime) - secs(before.ru_utime),
            sys_s: secs(now.ru_stime) - secs(before.ru_stime),
        }
    }
}

// ANCHOR: rung_write
/// Rungs 1 and 2, the article's writer: `write` copies the block into the
/// pipe's own pages, so its slot may be stamped again as soon as `write`
/// returns (a ring of one slot is enough).
pub(super) fn send_by_write(
    tx: &OwnedFd,
    ring: &mut Ring,
    count: u64,
) -> Result<u64, Errno> {
    let mut calls = 0;
    for seq in 0..count {
        let mut block = ring.stamp(seq);
        while !block.is_empty() {
            calls += 1;
            match nix::unistd::write(tx, block) {
                Ok(n) => block = &block[n..],
                Err(Errno::EINTR) => {}
                Err(Errno::EAGAIN) => std::hint::spin_loop(), // --busy-poll
                Err(errno) => return Err(errno),
            }
        }
    }
    Ok(calls)
}
// ANCHOR_END: rung_write

// ANCHOR: rung_vmsplice
/// Rungs 3 to 6: `vmsplice` puts references to the slot's pages into the
/// pipe instead of copying them. The pipe then reads the slot when the
/// reader reads, so the slot must not be stamped again before: hence a
/// ring of at least [`min_ring`] slots. (`flags`: `SPLICE_F_NONBLOCK` with
/// `--busy-poll`, else none.)
pub(super) fn send_by_vmsplice(
    tx: &OwnedFd,
    ring: &mut Ring,
    count: u64,
    flags: libc::c_uint,
) -> Result<u64, Errno> {
    let mut calls = 0;
    for seq in 0..count {
        let mut block = ring.stamp(seq);
        while !block.is_empty() {
            let iov = libc::iovec {
                iov_base: block.as_ptr() as *mut libc::c_void,
                iov_len: block.len(),
            };
            calls += 1;
            // SAFETY: one valid iovec over the slot, alive until the reader
            // has ended (the ring outlives it); vmsplice only reads it. The
            // pipe reads the slot's pages only while it holds references
            // to them, which keep the pages themselves alive, and `run`
            // makes the ring at least min_ring(pipe_bytes, block) slots,
            // so stamp() cannot rewrite a slot whose pages the pipe still
            // holds. (The pitfall test passes fewer slots on purpose: the
            // reader then gets the later block's bytes, a wrong result but
            // no access to freed memory.)
            let n = unsafe { libc::vmsplice(tx.as_raw_fd(), &iov, 1, flags) };
            match Errno::result(n) {
                Ok(n) => block = &block[n as usize..],
                Err(Errno::EINTR) => {}
                Err(Errno::EAGAIN) => std::hint::spin_loop(), // --busy-poll
                Err(errno) => return Err(errno),
            }
        }
    }
    Ok(calls)
}
// ANCHOR_END: rung_vmsplice

/// What the reader saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Received {
    pub bytes: u64,
    pub blocks: u64,
    pub calls: u64,
    /// The first block that was not what was sent, and how.
    pub bad: Option<(u64, Bad)>,
}

// ANCHOR: rung_read
/// Rungs 1 to 4 and 6, the reader: `read` one whole block (one copy, out of the
/// pipe), then check its sequence number and its checksum.
pub(super) fn receive_by_read(
    rx: &OwnedFd,
    buf: &mut [u8],
    expect: &Expect,
) -> Result<Received, Errno> {
    let mut got = Received::default();
    loop {
        let mut n = 0;
        while n < buf.len() {
            got.calls += 1;
            match nix::unistd::read(rx, &mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(Errno::EINTR) => {}
                Err(Errno::EAGAIN) => std::hint::spin_loop(), // --busy-poll
                Err(errno) => return Err(errno),
            }
        }
        if n == 0 {
            return Ok(got); // end of file
        }
        if let (None, Err(bad)) = (got.bad, expect.check(got.blocks, &buf[..n])) {
            got.bad = Some((got.blocks, bad));
        }
        got.bytes += n as u64;
        got.blocks += 1;
    }
}
// ANCHOR_END: rung_read

// ANCHOR: rung_splice
/// Rung 5, the reader: `splice` moves the pipe's page references to
/// `/dev/null`, which drops them. No byte is copied, so none can be checked.
/// (`flags`: `SPLICE_F_NONBLOCK` with `--busy-poll`, else none.)
pub(super) fn receive_by_splice(
    rx: &OwnedFd,
    null: &File,
    block: usize,
    flags: libc::c_uint,
) -> Result<Received, Errno> {
    let mut got = Received::default();
    loop {
        got.calls += 1;
        // SAFETY: two open descriptors and no offsets (both are streams).
        let n = unsafe {
            let (no, flags) = (std::ptr::null_mut(), libc::SPLICE_F_MOVE | flags);
            libc::splice(rx.as_raw_fd(), no, null.as_raw_fd(), no, block, flags)
        };
        match Errno::result(n) {
            Ok(0) => return Ok(got),
            Ok(n) => got.bytes += n as u64,
            Err(Errno::EINTR) => {}
            Err(Errno::EAGAIN) => std::hint::spin_loop(), // --busy-poll
            Err(errno) => return Err(errno),
        }
    }
}
// ANCHOR_END: rung_splice

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ladder::Check;

    // ANCHOR: pitfall
    #[test]
    fn a_ring_too_small_for_vmsplice_hands_the_reader_a_later_block() {
        let block = 4096;
        let expect = Expect::new(block, Check::Checksum);
        let mut buf = vec![0u8; block];
        for (slots, first_bad) in
            [(1, Some((0, Bad::Sequence { found: 1 }))), (3, None)]
        {
            // Two blocks fit in the pipe, so the writer queues both before
            // the reader reads: with one slot, block 1 is stamped into the
            // pages the pipe still holds for block 0.
            let (rx, tx) = pipespeed2::pipe().unwrap();
            let mut ring = Ring::new(slots, block, false).unwrap();
            send_by_vmsplice(&tx, &mut ring, 2, 0).unwrap();
            drop(tx);
            let got = receive_by_read(&rx, &mut buf, &expect).unwrap();
            assert_eq!((got.blocks, got.bad), (2, first_bad), "{slots} slots");
        }
    }
    // ANCHOR_END: pitfall
}
