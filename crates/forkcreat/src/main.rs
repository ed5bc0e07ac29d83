//! `forkcreat --iterations N [--reap wait|sigchld]`: see the crate
//! documentation.

use clap::Parser;
use forkcreat::Reap;
use labkit::Error;
use labkit::error::calls_failed;

/// Create and destroy N processes one after another: fork, the child
/// _exits at once, the parent reaps it (the article's forkcreat.c, the
/// lecture's fork/wait loop). Exit status: 0 ok, 1 a fork failed, 2 bad
/// usage, 128+N on signal N (SIGINT, SIGTERM, SIGHUP: the loop stops and
/// every child is reaped).
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// Processes to create and destroy
    #[arg(short = 'n', long, default_value_t = 100_000,
          value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    iterations: u64,

    /// How the parent reaps: wait = waitpid each child before the next fork
    /// (the lecture); sigchld = a SIGCHLD handler reaps asynchronously (the
    /// article)
    #[arg(long, value_enum, default_value_t = Reap::Wait)]
    reap: Reap,

    /// Print one JSON object instead of the text report
    #[arg(long)]
    json: bool,
}

fn main() -> std::process::ExitCode {
    labkit::cli::main("forkcreat", run)
}

fn run(cli: &Cli) -> labkit::Result<()> {
    let r = forkcreat::run(cli.iterations, cli.reap);
    if let Some(sig) = r.interrupted {
        return Err(labkit::relay::interrupted(
            sig,
            &format!("stopped after {} forks; reaped all {}", r.created, r.reaped),
        ));
    }
    labkit::cli::emit(cli.json, &r, |r| r.text())?;
    if r.failed > 0 {
        return Err(Error::failed(format!(
            "{}; reaped all {} created",
            calls_failed(
                r.failed,
                r.iterations,
                "fork",
                r.end.first_error.as_deref()
            ),
            r.reaped
        )));
    }
    if r.bad_exits > 0 || r.reaped != r.created || r.left_behind > 0 {
        return Err(Error::failed(format!(
            "created {}, reaped {} ({} did not exit with 0), {} left behind",
            r.created, r.reaped, r.bad_exits, r.left_behind
        )));
    }
    Ok(())
}
