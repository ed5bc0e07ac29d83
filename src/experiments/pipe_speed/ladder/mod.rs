//! The pipe ladder: `pipespeed2t --method ...` from the article's write and
//! read up to a zero-copy pipe, one change per rung, beside the limit that
//! memory sets, measured in the same run by the `copylimit` program: one
//! copy over the same working set (the writer's ring and the reader's
//! buffer) and a copy of 256 MiB, which no cache holds (the DRAM
//! bandwidth).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::stats::{Summary, round_order};
use labkit::Result;
use labkit::limits::format_size;
use labkit::measure::Usage;
use pipespeed2t::ladder::{Cost, LadderReport};
use serde::Serialize;

use super::PipeFacts;
use crate::machine::loadavg;

mod tables;

pub(super) use tables::{chart, markdown};

/// The ladder's flags, part of `lab run pipe-speed`'s.
#[derive(clap::Args, Clone)]
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
        removes: "page lookups: one TLB entry per 2 MiB (pipe buffers stay 4 KiB)",
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

#[derive(Serialize, schemars::JsonSchema)]
struct RunRecord {
    mb_per_s: f64,
    usage: Usage,
    writer: Cost,
    reader: Cost,
}

/// Per block moved, medians of the rounds: where the time goes.
#[derive(Serialize, schemars::JsonSchema)]
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
#[derive(Serialize, schemars::JsonSchema)]
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

#[derive(Serialize, schemars::JsonSchema)]
struct RungInfo {
    rung: u32,
    method: &'static str,
    label: &'static str,
    removes: &'static str,
    flags: Vec<String>,
    verified: bool,
}

/// The two goals of the ladder, as this run met them or not.
#[derive(Serialize, schemars::JsonSchema)]
struct Goals {
    /// The best verified row from 64 KiB to 1 MiB, by fraction of memcpy.
    best_verified: Option<Best>,
    /// Did it reach half of the same-working-set memcpy?
    half_of_memcpy: Option<bool>,
    /// Best verified MB/s over rung 1's, at 64 KiB.
    gain_over_rung_1_at_64k: Option<f64>,
    four_times_rung_1: Option<bool>,
}

#[derive(Serialize, schemars::JsonSchema)]
struct Best {
    rung: u32,
    block: u64,
    mb_per_s: f64,
    fraction_of_memcpy: f64,
}

#[derive(Serialize, schemars::JsonSchema)]
pub(super) struct Ladder {
    rungs: Vec<RungInfo>,
    blocks: Vec<u64>,
    /// MiB each run moves (unless --count set blocks).
    mib: u64,
    /// MB/s of one copy of `dram_bytes` (the faster of memcpy and a vector
    /// loop), once per round; None if the memory was not free.
    dram_bytes: u64,
    dram_mb_per_s: Option<Summary>,
    loadavg_before: String,
    loadavg_after: String,
    rows: Vec<Row>,
    goals: Goals,
}

impl Ladder {
    /// The settings it ran with, for the results header: its blocks and
    /// how much each run moved.
    pub(super) fn record(&self, settings: &mut crate::results::Settings) {
        let blocks: Vec<String> =
            self.blocks.iter().map(|&b| format_size(b)).collect();
        settings.used("ladder blocks", blocks.join(","));
        settings.used("ladder MiB per run", self.mib);
    }
}

/// 256 MiB: far more than any cache of today's machines.
const DRAM_BYTES: u64 = 256 << 20;
const KIB_64: u64 = 64 << 10;

