//! The pipe ladder (`--method`): the article's writer and reader, then one
//! change at a time towards the limit that memory copying sets.
//!
//! Every rung sends the same stream: blocks from a ring of page-aligned
//! slots, each filled once with the pattern before the clock starts and
//! stamped by the writer with its sequence number (the block's first 8
//! bytes, or all of them in a shorter block). The verified rungs' reader
//! reads each whole block and checks, inside the timed loop, its sequence
//! number and a checksum of the whole block (or, with `--check bytes`,
//! every byte). Rung by rung:
//!
//! 1. `write` + `read` on the default pipe: the article's program.
//! 2. the same on a bigger pipe (`--pipe-size`): fewer turns, fewer
//!    wake-ups.
//! 3. `vmsplice`: the pipe takes references to the writer's pages instead
//!    of a copy; the reader's `read` is the only copy.
//! 4. the same with huge pages (`--huge-pages`): 512 times fewer pages to
//!    look up and pin.
//! 5. `splice-null`: the reader `splice`s the pipe's pages to `/dev/null`:
//!    no copy at all, and so nothing to check. Its rate is reported as not
//!    verified.

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Instant;

use labkit::error::{Error, Result, describe_errno};
use labkit::memory::PAGE;
use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use pipespeed2::{MB, Report, grow_pipe, pipe_size};
use serde::{Deserialize, Serialize};

use crate::ring::{Backing, Mapping};

/// How the bytes go from the writer to the reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Method {
    /// `write` into the pipe, `read` out of it (two copies)
    Write,
    /// `vmsplice` the writer's pages into the pipe, `read` them out (one
    /// copy)
    Vmsplice,
    /// `vmsplice` in, `splice` out to /dev/null (no copy; not verified)
    SpliceNull,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Write => "write",
            Method::Vmsplice => "vmsplice",
            Method::SpliceNull => "splice-null",
        }
    }
}

/// What the reader checks in each block it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Check {
    /// Its sequence number and a checksum of the whole block
    Checksum,
    /// Its sequence number and every byte (slower; exact)
    Bytes,
}

/// One ladder run's settings.
#[derive(Clone, Debug)]
pub struct Options {
    pub count: u64,
    pub block: u64,
    pub method: Method,
    /// `F_SETPIPE_SZ`; the kernel's default pipe without it.
    pub pipe_size: Option<u64>,
    /// Huge pages for the ring and the reader's buffer.
    pub huge_pages: bool,
    /// Slots in the writer's ring [default: 1 for `write`, the least that
    /// is safe for `vmsplice`, see [`min_ring`]].
    pub ring: Option<u64>,
    pub check: Check,
    /// Both ends non-blocking: spin on `EAGAIN` instead of sleeping.
    pub busy_poll: bool,
}

// ANCHOR: min_ring
/// The fewest ring slots with which `vmsplice` is safe, for a pipe of
/// `pipe_bytes` and blocks of `block` bytes.
///
/// `vmsplice` puts references to the slot's pages into the pipe, not a
/// copy: if the writer stamps a slot again while the pipe still holds its
/// pages, the reader reads the new bytes. A pipe holds at most
/// `pipe_bytes / PAGE` page references, and a block takes one per page it
/// spans. When the writer comes back to a slot, it has queued `slots - 1`
/// whole blocks after the slot's last block; once those fill the pipe's
/// capacity, the reader must have read that last block (the pipe cannot
/// hold more), and it is safe to stamp. So the capacity in blocks plus one
/// suffices; we take capacity plus two blocks, one for the block the
/// writer is queuing and one for the block the reader is copying out.
pub fn min_ring(pipe_bytes: u64, block: u64) -> u64 {
    let page = PAGE as u64;
    let refs = (pipe_bytes / page).max(1);
    let per_block = block.div_ceil(page);
    refs.div_ceil(per_block) + 2
}
// ANCHOR_END: min_ring

