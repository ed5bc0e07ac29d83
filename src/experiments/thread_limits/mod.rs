//! `lab run thread-limits`: why 500 threads crashed on the article's
//! machine (Zhou Li et al., section two). Its 32-bit Celeron gave a process
//! 3 GiB of address space; with 8 MiB default stacks that holds at most
//! 3 GiB / 8 MiB = 384 threads, and `thread.c` died at 500, 800 and 1000.
//! `RLIMIT_AS` = 3 GiB emulates that machine on a 64-bit one. Every probe
//! runs in a child with its own limits, a cap on what it creates and a
//! deadline, and everything it made is joined or reaped before it reports.
//!
//! `run` runs the probes (`stacklimit`, read as its own `Count`) and the
//! `thread` program; `tables` makes the tables, headline and chart.

mod run;
mod tables;

use std::process::Command;
use std::time::Duration;

use crate::results::Header;
use crate::stats::round_order;
use clap::Parser;
use labkit::Result;
use labkit::limited::Limits;
use labkit::limits::{format_size, size_in};
use serde::{Deserialize, Serialize};

use super::Experiment;
use crate::plan::Plan;
use crate::report::{Common, Context, Report};
use run::{copy_for_nobody, count, limited, process_rows, run_thread};
use tables::{
    chart, headline, overflow_table, process_table, program_table, stack_table,
};

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

/// One run of a counting probe.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct Probe {
    /// Threads or processes made, when the probe could count.
    created: Option<u32>,
    /// The errno that stopped creation; `None` at the cap.
    stopped_by: Option<String>,
    /// How the probe process ended (`exit 0`, `SIGABRT`, ...).
    ended: String,
    /// Its last words on stderr, if it failed.
    said: String,
    vm_peak_kib: Option<u64>,
    wall_s: f64,
}

#[derive(Serialize, schemars::JsonSchema)]
struct StackRow {
    stack_size: u64,
    /// The article's arithmetic: address space / stack size.
    predicted: u64,
    pthread: Vec<Probe>,
    std: Vec<Probe>,
}

#[derive(Serialize, schemars::JsonSchema)]
struct ProgramRun {
    threads: u32,
    setting: &'static str,
    ended: String,
    said: String,
    wall_s: f64,
    log_checked: bool,
}

#[derive(Serialize, schemars::JsonSchema)]
struct ProcRow {
    limit: String,
    user: String,
    /// Tasks the limit leaves for the probe, when it can be predicted.
    predicted: Option<u64>,
    forks: Probe,
    threads: Probe,
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
    rounds: u32,
    stacks: Vec<StackRow>,
    program: Vec<ProgramRun>,
    processes: Vec<ProcRow>,
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
    let rounds = args.common.rounds;
    let steps = args.stacks.len() as u64 * 2 * u64::from(rounds)
        + args.threads.len() as u64 * 3
        + 6;
    let bar = crate::progress::bar(steps, EXPERIMENT.name);

    let mut stacks = Vec::new();
    for &stack in &args.stacks {
        bar.set_message(format!("threads with {} stacks", format_size(stack)));
        let mut row = StackRow {
            stack_size: stack,
            predicted: args.address_space / stack,
            pthread: Vec::new(),
            std: Vec::new(),
        };
        // The two APIs in the lab's round order: they alternate who goes
        // first.
        for round in 0..rounds as usize {
            for api in
                round_order(2, round).into_iter().map(|k| ["pthread", "std"][k])
            {
                let mut cmd = Command::new(stacklimit);
                cmd.args(["threads", "--json", "--api", api, "--max"]);
                cmd.arg(max.to_string()).arg("--stack-size").arg(stack.to_string());
                let probe = count(&mut cmd, space, timeout)?;
                if api == "std" { &mut row.std } else { &mut row.pthread }
                    .push(probe);
                bar.inc(1);
            }
        }
        stacks.push(row);
    }

    bar.set_message("the thread program");
    let mut program = Vec::new();
    for &n in &args.threads {
        for setting in ["default stack", "--stack-size 1M", "ulimit -s 1024"] {
            program.push(run_thread(thread, n, setting, space, timeout)?);
            bar.inc(1);
        }
    }

    bar.set_message("processes");
    let processes = process_rows(stacklimit, nobody.as_ref(), &args, max, timeout)?;
    bar.inc(4);

    bar.set_message("stack overflow");
    let mut overflow = Vec::new();
    for api in ["pthread", "std"] {
        let mut cmd = Command::new(stacklimit);
        cmd.args(["overflow", "--api", api, "--stack-size", "64K"]);
        let done = limited(&mut cmd, Limits::default(), timeout)?;
        // The probe announces itself first; if that is all there is, the
        // process died without a word.
        let mut said = done.last_words();
        if said.starts_with("stacklimit: overflowing") {
            said = "(nothing more: the kernel killed the process)".into();
        }
        overflow.push(Overflow {
            api: if api == "std" { "std::thread" } else { "pthread_create" },
            stack_size: 64 << 10,
            ended: done.ended(),
            said,
        });
        bar.inc(1);
    }
    bar.finish_and_clear();

    let data = Data {
        address_space: args.address_space,
        max,
        rounds,
        stacks,
        program,
        processes,
        overflow,
    };
    let report = Report {
        observations: Vec::new(),
        header: Header::new(EXPERIMENT.name),
        headline: headline(&data),
        tables: vec![
            stack_table(&data),
            program_table(&data),
            process_table(&data),
            overflow_table(&data),
        ],
        charts: vec![("threads-vs-stack".into(), chart(&data))],
        files: Vec::new(),
        data,
    };
    report.publish(&args.common, &out)
}
