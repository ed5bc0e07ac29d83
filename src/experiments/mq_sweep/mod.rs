//! `lab run mq-sweep`: the message-queue thread-count sweep (the 2006 message-queue post).
//! For each pool size T, `broker --readers T --writers T --deliverers T`
//! and `load` (100 senders, 100 receivers, 4 queues, 1 KiB messages) run
//! as separate processes on loopback; then one row for the broker as a
//! single epoll thread. Each row: messages/s, the broker's CPU, its context
//! switches per message and the estimated share of its CPU time spent
//! switching (switches x the cost of one switch / CPU time), and latency.
//!
//! Then the same load, from the same `load`, on two production brokers
//! (`servers`): Redis pub/sub with `io-threads` 1, 2 and 4 (reads in the
//! I/O threads or not) and NATS with `GOMAXPROCS` 1 and 2, each a row with
//! the same columns, the server's CPU and switches from its own counters.
//!
//! `run` spawns the programs (broker, load, and ctxswitch when no
//! ctx-switch results give the cost of a switch); `servers` starts and
//! stops Redis and NATS; `tables` makes the tables and charts from the
//! results alone.

mod run;
mod servers;
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

pub const EXPERIMENT: Experiment = Experiment::new("mq-sweep", "message-queue broker: throughput and switching vs threads per pool (the 2006 message-queue post), beside Redis and NATS", main)
.under_all(&["--rounds", "3", "--redis-io-threads", "1", "--nats-gomaxprocs", "2"]);

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

    /// Redis io-threads to try (1: the main thread does all; above 1, each
    /// value twice, with the I/O threads writing only and reading too)
    #[arg(long, value_delimiter = ',', default_value = "1,2,4",
          value_parser = clap::value_parser!(u32).range(1..=128))]
    redis_io_threads: Vec<u32>,

    /// NATS GOMAXPROCS values to try
    #[arg(long, value_delimiter = ',', default_value = "1,2",
          value_parser = clap::value_parser!(u32).range(1..=256))]
    nats_gomaxprocs: Vec<u32>,

    /// The brokers to sweep: the lab's own (its pools and event loop),
    /// Redis and NATS
    #[arg(long, value_delimiter = ',', value_enum,
          default_value = "lab,redis,nats")]
    brokers: Vec<Broker>,

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

/// One run: what `load --json` printed and the broker's accounting: the
/// lab broker's own `--json` stats line, or for Redis and NATS the
/// kernel's (`wait4` when the server was stopped), each its own type.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Run {
    load: LoadReport,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    broker: Option<Stats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    server: Option<labkit::measure::Usage>,
    /// From the broker's start to its exit.
    broker_wall_s: f64,
}

impl Run {
    /// The broker's CPU time, user + sys, in seconds.
    fn cpu_s(&self) -> f64 {
        match (&self.broker, &self.server) {
            (Some(b), _) => b.user_s + b.sys_s,
            (None, Some(s)) => s.user_s + s.sys_s,
            (None, None) => 0.0,
        }
    }

    /// The broker's voluntary and involuntary context switches.
    fn switches(&self) -> (u64, u64) {
        match (&self.broker, &self.server) {
            (Some(b), _) => (b.voluntary_switches, b.involuntary_switches),
            (None, Some(s)) => (s.voluntary_switches, s.involuntary_switches),
            (None, None) => (0, 0),
        }
    }

    /// Messages delivered: the lab broker's count (checked against the
    /// load's), or what the load received.
    fn delivered(&self) -> u64 {
        self.broker.as_ref().map_or(self.load.received, |b| b.messages_out)
    }
}

/// A broker `--brokers` can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Broker {
    /// The lab's broker: the pool sizes of --threads and the event loop
    Lab,
    /// redis-server, pub/sub
    Redis,
    /// nats-server, core pub/sub
    Nats,
}

/// A point of the sweep.
#[derive(Clone, Copy, Debug)]
enum Point {
    /// The lab broker with T threads per pool.
    Pool(u32),
    /// The lab broker as one epoll thread.
    EventLoop,
    /// Redis or NATS.
    Server(servers::Setting),
}

impl Point {
    fn mode(&self) -> &'static str {
        match self {
            Point::Pool(_) => "threads",
            Point::EventLoop => "event-loop",
            Point::Server(s) => match s.kind {
                servers::Kind::Redis => "redis",
                servers::Kind::Nats => "nats",
            },
        }
    }

    /// Its row's key, for the book's pointers (`threads-10`, `event-loop`,
    /// `redis-2-reads`, `nats-1`).
    fn key(&self) -> String {
        match self {
            Point::Pool(t) => format!("threads-{t}"),
            Point::EventLoop => "event-loop".into(),
            Point::Server(s) => s.key(),
        }
    }

    fn label(&self) -> String {
        match self {
            Point::Pool(t) => format!("lab broker, {t} threads per pool"),
            Point::EventLoop => "lab broker, event loop (1 thread)".into(),
            Point::Server(s) => s.label(),
        }
    }
}

