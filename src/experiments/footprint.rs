//! `lab run footprint`: what N idle threads and N idle processes cost in
//! memory, and what writing to memory after `fork` costs (copy-on-write)
//! compared with threads sharing it. Tests the folk claim Zhou Li et al. open
//! with (book References: zhou-2010): processes are heavy in memory, threads
//! light.

use std::ffi::OsString;
use std::process::Command;
use std::time::Duration;

use crate::chart::{Chart, Meaning};
use crate::results::Header;
use crate::stats::{Summary, round_order};
use crate::table::Table;
use clap::Parser;
use footprint::{Footprint, Kind, Snapshot};
use labkit::limited::Limits;
use labkit::limits::{format_size, size_in};
use labkit::{Error, Result};
use serde::Serialize;

use super::Experiment;
use crate::report::{Common, Context, Headline, Report};

pub const EXPERIMENT: Experiment = Experiment::new(
    "footprint",
    "Memory of N idle threads vs N idle processes; copy-on-write (Zhou Li et al.)",
    main,
);

/// N idle threads vs N idle processes: PSS, RSS, kernel stacks, page
/// tables and slab per worker; then the cost of writing to a buffer after
/// fork (copy-on-write) vs threads sharing it.
#[derive(Parser)]
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

/// One figure per worker, KiB, summarised over the rounds.
#[derive(Serialize)]
struct PerWorker {
    pss: Summary,
    rss: Summary,
    private_dirty: Summary,
    kernel_stack: Summary,
    page_tables: Summary,
    slab: Summary,
    address_space: Summary,
    ready_s: Summary,
}

#[derive(Serialize)]
struct Row {
    kind: Kind,
    workers: u32,
    touch_bytes: u64,
    per_worker_kib: PerWorker,
    runs: Vec<Footprint>,
}

#[derive(Serialize)]
struct Data {
    rounds: u32,
    /// The machine's memory, for scale.
    memory_mib: u64,
    idle: Vec<Row>,
    cow: Vec<Row>,
}

fn main(ctx: &Context, argv: Vec<OsString>) -> Result<()> {
    let args = labkit::cli::parse_from::<Args, _, _>(argv);
    let out = args.common.start(ctx, EXPERIMENT.name)?;
    let program = crate::bins::programs(&["footprint"])?.remove(0);
    let workers = match (args.workers.is_empty(), args.common.full) {
        (false, _) => args.workers.clone(),
        (true, false) => vec![10, 100, 1000],
        (true, true) => vec![10, 100, 1000, 4000],
    };
    let rounds = args.common.rounds;
    let timeout = Duration::from_secs(args.timeout);
    let bar = crate::progress::bar(
        (workers.len() as u64 + 1) * 2 * u64::from(rounds),
        EXPERIMENT.name,
    );
    // Threads and processes of one size, in the lab's round order: the
    // two kinds alternate who goes first, so drift on a shared machine
    // hits both alike.
    let measure = |n: u32, touch: u64| -> Result<[Row; 2]> {
        let kinds = [Kind::Threads, Kind::Procs];
        let mut runs: [Vec<Footprint>; 2] = Default::default();
        for round in 0..rounds as usize {
            for k in round_order(kinds.len(), round) {
                bar.set_message(format!("{n} {:?}", kinds[k]));
                runs[k].push(run_once(&program, kinds[k], n, touch, timeout)?);
                bar.inc(1);
            }
        }
        let [threads, procs] = runs;
        Ok([
            row(Kind::Threads, n, touch, threads),
            row(Kind::Procs, n, touch, procs),
        ])
    };
    let mut idle = Vec::new();
    for &n in &workers {
        idle.extend(measure(n, 0)?);
    }
    let cow = measure(args.cow_workers, args.touch)?.into();
    bar.finish_and_clear();
    let header = Header::new(EXPERIMENT.name);
    let data = Data { rounds, memory_mib: header.machine.memory_mib, idle, cow };
    let report = Report {
        observations: Vec::new(),
        header,
        headline: headline(&data),
        tables: vec![idle_table(&data), cow_table(&data)],
        charts: vec![("per-worker".into(), chart(&data))],
        files: Vec::new(),
        data,
    };
    report.publish(&args.common, &out)
}

