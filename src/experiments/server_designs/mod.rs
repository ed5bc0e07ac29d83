//! `lab run server-designs`: Stevens' chapter 30 table re-run (UNP vol. 1,
//! 3rd ed.; the table Zhou Li et al. lean on). Every design of the `servers`
//! crate serves the same closed-loop load from `client` (CHILDREN
//! concurrent clients x LOOPS connections, BYTES per reply) on loopback;
//! the server's own CPU (itself plus its reaped children, as
//! `pr_cpu_time.c` prints it on SIGINT) minus the iterative server's CPU for
//! the same number of connections from one client is Stevens' "process
//! control CPU time". Each row also has connections/s and latency from the
//! client, the pool's meter and, where they can be counted, wake-ups per
//! connection.

use crate::results::Header;
use crate::stats::{Summary, round_order};
use clap::Parser;
use labkit::Result;
use serde::Serialize;

use super::{Declared, Experiment};
use crate::plan::Plan;
use crate::report::{Common, Context, Report};

mod run;
mod tables;
mod verdict;

use run::{Ctx, full_phases, ports};
use tables::{bars, charts, tables};
use verdict::{cpu, headline, row, verdict};

pub const EXPERIMENT: Experiment = Experiment::new::<Args>(
    "server-designs",
    concat!(
        "Stevens' server designs and today's: CPU per connection above an ",
        "iterative baseline (Zhou Li et al., UNP ch. 30)"
    ),
    main,
)
.under_all(Declared::own(&["--quick"]))
.headline(&[
    "fork_over_prefork_total_cpu",
    "thread_over_prethread_total_cpu",
    "fork_over_prefork",
    "thread_over_prethread",
    "fork_us_per_connection",
    "prefork_us_per_connection",
    "best_classic_connections_per_s",
    "best_modern_connections_per_s",
])
.data::<Data>();

/// Every design, in Stevens' row order, then today's; the first is the
/// baseline. `epoll-herd` is the runner's own: `server --design
/// epoll-exclusive --herd`.
pub const DESIGNS: &[&str] = &[
    "iterative",
    "fork",
    "prefork",
    "prefork-select",
    "prefork-fcntl",
    "prefork-mutex",
    "prefork-pass",
    "thread",
    "prethread-mutex",
    "prethread-handoff",
    "prethread-nolock",
    "epoll",
    "epoll-exclusive",
    "epoll-herd",
    "reuseport",
    "tokio",
    "io-uring",
];

/// The designs whose pool is a set of event loops or runtime workers: one
/// per CPU is what they are built for, so they get `--modern-pool`.
/// (epoll-exclusive and epoll-herd keep Stevens' pool: their point is how
/// many of 15 waiting loops wake per connection.)
const MODERN_POOLED: &[&str] = &["reuseport", "tokio"];

/// Server designs under one load: CPU above the iterative baseline,
/// connections/s, latency, the pool's meter and wake-ups.
#[derive(Parser, Clone)]
struct Args {
    #[command(flatten)]
    common: Common,

    /// Designs to run besides the iterative baseline, which always runs
    /// [default: all]
    #[arg(long, value_delimiter = ',', value_parser = design)]
    designs: Vec<String>,

    /// Concurrent clients (the book's client ran 5 per host)
    #[arg(long, default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    children: u32,

    /// Connections per client [default: 1000, so 5 clients make the book's
    /// 5000; 200 with --quick; capped so one run uses at most a quarter of
    /// the ephemeral ports]
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    loops: Option<u64>,

    /// Bytes per reply (the book's 4000)
    #[arg(long, default_value_t = 4000,
          value_parser = clap::value_parser!(u64).range(1..=16384))]
    bytes: u64,

    /// Pool members of Stevens' pooled designs (the book's 15)
    #[arg(long, default_value_t = 15,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pool: u32,

    /// Event loops or runtime workers of reuseport and tokio [default: the
    /// CPUs this process may run on]
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    modern_pool: Option<u32>,

    /// Every server reads requests one byte per read(2), as Stevens'
    /// threaded servers did
    #[arg(long)]
    byte_reads: bool,

    /// A light run for `lab run all`: 200 loops per client (--loops still
    /// applies), with --rounds rounds as ever, so that the verdicts have
    /// their intervals
    #[arg(long)]
    quick: bool,
}
crate::options!(Args);

