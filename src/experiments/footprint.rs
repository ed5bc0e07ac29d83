//! `lab run footprint`: what N idle threads and N idle processes cost in
//! memory, and what writing to memory after `fork` costs (copy-on-write)
//! compared with threads sharing it. Tests the folk claim Zhou Li et al. open
//! with (book References: zhou-2010): processes are heavy in memory, threads
//! light.
//!
//! Each setting (`test`: idle, or cow; `workers`; `touch_bytes`) measures the
//! two conditions, `threads` and `processes` (the program's `--kind`), in turns
//! through the engine; every run's per-worker figures are its metrics.

use std::process::Command;
use std::time::Duration;

use crate::chart::{Chart, Meaning};
use crate::engine::{Engine, Observations, Observed, Series, Setting, setting};
use crate::results::Header;
use crate::stats::Summary;
use crate::table::{Column, Table, col, range};
use clap::Parser;
use footprint::{Footprint, Kind, Snapshot};
use labkit::limited::Limits;
use labkit::limits::{format_size, size_in};
use labkit::{Error, Result};
use serde::Serialize;

use super::Experiment;
use crate::plan::Plan;
use crate::report::{Common, Context, Headline, Report};

pub const EXPERIMENT: Experiment = Experiment::new::<Args>(
    "footprint",
    "Memory of N idle threads vs N idle processes; copy-on-write (Zhou Li et al.)",
    main,
)
.headline(&["process_pss_kib", "thread_pss_kib", "process_over_thread"])
.data::<Data>();

/// N idle threads vs N idle processes: PSS, RSS, kernel stacks, page
/// tables and slab per worker; then the cost of writing to a buffer after
/// fork (copy-on-write) vs threads sharing it.
#[derive(Parser, Clone)]
struct Args {
    #[command(flatten)]
    common: Common,

    /// Worker counts [default: 10,100,1000; with --full 10,100,1000,4000]
    #[arg(long, value_delimiter = ',',
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    workers: Vec<u32>,

    /// Buffer the copy-on-write test fills and every worker then writes
    #[arg(long, value_name = "BYTES", default_value = "64M",
          value_parser = size_in(4 << 10, 512 << 20))]
    touch: u64,

    /// Workers in the copy-on-write test
    #[arg(long, default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..=64))]
    cow_workers: u32,

    /// Seconds before one run is killed
    #[arg(long, default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    timeout: u64,
}
crate::options!(Args);

/// The conditions; the program's `--kind` calls processes `procs`.
const KINDS: [&str; 2] = ["threads", "processes"];

impl Observed for Footprint {
    /// Per worker, KiB: (figure with all workers up - figure before any)
    /// / workers; the seconds until all were ready; and the parent's
    /// address space before any worker, which every child maps.
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        let per = |f: fn(&Snapshot) -> u64| self.per_worker(f);
        vec![
            ("pss_kib", per(|s| s.pss_kib)),
            ("rss_kib", per(|s| s.rss_kib)),
            ("private_dirty_kib", per(|s| s.private_dirty_kib)),
            ("kernel_stack_kib", per(|s| s.kernel_stack_kib)),
            ("page_tables_kib", per(|s| s.vm_pte_kib)),
            ("slab_kib", per(|s| s.slab_unreclaimable_kib)),
            ("address_space_kib", per(|s| s.vm_size_kib)),
            ("ready_s", self.ready_s),
            ("parent_address_space_kib", self.before.vm_size_kib as f64),
        ]
    }
}

#[derive(Serialize, schemars::JsonSchema)]
struct Data {
    rounds: u32,
    /// The machine's memory, for scale.
    memory_mib: u64,
    /// Each kind at each setting (`test`: idle, or cow for copy-on-write;
    /// `workers`; `touch_bytes`): the per-worker figures over the rounds.
    series: Vec<Series>,
}

/// `n` workers, idle or (`touch` > 0) each writing a `touch`-byte buffer.
fn at(n: u32, touch: u64) -> Setting {
    let test = if touch == 0 { "idle" } else { "cow" };
    setting([
        ("test", test.into()),
        ("workers", n.into()),
        ("touch_bytes", touch.into()),
    ])
}

