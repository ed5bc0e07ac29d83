//! `lab run create-destroy`: what creating and destroying a process or a
//! thread costs, three ways, each beside its article's figures:
//! `forkcreat` vs `pthreadcreat` (article 000: 100,000 creations), the
//! lecture's loop at iter = 2000 (001), and `creattime` timing only the
//! create call at 20 / 128 / 255 samples (003).

use std::ffi::OsString;
use std::io::{Read, Seek};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::bars::{Bars, Row};
use crate::chart::Chart;
use crate::results::Header;
use crate::stats::Summary;
use crate::table::{Table, with_range};
use clap::Parser;
use labkit::measure::run;
use labkit::{Error, Result};
use serde::Serialize;

use super::Experiment;
use crate::report::{Common, Headline, Report};

pub const EXPERIMENT: Experiment = Experiment {
    name: "create-destroy",
    about: "forkcreat vs pthreadcreat, the lecture's loop, creattime (000, 001, 003)",
    all_args: &[],
    run: main,
};

/// forkcreat vs pthreadcreat (article 000), the lecture's 2000-iteration
/// loops (001) and creattime at 20/128/255 samples (003), each table beside
/// the articles' figures.
#[derive(Parser)]
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

    /// Also run the C loops (crates/*/c/*.c, built with cc -O2) in the same
    /// rounds, back to back with the Rust programs, and compare them in
    /// pairs; forkcreat.c runs twice, as it is and with a Rust program's
    /// mappings (crates/forkcreat/c/rust_image.c)
    #[arg(long)]
    vs_c: bool,
}

/// One program run's own figure: microseconds per create+destroy, as the
/// program measured it around its loop.
#[derive(Clone, Debug, Serialize)]
struct LoopRow {
    program: String,
    iterations: u64,
    us_per_create: Summary,
    /// Wall seconds of the whole process, timed from outside.
    wall_s: Summary,
    runs_us: Vec<f64>,
}

#[derive(Clone, Debug, Serialize)]
struct CreattimeRow {
    samples: u64,
    fork_ms: Summary,
    thread_ms: Summary,
    /// Median of the runs' average fork/thread ratios.
    ratio: Summary,
    zombies_before_reaping: Summary,
}

#[derive(Clone, Debug, Serialize)]
struct Pair {
    program: String,
    /// The C twin's row in table 1: "<program> (C)", or "<program> (C,
    /// Rust's mappings)" for forkcreat.c linked with rust_image.c.
    against: String,
    /// Rust us / C us in each round, run back to back.
    ratio: Summary,
}

#[derive(Serialize)]
struct Data {
    rounds: u32,
    full: bool,
    article: Vec<LoopRow>,
    lecture: Vec<LoopRow>,
    creattime: Vec<CreattimeRow>,
    vs_c: Vec<Pair>,
}

/// A program of table 1 or 2 and its arguments.
struct Loop {
    label: String,
    path: PathBuf,
    args: Vec<String>,
    /// For a C twin: the position of its Rust program in the same list.
    twin_of: Option<usize>,
    /// A Rust program and its C twins share a group and run back to back.
    group: usize,
}

/// The C twins of table 1, built by [`c_programs`].
struct CPrograms {
    forkcreat: PathBuf,
    /// forkcreat.c linked with rust_image.c.
    forkcreat_image: PathBuf,
    pthreadcreat: PathBuf,
}

