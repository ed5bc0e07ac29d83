//! `lab run thread-limits`: why 500 threads crashed on the article's
//! machine (Zhou Li et al., section two). Its 32-bit Celeron gave a process
//! 3 GiB of address space; with 8 MiB default stacks that holds at most
//! 3 GiB / 8 MiB = 384 threads, and `thread.c` died at 500, 800 and 1000.
//! `RLIMIT_AS` = 3 GiB emulates that machine on a 64-bit one. Every probe
//! runs in a child with its own limits, a cap on what it creates and a
//! deadline, and everything it made is joined or reaped before it reports.
//!
//! The stack and process probes (in rounds) and the `thread` program (once
//! at each setting) measure through the engine; the overflows are one-off
//! facts.

mod run;
mod tables;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use clap::Parser;
use labkit::Result;
use labkit::limited::Limits;
use labkit::limits::size_in;
use serde::Serialize;
use stacklimit::Api;

use super::Experiment;
use crate::engine::{
    Engine, Observations, Observed, Series, Setting, balanced_rounds, setting,
};
use crate::plan::Plan;
use crate::report::{Common, Context, Report};
use crate::results::Header;
use run::{copy_for_nobody, count, overflows, processes, run_thread};

pub const EXPERIMENT: Experiment = Experiment::new::<Args>(
    "thread-limits",
    "How many threads fit in 3 GiB: stacks, RLIMIT_AS, NPROC (Zhou Li et al.)",
    main,
)
.headline(&[
    "threads_at_8m",
    "std_threads_at_8m",
    "predicted_at_8m",
    "threads_at_256k",
    "threads_at_1m",
    "ulimit_s_1024_ok",
])
.data::<Data>();

/// How many threads fit in an address space of the article's 32-bit size,
/// at several stack sizes; what the `thread` program does at 500, 800 and
/// 1000 threads there; forks under the same limit and under RLIMIT_NPROC;
/// what a stack overflow does.
#[derive(Parser, Clone)]
struct Args {
    #[command(flatten)]
    common: Common,

    /// RLIMIT_AS of every probe: the address space to emulate
    #[arg(long = "as", value_name = "BYTES", default_value = "3G",
          value_parser = size_in(64 << 20, 1 << 40))]
    address_space: u64,

    /// Thread stack sizes to try
    #[arg(long, value_delimiter = ',', value_name = "SIZES",
          default_value = "8M,2M,1M,256K,64K",
          value_parser = size_in(16 << 10, 1 << 30))]
    stacks: Vec<u64>,

    /// Most threads or processes one probe may create [default: 4096;
    /// 16384 with --full]
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=30_000))]
    max: Option<u32>,

    /// RLIMIT_NPROC for the unprivileged probe (run as uid 65534)
    #[arg(long, default_value_t = 64,
          value_parser = clap::value_parser!(u64).range(2..=4096))]
    nproc: u64,

    /// Thread counts for the `thread` program
    #[arg(long, value_delimiter = ',', default_value = "500,800,1000",
          value_parser = clap::value_parser!(u32).range(1..=30_000))]
    threads: Vec<u32>,

    /// Seconds before a probe is killed
    #[arg(long, default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    timeout: u64,
}
crate::options!(Args);

/// The stack probes' conditions: `stacklimit threads --api API`.
const APIS: [&str; 2] = ["pthread", "std"];
/// The API each of [`APIS`] names.
const API_OF: [Api; 2] = [Api::Pthread, Api::Std];
/// The process probes' conditions: `stacklimit forks|threads`.
const KINDS: [&str; 2] = ["forks", "threads"];

/// How the `thread` program's stack is set: glibc's default under
/// RLIMIT_STACK = 8M, the flag, and the article's `ulimit -s 1024`.
#[derive(Clone, Copy)]
enum ProgramStack {
    Default,
    Flag,
    Ulimit,
}

impl ProgramStack {
    const ALL: [ProgramStack; 3] =
        [ProgramStack::Default, ProgramStack::Flag, ProgramStack::Ulimit];

    /// The setting's name in the results and the tables.
    fn label(self) -> &'static str {
        match self {
            ProgramStack::Default => "default stack",
            ProgramStack::Flag => "--stack-size 1M",
            ProgramStack::Ulimit => "ulimit -s 1024",
        }
    }
}

/// A stack probe's setting.
fn at_stack(stack_size: u64) -> Setting {
    setting([("stack_size", stack_size.into())])
}

/// A `thread` program run's setting.
fn at_program(threads: u32, stack: &str) -> Setting {
    setting([("threads", threads.into()), ("stack", stack.into())])
}

/// One run of a counting probe. What it counted is an observation; the
/// results keep how it ended.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
struct Probe {
    /// Threads or processes made, when the probe could count.
    #[serde(skip)]
    created: Option<u32>,
    /// The errno that stopped creation; `None` at the cap.
    stopped_by: Option<String>,
    /// How the probe process ended (`exit 0`, `SIGABRT`, ...).
    ended: String,
    /// Its last words on stderr, if it failed.
    said: String,
    #[serde(skip)]
    vm_peak_kib: Option<u64>,
    #[serde(skip)]
    wall_s: f64,
}

