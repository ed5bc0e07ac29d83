//! `ctxswitch --mode threads|processes --pin same|cross|none`: see the
//! crate documentation.

use clap::Parser;
use ctxswitch::{Config, Mode, Pin};
use labkit::Error;

/// Measure one context switch: two tasks bounce a one-byte token over a
/// pair of pipes (lmbench's lat_ctx, `perf bench sched pipe`). Prints
/// microseconds per round trip and per switch, raw and without the pipe
/// calls' own cost, and the kernel's switch count. Exit status: 0 ok,
/// 1 failed (or the kernel's count disagreed), 2 bad usage.
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// The two tasks: threads of one process, or two processes
    #[arg(short, long, value_enum, default_value_t = Mode::Threads)]
    mode: Mode,

    /// Placement of the two tasks (sched_setaffinity)
    #[arg(short, long, value_enum, default_value_t = Pin::Same)]
    pin: Pin,

    /// Timed round trips (two switches each)
    #[arg(short = 'n', long, default_value_t = 100_000,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    iterations: u64,

    /// Untimed round trips first
    #[arg(long, default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(0..=1_000_000_000))]
    warmup: u64,

    /// CPUs to pin to: A for --pin same, A,B for --pin cross [default: the
    /// first one or two this process may run on]
    #[arg(long, value_name = "A[,B]", value_delimiter = ',')]
    cpus: Vec<usize>,

    /// Print one JSON object instead of the text
    #[arg(long)]
    json: bool,
}

fn main() -> std::process::ExitCode {
    labkit::cli::main("ctxswitch", |cli: &Cli| {
        let cfg = Config {
            mode: cli.mode,
            pin: cli.pin,
            iterations: cli.iterations,
            warmup: cli.warmup,
            cpus: cli.cpus.clone(),
        };
        run(&cfg, cli.json)
    })
}

fn run(cfg: &Config, json: bool) -> labkit::Result<()> {
    let report = ctxswitch::run(cfg)?;
    labkit::cli::emit(json, &report, ctxswitch::render)?;
    let s = &report.switches;
    if s.holds {
        Ok(())
    } else {
        Err(Error::failed(format!(
            "the kernel counted {} switches, expected about {} (2 per round \
             trip): these figures are not the cost of one switch",
            s.voluntary + s.involuntary,
            s.expected
        )))
    }
}
