//! `lab run fork-vs-thread`: `fork.c` against `thread.c` (article 000,
//! after Zhou Li et al.). N workers each print COUNT lines to stdout and to
//! a shared log; the programs are timed from outside like `time ./fork`,
//! five rounds per setting.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::chart::Chart;
use crate::results::Header;
use crate::stats::Summary;
use crate::table::{Table, with_range};
use clap::Parser;
use labkit::lines::{check_log, payload};
use labkit::measure::{Usage, run};
use labkit::{Error, Result};
use serde::Serialize;

use super::Experiment;
use crate::report::{Common, Headline, Report};

pub const EXPERIMENT: Experiment = Experiment {
    name: "fork-vs-thread",
    about: "fork.c vs thread.c: N workers print COUNT lines each (article 000)",
    all_args: &[],
    run: main,
};

/// fork.c vs thread.c: N workers each print COUNT lines to stdout and a
/// shared log, timed from outside like `time ./fork`.
#[derive(Parser)]
struct Args {
    #[command(flatten)]
    common: Common,

    /// Custom grid: worker counts, e.g. 10,100 (use with --counts)
    #[arg(long, value_delimiter = ',', requires = "counts",
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    procs: Vec<u32>,

    /// Custom grid: lines per worker, e.g. 100,1000 (use with --procs)
    #[arg(long, value_delimiter = ',', requires = "procs",
          value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    counts: Vec<u64>,

    /// Custom grid: print lines of this many bytes instead of "hello linux"
    #[arg(long, value_name = "BYTES", requires = "procs",
          value_parser = clap::value_parser!(u64).range(1..=4000))]
    line: Option<u64>,

    /// Let the programs print to this terminal instead of /dev/null (not
    /// with --json: their lines would land in the JSON)
    #[arg(long, conflicts_with = "json")]
    console: bool,

    /// Also time the C originals (crates/*/c/*.c, built with cc -O2) in the
    /// same rounds, side by side
    #[arg(long)]
    vs_c: bool,
}

/// One setting of the articles' macros.
#[derive(Clone, Copy, Debug, Serialize)]
struct Setting {
    procs: u32,
    count: u64,
    line_bytes: Option<u64>,
}

/// Which macro a grid varies: its chart's x axis.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
#[serde(rename_all = "lowercase")]
enum Axis {
    Count,
    Workers,
    None,
}

struct Grid {
    name: &'static str,
    title: String,
    axis: Axis,
    settings: Vec<Setting>,
}

fn grid(
    name: &'static str,
    title: &str,
    axis: Axis,
    settings: Vec<Setting>,
) -> Grid {
    Grid { name, title: title.to_string(), axis, settings }
}

fn set(procs: u32, count: u64, line_bytes: Option<u64>) -> Setting {
    Setting { procs, count, line_bytes }
}

/// The article's three grids, or a quick subset of each.
fn article_grids(full: bool) -> Vec<Grid> {
    let pick = |all: &[u64], quick: &[u64]| {
        if full { all.to_vec() } else { quick.to_vec() }
    };
    let counts = pick(&[100, 500, 1000, 5000], &[100, 1000, 5000]);
    let workers = pick(&[100, 255, 350, 500, 800, 1000], &[100, 500, 1000]);
    let long = pick(&[100, 500, 2000], &[100, 2000]);
    vec![
        grid(
            "count",
            "1. P = 255 workers, COUNT lines each",
            Axis::Count,
            counts.iter().map(|&c| set(255, c, None)).collect(),
        ),
        grid(
            "workers",
            "2. P workers, COUNT = 1000 lines each",
            Axis::Workers,
            workers.iter().map(|&p| set(p as u32, 1000, None)).collect(),
        ),
        grid(
            "long-lines",
            "3. P = 255 workers, COUNT lines of 256 bytes",
            Axis::Count,
            long.iter().map(|&c| set(255, c, Some(256))).collect(),
        ),
    ]
}

/// A program under test and how to tell it a setting.
struct Program {
    label: &'static str,
    path: PathBuf,
    /// The Rust programs take flags and are checked line by line; the C
    /// originals take positional arguments and tear lines, so only their
    /// byte count is checked.
    rust: bool,
    workers_flag: &'static str,
}

