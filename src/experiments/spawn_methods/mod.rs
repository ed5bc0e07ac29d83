//! `lab run spawn-methods`: the 2026 answer to "processes or threads?":
//! microseconds per create+destroy for every way a program can start
//! concurrent work today, then the two things that move the fork figure
//! several-fold: how much memory the parent has resident, and where the
//! tasks run (one core or two).
//!
//! The measuring is the `spawn-methods` program's (crates/spawn-methods):
//! each method a loop timed with the monotonic clock, like lmbench's
//! `lat_proc`. The runner calibrates the loops with one run of the program,
//! then runs it once a round with the methods in the lab's round order,
//! each time as a child limited in address space to what it touches plus
//! [`HEADROOM`], so a large `--rss` can fail the program but never take
//! the runner (or the machine) with it. Tables and charts: [`tables`].

mod tables;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::results::Header;
use crate::stats::{Summary, round_order};
use clap::Parser;
use labkit::limits::{format_size, size_in};
use labkit::{Error, Result};
use serde::Serialize;
use spawn_methods::Method;

use super::Experiment;
use crate::report::{Common, Context, Report};

pub const EXPERIMENT: Experiment = Experiment::new(
    "spawn-methods",
    "fork, vfork, exec, posix_spawn, threads, a pool, tokio: cost today",
    main,
);

/// Address space the program may use beyond what it touches: its own
/// code and libraries, thread stacks (8 MiB each, reserved), malloc's
/// per-thread arenas (64 MiB each, reserved) and the tokio runtime.
pub const HEADROOM: u64 = 1 << 30;

/// Microseconds per create+destroy for fork+wait, vfork, fork+exec,
/// posix_spawn, std::process::Command, pthread_create, std::thread at three
/// stack sizes, a pooled thread and a tokio task; then fork against the
/// parent's resident memory and against CPU placement.
#[derive(Parser)]
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
    #[arg(long, value_name = "SECONDS", value_parser = parse_budget)]
    budget: Option<f64>,
}

fn parse_budget(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if (0.0001..=60.0).contains(&x) => Ok(x),
        _ => Err(format!("'{text}' is not a number of seconds from 0.0001 to 60")),
    }
}

#[derive(Clone, Debug, Serialize)]
struct Row {
    method: String,
    #[serde(skip)]
    kind: Option<Method>,
    iterations: u64,
    /// Microseconds per create+destroy, one value per round.
    us: Summary,
    runs_us: Vec<f64>,
}

#[derive(Clone, Debug, Serialize)]
struct RssRow {
    touched_bytes: u64,
    /// VmRSS of the program while it forked, KiB (median of the rounds).
    vm_rss_kib: u64,
    rows: Vec<Row>,
}

#[derive(Clone, Debug, Serialize)]
struct PlacementRow {
    placement: String,
    rows: Vec<Row>,
}

#[derive(Serialize)]
struct Data {
    rounds: u32,
    full: bool,
    budget_s: f64,
    exec: String,
    transparent_hugepages: String,
    methods: Vec<Row>,
    rss: Vec<RssRow>,
    placement: Vec<PlacementRow>,
}

/// One setting of the program: its methods, the memory it touches, where
/// it runs.
struct Setting {
    methods: Vec<Method>,
    rss: u64,
    cpus: Option<usize>,
    worker_cpu: Option<usize>,
}

/// The program and how every run of it is started.
struct Program<'a> {
    path: PathBuf,
    exec: &'a Path,
    budget: f64,
}