/// The writer's blocks: `slots` page-aligned slots, each holding the
/// pattern, stamped with a sequence number when sent.
pub struct Ring {
    mem: Mapping,
    block: usize,
    stride: usize,
    slots: u64,
}

impl Ring {
    pub fn new(slots: u64, block: usize, huge: bool) -> Result<Ring> {
        let stride = block.div_ceil(PAGE) * PAGE;
        let len = usize::try_from(slots)
            .ok()
            .and_then(|s| s.checked_mul(stride))
            .ok_or_else(|| {
                Error::usage(format!("a ring of {slots} slots is too large"))
            })?;
        let mut mem = Mapping::new(len, huge)?;
        for slot in mem.chunks_mut(stride) {
            fill(&mut slot[..block]);
        }
        Ok(Ring { mem, block, stride, slots })
    }

    /// Stamp block `seq` into its slot and return the slot's bytes.
    pub fn stamp(&mut self, seq: u64) -> &[u8] {
        let at = (seq % self.slots) as usize * self.stride;
        let slot = &mut self.mem[at..at + self.block];
        let h = header_len(self.block);
        slot[..h].copy_from_slice(&seq.to_le_bytes()[..h]);
        slot
    }

    pub fn backing(&self) -> Backing {
        self.mem.backing
    }
}

/// The pattern every slot holds: not all equal, not periodic in a power of
/// two (as `pipespeed2::pattern`).
fn fill(block: &mut [u8]) {
    for (i, byte) in block.iter_mut().enumerate() {
        *byte = (i % 251) as u8 ^ 0x5a;
    }
}

/// The sequence number takes the block's first 8 bytes, or all of a
/// shorter block (then it is the number modulo 256^len).
fn header_len(block: usize) -> usize {
    block.min(8)
}

// ANCHOR: checksum
/// A Fletcher-style checksum over little-endian 64-bit words, four lanes
/// at a time (the last words padded with zeros): the sum of the words, and
/// the sum of the running sums, so that a word moved elsewhere shows too.
pub fn checksum(bytes: &[u8]) -> (u64, u64) {
    let (mut a, mut b) = ([0u64; 4], [0u64; 4]);
    let mut add = |chunk: &[u8]| {
        for (l, word) in chunk.chunks_exact(8).enumerate() {
            let w = u64::from_le_bytes(word.try_into().expect("8 bytes"));
            a[l] = a[l].wrapping_add(w);
            b[l] = b[l].wrapping_add(a[l]);
        }
    };
    let mut chunks = bytes.chunks_exact(32);
    for chunk in &mut chunks {
        add(chunk);
    }
    if !chunks.remainder().is_empty() {
        let mut last = [0u8; 32];
        last[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        add(&last);
    }
    let sum = |v: [u64; 4]| v.iter().fold(0u64, |s, &x| s.wrapping_add(x));
    (sum(a), sum(b))
}
// ANCHOR_END: checksum

/// What is wrong with a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bad {
    /// It carried another block's sequence number: the writer had stamped
    /// its slot again before the reader read it.
    Sequence { found: u64 },
    /// Its checksum (or a byte) differs from what was sent.
    Bytes,
    /// The stream ended within it.
    Short { len: usize },
}

/// What the reader expects of block `seq`: the pattern, stamped.
pub struct Expect {
    template: Vec<u8>,
    check: Check,
    /// The checksum of the template with its header zero, and the weight
    /// of the header word in the second sum (the number of 32-byte chunks).
    zero: (u64, u64),
    chunks: u64,
}

impl Expect {
    pub fn new(block: usize, check: Check) -> Expect {
        let mut template = vec![0u8; block];
        fill(&mut template);
        template[..header_len(block)].fill(0);
        Expect {
            zero: checksum(&template),
            chunks: block.div_ceil(32) as u64,
            template,
            check,
        }
    }