/// Run the ladder, unless `--no-ladder`.
pub(super) fn run_ladder(
    flags: &Flags,
    common: &crate::report::Common,
    count: Option<u64>,
    bins: &[PathBuf],
    facts: &PipeFacts,
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
    let (pipespeed2t, copylimit) = (&bins[0], &bins[1]);
    let dram = dram_rates(copylimit, rounds)?;
    let mut rows = Vec::new();
    for &block in &blocks {
        bar.set_message(format!("ladder, {} bytes", format_size(block)));
        let count = count.unwrap_or(((mib << 20) / block).max(16));
        let mut runs: Vec<Vec<(LadderReport, Usage)>> =
            rungs.iter().map(|_| Vec::new()).collect();
        let mut copies: Vec<Vec<f64>> = rungs.iter().map(|_| Vec::new()).collect();
        for round in 0..rounds {
            for i in round_order(rungs.len(), round) {
                let mut cmd = Command::new(pipespeed2t);
                cmd.args([count.to_string(), block.to_string(), "--json".into()]);
                cmd.args(flags_of(&rungs[i], big));
                runs[i].push(spawn(cmd, count, block)?);
                bar.inc(1);
            }
            // The limit, in the same round: each rung's own working set.
            for (i, rung_runs) in runs.iter().enumerate() {
                let ring = ["--copies", "1", "--ring"].map(String::from);
                let slots = rung_runs[round].0.ring_slots.to_string();
                let flags = [&ring[..], &[slots]].concat();
                let copy = super::run::copy_limit(copylimit, block, &flags)?;
                copies[i].push(copy.mb_per_s);
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
        mib,
        dram_bytes: DRAM_BYTES,
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

fn spawn(cmd: Command, count: u64, block: u64) -> Result<(LadderReport, Usage)> {
    let what = format!(
        "pipespeed2t {count} {block} {:?}",
        cmd.get_args().skip(3).collect::<Vec<_>>()
    );
    let (report, usage) = crate::bins::run_json::<LadderReport>(cmd, &what)?;
    super::run::moved(&what, report.report.bytes, count * block)?;
    Ok((report, usage))
}

fn row(
    r: &Rung,
    block: u64,
    count: u64,
    runs: Vec<(LadderReport, Usage)>,
    copies: &[f64],
    dram: Option<Summary>,
) -> Row {
    let median = |f: &dyn Fn(&(LadderReport, Usage)) -> f64| {
        let v: Vec<f64> = runs.iter().map(f).collect();
        Summary::of(&v).map_or(f64::NAN, |s| s.median)
    };
    let per = |n: u64| n as f64 / count as f64;
    let range = Summary::of_rounds(runs.iter().map(|(p, _)| p.report.mb_per_s));
    let copy = Summary::of(copies).map_or(f64::NAN, |s| s.median);
    let bytes = (count * block) as f64;
    let first = &runs[0].0;
    let verified =
        runs.iter().all(|(p, _)| p.report.verified) && r.method != "splice-null";
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
        pipe_size: first.report.pipe_size.unwrap_or(0),
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
                (cpu_s(&p.writer) + cpu_s(&p.reader)) / p.report.elapsed_s
            }),
        },
        range,
        runs: runs
            .into_iter()
            .map(|(p, usage)| RunRecord {
                mb_per_s: p.report.mb_per_s,
                usage,
                writer: p.writer,
                reader: p.reader,
            })
            .collect(),
    }
}

/// User + system CPU seconds of one thread's loop.
fn cpu_s(c: &Cost) -> f64 {
    c.user_s + c.sys_s
}

