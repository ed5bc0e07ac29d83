//! The program's command line as a type: [`Options`], which `main` parses
//! and the runner renders ([`Options::args`]) to start a probe.

use std::ffi::{OsStr, OsString};

use clap::builder::{PossibleValue, TypedValueParser};
use clap::parser::ValueSource;
use clap::{Parser, Subcommand, ValueEnum};
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

/// One probe and its flags. A command line says the same probe in more
/// than one way (`--api pthread` or nothing, `64K` or `65536`); each field
/// keeps the way it was said, so [`Options::args`] says it back word for
/// word.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// Create idle threads until creation fails or --max is reached
    Threads {
        /// Stack of each thread, e.g. 8M, 256K [default: pthread_create's,
        /// the soft RLIMIT_STACK: 8M unless `ulimit -s` changed it]
        #[arg(long, value_name = "BYTES", value_parser = StackSize::parse)]
        stack_size: Option<StackSize>,

        /// How the threads are made
        // `None`: no `--api` given, pthread_create (the default shown);
        // spelled `std::option::Option` so that clap reads it as the value
        // `GivenApi` makes, not as an optional argument.
        #[arg(long, default_value = "pthread", value_parser = GivenApi)]
        api: std::option::Option<Api>,

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
    /// The program's command line for these options, as the runner has
    /// always started it: `threads [--json] [--api API] --max N
    /// [--stack-size S]`, `forks [--json] --max N`, or `overflow --api API
    /// --stack-size S` (its size in the shortest exact form, `64K`).
    pub fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::new();
        let json = |json: bool| json.then(|| OsString::from("--json"));
        let max = |n: u32| [OsString::from("--max"), n.to_string().into()];
        match &self.probe {
            Probe::Threads { stack_size, api, max: n, json: j } => {
                args.push("threads".into());
                args.extend(json(*j));
                if let Some(api) = api {
                    args.extend(["--api".into(), api.name().into()]);
                }
                args.extend(max(*n));
                if let Some(size) = stack_size {
                    args.extend(["--stack-size".into(), size.text.clone().into()]);
                }
            }
            Probe::Forks { max: n, json: j } => {
                args.push("forks".into());
                args.extend(json(*j));
                args.extend(max(*n));
            }
            Probe::Overflow { stack_size, api } => {
                args.extend(["overflow".into(), "--api".into(), api.name().into()]);
                args.extend([
                    "--stack-size".into(),
                    format_size(*stack_size).into(),
                ]);
            }
        }
        args
    }
}

impl Api {
    /// Its `--api` spelling: `pthread` or `std`.
    pub fn name(self) -> String {
        self.to_possible_value().map_or_else(String::new, |v| v.get_name().into())
    }
}

/// A `threads --stack-size`: its bytes, and the words that said them
/// (`65536` or `64K`, which the program reads alike).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackSize {
    bytes: u64,
    text: String,
}

impl StackSize {
    /// `bytes`, said as a byte count: `65536`.
    pub fn bytes(bytes: u64) -> StackSize {
        StackSize { bytes, text: bytes.to_string() }
    }

    /// `bytes`, said in its shortest exact form ([`format_size`]): `64K`.
    pub fn short(bytes: u64) -> StackSize {
        StackSize { bytes, text: format_size(bytes) }
    }

    /// The size, in bytes.
    pub fn get(&self) -> u64 {
        self.bytes
    }

    /// `text` read as a stack size, 16K to 1G, as the program reads it.
    fn parse(text: &str) -> Result<StackSize, String> {
        let bytes = size_in(16 << 10, 1 << 30)(text)?;
        Ok(StackSize { bytes, text: text.to_string() })
    }
}

/// `threads --api`'s value parser: `Some` of the API the command line
/// named, `None` when it named none and clap's default applies.
#[derive(Clone)]
struct GivenApi;

impl TypedValueParser for GivenApi {
    type Value = Option<Api>;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<Option<Api>, clap::Error> {
        let api = clap::builder::EnumValueParser::<Api>::new();
        api.parse_ref(cmd, arg, value).map(Some)
    }

    fn parse_ref_(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
        source: ValueSource,
    ) -> Result<Option<Api>, clap::Error> {
        let api = self.parse_ref(cmd, arg, value)?;
        Ok(api.filter(|_| source != ValueSource::DefaultValue))
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            Api::value_variants().iter().filter_map(Api::to_possible_value),
        ))
    }
}