#[derive(Serialize)]
struct Row {
    /// "threads", "event-loop", "redis" or "nats".
    mode: &'static str,
    /// `threads-10`, `event-loop`, `redis-2-reads`, `nats-1`.
    key: String,
    label: String,
    /// Threads per pool (0 for the event loop), Redis's io-threads or
    /// NATS's GOMAXPROCS.
    threads: u32,
    /// Redis: the I/O threads read and parse too.
    #[serde(skip_serializing_if = "Option::is_none")]
    reads_in_threads: Option<bool>,
    /// More threads than the CPUs the run was allowed.
    above_cpus: bool,
    /// Redis's or NATS's program, version and settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    server: Option<servers::ServerInfo>,
    messages_per_s: Summary,
    /// Broker CPU time / the sending window (first send to last receipt),
    /// in percent (200% = both of 2 cores).
    broker_cpu_pct: Summary,
    switches_per_message: Summary,
    voluntary_per_message: Summary,
    involuntary_per_message: Summary,
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
    /// Servers the sweep would have run that this machine lacks.
    missing: Vec<Missing>,
}

/// A server the sweep found, by kind.
type Found = (servers::Kind, servers::Installed);

/// A server that is not installed, and how to install it.
#[derive(Serialize)]
struct Missing {
    program: &'static str,
    install: &'static str,
}

fn main(ctx: &Context, argv: Vec<OsString>) -> Result<()> {
    let args = labkit::cli::parse_from::<Args, _, _>(argv);
    args.shape.check()?;
    let out = args.common.start(ctx, EXPERIMENT.name)?;
    let bins = run::programs()?;
    let duration = args.duration.unwrap_or(if args.common.full { 5.0 } else { 1.0 });
    let switch_cost = run::switch_cost(&args, out.run.as_deref())?;
    let mut points: Vec<Point> = Vec::new();
    if args.brokers.contains(&Broker::Lab) {
        points.extend(args.threads.iter().map(|&t| Point::Pool(t)));
        if !args.no_event_loop {
            points.push(Point::EventLoop);
        }
    }
    let (installed, missing) = servers_to_run(&args)?;
    for (kind, _) in &installed {
        points.extend(server_settings(&args, *kind).into_iter().map(Point::Server));
    }
    for m in &missing {
        eprintln!(
            "lab: note: {} is not installed ({}); its rows are left out",
            m.program, m.install
        );
    }
    let cpus = labkit::affinity::allowed_cpus().map_or(0, |c| c.len());
    let rounds = args.common.rounds as usize;
    let bar = crate::progress::bar((points.len() * rounds) as u64, EXPERIMENT.name);
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); points.len()];
    for round in 0..rounds {
        // One pass over every point per round, in the lab's round order
        // (rotated by one each round), so drift on a shared machine spreads
        // over all of them instead of favouring the first.
        for i in round_order(points.len(), round) {
            let p = points[i];
            bar.set_message(p.key());
            let run = match p {
                Point::Pool(t) => run::run_once(&bins[0], &bins[1], Some(t), &args, duration)?,
                Point::EventLoop => run::run_once(&bins[0], &bins[1], None, &args, duration)?,
                Point::Server(s) => {
                    let inst = &installed.iter().find(|(k, _)| *k == s.kind).expect("found").1;
                    run::run_server(inst, &s, &bins[1], &args, duration)?
                }
            };
            runs[i].push(run);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let rows = points
        .iter()
        .zip(runs)
        .map(|(p, runs)| {
            let info = match p {
                Point::Server(s) => installed
                    .iter()
                    .find(|(k, _)| *k == s.kind)
                    .map(|(_, inst)| inst.info(s)),
                _ => None,
            };
            let mut r = row(*p, runs, switch_cost.us);
            r.server = info;
            r.above_cpus = cpus > 0 && r.threads as usize > cpus && r.mode != "event-loop";
            r
        })
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
        missing,
    };
    let mut report = Report {
        header: Header::new(EXPERIMENT.name),
        headline: headline(&data),
        tables: tables::tables(&data),
        charts: tables::charts(&data),
        files: Vec::new(),
        data,
    };
    // brokers.md: every broker's table on its own, for the book's page on
    // Redis and NATS, headed as tables.md is.
    let header = report.header_for(&args.common, &out);
    let brokers = crate::report::markdown(&header, &[tables::brokers(&report.data)]);
    report.files.push(("brokers.md".to_string(), brokers));
    report.publish(&args.common, &out)
}

/// The Redis and NATS servers this run can have (not asked to leave them
/// out, and installed), and those it lacks.
fn servers_to_run(args: &Args) -> Result<(Vec<Found>, Vec<Missing>)> {
    let (mut found, mut missing) = (Vec::new(), Vec::new());
    let asked = [(Broker::Redis, servers::Kind::Redis), (Broker::Nats, servers::Kind::Nats)];
    let asked = asked.into_iter().filter(|(b, _)| args.brokers.contains(b));
    for (_, kind) in asked {
        match servers::find(kind)? {
            Some(inst) => found.push((kind, inst)),
            None => missing.push(Missing { program: kind.program(), install: kind.install() }),
        }
    }
    Ok((found, missing))
}