fn main(argv: Vec<OsString>) -> Result<()> {
    let args = labkit::cli::parse_from::<Args, _, _>(argv);
    let out = args.common.start(EXPERIMENT.name)?;
    let n =
        args.iterations.unwrap_or(if args.common.full { 100_000 } else { 4_000 });
    let bins = crate::bins::programs(&["forkcreat", "pthreadcreat", "creattime"])?;
    let c = if args.vs_c { Some(c_programs()?) } else { None };
    let rounds = args.common.rounds as usize;

    let article = loops(&bins, c.as_ref(), n, &["sigchld", "wait"]);
    let lecture = loops(&bins, None, args.lecture_iterations, &["wait"]);
    let steps = (article.len() + lecture.len() + args.samples.len()) * rounds;
    let bar = crate::progress::bar(steps as u64, EXPERIMENT.name);

    let mut article_runs = vec![Vec::new(); article.len()];
    let mut lecture_runs = vec![Vec::new(); lecture.len()];
    let mut creattime_runs = vec![Vec::new(); args.samples.len()];
    for round in 0..rounds {
        for i in round_order(&article, round) {
            article_runs[i].push(run_loop(&article[i])?);
            bar.inc(1);
        }
        for i in round_order(&lecture, round) {
            lecture_runs[i].push(run_loop(&lecture[i])?);
            bar.inc(1);
        }
        for (i, &s) in args.samples.iter().enumerate() {
            creattime_runs[i].push(run_creattime(&bins[2], s)?);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();

    let summarize = |list: &[Loop], runs: Vec<Vec<(f64, f64)>>, iterations| {
        list.iter()
            .zip(runs)
            .map(|(l, runs)| {
                let us: Vec<f64> = runs.iter().map(|r| r.0).collect();
                let wall: Vec<f64> = runs.iter().map(|r| r.1).collect();
                LoopRow {
                    program: l.label.clone(),
                    iterations,
                    us_per_create: summary(&us),
                    wall_s: summary(&wall),
                    runs_us: us,
                }
            })
            .collect::<Vec<_>>()
    };
    let vs_c = article
        .iter()
        .enumerate()
        .filter_map(|(i, l)| {
            let twin = l.twin_of?;
            let ratios: Vec<f64> = article_runs[twin]
                .iter()
                .zip(&article_runs[i])
                .map(|(rust, c)| rust.0 / c.0)
                .collect();
            Some(Pair {
                program: article[twin].label.clone(),
                against: l.label.clone(),
                ratio: summary(&ratios),
            })
        })
        .collect();
    let creattime = args
        .samples
        .iter()
        .zip(creattime_runs)
        .map(|(&samples, runs)| {
            let pick =
                |f: fn(&Ct) -> f64| summary(&runs.iter().map(f).collect::<Vec<_>>());
            CreattimeRow {
                samples,
                fork_ms: pick(|r| r.fork_ms),
                thread_ms: pick(|r| r.thread_ms),
                ratio: pick(|r| r.fork_ms / r.thread_ms),
                zombies_before_reaping: pick(|r| r.zombies),
            }
        })
        .collect();
    let data = Data {
        rounds: args.common.rounds,
        full: args.common.full,
        article: summarize(&article, article_runs, n),
        lecture: summarize(&lecture, lecture_runs, args.lecture_iterations),
        creattime,
        vs_c,
    };
    let mut tables =
        vec![article_table(&data), lecture_table(&data), creattime_table(&data)];
    if !data.vs_c.is_empty() {
        tables.push(vs_c_table(&data));
    }
    write_bars(&data, &out)?;
    let report = Report {
        header: Header::new(EXPERIMENT.name),
        headline: headline(&data),
        tables,
        charts: charts(&data),
        files: Vec::new(),
        data,
    };
    report.publish(&args.common, &out)
}

/// The figures the claims are judged on: the cost of one create and
/// destroy in the article's and the lecture's loops, their ratio, and
/// creattime's ratio at each sample count.
fn headline(data: &Data) -> Headline {
    let us = |rows: &[LoopRow], program: &str| {
        rows.iter()
            .find(|r| r.program == program)
            .map(|r| r.us_per_create.median)
            .filter(|v| v.is_finite())
    };
    let fork = us(&data.article, "forkcreat --reap sigchld");
    let thread = us(&data.article, "pthreadcreat");
    let lecture_fork = us(&data.lecture, "forkcreat --reap wait");
    let lecture_thread = us(&data.lecture, "pthreadcreat");
    let ratio = |a: Option<f64>, b: Option<f64>| Some(a? / b?);
    let mut h = crate::report::headline()
        .add("fork_us", "forkcreat: one process created and reaped", fork, "µs")
        .add(
            "thread_us",
            "pthreadcreat: one thread created and joined",
            thread,
            "µs",
        )
        .add(
            "fork_over_thread",
            "forkcreat's µs over pthreadcreat's (medians)",
            ratio(fork, thread),
            "x",
        )
        .add("lecture_fork_us", "the lecture's fork + wait loop", lecture_fork, "µs")
        .add(
            "lecture_thread_us",
            "the lecture's create + join loop",
            lecture_thread,
            "µs",
        )
        .add(
            "lecture_fork_over_thread",
            "the lecture's loops: process µs over thread µs",
            ratio(lecture_fork, lecture_thread),
            "x",
        );
    let ratios: Vec<f64> = data.creattime.iter().map(|r| r.ratio.median).collect();
    for r in &data.creattime {
        h = h.add(
            &format!("creattime_ratio_{}", r.samples),
            &format!(
                "creattime: fork() over pthread_create() at {} samples",
                r.samples
            ),
            r.ratio.median,
            "x",
        );
    }
    let spread = Summary::of(&ratios).map(|s| s.max / s.min);
    let zombies = data.creattime.iter().map(|r| r.zombies_before_reaping.max);
    h.add(
        "creattime_ratio_spread",
        "creattime: highest ratio over lowest across sample counts",
        spread,
        "x",
    )
    .add(
        "zombies_before_reaping",
        "creattime: unreaped children that existed at once, most",
        zombies.fold(None, |m: Option<f64>, z| Some(m.map_or(z, |m| m.max(z)))),
        "",
    )
    .build()
}

fn summary(values: &[f64]) -> Summary {
    Summary::of(values).unwrap_or(Summary {
        n: 0,
        median: f64::NAN,
        min: f64::NAN,
        max: f64::NAN,
        trimmed_mean: f64::NAN,
    })
}

fn c_programs() -> Result<CPrograms> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let forkcreat = root.join("crates/forkcreat/c/forkcreat.c");
    let image = root.join("crates/forkcreat/c/rust_image.c");
    Ok(CPrograms {
        forkcreat: crate::bins::compile_c(&forkcreat, "forkcreat-c")?,
        forkcreat_image: crate::bins::compile_c_with(
            &[&forkcreat, &image],
            &["-Wl,--no-as-needed", "-lgcc_s"],
            "forkcreat-c-rust-image",
        )?,
        pthreadcreat: crate::bins::compile_c(
            &root.join("crates/pthreadcreat/c/pthreadcreat.c"),
            "pthreadcreat-c",
        )?,
    })
}

/// forkcreat in each reap mode and pthreadcreat, each followed by its C
/// twins when `c` is given.
fn loops(
    bins: &[PathBuf],
    c: Option<&CPrograms>,
    n: u64,
    modes: &[&str],
) -> Vec<Loop> {
    let mut list = Vec::new();
    let mut push = |label: String,
                    path: &PathBuf,
                    args: Vec<String>,
                    twins: Vec<(&str, &PathBuf)>,
                    c_args: Vec<String>| {
        let (rust, group) =
            (list.len(), list.last().map_or(0, |l: &Loop| l.group + 1));
        list.push(Loop {
            label: label.clone(),
            path: path.clone(),
            args,
            twin_of: None,
            group,
        });
        for (suffix, c_path) in twins {
            list.push(Loop {
                label: format!("{label} ({suffix})"),
                path: c_path.clone(),
                args: c_args.clone(),
                twin_of: Some(rust),
                group,
            });
        }
    };
    for mode in modes {
        let twins = c.map_or(Vec::new(), |c| {
            vec![("C", &c.forkcreat), ("C, Rust's mappings", &c.forkcreat_image)]
        });
        push(
            format!("forkcreat --reap {mode}"),
            &bins[0],
            vec!["-n".into(), n.to_string(), "--reap".into(), mode.to_string()],
            twins,
            vec![n.to_string(), mode.to_string()],
        );
    }
    push(
        "pthreadcreat".into(),
        &bins[1],
        vec!["-n".into(), n.to_string()],
        c.map_or(Vec::new(), |c| vec![("C", &c.pthreadcreat)]),
        vec![n.to_string()],
    );
    list
}

/// The order of `list` in round `round`: the groups rotate, so drift does
/// not favour one program, and a Rust program and its C twins run back to
/// back, in turn first and last.
fn round_order(list: &[Loop], round: usize) -> Vec<usize> {
    let groups = list.last().map_or(0, |l| l.group + 1);
    let mut order = Vec::with_capacity(list.len());
    for g in 0..groups {
        let g = (g + round) % groups;
        let start = order.len();
        order.extend((0..list.len()).filter(|&i| list[i].group == g));
        if round % 2 == 1 {
            order[start..].reverse();
        }
    }
    order
}

/// Run `cmd` as a whole process with stdout in a temporary file; return
/// its wall time and what it printed.
fn run_capture(mut cmd: Command, what: &str) -> Result<(f64, String)> {
    let mut file = tempfile::tempfile()
        .map_err(|e| Error::io("cannot create a temporary file", e))?;
    let stdout = file.try_clone().map_err(|e| Error::io("temporary file", e))?;
    cmd.stdin(Stdio::null()).stdout(stdout);
    let done =
        run(&mut cmd).map_err(|e| Error::io(format!("cannot run {what}"), e))?;
    done.check(what).map_err(Error::failed)?;
    let mut text = String::new();
    file.rewind()
        .and_then(|()| file.read_to_string(&mut text))
        .map_err(|e| Error::io("temporary file", e))?;
    Ok((done.usage.wall_s, text))
}

// ANCHOR: run_loop
/// One run of a create+destroy loop (Rust or C; both print the same two
/// lines): check that every creation succeeded and take the program's own
/// microseconds per create+destroy.
fn run_loop(l: &Loop) -> Result<(f64, f64)> {
    let mut cmd = Command::new(&l.path);
    cmd.args(&l.args);
    let what = format!("{} {}", l.label, l.args.join(" "));
    let (wall, text) = run_capture(cmd, &what)?;
    let bad = || Error::failed(format!("{what}: unexpected output: {text:?}"));
    let first = text.lines().next().ok_or_else(bad)?;
    if !first.contains(", failed: 0,") {
        return Err(Error::failed(format!("{what}: {first}")));
    }
    let us = text
        .split(" us each")
        .next()
        .and_then(|head| head.rsplit(' ').next())
        .and_then(|n| n.parse::<f64>().ok())
        .ok_or_else(bad)?;
    Ok((us, wall))
}
// ANCHOR_END: run_loop

#[derive(Clone)]
struct Ct {
    fork_ms: f64,
    thread_ms: f64,
    zombies: f64,
}

fn run_creattime(path: &Path, samples: u64) -> Result<Ct> {
    let mut cmd = Command::new(path);
    cmd.args([samples.to_string(), "--json".into()]);
    let what = format!("creattime {samples}");
    let (_, text) = run_capture(cmd, &what)?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| Error::failed(format!("{what}: bad JSON: {e}")))?;
    let num = |p: &str| v.pointer(p).and_then(serde_json::Value::as_f64);
    match (num("/fork/average_ms"), num("/thread/average_ms")) {
        (Some(fork_ms), Some(thread_ms)) => Ok(Ct {
            fork_ms,
            thread_ms,
            zombies: num("/zombies_before_reaping").unwrap_or(0.0),
        }),
        _ => Err(Error::failed(format!("{what}: no averages in {text}"))),
    }
}