fn design(text: &str) -> std::result::Result<String, String> {
    if DESIGNS.contains(&text) {
        Ok(text.to_string())
    } else {
        Err(format!("'{text}' is not a design; designs: {}", DESIGNS.join(", ")))
    }
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
struct Run {
    /// What `server --json` printed when it stopped.
    server: servers::Stats,
    /// What `client --json` printed.
    client: servers::client::Report,
    /// From the server's start to its exit.
    server_wall_s: f64,
}

/// How one server run is set up.
#[derive(Clone, Debug)]
struct Load {
    children: u64,
    loops: u64,
    bytes: u64,
    rate: Option<f64>,
}

#[derive(Serialize, schemars::JsonSchema)]
struct Row {
    design: String,
    /// unpv13e's name for it (serv00 ... serv09), if it is Stevens'.
    stevens: Option<&'static str>,
    pool: usize,
    /// Server CPU, user + sys, itself and its reaped children, seconds.
    cpu_s: Summary,
    /// `cpu_s` minus the same round's baseline (Stevens' measure).
    cpu_s_above_baseline: Summary,
    /// The same, each round's.
    cpu_s_above_baseline_rounds: Vec<f64>,
    cpu_us_per_connection_above_baseline: Summary,
    connections_per_s: Summary,
    p50_ms: Summary,
    p99_ms: Summary,
    /// Listener wake-ups that returned to the program (select or
    /// epoll_wait), per connection.
    wakeups_per_connection: Option<Summary>,
    /// The server's context switches (voluntary + involuntary, itself,
    /// its threads and reaped children) per connection: wake-ups the
    /// kernel counts, including those a herd causes inside select or
    /// epoll_wait, which never return to the program.
    switches_per_connection: Summary,
    /// Connections per pool member in the first round (Stevens' meter).
    per_member_first_round: Vec<u64>,
    runs: Vec<Run>,
}

#[derive(Serialize, schemars::JsonSchema)]
struct Skipped {
    design: String,
    reason: String,
}

#[derive(Serialize, schemars::JsonSchema)]
struct Ports {
    low: u32,
    high: u32,
    count: u32,
    /// net.ipv4.tcp_tw_reuse (2: reuse TIME_WAIT ports for loopback).
    tw_reuse: Option<u32>,
}

#[derive(Serialize, schemars::JsonSchema)]
struct RatePoint {
    design: String,
    offered_per_s: f64,
    achieved_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
}

/// One design's figures for the verdict (medians over the rounds).
#[derive(Serialize, schemars::JsonSchema)]
struct VerdictDesign {
    cpu_s_above_baseline: f64,
    cpu_us_per_connection_above_baseline: f64,
    connections_per_s: f64,
    p99_ms: f64,
    switches_per_connection: f64,
}

#[derive(Serialize, schemars::JsonSchema)]
struct Best {
    design: String,
    value: f64,
}

/// What the claims need. Article 000: "prefork and thread pools bring no
/// real advantage" at hundreds to thousands of connections. Stevens'
/// summary: pools cut the process-control CPU "by a factor of 10 or more".
#[derive(Serialize, schemars::JsonSchema)]
struct Verdict {
    /// Median CPU seconds of the iterative baseline.
    baseline_cpu_s: f64,
    /// Spread of the baseline over the rounds (max - min), seconds: a CPU
    /// figure above baseline smaller than this is within the noise.
    baseline_noise_cpu_s: f64,
    connections_per_run: u64,
    /// By design name (`/verdict/designs/fork/...`).
    designs: std::collections::BTreeMap<String, VerdictDesign>,
    /// The prefork design with the least CPU above baseline.
    best_prefork: Option<Best>,
    /// The prethreaded design with the least CPU above baseline.
    best_prethread: Option<Best>,
    /// fork's CPU above baseline / best prefork's; `None` when either is
    /// missing or the denominator is not above 0.
    fork_over_best_prefork: Option<f64>,
    /// thread's CPU above baseline / best prethreaded's; `None` likewise.
    thread_over_best_prethread: Option<f64>,
    /// The same ratios of total CPU (baseline not subtracted): less
    /// sensitive to noise when the pools sit near the baseline.
    fork_over_best_prefork_total_cpu: Option<f64>,
    thread_over_best_prethread_total_cpu: Option<f64>,
    /// Stevens' factor.
    stevens_factor: f64,
    /// The article's Solaris figures: 504.2 / 21.5.
    article_fork_over_prefork: f64,
    best_classic_connections_per_s: Option<Best>,
    best_modern_connections_per_s: Option<Best>,
}

#[derive(Serialize, schemars::JsonSchema)]
struct Data {
    rounds: u32,
    full: bool,
    quick: bool,
    children: u32,
    loops: u64,
    bytes: u64,
    pool: u32,
    modern_pool: u32,
    byte_reads: bool,
    connections_per_run: u64,
    ports: Ports,
    /// The iterative server, one client making every connection in turn.
    baseline: Row,
    rows: Vec<Row>,
    skipped: Vec<Skipped>,
    /// --full: more concurrent clients than pool members.
    overload: Vec<Row>,
    overload_children: u64,
    /// --full: open-loop latency against offered rate.
    rate_sweep: Vec<RatePoint>,
    verdict: Verdict,
}

fn main(ctx: &Context, plan: &Plan) -> Result<()> {
    let args: Args = plan.args();
    let out = plan.start(ctx)?;
    let bins = crate::bins::package_programs("servers", &["server", "client"])?;
    let ports = ports();
    let rounds = args.common.rounds as usize;
    let children = u64::from(args.children);
    let wanted = args.loops.unwrap_or(if args.quick { 200 } else { 1000 });
    // TIME_WAIT lands on the client: keep one run within a quarter of the
    // ephemeral ports (loopback reuse, tw_reuse=2, handles the rest).
    let cap = (u64::from(ports.count) / 4 / children).max(1);
    let loops = wanted.min(cap);
    if loops < wanted {
        eprintln!(
            "lab: --loops {wanted} capped to {loops}: {} ephemeral ports, \
             {children} clients",
            ports.count
        );
    }
    let modern_pool = args.modern_pool.unwrap_or_else(|| {
        labkit::affinity::allowed_cpus().map_or(1, |c| c.len().max(1) as u32)
    });
    let mut designs: Vec<&str> = if args.designs.is_empty() {
        DESIGNS[1..].to_vec()
    } else {
        DESIGNS[1..]
            .iter()
            .copied()
            .filter(|d| args.designs.iter().any(|a| a == d))
            .collect()
    };
    let ctx = Ctx {
        server: bins[0].clone(),
        client: bins[1].clone(),
        pool: args.pool,
        modern_pool,
        byte_reads: args.byte_reads,
    };
    let load = Load { children, loops, bytes: args.bytes, rate: None };
    let base_load = Load { children: 1, loops: children * loops, ..load.clone() };
    // io_uring (or anything the kernel refuses) is skipped with the
    // server's own reason.
    let mut skipped = Vec::new();
    designs.retain(|d| match ctx.probe(d) {
        Ok(()) => true,
        Err(reason) => {
            skipped.push(Skipped { design: d.to_string(), reason });
            false
        }
    });
    let steps = (rounds * (designs.len() + 1)) as u64;
    let bar = crate::progress::bar(steps, EXPERIMENT.name);
    let mut base_runs = Vec::new();
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); designs.len()];
    for round in 0..rounds {
        // One pass over every design per round (the baseline is 0), in the
        // lab's rotating order, so drift on a shared machine spreads over
        // all of them.
        for k in round_order(designs.len() + 1, round) {
            let Some(i) = k.checked_sub(1) else {
                bar.set_message("iterative (baseline)");
                base_runs.push(ctx.run_once("iterative", &base_load)?);
                bar.inc(1);
                continue;
            };
            bar.set_message(designs[i].to_string());
            runs[i].push(ctx.run_once(designs[i], &load)?);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let base_cpu: Vec<f64> = base_runs.iter().map(cpu).collect();
    let baseline = row("iterative", base_runs, &base_cpu);
    let rows: Vec<Row> =
        designs.iter().zip(runs).map(|(d, r)| row(d, r, &base_cpu)).collect();
    let overload_children = 2 * u64::from(args.pool.max(modern_pool));
    let (overload, rate_sweep) = if args.common.full {
        full_phases(&ctx, &designs, &rows, &load, overload_children, &base_cpu)?
    } else {
        (Vec::new(), Vec::new())
    };
    let verdict = verdict(&baseline, &rows, children * loops);
    let data = Data {
        rounds: rounds as u32,
        full: args.common.full,
        quick: args.quick,
        children: args.children,
        loops,
        bytes: args.bytes,
        pool: args.pool,
        modern_pool,
        byte_reads: args.byte_reads,
        connections_per_run: children * loops,
        ports,
        baseline,
        rows,
        skipped,
        overload,
        overload_children,
        rate_sweep,
        verdict,
    };
    let mut header = Header::new(EXPERIMENT.name);
    header.settings.rounds = rounds as u32;
    header.settings.used("--quick", args.quick);
    header.settings.used("loops per client", loops);
    let report = Report {
        observations: Vec::new(),
        header,
        headline: headline(&data.verdict, &data.rows),
        tables: tables(&data),
        charts: charts(&data),
        files: bars(&data),
        data,
    };
    report.publish(&args.common, &out)
}

#[cfg(test)]
mod tests {
    use super::verdict::{stevens, verdict};
    use super::*;

    /// A row with one round: `cpu` total seconds, baseline `base`.
    fn fake(design: &str, cpu: f64, base: f64, cps: f64) -> Row {
        let one = |v: f64| Summary::of(&[v]).unwrap();
        Row {
            design: design.into(),
            stevens: stevens(design),
            pool: 15,
            cpu_s: one(cpu),
            cpu_s_above_baseline: one(cpu - base),
            cpu_s_above_baseline_rounds: vec![cpu - base],
            cpu_us_per_connection_above_baseline: one((cpu - base) * 1e6 / 1000.0),
            connections_per_s: one(cps),
            p50_ms: one(0.1),
            p99_ms: one(1.0),
            wakeups_per_connection: None,
            switches_per_connection: one(2.0),
            per_member_first_round: Vec::new(),
            runs: Vec::new(),
        }
    }

    #[test]
    fn the_ratios_use_the_cheapest_pool_and_refuse_a_pool_at_baseline() {
        let base = fake("iterative", 1.0, 1.0, 100.0);
        let rows = vec![
            fake("fork", 11.0, 1.0, 50.0),
            fake("prefork", 2.0, 1.0, 300.0),
            fake("prefork-pass", 1.5, 1.0, 200.0),
            fake("thread", 3.0, 1.0, 80.0),
            fake("prethread-mutex", 0.9, 1.0, 250.0),
            fake("epoll", 1.1, 1.0, 400.0),
        ];
        let v = verdict(&base, &rows, 1000);
        assert_eq!(v.best_prefork.as_ref().unwrap().design, "prefork-pass");
        assert_eq!(v.fork_over_best_prefork, Some(20.0));
        assert_eq!(v.fork_over_best_prefork_total_cpu, Some(11.0 / 1.5));
        // The best prethreaded pool is below the baseline: no ratio above
        // it, but the total-CPU ratio stands.
        assert_eq!(v.best_prethread.as_ref().unwrap().design, "prethread-mutex");
        assert_eq!(v.thread_over_best_prethread, None);
        assert_eq!(v.thread_over_best_prethread_total_cpu, Some(3.0 / 0.9));
        assert_eq!(
            v.best_classic_connections_per_s.as_ref().unwrap().design,
            "prefork"
        );
        assert_eq!(
            v.best_modern_connections_per_s.as_ref().unwrap().design,
            "epoll"
        );
        let fork = &v.designs["fork"];
        assert_eq!(fork.cpu_us_per_connection_above_baseline, 10_000.0);
        // Without fork or a prefork pool there is no ratio at all.
        let v = verdict(&base, &rows[3..], 1000);
        assert!(v.best_prefork.is_none() && v.fork_over_best_prefork.is_none());
    }

    #[test]
    fn the_tables_and_bars_show_every_design_against_the_baseline() {
        let base = fake("iterative", 1.0, 1.0, 100.0);
        let mut fork = fake("fork", 3.0, 1.0, 50.0);
        fork.pool = 0;
        let mut prefork = fake("prefork", 1.5, 1.0, 300.0);
        prefork.per_member_first_round = vec![60, 70, 65];
        prefork.wakeups_per_connection = Summary::of(&[1.25]);
        let rows = vec![fork, prefork];
        let verdict = verdict(&base, &rows, 1000);
        let d = Data {
            rounds: 1,
            full: false,
            quick: true,
            children: 5,
            loops: 200,
            bytes: 4000,
            pool: 15,
            modern_pool: 2,
            byte_reads: false,
            connections_per_run: 1000,
            ports: Ports { low: 1, high: 2, count: 2, tw_reuse: None },
            baseline: base,
            rows,
            skipped: vec![Skipped {
                design: "io-uring".into(),
                reason: "no".into(),
            }],
            overload: Vec::new(),
            overload_children: 30,
            rate_sweep: Vec::new(),
            verdict,
        };
        let t = tables(&d);
        assert_eq!(t.len(), 3, "no overload or sweep without --full");
        assert_eq!(
            t[0].rows[0],
            ["iterative (baseline)", "serv00", "1.000", "0", "0", "100", "1.00"]
        );
        assert_eq!(
            t[0].rows[1],
            ["fork", "serv01", "3.000", "2.000", "2000.0", "50", "1.00"]
        );
        assert_eq!(t[1].rows[1][1], "-", "fork has no pool");
        assert_eq!(t[1].rows[2][1..6], ["15", "0.10", "2.00", "1.25", "60-70"]);
        assert_eq!(t[1].rows[2][6], "0.6/7.1", "Kegel's serv02");
        assert!(t[0].notes.iter().any(|n| n == "Skipped io-uring: no"));
        // fork / best prefork, above the baseline: 2.0 / 0.5.
        assert!(t[2].rows[0][2].starts_with("4.0 (prefork)"), "{:?}", t[2].rows);
        let files = bars(&d);
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["cpu-per-connection.svg", "connections-per-s.svg"]);
        assert!(files.iter().all(|(_, svg)| svg.starts_with("<svg")));
        // The baseline is a bar of connections/s, not of CPU above itself.
        let bar = ">iterative<";
        assert!(files[1].1.contains(bar) && !files[0].1.contains(bar));
        assert!(charts(&d).is_empty(), "no sweep, no chart");
    }
}
