//! `lab run mq-sweep`: the message-queue thread-count sweep (the 2006
//! message-queue post). For each pool size T, `broker --readers T --writers T
//! --deliverers T` and `load` (100 senders, 100 receivers, 4 queues, 1 KiB
//! messages) run as separate processes on loopback; then the broker as one
//! epoll thread, and Redis pub/sub (`io-threads`) and NATS (`GOMAXPROCS`)
//! under the same load. Each row: messages/s, the broker's CPU, its switches
//! per message, the share of its CPU spent switching, and latency.
//!
//! Each design (and the floor, the work without a broker) is a condition of
//! the engine and each `--pipeline` value (with the offered rate) a setting,
//! so one round runs every design back to back and the figures compare
//! designs within a round.

mod run;
mod servers;
mod tables;

use std::path::PathBuf;

use crate::engine::{self, Engine, Observations, Observed, Series};
use crate::results::Header;
use clap::Parser;
use labkit::Result;
use labkit::measure::Usage;
use mq::Stats;
use mq::load::{FloorReport, LoadReport};
use mq::wire::Wire;
use serde::Serialize;

use super::{Declared, Experiment};
use crate::plan::Plan;
use crate::report::{Common, Context, Report};
use run::Cost;

pub const EXPERIMENT: Experiment = Experiment::new::<Args>("mq-sweep", "message-queue broker: throughput and switching vs threads per pool (the 2006 message-queue post), beside Redis and NATS", main)
.under_all(
    Declared::own(&[
        "--redis-io-threads", "1", "--nats-gomaxprocs", "2",
        // Pipelined: one point per design (10 threads per pool, the event
        // loop, Redis, NATS) and the open-loop point, so `lab run all`
        // stays within its five minutes; `lab run mq-sweep` repeats the
        // whole sweep.
        "--pipeline", "1,16", "--pipelined-threads", "10",
        // Half a second of sending per run: 48 s for this step against 73.
        "--duration", "0.5",
    ])
    // Two rounds, even as the engine's order asks: no claim is judged on
    // this run (mq-sweep's are judged on the one-CPU run below).
    .rounds(2),
)
// Its claims are judged on one CPU, at 10 and 100 threads per pool: the
// one-CPU run measures those, at the six rounds a verdict needs. Only the
// lab's pools run there, with no open-loop point (a quarter of its time):
// the two-CPU run above sets the pools beside the event loop, Redis and
// NATS, and runs the open-loop point.
.one_cpu_under_all(
    Declared::own(&[
        "--threads", "10,100", "--brokers", "lab", "--no-event-loop",
        "--pipeline", "1", "--no-open-loop",
    ])
    .rounds(6),
)
.headline(&[
    "messages_per_s_10", "messages_per_s_100", "ten_over_hundred",
    "switch_share_10", "switch_share_100", "best_pool", "best_pool_messages_per_s",
    "event_loop_messages_per_s", "ours_best_messages_per_s",
    "redis_best_messages_per_s", "nats_best_messages_per_s", "ours_over_redis",
    "ours_over_nats", "redis_one_over_two", "redis_one_over_four",
    "nats_one_over_two", "floor_messages_per_s_p{pipeline}",
    "ten_over_hundred_p{pipeline}", "ours_best_messages_per_s_p{pipeline}",
    "redis_best_messages_per_s_p{pipeline}", "nats_best_messages_per_s_p{pipeline}",
    "best_pool_messages_per_s_p{pipeline}", "best_pool_p{pipeline}",
    "ours_over_redis_p{pipeline}", "ours_over_nats_p{pipeline}",
    "ours_fraction_of_floor_p{pipeline}", "open_loop_rate", "open_loop_p99_ms_ours",
    "open_loop_p99_ms_redis", "open_loop_p99_ms_nats",
    "open_loop_nats_over_ours_p99",
])
.data::<Data>();

