//! `lab run ctx-switch`: what one context switch costs, the figure the
//! 2006 message-queue post's verdict (30% of the CPU spent switching) rests
//! on, so measured before mq-sweep (book References: mq-2006).
//!
//! For threads and processes in each placement (the engine's [`Placement`],
//! which `ctxswitch` calls its pins `same`, `cross` and `none`) it runs
//! `ctxswitch` and, when `perf` works, `perf bench sched pipe` in the same
//! mode and placement as an outside reference; the engine alternates which
//! goes first.

mod run;
mod tables;

pub(crate) use run::ctxswitch_once;

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::engine::{Engine, Observed, Paired, Placement, Series, Setting, setting};
use crate::results::Header;
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
// Under all, two rounds (even, as the engine's order asks): no claim is
// judged on ctx-switch (mq-sweep measures its own switch cost), and its
// 6 rounds took 18 to 28 s of the five minutes.
.under_all(Declared::DEFAULT.rounds(2))
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

#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PerfInfo {
    pub used: bool,
    pub version: Option<String>,
    /// Why perf was not used, or how placement was done.
    pub note: String,
}

/// A placement measured: the engine's (the `placement` factor of the
/// observations), which `ctxswitch` calls its pin.
#[derive(
    Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Placed {
    pub pin: Pin,
    pub placement: Placement,
}

impl Placed {
    /// The engine's setting of `mode` in this placement.
    fn at(&self, mode: Mode) -> Setting {
        let placement = self.placement.name().into();
        setting([("mode", mode.name().into()), ("placement", placement)])
    }
}

/// Mode -> pin -> a figure: `us_per_switch["threads"]["same"]`.
pub type ByPin = BTreeMap<String, BTreeMap<String, f64>>;

/// The experiment's results (the file `ctx-switch.json` holds them beside
/// its header, headline and observations); mq-sweep reads them back with
/// this type.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Data {
    /// Round trips per run (a fifth for cross: each run's own are in the
    /// series, `iterations`).
    pub iterations: u64,
    /// Rounds of each mode and placement: those asked for, balanced over
    /// the tools (each goes first equally often).
    pub rounds: u32,
    pub full: bool,
    pub perf: PerfInfo,
    pub modes: Vec<Mode>,
    pub placements: Vec<Placed>,
    /// ctxswitch's median raw microseconds per switch.
    pub us_per_switch: ByPin,
    /// The same without the pipe calls' cost (lmbench's way).
    pub net_us_per_switch: ByPin,
    /// Each tool in each mode and placement: every figure of its rounds.
    #[serde(skip_deserializing)]
    pub series: Vec<Series>,
    /// ctxswitch's round trip over perf's, paired round by round.
    pub vs_perf: Vec<Paired>,
    pub skipped: Vec<String>,
}

impl Data {
    /// `mode`'s raw and net microseconds per switch in `pin`, if measured.
    pub fn per_switch(&self, mode: Mode, pin: Pin) -> Option<(f64, f64)> {
        let get = |m: &ByPin| m.get(mode.name())?.get(pin.name()).copied();
        Some((get(&self.us_per_switch)?, get(&self.net_us_per_switch)?))
    }
}

fn main(ctx: &Context, plan: &Plan) -> Result<()> {
    let args: Args = plan.args();
    let out = plan.start(ctx)?;
    let iterations =
        args.iterations.unwrap_or(if args.common.full { 100_000 } else { 10_000 });
    let ctxswitch = crate::bins::programs(&["ctxswitch"])?.remove(0);
    let allowed = labkit::affinity::allowed_cpus()?;
    let asked = |names: &[String], name: &str| names.iter().any(|a| a == name);
    let modes = [Mode::Threads, Mode::Processes].into_iter();
    let modes: Vec<Mode> = modes.filter(|m| asked(&args.modes, m.name())).collect();
    // Each pin asked for, as the engine's placement on the CPUs allowed.
    let pinned = Placement::pinned(&allowed);
    let mut skipped = Vec::new();
    let mut placements = Vec::new();
    for (pin, placement) in [
        (Pin::Same, pinned.first()),
        (Pin::Cross, pinned.get(1)),
        (Pin::None, Some(&Placement::Unpinned)),
    ] {
        if !asked(&args.pins, pin.name()) {
            continue;
        }
        match placement {
            Some(&placement) => placements.push(Placed { pin, placement }),
            None => skipped.push(format!(
                "cross: this process may run only on CPU {}",
                allowed[0]
            )),
        }
    }
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
    let tools: &[&str] =
        if perf.used { &["ctxswitch", "perf"] } else { &["ctxswitch"] };
    let mut engine = Engine::new(args.common.rounds);
    let runs = modes.len() * placements.len() * engine.runs_for(tools.len());
    engine.progress(runs, EXPERIMENT.name);
    for &mode in &modes {
        for &Placed { pin, placement } in &placements {
            let (cpus, n) = (placement.cpus(), round_trips(iterations, pin));
            let at = Placed { pin, placement }.at(mode);
            engine.measure(&at, tools, |tool| -> Result<Box<dyn Observed>> {
                Ok(match tool {
                    0 => Box::new(run::ctxswitch_once(
                        &ctxswitch, mode, pin, cpus, n,
                    )?),
                    _ => Box::new(run::perf_once(&perf_path, mode, cpus, n)?),
                })
            })?;
        }
    }
    let obs = engine.observations();
    let balanced =
        crate::engine::balanced_rounds(args.common.rounds as usize, tools.len());
    let mut data = Data {
        iterations,
        rounds: balanced as u32,
        full: args.common.full,
        perf,
        modes,
        placements,
        series: obs.series(),
        vs_perf: obs.pairs("ctxswitch", "perf", "us_per_round_trip"),
        skipped,
        ..Data::default()
    };
    tables::per_switch(&mut data, obs);
    let mut tables = vec![tables::cost_table(&data, obs)];
    if data.perf.used {
        tables.push(tables::perf_table(&data, obs));
    }
    let headline = tables::headline(&data, obs);
    let svg = tables::chart(&data, obs).to_svg();
    let report = Report {
        header: Header::new(EXPERIMENT.name),
        headline,
        tables,
        charts: Vec::new(),
        files: vec![("ctx-switch.svg".into(), svg)],
        observations: engine.finish(),
        data,
    };
    report.publish(&args.common, &out)
}
