//! `lab run create-destroy`: what creating and destroying a process or a
//! thread costs, three ways, each beside its article's figures:
//! `forkcreat` vs `pthreadcreat` (Zhou Li et al.: 100,000 creations), the
//! lecture's loop at iter = 2000 (the 2004 lecture), and `creattime` timing only the
//! create call at 20 / 128 / 255 samples (Czuczy, 2004).
//!
//! Every program, Rust or C, is run with `--json` and its report read
//! into the program crate's own type (`forkcreat::Report`,
//! `pthreadcreat::Report`, `creattime::Report`): [`run`]. The tables,
//! charts and headline are made from the [`Data`] alone: [`tables`].

mod run;
mod tables;

use crate::results::Header;
use crate::stats::{Summary, round_order};
use clap::Parser;
use labkit::Result;
use serde::Serialize;

use super::{Declared, Experiment};
use crate::plan::Plan;
use crate::report::{Common, Context, Report};
use run::{Ct, Loop};

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

/// One program run's own figure: microseconds per create+destroy, as the
/// program measured it around its loop.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
struct LoopRow {
    program: String,
    iterations: u64,
    us_per_create: Summary,
    /// Wall seconds of the whole process, timed from outside.
    wall_s: Summary,
    runs_us: Vec<f64>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
struct CreattimeRow {
    samples: u64,
    fork_ms: Summary,
    thread_ms: Summary,
    /// Median of the runs' average fork/thread ratios.
    ratio: Summary,
    zombies_before_reaping: Summary,
    /// Each round's run.
    runs: Vec<Ct>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
struct Pair {
    program: String,
    /// The C twin's row in table 1: "<program> (C)", or "<program> (C,
    /// Rust's mappings)" for forkcreat.c linked with rust_image.c.
    against: String,
    /// Rust us / C us in each round, run back to back.
    ratio: Summary,
}

#[derive(Serialize, schemars::JsonSchema)]
struct Data {
    rounds: u32,
    full: bool,
    article: Vec<LoopRow>,
    lecture: Vec<LoopRow>,
    creattime: Vec<CreattimeRow>,
    vs_c: Vec<Pair>,
    /// creattime.c at the same sample counts, run back to back with
    /// creattime (with --vs-c; else empty).
    creattime_c: Vec<CreattimeRow>,
}

fn main(ctx: &Context, plan: &Plan) -> Result<()> {
    let args: Args = plan.args();
    let out = plan.start(ctx)?;
    let n =
        args.iterations.unwrap_or(if args.common.full { 100_000 } else { 4_000 });
    let bins = crate::bins::programs(&["forkcreat", "pthreadcreat", "creattime"])?;
    let c = if args.vs_c { Some(run::c_programs()?) } else { None };
    let rounds = args.common.rounds as usize;

    let article = run::loops(&bins, c.as_ref(), n, &["sigchld", "wait"]);
    let lecture = run::loops(&bins, None, args.lecture_iterations, &["wait"]);
    // creattime, and creattime.c back to back with it.
    let mut creattimes = vec![bins[2].clone()];
    creattimes.extend(c.as_ref().map(|c| c.creattime.clone()));
    let steps =
        (article.len() + lecture.len() + args.samples.len() * creattimes.len())
            * rounds;
    let bar = crate::progress::bar(steps as u64, EXPERIMENT.name);

    let mut article_runs = vec![Vec::new(); article.len()];
    let mut lecture_runs = vec![Vec::new(); lecture.len()];
    let mut creattime_runs = vec![vec![Vec::new(); args.samples.len()]; 2];
    for round in 0..rounds {
        for i in run::order(&article, round) {
            article_runs[i].push(run::run_loop(&article[i])?);
            bar.inc(1);
        }
        for i in run::order(&lecture, round) {
            lecture_runs[i].push(run::run_loop(&lecture[i])?);
            bar.inc(1);
        }
        for (i, &s) in args.samples.iter().enumerate() {
            for k in round_order(creattimes.len(), round) {
                creattime_runs[k][i].push(run::run_creattime(&creattimes[k], s)?);
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();

    let mut creattime_runs = creattime_runs.into_iter();
    let rust_creattime = creattime_rows(&args.samples, creattime_runs.next());
    let c_creattime = match c {
        Some(_) => creattime_rows(&args.samples, creattime_runs.next()),
        None => Vec::new(),
    };
    let data = Data {
        rounds: args.common.rounds,
        full: args.common.full,
        vs_c: pairs(&article, &article_runs),
        article: loop_rows(&article, article_runs, n),
        lecture: loop_rows(&lecture, lecture_runs, args.lecture_iterations),
        creattime: rust_creattime,
        creattime_c: c_creattime,
    };
    let report = Report {
        observations: Vec::new(),
        header: Header::new(EXPERIMENT.name),
        headline: tables::headline(&data),
        tables: tables::tables(&data),
        charts: tables::charts(&data),
        files: vec![("create-destroy.svg".into(), tables::bars(&data))],
        data,
    };
    report.publish(&args.common, &out)
}

/// Each loop's rounds: (us per create+destroy, whole-run wall seconds).
fn loop_rows(list: &[Loop], runs: Vec<Vec<(f64, f64)>>, n: u64) -> Vec<LoopRow> {
    list.iter()
        .zip(runs)
        .map(|(l, runs)| {
            let us: Vec<f64> = runs.iter().map(|r| r.0).collect();
            let wall: Vec<f64> = runs.iter().map(|r| r.1).collect();
            LoopRow {
                program: l.label.clone(),
                iterations: n,
                us_per_create: Summary::of_rounds(us.iter().copied()),
                wall_s: Summary::of_rounds(wall),
                runs_us: us,
            }
        })
        .collect()
}

/// Each C twin against its Rust program, round by round.
fn pairs(list: &[Loop], runs: &[Vec<(f64, f64)>]) -> Vec<Pair> {
    let us = |i: usize| runs[i].iter().map(|r| r.0).collect::<Vec<_>>();
    list.iter()
        .enumerate()
        .filter_map(|(i, l)| {
            let twin = l.twin_of?;
            let ratio = crate::stats::paired_ratio(&us(twin), &us(i))
                .expect("at least one round");
            Some(Pair {
                program: list[twin].label.clone(),
                against: l.label.clone(),
                ratio,
            })
        })
        .collect()
}

fn creattime_rows(samples: &[u64], runs: Option<Vec<Vec<Ct>>>) -> Vec<CreattimeRow> {
    samples
        .iter()
        .zip(runs.unwrap_or_default())
        .map(|(&samples, runs)| {
            let pick = |f: fn(&Ct) -> f64| Summary::of_rounds(runs.iter().map(f));
            CreattimeRow {
                samples,
                fork_ms: pick(|r| r.fork_ms),
                thread_ms: pick(|r| r.thread_ms),
                ratio: pick(|r| r.fork_ms / r.thread_ms),
                zombies_before_reaping: pick(|r| r.zombies),
                runs,
            }
        })
        .collect()
}

/// One run of the article's process loop (`forkcreat -n N --reap sigchld`):
/// microseconds per create and destroy. The controls run it against
/// itself.
pub(crate) fn control_once(forkcreat: &std::path::Path, n: u64) -> Result<f64> {
    let l = Loop {
        label: "forkcreat --reap sigchld".into(),
        path: forkcreat.to_path_buf(),
        args: ["-n", &n.to_string(), "--reap", "sigchld", "--json"]
            .map(String::from)
            .to_vec(),
        kind: run::Kind::Fork,
        twin_of: None,
        group: 0,
    };
    Ok(run::run_loop(&l)?.0)
}