impl Observed for Probe {
    /// Its seconds; what it created and its peak size, when it could count.
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        let mut m = vec![("wall_s", self.wall_s)];
        m.extend(self.created.map(|c| ("created", f64::from(c))));
        m.extend(self.vm_peak_kib.map(|v| ("vm_peak_kib", v as f64)));
        m
    }
}

/// A row of table 1 or 3: a limit, which is the probes' setting (the
/// series there hold what they created), with each condition's runs.
#[derive(Serialize, schemars::JsonSchema)]
struct Row {
    #[serde(flatten)]
    at: Setting,
    /// Who the probes ran as.
    user: String,
    /// What the limit leaves, by arithmetic (address space / stack size,
    /// or the tasks RLIMIT_NPROC leaves the probe), when it can be said.
    predicted: Option<u64>,
    /// How each condition's runs ended, in round order.
    runs: BTreeMap<&'static str, Vec<Probe>>,
}

/// One run of the `thread` program; its seconds are the observations'.
#[derive(Serialize, schemars::JsonSchema)]
struct ProgramRun {
    threads: u32,
    setting: &'static str,
    ended: String,
    said: String,
    log_checked: bool,
    #[serde(skip)]
    wall_s: f64,
}

impl Observed for ProgramRun {
    /// Its seconds, and `ok`: 1 when it created every thread, else 0.
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("wall_s", self.wall_s),
            ("ok", f64::from(u8::from(self.ended == "exit 0"))),
        ]
    }
}

#[derive(Serialize, schemars::JsonSchema)]
struct Overflow {
    api: &'static str,
    stack_size: u64,
    ended: String,
    said: String,
}

#[derive(Serialize, schemars::JsonSchema)]
struct Data {
    address_space: u64,
    max: u32,
    /// The probes' rounds: --rounds, made even so that each API goes
    /// first equally often.
    rounds: u32,
    /// Table 1: each `stack_size` under RLIMIT_AS, the APIs its conditions.
    stacks: Vec<Row>,
    /// Table 3: forks and threads under each `limit`.
    processes: Vec<Row>,
    /// Every probe's conditions at every setting, and the `thread` program
    /// at each count of `threads` and `stack`: `created` and `vm_peak_kib`
    /// (where every round could count), `wall_s` and the program's `ok`.
    series: Vec<Series>,
    program: Vec<ProgramRun>,
    overflow: Vec<Overflow>,
}

fn main(ctx: &Context, plan: &Plan) -> Result<()> {
    let args: Args = plan.args();
    let out = plan.start(ctx)?;
    let max = args.max.unwrap_or(if args.common.full { 16384 } else { 4096 });
    let bins = crate::bins::programs(&["stacklimit", "thread"])?;
    let (stacklimit, thread) = (&bins[0], &bins[1]);
    let nobody = copy_for_nobody(stacklimit)?;
    let timeout = Duration::from_secs(args.timeout);
    let space =
        Limits { address_space: Some(args.address_space), ..Limits::default() };
    let mut engine = Engine::new(args.common.rounds);
    // Each stack size, then RLIMIT_AS and (as root) RLIMIT_NPROC.
    let settings = args.stacks.len() + 1 + usize::from(nobody.is_some());
    engine.progress(settings * engine.runs_for(2), EXPERIMENT.name);
    let mut stacks = Vec::new();
    for &stack in &args.stacks {
        let at = at_stack(stack);
        let runs = engine.measure(&at, &APIS, |k| {
            let probe = stacklimit::Probe::Threads {
                stack_size: Some(stack),
                api: API_OF[k],
                max,
                json: true,
            };
            let mut cmd = Command::new(stacklimit);
            cmd.args(stacklimit::Options { probe }.args());
            count(&mut cmd, space, timeout)
        })?;
        let predicted = Some(args.address_space / stack);
        let runs = APIS.into_iter().zip(runs).collect();
        stacks.push(Row { at, user: space.runs_as(), predicted, runs });
    }
    let processes = processes(&mut engine, stacklimit, nobody.as_ref(), &args, max)?;
    // One run of the program at each setting: what it does, not a figure.
    let mut once = Engine::new(1);
    let mut program = Vec::new();
    for &n in &args.threads {
        for stack in ProgramStack::ALL {
            let runs =
                once.measure(&at_program(n, stack.label()), &["thread"], |_| {
                    run_thread(thread, n, stack, space, timeout)
                })?;
            program.extend(runs.into_iter().flatten());
        }
    }
    let overflow = overflows(stacklimit, timeout)?;
    let observations = [engine.finish(), once.finish()].concat();
    let obs = Observations(&observations);
    let data = Data {
        address_space: args.address_space,
        max,
        rounds: balanced_rounds(args.common.rounds as usize, 2) as u32,
        stacks,
        processes,
        series: obs.series(),
        program,
        overflow,
    };
    let report = Report {
        header: Header::new(EXPERIMENT.name),
        headline: tables::headline(&data, obs),
        tables: tables::tables(&data, obs),
        charts: vec![("threads-vs-stack".into(), tables::chart(&data, obs))],
        files: Vec::new(),
        observations,
        data,
    };
    report.publish(&args.common, &out)
}
