//! `spawn-methods [--method M]... (--budget S | --iterations N,...)`: see
//! the crate documentation.

use std::path::PathBuf;

use clap::Parser;
use labkit::limits::{format_size, size_in};
use labkit::memory::Touched;
use labkit::{Error, Result};
use spawn_methods::{Method, Report, Run, Setup, methods::Exec};

/// Microseconds per create+destroy of each method, in the order given:
/// fork+wait, vfork, fork+exec, posix_spawn, Command, pthread_create,
/// std::thread at three stack sizes, a pooled thread, a tokio task. Exit
/// status: 0 ok, 1 a create failed, 2 bad usage, 128+N on signal N.
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// Methods to time, in this order (repeat, or a comma list) [default:
    /// all eleven]
    #[arg(long, value_enum, value_delimiter = ',')]
    method: Vec<Method>,

    /// Seconds each loop should last: the iteration count is calibrated
    /// from a warm-up (at least 3), then the loop is timed
    #[arg(long, value_name = "SECONDS", value_parser = parse_budget,
          conflicts_with = "iterations", default_value_t = 0.1)]
    budget: f64,

    /// Iterations of each loop instead of a budget: one count for every
    /// method, or one per --method
    #[arg(long, value_delimiter = ',',
          value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    iterations: Vec<u64>,

    /// Resident memory to touch before the loops (up to the memory
    /// available, MemAvailable)
    #[arg(long, value_name = "BYTES", default_value = "0",
          value_parser = size_in(0, 64 << 30))]
    rss: u64,

    /// Confine the process (and every child and thread it makes) to these
    /// CPUs, e.g. 0 or 0-1 [default: as started]
    #[arg(long, value_name = "LIST", value_parser = cpu_list)]
    cpus: Option<Cpus>,

    /// Pin the pool's worker thread to this CPU
    #[arg(long, value_name = "CPU")]
    worker_cpu: Option<usize>,

    /// The tiny program the exec methods start (run with no arguments and
    /// an empty environment; it must exit 0)
    #[arg(long, value_name = "PATH", default_value = "/bin/true")]
    exec: PathBuf,

    /// Print one JSON object instead of the text report
    #[arg(long)]
    json: bool,
}

/// A CPU list, parsed (clap takes a `Vec` field for a repeated flag).
#[derive(Clone)]
struct Cpus(Vec<usize>);

fn cpu_list(text: &str) -> std::result::Result<Cpus, String> {
    labkit::affinity::parse_list(text).map(Cpus)
}

fn parse_budget(text: &str) -> std::result::Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if (0.0001..=60.0).contains(&x) => Ok(x),
        _ => Err(format!("'{text}' is not a number of seconds from 0.0001 to 60")),
    }
}

fn main() -> std::process::ExitCode {
    labkit::cli::main("spawn-methods", run)
}

fn run(cli: &Cli) -> Result<()> {
    let methods = if cli.method.is_empty() {
        Method::ALL.to_vec()
    } else {
        cli.method.clone()
    };
    let counts = match cli.iterations.len() {
        0 => None,
        1 => Some(vec![cli.iterations[0]; methods.len()]),
        n if n == methods.len() => Some(cli.iterations.clone()),
        n => {
            return Err(Error::usage(format!(
                "--iterations: {n} counts for {} methods; give one, or one per method",
                methods.len()
            )));
        }
    };
    spawn_methods::check_rss(cli.rss, spawn_methods::mem_available())?;
    let exec = Exec::new(&cli.exec)?;
    if methods.iter().any(|m| m.execs()) {
        // Once, outside any timing, the way the methods run it.
        spawn_methods::check_exec(&cli.exec)?;
    }
    if let Some(cpu) = cli.worker_cpu {
        let allowed = labkit::affinity::allowed_cpus()?;
        if !allowed.contains(&cpu) {
            return Err(Error::usage(format!(
                "--worker-cpu {cpu}: not a CPU this process may use ({})",
                labkit::affinity::format_list(&allowed)
            )));
        }
    }
    if let Some(Cpus(cpus)) = &cli.cpus {
        labkit::affinity::confine(cpus)?;
    }
    // SIGINT, SIGTERM, SIGHUP: finish the loop under way (it reaps its
    // children), then stop.
    labkit::relay::install(0);
    let region = Touched::new(cli.rss as usize).map_err(|e| {
        Error::failed(format!(
            "cannot map {} to touch: {}",
            format_size(cli.rss),
            labkit::error::describe_errno(e)
        ))
    })?;
    let vm_rss_kib = spawn_methods::vm_rss_kib();
    let setup = Setup { exec: &exec, worker_cpu: cli.worker_cpu };
    let mut runs = Vec::new();
    for (i, &method) in methods.iter().enumerate() {
        if let Some(sig) = labkit::relay::pending() {
            return Err(labkit::relay::interrupted(
                sig,
                &format!("stopped after {i} of {} methods", methods.len()),
            ));
        }
        let iterations = match &counts {
            Some(n) => n[i],
            None => spawn_methods::calibrate(method, cli.budget, &setup)?,
        };
        let us = spawn_methods::run_method(method, iterations, &setup)?;
        runs.push(Run { method, label: method.label(), iterations, us });
    }
    let report = Report {
        touched_bytes: cli.rss,
        vm_rss_kib,
        cpus: cli.cpus.as_ref().map(|c| labkit::affinity::format_list(&c.0)),
        worker_cpu: cli.worker_cpu,
        budget_s: counts.is_none().then_some(cli.budget),
        exec: cli.exec.clone(),
        runs,
    };
    drop(region);
    labkit::cli::emit(cli.json, &report, Report::text)
}