impl Program<'_> {
    /// The program at `s`, with `--budget` (calibrate) or one iteration
    /// count per method, limited in address space.
    fn command(
        &self,
        s: &Setting,
        methods: &[Method],
        counts: Option<&[u64]>,
    ) -> Command {
        let list = |v: Vec<String>| v.join(",");
        let mut cmd = Command::new(&self.path);
        cmd.arg("--method").arg(list(methods.iter().map(|m| value(*m)).collect()));
        match counts {
            Some(n) => cmd
                .arg("--iterations")
                .arg(list(n.iter().map(u64::to_string).collect())),
            None => cmd.arg("--budget").arg(self.budget.to_string()),
        };
        cmd.arg("--rss").arg(s.rss.to_string()).arg("--exec").arg(self.exec);
        if let Some(cpu) = s.cpus {
            cmd.arg("--cpus").arg(cpu.to_string());
        }
        if let Some(cpu) = s.worker_cpu {
            cmd.arg("--worker-cpu").arg(cpu.to_string());
        }
        cmd.arg("--json");
        let limits = labkit::limited::Limits {
            address_space: Some(s.rss + HEADROOM),
            ..Default::default()
        };
        labkit::limited::apply(&mut cmd, limits);
        cmd
    }

    fn run(
        &self,
        s: &Setting,
        methods: &[Method],
        counts: Option<&[u64]>,
    ) -> Result<spawn_methods::Report> {
        let what = format!("spawn-methods ({} touched)", format_size(s.rss));
        let (report, _) =
            crate::bins::run_json(self.command(s, methods, counts), &what)?;
        Ok(report)
    }

    /// Calibrate the setting's loops, then run them `rounds` times, the
    /// methods in the lab's round order: each method's rows, and the
    /// median VmRSS the program reported.
    fn measure(
        &self,
        s: &Setting,
        rounds: usize,
        bar: &indicatif::ProgressBar,
    ) -> Result<(Vec<Row>, u64)> {
        let calibrated = self.run(s, &s.methods, None)?;
        let n: Vec<u64> = calibrated.runs.iter().map(|r| r.iterations).collect();
        if n.len() != s.methods.len() {
            return Err(Error::failed(
                "spawn-methods: a method is missing from its report",
            ));
        }
        let mut runs = vec![Vec::new(); s.methods.len()];
        let mut labels = vec![String::new(); s.methods.len()];
        let mut rss = Vec::new();
        for round in 0..rounds {
            let order = round_order(s.methods.len(), round);
            let methods: Vec<Method> = order.iter().map(|&i| s.methods[i]).collect();
            let counts: Vec<u64> = order.iter().map(|&i| n[i]).collect();
            let report = self.run(s, &methods, Some(&counts))?;
            if report.runs.len() != order.len() {
                return Err(Error::failed(
                    "spawn-methods: a method is missing from its report",
                ));
            }
            for (&i, r) in order.iter().zip(report.runs) {
                runs[i].push(r.us);
                labels[i] = r.label;
            }
            rss.push(report.vm_rss_kib as f64);
            bar.inc(1);
        }
        let rows = s
            .methods
            .iter()
            .zip(runs)
            .zip(labels)
            .zip(n)
            .map(|(((&m, runs), label), n)| Row {
                method: label,
                kind: Some(m),
                iterations: n,
                us: Summary::of_rounds(runs.iter().copied()),
                runs_us: runs,
            })
            .collect();
        let vm_rss = Summary::of(&rss).map_or(0, |s| s.median as u64);
        Ok((rows, vm_rss))
    }
}

/// `--method`'s spelling of `m` (`fork-wait`).
fn value(m: Method) -> String {
    use clap::ValueEnum;
    m.to_possible_value().map_or_else(String::new, |v| v.get_name().to_string())
}