/// The message-queue sweep: threads per pool against messages/s and the
/// CPU spent switching, plus one single-threaded event-loop row.
#[derive(Parser, Clone)]
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

    /// Messages per write of each sender (pipelining), for every broker:
    /// the sweep runs once per value (1: one message per write), and a
    /// floor of the work without a broker is measured for each
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "1,16",
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pipeline: Vec<u32>,

    /// Threads per pool to try at a --pipeline above 1 [default: those of
    /// --threads]
    #[arg(long, value_name = "LIST", value_delimiter = ',',
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pipelined_threads: Option<Vec<u32>>,

    /// Leave out the open-loop point (each broker's best design at a fixed
    /// rate, half the slowest broker's best at --pipeline 16 or the
    /// largest value given)
    #[arg(long)]
    no_open_loop: bool,

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
    #[arg(
        long,
        value_delimiter = ',',
        value_enum,
        default_value = "lab,redis,nats"
    )]
    brokers: Vec<Broker>,

    /// Cost of one context switch in microseconds, instead of measuring it
    /// with `ctxswitch` just before each run
    #[arg(long, value_name = "US", value_parser = seconds)]
    switch_cost_us: Option<f64>,

    /// Take the cost of one switch from this ctx-switch results file
    /// (`ctx-switch.json` of a `lab run ctx-switch`) [default: measured with
    /// `ctxswitch` just before each run]
    #[arg(long, value_name = "FILE", conflicts_with = "switch_cost_us")]
    switch_cost_from: Option<PathBuf>,
}
crate::options!(Args);

fn seconds(text: &str) -> std::result::Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s <= 3600.0 => Ok(s),
        _ => Err(format!("'{text}' is not a positive number up to 3600")),
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

/// One run of a design: what `load --json` printed and the broker's
/// accounting: the lab broker's own `--json` stats line, or for Redis and
/// NATS the kernel's (`wait4` when the server was stopped).
#[derive(Clone, Debug)]
struct Run {
    load: LoadReport,
    broker: Option<Stats>,
    server: Option<Usage>,
    /// From the broker's start to its exit.
    broker_wall_s: f64,
    /// The cost of one switch, µs, that its switching share is reckoned at.
    switch_cost_us: f64,
}

impl Observed for Run {
    /// What the load saw (messages, losses, latency, its own CPU), the
    /// broker's CPU and switches, and both per message delivered (the lab
    /// broker's count, checked against the load's, or what the load
    /// received); the switching share is switches x the cost of one over
    /// the broker's CPU time, in percent.
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        let (l, b) = (&self.load, self.broker.as_ref());
        let (cpu, v, i) = if let Some(b) = b {
            (b.user_s + b.sys_s, b.voluntary_switches, b.involuntary_switches)
        } else if let Some(s) = &self.server {
            (s.user_s + s.sys_s, s.voluntary_switches, s.involuntary_switches)
        } else {
            (0.0, 0, 0)
        };
        let (v, i) = (v as f64, i as f64);
        let n = b.map_or(l.received, |b| b.messages_out).max(1) as f64;
        let mut m = vec![
            ("messages_per_s", l.messages_per_s),
            ("sent", l.sent as f64),
            ("received", l.received as f64),
            ("lost", l.lost as f64),
            ("duplicated", l.duplicated as f64),
            ("corrupt", l.corrupt as f64),
            // Messages per write (not `pipeline`: the setting's factor).
            ("per_write", l.pipeline as f64),
            ("p50_ms", l.latency.p50_us / 1000.0),
            ("p99_ms", l.latency.p99_us / 1000.0),
            ("mean_us", l.latency.mean_us),
            ("load_cpu_us_per_message", l.cpu_us_per_message),
            ("cpu_s", cpu),
            ("voluntary_switches", v),
            ("involuntary_switches", i),
            ("broker_wall_s", self.broker_wall_s),
            ("switch_cost_us", self.switch_cost_us),
            // Over the sending window (first send to last receipt).
            ("broker_cpu_pct", 100.0 * cpu / l.elapsed_s.max(1e-9)),
            ("cpu_us_per_message", 1e6 * cpu / n),
            ("switches_per_message", (v + i) / n),
            ("voluntary_per_message", v / n),
            ("involuntary_per_message", i / n),
            (
                "switch_share_pct",
                100.0 * (v + i) * self.switch_cost_us * 1e-6 / cpu.max(1e-9),
            ),
        ];
        if let Some(b) = b {
            m.extend([
                ("messages_in", b.messages_in as f64),
                ("messages_out", b.messages_out as f64),
                ("threads_joined", b.threads_joined as f64),
            ]);
        }
        m
    }
}