    /// Does `got` hold block `seq`? The checksum is linear in the header
    /// word, so the expected value is the template's plus its share.
    pub fn check(&self, seq: u64, got: &[u8]) -> Result<(), Bad> {
        if got.len() != self.template.len() {
            return Err(Bad::Short { len: got.len() });
        }
        let h = header_len(got.len());
        let mut word = [0u8; 8];
        word[..h].copy_from_slice(&got[..h]);
        let found = u64::from_le_bytes(word);
        let mask = if h == 8 { u64::MAX } else { (1u64 << (8 * h)) - 1 };
        if found != seq & mask {
            return Err(Bad::Sequence { found });
        }
        let ok = match self.check {
            Check::Checksum => {
                let (a, b) = checksum(got);
                a == self.zero.0.wrapping_add(found)
                    && b == self.zero.1.wrapping_add(found.wrapping_mul(self.chunks))
            }
            Check::Bytes => got[h..] == self.template[h..],
        };
        if ok { Ok(()) } else { Err(Bad::Bytes) }
    }
}

/// What one thread's loop cost: its system calls (counted by the loop)
/// and the kernel's own counts for the thread (`RUSAGE_THREAD`).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct Cost {
    pub calls: u64,
    pub minor_faults: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    pub user_s: f64,
    pub sys_s: f64,
}

fn thread_usage() -> libc::rusage {
    // SAFETY: an all-zero rusage is valid; getrusage fills it in.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage owned by this frame.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
    u
}

