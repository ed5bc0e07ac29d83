//! The program's command line as a type: [`Options`], which `main` parses
//! and the runner renders ([`Options::args`]) to start a probe.

use std::ffi::OsString;

use clap::{Parser, Subcommand};
use labkit::limits::{format_size, size_in};

use crate::Api;

/// Count how many idle threads or processes can be created under the limits
/// this process was started with (`prlimit --as=...`, `ulimit -s`), or show
/// what a stack overflow does. Exit status: 0 counted, 1 failed, 2 bad
/// usage; `overflow` dies of its overflow by design (no core file); `forks`:
/// 128+N on signal N (SIGINT, SIGTERM, SIGHUP: passed on to the children,
/// which are reaped).
#[derive(Parser, Debug, Clone, PartialEq, Eq)]
#[command(version)]
pub struct Options {
    /// Which probe to run, with its flags
    #[command(subcommand)]
    pub probe: Probe,
}

/// One probe and its flags.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum Probe {
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

impl Options {
    /// The program's command line for these options: `threads [--json]
    /// --api API --max N [--stack-size S]`, `forks [--json] --max N`, or
    /// `overflow --api API --stack-size S`, each size in its shortest exact
    /// form (`64K`).
    pub fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::new();
        let json = |json: bool| json.then(|| OsString::from("--json"));
        let api = |api: Api| [OsString::from("--api"), api.name().into()];
        let size =
            |bytes: u64| [OsString::from("--stack-size"), format_size(bytes).into()];
        match &self.probe {
            Probe::Threads { stack_size, api: a, max, json: j } => {
                args.push("threads".into());
                args.extend(json(*j));
                args.extend(api(*a));
                args.extend(["--max".into(), max.to_string().into()]);
                args.extend(stack_size.map(size).into_iter().flatten());
            }
            Probe::Forks { max, json: j } => {
                args.push("forks".into());
                args.extend(json(*j));
                args.extend(["--max".into(), max.to_string().into()]);
            }
            Probe::Overflow { stack_size, api: a } => {
                args.push("overflow".into());
                args.extend(api(*a));
                args.extend(size(*stack_size));
            }
        }
        args
    }
}

impl Api {
    /// Its `--api` spelling: `pthread` or `std`.
    pub fn name(self) -> String {
        labkit::cli::spelling(&self)
    }
}
