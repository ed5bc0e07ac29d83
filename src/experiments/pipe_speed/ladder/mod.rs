//! The pipe ladder: `pipespeed2t --method ...` from the article's write and
//! read up to a zero-copy pipe, one change per rung, beside the limit that
//! memory sets, measured in the same run by the `copylimit` program: one
//! copy over the same working set (the writer's ring and the reader's
//! buffer), right after each run of a rung, and a copy of 256 MiB, which
//! no cache holds (the DRAM bandwidth). The rungs are the conditions of
//! each block size; the two threads run unpinned.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use crate::engine::{Engine, Observations, Observed, Setting, setting};
use crate::stats::Summary;
use labkit::Result;
use labkit::limits::format_size;
use labkit::measure::Usage;
use pipespeed2t::copy;
use pipespeed2t::ladder::{Cost, LadderReport, Method};
use pipespeed2t::{Options, Size};
use serde::Serialize;

use super::{Args, PipeFacts, copy_limit, moved};
use crate::machine::loadavg;
use crate::results::shell_words;

mod tables;

pub(super) use tables::{chart, tables};

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
    method: Method,
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
        method: Method::Write,
        big_pipe: false,
        huge_pages: false,
        busy_poll: false,
        label: "write + read, default pipe",
        removes: "nothing: the article's program, two copies per byte",
    },
    Rung {
        rung: 2,
        method: Method::Write,
        big_pipe: true,
        huge_pages: false,
        busy_poll: false,
        label: "write + read, big pipe",
        removes: "wake-ups: the writer runs ahead further before it must sleep",
    },
    Rung {
        rung: 3,
        method: Method::Vmsplice,
        big_pipe: true,
        huge_pages: false,
        busy_poll: false,
        label: "vmsplice + read",
        removes: "a copy: the pipe takes the writer's pages, the reader copies once",
    },
    Rung {
        rung: 4,
        method: Method::Vmsplice,
        big_pipe: true,
        huge_pages: true,
        busy_poll: false,
        label: "vmsplice + read, huge pages",
        removes: "page lookups: one TLB entry per 2 MiB (pipe buffers stay 4 KiB)",
    },
    Rung {
        rung: 5,
        method: Method::SpliceNull,
        big_pipe: true,
        huge_pages: true,
        busy_poll: false,
        label: "vmsplice + splice to /dev/null",
        removes: "the reader's copy, and with it the check: NOT VERIFIED",
    },
    Rung {
        rung: 6,
        method: Method::Vmsplice,
        big_pipe: true,
        huge_pages: true,
        busy_poll: true,
        label: "vmsplice + read, huge pages, busy-polling",
        removes: "the wake-ups: both threads spin on EAGAIN (two CPUs busy)",
    },
];
// ANCHOR_END: rungs

/// One run of a rung, and the copy over its working set run right after.
struct RungRun {
    report: LadderReport,
    usage: Usage,
    copy_mb_per_s: f64,
}

impl Observed for RungRun {
    /// The rate and its limit, then per block moved: where the time goes.
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        let (r, u) = (&self.report, &self.usage);
        let per = |n: u64| n as f64 / r.report.count as f64;
        let cpu = |c: &Cost| c.user_s + c.sys_s;
        vec![
            ("mb_per_s", r.report.mb_per_s),
            ("copy_mb_per_s", self.copy_mb_per_s),
            // The reader checked every block's sequence number and checksum.
            ("verified", f64::from(u8::from(r.report.verified))),
            ("writer_calls_per_block", per(r.writer.calls)),
            ("reader_calls_per_block", per(r.reader.calls)),
            // Minor page faults of both threads' loops (RUSAGE_THREAD).
            (
                "minor_faults_per_block",
                per(r.writer.minor_faults + r.reader.minor_faults),
            ),
            // Voluntary + involuntary switches of the whole process (wait4).
            (
                "switches_per_block",
                per(u.voluntary_switches + u.involuntary_switches),
            ),
            // User + system CPU seconds of the whole process (wait4).
            ("cpu_s_per_gb", (u.user_s + u.sys_s) / (r.report.bytes as f64 / 1e9)),
            // CPU time of the two loops over the loop's wall time: 2 if both
            // threads ran all the time, 1 if they took turns.
            ("cpus_busy", (cpu(&r.writer) + cpu(&r.reader)) / r.report.elapsed_s),
            ("ring_slots", r.ring_slots as f64),
            // The writer's ring plus the reader's buffer, as the copy cycles.
            ("working_set_bytes", ((r.ring_slots + 1) * r.slot_bytes) as f64),
        ]
    }
}

