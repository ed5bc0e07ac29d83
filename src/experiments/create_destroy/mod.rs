//! `lab run create-destroy`: what creating and destroying a process or a
//! thread costs, three ways, each beside its article's figures:
//! `forkcreat` vs `pthreadcreat` (Zhou Li et al.: 100,000 creations), the
//! lecture's loop at iter = 2000 (the 2004 lecture), and `creattime`
//! timing only the create call at 20 / 128 / 255 samples (Czuczy, 2004).
//!
//! Every program, Rust or C, runs with `--json`; what it prints is read
//! into its crate's own report type ([`run`]). The tables, charts and
//! headline are made from the engine's observations alone ([`tables`]).

mod run;
mod tables;

use crate::engine::{Engine, Paired, Series, Setting, setting};
use crate::results::Header;
use clap::Parser;
use forkcreat::Reap;
use labkit::Result;
use serde::Serialize;

use super::{Declared, Experiment};
use crate::plan::Plan;
use crate::report::{Common, Context, Report};

pub const EXPERIMENT: Experiment = Experiment::new::<Args>(
    "create-destroy",
    "forkcreat vs pthreadcreat, the lecture's loop, creattime (Zhou Li et al.; the 2004 lecture; Czuczy, 2004)",
    main,
)
.for_reference(&[
    Declared::DEFAULT,
    Declared::own(&["--vs-c"]).variant("vs-c").rounds(32),
])
.headline(&[
    "fork_us", "thread_us", "fork_over_thread", "lecture_fork_us",
    "lecture_thread_us", "lecture_fork_over_thread", "creattime_ratio_{samples}",
    "creattime_ratio_spread", "zombies_before_reaping", "zombie_share",
])
.data::<Data>();

/// forkcreat vs pthreadcreat (Zhou Li et al.), the lecture's 2000-iteration
/// loops (the 2004 lecture) and creattime at 20/128/255 samples (Czuczy, 2004), each table beside
/// the articles' figures.
#[derive(Parser, Clone)]
struct Args {
    #[command(flatten)]
    common: Common,

    /// Creations per program run in table 1 [default: 4000; 100000, the
    /// article's, with --full]
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    iterations: Option<u64>,

    /// Iterations of the lecture's loops in table 2
    #[arg(long, value_name = "N", default_value_t = 2000,
          value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    lecture_iterations: u64,

    /// creattime sample counts for table 3, e.g. 20,128,255
    #[arg(long, value_delimiter = ',', default_value = "20,128,255",
          value_parser = clap::value_parser!(u64).range(1..=100_000))]
    samples: Vec<u64>,

    /// Also run the C programs (crates/*/c/*.c, built with cc -O2) in the
    /// same rounds, back to back with the Rust programs, and compare them
    /// in pairs; forkcreat.c runs twice, as it is and with a Rust program's
    /// mappings (crates/forkcreat/c/rust_image.c); creattime.c beside
    /// creattime
    #[arg(long)]
    vs_c: bool,
}
crate::options!(Args);

/// The setting of table 1's loops (`article`) or table 2's (`lecture`).
fn loops(table: &str, iterations: u64) -> Setting {
    setting([("loops", table.into()), ("iterations", iterations.into())])
}

fn samples(samples: u64) -> Setting {
    setting([("samples", samples.into())])
}

#[derive(Serialize, schemars::JsonSchema)]
struct Data {
    /// Rounds asked for; each setting runs them balanced over its programs
    /// (each goes first equally often), so table 1 with --vs-c runs a
    /// multiple of eight.
    rounds: u32,
    full: bool,
    /// Creations per program run in table 1.
    iterations: u64,
    lecture_iterations: u64,
    /// Rounds asked for the lecture's loops: twice `rounds`.
    lecture_rounds: u32,
    samples: Vec<u64>,
    /// Table 1's programs, each Rust program followed by its C twins.
    programs: Vec<String>,
    /// Each program at each setting (`loops` and `iterations`, or
    /// creattime's `samples`): every figure of its rounds.
    series: Vec<Series>,
    /// Each C twin against its Rust program (with --vs-c): the Rust
    /// program's µs over the C one's, paired round by round.
    vs_c: Vec<Paired>,
}