/// A run of the floor (`load --floor`): the work without a broker, whose
/// msg/s each design's are a fraction of, and whose CPU per message is its
/// two loopback hops'.
impl Observed for FloorReport {
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("messages_per_s", self.floor_messages_per_s),
            ("cpu_us_per_message", 2.0 * self.hop_cpu_us_per_message),
            ("hop_cpu_us_per_message", self.hop_cpu_us_per_message),
            ("memcpy4_ns_per_message", self.memcpy4_ns_per_message),
        ]
    }
}

/// The floor's condition.
const FLOOR: &str = "floor";

/// What a load offers: messages per write, and a rate (0: as fast as the
/// broker takes them). Each is a setting of the engine.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, schemars::JsonSchema)]
struct Offer {
    pipeline: u32,
    rate: u32,
}

impl Offer {
    fn at(self) -> engine::Setting {
        engine::setting([
            ("pipeline", self.pipeline.into()),
            ("rate", self.rate.into()),
        ])
    }
}

/// A design of the sweep.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Point {
    /// The lab broker with T threads per pool.
    Pool(u32),
    /// The lab broker as one epoll thread.
    EventLoop,
    /// Redis or NATS.
    Server(servers::Setting),
}

impl Point {
    /// Its condition (`threads-10`, `event-loop`, `redis-2-reads`,
    /// `nats-1`), which the book's pointers name.
    fn key(&self) -> String {
        match self {
            Point::Pool(t) => format!("threads-{t}"),
            Point::EventLoop => "event-loop".into(),
            Point::Server(s) => s.key(),
        }
    }
}

/// A design as the results name it: its condition, what it is and ran on.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
struct Design {
    #[serde(skip)]
    point: Point,
    condition: String,
    /// "threads", "event-loop", "redis" or "nats".
    mode: &'static str,
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
}

impl Design {
    /// The lab's own broker (a pool size or the event loop)?
    fn ours(&self) -> bool {
        self.mode == "threads" || self.mode == "event-loop"
    }
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
struct SwitchCost {
    us: f64,
    /// Where the figure came from.
    source: String,
}

/// The open-loop point: each broker's best design at one fixed rate.
#[derive(Serialize, schemars::JsonSchema)]
struct OpenLoop {
    #[serde(flatten)]
    offer: Offer,
    /// How the rate was chosen.
    rule: String,
}

#[derive(Serialize, schemars::JsonSchema)]
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
    /// Messages per write, each a setting.
    pipeline: Vec<u32>,
    switch_cost: SwitchCost,
    /// Every design, each a condition.
    designs: Vec<Design>,
    #[serde(skip_serializing_if = "Option::is_none")]
    open_loop: Option<OpenLoop>,
    /// Servers the sweep would have run that this machine lacks.
    missing: Vec<Missing>,
    /// Each design (and the floor) at each setting (`pipeline`, `rate`):
    /// every metric of its runs summed up.
    series: Vec<Series>,
}

/// A server the sweep found, by kind.
type Found = (Wire, servers::Installed);

/// A server that is not installed, and how to install it.
#[derive(Serialize, schemars::JsonSchema)]
struct Missing {
    program: String,
    install: String,
}

