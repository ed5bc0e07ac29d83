//! `lab run server-designs`: Stevens' chapter 30 table re-run (UNP vol. 1,
//! 3rd ed.; the table Zhou Li et al. lean on). Every design of the `servers`
//! crate serves the same closed-loop load from `client` on loopback; the
//! server's own CPU minus the iterative server's for the same connections
//! from one client is Stevens' "process control CPU time".
//!
//! The designs are the engine's conditions, the iterative baseline first
//! (with `--full`, also at an overload and at each rate of an open loop);
//! `verdict` derives the CPU above the same round's baseline and the ratios
//! the claims judge.

use clap::Parser;
use labkit::Result;
use serde::Serialize;

use super::{Declared, Experiment};
use crate::engine::{
    Engine, Observations, Observed, Series, Setting, balanced_rounds, setting,
};
use crate::plan::Plan;
use crate::report::{Common, Context, Report};
use crate::results::Header;

mod run;
mod tables;
mod verdict;

use run::{Ctx, measure, ports};
use tables::{bars, charts, tables};
use verdict::{above_baseline, headline, verdict};

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
/// baseline ([`BASELINE`]). `epoll-herd` is the runner's own: `server --design
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

/// The baseline: the iterative server, one client making every connection.
const BASELINE: &str = "iterative";

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

/// One run: what the server and the client printed.
#[derive(Clone, Debug)]
struct Run {
    /// What `server --json` printed when it stopped.
    server: servers::Stats,
    /// What `client --json` printed.
    client: servers::client::Report,
    /// From the server's start to its exit.
    server_wall_s: f64,
}

impl Observed for Run {
    /// The server's CPU counts itself and its reaped children; the meter is
    /// the fewest and most connections a pool member served.
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        let (s, c) = (&self.server, &self.client);
        let connections = c.connections_ok.max(1) as f64;
        let cpu = s.user_s + s.sys_s;
        let switches = (s.voluntary_switches + s.involuntary_switches) as f64;
        let mut m = vec![
            ("cpu_s", cpu),
            ("cpu_us_per_connection", cpu * 1e6 / connections),
            ("connections_ok", c.connections_ok as f64),
            ("requests", s.requests as f64),
            ("connections_per_s", c.connections_per_s),
            ("p50_ms", c.latency.p50_us / 1e3),
            ("p99_ms", c.latency.p99_us / 1e3),
            ("max_ms", c.latency.max_us / 1e3),
            ("switches_per_connection", switches / connections),
            ("pool", s.pool as f64),
            ("wall_s", self.server_wall_s),
        ];
        m.extend(s.wakeups_per_connection.map(|w| ("wakeups_per_connection", w)));
        let (lo, hi) = (s.per_member.iter().min(), s.per_member.iter().max());
        if let (Some(&lo), Some(&hi)) = (lo, hi) {
            m.extend([("per_member_min", lo as f64), ("per_member_max", hi as f64)]);
        }
        m
    }
}

/// How one server run is set up.
#[derive(Clone, Debug)]
struct Load {
    children: u32,
    loops: u64,
    bytes: u64,
    rate: Option<f64>,
}

/// The closed-loop load every design serves, and its baseline.
fn closed() -> Setting {
    setting([("load", "closed".into())])
}