fn main(ctx: &Context, plan: &Plan) -> Result<()> {
    let args: Args = plan.args();
    let out = plan.start(ctx)?;
    let n =
        args.iterations.unwrap_or(if args.common.full { 100_000 } else { 4_000 });
    let bins = crate::bins::programs(&["forkcreat", "pthreadcreat", "creattime"])?;
    let c = if args.vs_c { Some(run::c_programs()?) } else { None };
    let article = run::loops(&bins, c.as_ref(), n, &[Reap::Sigchld, Reap::Wait]);
    let lecture = run::loops(&bins, None, args.lecture_iterations, &[Reap::Wait]);
    // creattime, and creattime.c back to back with it: name, path, is C.
    let mut creattimes = vec![("creattime", bins[2].clone(), false)];
    creattimes
        .extend(c.as_ref().map(|c| ("creattime (C)", c.creattime.clone(), true)));
    let programs: Vec<String> = article.iter().map(|l| l.label.clone()).collect();
    let ct_names: Vec<&str> = creattimes.iter().map(|c| c.0).collect();

    // The lecture's loops run twice the rounds. A round of them takes a
    // third of a second, and on two CPUs the kernel keeps every new thread
    // on its creator's CPU while the other CPU is busy (a thread then costs
    // about what it does on one CPU), and sends about half of them across
    // when it is idle: at six rounds one run that met a busy CPU set an end
    // of the ratio's interval.
    let lecture_rounds = 2 * args.common.rounds;
    let mut engine = Engine::new(args.common.rounds);
    let runs = engine.runs_for(article.len())
        + engine.runs_at(lecture_rounds as usize, lecture.len())
        + args.samples.len() * engine.runs_for(creattimes.len());
    engine.progress(runs, EXPERIMENT.name);
    for (list, at, rounds) in [
        (&article, loops("article", n), args.common.rounds),
        (&lecture, loops("lecture", args.lecture_iterations), lecture_rounds),
    ] {
        let names: Vec<&str> = list.iter().map(|l| l.label.as_str()).collect();
        engine.set_rounds(rounds);
        engine.measure(&at, &names, |i| run::run_loop(&list[i]))?;
    }
    engine.set_rounds(args.common.rounds);
    // Each round of every sample count times at least CREATTIME_CALLS
    // create calls of each kind: a count of 255 runs twice, 20 runs 26 times.
    for &s in &args.samples {
        engine.measure(&samples(s), &ct_names, |k| {
            let (_, path, c) = &creattimes[k];
            run::run_creattime(path, *c, s, run::CREATTIME_CALLS.div_ceil(s))
        })?;
    }
    let obs = engine.observations();
    // Each C twin with its Rust program: `pthreadcreat (C)` is `pthreadcreat`'s.
    let twins =
        programs.iter().filter_map(|c| Some((c.split_once(" (")?.0, c.as_str())));
    let data = Data {
        rounds: args.common.rounds,
        full: args.common.full,
        iterations: n,
        lecture_iterations: args.lecture_iterations,
        lecture_rounds,
        samples: args.samples.clone(),
        series: obs.series(),
        vs_c: twins
            .flat_map(|(rust, c)| obs.pairs(rust, c, "us_per_create"))
            .collect(),
        programs,
    };
    Report {
        header: Header::new(EXPERIMENT.name),
        headline: tables::headline(&data, obs),
        tables: tables::tables(&data, obs),
        charts: tables::charts(&data, obs),
        files: vec![("create-destroy.svg".into(), tables::bars(&data, obs))],
        observations: engine.finish(),
        data,
    }
    .publish(&args.common, &out)
}

/// One run of the article's process loop (`forkcreat -n N --reap sigchld`):
/// microseconds per create and destroy. The controls run it against
/// itself.
pub(crate) fn control_once(forkcreat: &std::path::Path, n: u64) -> Result<f64> {
    let l = run::Loop {
        label: "forkcreat --reap sigchld".into(),
        path: forkcreat.into(),
        args: run::forkcreat(n, Reap::Sigchld).args(),
        kind: run::Kind::Fork,
    };
    Ok(run::run_loop(&l)?.0.us_per_create.expect("run_loop checks it"))
}