fn us(s: &Summary) -> String {
    with_range(s.median, s.min, s.max, 1)
}

fn find<'a>(rows: &'a [LoopRow], program: &str) -> Option<&'a LoopRow> {
    rows.iter().find(|r| r.program == program)
}

fn article_table(d: &Data) -> Table {
    let n = d.article.first().map_or(0, |r| r.iterations);
    let mut t = Table::new(
        format!(
            "1. Create and destroy {n} processes or threads (article 000: 100,000)"
        ),
        &[
            "program",
            "us per create+destroy",
            "whole run s",
            "article (Celeron 1.5 GHz, 2.6.32)",
        ],
    );
    for r in &d.article {
        let then = match r.program.as_str() {
            "forkcreat --reap sigchld" => "about 180 us (0.18 ms)",
            "pthreadcreat" => "5-6x faster than processes",
            _ => "",
        };
        t.row(vec![
            r.program.clone(),
            us(&r.us_per_create),
            with_range(r.wall_s.median, r.wall_s.min, r.wall_s.max, 3),
            then.into(),
        ]);
    }
    let ratio = |fork: &str| {
        find(&d.article, fork)
            .zip(find(&d.article, "pthreadcreat"))
            .map(|(f, t)| f.us_per_create.median / t.us_per_create.median)
    };
    if let (Some(sig), Some(wait)) =
        (ratio("forkcreat --reap sigchld"), ratio("forkcreat --reap wait"))
    {
        t.note(format!(
            "Today threads are {sig:.1}x faster than processes reaped by SIGCHLD and \
             {wait:.1}x faster than processes reaped one by one (article: 5-6x)."
        ));
    }
    t.note(format!(
        "Microseconds as each program timed its own loop: median (min-max) of {} rounds.",
        d.rounds
    ));
    t
}