impl Cost {
    fn since(before: &libc::rusage, calls: u64) -> Cost {
        let now = thread_usage();
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
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
fn send_by_write(tx: &OwnedFd, ring: &mut Ring, count: u64) -> Result<u64, Errno> {
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
fn send_by_vmsplice(
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
            // SAFETY: one valid iovec over the slot, which lives as long as
            // the ring (until the reader has ended); vmsplice only reads it.
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
fn receive_by_read(
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
fn receive_by_splice(
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

/// A ladder run as `--json` prints it: the program's usual report and how
/// the bytes went. The runner reads it back as this type.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LadderReport {
    #[serde(flatten)]
    pub report: Report,
    pub method: String,
    /// What the reader checked in each block.
    pub check: String,
    pub ring_slots: u64,
    /// Bytes per slot: the block rounded up to a page.
    pub slot_bytes: u64,
    /// What backs the ring and the reader's buffer.
    pub ring_pages: String,
    pub reader_buffer_pages: String,
    pub writer: Cost,
    pub reader: Cost,
}

impl LadderReport {
    pub fn print(&self, json: bool) -> Result<()> {
        if !json {
            return self.report.print(false);
        }
        let line = serde_json::to_string(self)
            .map_err(|e| Error::failed(format!("cannot encode report: {e}")))?;
        labkit::error::print(&format!("{line}\n"))
    }
}

/// Send `count` blocks from this thread to a reader thread by `method`, and
/// report the rate.
pub fn run(o: &Options) -> Result<LadderReport> {
    let Some(total) = o.count.checked_mul(o.block) else {
        return Err(Error::usage(format!(
            "{} x {} bytes is too many",
            o.count, o.block
        )));
    };
    let block = o.block as usize;
    let (rx, tx) = pipespeed2::pipe()?;
    let pipe_bytes = match o.pipe_size {
        Some(asked) => grow_pipe(&tx, asked)?,
        None => pipe_size(&tx)?,
    };
    if o.busy_poll {
        // Every call that would sleep returns EAGAIN instead (vmsplice
        // and splice as with SPLICE_F_NONBLOCK), and the loops spin.
        for fd in [&rx, &tx] {
            fcntl(fd, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).map_err(|errno| {
                Error::failed(format!(
                    "fcntl(O_NONBLOCK): {}",
                    describe_errno(errno)
                ))
            })?;
        }
    }
    let nonblock = if o.busy_poll { libc::SPLICE_F_NONBLOCK } else { 0 };
    let need = min_ring(pipe_bytes, o.block);
    let slots = match (o.method, o.ring) {
        (_, Some(0)) => return Err(Error::usage("a ring needs at least one slot")),
        (Method::Write, ring) => ring.unwrap_or(1),
        (_, None) => need,
        (_, Some(ring)) if ring >= need => ring,
        (_, Some(ring)) => {
            return Err(Error::usage(format!(
                "a ring of {ring} blocks is too small for vmsplice: with a {pipe_bytes}-byte \
                 pipe and {block}-byte blocks the writer would stamp a block whose pages the \
                 pipe still holds, and the reader would read the new bytes; it needs at \
                 least {need} (pipe capacity in blocks plus two)"
            )));
        }
    };
    let need_bytes =
        (slots + 1).saturating_mul(block.div_ceil(PAGE) as u64 * PAGE as u64);
    if let Some(free) = available_bytes().filter(|&free| need_bytes > free / 2) {
        return Err(Error::usage(format!(
            "the ring ({slots} slots of {block} bytes) and the reader's buffer need {} MiB, \
             more than half of the {} MiB available; use smaller blocks",
            need_bytes >> 20,
            free >> 20
        )));
    }
    let mut ring = Ring::new(slots, block, o.huge_pages)?;
    let mut buf = Mapping::new(block, o.huge_pages)?;
    let expect = Expect::new(block, o.check);
    let null = match o.method {
        Method::SpliceNull => Some(
            File::options()
                .write(true)
                .open("/dev/null")
                .map_err(|e| Error::io("/dev/null", e))?,
        ),
        _ => None,
    };

    let start = Instant::now();
    let (sent, received) = std::thread::scope(|s| {
        let buf = &mut buf[..];
        let (expect, null) = (&expect, null.as_ref());
        let reader = s.spawn(move || {
            let before = thread_usage();
            let got = match null {
                Some(null) => receive_by_splice(&rx, null, block, nonblock),
                None => receive_by_read(&rx, buf, expect),
            };
            drop(rx); // the writer sees EPIPE if it is still writing
            got.map(|got| (got, Cost::since(&before, got.calls)))
        });
        let before = thread_usage();
        let sent = match o.method {
            Method::Write => send_by_write(&tx, &mut ring, o.count),
            _ => send_by_vmsplice(&tx, &mut ring, o.count, nonblock),
        }
        .map(|calls| Cost::since(&before, calls));
        drop(tx); // end of file for the reader
        (sent, reader.join())
    });
    let elapsed_s = start.elapsed().as_secs_f64();

    let (got, reader) = match received {
        Ok(Ok(got)) => got,
        Ok(Err(errno)) => {
            return Err(Error::failed(format!("reader: {}", describe_errno(errno))));
        }
        Err(_) => return Err(Error::failed("the reader thread panicked")),
    };
    let writer = sent.map_err(|errno| {
        Error::failed(format!(
            "{}: {} (the reader had read {} of {total} bytes)",
            if o.method == Method::Write { "write" } else { "vmsplice" },
            describe_errno(errno),
            got.bytes
        ))
    })?;
    match got.bad {
        Some((seq, Bad::Sequence { found })) => {
            return Err(Error::failed(format!(
                "block {seq} arrived carrying sequence number {found}: the writer had \
                 stamped its slot again while the pipe still held its pages"
            )));
        }
        Some((seq, Bad::Bytes)) => {
            return Err(Error::failed(format!(
                "block {seq} arrived with different bytes from those sent"
            )));
        }
        Some((seq, Bad::Short { len })) => {
            return Err(Error::failed(format!(
                "the stream ended within block {seq}, after {len} of its {block} bytes"
            )));
        }
        None => {}
    }
    if got.bytes != total {
        return Err(Error::failed(format!(
            "the reader received {} of {total} bytes",
            got.bytes
        )));
    }
    let verified = o.method != Method::SpliceNull;
    Ok(LadderReport {
        report: Report {
            program: "pipespeed2t".into(),
            transport: "pipe".into(),
            mode: match (o.method, o.busy_poll) {
                (Method::Write, false) => "threads, write",
                (Method::Write, true) => "threads, write, busy-polling",
                (Method::Vmsplice, false) => "threads, vmsplice",
                (Method::Vmsplice, true) => "threads, vmsplice, busy-polling",
                (Method::SpliceNull, false) => {
                    "threads, vmsplice + splice to /dev/null, not verified"
                }
                (Method::SpliceNull, true) => {
                    "threads, vmsplice + splice to /dev/null, busy-polling, not verified"
                }
            }
            .into(),
            count: o.count,
            block_bytes: o.block,
            bytes: total,
            elapsed_s,
            mb_per_s: total as f64 / elapsed_s / MB,
            pipe_size: Some(pipe_bytes),
            verified,
        },
        method: o.method.name().into(),
        check: match (verified, o.check) {
            (false, _) => "none: bytes counted only",
            (true, Check::Checksum) => "sequence number and checksum of every block",
            (true, Check::Bytes) => "sequence number and every byte of every block",
        }
        .into(),
        ring_slots: slots,
        slot_bytes: (block.div_ceil(PAGE) * PAGE) as u64,
        ring_pages: ring.backing().to_string(),
        reader_buffer_pages: buf.backing.to_string(),
        writer,
        reader,
    })
}

/// `MemAvailable` from /proc/meminfo, in bytes.
fn available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib << 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_covers_the_pipe_plus_two_blocks() {
        assert_eq!(min_ring(65536, 4096), 18);
        assert_eq!(min_ring(1 << 20, 64 << 10), 18);
        assert_eq!(min_ring(1 << 20, 1 << 20), 3);
        // A block that spans part of a page still takes a whole reference.
        assert_eq!(min_ring(65536, 1), 18);
        assert_eq!(min_ring(65536, 4097), 10);
        assert_eq!(min_ring(65536, (1 << 20) + 1), 3);
    }

    #[test]
    fn the_check_catches_a_changed_byte_a_swap_and_a_stale_block() {
        for block in [1usize, 7, 8, 33, 4095, 65537] {
            let mut ring = Ring::new(2, block, false).unwrap();
            let expect = Expect::new(block, Check::Checksum);
            let exact = Expect::new(block, Check::Bytes);
            let sent = ring.stamp(5).to_vec();
            assert_eq!(expect.check(5, &sent), Ok(()), "{block}");
            assert_eq!(exact.check(5, &sent), Ok(()), "{block}");
            // Another block's number: what a reused slot looks like.
            let stale = ring.stamp(6).to_vec();
            assert_eq!(expect.check(5, &stale), Err(Bad::Sequence { found: 6 }));
            for at in [block - 1, block / 2, block.min(9) - 1] {
                let mut changed = sent.clone();
                changed[at] ^= 0x10;
                let e = expect.check(5, &changed);
                assert!(matches!(e, Err(Bad::Bytes | Bad::Sequence { .. })), "{at}");
                assert!(exact.check(5, &changed).is_err(), "{block} {at}");
            }
            if block >= 48 {
                // Two words swapped keep the sum but not the running sum.
                let mut swapped = sent.clone();
                let (x, y) = swapped.split_at_mut(40);
                x[8..16].swap_with_slice(&mut y[..8]);
                assert_ne!(swapped, sent);
                assert_eq!(expect.check(5, &swapped), Err(Bad::Bytes), "{block}");
            }
            assert_eq!(
                expect.check(5, &sent[..block - 1]),
                Err(Bad::Short { len: block - 1 })
            );
        }
    }

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

    #[test]
    fn every_method_moves_every_block() {
        for method in [Method::Write, Method::Vmsplice, Method::SpliceNull] {
            for block in [1, 4095, 65537] {
                let o = Options {
                    count: 40,
                    block,
                    method,
                    pipe_size: None,
                    huge_pages: false,
                    ring: None,
                    check: Check::Bytes,
                    busy_poll: block == 4095,
                };
                let r = run(&o).unwrap();
                assert_eq!(r.report.bytes, 40 * block);
                assert_eq!(r.report.verified, method != Method::SpliceNull);
            }
        }
    }
}