/// The settings of `kind` the flags ask for: Redis's io-threads (above 1,
/// each with reads in the I/O threads and without), NATS's GOMAXPROCS.
fn server_settings(args: &Args, kind: servers::Kind) -> Vec<servers::Setting> {
    use servers::{Kind, Setting};
    match kind {
        Kind::Redis => args
            .redis_io_threads
            .iter()
            .flat_map(|&t| {
                let reads: &[bool] = if t == 1 { &[false] } else { &[false, true] };
                reads.iter().map(move |&reads| Setting { kind, threads: t, reads })
            })
            .collect(),
        Kind::Nats => args
            .nats_gomaxprocs
            .iter()
            .map(|&t| Setting { kind, threads: t, reads: false })
            .collect(),
    }
}

fn row(point: Point, runs: Vec<Run>, cost_us: f64) -> Row {
    let of = |f: &dyn Fn(&Run) -> f64| Summary::of_rounds(runs.iter().map(f));
    let cpu = |r: &Run| r.cpu_s();
    let switches = |r: &Run| {
        let (v, i) = r.switches();
        (v + i) as f64
    };
    let per_message = |r: &Run, n: u64| n as f64 / r.delivered().max(1) as f64;
    let share = |r: &Run| 100.0 * switches(r) * cost_us * 1e-6 / cpu(r).max(1e-9);
    let (threads, reads) = match point {
        Point::Pool(t) => (t, None),
        Point::EventLoop => (0, None),
        Point::Server(s) => {
            (s.threads, (s.kind == servers::Kind::Redis).then_some(s.reads))
        }
    };
    Row {
        switch_share_rounds: runs.iter().map(share).collect(),
        mode: point.mode(),
        key: point.key(),
        label: point.label(),
        threads,
        reads_in_threads: reads,
        above_cpus: false,
        server: None,
        messages_per_s: of(&|r| r.load.messages_per_s),
        broker_cpu_pct: of(&|r| 100.0 * cpu(r) / r.load.elapsed_s.max(1e-9)),
        switches_per_message: of(&|r| switches(r) / r.delivered().max(1) as f64),
        voluntary_per_message: of(&|r| per_message(r, r.switches().0)),
        involuntary_per_message: of(&|r| per_message(r, r.switches().1)),
        switch_share_pct: of(&share),
        cpu_us_per_message: of(&|r| 1e6 * cpu(r) / r.delivered().max(1) as f64),
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
    // Per round, the best throughput among some rows (all ran in round k's
    // pass); None without such rows.
    let best_among = |keep: &dyn Fn(&Row) -> bool| -> Option<Vec<f64>> {
        let rows: Vec<&Row> = data.rows.iter().filter(|r| keep(r)).collect();
        let n = rows.iter().map(|r| r.runs.len()).min()?;
        let best = |k: usize| {
            rows.iter().map(|r| r.runs[k].load.messages_per_s).fold(f64::MIN, f64::max)
        };
        Some((0..n).map(best).collect())
    };
    let ours = best_among(&|r| r.mode == "threads" || r.mode == "event-loop");
    let redis = best_among(&|r| r.mode == "redis");
    let nats = best_among(&|r| r.mode == "nats");
    // The 2006 question asked of each server: its fewest threads against
    // more, each round's best setting of that count.
    let server_at = |mode: &'static str, n: u32| {
        best_among(&move |r: &Row| r.mode == mode && r.threads == n)
    };
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
            best_among(&|r| r.mode == "threads"),
            "msg/s",
        )
        .rounds(
            "event_loop_messages_per_s",
            "the epoll event loop",
            event.map(rates),
            "msg/s",
        )
        .rounds("ours_best_messages_per_s", "the lab broker's best design, each round", ours.clone(), "msg/s")
        .rounds("redis_best_messages_per_s", "Redis's best setting, each round", redis.clone(), "msg/s")
        .rounds("nats_best_messages_per_s", "NATS's best setting, each round", nats.clone(), "msg/s")
        .paired(
            "ours_over_redis",
            "the lab broker's best over Redis's best, in the same round",
            ours.clone(),
            redis,
        )
        .paired(
            "ours_over_nats",
            "the lab broker's best over NATS's best, in the same round",
            ours,
            nats,
        )
        .paired(
            "redis_one_over_two",
            "Redis: io-threads 1 over 2 (the better of reads or not), in the same round",
            server_at("redis", 1),
            server_at("redis", 2),
        )
        .paired(
            "redis_one_over_four",
            "Redis: io-threads 1 over 4 (above the CPUs), in the same round",
            server_at("redis", 1),
            server_at("redis", 4),
        )
        .paired(
            "nats_one_over_two",
            "NATS: GOMAXPROCS 1 over 2, in the same round",
            server_at("nats", 1),
            server_at("nats", 2),
        )
        .build()
}