fn lecture_table(d: &Data) -> Table {
    let n = d.lecture.first().map_or(0, |r| r.iterations);
    let mut t = Table::new(
        format!(
            "2. The lecture's loops, iter = {n} (001): microseconds per create+delete"
        ),
        &["", "today", "Linux 2.4.20 (2 x 728 MHz)", "Solaris 2.9 (333 MHz SPARC)"],
    );
    let fork = find(&d.lecture, "forkcreat --reap wait");
    let thread = find(&d.lecture, "pthreadcreat");
    if let Some(r) = thread {
        t.row(vec![
            "Threads".into(),
            us(&r.us_per_create),
            "12".into(),
            "138".into(),
        ]);
    }
    if let Some(r) = fork {
        t.row(vec![
            "Processes".into(),
            us(&r.us_per_create),
            "722".into(),
            "9077".into(),
        ]);
    }
    if let (Some(f), Some(th)) = (fork, thread) {
        t.row(vec![
            "Processes / threads".into(),
            format!("{:.1}", f.us_per_create.median / th.us_per_create.median),
            "60.2".into(),
            "65.8".into(),
        ]);
    }
    t.note("Today: `forkcreat --reap wait` and `pthreadcreat`, median (min-max) of the rounds.");
    t
}

fn creattime_table(d: &Data) -> Table {
    let mut t = Table::new(
        "3. Only the create call (003): average ms per call, fork/thread ratio",
        &[
            "samples",
            "fork ms",
            "thread ms",
            "ratio today",
            "zombies",
            "ratio 2.4.22 P3-700",
            "ratio 2.6.6 P4 2.6 GHz",
        ],
    );
    let then = |s: u64| match s {
        20 => ("4.33", "9.61"),
        128 => ("3.92", "9.38"),
        255 => ("1.64", "9.39"),
        _ => ("", ""),
    };
    for r in &d.creattime {
        let (a, b) = then(r.samples);
        t.row(vec![
            r.samples.to_string(),
            with_range(r.fork_ms.median, r.fork_ms.min, r.fork_ms.max, 4),
            with_range(r.thread_ms.median, r.thread_ms.min, r.thread_ms.max, 4),
            format!("{:.2}", r.ratio.median),
            format!("{:.0}", r.zombies_before_reaping.median),
            a.into(),
            b.into(),
        ]);
    }
    t.note(
        "The 2004 figures (fork 0.327/0.333/0.345 ms and thread 0.076/0.085/0.210 ms on \
         2.4.22; fork 0.258/0.243/0.242 ms and thread 0.027/0.026/0.026 ms on 2.6.6) \
         are from the post. Today: median (min-max) of the rounds' averages; zombies: \
         children ended but not yet reaped when the fork test finished (median).",
    );
    t
}

