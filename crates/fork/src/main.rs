//! `fork --procs N --count C --log PATH`: see the crate documentation.

use clap::Parser;
use labkit::cli::Workload;

/// Fork N children that each print C lines to stdout and to a shared log
/// (the article's fork.c). Exit status: 0 ok, 1 failed, 2 bad usage,
/// 128+N on signal N (SIGINT, SIGTERM, SIGHUP: passed on to the children,
/// which are reaped).
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// Child processes to fork (the article's P_NUMBER)
    #[arg(short, long, default_value_t = 255,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    procs: u32,

    #[command(flatten)]
    work: Workload,
}

fn main() -> std::process::ExitCode {
    labkit::cli::main("fork", |cli: &Cli| {
        labkit::cli::finish(fork::run(cli.procs, &cli.work), &cli.work)
    })
}
