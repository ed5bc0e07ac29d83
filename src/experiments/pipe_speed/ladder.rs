//! The pipe ladder: `pipespeed2t --method ...` from the article's write and
//! read up to a zero-copy pipe, one change per rung, beside the limit that
//! memory sets, measured in the same run: `memcpy` over the same working
//! set (the writer's ring and the reader's buffer, one thread) and a copy
//! of 256 MiB, which no cache holds (the DRAM bandwidth).

use std::hint::black_box;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::chart::Chart;
use crate::results::Header;
use crate::stats::Summary;
use crate::table::{Table, with_range};
use labkit::Result;
use labkit::limits::format_size;
use labkit::measure::Usage;
use serde::{Deserialize, Serialize};

use super::{PipeFacts, loadavg, memcpy, round_order, vector_loop};

/// The ladder's flags, part of `lab run pipe-speed`'s.
#[derive(clap::Args)]
pub(super) struct Flags {
    /// Block sizes for the pipe ladder, e.g. 64k,1M [default: 4k, 16k, 64k,
    /// 256k and 1M; with --full every power of two from 4k to 1M]
    #[arg(long, value_delimiter = ',', value_parser = labkit::limits::size_in(1, 64 << 20))]
    ladder_blocks: Vec<u64>,

    /// MiB each ladder run moves [default: 32; 256 with --full] (--count
    /// sets blocks instead)
    #[arg(long, value_name = "MIB",
          value_parser = clap::value_parser!(u64).range(1..=65536))]
    ladder_mib: Option<u64>,

    /// Add rung 6 to the ladder: rung 4 with both threads spinning on
    /// EAGAIN instead of sleeping (keeps two CPUs busy while it runs)
    #[arg(long)]
    ladder_busy_poll: bool,

    /// Leave the pipe ladder out
    #[arg(long, conflicts_with_all = ["ladder_blocks", "ladder_mib", "ladder_busy_poll"])]
    no_ladder: bool,
}

// ANCHOR: rungs
/// One rung: the flags that make it, and what it takes away.
struct Rung {
    rung: u32,
    method: &'static str,
    /// `F_SETPIPE_SZ` to the largest pipe an unprivileged process may have
    /// (pipe-max-size), at most 1 MiB.
    big_pipe: bool,
    huge_pages: bool,
    /// Spin on EAGAIN instead of sleeping (only with --ladder-busy-poll).
    busy_poll: bool,
    label: &'static str,
    removes: &'static str,
}

const RUNGS: [Rung; 6] = [
    Rung {
        rung: 1,
        method: "write",
        big_pipe: false,
        huge_pages: false,
        busy_poll: false,
        label: "write + read, default pipe",
        removes: "nothing: the article's program, two copies per byte",
    },
    Rung {
        rung: 2,
        method: "write",
        big_pipe: true,
        huge_pages: false,
        busy_poll: false,
        label: "write + read, big pipe",
        removes: "wake-ups: the writer runs ahead further before it must sleep",
    },
    Rung {
        rung: 3,
        method: "vmsplice",
        big_pipe: true,
        huge_pages: false,
        busy_poll: false,
        label: "vmsplice + read",
        removes: "a copy: the pipe takes the writer's pages, the reader copies once",
    },
    Rung {
        rung: 4,
        method: "vmsplice",
        big_pipe: true,
        huge_pages: true,
        busy_poll: false,
        label: "vmsplice + read, huge pages",
        removes: "page work: 512 times fewer pages to pin and map (and TLB misses)",
    },
    Rung {
        rung: 5,
        method: "splice-null",
        big_pipe: true,
        huge_pages: true,
        busy_poll: false,
        label: "vmsplice + splice to /dev/null",
        removes: "the reader's copy, and with it the check: NOT VERIFIED",
    },
    Rung {
        rung: 6,
        method: "vmsplice",
        big_pipe: true,
        huge_pages: true,
        busy_poll: true,
        label: "vmsplice + read, huge pages, busy-polling",
        removes: "the wake-ups: both threads spin on EAGAIN (two CPUs busy)",
    },
];
// ANCHOR_END: rungs

/// What `pipespeed2t --method ... --json` prints (the part used here).
#[derive(Deserialize)]
struct Printed {
    bytes: u64,
    elapsed_s: f64,
    mb_per_s: f64,
    pipe_size: u64,
    verified: bool,
    ring_slots: u64,
    slot_bytes: u64,
    ring_pages: String,
    writer: Cost,
    reader: Cost,
}

