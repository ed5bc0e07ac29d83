//! `lab run fork-vs-thread`: `fork.c` against `thread.c` (Zhou Li et al.).
//! N workers each print COUNT lines to stdout and to a shared log; the
//! programs are timed from outside like `time ./fork`, six rounds per
//! setting by default. The tables and charts: [`tables`].

mod tables;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::engine::{self, Engine, Series};
use crate::results::Header;
use clap::Parser;
use labkit::cli::Workload;
use labkit::lines::{check_log, payload};
use labkit::measure::{Usage, run};
use labkit::{Error, Result};
use serde::Serialize;

use super::{Declared, Experiment};
use crate::plan::Plan;
use crate::report::{Common, Context, Report};

pub const EXPERIMENT: Experiment = Experiment::new::<Args>(
    "fork-vs-thread",
    "fork.c vs thread.c: N workers print COUNT lines each (Zhou Li et al.)",
    main,
)
.for_reference(&[Declared::own(&["--vs-c"]).full().rounds(12)])
// Under all, two rounds (even, as the engine's order asks) on two CPUs: the
// claims are judged on the one-CPU run below, which keeps its six.
.under_all(Declared::DEFAULT.rounds(2))
// The printing claims are judged on the article's own C programs on one
// CPU (claims.toml says why): the one-CPU runs time them too.
.one_cpu(Declared::own(&["--vs-c"]))
.headline(&[
    "fork_over_thread",
    "fork_over_thread_at_largest_count",
    "workers_slope_ratio",
    "workers_slope_ratio_fork",
    "workers_slope_ratio_thread",
    "fork_over_thread_c",
    "fork_over_thread_at_largest_count_c",
    "workers_slope_ratio_c",
    "workers_slope_ratio_fork_c",
    "workers_slope_ratio_thread_c",
])
.data::<Data>();

/// fork.c vs thread.c: N workers each print COUNT lines to stdout and a
/// shared log, timed from outside like `time ./fork`.
#[derive(Parser, Clone)]
struct Args {
    #[command(flatten)]
    common: Common,

    /// Custom grid: worker counts, e.g. 10,100 (use with --counts; not
    /// with --full, which runs the article's grids)
    #[arg(long, value_delimiter = ',', requires = "counts", conflicts_with = "full",
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
crate::options!(Args);

/// One setting of the articles' macros.
#[derive(Clone, Copy, Debug, Serialize, schemars::JsonSchema)]
struct Setting {
    procs: u32,
    count: u64,
    line_bytes: Option<u64>,
}

/// Which macro a grid varies: its chart's x axis.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Axis {
    Count,
    Workers,
    None,
}

/// A grid as the results name it (its settings aside: its points are the
/// series whose `grid` is its name).
#[derive(Serialize, schemars::JsonSchema)]
#[schemars(rename = "GridInfo")]
struct Grid {
    name: &'static str,
    title: &'static str,
    axis: Axis,
    /// Each run made this many times a round, the quickest kept
    /// ([`Engine::best_of`]).
    best_of: usize,
    #[serde(skip)]
    settings: Vec<Setting>,
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
    // Grids 1 and 2 judge claims on single runs: processes pulling ahead
    // on grid 1's largest COUNT, and the workers' slope, which compares
    // runs of grid 2 made a second or more apart. A stretch in which the
    // whole machine ran slower (seen here on a spinning loop on the other
    // CPU too) would move one round's figure, so each of their runs is
    // the quicker of two, a pass over the grid apart.
    vec![
        Grid {
            name: "count",
            title: "1. P = 255 workers, COUNT lines each",
            axis: Axis::Count,
            best_of: 2,
            settings: counts.iter().map(|&c| set(255, c, None)).collect(),
        },
        Grid {
            name: "workers",
            title: "2. P workers, COUNT = 1000 lines each",
            axis: Axis::Workers,
            best_of: 2,
            settings: workers.iter().map(|&p| set(p as u32, 1000, None)).collect(),
        },
        Grid {
            name: "long-lines",
            title: "3. P = 255 workers, COUNT lines of 256 bytes",
            axis: Axis::Count,
            best_of: 1,
            settings: long.iter().map(|&c| set(255, c, Some(256))).collect(),
        },
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
    args: Words,
}

/// A program's command line for this many workers doing this work: its
/// crate's `Options::args`, or `c_args` for a C original.
type Words = fn(u32, Workload) -> Vec<OsString>;

/// The Rust `fork` program ([`fork::Options`]).
fn fork(path: &Path) -> Program {
    let args: Words = |procs, work| fork::Options { procs, work }.args();
    Program { label: "fork", path: path.to_path_buf(), rust: true, args }
}

#[derive(Serialize, schemars::JsonSchema)]
struct Data {
    rounds: u32,
    full: bool,
    stdout: &'static str,
    grids: Vec<Grid>,
    /// Each program at each setting (`grid`, `procs`, `count`, and
    /// `line_bytes` where set): wall and CPU seconds, switches, RSS.
    series: Vec<Series>,
}

impl Setting {
    /// The engine's setting: the grid and the macros' values.
    fn factors(&self, grid: &str) -> engine::Setting {
        let mut at = engine::setting([
            ("grid", grid.into()),
            ("procs", self.procs.into()),
            ("count", self.count.into()),
        ]);
        if let Some(n) = self.line_bytes {
            at.insert("line_bytes".into(), n.into());
        }
        at
    }
}

fn main(ctx: &Context, plan: &Plan) -> Result<()> {
    let args: Args = plan.args();
    let out = plan.start(ctx)?;
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
        let title = "P workers, COUNT lines each";
        vec![Grid { name: "custom", title, axis, best_of: 1, settings }]
    };
    let programs = programs(args.vs_c)?;
    let labels: Vec<&str> = programs.iter().map(|p| p.label).collect();
    let mut engine = Engine::new(args.common.rounds);
    let points = grids.iter().map(|g| g.settings.len() * g.best_of).sum::<usize>();
    engine.progress(points * engine.runs_for(labels.len()), EXPERIMENT.name);
    // A grid's settings round by round: the workers' slope compares the
    // times of one round's settings, made seconds apart.
    for g in &grids {
        let settings: Vec<_> =
            g.settings.iter().map(|s| s.factors(g.name)).collect();
        engine.best_of(g.best_of, "wall_s");
        engine.measure_grid(&settings, &labels, |s, i| {
            run_once(&programs[i], &g.settings[s], args.console)
        })?;
    }
    let obs = engine.observations();
    Report {
        header: Header::new(EXPERIMENT.name),
        headline: tables::headline(&grids, obs),
        tables: grids.iter().flat_map(|g| tables::tables(g, &labels, obs)).collect(),
        charts: grids
            .iter()
            .filter_map(|g| tables::chart(g, &labels, obs))
            .collect(),
        files: Vec::new(),
        data: Data {
            rounds: args.common.rounds,
            full: args.common.full,
            stdout: if args.console { "terminal" } else { "/dev/null" },
            grids,
            series: obs.series(),
        },
        observations: engine.finish(),
    }
    .publish(&args.common, &out)
}

