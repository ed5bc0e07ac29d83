//! `pthreadcreat --iterations N [--stack-size B]`: see the crate
//! documentation.

use clap::Parser;
use labkit::Error;
use labkit::error::calls_failed;
use labkit::limits::{pthread_default_stack, size_in};

/// Create and destroy N threads one after another: spawn an empty thread,
/// join it (the article's pthreadcreat.c, the lecture's create/join loop).
/// Exit status: 0 ok, 1 a create failed, 2 bad usage.
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// Threads to create and destroy
    #[arg(short = 'n', long, default_value_t = 100_000,
          value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    iterations: u64,

    /// Stack of each thread, e.g. 64K or 8M [default: the soft
    /// RLIMIT_STACK, as pthread_create uses; 8M unless `ulimit -s` changed it]
    #[arg(long, value_name = "BYTES", value_parser = size_in(16 << 10, 1 << 40))]
    stack_size: Option<u64>,

    /// The thread API: pthread = pthread_create/pthread_join as in the C
    /// program; std = std::thread spawn/join
    #[arg(long, value_enum, default_value_t = pthreadcreat::Api::Pthread)]
    api: pthreadcreat::Api,

    /// Print one JSON object instead of the text report
    #[arg(long)]
    json: bool,
}

fn main() -> std::process::ExitCode {
    labkit::cli::main("pthreadcreat", run)
}

fn run(cli: &Cli) -> labkit::Result<()> {
    let stack = cli.stack_size.unwrap_or_else(pthread_default_stack);
    let r = pthreadcreat::run(cli.iterations, stack, cli.api);
    labkit::cli::emit(cli.json, &r, |r| r.text())?;
    if r.failed > 0 {
        let call = match r.api {
            pthreadcreat::Api::Pthread => "pthread_create",
            pthreadcreat::Api::Std => "std::thread spawn",
        };
        return Err(Error::failed(format!(
            "{}; joined all {} created",
            calls_failed(r.failed, r.iterations, call, r.end.first_error.as_deref()),
            r.joined
        )));
    }
    if r.panicked > 0 {
        return Err(Error::failed(format!(
            "{} threads panicked or could not be joined",
            r.panicked
        )));
    }
    Ok(())
}