fn vs_c_table(d: &Data) -> Table {
    let mut t = Table::new(
        "4. Rust against the C loops (cc -O2), run back to back in each round",
        &[
            "program",
            "against",
            "Rust us",
            "C us",
            "Rust / C (median of pairs)",
            "min-max",
        ],
    );
    for p in &d.vs_c {
        let (Some(rust), Some(c)) =
            (find(&d.article, &p.program), find(&d.article, &p.against))
        else {
            continue;
        };
        let against = p.against.strip_prefix(&p.program).unwrap_or(&p.against);
        t.row(vec![
            p.program.clone(),
            against.trim().trim_matches(['(', ')']).to_string(),
            format!("{:.1}", rust.us_per_create.median),
            format!("{:.1}", c.us_per_create.median),
            format!("{:.3}", p.ratio.median),
            format!("{:.3}-{:.3}", p.ratio.min, p.ratio.max),
        ]);
    }
    t.note(format!(
        "{} pairs; each program timed its own loop with the same clock placement. \
         \"C, Rust's mappings\" is forkcreat.c linked with rust_image.c: the same \
         loop in a process with the mappings a Rust program starts with (libgcc_s, \
         the main thread's signal stack, a heap), which fork copies and exit tears \
         down for every child. All C is built with {}.",
        d.rounds,
        crate::bins::C_FLAGS.join(" ")
    ));
    t
}

/// Bar charts (rows that are programs, not points on an axis), written
/// beside the line charts `publish` writes.
fn write_bars(d: &Data, out: &Path) -> Result<()> {
    let rows = d
        .article
        .iter()
        .map(|r| {
            let u = &r.us_per_create;
            Row::new(&r.program, u.median).range(u.min, u.max)
        })
        .collect();
    let svg = Bars::new(
        "Create and destroy one process or thread",
        "microseconds: median, whisker min-max of the rounds",
        false,
    )
    .group("", rows)
    .to_svg();
    crate::results::write_file(&out.join("create-destroy.svg"), &svg)
}

fn charts(d: &Data) -> Vec<(String, Chart)> {
    let mut charts = Vec::new();
    if d.creattime.len() > 1 {
        let points = |f: fn(&CreattimeRow) -> f64| {
            d.creattime.iter().map(|r| (r.samples as f64, f(r))).collect()
        };
        charts.push((
            "creattime".to_string(),
            Chart::new(
                "Only the create call (creattime): average per call",
                "samples",
                "milliseconds (median of rounds)",
            )
            .series("fork()", points(|r| r.fork_ms.median))
            .series("thread spawn", points(|r| r.thread_ms.median)),
        ));
    }
    charts
}