#[derive(Clone, Copy, Default, Deserialize, Serialize)]
struct Cost {
    calls: u64,
    minor_faults: u64,
    voluntary_switches: u64,
    involuntary_switches: u64,
    user_s: f64,
    sys_s: f64,
}

impl Cost {
    fn cpu_s(&self) -> f64 {
        self.user_s + self.sys_s
    }
}

#[derive(Serialize)]
struct RunRecord {
    mb_per_s: f64,
    usage: Usage,
    writer: Cost,
    reader: Cost,
}

/// Per block moved, medians of the rounds: where the time goes.
#[derive(Serialize)]
struct PerBlock {
    writer_calls: f64,
    reader_calls: f64,
    /// Minor page faults of both threads' loops (RUSAGE_THREAD).
    minor_faults: f64,
    /// Voluntary + involuntary switches of the whole process (wait4).
    switches: f64,
    /// User + system CPU seconds of the whole process (wait4) per GB moved.
    cpu_s_per_gb: f64,
    /// CPU time of the two loops over the loop's wall time (RUSAGE_THREAD):
    /// 2 if both threads ran all the time, 1 if they took turns.
    cpus_busy: f64,
}

/// One rung at one block size.
#[derive(Serialize)]
pub(super) struct Row {
    rung: u32,
    method: &'static str,
    label: &'static str,
    block: u64,
    count: u64,
    /// Median MB/s (10^6 bytes) of the rounds, as the program timed itself.
    mb_per_s: f64,
    range: Summary,
    /// The reader checked every block's sequence number and checksum.
    verified: bool,
    /// mb_per_s over the same-working-set copy rate (median of the rounds).
    fraction_of_memcpy: f64,
    /// mb_per_s over the DRAM copy rate.
    fraction_of_dram: f64,
    memcpy_mb_per_s: f64,
    /// The writer's ring plus the reader's buffer, as the copy cycles.
    working_set_bytes: u64,
    ring_slots: u64,
    pipe_size: u64,
    ring_pages: String,
    per_block: PerBlock,
    runs: Vec<RunRecord>,
}

#[derive(Serialize)]
struct RungInfo {
    rung: u32,
    method: &'static str,
    label: &'static str,
    removes: &'static str,
    flags: Vec<String>,
    verified: bool,
}

/// The two goals of the ladder, as this run met them or not.
#[derive(Serialize)]
struct Goals {
    /// The best verified row from 64 KiB to 1 MiB, by fraction of memcpy.
    best_verified: Option<Best>,
    /// Did it reach half of the same-working-set memcpy?
    half_of_memcpy: Option<bool>,
    /// Best verified MB/s over rung 1's, at 64 KiB.
    gain_over_rung_1_at_64k: Option<f64>,
    four_times_rung_1: Option<bool>,
}

#[derive(Serialize)]
struct Best {
    rung: u32,
    block: u64,
    mb_per_s: f64,
    fraction_of_memcpy: f64,
}

#[derive(Serialize)]
pub(super) struct Ladder {
    rungs: Vec<RungInfo>,
    blocks: Vec<u64>,
    /// MB/s of one copy of `dram_bytes` (the faster of memcpy and a vector
    /// loop), once per round; None if the memory was not free.
    dram_bytes: u64,
    dram_mb_per_s: Option<Summary>,
    loadavg_before: String,
    loadavg_after: String,
    rows: Vec<Row>,
    goals: Goals,
}

/// 256 MiB: far more than any cache of today's machines.
const DRAM_BYTES: usize = 256 << 20;
const KIB_64: u64 = 64 << 10;