#[derive(Serialize, schemars::JsonSchema)]
struct RungInfo {
    rung: u32,
    method: &'static str,
    label: &'static str,
    removes: &'static str,
    flags: Vec<String>,
    verified: bool,
    /// What backed the ring and the reader's buffer, as the program said.
    ring_pages: Vec<String>,
}

impl RungInfo {
    /// "3. vmsplice + read": its number and label, as the tables and the
    /// chart name it.
    fn title(&self) -> String {
        format!("{}. {}", self.rung, self.label)
    }

    /// `rung` as it ran: with the big pipe `big` bytes, its ring on
    /// `ring_pages`.
    fn new(r: &Rung, big: u64, ring_pages: Vec<String>) -> RungInfo {
        let (rung, method, label, removes) =
            (r.rung, r.method.name(), r.label, r.removes);
        let (flags, verified) = (flags_of(r, big), r.method != Method::SpliceNull);
        RungInfo { rung, method, label, removes, flags, verified, ring_pages }
    }
}

/// The two goals of the ladder, as this run met them or not.
#[derive(Serialize, schemars::JsonSchema)]
struct Goals {
    /// The best verified rung from 64 KiB to 1 MiB, by fraction of memcpy.
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

/// The ladder's own facts; its rounds are the observations (`part`
/// ladder, each rung a condition `rung-N`, the DRAM copy `dram-copy`).
#[derive(Serialize, schemars::JsonSchema)]
pub(super) struct Ladder {
    rungs: Vec<RungInfo>,
    blocks: Vec<u64>,
    /// MiB each run moves (unless --count set blocks).
    mib: u64,
    dram_bytes: u64,
    loadavg_before: String,
    loadavg_after: String,
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
const DRAM: &str = "dram-copy";
const KIB_64: u64 = 64 << 10;

/// The ladder's setting at `block` bytes (a query: a measured one has its
/// count).
fn at(block: u64) -> Setting {
    setting([("part", "ladder".into()), ("block_bytes", block.into())])
}

fn name(rung: u32) -> String {
    format!("rung-{rung}")
}

/// Run the ladder, unless `--no-ladder`.
pub(super) fn run_ladder(
    args: &Args,
    bins: &[PathBuf],
    facts: &PipeFacts,
    engine: &mut Engine,
) -> Result<Option<Ladder>> {
    let (flags, full) = (&args.ladder, args.common.full);
    if flags.no_ladder {
        return Ok(None);
    }
    let blocks: Vec<u64> = match (&flags.ladder_blocks[..], full) {
        ([], false) => vec![4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20],
        ([], true) => (12..=20).map(|p| 1u64 << p).collect(),
        (list, _) => list.to_vec(),
    };
    let mib = flags.ladder_mib.unwrap_or(if full { 256 } else { 32 });
    let big = facts.max_buffer_bytes.unwrap_or(1 << 20).min(1 << 20);
    let rungs = if flags.ladder_busy_poll { &RUNGS[..] } else { &RUNGS[..5] };
    let names: Vec<String> = rungs.iter().map(|r| name(r.rung)).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let loadavg_before = loadavg();
    let (pipespeed2t, copylimit) = (&bins[0], &bins[1]);
    // The DRAM copy needs three times its buffer free.
    let dram = labkit::memory::mem_available().is_some_and(|b| b >= 3 * DRAM_BYTES);
    let runs = blocks.len() * engine.runs_for(rungs.len());
    engine.progress(
        runs + usize::from(dram) * engine.runs_for(1),
        "pipe-speed ladder",
    );
    if dram {
        // One copy of 256 MiB into another, every page written first, once
        // per round.
        let once = dram_copy();
        engine
            .measure(&at(DRAM_BYTES), &[DRAM], |_| copy_limit(copylimit, &once))?;
    }
    let mut pages: Vec<Vec<String>> = rungs.iter().map(|_| Vec::new()).collect();
    for &block in &blocks {
        let count = args.count.unwrap_or(((mib << 20) / block).max(16));
        let mut here = at(block);
        here.insert("count".into(), count.into());
        here.insert("placement".into(), "unpinned".into());
        let runs = engine.measure(&here, &names, |i| {
            let o = options_of(&rungs[i], big, count, block);
            let mut cmd = Command::new(pipespeed2t);
            cmd.args(Options { json: true, ..o.clone() }.args());
            let what = format!("pipespeed2t {}", shell_words(o.args()));
            let (report, usage) = crate::bins::run_json::<LadderReport>(cmd, &what)?;
            moved(&what, report.report.bytes, count * block)?;
            // The limit, in the same round: the rung's own working set.
            let copy = copy_limit(copylimit, &ring_copy(block, report.ring_slots))?;
            Ok(RungRun { report, usage, copy_mb_per_s: copy.mb_per_s })
        })?;
        for (seen, runs) in pages.iter_mut().zip(runs) {
            for r in runs {
                if !seen.contains(&r.report.ring_pages) {
                    seen.push(r.report.ring_pages);
                }
            }
        }
    }
    let rungs: Vec<RungInfo> = rungs
        .iter()
        .zip(pages)
        .map(|(r, pages)| RungInfo::new(r, big, pages))
        .collect();
    let goals = goals(&rows(&rungs, &blocks, engine.observations()));
    Ok(Some(Ladder {
        rungs,
        blocks,
        mib,
        dram_bytes: DRAM_BYTES,
        loadavg_before,
        loadavg_after: loadavg(),
        goals,
    }))
}

/// The DRAM copy: one copy of 256 MiB into another, once.
fn dram_copy() -> copy::Options {
    copy::Options {
        copies: 1,
        iterations: Some(1),
        ..copy::Options::new(DRAM_BYTES)
    }
}

/// The copy over a rung's working set: blocks of `block` bytes copied once
/// from a ring of `slots`, as the rung's reader copies them.
fn ring_copy(block: u64, slots: u64) -> copy::Options {
    copy::Options { copies: 1, ring: Some(slots), ..copy::Options::new(block) }
}

/// pipespeed2t's options for rung `r` at `count` blocks of `block` bytes,
/// its big pipe `big` bytes (said in digits).
fn options_of(r: &Rung, big: u64, count: u64, block: u64) -> Options {
    Options {
        method: Some(r.method),
        pipe_size: r.big_pipe.then(|| Size::from(big)),
        huge_pages: r.huge_pages,
        busy_poll: r.busy_poll,
        ..Options::new(count, block)
    }
}

/// Rung `r`'s flags, its words after `COUNT BYTES`.
fn flags_of(r: &Rung, big: u64) -> Vec<String> {
    let flags: Vec<OsString> = options_of(r, big, 1, 1).args().split_off(2);
    flags.iter().map(|f| f.to_string_lossy().into()).collect()
}

/// One rung at one block size, as the tables and the goals read it from
/// the observations.
struct Row<'a> {
    rung: &'a RungInfo,
    block: u64,
    /// MB/s (10^6 bytes), as the program timed itself, over the rounds.
    mb: Summary,
    /// The same-working-set copy rate (median of the rounds).
    copy: f64,
    /// Every run verified (the reader checked every block).
    verified: bool,
    fraction_of_memcpy: f64,
    fraction_of_dram: f64,
    /// Per block moved, medians of the rounds: [`PROFILE`]'s metrics.
    per_block: [f64; 6],
    working_set: f64,
}

/// Where the time goes, per block moved: each metric, as the profile table
/// heads it and with its digits there.
const PROFILE: [(&str, &str, usize); 6] = [
    ("writer_calls_per_block", "writer calls", 2),
    ("reader_calls_per_block", "reader calls", 2),
    ("minor_faults_per_block", "page faults", 3),
    ("switches_per_block", "context switches", 2),
    ("cpu_s_per_gb", "CPU s per GB", 3),
    ("cpus_busy", "CPUs busy", 2),
];

/// The DRAM copy's MB/s over the rounds, if it ran.
fn dram(obs: Observations) -> Option<Summary> {
    obs.summary(&at(DRAM_BYTES), DRAM, "mb_per_s")
}

/// Every rung at every block it ran at, block by block.
fn rows<'a>(
    rungs: &'a [RungInfo],
    blocks: &[u64],
    obs: Observations,
) -> Vec<Row<'a>> {
    let dram = dram(obs).map_or(f64::NAN, |d| d.median);
    let mut rows = Vec::new();
    for &block in blocks {
        for rung in rungs {
            let (here, key) = (at(block), name(rung.rung));
            let med = |m| obs.median(&here, &key, m).unwrap_or(f64::NAN);
            let Some(mb) = obs.summary(&here, &key, "mb_per_s") else { continue };
            let all = obs.summary(&here, &key, "verified");
            rows.push(Row {
                rung,
                block,
                copy: med("copy_mb_per_s"),
                verified: rung.verified && all.is_some_and(|v| v.min == 1.0),
                fraction_of_memcpy: mb.median / med("copy_mb_per_s"),
                fraction_of_dram: mb.median / dram,
                per_block: PROFILE.map(|(metric, ..)| med(metric)),
                working_set: med("working_set_bytes"),
                mb,
            });
        }
    }
    rows
}