/// DRAM bandwidth: MB/s of one copy of 256 MiB into another (`copylimit
/// 256M --copies 1 --iterations 1`, every page written first), once per
/// round. None if 768 MiB are not available.
fn dram_rates(copylimit: &Path, rounds: usize) -> Result<Option<Summary>> {
    let available = labkit::memory::mem_available();
    if available.is_none_or(|bytes| bytes < 3 * DRAM_BYTES) {
        return Ok(None);
    }
    let flags = ["--copies", "1", "--iterations", "1"].map(String::from);
    let mut rates = Vec::new();
    for _ in 0..rounds {
        let copy = super::run::copy_limit(copylimit, DRAM_BYTES, &flags)?;
        rates.push(copy.mb_per_s);
    }
    Ok(Summary::of(&rates))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Rung `rung` at `block` bytes: `mb` MB/s against a copy rate `copy`.
    fn row(rung: usize, block: u64, mb: f64, copy: f64) -> Row {
        let r = &RUNGS[rung - 1];
        Row {
            rung: r.rung,
            method: r.method,
            label: r.label,
            block,
            count: 10,
            mb_per_s: mb,
            range: Summary::of(&[mb]).unwrap(),
            verified: r.method != "splice-null",
            fraction_of_memcpy: mb / copy,
            fraction_of_dram: mb / 10_000.0,
            memcpy_mb_per_s: copy,
            working_set_bytes: 2 * block,
            ring_slots: 1,
            pipe_size: 65536,
            ring_pages: "4 KiB pages".into(),
            per_block: PerBlock {
                writer_calls: 1.0,
                reader_calls: 2.0,
                minor_faults: 0.0,
                switches: 1.5,
                cpu_s_per_gb: 0.25,
                cpus_busy: 1.2,
            },
            runs: Vec::new(),
        }
    }

    fn ladder(rows: Vec<Row>) -> Ladder {
        let goals = goals(&rows);
        Ladder {
            rungs: [1, 3, 5]
                .map(|k| {
                    let r = &RUNGS[k - 1];
                    RungInfo {
                        rung: r.rung,
                        method: r.method,
                        label: r.label,
                        removes: r.removes,
                        flags: flags_of(r, 1 << 20),
                        verified: r.method != "splice-null",
                    }
                })
                .into(),
            blocks: vec![4096, KIB_64],
            mib: 32,
            dram_bytes: DRAM_BYTES,
            dram_mb_per_s: Summary::of(&[10_000.0]),
            loadavg_before: "0".into(),
            loadavg_after: "0".into(),
            rows,
            goals,
        }
    }

    #[test]
    fn the_goals_take_the_best_verified_rung_and_the_gain_at_64k() {
        let l = ladder(vec![
            row(1, KIB_64, 1000.0, 8000.0),
            row(3, KIB_64, 5000.0, 8000.0),
            // Unverified, so faster but never the best.
            row(5, KIB_64, 9000.0, 8000.0),
        ]);
        let best = l.goals.best_verified.as_ref().unwrap();
        assert_eq!((best.rung, best.block), (3, KIB_64));
        assert_eq!(l.goals.half_of_memcpy, Some(true));
        assert_eq!(l.goals.gain_over_rung_1_at_64k, Some(5.0));
        assert_eq!(l.goals.four_times_rung_1, Some(true));
    }

    #[test]
    fn the_tables_and_the_chart_show_each_rung_at_each_block() {
        let l = ladder(vec![
            row(1, 4096, 500.0, 1000.0),
            row(1, KIB_64, 1000.0, 8000.0),
            row(3, KIB_64, 5000.0, 8000.0),
        ]);
        let t = tables::tables(&l);
        // What each rung takes away, and its gain over the rung above at
        // 64 KiB: rung 3's is "-" as rung 2 did not run.
        assert_eq!(t[0].rows[0][2], "-");
        assert_eq!(t[0].rows[1][2], "-");
        // The climb: rung 1 at both sizes, rung 3 only at 64 KiB.
        assert_eq!(t[1].rows[0][1..], ["500 (50%)", "1000 (12%)"]);
        assert_eq!(t[1].rows[1][1..], ["-", "5000 (62%)"]);
        // The limits: the best verified of DRAM at 64 KiB is rung 3's.
        assert_eq!(t[2].rows[1][3], "50%");
        // Where the time goes, at 64 KiB: two rungs ran there.
        assert_eq!(t[3].rows.len(), 2);
        assert_eq!(
            t[3].rows[0][1..],
            ["1.00", "2.00", "0.000", "1.50", "0.250", "1.20"]
        );
        let (name, chart) = chart(&l);
        assert_eq!(name, "ladder");
        assert_eq!(chart.series[0].points, [(4096.0, 500.0), (65536.0, 1000.0)]);
        let dram = chart.series.last().unwrap();
        assert_eq!(dram.label, "DRAM copy");
        assert_eq!(dram.points, [(4096.0, 10_000.0), (65536.0, 10_000.0)]);
    }
}