/// Run the ladder, unless `--no-ladder`.
pub(super) fn run_ladder(
    flags: &Flags,
    common: &crate::report::Common,
    count: Option<u64>,
    pipespeed2t: &Path,
    facts: &PipeFacts,
    scratch: &Path,
) -> Result<Option<Ladder>> {
    if flags.no_ladder {
        return Ok(None);
    }
    let blocks: Vec<u64> = match (&flags.ladder_blocks[..], common.full) {
        ([], false) => vec![4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20],
        ([], true) => (12..=20).map(|p| 1u64 << p).collect(),
        (list, _) => list.to_vec(),
    };
    let mib = flags.ladder_mib.unwrap_or(if common.full { 256 } else { 32 });
    let big = facts.max_buffer_bytes.unwrap_or(1 << 20).min(1 << 20);
    let rounds = common.rounds as usize;
    let rungs = if flags.ladder_busy_poll { &RUNGS[..] } else { &RUNGS[..5] };
    let loadavg_before = loadavg();
    let bar = crate::progress::bar(
        (blocks.len() * rungs.len() * rounds) as u64,
        "pipe-speed ladder",
    );
    let dram = dram_rates(rounds);
    let mut rows = Vec::new();
    for &block in &blocks {
        bar.set_message(format!("ladder, {} bytes", format_size(block)));
        let count = count.unwrap_or(((mib << 20) / block).max(16));
        let mut runs: Vec<Vec<(Printed, Usage)>> =
            rungs.iter().map(|_| Vec::new()).collect();
        let mut copies: Vec<Vec<f64>> = rungs.iter().map(|_| Vec::new()).collect();
        let order: Vec<usize> = (0..rungs.len()).collect();
        for round in 0..rounds {
            for i in round_order(&order, round) {
                let mut cmd = Command::new(pipespeed2t);
                cmd.args([count.to_string(), block.to_string(), "--json".into()]);
                cmd.args(flags_of(&rungs[i], big));
                runs[i].push(spawn(cmd, count, block, scratch)?);
                bar.inc(1);
            }
            // The limit, in the same round: each rung's own working set.
            for (i, rung_runs) in runs.iter().enumerate() {
                let p = &rung_runs[round].0;
                copies[i].push(ring_copy_rate(block, p.ring_slots, p.slot_bytes));
            }
        }
        for (i, (rung_runs, copy)) in runs.into_iter().zip(copies).enumerate() {
            rows.push(row(&rungs[i], block, count, rung_runs, &copy, dram));
        }
    }
    bar.finish_and_clear();
    let goals = goals(&rows);
    Ok(Some(Ladder {
        rungs: rungs
            .iter()
            .map(|r| RungInfo {
                rung: r.rung,
                method: r.method,
                label: r.label,
                removes: r.removes,
                flags: flags_of(r, big),
                verified: r.method != "splice-null",
            })
            .collect(),
        blocks,
        dram_bytes: DRAM_BYTES as u64,
        dram_mb_per_s: dram,
        loadavg_before,
        loadavg_after: loadavg(),
        rows,
        goals,
    }))
}

fn flags_of(r: &Rung, big: u64) -> Vec<String> {
    let mut flags = vec!["--method".to_string(), r.method.to_string()];
    if r.big_pipe {
        flags.extend(["--pipe-size".to_string(), big.to_string()]);
    }
    if r.huge_pages {
        flags.push("--huge-pages".into());
    }
    if r.busy_poll {
        flags.push("--busy-poll".into());
    }
    flags
}

fn spawn(
    cmd: Command,
    count: u64,
    block: u64,
    scratch: &Path,
) -> Result<(Printed, Usage)> {
    let what = format!(
        "pipespeed2t {count} {block} {:?}",
        cmd.get_args().skip(3).collect::<Vec<_>>()
    );
    super::run_checked(&what, cmd, count * block, scratch, |p: &Printed| p.bytes)
}

fn row(
    r: &Rung,
    block: u64,
    count: u64,
    runs: Vec<(Printed, Usage)>,
    copies: &[f64],
    dram: Option<Summary>,
) -> Row {
    let median = |f: &dyn Fn(&(Printed, Usage)) -> f64| {
        let v: Vec<f64> = runs.iter().map(f).collect();
        Summary::of(&v).map_or(f64::NAN, |s| s.median)
    };
    let per = |n: u64| n as f64 / count as f64;
    let range =
        Summary::of(&runs.iter().map(|(p, _)| p.mb_per_s).collect::<Vec<_>>())
            .expect("at least one round");
    let copy = Summary::of(copies).map_or(f64::NAN, |s| s.median);
    let bytes = (count * block) as f64;
    let first = &runs[0].0;
    let verified = runs.iter().all(|(p, _)| p.verified) && r.method != "splice-null";
    Row {
        rung: r.rung,
        method: r.method,
        label: r.label,
        block,
        count,
        mb_per_s: range.median,
        verified,
        fraction_of_memcpy: range.median / copy,
        fraction_of_dram: dram.map_or(f64::NAN, |d| range.median / d.median),
        memcpy_mb_per_s: copy,
        working_set_bytes: first.ring_slots * first.slot_bytes + first.slot_bytes,
        ring_slots: first.ring_slots,
        pipe_size: first.pipe_size,
        ring_pages: first.ring_pages.clone(),
        per_block: PerBlock {
            writer_calls: median(&|(p, _)| per(p.writer.calls)),
            reader_calls: median(&|(p, _)| per(p.reader.calls)),
            minor_faults: median(&|(p, _)| {
                per(p.writer.minor_faults + p.reader.minor_faults)
            }),
            switches: median(&|(_, u)| {
                per(u.voluntary_switches + u.involuntary_switches)
            }),
            cpu_s_per_gb: median(&|(_, u)| (u.user_s + u.sys_s) / (bytes / 1e9)),
            cpus_busy: median(&|(p, _)| {
                (p.writer.cpu_s() + p.reader.cpu_s()) / p.elapsed_s
            }),
        },
        range,
        runs: runs
            .into_iter()
            .map(|(p, usage)| RunRecord {
                mb_per_s: p.mb_per_s,
                usage,
                writer: p.writer,
                reader: p.reader,
            })
            .collect(),
    }
}

