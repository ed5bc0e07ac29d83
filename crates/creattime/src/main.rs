//! `creattime SAMPLES`: see the crate documentation.

use clap::Parser;
use labkit::Error;
use labkit::error::calls_failed;
use labkit::error::describe_errno;
use labkit::limits::size_in;
use labkit::pthread::Attr;

/// Time only the fork() call and only the thread-create call, SAMPLES times
/// each; children _exit and threads end at once (the 2004 mailing-list
/// test). Everything is reaped and joined before exit. Exit status: 0 ok,
/// 1 a create call failed, 2 bad usage, 128+N on signal N (SIGINT,
/// SIGTERM, SIGHUP: the loops stop, every child is reaped, every thread
/// joined).
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// Samples of each kind (the post used 20, 128 and 255)
    #[arg(value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    samples: u64,

    /// Stack of each thread, e.g. 64K or 8M [default: the soft
    /// RLIMIT_STACK, as pthread_create uses; 8M unless `ulimit -s` changed it]
    #[arg(long, value_name = "BYTES", value_parser = size_in(16 << 10, 1 << 40))]
    stack_size: Option<u64>,

    /// Print one JSON object instead of the original's lines
    #[arg(long)]
    json: bool,
}

fn main() -> std::process::ExitCode {
    labkit::cli::main("creattime", run)
}

fn run(cli: &Cli) -> labkit::Result<()> {
    // No --stack-size: a NULL attr, the default stack, as the C passes.
    let attr = match cli.stack_size {
        None => Attr::default_stack(),
        Some(bytes) => Attr::stack_size(bytes as usize).map_err(|e| {
            Error::usage(format!("--stack-size {bytes}: {}", describe_errno(e)))
        })?,
    };
    let r = creattime::run(cli.samples, &attr);
    if let Some(sig) = r.interrupted {
        return Err(labkit::relay::interrupted(
            sig,
            &format!(
                "reaped all {} children, joined all {} threads",
                r.reaped, r.joined
            ),
        ));
    }
    labkit::cli::emit(cli.json, &r, |r| r.text())?;
    let mut failed = Vec::new();
    for (what, kind) in [("fork", &r.fork), ("pthread_create", &r.thread)] {
        if kind.failures > 0 {
            let first = kind.first_error.as_deref();
            failed.push(calls_failed(kind.failures, r.samples, what, first));
        }
    }
    if !failed.is_empty() {
        return Err(Error::failed(format!(
            "{}; reaped {} children, joined {} threads",
            failed.join("; "),
            r.reaped,
            r.joined
        )));
    }
    if r.left_behind > 0 {
        return Err(Error::failed(format!(
            "{} children left behind",
            r.left_behind
        )));
    }
    Ok(())
}