fn main(ctx: &Context, plan: &Plan) -> Result<()> {
    let args: Args = plan.args();
    let out = plan.start(ctx)?;
    let program = crate::bins::programs(&["footprint"])?.remove(0);
    let workers = match (args.workers.is_empty(), args.common.full) {
        (false, _) => args.workers.clone(),
        (true, false) => vec![10, 100, 1000],
        (true, true) => vec![10, 100, 1000, 4000],
    };
    let timeout = Duration::from_secs(args.timeout);
    let mut points: Vec<(u32, u64)> = workers.iter().map(|&n| (n, 0)).collect();
    points.push((args.cow_workers, args.touch));
    let mut engine = Engine::new(args.common.rounds);
    engine.progress(points.len() * engine.runs_for(KINDS.len()), EXPERIMENT.name);
    // Threads and processes of one size take turns, so drift on a shared
    // machine hits both alike.
    for &(n, touch) in &points {
        engine.measure(&at(n, touch), &KINDS, |k| {
            run_once(&program, KINDS[k], n, touch, timeout)
        })?;
    }
    let header = Header::new(EXPERIMENT.name);
    let obs = engine.observations();
    let memory_mib = header.machine.memory_mib;
    let data = Data { rounds: args.common.rounds, memory_mib, series: obs.series() };
    let report = Report {
        headline: headline(&data, obs),
        tables: vec![idle_table(&data), cow_table(&data)],
        charts: vec![("per-worker".into(), chart(&data))],
        files: Vec::new(),
        observations: engine.finish(),
        header,
        data,
    };
    report.publish(&args.common, &out)
}

/// One `footprint --json` run in a child with a deadline; its own figures.
fn run_once(
    program: &std::path::Path,
    kind: &str,
    n: u32,
    touch: u64,
    timeout: Duration,
) -> Result<Footprint> {
    let kind = if kind == "threads" { Kind::Threads } else { Kind::Procs };
    let o = footprint::Options { kind, workers: n, touch, json: true };
    let mut cmd = Command::new(program);
    cmd.args(o.args());
    let what = format!("footprint --kind {} --workers {n}", kind.name());
    let done = labkit::limited::run(&mut cmd, Limits::default(), timeout)
        .map_err(|e| Error::io(format!("cannot run {what}"), e))?;
    if !done.status.success() {
        let (ended, said) = (done.ended(), done.last_words());
        return Err(Error::failed(format!("{what}: {ended}: {said}")));
    }
    serde_json::from_str(done.stdout.trim())
        .map_err(|e| Error::failed(format!("{what}: unreadable output: {e}")))
}

/// The series of `test` (idle or cow), in the order measured.
fn of<'a>(d: &'a Data, test: &str) -> impl Iterator<Item = &'a Series> {
    d.series.iter().filter(move |s| s.setting["test"] == test)
}

/// A series' median of `metric`, and its workers.
fn med(s: &Series, metric: &str) -> f64 {
    s.get(metric).map_or(f64::NAN, |m| m.median)
}

fn workers(s: &Series) -> u32 {
    s.setting["workers"].as_u64().map_or(0, |n| n as u32)
}

/// What one worker costs in memory that is really used: its PSS plus the
/// kernel's stack, page tables and slab for it (medians).
const TOTAL: [&str; 4] =
    ["pss_kib", "kernel_stack_kib", "page_tables_kib", "slab_kib"];

fn total(s: &Series) -> f64 {
    TOTAL.iter().map(|m| med(s, m)).sum()
}

/// The largest worker count and its idle series, processes then threads:
/// what the headline and the verdict judge.
fn largest(d: &Data) -> (u32, Option<&Series>, Option<&Series>) {
    let n = of(d, "idle").map(workers).max().unwrap_or(0);
    let find = |kind| of(d, "idle").find(|s| workers(s) == n && s.condition == kind);
    (n, find("processes"), find("threads"))
}

/// The figures the claims are judged on: PSS per idle worker at the largest
/// worker count, for processes and threads; round k of each ran back to
/// back, so their ratio is paired.
fn headline(data: &Data, obs: Observations) -> Headline {
    let (n, ..) = largest(data);
    let pss = |kind| obs.rounds(&at(n, 0), kind, "pss_kib");
    let label = |kind| format!("PSS per idle {kind}, {n} workers");
    crate::report::headline()
        .rounds("process_pss_kib", &label("process"), pss("processes"), "KiB")
        .rounds("thread_pss_kib", &label("thread"), pss("threads"), "KiB")
        .paired(
            "process_over_thread",
            "a process's PSS over a thread's, in the same round",
            pss("processes"),
            pss("threads"),
        )
        .build()
}

/// A column of medians of `metric`, KiB.
fn kib<'a>(header: &str, metric: &'static str) -> Column<'a, &'a Series> {
    col(header, move |s: &&Series| format!("{:.1}", med(s, metric)))
}

