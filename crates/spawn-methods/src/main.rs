//! `spawn-methods [--method M]... (--budget S | --iterations N,...)`: see
//! the crate documentation.

use std::path::PathBuf;

use clap::Parser;
use labkit::limits::size_in;
use labkit::{Error, Result};
use spawn_methods::{Method, Options, Report};

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
    #[arg(long, value_name = "SECONDS", value_parser = labkit::cli::seconds_in(0.0001, 60.0),
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
                "--iterations: {n} counts for {} methods; give one, or one a method",
                methods.len()
            )));
        }
    };
    let report = spawn_methods::run(&Options {
        methods,
        counts,
        budget: cli.budget,
        rss: cli.rss,
        cpus: cli.cpus.as_ref().map(|c| c.0.clone()),
        worker_cpu: cli.worker_cpu,
        exec: cli.exec.clone(),
    })?;
    labkit::cli::emit(cli.json, &report, Report::text)
}
