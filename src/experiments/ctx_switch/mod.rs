//! `lab run ctx-switch`: what one context switch costs, measured before the
//! message-queue sweep of the 2006 message-queue post (book References: mq-2006) because
//! that sweep's verdict (30% of the CPU spent switching) rests on it.
//!
//! For threads and processes, each pinned to the same CPU, to two CPUs, or
//! not at all, it runs `ctxswitch` (two tasks bouncing a byte over two
//! pipes) and, when `perf` works, `perf bench sched pipe` in the same mode
//! and placement as an outside reference, the two in the lab's round order
//! (`stats::round_order`: they alternate which goes first).
//!
//! `run` spawns the two tools; `tables` turns the results into the tables,
//! the headline and the chart.

mod run;
mod tables;

pub(crate) use run::ctxswitch_once;

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::results::Header;
use crate::stats::{Summary, paired_ratio, round_order};
use clap::Parser;
use ctxswitch::{Mode, Pin};
use labkit::{Error, Result};
use serde::{Deserialize, Serialize};

use super::{Declared, Experiment};
use crate::plan::Plan;
use crate::report::{Common, Context, Report};

pub const EXPERIMENT: Experiment = Experiment::new::<Args>(
    "ctx-switch",
    "ctxswitch vs perf bench sched pipe: the cost of one context switch",
    main,
)
.for_reference(&[
    Declared::DEFAULT,
    Declared::own(&["--pins", "cross", "--iterations", "100000"])
        .variant("cross-long")
        .rounds(16),
])
.headline(&[
    "threads_same_us",
    "threads_same_net_us",
    "threads_cross_us",
    "threads_cross_net_us",
    "threads_none_us",
    "threads_none_net_us",
    "processes_same_us",
    "processes_same_net_us",
    "processes_cross_us",
    "processes_cross_net_us",
    "processes_none_us",
    "processes_none_net_us",
])
.data::<Data>();

/// What one context switch costs: ctxswitch (a byte bounced over two
/// pipes) for threads and processes on the same CPU, two CPUs or unpinned,
/// beside `perf bench sched pipe` in the same mode and placement.
#[derive(Parser, Clone)]
struct Args {
    #[command(flatten)]
    common: Common,

    /// Round trips per run, a fifth of them for `cross`, where each costs
    /// ten times more [default: 10000; 100000 with --full]
    #[arg(short = 'n', long,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    iterations: Option<u64>,

    /// Do not run `perf bench sched pipe`, even if perf works
    #[arg(long, conflicts_with = "perf")]
    no_perf: bool,

    /// Only these modes
    #[arg(long, value_delimiter = ',', value_parser = MODES,
          default_value = "threads,processes")]
    modes: Vec<String>,

    /// Only these placements
    #[arg(long, value_delimiter = ',', value_parser = PINS,
          default_value = "same,cross,none")]
    pins: Vec<String>,

    /// The perf program to use as the reference [default: perf, skipped
    /// with a note if it cannot run; a --perf given that cannot run is an
    /// error]
    #[arg(long, value_name = "PATH")]
    perf: Option<PathBuf>,
}
crate::options!(Args);

const MODES: [&str; 2] = ["threads", "processes"];
const PINS: [&str; 3] = ["same", "cross", "none"];

/// Round trips per run for a placement: a round trip across two CPUs
/// costs 10 to 30 times one on a single CPU, so `cross` runs a fifth.
fn round_trips(iterations: u64, pin: Pin) -> u64 {
    if pin == Pin::Cross { (iterations / 5).max(1) } else { iterations }
}

/// One run of `perf bench sched pipe`.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PerfRun {
    /// perf's "usecs/op": one op is one round trip.
    pub us_per_round_trip: f64,
    /// For `cross`: how long after the start one worker was moved to the
    /// second CPU (both started on the first, under taskset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved_after_ms: Option<f64>,
}

#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PerfCell {
    pub us_per_round_trip: Summary,
    /// Median round trip / 2.
    pub us_per_switch: f64,
    pub runs: Vec<PerfRun>,
}

