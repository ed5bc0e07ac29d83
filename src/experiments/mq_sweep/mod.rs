//! `lab run mq-sweep`: the message-queue thread-count sweep (article 004).
//! For each pool size T, `broker --readers T --writers T --deliverers T`
//! and `load` (100 senders, 100 receivers, 4 queues, 1 KiB messages) run
//! as separate processes on loopback; then one row for the broker as a
//! single epoll thread. Each row: messages/s, the broker's CPU, its context
//! switches per message and the estimated share of its CPU time spent
//! switching (switches x the cost of one switch / CPU time), and latency.
//!
//! `run` spawns the programs (broker, load, and ctxswitch when no
//! ctx-switch results give the cost of a switch); `tables` makes the
//! tables and charts from the results alone.

mod run;
mod tables;

use std::ffi::OsString;
use std::path::PathBuf;

use crate::results::Header;
use crate::stats::{Summary, round_order};
use clap::Parser;
use labkit::Result;
use mq::Stats;
use mq::load::LoadReport;
use serde::{Deserialize, Serialize};

use super::Experiment;
use crate::report::{Common, Context, Headline, Report};

pub const EXPERIMENT: Experiment = Experiment::new("mq-sweep", "message-queue broker: throughput and switching vs threads per pool (article 004)", main)
.under_all(&["--rounds", "3"]);

/// The message-queue sweep: threads per pool against messages/s and the
/// CPU spent switching, plus one single-threaded event-loop row.
#[derive(Parser)]
struct Args {
    #[command(flatten)]
    common: Common,

    /// Threads per pool (readers = writers = deliverers) to try
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,10,20,50,100",
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    threads: Vec<u32>,

    /// Seconds of sending per run [default: 1; 5 with --full]
    #[arg(long, value_name = "SECONDS", value_parser = seconds)]
    duration: Option<f64>,

    /// The load generator's senders, receivers, queues and message size
    #[command(flatten)]
    shape: mq::load::Shape,

    /// Messages/s the load generator offers, all senders together; 0 sends
    /// as fast as the broker takes them (saturation, as the article did)
    #[arg(long, value_name = "MSGS_PER_S", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=100_000_000))]
    rate: u32,

    /// Leave out the event-loop row
    #[arg(long)]
    no_event_loop: bool,

    /// Cost of one context switch in microseconds, instead of taking it
    /// from this run's or the reference run's ctx-switch results, or
    /// measuring it with `ctxswitch`
    #[arg(long, value_name = "US", value_parser = seconds)]
    switch_cost_us: Option<f64>,

    /// Take the cost of one switch from this ctx-switch results file
    /// (`ctx-switch.json` of a `lab run ctx-switch`) [default: this run's
    /// or the reference run's, if there is one]
    #[arg(long, value_name = "FILE", conflicts_with = "switch_cost_us")]
    switch_cost_from: Option<PathBuf>,
}

fn seconds(text: &str) -> std::result::Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s <= 3600.0 => Ok(s),
        _ => Err(format!("'{text}' is not a positive number up to 3600")),
    }
}

/// One run: what `load --json` and the broker's `--json` stats line
/// printed, each the program's own type.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Run {
    load: LoadReport,
    broker: Stats,
    /// From the broker's start to its exit.
    broker_wall_s: f64,
}

#[derive(Serialize)]
struct Row {
    /// "threads" or "event-loop".
    mode: &'static str,
    /// Threads per pool (0 for the event loop).
    threads: u32,
    messages_per_s: Summary,
    /// Broker CPU time / the sending window (first send to last receipt),
    /// in percent (200% = both of 2 cores).
    broker_cpu_pct: Summary,
    switches_per_message: Summary,
    /// Switches x cost per switch / broker CPU time, in percent.
    switch_share_pct: Summary,
    /// The same, each round's.
    switch_share_rounds: Vec<f64>,
    /// Broker CPU time per message delivered, microseconds.
    cpu_us_per_message: Summary,
    p50_ms: Summary,
    p99_ms: Summary,
    runs: Vec<Run>,
}

#[derive(Clone, Debug, Serialize)]
struct SwitchCost {
    us: f64,
    /// Where the figure came from.
    source: String,
}

#[derive(Serialize)]
struct Data {
    rounds: u32,
    full: bool,
    duration_s: f64,
    senders: u32,
    receivers: u32,
    queues: u16,
    size: u64,
    /// Offered messages/s (0: saturation).
    rate: u32,
    switch_cost: SwitchCost,
    rows: Vec<Row>,
}