impl Program {
    fn command(&self, s: &Setting, log: &Path) -> Command {
        let mut cmd = Command::new(&self.path);
        if self.rust {
            cmd.args([
                self.workers_flag,
                &s.procs.to_string(),
                "--count",
                &s.count.to_string(),
            ]);
            cmd.arg("--log").arg(log);
            if let Some(n) = s.line_bytes {
                cmd.args(["--line", &n.to_string()]);
            }
        } else {
            cmd.args([s.procs.to_string(), s.count.to_string()]).arg(log);
            cmd.args(s.line_bytes.map(|n| n.to_string()));
        }
        cmd
    }
}

#[derive(Serialize)]
struct ProgramRuns {
    program: &'static str,
    /// Wall-clock seconds, like `time`'s real.
    wall_s: Summary,
    /// User + system CPU seconds of the program and its children.
    cpu_s: Summary,
    runs: Vec<Usage>,
}

#[derive(Serialize)]
struct Row {
    #[serde(flatten)]
    setting: Setting,
    programs: Vec<ProgramRuns>,
}

#[derive(Serialize)]
struct GridResult {
    name: &'static str,
    title: String,
    axis: Axis,
    rows: Vec<Row>,
}

#[derive(Serialize)]
struct Data {
    rounds: u32,
    full: bool,
    stdout: &'static str,
    grids: Vec<GridResult>,
}

fn main(argv: Vec<OsString>) -> Result<()> {
    let args = labkit::cli::parse_from::<Args, _, _>(argv);
    if args.common.full && !args.procs.is_empty() {
        return Err(Error::usage(
            "--full runs the article's grids; it does not take --procs",
        ));
    }
    let out = args.common.start(EXPERIMENT.name)?;
    let grids = if args.procs.is_empty() {
        article_grids(args.common.full)
    } else {
        let axis = match (args.procs.len(), args.counts.len()) {
            (1, n) if n > 1 => Axis::Count,
            (n, 1) if n > 1 => Axis::Workers,
            _ => Axis::None,
        };
        let settings = args
            .procs
            .iter()
            .flat_map(|&p| args.counts.iter().map(move |&c| set(p, c, args.line)))
            .collect();
        vec![grid("custom", "P workers, COUNT lines each", axis, settings)]
    };
    let programs = programs(args.vs_c)?;
    let total = grids.iter().map(|g| g.settings.len()).sum::<usize>()
        * programs.len()
        * args.common.rounds as usize;
    let bar = crate::progress::bar(total as u64, EXPERIMENT.name);
    let mut results = Vec::new();
    for g in &grids {
        let mut rows = Vec::new();
        for s in &g.settings {
            bar.set_message(format!("P={} COUNT={}", s.procs, s.count));
            let mut runs: Vec<Vec<Usage>> = vec![Vec::new(); programs.len()];
            for round in 0..args.common.rounds as usize {
                // Rotate who goes first, so slow drift (cache, frequency,
                // page cache) does not always favour the same program.
                for k in 0..programs.len() {
                    let i = (k + round) % programs.len();
                    runs[i].push(run_once(&programs[i], s, args.console)?);
                    bar.inc(1);
                }
            }
            rows.push(row(s, &programs, runs));
        }
        results.push(GridResult {
            name: g.name,
            title: g.title.clone(),
            axis: g.axis,
            rows,
        });
    }
    bar.finish_and_clear();
    let data = Data {
        rounds: args.common.rounds,
        full: args.common.full,
        stdout: if args.console { "terminal" } else { "/dev/null" },
        grids: results,
    };
    let report = Report {
        header: Header::new(EXPERIMENT.name),
        headline: headline(&data),
        tables: data.grids.iter().flat_map(|g| tables(g, &programs)).collect(),
        charts: data.grids.iter().filter_map(chart).collect(),
        files: Vec::new(),
        data,
    };
    report.publish(&args.common, &out)
}

fn programs(vs_c: bool) -> Result<Vec<Program>> {
    let bins = crate::bins::programs(&["fork", "thread"])?;
    let mut list = vec![
        Program {
            label: "fork",
            path: bins[0].clone(),
            rust: true,
            workers_flag: "--procs",
        },
        Program {
            label: "thread",
            path: bins[1].clone(),
            rust: true,
            workers_flag: "--threads",
        },
    ];
    if vs_c {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        for (label, source) in [
            ("fork.c", "crates/fork/c/fork.c"),
            ("thread.c", "crates/thread/c/thread.c"),
        ] {
            let name = label.replace('.', "-");
            let path = crate::bins::compile_c(&root.join(source), &name)?;
            list.push(Program { label, path, rust: false, workers_flag: "" });
        }
    }
    Ok(list)
}

