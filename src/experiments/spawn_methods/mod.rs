//! `lab run spawn-methods`: the 2026 answer to "processes or threads?":
//! microseconds per create+destroy for every way a program can start
//! concurrent work today, then the two things that move the fork figure
//! several-fold: how much memory the parent has resident, and where the
//! tasks run (one core or two).
//!
//! The `spawn-methods` program (crates/spawn-methods) times each method's
//! loop with the monotonic clock, like lmbench's `lat_proc`. The runner
//! calibrates each part's loops with one run of it, then measures each
//! method as a condition of the engine, each run a child limited in
//! address space to what it touches plus [`HEADROOM`], so that a large
//! `--rss` can fail the program but never take the runner (or the
//! machine) with it. Tables and charts: [`tables`].

mod tables;

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::engine::{self, Engine, Observed, Placement, Series, Setting};
use crate::results::Header;
use clap::Parser;
use labkit::limits::{format_size, size_in};
use labkit::{Error, Result};
use serde::Serialize;
use spawn_methods::Method;

use super::{Declared, Experiment};
use crate::plan::Plan;
use crate::report::{Common, Context, Report};

pub const EXPERIMENT: Experiment = Experiment::new::<Args>(
    "spawn-methods",
    "fork, vfork, exec, posix_spawn, threads, a pool, tokio: cost today",
    main,
)
// Under all, fork against a parent of 0 and 256 MiB only, two rounds (even,
// as the engine's order asks): no claim is judged on spawn-methods, and the
// 64 MiB and 1 GiB parents took half the run.
.under_all(Declared::own(&["--rss", "0,256M"]).rounds(2))
.headline(&["{method}_us"])
.data::<Data>();

/// Address space the program may use beyond what it touches: its own
/// code and libraries, thread stacks (8 MiB each, reserved), malloc's
/// per-thread arenas (64 MiB each, reserved) and the tokio runtime.
pub const HEADROOM: u64 = 1 << 30;

/// Microseconds per create+destroy for fork+wait, vfork, fork+exec,
/// posix_spawn, std::process::Command, pthread_create, std::thread at three
/// stack sizes, a pooled thread and a tokio task; then fork against the
/// parent's resident memory and against CPU placement.
#[derive(Parser, Clone)]
struct Args {
    #[command(flatten)]
    common: Common,

    /// Resident memory the parent touches before forking, for the RSS
    /// table (each at most the memory available, MemAvailable)
    #[arg(long, value_delimiter = ',', default_value = "0,64M,256M,1G",
          value_parser = size_in(0, 64 << 30))]
    rss: Vec<u64>,

    /// The tiny program the exec methods start (run with no arguments and
    /// an empty environment; it must exit 0)
    #[arg(long, value_name = "PATH", default_value = "/bin/true")]
    exec: PathBuf,

    /// Seconds each round of each loop should last; the iteration count is
    /// calibrated from a warm-up (at least 3) [default: 0.1; 0.5 with --full]
    #[arg(long, value_name = "SECONDS",
          value_parser = labkit::cli::seconds_in(0.0001, 60.0))]
    budget: Option<f64>,
}
crate::options!(Args);

/// A run of one method: its microseconds per create+destroy, its
/// iterations, and the program's resident memory while it looped.
impl Observed for spawn_methods::Report {
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        let run = &self.runs[0];
        vec![
            ("us", run.us),
            ("iterations", run.iterations as f64),
            ("vm_rss_kib", self.vm_rss_kib as f64),
        ]
    }
}

/// The methods timed against resident memory, and against placement.
const RSS: [Method; 3] = [Method::ForkWait, Method::Vfork, Method::Thread];
const PLACED: [Method; 3] = [Method::ForkWait, Method::Thread, Method::Pool];

/// A part of the experiment: its setting (`part`, and `touched_bytes` or
/// `placement`), its methods, the memory the program touches, where it runs.
struct Part {
    at: Setting,
    methods: &'static [Method],
    rss: u64,
    placement: Placement,
}

/// A part's setting: its name and where it ran.
fn part(part: &str, placement: &str) -> Setting {
    engine::setting([("part", part.into()), ("placement", placement.into())])
}

/// The settings of each part: every method, a size touched, a placement.
fn methods() -> Setting {
    part("methods", "unpinned")
}

fn touched(bytes: u64) -> Setting {
    let mut at = part("rss", "unpinned");
    at.insert("touched_bytes".into(), bytes.into());
    at
}

fn placed(name: &str) -> Setting {
    part("placement", name)
}