/// The same load from `children` concurrent clients (--full).
fn overload(children: u64) -> Setting {
    setting([("load", "overload".into()), ("children", children.into())])
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
struct Best {
    design: String,
    value: f64,
}

/// What the claims need, from the medians of the closed loop. Article
/// 000: "prefork and thread pools bring no real advantage" at hundreds to
/// thousands of connections. Stevens' summary: pools cut the
/// process-control CPU "by a factor of 10 or more".
#[derive(Serialize, schemars::JsonSchema)]
struct Verdict {
    /// Spread of the baseline's CPU over the rounds (max - min), seconds: a
    /// CPU figure above baseline smaller than this is within the noise.
    baseline_noise_cpu_s: f64,
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
    /// The rounds run: --rounds, made even so that each design's mean
    /// place in the order is the middle ([`crate::engine::order`]).
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
    /// The designs measured besides the baseline, in order.
    designs: Vec<String>,
    skipped: Vec<Skipped>,
    /// --full: more concurrent clients than pool members.
    overload_children: u64,
    /// Each design (`condition`, the baseline `iterative` too) at each
    /// `load` (`closed`; with --full `overload`, and `open` at each
    /// `fraction` of the best closed-loop rate, `offered_per_s`): the
    /// metrics of [`Run`] over the rounds.
    series: Vec<Series>,
    /// Each design's CPU above the same round's baseline, where the load
    /// has one: `cpu_s` and `cpu_us_per_connection` (Stevens' measure).
    above_baseline: Vec<Series>,
    verdict: Verdict,
}

fn main(ctx: &Context, plan: &Plan) -> Result<()> {
    let args: Args = plan.args();
    let out = plan.start(ctx)?;
    let bins = crate::bins::package_programs("servers", &["server", "client"])?;
    let ports = ports();
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
    let ctx = Ctx {
        server: bins[0].clone(),
        client: bins[1].clone(),
        pool: args.pool,
        modern_pool,
        byte_reads: args.byte_reads,
    };
    let load =
        Load { children: args.children, loops, bytes: args.bytes, rate: None };
    // io_uring (or anything the kernel refuses) is skipped with the
    // server's own reason.
    let mut skipped = Vec::new();
    let mut conditions = vec![BASELINE];
    for d in DESIGNS[1..].iter().copied() {
        if !args.designs.is_empty() && !args.designs.iter().any(|a| a == d) {
            continue;
        }
        match ctx.probe(d) {
            Ok(()) => conditions.push(d),
            Err(reason) => skipped.push(Skipped { design: d.into(), reason }),
        }
    }
    let mut engine = Engine::new(args.common.rounds);
    let overload_children = 2 * args.pool.max(modern_pool);
    let overloaded = args.common.full.then_some(overload_children);
    measure(&mut engine, &ctx, &conditions, &load, overloaded)?;
    let observations = engine.finish();
    let obs = Observations(&observations);
    let data = Data {
        rounds: balanced_rounds(args.common.rounds as usize, conditions.len())
            as u32,
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
        designs: conditions[1..].iter().map(|d| d.to_string()).collect(),
        skipped,
        overload_children: overload_children.into(),
        series: obs.series(),
        above_baseline: above_baseline(obs),
        verdict: verdict(obs, &conditions[1..]),
    };
    let mut header = Header::new(EXPERIMENT.name);
    header.settings.used("rounds, balanced over the designs", data.rounds);
    header.settings.used("--quick", args.quick);
    header.settings.used("loops per client", loops);
    let report = Report {
        header,
        headline: headline(obs, &data.verdict),
        tables: tables(&data, obs),
        charts: charts(&data, obs),
        files: bars(&data, obs),
        observations,
        data,
    };
    report.publish(&args.common, &out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Observation;

    /// One round of the baseline and each design under the closed loop:
    /// `cpu` total seconds for 1000 connections, `cps` connections/s.
    fn measured(designs: &[(&str, f64, f64)]) -> Vec<Observation> {
        let one = |position, &(design, cpu, cps): &(&str, f64, f64)| {
            let metrics = vec![
                ("cpu_s", cpu),
                ("cpu_us_per_connection", cpu * 1e3),
                ("connections_ok", 1000.0),
                ("connections_per_s", cps),
                ("p50_ms", 0.1),
                ("p99_ms", 1.0),
                ("switches_per_connection", 2.0),
                ("pool", 15.0),
            ];
            Observation::of(&closed(), design, Some(1), position, &metrics)
        };
        designs.iter().enumerate().map(|(k, d)| one(k, d)).collect()
    }

    #[test]
    fn the_ratios_use_the_cheapest_pool_and_refuse_a_pool_at_baseline() {
        let log = measured(&[
            ("iterative", 1.0, 100.0),
            ("fork", 11.0, 50.0),
            ("prefork", 2.0, 300.0),
            ("prefork-pass", 1.5, 200.0),
            ("thread", 3.0, 80.0),
            ("prethread-mutex", 0.9, 250.0),
            ("epoll", 1.1, 400.0),
        ]);
        let obs = Observations(&log);
        let designs: Vec<&str> =
            log[1..].iter().map(|o| o.condition.as_str()).collect();
        let v = verdict(obs, &designs);
        let design = |b: &Option<Best>| b.as_ref().map(|b| b.design.clone());
        assert_eq!(design(&v.best_prefork).as_deref(), Some("prefork-pass"));
        assert_eq!(v.fork_over_best_prefork, Some(20.0));
        assert_eq!(v.fork_over_best_prefork_total_cpu, Some(11.0 / 1.5));
        // The best prethreaded pool is below the baseline: no ratio above
        // it, but the total-CPU ratio stands.
        assert_eq!(design(&v.best_prethread).as_deref(), Some("prethread-mutex"));
        assert_eq!(v.thread_over_best_prethread, None);
        assert_eq!(v.thread_over_best_prethread_total_cpu, Some(3.0 / 0.9));
        let classic = design(&v.best_classic_connections_per_s);
        assert_eq!(classic.as_deref(), Some("prefork"));
        let modern = design(&v.best_modern_connections_per_s);
        assert_eq!(modern.as_deref(), Some("epoll"));
        let above = above_baseline(obs);
        let fork = above.iter().find(|s| s.condition == "fork").unwrap();
        assert_eq!(fork.get("cpu_us_per_connection").unwrap().median, 10_000.0);
        assert_eq!(above.len(), designs.len(), "every design, not the baseline");
        // Without fork or a prefork pool there is no ratio at all.
        let v = verdict(obs, &designs[3..]);
        assert!(v.best_prefork.is_none() && v.fork_over_best_prefork.is_none());
    }

    #[test]
    fn the_tables_and_bars_show_every_design_against_the_baseline() {
        let mut log = measured(&[
            ("iterative", 1.0, 100.0),
            ("fork", 3.0, 50.0),
            ("prefork", 1.5, 300.0),
        ]);
        log[1].metrics.insert("pool".into(), 0.0);
        for (m, v) in [("per_member_min", 60.0), ("per_member_max", 70.0)] {
            log[2].metrics.insert(m.into(), v);
        }
        log[2].metrics.insert("wakeups_per_connection".into(), 1.25);
        let obs = Observations(&log);
        let designs = ["fork", "prefork"];
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
            designs: designs.map(String::from).into(),
            skipped: vec![Skipped {
                design: "io-uring".into(),
                reason: "no".into(),
            }],
            overload_children: 30,
            series: obs.series(),
            above_baseline: above_baseline(obs),
            verdict: verdict(obs, &designs),
        };
        let t = tables(&d, obs);
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
        let files = bars(&d, obs);
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["cpu-per-connection.svg", "connections-per-s.svg"]);
        assert!(files.iter().all(|(_, svg)| svg.starts_with("<svg")));
        // The baseline is a bar of connections/s, not of CPU above itself.
        let bar = ">iterative<";
        assert!(files[1].1.contains(bar) && !files[0].1.contains(bar));
        assert!(charts(&d, obs).is_empty(), "no sweep, no chart");
    }
}