// ANCHOR: ring_copy
/// The limit for a rung: one thread copies block after block from the
/// writer's ring (`slots` slots of `stride` bytes, page-aligned) into one
/// reader's buffer, cycling over the ring as the pipe run does, about
/// 16 MB or twice round the ring. MB/s of the faster of `memcpy` and a
/// vector loop (see the copy limit above: which is faster depends on the
/// size).
fn ring_copy_rate(block: u64, slots: u64, stride: u64) -> f64 {
    let (block, slots, stride) = (block as usize, slots as usize, stride as usize);
    let mut ring = Aligned::new(slots * stride);
    ring.bytes_mut().fill(0x5a);
    let mut buf = Aligned::new(block);
    let iterations = (16_000_000 / block).max(2 * slots).max(8);
    let mut best = 0.0f64;
    for copy in [memcpy as fn(&mut [u8], &[u8]), vector_loop] {
        let start = Instant::now();
        for i in 0..iterations {
            let at = (i % slots) * stride;
            let (src, dst) = (&ring.bytes()[at..at + block], buf.bytes_mut());
            copy(dst, black_box(src));
            black_box(&mut *dst);
        }
        let rate = (iterations * block) as f64 / start.elapsed().as_secs_f64() / 1e6;
        best = best.max(rate);
    }
    best
}
// ANCHOR_END: ring_copy

/// DRAM bandwidth: MB/s of one copy of 256 MiB into another 256 MiB, the
/// faster of memcpy and the vector loop, once per round (after one copy
/// that makes the pages resident). None if 768 MiB are not available.
fn dram_rates(rounds: usize) -> Option<Summary> {
    let available_kib: u64 = std::fs::read_to_string("/proc/meminfo")
        .ok()?
        .lines()
        .find(|l| l.starts_with("MemAvailable:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    if available_kib < 3 * (DRAM_BYTES as u64 >> 10) {
        return None;
    }
    let src = vec![0x5au8; DRAM_BYTES];
    let mut dst = vec![0u8; DRAM_BYTES];
    memcpy(&mut dst, &src);
    let rates: Vec<f64> = (0..rounds)
        .map(|_| {
            let mut best = 0.0f64;
            for copy in [memcpy as fn(&mut [u8], &[u8]), vector_loop] {
                let start = Instant::now();
                copy(&mut dst, black_box(&src));
                black_box(&mut dst);
                best = best
                    .max(DRAM_BYTES as f64 / start.elapsed().as_secs_f64() / 1e6);
            }
            best
        })
        .collect();
    Summary::of(&rates)
}

/// A page-aligned stretch of a Vec (no unsafe needed).
struct Aligned {
    vec: Vec<u8>,
    at: usize,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let vec = vec![0u8; len + 4096];
        let at = vec.as_ptr().align_offset(4096);
        let mut a = Aligned { vec, at, len };
        a.bytes_mut().fill(1); // resident before the clock
        a
    }

    fn bytes(&self) -> &[u8] {
        &self.vec[self.at..self.at + self.len]
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.vec[self.at..self.at + self.len]
    }
}