fn idle_table(d: &Data) -> Table {
    let rows: Vec<&Series> = of(d, "idle").collect();
    let mut t = Table::of(
        "1. What one idle worker costs, KiB (median of the rounds)",
        &rows,
        &[
            col("workers", |s: &&Series| workers(s).to_string()),
            col("kind", |s: &&Series| s.condition.clone()),
            kib("PSS", "pss_kib"),
            kib("RSS", "rss_kib"),
            kib("kernel stack", "kernel_stack_kib"),
            kib("page tables", "page_tables_kib"),
            kib("slab", "slab_kib"),
            col("total", |s: &&Series| format!("{:.1}", total(s))),
            kib("address space", "address_space_kib"),
        ],
    );
    t.note(format!(
        "Per worker: (figure with all workers idle - figure before any existed) / \
         workers, median of {} rounds. PSS and RSS: summed over the program and its \
         children from `/proc/<pid>/smaps_rollup` (RSS counts shared pages once per \
         process, PSS divides them). Page tables: `VmPTE` from `/proc/<pid>/status`, \
         summed. Kernel stack and slab (SUnreclaim): /proc/meminfo deltas, \
         machine-wide, so other work on the machine adds noise (a delta can even be \
         negative); they are clearest at 1000 workers. \
         Total = PSS + kernel stack + page tables + slab. Address space: VmSize, \
         reserved but mostly never touched (a thread's 8 MiB stack).",
        d.rounds
    ));
    t.notes.extend(verdict(d));
    t
}

/// The article's claim, checked against the largest worker count: the
/// words follow the figures, whichever way a run comes out.
fn verdict(d: &Data) -> Option<String> {
    let (n, p, t) = largest(d);
    let (pt, tt) = (total(p?), total(t?));
    let mib = |kib: f64| kib * f64::from(n) / 1024.0;
    let times = |a: f64, b: f64| {
        if b > 0.0 { format!("{:.1} times", a / b) } else { "more".into() }
    };
    let judged = if (pt - tt).abs() < 1.0 {
        "Processes and threads came out the same here, within 1 KiB each: \
         the folk wisdom the article quotes does not show in this run"
            .to_string()
    } else if pt > tt {
        format!(
            "Processes are heavier ({} a thread's), as the folk wisdom the \
             article quotes says, by {:.0} KiB each",
            times(pt, tt),
            pt - tt
        )
    } else {
        format!(
            "Threads came out heavier in this run ({} a process's), against \
             the folk wisdom the article quotes, by {:.0} KiB each; the \
             machine-wide kernel figures are noisy, so look at the rounds' \
             spread before believing it",
            times(tt, pt),
            tt - pt
        )
    };
    Some(format!(
        "Verdict at {n} workers: an idle process cost {pt:.0} KiB of memory really \
         used, an idle thread {tt:.0} KiB. {judged}: {n} idle processes took \
         {:.1} MiB, {n} idle threads {:.1} MiB, on a machine with {} MiB.",
        mib(pt),
        mib(tt),
        d.memory_mib
    ))
}

fn cow_table(d: &Data) -> Table {
    let rows: Vec<&Series> = of(d, "cow").collect();
    let touch = rows.first().and_then(|s| s.setting["touch_bytes"].as_u64());
    let title = format!(
        "2. Writing to a {} buffer after the workers exist: copy-on-write vs sharing",
        format_size(touch.unwrap_or(0))
    );
    let all = |s: &&Series| {
        format!("{:.1}", med(s, "pss_kib") * f64::from(workers(s)) / 1024.0)
    };
    let ready = |s: &&Series| s.get("ready_s").map_or("-".into(), |r| range(r, 3));
    Table::of(
        title,
        &rows,
        &[
            col("kind", |s: &&Series| s.condition.clone()),
            col("workers", |s: &&Series| workers(s).to_string()),
            kib("PSS added per worker, KiB", "pss_kib"),
            col("PSS added in all, MiB", all),
            col("seconds until all wrote", ready),
        ],
    )
    .noted(
        "The parent fills the buffer before creating the workers; each worker then \
         writes one byte to every 4 KiB page of it. Threads share the parent's pages; \
         each forked child gets a private copy of every page it writes. Seconds: from \
         the first creation until every worker had written, median (min-max).",
    )
}