// ANCHOR: run_once
/// One `time ./fork`: a fresh log in a temporary directory, the program as
/// a whole process, its log checked, the directory removed.
fn run_once(program: &Program, s: &Setting, console: bool) -> Result<Usage> {
    let dir = labkit::cleanup::tempdir("lab-fork-vs-thread-")
        .map_err(|e| Error::io("cannot create a temporary directory", e))?;
    let log = dir.path().join("logFile.log");
    let mut cmd = program.command(s, &log);
    cmd.stdin(Stdio::null());
    if !console {
        cmd.stdout(Stdio::null());
    }
    let what = format!("{} P={} COUNT={}", program.label, s.procs, s.count);
    let done =
        run(&mut cmd).map_err(|e| Error::io(format!("cannot run {what}"), e))?;
    done.check(&what).map_err(Error::failed)?;
    let data = std::fs::read(&log).map_err(|e| Error::io(log.display(), e))?;
    let text = payload(s.line_bytes.map(|n| n as usize));
    let checked = if program.rust {
        check_log(&data, &text, u64::from(s.procs), s.count)
    } else {
        let digits: u64 = (0..s.count).map(|j| j.to_string().len() as u64).sum();
        let expected =
            u64::from(s.procs) * (digits + s.count * (text.len() as u64 + 3));
        let got = data.len() as u64;
        if got == expected {
            Ok(())
        } else {
            Err(format!("{got} bytes, expected {expected}"))
        }
    };
    checked.map_err(|e| Error::failed(format!("{what}: bad log: {e}")))?;
    Ok(done.usage)
}
// ANCHOR_END: run_once

fn row(s: &Setting, programs: &[Program], runs: Vec<Vec<Usage>>) -> Row {
    let programs = programs
        .iter()
        .zip(runs)
        .map(|(p, runs)| {
            let wall: Vec<f64> = runs.iter().map(|u| u.wall_s).collect();
            let cpu: Vec<f64> = runs.iter().map(|u| u.user_s + u.sys_s).collect();
            ProgramRuns {
                program: p.label,
                wall_s: Summary::of(&wall).expect("at least one round"),
                cpu_s: Summary::of(&cpu).expect("at least one round"),
                runs,
            }
        })
        .collect();
    Row { setting: *s, programs }
}

/// The median over rounds of `a`'s time over `b`'s in the same round: each
/// round runs every program once, so the pair shares whatever the machine
/// was doing then.
fn paired_ratio(row: &Row, a: &str, b: &str) -> Option<f64> {
    let runs =
        |name| row.programs.iter().find(|p| p.program == name).map(|p| &p.runs);
    let (a, b) = (runs(a)?, runs(b)?);
    let ratios: Vec<f64> =
        a.iter().zip(b).map(|(a, b)| a.wall_s / b.wall_s).collect();
    Summary::of(&ratios).map(|s| s.median)
}

/// The figures the claims are judged on: fork's time over thread's across
/// every setting, at the largest COUNT, and how straight time grows with P.
fn headline(data: &Data) -> Headline {
    let rows = || data.grids.iter().flat_map(|g| &g.rows);
    let ratios: Vec<f64> =
        rows().filter_map(|r| paired_ratio(r, "fork", "thread")).collect();
    let all = Summary::of(&ratios);
    let count = data.grids.iter().find(|g| g.name == "count");
    let last = count.and_then(|g| g.rows.iter().max_by_key(|r| r.setting.count));
    let workers = data.grids.iter().find(|g| g.name == "workers");
    let fit = |program: &str| {
        let g = workers?;
        let points: Vec<(f64, f64)> = g
            .rows
            .iter()
            .filter_map(|r| {
                let p = r.programs.iter().find(|p| p.program == program)?;
                Some((f64::from(r.setting.procs), p.wall_s.median))
            })
            .collect();
        crate::stats::r_squared(&points)
    };
    crate::report::headline()
        .add(
            "fork_over_thread",
            "fork's time over thread's, median over every setting",
            all.map(|s| s.median),
            "x",
        )
        .add(
            "fork_over_thread_min",
            "the same, lowest setting",
            all.map(|s| s.min),
            "x",
        )
        .add(
            "fork_over_thread_max",
            "the same, highest setting",
            all.map(|s| s.max),
            "x",
        )
        .add(
            "fork_over_thread_at_largest_count",
            &format!(
                "fork's time over thread's at P = 255, COUNT = {}",
                last.map_or(0, |r| r.setting.count)
            ),
            last.and_then(|r| paired_ratio(r, "fork", "thread")),
            "x",
        )
        .add(
            "workers_r2_min",
            "R² of a straight line through time against P, the worse of the two",
            fit("fork").zip(fit("thread")).map(|(a, b)| a.min(b)),
            "",
        )
        .add(
            "workers_r2_fork",
            "fork: R² of a straight line through time against P",
            fit("fork"),
            "",
        )
        .add(
            "workers_r2_thread",
            "thread: R² of a straight line through time against P",
            fit("thread"),
            "",
        )
        .build()
}