#[derive(Serialize, schemars::JsonSchema)]
struct Data {
    rounds: u32,
    full: bool,
    budget_s: f64,
    exec: String,
    transparent_hugepages: String,
    /// Each method's condition and what it does, as the tables say it.
    methods: Vec<(String, String)>,
    /// The bytes the parent touched, each a setting of the `rss` part.
    rss: Vec<u64>,
    /// The placements, each a setting of the `placement` part, and its row.
    placements: Vec<(&'static str, String)>,
    /// Each method at each setting: its microseconds, iterations, VmRSS.
    series: Vec<Series>,
}

fn main(ctx: &Context, plan: &Plan) -> Result<()> {
    let args: Args = plan.args();
    let budget = args.budget.unwrap_or(if args.common.full { 0.5 } else { 0.1 });
    if !args.exec.is_file() {
        let exec = args.exec.display();
        let why = if args.exec.is_dir() {
            "a folder, not a program"
        } else {
            "no such program"
        };
        return Err(Error::usage(format!("--exec {exec}: {why}")));
    }
    // Once here, so a bad --exec is a usage error of the runner's own.
    spawn_methods::check_exec(&args.exec)?;
    // Before anything runs: a size the machine cannot hold is a usage
    // error here, as it is in the program.
    let available = spawn_methods::mem_available();
    for &bytes in &args.rss {
        spawn_methods::check_rss(bytes, available)?;
    }
    let out = plan.start(ctx)?;
    let program = crate::bins::programs(&["spawn-methods"])?.remove(0);
    let (parts, placements) = parts(&args.rss, &labkit::affinity::allowed_cpus()?);
    let mut engine = Engine::new(args.common.rounds);
    let runs = parts.iter().map(|p| engine.runs_for(p.methods.len())).sum();
    engine.progress(runs, EXPERIMENT.name);
    for p in &parts {
        // Calibrated in each part: each fork copies more page tables as
        // the parent grows, and a pinned pool hands off at its own pace.
        let run = |methods: &[Method], counts| {
            run(&program, &args.exec, budget, p, methods, counts)
        };
        let n: Vec<u64> =
            run(p.methods, None)?.runs.iter().map(|r| r.iterations).collect();
        let names: Vec<String> = p.methods.iter().map(|m| m.name()).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        engine
            .measure(&p.at, &names, |k| run(&p.methods[k..=k], Some(&n[k..=k])))?;
    }
    let obs = engine.observations();
    let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled");
    let data = Data {
        rounds: args.common.rounds,
        full: args.common.full,
        budget_s: budget,
        exec: args.exec.display().to_string(),
        transparent_hugepages: thp
            .map_or_else(|_| "unknown".into(), |s| s.trim().to_string()),
        methods: Method::ALL.iter().map(|&m| (m.name(), m.label())).collect(),
        rss: args.rss.clone(),
        placements,
        series: obs.series(),
    };
    Report {
        header: Header::new(EXPERIMENT.name),
        headline: tables::headline(obs),
        tables: vec![
            tables::methods_table(&data, obs),
            tables::rss_table(&data, obs),
            tables::placement_table(&data, obs),
        ],
        charts: tables::charts(&data, obs),
        files: tables::bars(&data, obs),
        observations: engine.finish(),
        data,
    }
    .publish(&args.common, &out)
}

/// The program at `p`: `methods` with one iteration count each (or, with
/// none, calibrated to `budget`), limited in address space.
fn run(
    program: &Path,
    exec: &Path,
    budget: f64,
    p: &Part,
    methods: &[Method],
    counts: Option<&[u64]>,
) -> Result<spawn_methods::Report> {
    let cpus = p.placement.cpus();
    let options = spawn_methods::Options {
        methods: methods.to_vec(),
        counts: counts.map(<[u64]>::to_vec),
        budget,
        rss: p.rss,
        // Children and threads inherit the creator's CPU; only the pool's
        // worker can be put on another.
        cpus: cpus.map(|[creator, _]| vec![creator]),
        worker_cpu: cpus.and_then(|[creator, w]| (w != creator).then_some(w)),
        exec: exec.to_path_buf(),
    };
    let mut cmd = Command::new(program);
    cmd.args(options.args());
    let limits = labkit::limited::Limits {
        address_space: Some(p.rss + HEADROOM),
        ..Default::default()
    };
    labkit::limited::apply(&mut cmd, limits);
    let what = format!("spawn-methods ({} touched)", format_size(p.rss));
    let (report, _): (spawn_methods::Report, _) = crate::bins::run_json(cmd, &what)?;
    if report.runs.len() != methods.len() {
        return Err(Error::failed(
            "spawn-methods: a method is missing from its report",
        ));
    }
    Ok(report)
}

/// The three parts: every method; fork against resident memory; and
/// placement: unpinned, all on the first allowed CPU and, with two CPUs,
/// the pool's worker on the second (children and threads inherit the
/// creator's CPU, so only the pool can be split over two cores). With each
/// placement's row in the placement table.
fn parts(rss: &[u64], cpus: &[usize]) -> (Vec<Part>, Vec<(&'static str, String)>) {
    let unpinned = Placement::Unpinned;
    let all =
        Part { at: methods(), methods: &Method::ALL, rss: 0, placement: unpinned };
    let mut parts = vec![all];
    for &bytes in rss {
        let at = touched(bytes);
        parts.push(Part { at, methods: &RSS, rss: bytes, placement: unpinned });
    }
    let mut placements = Vec::new();
    for placement in std::iter::once(unpinned).chain(Placement::pinned(cpus)) {
        let (row, methods): (String, &'static [Method]) = match placement {
            Placement::Unpinned => {
                (format!("unpinned ({} CPUs allowed)", cpus.len()), &PLACED)
            }
            Placement::OneCpu(c) => (format!("same core (all on CPU {c})"), &PLACED),
            Placement::TwoCpus(a, b) => (
                format!("two cores (creator on CPU {a}, pool worker on {b})"),
                &[Method::Pool],
            ),
        };
        let at = placed(placement.name());
        parts.push(Part { at, methods, rss: 0, placement });
        placements.push((placement.name(), row));
    }
    (parts, placements)
}
