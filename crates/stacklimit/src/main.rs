//! `stacklimit threads|forks|overflow`: see the crate documentation.

use clap::{Parser, Subcommand};
use labkit::limits::size_in;
use stacklimit::Api;

/// Count how many idle threads or processes can be created under the limits
/// this process was started with (`prlimit --as=...`, `ulimit -s`), or show
/// what a stack overflow does. Exit status: 0 counted, 1 failed, 2 bad
/// usage; `overflow` dies of its overflow by design (no core file); `forks`:
/// 128+N on signal N (SIGINT, SIGTERM, SIGHUP: passed on to the children,
/// which are reaped).
#[derive(Parser)]
#[command(version)]
struct Cli {
    #[command(subcommand)]
    probe: Probe,
}

#[derive(Subcommand)]
enum Probe {
    /// Create idle threads until creation fails or --max is reached
    Threads {
        /// Stack of each thread, e.g. 8M, 256K [default: pthread_create's,
        /// the soft RLIMIT_STACK: 8M unless `ulimit -s` changed it]
        #[arg(long, value_name = "BYTES", value_parser = size_in(16 << 10, 1 << 30))]
        stack_size: Option<u64>,

        /// How the threads are made
        #[arg(long, value_enum, default_value_t = Api::Pthread)]
        api: Api,

        /// Stop after this many, whatever the limits allow
        #[arg(long, default_value_t = 4096,
              value_parser = clap::value_parser!(u32).range(1..=100_000))]
        max: u32,

        /// Print the count as one JSON object
        #[arg(long)]
        json: bool,
    },
    /// Fork idle children until fork fails or --max is reached
    Forks {
        /// Stop after this many, whatever the limits allow
        #[arg(long, default_value_t = 1000,
              value_parser = clap::value_parser!(u32).range(1..=100_000))]
        max: u32,

        /// Print the count as one JSON object
        #[arg(long)]
        json: bool,
    },
    /// Start one thread that recurses until its stack overflows: the process
    /// dies (SIGSEGV for pthread_create, Rust's message and SIGABRT for
    /// std::thread)
    Overflow {
        /// Stack of the thread
        #[arg(long, value_name = "BYTES", default_value = "64K",
              value_parser = size_in(16 << 10, 1 << 30))]
        stack_size: u64,

        /// How the thread is made
        #[arg(long, value_enum, default_value_t = Api::Pthread)]
        api: Api,
    },
}

fn main() -> std::process::ExitCode {
    labkit::cli::main("stacklimit", |cli: &Cli| match cli.probe {
        Probe::Threads { stack_size, api, max, json } => {
            stacklimit::threads(api, stack_size, max).and_then(|c| show(&c, json))
        }
        Probe::Forks { max, json } => {
            stacklimit::forks(max).and_then(|c| show(&c, json))
        }
        Probe::Overflow { stack_size, api } => stacklimit::overflow(api, stack_size),
    })
}

fn show(count: &stacklimit::Count, json: bool) -> labkit::Result<()> {
    labkit::cli::emit(json, count, |c| c.summary() + "\n")
}