// ANCHOR: run_once
/// One `footprint --json` run in a child with a deadline; its own figures.
fn run_once(
    program: &std::path::Path,
    kind: Kind,
    n: u32,
    touch: u64,
    timeout: Duration,
) -> Result<Footprint> {
    let mut cmd = Command::new(program);
    let kind_arg = if kind == Kind::Threads { "threads" } else { "procs" };
    cmd.args(["--json", "--kind", kind_arg, "--workers", &n.to_string()]);
    cmd.args(["--touch", &touch.to_string()]);
    let what = format!("footprint --kind {kind_arg} --workers {n}");
    let done = labkit::limited::run(&mut cmd, Limits::default(), timeout)
        .map_err(|e| Error::io(format!("cannot run {what}"), e))?;
    if !done.status.success() {
        return Err(Error::failed(format!(
            "{what}: {}: {}",
            done.ended(),
            done.last_words()
        )));
    }
    serde_json::from_str(done.stdout.trim())
        .map_err(|e| Error::failed(format!("{what}: unreadable output: {e}")))
}
// ANCHOR_END: run_once

fn row(kind: Kind, workers: u32, touch: u64, runs: Vec<Footprint>) -> Row {
    let per = |f: fn(&Snapshot) -> u64| {
        Summary::of_rounds(runs.iter().map(|r| r.per_worker(f)))
    };
    Row {
        kind,
        workers,
        touch_bytes: touch,
        per_worker_kib: PerWorker {
            pss: per(|s| s.pss_kib),
            rss: per(|s| s.rss_kib),
            private_dirty: per(|s| s.private_dirty_kib),
            kernel_stack: per(|s| s.kernel_stack_kib),
            page_tables: per(|s| s.vm_pte_kib),
            slab: per(|s| s.slab_unreclaimable_kib),
            address_space: per(|s| s.vm_size_kib),
            ready_s: Summary::of_rounds(runs.iter().map(|r| r.ready_s)),
        },
        runs,
    }
}

fn kind_name(kind: Kind) -> &'static str {
    if kind == Kind::Threads { "threads" } else { "processes" }
}

fn kib(s: &Summary) -> String {
    format!("{:.1}", s.median)
}

/// What one worker costs in memory that is really used: its PSS plus the
/// kernel's stack, page tables and slab for it (medians).
fn total(p: &PerWorker) -> f64 {
    p.pss.median + p.kernel_stack.median + p.page_tables.median + p.slab.median
}

/// The largest worker count and its idle rows, processes then threads:
/// what the headline and the verdict judge (0 and none without rows).
fn largest(d: &Data) -> (u32, Option<&Row>, Option<&Row>) {
    let n = d.idle.iter().map(|r| r.workers).max().unwrap_or(0);
    let find = |kind| d.idle.iter().find(|r| r.kind == kind && r.workers == n);
    (n, find(Kind::Procs), find(Kind::Threads))
}

/// The figures the claims are judged on: PSS per idle worker at the largest
/// worker count, for processes and threads.
fn headline(data: &Data) -> Headline {
    let (n, p, t) = largest(data);
    // Round k of threads and of processes ran back to back: pair them.
    let per_round = |r: &Row| -> Vec<f64> {
        r.runs.iter().map(|f| f.per_worker(|s| s.pss_kib)).collect()
    };
    crate::report::headline()
        .rounds(
            "process_pss_kib",
            &format!("PSS per idle process, {n} workers"),
            p.map(per_round),
            "KiB",
        )
        .rounds(
            "thread_pss_kib",
            &format!("PSS per idle thread, {n} workers"),
            t.map(per_round),
            "KiB",
        )
        .paired(
            "process_over_thread",
            "a process's PSS over a thread's, in the same round",
            p.map(per_round),
            t.map(per_round),
        )
        .build()
}

fn idle_table(d: &Data) -> Table {
    let mut t = Table::new(
        "1. What one idle worker costs, KiB (median of the rounds)",
        &[
            "workers",
            "kind",
            "PSS",
            "RSS",
            "kernel stack",
            "page tables",
            "slab",
            "total",
            "address space",
        ],
    );
    for r in &d.idle {
        let p = &r.per_worker_kib;
        t.row(vec![
            r.workers.to_string(),
            kind_name(r.kind).into(),
            kib(&p.pss),
            kib(&p.rss),
            kib(&p.kernel_stack),
            kib(&p.page_tables),
            kib(&p.slab),
            format!("{:.1}", total(p)),
            kib(&p.address_space),
        ]);
    }
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
    if let Some(verdict) = verdict(d) {
        t.note(verdict);
    }
    t
}