fn main(ctx: &Context, argv: Vec<OsString>) -> Result<()> {
    let args = labkit::cli::parse_from::<Args, _, _>(argv);
    args.shape.check()?;
    let out = args.common.start(ctx, EXPERIMENT.name)?;
    let bins = run::programs()?;
    let duration = args.duration.unwrap_or(if args.common.full { 5.0 } else { 1.0 });
    let switch_cost = run::switch_cost(&args, out.run.as_deref())?;
    let mut points: Vec<Option<u32>> =
        args.threads.iter().map(|&t| Some(t)).collect();
    if !args.no_event_loop {
        points.push(None);
    }
    let rounds = args.common.rounds as usize;
    let bar = crate::progress::bar((points.len() * rounds) as u64, EXPERIMENT.name);
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); points.len()];
    for round in 0..rounds {
        // One pass over every point per round, in the lab's round order
        // (rotated by one each round), so drift on a shared machine spreads
        // over all of them instead of favouring the first.
        for i in round_order(points.len(), round) {
            let p = points[i];
            bar.set_message(p.map_or("event loop".into(), |t| format!("T={t}")));
            runs[i].push(run::run_once(&bins[0], &bins[1], p, &args, duration)?);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let rows = points
        .iter()
        .zip(runs)
        .map(|(p, runs)| row(*p, runs, switch_cost.us))
        .collect();
    let data = Data {
        rounds: args.common.rounds,
        full: args.common.full,
        duration_s: duration,
        senders: args.shape.senders,
        receivers: args.shape.receivers,
        queues: args.shape.queues,
        size: args.shape.size,
        rate: args.rate,
        switch_cost,
        rows,
    };
    let report = Report {
        header: Header::new(EXPERIMENT.name),
        headline: headline(&data),
        tables: tables::tables(&data),
        charts: tables::charts(&data),
        files: Vec::new(),
        data,
    };
    report.publish(&args.common, &out)
}

fn row(threads: Option<u32>, runs: Vec<Run>, cost_us: f64) -> Row {
    let of = |f: &dyn Fn(&Run) -> f64| Summary::of_rounds(runs.iter().map(f));
    let cpu = |r: &Run| r.broker.user_s + r.broker.sys_s;
    let switches = |r: &Run| {
        (r.broker.voluntary_switches + r.broker.involuntary_switches) as f64
    };
    let share = |r: &Run| 100.0 * switches(r) * cost_us * 1e-6 / cpu(r).max(1e-9);
    Row {
        switch_share_rounds: runs.iter().map(share).collect(),
        mode: if threads.is_some() { "threads" } else { "event-loop" },
        threads: threads.unwrap_or(0),
        messages_per_s: of(&|r| r.load.messages_per_s),
        broker_cpu_pct: of(&|r| 100.0 * cpu(r) / r.load.elapsed_s.max(1e-9)),
        switches_per_message: of(&|r| {
            switches(r) / r.broker.messages_out.max(1) as f64
        }),
        switch_share_pct: of(&share),
        cpu_us_per_message: of(&|r| {
            1e6 * cpu(r) / r.broker.messages_out.max(1) as f64
        }),
        p50_ms: of(&|r| r.load.latency.p50_us / 1000.0),
        p99_ms: of(&|r| r.load.latency.p99_us / 1000.0),
        runs,
    }
}

// ANCHOR: article
/// The article's figures (one CPU, JTangMQ in Java, 2006).
fn article(threads: u32) -> (&'static str, &'static str) {
    match threads {
        100 => ("~600", "~30%"),
        10 => ("~800", "~10%"),
        4 | 20 | 50 => ("< 800", "-"),
        _ => ("-", "-"),
    }
}
// ANCHOR_END: article

/// The figures the claims are judged on: throughput and switching share at
/// 10 and 100 threads per pool, the best pool size, the event loop.
fn headline(data: &Data) -> Headline {
    let pool = |n| data.rows.iter().find(|r| r.mode == "threads" && r.threads == n);
    let rates = |r: &Row| -> Vec<f64> {
        r.runs.iter().map(|run| run.load.messages_per_s).collect()
    };
    let rate = |n| pool(n).map(rates);
    let share = |n| pool(n).map(|r| r.switch_share_rounds.clone());
    let pools: Vec<&Row> =
        data.rows.iter().filter(|r| r.mode == "threads").collect();
    // Round k of every pool size ran in the same pass: the best of round k.
    let rounds = pools.iter().map(|r| r.runs.len()).min().unwrap_or(0);
    let best_of = |k: usize| {
        pools.iter().max_by(|a, b| {
            a.runs[k].load.messages_per_s.total_cmp(&b.runs[k].load.messages_per_s)
        })
    };
    let best: Option<Vec<&Row>> = (!pools.is_empty() && rounds > 0)
        .then(|| (0..rounds).filter_map(best_of).copied().collect());
    let event = data.rows.iter().find(|r| r.mode == "event-loop");
    crate::report::headline()
        .rounds("messages_per_s_10", "10 threads per pool", rate(10), "msg/s")
        .rounds("messages_per_s_100", "100 threads per pool", rate(100), "msg/s")
        .paired(
            "ten_over_hundred",
            "throughput at 10 threads per pool over 100, in the same round",
            rate(10),
            rate(100),
        )
        .rounds(
            "switch_share_10",
            "switching's share of broker CPU, 10 threads",
            share(10),
            "%",
        )
        .rounds(
            "switch_share_100",
            "switching's share of broker CPU, 100 threads",
            share(100),
            "%",
        )
        .rounds(
            "best_pool",
            "threads per pool at the round's best throughput",
            best.as_ref().map(|b| b.iter().map(|r| f64::from(r.threads)).collect()),
            "",
        )
        .rounds(
            "best_pool_messages_per_s",
            "the round's best throughput over the pool sizes",
            best.as_ref().map(|b| {
                b.iter()
                    .enumerate()
                    .map(|(k, r)| r.runs[k].load.messages_per_s)
                    .collect()
            }),
            "msg/s",
        )
        .rounds(
            "event_loop_messages_per_s",
            "the epoll event loop",
            event.map(rates),
            "msg/s",
        )
        .build()
}