fn main(ctx: &Context, argv: Vec<OsString>) -> Result<()> {
    let args = labkit::cli::parse_from::<Args, _, _>(argv);
    let budget = args.budget.unwrap_or(if args.common.full { 0.5 } else { 0.1 });
    if !args.exec.is_file() {
        return Err(Error::usage(format!(
            "--exec {}: no such program",
            args.exec.display()
        )));
    }
    // Once here, so a bad --exec is a usage error of the runner's own.
    spawn_methods::check_exec(&args.exec)?;
    // Before anything runs: a size the machine cannot hold is a usage
    // error here, as it is in the program.
    let available = spawn_methods::mem_available();
    for &bytes in &args.rss {
        spawn_methods::check_rss(bytes, available)?;
    }
    let out = args.common.start(ctx, EXPERIMENT.name)?;
    let path = crate::bins::programs(&["spawn-methods"])?.remove(0);
    let program = Program { path, exec: &args.exec, budget };
    let rounds = args.common.rounds as usize;
    let cpus = labkit::affinity::allowed_cpus()?;

    let rss_methods = [Method::ForkWait, Method::Vfork, Method::Thread];
    let placed = [Method::ForkWait, Method::Thread, Method::Pool];
    let placements = placements(&cpus, &placed);
    let settings = 1 + args.rss.len() + placements.len();
    let bar = crate::progress::bar((settings * rounds) as u64, EXPERIMENT.name);

    // 1. Every method, rounds interleaved so drift spreads over all.
    bar.set_message("every method");
    let all = Setting {
        methods: Method::ALL.to_vec(),
        rss: 0,
        cpus: None,
        worker_cpu: None,
    };
    let (methods_rows, _) = program.measure(&all, rounds, &bar)?;

    // 2. Fork against resident memory (calibrated again: each fork copies
    // more page tables).
    let mut rss_rows = Vec::new();
    for &bytes in &args.rss {
        bar.set_message(format!("{} resident", format_size(bytes)));
        let s = Setting {
            methods: rss_methods.to_vec(),
            rss: bytes,
            cpus: None,
            worker_cpu: None,
        };
        let (rows, vm_rss_kib) = program.measure(&s, rounds, &bar)?;
        rss_rows.push(RssRow { touched_bytes: bytes, vm_rss_kib, rows });
    }

    // 3. Placement: everything on one core, or left to the scheduler.
    let mut placement_rows = Vec::new();
    for (label, s) in &placements {
        bar.set_message(label.clone());
        let (rows, _) = program.measure(s, rounds, &bar)?;
        placement_rows.push(PlacementRow { placement: label.clone(), rows });
    }
    bar.finish_and_clear();

    let data = Data {
        rounds: args.common.rounds,
        full: args.common.full,
        budget_s: budget,
        exec: args.exec.display().to_string(),
        transparent_hugepages: std::fs::read_to_string(
            "/sys/kernel/mm/transparent_hugepage/enabled",
        )
        .map_or_else(|_| "unknown".into(), |s| s.trim().to_string()),
        methods: methods_rows,
        rss: rss_rows,
        placement: placement_rows,
    };
    let report = Report {
        observations: Vec::new(),
        header: Header::new(EXPERIMENT.name),
        headline: tables::headline(&data),
        tables: vec![
            tables::methods_table(&data),
            tables::rss_table(&data),
            tables::placement_table(&data),
        ],
        charts: tables::charts(&data),
        files: tables::bars(&data),
        data,
    };
    report.publish(&args.common, &out)
}

/// Unpinned; all on the first allowed CPU; and, with two CPUs, the pool's
/// worker on the second (children and threads inherit the creator's CPU,
/// so only the pool can be split over two cores).
fn placements(cpus: &[usize], placed: &[Method]) -> Vec<(String, Setting)> {
    let setting = |methods: &[Method], cpus, worker_cpu| Setting {
        methods: methods.to_vec(),
        rss: 0,
        cpus,
        worker_cpu,
    };
    let mut list = vec![(
        format!("unpinned ({} CPUs allowed)", cpus.len()),
        setting(placed, None, None),
    )];
    if let Some(&first) = cpus.first() {
        list.push((
            format!("same core (all on CPU {first})"),
            setting(placed, Some(first), None),
        ));
        if let Some(&second) = cpus.get(1) {
            list.push((
                format!(
                    "two cores (creator on CPU {first}, pool worker on {second})"
                ),
                setting(&[Method::Pool], Some(first), Some(second)),
            ));
        }
    }
    list
}
