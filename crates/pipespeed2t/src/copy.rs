//! `copylimit`: the limit that memory copying sets for a pipe, measured
//! as a program of its own so that the runner spawns it like the pipe
//! programs, instead of timing copies in its own process.
//!
//! A pipe copies every byte twice (`write` into the pipe's pages, `read`
//! out of them): `--copies 2` copies each block from a source into a
//! buffer and on into a destination. A `vmsplice` pipe copies once, out of
//! the writer's ring: `--copies 1 --ring SLOTS` copies block after block
//! from a ring of `SLOTS` page-aligned slots into one buffer, cycling over
//! the ring as the pipe run does. A block far larger than any cache
//! (`copylimit 256M --copies 1 --iterations 1`) gives the DRAM bandwidth.
//!
//! Every buffer starts on a page boundary, as the pipe programs' do
//! ([`PageAligned`] says why that matters), and every page is written
//! before the clock starts. Two ways of copying are timed, the C library's
//! `memcpy` and a loop of 64-byte moves; the limit is the faster (which
//! one wins depends on the size and the machine).

use std::ffi::OsString;
use std::hint::black_box;
use std::time::Instant;

use clap::Parser;
use labkit::error::{Error, Result, describe_errno};
use labkit::limits::size_in;
use labkit::memory::{PAGE, PageAligned};
use serde::{Deserialize, Serialize};

/// One measurement's settings: what [`run`] takes, made from the command
/// line by [`Options::settings`].
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    pub block: u64,
    /// 2: source, buffer, destination (a pipe); 1: ring to buffer.
    pub copies: u32,
    /// Slots in the source ring (1: one block).
    pub ring: u64,
    /// Blocks per timing [default: [`default_iterations`]].
    pub iterations: Option<u64>,
}

/// The limit memory copying sets for a pipe: MB/s (10^6 bytes) of blocks
/// of BYTES copied twice (source, buffer, destination: what write and read
/// do) or once from a ring of page-aligned slots (what a vmsplice pipe's
/// reader does), with the C library's memcpy and with a loop of 64-byte
/// moves; the limit is the faster. Exit status: 0 ok, 1 failed, 2 bad usage.
#[derive(Parser, Clone, Debug, PartialEq)]
#[command(version)]
pub struct Options {
    /// Bytes per block, e.g. 4096, 64k, 256M
    #[arg(value_parser = size_in(1, 1 << 32))]
    pub bytes: u64,

    /// Copies of each block: 2 (a pipe's write and read) or 1
    #[arg(long, default_value_t = 2,
          value_parser = clap::value_parser!(u32).range(1..=2))]
    pub copies: u32,

    /// Slots in the source ring, each starting on a page [default: 1]
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub ring: Option<u64>,

    /// Blocks per timing [default: about 8 MB copied for 2 copies (8 to
    /// 20,000 blocks); 16 MB or twice round the ring for 1]
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub iterations: Option<u64>,

    /// Print one JSON object instead of the line
    #[arg(long)]
    pub json: bool,
}

impl Options {
    /// `copylimit BYTES`: two copies, one slot, the default count.
    pub fn new(bytes: u64) -> Options {
        Options { bytes, copies: 2, ring: None, iterations: None, json: false }
    }

    /// What [`run`] measures.
    pub fn settings(&self) -> Settings {
        Settings {
            block: self.bytes,
            copies: self.copies,
            ring: self.ring.unwrap_or(1),
            iterations: self.iterations,
        }
    }

    /// The program's command line for these options, as a caller (the
    /// runner) starts it: `BYTES [--json] [--copies C] [--ring SLOTS]
    /// [--iterations N]`, in digits; `--copies` only when not 2, `--ring`
    /// whenever set (`--ring 1` too).
    pub fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![self.bytes.to_string().into()];
        if self.json {
            args.push("--json".into());
        }
        let copies = (self.copies != 2).then_some(u64::from(self.copies));
        for (name, value) in [
            ("--copies", copies),
            ("--ring", self.ring),
            ("--iterations", self.iterations),
        ] {
            if let Some(value) = value {
                args.extend([name.into(), value.to_string().into()]);
            }
        }
        args
    }
}

/// What `copylimit --json` prints; the runner reads it as this type.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CopyReport {
    pub program: String,
    pub block_bytes: u64,
    pub copies: u32,
    pub ring_slots: u64,
    /// Bytes from one slot's start to the next's (a page multiple when
    /// the ring has more than one slot).
    pub slot_bytes: u64,
    pub iterations: u64,
    /// Blocks moved per second, in MB (10^6 bytes), with each way.
    pub memcpy_mb_per_s: f64,
    pub vector_loop_mb_per_s: f64,
    /// The faster of the two: the limit.
    pub mb_per_s: f64,
}

impl CopyReport {
    pub fn text(&self) -> String {
        format!(
            "{} x {} bytes, {} cop{} each: {:.0} MB/s (memcpy {:.0}, vector loop {:.0})\n",
            self.iterations,
            self.block_bytes,
            self.copies,
            if self.copies == 1 { "y" } else { "ies" },
            self.mb_per_s,
            self.memcpy_mb_per_s,
            self.vector_loop_mb_per_s
        )
    }
}

/// Enough blocks for a steady rate: about 8 MB copied for two copies (at
/// least 8 blocks, at most 20,000), about 16 MB or twice round the ring
/// for one.
pub fn default_iterations(block: u64, copies: u32, ring: u64) -> u64 {
    if copies == 2 {
        (4_000_000 / block).clamp(8, 20_000)
    } else {
        (16_000_000 / block).max(2 * ring).max(8)
    }
}

/// The C library's `memcpy` (what `copy_from_slice` calls).
pub fn memcpy(dst: &mut [u8], src: &[u8]) {
    dst.copy_from_slice(src);
}