/// One mode and placement: every round of ctxswitch (its own report, as
/// the program printed it) and of perf.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cell {
    pub mode: Mode,
    pub pin: Pin,
    /// Round trips per run of either tool.
    pub iterations: u64,
    /// CPUs of task A and task B (`null`: not pinned).
    pub cpus: Option<[usize; 2]>,
    /// ctxswitch's raw microseconds per switch (half a round trip), median
    /// of the rounds.
    pub us_per_switch: f64,
    /// The same with the pipe calls' own cost subtracted (lmbench's way).
    pub net_us_per_switch: f64,
    pub us_per_round_trip: Summary,
    pub pipe_us: Summary,
    pub kernel_switches_per_round_trip: Summary,
    /// The kernel's count agreed with 2 per round trip in every round.
    pub counts_hold: bool,
    pub perf: Option<PerfCell>,
    /// ctxswitch's round trip / perf's, median of the rounds' pairs.
    pub vs_perf: Option<f64>,
    pub runs: Vec<ctxswitch::Report>,
}

#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PerfInfo {
    pub used: bool,
    pub version: Option<String>,
    /// Why perf was not used, or how placement was done.
    pub note: String,
}

/// The experiment's results (the file `ctx-switch.json` holds them beside
/// its header and headline); mq-sweep reads them back with this type.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Data {
    /// Round trips per run (each cell says its own: a fifth for cross).
    pub iterations: u64,
    pub rounds: u32,
    pub full: bool,
    pub perf: PerfInfo,
    /// mode -> placement -> ctxswitch's median raw microseconds per switch.
    pub us_per_switch: BTreeMap<String, BTreeMap<String, f64>>,
    /// mode -> placement -> the same without the pipe calls' cost.
    pub net_us_per_switch: BTreeMap<String, BTreeMap<String, f64>>,
    pub cells: Vec<Cell>,
    pub skipped: Vec<String>,
}

