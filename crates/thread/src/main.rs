//! `thread --threads N --count C --log PATH`: see the crate documentation.

use clap::Parser;
use labkit::cli::Workload;
use labkit::limits::size_in;

/// Start N threads that each print C lines to stdout and to a shared log
/// (the article's thread.c). Exit status: 0 ok, 1 failed, 2 bad usage.
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// Threads to start (the article's P_NUMBER)
    #[arg(short, long, default_value_t = 255,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    threads: u32,

    /// Stack of each thread, e.g. 1M or 65536 [default: pthread_create's,
    /// the soft RLIMIT_STACK: 8M unless `ulimit -s` changed it]
    #[arg(long, value_name = "BYTES", value_parser = size_in(16 << 10, 1 << 30))]
    stack_size: Option<u64>,

    #[command(flatten)]
    work: Workload,
}

fn main() -> std::process::ExitCode {
    labkit::cli::main("thread", |cli: &Cli| {
        let result = thread::run(cli.threads, cli.stack_size, &cli.work);
        labkit::cli::finish(result, &cli.work)
    })
}