fn main(ctx: &Context, plan: &Plan) -> Result<()> {
    let args: Args = plan.args();
    args.shape.check()?;
    let out = plan.start(ctx)?;
    let bins = crate::bins::package_programs("mq", &["broker", "load"])?;
    let duration = args.duration.unwrap_or(if args.common.full { 5.0 } else { 1.0 });
    // A cost given is kept; else each run measures its own just before.
    let given = run::given_switch_cost(&args)?;
    let cost = match &given {
        Some(c) => Cost::Given(c.us),
        None => Cost::Measured(crate::bins::programs(&["ctxswitch"])?.remove(0)),
    };
    let (installed, missing) = servers_to_run(&args)?;
    for m in &missing {
        eprintln!(
            "lab: note: {} is not installed ({}); its rows are left out",
            m.program, m.install
        );
    }
    let cpus = labkit::affinity::allowed_cpus().map_or(0, |c| c.len());
    let mut offers = Vec::new();
    for &n in &args.pipeline {
        let offer = Offer { pipeline: n, rate: args.rate };
        offers.push((offer, designs(&args, n, &installed, cpus)));
    }
    let sweep = run::Sweep {
        bins: &bins,
        args: &args,
        installed: &installed,
        duration,
        cost,
    };
    // Fifteen designs and the floor in one round: balancing their order
    // would take sixteen rounds where six were asked.
    let mut engine = Engine::new(args.common.rounds);
    // The open-loop point runs one design per broker, if any.
    let open =
        if args.no_open_loop { 0 } else { engine.runs_for(installed.len() + 1) };
    let runs: usize = offers.iter().map(|(_, p)| engine.runs_for(p.len() + 1)).sum();
    engine.progress(runs + open, EXPERIMENT.name);
    for (offer, designs) in &offers {
        sweep.measure(&mut engine, *offer, designs, true)?;
    }
    let open_loop = open_loop(&args, engine.observations(), &offers);
    if let Some((open, designs)) = &open_loop {
        sweep.measure(&mut engine, open.offer, designs, false)?;
    }
    let mut designs: Vec<Design> = offers.into_iter().flat_map(|(_, x)| x).collect();
    let mut seen = std::collections::HashSet::new();
    designs.retain(|x| seen.insert(x.condition.clone())); // each once, first kept
    let switch_cost = given.unwrap_or_else(|| {
        let runs = engine.observations().0.iter();
        let costs: Vec<f64> =
            runs.filter_map(|o| o.metrics.get("switch_cost_us").copied()).collect();
        run::measured_switch_cost(&costs)
    });
    let data = Data {
        rounds: args.common.rounds,
        full: args.common.full,
        duration_s: duration,
        senders: args.shape.senders,
        receivers: args.shape.receivers,
        queues: args.shape.queues,
        size: args.shape.size,
        rate: args.rate,
        pipeline: args.pipeline.clone(),
        switch_cost,
        designs,
        open_loop: open_loop.map(|(open, _)| open),
        missing,
        series: engine.observations().series(),
    };
    let obs = engine.observations();
    let mut report = Report {
        header: Header::new(EXPERIMENT.name),
        headline: tables::headline(&data, obs),
        tables: tables::tables(&data, obs),
        charts: tables::charts(&data, obs),
        files: Vec::new(),
        observations: Vec::new(),
        data,
    };
    // brokers.md: every broker's table on its own, for the book's page on
    // Redis and NATS, headed as tables.md is; pipelined.md: the sweep at
    // each --pipeline above 1, the floor, and the open-loop point, for the
    // page on pipelining.
    let d = &report.data;
    let (brokers, pipelined) = (tables::brokers(d, obs), tables::pipelined(d, obs));
    let svg = tables::pipelined_chart(d, obs).map(|c| c.to_svg());
    report.side_tables(&args.common, &out, "brokers.md", &[brokers]);
    report.side_tables(&args.common, &out, "pipelined.md", &pipelined);
    report.files.extend(svg.map(|svg| ("pipelined.svg".into(), svg)));
    report.observations = engine.finish();
    report.publish(&args.common, &out)
}

/// The designs at `pipeline` messages per write: the lab broker's pool
/// sizes (those of --pipelined-threads above 1, if given) and event loop,
/// then each server's settings: Redis's io-threads (above 1, each with
/// reads in the I/O threads and without), NATS's GOMAXPROCS.
fn designs(
    args: &Args,
    pipeline: u32,
    installed: &[Found],
    cpus: usize,
) -> Vec<Design> {
    let mut points = Vec::new();
    if args.brokers.contains(&Broker::Lab) {
        let threads = match &args.pipelined_threads {
            Some(t) if pipeline > 1 => t,
            _ => &args.threads,
        };
        points.extend(threads.iter().map(|&t| Point::Pool(t)));
        if !args.no_event_loop {
            points.push(Point::EventLoop);
        }
    }
    for &(kind, _) in installed {
        let redis = kind == Wire::Redis;
        let threads =
            if redis { &args.redis_io_threads } else { &args.nats_gomaxprocs };
        for &threads in threads {
            let setting =
                |reads| Point::Server(servers::Setting { kind, threads, reads });
            points.push(setting(false));
            if redis && threads > 1 {
                points.push(setting(true));
            }
        }
    }
    points.into_iter().map(|p| design(p, installed, cpus)).collect()
}

