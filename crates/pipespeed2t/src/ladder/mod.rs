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
use std::time::Instant;

use labkit::error::{Error, Result, describe_errno};
use labkit::memory::PAGE;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use pipespeed2::{MB, Report, grow_pipe, pipe_size};
use serde::{Deserialize, Serialize};

use crate::ring::Mapping;

mod rungs;
mod stream;

pub use rungs::Cost;
use rungs::{
    receive_by_read, receive_by_splice, send_by_vmsplice, send_by_write,
    thread_usage,
};
use stream::{Bad, Expect, Ring};

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
    /// Its `--method` spelling: `write`, `vmsplice`, `splice-null`.
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

impl Check {
    /// Its `--check` spelling: `checksum`, `bytes`.
    pub fn name(self) -> &'static str {
        match self {
            Check::Checksum => "checksum",
            Check::Bytes => "bytes",
        }
    }
}

/// One ladder run's settings: what [`run`] takes, made from the command
/// line by [`crate::Options::ladder`].
#[derive(Clone, Debug)]
pub struct Settings {
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
fn min_ring(pipe_bytes: u64, block: u64) -> u64 {
    let page = PAGE as u64;
    let refs = (pipe_bytes / page).max(1);
    let per_block = block.div_ceil(page);
    refs.div_ceil(per_block) + 2
}
// ANCHOR_END: min_ring

/// A ladder run as `--json` prints it: the program's usual report and how
/// the bytes went. The runner reads it back as this type.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
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

/// Send `count` blocks from this thread to a reader thread by `method`, and
/// report the rate.
pub fn run(o: &Settings) -> Result<LadderReport> {
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
    if let Some(free) =
        labkit::memory::mem_available().filter(|&free| need_bytes > free / 2)
    {
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
            cpus: None,
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
    fn every_method_moves_every_block() {
        for method in [Method::Write, Method::Vmsplice, Method::SpliceNull] {
            for block in [1, 4095, 65537] {
                let o = Settings {
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