fn goals(rows: &[Row]) -> Goals {
    let best = rows
        .iter()
        .filter(|r| r.verified && (KIB_64..=1 << 20).contains(&r.block))
        .max_by(|a, b| a.fraction_of_memcpy.total_cmp(&b.fraction_of_memcpy));
    let at_64k = |pick: &dyn Fn(&Row) -> bool| {
        rows.iter()
            .filter(|r| r.block == KIB_64 && r.verified && pick(r))
            .map(|r| r.mb_per_s)
            .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))))
    };
    let gain = match (at_64k(&|_| true), at_64k(&|r| r.rung == 1)) {
        (Some(best), Some(first)) => Some(best / first),
        _ => None,
    };
    Goals {
        half_of_memcpy: best.map(|b| b.fraction_of_memcpy >= 0.5),
        best_verified: best.map(|b| Best {
            rung: b.rung,
            block: b.block,
            mb_per_s: b.mb_per_s,
            fraction_of_memcpy: b.fraction_of_memcpy,
        }),
        four_times_rung_1: gain.map(|g| g >= 4.0),
        gain_over_rung_1_at_64k: gain,
    }
}

/// The ladder's tables: the climb, the limits, and where the time goes.
fn tables(l: &Ladder) -> Vec<Table> {
    let sizes: Vec<String> = l.blocks.iter().map(|&b| format_size(b)).collect();
    let middle = profile_block(l);
    let gain_header = format!("gain at {}", format_size(middle));
    let at = |rung: u32, block| {
        l.rows.iter().find(|x| x.rung == rung && x.block == block)
    };
    // Two tables, so that each fits the book's column: what each rung
    // takes away, then its rates.
    let mut steps = Table::new(
        "The pipe ladder: what each rung takes away",
        &["rung", "what it takes away", gain_header.as_str()],
    );
    let mut headers = vec!["rung"];
    headers.extend(sizes.iter().map(String::as_str));
    let mut climb = Table::new(
        "The pipe ladder: MB/s by block size (of the same-working-set copy)",
        &headers,
    );
    for r in &l.rungs {
        let gain = match (at(r.rung, middle), at(r.rung.wrapping_sub(1), middle)) {
            (Some(x), Some(before)) => {
                format!("{:.2}x", x.mb_per_s / before.mb_per_s)
            }
            _ => "-".into(),
        };
        let name = format!("{}. {}", r.rung, r.label);
        steps.row(vec![name.clone(), r.removes.to_string(), gain]);
        let mut cells = vec![name];
        for &block in &l.blocks {
            cells.push(at(r.rung, block).map_or("-".into(), |x| {
                format!(
                    "{} ({})",
                    crate::table::sig(x.mb_per_s),
                    crate::table::percent(x.fraction_of_memcpy)
                )
            }));
        }
        climb.row(cells);
    }
    steps.note(
        "Gain: MB/s over the rung above's, at the block size named. Rungs 1 to 4 \
         (and 6) check every block's sequence number and checksum inside the timed \
         loop; rung 5 checks nothing (it moves page references to /dev/null).",
    );
    climb.note(
        "Medians of the rounds, as pipespeed2t timed its own loop (MB = 10^6 bytes); \
         in brackets, the fraction of one thread's copy rate over the same working set \
         (the rung's ring and the reader's buffer) measured in the same round. The \
         fraction of the DRAM copy is in the JSON (fraction_of_dram) and, for the best \
         verified rung, in the limits table below.",
    );
    let g = &l.goals;
    if let Some(b) = &g.best_verified {
        climb.note(format!(
            "Goal, half of memcpy: the best verified rung from 64 KiB to 1 MiB, rung {} at {}, \
             reached {} of the same-working-set copy: {}.",
            b.rung,
            format_size(b.block),
            crate::table::percent(b.fraction_of_memcpy),
            if b.fraction_of_memcpy >= 0.5 { "met" } else { "not met" }
        ));
    }
    if let Some(gain) = g.gain_over_rung_1_at_64k {
        climb.note(format!(
            "Goal, four times rung 1: at 64 KiB the best verified rung moved {gain:.1} times \
             rung 1's bytes per second: {}.",
            if gain >= 4.0 { "met" } else { "not met" }
        ));
    }
    climb.note(format!(
        "Load average (/proc/loadavg) before the ladder: {}; after: {}.",
        l.loadavg_before, l.loadavg_after
    ));

    let mut limits = Table::new(
        "The limits: one thread copying, same working sets, and DRAM",
        &[
            "block",
            "copy, rungs 1-2 (MB/s)",
            "copy, rungs 3-5 (MB/s)",
            "best verified of DRAM",
        ],
    );
    for &block in &l.blocks {
        let at = |rung| l.rows.iter().find(|x| x.rung == rung && x.block == block);
        let best = l
            .rows
            .iter()
            .filter(|x| x.block == block && x.verified)
            .map(|x| x.fraction_of_dram)
            .fold(f64::NAN, f64::max);
        let copy = |rung| {
            at(rung).map_or("-".into(), |x| {
                format!(
                    "{} ({} working set)",
                    crate::table::sig(x.memcpy_mb_per_s),
                    format_size(x.working_set_bytes)
                )
            })
        };
        limits.row(vec![
            format_size(block),
            copy(2),
            copy(3),
            crate::table::percent(best),
        ]);
    }
    limits.note(match l.dram_mb_per_s {
        Some(d) => format!(
            "DRAM: one copy of {} into another, {} MB/s (median, min-max of {} rounds). \
             A verified transfer copies each byte once and reads it once, so one copy is \
             its ceiling.",
            format_size(l.dram_bytes),
            with_range(d.median, d.min, d.max, 0),
            d.n
        ),
        None => "DRAM: not measured (less than 768 MiB of memory available).".into(),
    });

    let profile_block = profile_block(l);
    let mut profile = Table::new(
        format!(
            "Where the time goes, per {} block (medians)",
            format_size(profile_block)
        ),
        &[
            "rung",
            "writer calls",
            "reader calls",
            "page faults",
            "context switches",
            "CPU s per GB",
            "CPUs busy",
        ],
    );
    for x in l.rows.iter().filter(|x| x.block == profile_block) {
        let p = &x.per_block;
        profile.row(vec![
            format!("{}. {}", x.rung, x.label),
            format!("{:.2}", p.writer_calls),
            format!("{:.2}", p.reader_calls),
            format!("{:.3}", p.minor_faults),
            format!("{:.2}", p.switches),
            format!("{:.3}", p.cpu_s_per_gb),
            format!("{:.2}", p.cpus_busy),
        ]);
    }
    profile.note(
        "Calls: the write or vmsplice calls of the writer's loop and the read or splice \
         calls of the reader's, counted by the program; page faults: minor faults of both \
         loops (getrusage RUSAGE_THREAD); switches and CPU s per GB: the whole process \
         (wait4); CPUs busy: CPU time of the two loops over their wall time (2: both \
         threads ran all along; 1 or less: they took turns, or waited for a CPU).",
    );
    vec![steps, climb, limits, profile]
}