/// The article's claim, checked against the largest worker count: the
/// words follow the figures, whichever way a run comes out.
fn verdict(d: &Data) -> Option<String> {
    let (n, p, t) = largest(d);
    let (p, t) = (p?, t?);
    let (tt, pt) = (total(&t.per_worker_kib), total(&p.per_worker_kib));
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
    let touch = d.cow.first().map_or(0, |r| r.touch_bytes);
    let mut t = Table::new(
        format!(
            "2. Writing to a {} buffer after the workers exist: copy-on-write vs sharing",
            format_size(touch)
        ),
        &[
            "kind",
            "workers",
            "PSS added per worker, KiB",
            "PSS added in all, MiB",
            "seconds until all wrote",
        ],
    );
    for r in &d.cow {
        let p = &r.per_worker_kib;
        t.row(vec![
            kind_name(r.kind).into(),
            r.workers.to_string(),
            kib(&p.pss),
            format!("{:.1}", p.pss.median * f64::from(r.workers) / 1024.0),
            crate::table::range(&p.ready_s, 3),
        ]);
    }
    t.note(
        "The parent fills the buffer before creating the workers; each worker then \
         writes one byte to every 4 KiB page of it. Threads share the parent's pages; \
         each forked child gets a private copy of every page it writes. Seconds: from \
         the first creation until every worker had written, median (min-max).",
    );
    t
}

fn chart(d: &Data) -> Chart {
    let mut chart = Chart::new(
        "Memory per idle worker (PSS + kernel stack + page tables + slab)",
        "workers",
        "KiB per worker (median; band: min-max)",
    );
    chart.log_x = true;
    for kind in [Kind::Threads, Kind::Procs] {
        let points = d
            .idle
            .iter()
            .filter(|r| r.kind == kind)
            .map(|r| {
                let p = &r.per_worker_kib;
                let parts = [&p.pss, &p.kernel_stack, &p.page_tables, &p.slab];
                let low = parts.iter().map(|s| s.min).sum();
                let high = parts.iter().map(|s| s.max).sum();
                (f64::from(r.workers), total(p), low, high)
            })
            .collect();
        let meaning =
            if kind == Kind::Threads { Meaning::Thread } else { Meaning::Process };
        chart = chart.spread(meaning, kind_name(kind), points);
    }
    chart
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of `n` workers whose PSS grew by `pss` KiB each and whose
    /// kernel figures grew by `kernel` KiB each (stack, page tables, slab).
    fn run(kind: Kind, n: u32, pss: u64, kernel: u64) -> Footprint {
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
        Footprint { kind, workers: n, touch_bytes: 0, before, during, ready_s: 0.5 }
    }

    fn data(thread_pss: u64, process_pss: u64) -> Data {
        let rows = |n: u32| {
            [
                row(
                    Kind::Threads,
                    n,
                    0,
                    vec![run(Kind::Threads, n, thread_pss, 16)],
                ),
                row(Kind::Procs, n, 0, vec![run(Kind::Procs, n, process_pss, 20)]),
            ]
        };
        let mut idle: Vec<Row> = rows(10).into();
        idle.extend(rows(100));
        let cow = vec![
            row(Kind::Threads, 4, 1 << 20, vec![run(Kind::Threads, 4, 2, 0)]),
            row(Kind::Procs, 4, 1 << 20, vec![run(Kind::Procs, 4, 1024, 0)]),
        ];
        Data { rounds: 1, memory_mib: 2048, idle, cow }
    }

    #[test]
    fn rows_are_the_programs_per_worker_figures() {
        let d = data(10, 100);
        let p = &d.idle[1].per_worker_kib;
        assert_eq!((p.pss.median, p.rss.median), (100.0, 200.0));
        assert_eq!(p.address_space.median, 8192.0);
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
        let heavy = verdict(&data(10, 100)).unwrap();
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
        let inverted = verdict(&data(200, 100)).unwrap();
        assert!(inverted.contains("Threads came out heavier"), "{inverted}");
        assert!(inverted.contains("by 88 KiB each"), "{inverted}");
        assert!(!inverted.contains("Processes are heavier"), "{inverted}");
        let same = verdict(&data(112, 100)).unwrap();
        assert!(same.contains("came out the same"), "{same}");
    }

    #[test]
    fn the_chart_and_headline_use_the_largest_count() {
        let d = data(10, 100);
        let c = chart(&d);
        assert_eq!(c.series[0].label, "threads");
        assert_eq!(c.series[0].points, [(10.0, 58.0), (100.0, 58.0)]);
        assert_eq!(c.series[1].points, [(10.0, 160.0), (100.0, 160.0)]);
        let h = headline(&d);
        let value = |k: &str| h[k]["value"].as_f64().unwrap();
        assert_eq!(
            (value("process_pss_kib"), value("thread_pss_kib")),
            (100.0, 10.0)
        );
        assert_eq!(value("process_over_thread"), 10.0);
    }
}