/// A design: what it is and ran on, more threads than `cpus` or not.
fn design(point: Point, installed: &[Found], cpus: usize) -> Design {
    let (mode, label, threads) = match point {
        Point::Pool(t) => {
            ("threads", format!("lab broker, {t} threads per pool"), t)
        }
        Point::EventLoop => {
            ("event-loop", "lab broker, event loop (1 thread)".into(), 0)
        }
        Point::Server(s) => (s.kind.name(), s.label(), s.threads),
    };
    let server = if let Point::Server(s) = point { Some(s) } else { None };
    let found = |s: &servers::Setting| installed.iter().find(|(k, _)| *k == s.kind);
    Design {
        point,
        condition: point.key(),
        mode,
        label,
        threads,
        reads_in_threads: server.filter(|s| s.kind == Wire::Redis).map(|s| s.reads),
        above_cpus: cpus > 0 && threads as usize > cpus && point != Point::EventLoop,
        server: server.and_then(|s| Some(found(&s)?.1.info(&s))),
    }
}

/// The article's figures (one CPU, JTangMQ in Java, 2006).
fn article(threads: u32) -> (&'static str, &'static str) {
    match threads {
        100 => ("~600", "~30%"),
        10 => ("~800", "~10%"),
        4 | 20 | 50 => ("< 800", "-"),
        _ => ("-", "-"),
    }
}

/// A design's key at an offer, as the open-loop rule names it: its
/// condition, then `-p<N>` when N messages go in each write, `open-` in
/// front at a fixed rate.
fn key_of(d: &Design, offer: Offer) -> String {
    let mut key = d.condition.clone();
    if offer.pipeline > 1 {
        key = format!("{key}-p{}", offer.pipeline);
    }
    if offer.rate > 0 {
        key = format!("open-{key}");
    }
    key
}

/// The pipeline value the open-loop point and the pipelined chart take of
/// `values`: 16 if among them, else the largest.
fn open_pipeline(values: &[u32]) -> Option<u32> {
    if values.contains(&16) { Some(16) } else { values.iter().copied().max() }
}

/// The open-loop point (unless --no-open-loop): at the pipeline of
/// [`open_pipeline`], each broker's best design (by median msg/s), at one
/// rate for all, half the slowest broker's best, so that every broker can
/// carry it and the latencies compare at the same offered load.
fn open_loop(
    args: &Args,
    obs: Observations,
    offers: &[(Offer, Vec<Design>)],
) -> Option<(OpenLoop, Vec<Design>)> {
    let n = open_pipeline(&args.pipeline).filter(|_| !args.no_open_loop)?;
    let (offer, designs) = offers.iter().find(|(o, _)| o.pipeline == n)?;
    let median = |d: &Design| {
        obs.median(&offer.at(), &d.condition, "messages_per_s").unwrap_or(f64::NAN)
    };
    let mut best: Vec<(&Design, f64)> = Vec::new();
    for family in [&["threads", "event-loop"][..], &["redis"], &["nats"]] {
        let of = designs.iter().filter(|d| family.contains(&d.mode));
        if let Some(d) = of.max_by(|a, b| median(a).total_cmp(&median(b))) {
            best.push((d, median(d)));
        }
    }
    let slowest = best.iter().map(|(_, m)| *m).fold(f64::MAX, f64::min);
    if best.is_empty() || !slowest.is_finite() || slowest < 2.0 {
        return None;
    }
    let rate = (slowest / 2.0) as u32;
    let names: Vec<String> = best.iter().map(|(d, _)| key_of(d, *offer)).collect();
    let rule = format!(
        "{n} messages per write, {rate} messages/s: half the median of the \
         slowest of the best designs ({}), so every broker carries it",
        names.join(", ")
    );
    let open = OpenLoop { offer: Offer { pipeline: n, rate }, rule };
    Some((open, best.into_iter().map(|(d, _)| d.clone()).collect()))
}

/// The Redis and NATS servers this run can have (not asked to leave them
/// out, and installed), and those it lacks.
fn servers_to_run(args: &Args) -> Result<(Vec<Found>, Vec<Missing>)> {
    let (mut found, mut missing) = (Vec::new(), Vec::new());
    let asked = [(Broker::Redis, Wire::Redis), (Broker::Nats, Wire::Nats)];
    for (_, kind) in asked.into_iter().filter(|(b, _)| args.brokers.contains(b)) {
        match servers::find(kind)? {
            Some(inst) => found.push((kind, inst)),
            None => missing.push(Missing {
                program: servers::program(kind),
                install: servers::install(kind),
            }),
        }
    }
    Ok((found, missing))
}