fn chart(d: &Data) -> Chart {
    let mut chart = Chart::new(
        "Memory per idle worker (PSS + kernel stack + page tables + slab)",
        "workers",
        "KiB per worker (median; band: min-max)",
    );
    chart.log_x = true;
    // The band: the sum of the parts' minima to the sum of their maxima.
    let sum = |s: &Series, f: fn(&Summary) -> f64| -> f64 {
        TOTAL.iter().filter_map(|m| s.get(m).map(f)).sum()
    };
    for (kind, meaning) in
        [("threads", Meaning::Thread), ("processes", Meaning::Process)]
    {
        let points = of(d, "idle")
            .filter(|s| s.condition == kind)
            .map(|s| {
                (
                    f64::from(workers(s)),
                    total(s),
                    sum(s, |m| m.min),
                    sum(s, |m| m.max),
                )
            })
            .collect();
        chart = chart.spread(meaning, kind, points);
    }
    chart
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Observation;

    /// A run of `n` workers whose PSS grew by `pss` KiB each and whose
    /// kernel figures grew by `kernel` KiB each (stack, page tables, slab).
    fn run(n: u32, pss: u64, kernel: u64) -> Footprint {
        let before =
            Snapshot { pss_kib: 1000, vm_size_kib: 5000, ..Snapshot::default() };
        let during = Snapshot {
            pss_kib: 1000 + pss * u64::from(n),
            rss_kib: 2 * pss * u64::from(n),
            vm_size_kib: 5000 + 8192 * u64::from(n),
            kernel_stack_kib: kernel * u64::from(n),
            vm_pte_kib: kernel * u64::from(n),
            slab_unreclaimable_kib: kernel * u64::from(n),
            ..Snapshot::default()
        };
        let kind = footprint::Kind::Threads;
        Footprint { kind, workers: n, touch_bytes: 0, before, during, ready_s: 0.5 }
    }

    /// Idle at 10 and 100 workers, then copy-on-write at 4: PSS and kernel
    /// figures per worker for threads and for processes.
    fn data(thread_pss: u64, process_pss: u64) -> (Data, Vec<Observation>) {
        let mut engine = Engine::new(1);
        let idle = [thread_pss, process_pss];
        for (n, touch, pss, kernel) in [
            (10, 0, idle, [16, 20]),
            (100, 0, idle, [16, 20]),
            (4, 1 << 20, [2, 1024], [0; 2]),
        ] {
            engine
                .measure(&at(n, touch), &KINDS, |k| Ok(run(n, pss[k], kernel[k])))
                .unwrap();
        }
        let log = engine.finish();
        let series = Observations(&log).series();
        (Data { rounds: 1, memory_mib: 2048, series }, log)
    }

    #[test]
    fn rows_are_the_programs_per_worker_figures() {
        let (d, _) = data(10, 100);
        let p = &d.series[3];
        assert_eq!((p.condition.as_str(), workers(p)), ("processes", 100));
        assert_eq!((med(p, "pss_kib"), med(p, "rss_kib")), (100.0, 200.0));
        assert_eq!(med(p, "address_space_kib"), 8192.0);
        assert_eq!(total(p), 100.0 + 3.0 * 20.0);
        let t = idle_table(&d);
        assert_eq!(t.rows[0][..4], ["10", "threads", "10.0", "20.0"]);
        assert_eq!(t.rows[3][7], "160.0");
        let cow = cow_table(&d);
        assert_eq!(cow.rows[1][..4], ["processes", "4", "1024.0", "4.0"]);
        assert!(cow.title.contains("1M buffer"), "{}", cow.title);
    }

    #[test]
    fn the_verdict_follows_the_figures_either_way() {
        // Processes heavier: 160 KiB against 58 KiB at 100 workers.
        let heavy = verdict(&data(10, 100).0).unwrap();
        assert!(
            heavy
                .starts_with("Verdict at 100 workers: an idle process cost 160 KiB")
        );
        assert!(
            heavy.contains("Processes are heavier (2.8 times a thread's)"),
            "{heavy}"
        );
        assert!(heavy.contains("by 102 KiB each"), "{heavy}");
        // A noisy run where threads came out heavier says so.
        let inverted = verdict(&data(200, 100).0).unwrap();
        assert!(inverted.contains("Threads came out heavier"), "{inverted}");
        assert!(inverted.contains("by 88 KiB each"), "{inverted}");
        assert!(!inverted.contains("Processes are heavier"), "{inverted}");
        let same = verdict(&data(112, 100).0).unwrap();
        assert!(same.contains("came out the same"), "{same}");
    }

    #[test]
    fn the_chart_and_headline_use_the_largest_count() {
        let (d, log) = data(10, 100);
        let c = chart(&d);
        assert_eq!(c.series[0].label, "threads");
        assert_eq!(c.series[0].points, [(10.0, 58.0), (100.0, 58.0)]);
        assert_eq!(c.series[1].points, [(10.0, 160.0), (100.0, 160.0)]);
        let h = headline(&d, Observations(&log));
        let value = |k: &str| h[k]["value"].as_f64().unwrap();
        assert_eq!(
            (value("process_pss_kib"), value("thread_pss_kib")),
            (100.0, 10.0)
        );
        assert_eq!(value("process_over_thread"), 10.0);
    }
}