fn main(ctx: &Context, plan: &Plan) -> Result<()> {
    let args: Args = plan.args();
    let out = plan.start(ctx)?;
    let iterations =
        args.iterations.unwrap_or(if args.common.full { 100_000 } else { 10_000 });
    let ctxswitch = crate::bins::programs(&["ctxswitch"])?.remove(0);
    let allowed = labkit::affinity::allowed_cpus()?;
    let mut skipped = Vec::new();
    let modes: Vec<Mode> = [Mode::Threads, Mode::Processes]
        .into_iter()
        .filter(|m| args.modes.iter().any(|a| a == m.name()))
        .collect();
    let pins: Vec<Pin> = [Pin::Same, Pin::Cross, Pin::None]
        .into_iter()
        .filter(|p| args.pins.iter().any(|a| a == p.name()))
        .filter(|&p| {
            let ok = p != Pin::Cross || allowed.len() >= 2;
            if !ok {
                skipped.push(format!(
                    "cross: this process may run only on CPU {}",
                    allowed[0]
                ));
            }
            ok
        })
        .collect();
    let perf_path = args.perf.clone().unwrap_or_else(|| PathBuf::from("perf"));
    let perf = if args.no_perf {
        PerfInfo { used: false, version: None, note: "--no-perf".into() }
    } else {
        run::perf_check(&perf_path)
    };
    if !perf.used && !args.no_perf {
        // Only the default may fall back; a perf the user named must run.
        if args.perf.is_some() {
            return Err(Error::failed(format!(
                "--perf: {}; give a perf that runs, or --no-perf",
                perf.note
            )));
        }
        eprintln!("lab: note: running without perf: {}", perf.note);
    }
    let rounds = args.common.rounds as usize;
    let cells_n = modes.len() * pins.len();
    // The tools of each round: ctxswitch (0) and, if it works, perf (1).
    let tools = if perf.used { 2 } else { 1 };
    let bar = crate::progress::bar((cells_n * rounds * tools) as u64, "ctx-switch");
    let mut cells = Vec::new();
    for &mode in &modes {
        for &pin in &pins {
            bar.set_message(format!("{} {}", mode.name(), pin.name()));
            let cpus = match pin {
                Pin::Same => Some([allowed[0]; 2]),
                Pin::Cross => Some([allowed[0], allowed[1]]),
                Pin::None => None,
            };
            let n = round_trips(iterations, pin);
            let mut runs = Vec::new();
            let mut perf_runs = Vec::new();
            for round in 0..rounds {
                // The lab's round order: the tools alternate who goes
                // first, so slow drift does not always favour one.
                for tool in round_order(tools, round) {
                    if tool == 0 {
                        runs.push(run::ctxswitch_once(
                            &ctxswitch, mode, pin, cpus, n,
                        )?);
                    } else {
                        perf_runs.push(run::perf_once(&perf_path, mode, cpus, n)?);
                    }
                    bar.inc(1);
                }
            }
            cells.push(cell(mode, pin, n, cpus, runs, perf_runs));
        }
    }
    bar.finish_and_clear();
    let mut us_per_switch: BTreeMap<_, BTreeMap<_, _>> = BTreeMap::new();
    let mut net_us_per_switch: BTreeMap<_, BTreeMap<_, _>> = BTreeMap::new();
    for c in &cells {
        let (mode, pin) = (c.mode.name().to_string(), c.pin.name().to_string());
        us_per_switch
            .entry(mode.clone())
            .or_default()
            .insert(pin.clone(), c.us_per_switch);
        net_us_per_switch.entry(mode).or_default().insert(pin, c.net_us_per_switch);
    }
    let data = Data {
        iterations,
        rounds: args.common.rounds,
        full: args.common.full,
        perf,
        us_per_switch,
        net_us_per_switch,
        cells,
        skipped,
    };
    let mut tables = vec![tables::cost_table(&data)];
    if data.perf.used {
        tables.push(tables::perf_table(&data));
    }
    let report = Report {
        observations: Vec::new(),
        header: Header::new(EXPERIMENT.name),
        headline: tables::headline(&data),
        tables,
        charts: Vec::new(),
        files: vec![("ctx-switch.svg".into(), tables::chart(&data).to_svg())],
        data,
    };
    report.publish(&args.common, &out)
}

/// A mode and placement's rounds, summarised.
fn cell(
    mode: Mode,
    pin: Pin,
    iterations: u64,
    cpus: Option<[usize; 2]>,
    runs: Vec<ctxswitch::Report>,
    perf_runs: Vec<PerfRun>,
) -> Cell {
    let round_trip = Summary::of_rounds(runs.iter().map(|r| r.us_per_round_trip));
    let net = Summary::of_rounds(runs.iter().map(|r| r.net_us_per_switch));
    let perf = (!perf_runs.is_empty()).then(|| {
        let s = Summary::of_rounds(perf_runs.iter().map(|r| r.us_per_round_trip));
        PerfCell {
            us_per_round_trip: s,
            us_per_switch: s.median / 2.0,
            runs: perf_runs,
        }
    });
    // Round k of ctxswitch and round k of perf ran back to back.
    let vs_perf = perf.as_ref().and_then(|p| {
        let ours: Vec<f64> = runs.iter().map(|r| r.us_per_round_trip).collect();
        let theirs: Vec<f64> = p.runs.iter().map(|r| r.us_per_round_trip).collect();
        paired_ratio(&ours, &theirs).map(|s| s.median)
    });
    Cell {
        mode,
        pin,
        iterations,
        cpus,
        us_per_switch: round_trip.median / 2.0,
        net_us_per_switch: net.median,
        us_per_round_trip: round_trip,
        pipe_us: Summary::of_rounds(runs.iter().map(|r| r.pipe_us)),
        kernel_switches_per_round_trip: Summary::of_rounds(
            runs.iter().map(|r| r.switches.per_round_trip),
        ),
        counts_hold: runs.iter().all(|r| r.switches.holds),
        perf,
        vs_perf,
        runs,
    }
}