/// The grid's table: the setting, the times (median and range), and the
/// paired ratios the chapter quotes. With the C programs too, the ratios
/// get a table of their own, first, so that each table fits the book's
/// column with one line per row.
fn tables(g: &GridResult, programs: &[Program]) -> Vec<Table> {
    let ratios = [
        ("fork/thread", "fork", "thread"),
        ("fork/fork.c", "fork", "fork.c"),
        ("thread/thread.c", "thread", "thread.c"),
    ];
    let with_c = programs.len() > 2;
    let ratios = &ratios[..if with_c { 3 } else { 1 }];
    let setting =
        |r: &Row| vec![r.setting.procs.to_string(), r.setting.count.to_string()];
    let ratio_cells = |r: &Row| -> Vec<String> {
        ratios
            .iter()
            .map(|(_, a, b)| {
                paired_ratio(r, a, b).map_or("-".into(), |x| format!("{x:.2}"))
            })
            .collect()
    };
    let time_cells = |r: &Row| -> Vec<String> {
        r.programs
            .iter()
            .map(|p| with_range(p.wall_s.median, p.wall_s.min, p.wall_s.max, 3))
            .collect()
    };
    let ratio_note = "Ratios: median over the rounds of one program's time over the \
                      other's in the same round.";
    let time_note = "Seconds of wall-clock time (`time`'s real): median (min-max) of \
                     the rounds.";
    let labels: Vec<String> =
        programs.iter().map(|p| format!("{} s", p.label)).collect();
    let mut time_headers = vec!["P", "COUNT"];
    time_headers.extend(labels.iter().map(String::as_str));
    let mut ratio_headers = vec!["P", "COUNT"];
    ratio_headers.extend(ratios.iter().map(|r| r.0));
    if !with_c {
        let mut headers = ratio_headers;
        headers.extend(&time_headers[2..]);
        let mut t = Table::new(&g.title, &headers);
        for r in &g.rows {
            t.row([setting(r), ratio_cells(r), time_cells(r)].concat());
        }
        t.note(format!("{ratio_note} {time_note}"));
        return vec![t];
    }
    let mut ratios_table = Table::new(
        format!("{}: paired ratios of the times", g.title),
        &ratio_headers,
    );
    let mut times_table = Table::new(format!("{}: seconds", g.title), &time_headers);
    for r in &g.rows {
        ratios_table.row([setting(r), ratio_cells(r)].concat());
        times_table.row([setting(r), time_cells(r)].concat());
    }
    ratios_table.note(ratio_note);
    times_table.note(time_note);
    vec![ratios_table, times_table]
}

fn chart(g: &GridResult) -> Option<(String, Chart)> {
    let (x_label, x): (&str, fn(&Row) -> f64) = match g.axis {
        Axis::Count => ("lines per worker (COUNT)", |r| r.setting.count as f64),
        Axis::Workers => ("workers (P)", |r| f64::from(r.setting.procs)),
        Axis::None => return None,
    };
    let first = g.rows.first()?;
    let mut chart = Chart::new(&g.title, x_label, "seconds (median)");
    for (i, p) in first.programs.iter().enumerate() {
        let points =
            g.rows.iter().map(|r| (x(r), r.programs[i].wall_s.median)).collect();
        chart = chart.series(p.program, points);
    }
    Some((g.name.to_string(), chart))
}