fn programs(vs_c: bool) -> Result<Vec<Program>> {
    let bins = crate::bins::programs(&["fork", "thread"])?;
    // thread with glibc's default stack, as thread.c.
    let args: Words =
        |threads, work| thread::Options { threads, stack_size: None, work }.args();
    let thread =
        Program { label: "thread", path: bins[1].clone(), rust: true, args };
    let mut list = vec![fork(&bins[0]), thread];
    if vs_c {
        let root = crate::checkout::sources();
        let c: [(_, _, Words); 2] = [
            ("fork.c", "crates/fork/c/fork.c", |procs, work| {
                fork::Options { procs, work }.c_args()
            }),
            ("thread.c", "crates/thread/c/thread.c", |threads, work| {
                thread::Options { threads, stack_size: None, work }.c_args()
            }),
        ];
        for (label, source, args) in c {
            let name = label.replace('.', "-");
            let path = crate::bins::compile_c(&root.join(source), &name)?;
            list.push(Program { label, path, rust: false, args });
        }
    }
    Ok(list)
}

/// One `time ./fork`: a fresh log in a temporary directory, the program as
/// a whole process, its log checked, the directory removed.
fn run_once(program: &Program, s: &Setting, console: bool) -> Result<Usage> {
    let dir = labkit::cleanup::tempdir("lab-fork-vs-thread-")
        .map_err(|e| Error::io("cannot create a temporary directory", e))?;
    let log = dir.path().join("logFile.log");
    let work = Workload {
        count: s.count,
        log: log.clone(),
        line: s.line_bytes,
        json: false,
    };
    let mut cmd = Command::new(&program.path);
    cmd.args((program.args)(s.procs, work)).stdin(Stdio::null());
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
        check_c_log(&data, text.len(), s)
    };
    checked.map_err(|e| Error::failed(format!("{what}: bad log: {e}")))?;
    Ok(done.usage)
}

/// The C originals' log, checked by its size alone: their stdio tears
/// lines when several workers append at once, but loses no byte, so the
/// log holds every `[j]TEXT\n` of every worker, `text_len` bytes of TEXT.
fn check_c_log(data: &[u8], text_len: usize, s: &Setting) -> Result<(), String> {
    let digits: u64 = (0..s.count).map(|j| j.to_string().len() as u64).sum();
    let expected = u64::from(s.procs) * (digits + s.count * (text_len as u64 + 3));
    let got = data.len() as u64;
    if got == expected {
        Ok(())
    } else {
        Err(format!("{got} bytes, expected {expected}"))
    }
}

/// One `time ./fork` of `procs` workers printing `count` lines each: wall
/// seconds. The controls run it against itself.
pub(crate) fn control_once(fork: &Path, procs: u32, count: u64) -> Result<f64> {
    Ok(run_once(&self::fork(fork), &set(procs, count, None), false)?.wall_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_c_log_check_counts_every_byte() {
        // 2 workers, 11 lines each of "hello linux": [0]..[9] have one
        // digit, [10] two; each line is TEXT plus "[", "]" and "\n".
        let s = set(2, 11, None);
        let text = payload(None);
        let line = |j: u64| format!("[{j}]{}\n", String::from_utf8_lossy(&text));
        let log: String = (0..2).flat_map(|_| (0..11).map(line)).collect();
        assert_eq!(check_c_log(log.as_bytes(), text.len(), &s), Ok(()));
        // Torn lines are fine (the byte count is the same) ...
        let torn: String = log.chars().rev().collect();
        assert_eq!(check_c_log(torn.as_bytes(), text.len(), &s), Ok(()));
        // ... a lost byte or a line too many is not.
        let short = &log.as_bytes()[1..];
        let err = check_c_log(short, text.len(), &s).unwrap_err();
        assert_eq!(err, format!("{} bytes, expected {}", log.len() - 1, log.len()));
        let long = format!("{log}{}", line(0));
        assert!(check_c_log(long.as_bytes(), text.len(), &s).is_err());
    }
}