/// The block size the gains and the profile are shown at: 64 KiB, or the
/// middle of the list.
fn profile_block(l: &Ladder) -> u64 {
    if l.blocks.contains(&KIB_64) { KIB_64 } else { l.blocks[l.blocks.len() / 2] }
}

/// The ladder's chart: MB/s by block size per rung, and the limits.
pub(super) fn chart(l: &Ladder) -> (String, Chart) {
    let mut chart = Chart {
        log_x: true,
        log_y: true,
        ..Chart::new(
            "The pipe ladder: MB/s by block size",
            "block size (bytes, log scale)",
            "MB/s (median, log scale)",
        )
    };
    for r in &l.rungs {
        let points = l.rows.iter().filter(|x| x.rung == r.rung);
        chart = chart.series(
            &format!("{}. {}", r.rung, r.label),
            points.map(|x| (x.block as f64, x.mb_per_s)).collect(),
        );
    }
    let copy = l.rows.iter().filter(|x| x.rung == 3);
    chart = chart.series(
        "copy, rung 3's working set",
        copy.map(|x| (x.block as f64, x.memcpy_mb_per_s)).collect(),
    );
    if let Some(d) = l.dram_mb_per_s {
        let line = l.blocks.iter().map(|&b| (b as f64, d.median)).collect();
        chart = chart.series("DRAM copy", line);
    }
    ("ladder".to_string(), chart)
}

/// Write `ladder.md` (the book includes it) and print it, unless --json.
pub(super) fn publish(
    l: &Ladder,
    header: &Header,
    json: bool,
    out: &Path,
) -> Result<()> {
    let mut md = format!(
        "Measured with `{}` on {} ({}), commit {}.\n",
        header.command,
        header.machine.summary(),
        header.machine.date,
        header.machine.commit
    );
    for table in tables(l) {
        md.push('\n');
        md.push_str(&table.render());
    }
    crate::results::write_file(&out.join("ladder.md"), &md)?;
    if json { Ok(()) } else { labkit::error::print(&md) }
}