/// A plain loop of 64-byte moves that the compiler turns into vector loads
/// and stores: no choice of strategy by size, unlike `memcpy`.
pub fn vector_loop(dst: &mut [u8], src: &[u8]) {
    let mut d = dst.chunks_exact_mut(64);
    let mut s = src.chunks_exact(64);
    for (d, s) in (&mut d).zip(&mut s) {
        d.copy_from_slice(s);
    }
    d.into_remainder().copy_from_slice(s.remainder());
}

fn buffer(len: usize) -> Result<PageAligned> {
    let mut b = PageAligned::try_zeroed(len).map_err(|errno| {
        Error::failed(format!(
            "cannot allocate {}: {}",
            labkit::limits::format_size(len as u64),
            describe_errno(errno)
        ))
    })?;
    b.fill(0x5a); // every page resident before the clock
    Ok(b)
}

/// Measure: MB/s of blocks moved with each way of copying.
pub fn run(o: &Settings) -> Result<CopyReport> {
    if !matches!(o.copies, 1 | 2) {
        return Err(Error::usage("--copies is 1 or 2"));
    }
    if o.ring == 0 || o.iterations == Some(0) {
        return Err(Error::usage("--ring and --iterations are at least 1"));
    }
    let block = usize::try_from(o.block)
        .map_err(|_| Error::usage(format!("{} bytes is too large", o.block)))?;
    let stride = if o.ring > 1 { block.div_ceil(PAGE) * PAGE } else { block };
    let slots = o.ring as usize;
    let ring_len = slots
        .checked_mul(stride)
        .ok_or_else(|| Error::usage("the ring is too large"))?;
    let ring = buffer(ring_len)?;
    let mut mid = buffer(block)?;
    let mut dst = buffer(if o.copies == 2 { block } else { 0 })?;
    let iterations = o
        .iterations
        .unwrap_or_else(|| default_iterations(o.block, o.copies, o.ring));
    let mut rate = |copy: fn(&mut [u8], &[u8])| {
        let start = Instant::now();
        // ANCHOR: copy_rate
        for i in 0..iterations as usize {
            let at = (i % slots) * stride;
            copy(&mut mid, black_box(&ring[at..at + block]));
            if o.copies == 2 {
                copy(&mut dst, black_box(&mid));
            }
            black_box(&mut mid);
        }
        // ANCHOR_END: copy_rate
        (iterations as f64 * block as f64) / start.elapsed().as_secs_f64() / 1e6
    };
    let memcpy_mb_per_s = rate(memcpy);
    let vector_loop_mb_per_s = rate(vector_loop);
    Ok(CopyReport {
        program: "copylimit".into(),
        block_bytes: o.block,
        copies: o.copies,
        ring_slots: o.ring,
        slot_bytes: stride as u64,
        iterations,
        memcpy_mb_per_s,
        vector_loop_mb_per_s,
        mb_per_s: memcpy_mb_per_s.max(vector_loop_mb_per_s),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_ways_copy_every_byte() {
        for len in [0, 1, 63, 64, 65, 4096 + 7] {
            let src: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            for copy in [memcpy as fn(&mut [u8], &[u8]), vector_loop] {
                let mut dst = vec![0u8; len];
                copy(&mut dst, &src);
                assert_eq!(dst, src, "{len}");
            }
        }
    }

    #[test]
    fn the_report_names_what_was_copied() {
        let o = Settings { block: 5000, copies: 1, ring: 3, iterations: Some(7) };
        let r = run(&o).unwrap();
        assert_eq!((r.slot_bytes, r.ring_slots, r.iterations), (8192, 3, 7));
        assert_eq!(r.mb_per_s, r.memcpy_mb_per_s.max(r.vector_loop_mb_per_s));
        let o = Settings { copies: 3, ..o };
        assert_eq!(run(&o).unwrap_err().code, labkit::error::ExitCode::Usage);
    }

    #[test]
    fn options_say_the_runners_command_lines() {
        let o = Options { json: true, ..Options::new(4096) };
        assert_eq!(labtest::words(o.args()), ["4096", "--json"]);
        let dram = Options { copies: 1, iterations: Some(1), ..o.clone() };
        assert_eq!(
            labtest::words(dram.args()),
            ["4096", "--json", "--copies", "1", "--iterations", "1"]
        );
        let ring = Options { copies: 1, ring: Some(1), ..o };
        assert_eq!(
            labtest::words(ring.args()),
            ["4096", "--json", "--copies", "1", "--ring", "1"]
        );
    }

    #[test]
    fn options_parse_back_from_their_args() {
        let least = labtest::parse::<Options>("copylimit", &["1"]).unwrap();
        assert_eq!(least, Options::new(1));
        for o in [
            least,
            Options { json: true, ..Options::new(256 << 20) },
            Options {
                copies: 1,
                ring: Some(1),
                json: true,
                ..Options::new(1 << 32)
            },
            Options {
                copies: 2,
                ring: Some(1_000_000),
                iterations: Some(8),
                ..Options::new(5)
            },
            Options { copies: 1, iterations: Some(100_000_000), ..Options::new(7) },
        ] {
            labtest::parses_back("copylimit", &o, o.args());
        }
        let s = Options::new(64).settings();
        assert_eq!((s.block, s.copies, s.ring, s.iterations), (64, 2, 1, None));
    }

    #[test]
    fn the_counts_follow_the_old_rules() {
        assert_eq!(default_iterations(1, 2, 1), 20_000);
        assert_eq!(default_iterations(4096, 2, 1), 976);
        assert_eq!(default_iterations(1 << 20, 2, 1), 8);
        assert_eq!(default_iterations(1 << 20, 1, 18), 36);
        assert_eq!(default_iterations(4096, 1, 18), 3906);
    }
}