fn goals(rows: &[Row]) -> Goals {
    let best = rows
        .iter()
        .filter(|r| r.verified && (KIB_64..=1 << 20).contains(&r.block))
        .max_by(|a, b| a.fraction_of_memcpy.total_cmp(&b.fraction_of_memcpy));
    // The best verified rate at 64 KiB, of every rung or of rung 1.
    let at_64k = |rung: Option<u32>| {
        let here = rows.iter().filter(|r| r.block == KIB_64 && r.verified);
        let here = here.filter(|r| rung.is_none_or(|k| r.rung.rung == k));
        here.map(|r| r.mb.median).reduce(f64::max)
    };
    let gain = at_64k(None).zip(at_64k(Some(1))).map(|(best, first)| best / first);
    Goals {
        half_of_memcpy: best.map(|b| b.fraction_of_memcpy >= 0.5),
        best_verified: best.map(|b| Best {
            rung: b.rung.rung,
            block: b.block,
            mb_per_s: b.mb.median,
            fraction_of_memcpy: b.fraction_of_memcpy,
        }),
        four_times_rung_1: gain.map(|g| g >= 4.0),
        gain_over_rung_1_at_64k: gain,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of rung `rung`: `mb` MB/s, its copy `copy` MB/s; per block, one
    /// write, two reads and 1.5 switches, 0.25 CPU s per GB, 1.2 CPUs busy.
    fn run(rung: u32, mb: f64, copy: f64) -> RungRun {
        let verified = RUNGS[rung as usize - 1].method != Method::SpliceNull;
        let bytes = 4_000_000_000;
        let (count, elapsed_s, mb_per_s) = (10, 1.0, mb);
        let report = pipespeed2::Report {
            count,
            bytes,
            elapsed_s,
            mb_per_s,
            verified,
            ..Default::default()
        };
        let cost = |calls| Cost { calls, user_s: 0.6, ..Cost::default() };
        let (writer, reader) = (cost(10), cost(20));
        let (ring_slots, slot_bytes) = (1, 4096);
        let report = LadderReport {
            report,
            ring_slots,
            slot_bytes,
            writer,
            reader,
            ..Default::default()
        };
        let usage =
            Usage { voluntary_switches: 15, user_s: 1.0, ..Usage::default() };
        RungRun { report, usage, copy_mb_per_s: copy }
    }

    /// Rungs 1, 3 and 5, each `(rung, block, MB/s, copy MB/s)` measured,
    /// and a DRAM copy of 10,000 MB/s.
    fn ladder(
        runs: &[(u32, u64, f64, f64)],
    ) -> (Ladder, Vec<crate::engine::Observation>) {
        let mut engine = Engine::new(1);
        let dram = pipespeed2t::copy::CopyReport {
            mb_per_s: 10_000.0,
            ..Default::default()
        };
        engine.measure(&at(DRAM_BYTES), &[DRAM], |_| Ok(dram.clone())).unwrap();
        let mut blocks: Vec<u64> = runs.iter().map(|r| r.1).collect();
        blocks.dedup();
        for &block in &blocks {
            let here: Vec<_> = runs.iter().filter(|r| r.1 == block).collect();
            let names: Vec<String> = here.iter().map(|r| name(r.0)).collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let mut at = at(block);
            at.insert("count".into(), 10.into());
            engine
                .measure(&at, &names, |i| Ok(run(here[i].0, here[i].2, here[i].3)))
                .unwrap();
        }
        let log = engine.finish();
        let rungs: Vec<RungInfo> =
            [1, 3, 5].map(|k| RungInfo::new(&RUNGS[k - 1], 1 << 20, vec![])).into();
        let goals = goals(&rows(&rungs, &blocks, Observations(&log)));
        let ladder = Ladder {
            rungs,
            blocks,
            mib: 32,
            dram_bytes: DRAM_BYTES,
            loadavg_before: "0".into(),
            loadavg_after: "0".into(),
            goals,
        };
        (ladder, log)
    }

    /// The words the reference results were measured with.
    #[test]
    fn each_rung_runs_its_programs_words() {
        let big = ["--pipe-size", "1048576"];
        let flags: [&[&str]; 6] = [
            &["--method", "write"],
            &[&["--method", "write"][..], &big].concat(),
            &[&["--method", "vmsplice"][..], &big].concat(),
            &[&["--method", "vmsplice"][..], &big, &["--huge-pages"]].concat(),
            &[&["--method", "splice-null"][..], &big, &["--huge-pages"]].concat(),
            &[&["--method", "vmsplice"][..], &big, &["--huge-pages", "--busy-poll"]]
                .concat(),
        ];
        for (r, flags) in RUNGS.iter().zip(flags) {
            assert_eq!(flags_of(r, 1 << 20), flags, "rung {}", r.rung);
            let o = Options { json: true, ..options_of(r, 1 << 20, 512, 65536) };
            let line = format!("512 65536 --json {}", flags.join(" "));
            assert_eq!(shell_words(o.args()), line);
        }
        let copy =
            |o: copy::Options| shell_words(copy::Options { json: true, ..o }.args());
        assert_eq!(copy(dram_copy()), "268435456 --json --copies 1 --iterations 1");
        assert_eq!(copy(ring_copy(4096, 1)), "4096 --json --copies 1 --ring 1");
        assert_eq!(copy(copy::Options::new(64)), "64 --json");
    }

    #[test]
    fn the_goals_take_the_best_verified_rung_and_the_gain_at_64k() {
        let (l, _) = ladder(&[
            (1, KIB_64, 1000.0, 8000.0),
            (3, KIB_64, 5000.0, 8000.0),
            // Unverified, so faster but never the best.
            (5, KIB_64, 9000.0, 8000.0),
        ]);
        let best = l.goals.best_verified.as_ref().unwrap();
        assert_eq!((best.rung, best.block), (3, KIB_64));
        assert_eq!(l.goals.half_of_memcpy, Some(true));
        assert_eq!(l.goals.gain_over_rung_1_at_64k, Some(5.0));
        assert_eq!(l.goals.four_times_rung_1, Some(true));
    }

    #[test]
    fn the_tables_and_the_chart_show_each_rung_at_each_block() {
        let (l, log) = ladder(&[
            (1, 4096, 500.0, 1000.0),
            (1, KIB_64, 1000.0, 8000.0),
            (3, KIB_64, 5000.0, 8000.0),
        ]);
        let t = tables(&l, Observations(&log));
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
        let (name, chart) = chart(&l, Observations(&log));
        assert_eq!(name, "ladder");
        assert_eq!(chart.series[0].points, [(4096.0, 500.0), (65536.0, 1000.0)]);
        let dram = chart.series.last().unwrap();
        assert_eq!(dram.label, "DRAM copy");
        assert_eq!(dram.points, [(4096.0, 10_000.0), (65536.0, 10_000.0)]);
    }
}
