//! `lab run thread-limits`: why 500 threads crashed on the article's
//! machine (article 000, section two). Its 32-bit Celeron gave a process
//! 3 GiB of address space; with 8 MiB default stacks that holds at most
//! 3 GiB / 8 MiB = 384 threads, and `thread.c` died at 500, 800 and 1000.
//! `RLIMIT_AS` = 3 GiB emulates that machine on a 64-bit one. Every probe
//! runs in a child with its own limits, a cap on what it creates and a
//! deadline, and everything it made is joined or reaped before it reports.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::chart::Chart;
use crate::results::Header;
use crate::stats::Summary;
use crate::table::Table;
use clap::Parser;
use labkit::limited::{Limits, Outcome};
use labkit::limits::{format_size, size_in};
use labkit::{Error, Result};
use serde::{Deserialize, Serialize};

use super::Experiment;
use crate::report::{Common, Headline, Report};

pub const EXPERIMENT: Experiment = Experiment {
    name: "thread-limits",
    about: "How many threads fit in 3 GiB: stacks, RLIMIT_AS, NPROC (article 000)",
    all_args: &[],
    run: main,
};

/// How many threads fit in an address space of the article's 32-bit size,
/// at several stack sizes; what the `thread` program does at 500, 800 and
/// 1000 threads there; forks under the same limit and under RLIMIT_NPROC;
/// what a stack overflow does.
#[derive(Parser)]
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

/// One run of a counting probe.
#[derive(Clone, Debug, Serialize, Deserialize)]
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

#[derive(Serialize)]
struct StackRow {
    stack_size: u64,
    /// The article's arithmetic: address space / stack size.
    predicted: u64,
    pthread: Vec<Probe>,
    std: Vec<Probe>,
}

#[derive(Serialize)]
struct ProgramRun {
    threads: u32,
    setting: &'static str,
    ended: String,
    said: String,
    wall_s: f64,
    log_checked: bool,
}

#[derive(Serialize)]
struct ProcRow {
    limit: String,
    user: String,
    /// Tasks the limit leaves for the probe, when it can be predicted.
    predicted: Option<u64>,
    forks: Probe,
    threads: Probe,
}

#[derive(Serialize)]
struct Overflow {
    api: &'static str,
    stack_size: u64,
    ended: String,
    said: String,
}

#[derive(Serialize)]
struct Data {
    address_space: u64,
    max: u32,
    rounds: u32,
    stacks: Vec<StackRow>,
    program: Vec<ProgramRun>,
    processes: Vec<ProcRow>,
    overflow: Vec<Overflow>,
}

use labkit::limited::NOBODY;

fn main(argv: Vec<OsString>) -> Result<()> {
    let args = labkit::cli::parse_from::<Args, _, _>(argv);
    let out = args.common.start(EXPERIMENT.name)?;
    let max = args.max.unwrap_or(if args.common.full { 16384 } else { 4096 });
    let bins = crate::bins::programs(&["stacklimit", "thread"])?;
    let (stacklimit, thread) = (&bins[0], &bins[1]);
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
        for _ in 0..rounds {
            for api in ["pthread", "std"] {
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
    let processes = process_rows(stacklimit, &args, max, timeout)?;
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

fn limited(cmd: &mut Command, limits: Limits, timeout: Duration) -> Result<Outcome> {
    // A backtrace cannot be printed without memory, and trying can hang;
    // the probes' failures are described by their exit and last line.
    cmd.env_remove("RUST_BACKTRACE");
    let program = cmd.get_program().to_string_lossy().into_owned();
    labkit::limited::run(cmd, limits, timeout)
        .map_err(|e| Error::io(format!("cannot run {program}"), e))
}

// ANCHOR: probe
/// Run one `stacklimit ... --json` probe under `limits` and read its count.
fn count(cmd: &mut Command, limits: Limits, timeout: Duration) -> Result<Probe> {
    #[derive(Deserialize)]
    struct Counted {
        created: u32,
        stopped_by: Option<String>,
        vm_peak_kib: u64,
    }
    let done = limited(cmd, limits, timeout)?;
    let counted: Option<Counted> = done
        .status
        .success()
        .then(|| serde_json::from_str(done.stdout.trim()).ok())
        .flatten();
    Ok(Probe {
        created: counted.as_ref().map(|c| c.created),
        stopped_by: counted.as_ref().and_then(|c| c.stopped_by.clone()),
        ended: done.ended(),
        said: if counted.is_some() { String::new() } else { done.last_words() },
        vm_peak_kib: counted.map(|c| c.vm_peak_kib),
        wall_s: done.wall_s,
    })
}
// ANCHOR_END: probe

/// The article's `./thread` with N threads under the address-space limit.
fn run_thread(
    thread: &Path,
    n: u32,
    setting: &'static str,
    space: Limits,
    timeout: Duration,
) -> Result<ProgramRun> {
    let dir = labkit::cleanup::tempdir("lab-thread-limits-")
        .map_err(|e| Error::io("cannot create a temporary directory", e))?;
    let log: PathBuf = dir.path().join("logFile.log");
    let mut cmd = Command::new(thread);
    cmd.args(["--threads", &n.to_string(), "--count", "1000", "--log"]).arg(&log);
    let mut limits = space;
    match setting {
        "--stack-size 1M" => {
            cmd.args(["--stack-size", "1M"]);
        }
        "ulimit -s 1024" => limits.stack = Some(1 << 20),
        _ => limits.stack = Some(8 << 20),
    }
    let done = limited(&mut cmd, limits, timeout)?;
    let mut log_checked = false;
    if done.status.success() {
        let data = std::fs::read(&log).map_err(|e| Error::io(log.display(), e))?;
        let text = labkit::lines::payload(None);
        labkit::lines::check_log(&data, &text, u64::from(n), 1000).map_err(|e| {
            Error::failed(format!("thread --threads {n} ({setting}): bad log: {e}"))
        })?;
        log_checked = true;
    }
    Ok(ProgramRun {
        threads: n,
        setting,
        ended: done.ended(),
        said: done.last_words(),
        wall_s: done.wall_s,
        log_checked,
    })
}

/// Forks (and threads) under the same address-space limit, and as an
/// unprivileged user under RLIMIT_NPROC.
fn process_rows(
    stacklimit: &Path,
    args: &Args,
    max: u32,
    timeout: Duration,
) -> Result<Vec<ProcRow>> {
    let forks = |limits: Limits| {
        let mut cmd = Command::new(stacklimit);
        cmd.args(["forks", "--json", "--max", &max.to_string()]);
        count(&mut cmd, limits, timeout)
    };
    let threads = |limits: Limits| {
        let mut cmd = Command::new(stacklimit);
        cmd.args(["threads", "--json", "--stack-size", "64K", "--max"]);
        count(cmd.arg(max.to_string()), limits, timeout)
    };
    let space =
        Limits { address_space: Some(args.address_space), ..Limits::default() };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    let mut rows = vec![ProcRow {
        limit: format!("RLIMIT_AS = {}", format_size(args.address_space)),
        user: if euid == 0 { "root".into() } else { format!("uid {euid}") },
        predicted: None,
        forks: forks(space)?,
        threads: threads(space)?,
    }];
    if euid != 0 {
        let skipped = Probe {
            created: None,
            stopped_by: None,
            ended: "not run".into(),
            said: "switching to another user needs root".into(),
            vm_peak_kib: None,
            wall_s: 0.0,
        };
        rows.push(ProcRow {
            limit: format!("RLIMIT_NPROC = {}", args.nproc),
            user: format!("uid {NOBODY} (skipped: needs root)"),
            predicted: None,
            forks: skipped.clone(),
            threads: skipped,
        });
        return Ok(rows);
    }
    let nproc = Limits { nproc: Some(args.nproc), user: Some(NOBODY), ..space };
    let before = tasks_of(NOBODY);
    rows.push(ProcRow {
        limit: format!("RLIMIT_NPROC = {}", args.nproc),
        user: format!("uid {NOBODY} ({before} tasks already)"),
        // The probe itself is one of the user's tasks.
        predicted: Some(args.nproc.saturating_sub(before + 1)),
        forks: forks(nproc)?,
        threads: threads(nproc)?,
    });
    Ok(rows)
}

/// Tasks (threads of every process) that `uid` owns now: RLIMIT_NPROC
/// counts them all.
fn tasks_of(uid: u32) -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0 };
    let mut tasks = 0;
    for entry in dir.flatten() {
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let field = |name: &str| {
            status.lines().find_map(|l| l.strip_prefix(name)).map(str::trim)
        };
        let real = field("Uid:").and_then(|u| u.split_whitespace().next());
        if real == Some(&uid.to_string()) {
            tasks += field("Threads:").and_then(|t| t.parse().ok()).unwrap_or(1);
        }
    }
    tasks
}

fn counted(probes: &[Probe]) -> Option<Summary> {
    let v: Vec<f64> =
        probes.iter().filter_map(|p| p.created.map(f64::from)).collect();
    Summary::of(&v)
}

/// `383`, `263 (263-359)`, `4096 (cap)`, plus any runs that died.
fn cell(probes: &[Probe], max: u32) -> String {
    let mut text = match counted(probes) {
        Some(s) if s.min == s.max => format!("{}", s.median),
        Some(s) => format!("{} ({}-{})", s.median, s.min, s.max),
        None => String::new(),
    };
    if probes.iter().any(|p| p.created == Some(max)) {
        text.push_str(" (cap)");
    }
    let died: Vec<&Probe> = probes.iter().filter(|p| p.created.is_none()).collect();
    if let Some(first) = died.first() {
        let sep = if text.is_empty() { "" } else { "; " };
        text.push_str(&format!(
            "{sep}{} of {} runs: {}",
            died.len(),
            probes.len(),
            first.ended
        ));
    }
    text
}

fn stopped(probes: &[Probe]) -> String {
    let mut names: Vec<&str> =
        probes.iter().filter_map(|p| p.stopped_by.as_deref()).collect();
    names.sort_unstable();
    names.dedup();
    if names.is_empty() { "-".into() } else { names.join(", ") }
}

/// The figures the claims are judged on: threads that fit in the article's
/// 3 GiB at 8 MiB and 1 MiB stacks, and whether `ulimit -s 1024` let the
/// thread program create all it asked for.
fn headline(data: &Data) -> Headline {
    let created = |size: u64, std: bool| {
        let row = data.stacks.iter().find(|r| r.stack_size == size)?;
        let probes = if std { &row.std } else { &row.pthread };
        let counts: Vec<f64> =
            probes.iter().filter_map(|p| p.created).map(f64::from).collect();
        Summary::of(&counts).map(|s| s.median)
    };
    let predicted = data
        .stacks
        .iter()
        .find(|r| r.stack_size == 8 << 20)
        .map(|r| r.predicted as f64);
    let fixed: Vec<&ProgramRun> =
        data.program.iter().filter(|r| r.setting == "ulimit -s 1024").collect();
    let all_ok = (!fixed.is_empty()).then(|| {
        fixed.iter().filter(|r| r.ended == "exit 0").count() as f64
            / fixed.len() as f64
    });
    crate::report::headline()
        .add(
            "threads_at_8m",
            "pthread_create, 8 MiB stacks in 3 GiB",
            created(8 << 20, false),
            "",
        )
        .add(
            "std_threads_at_8m",
            "std::thread, 8 MiB stacks in 3 GiB",
            created(8 << 20, true),
            "",
        )
        .add(
            "predicted_at_8m",
            "the article's arithmetic, 3 GiB / 8 MiB",
            predicted,
            "",
        )
        .add(
            "threads_at_256k",
            "pthread_create, 256 KiB stacks (capped at --max)",
            created(256 << 10, false),
            "",
        )
        .add(
            "threads_at_1m",
            "pthread_create, 1 MiB stacks in 3 GiB",
            created(1 << 20, false),
            "",
        )
        .add(
            "ulimit_s_1024_ok",
            "share of thread runs under `ulimit -s 1024` that created every thread",
            all_ok,
            "",
        )
        .build()
}

fn stack_table(d: &Data) -> Table {
    let mut t = Table::new(
        format!(
            "1. Threads created under RLIMIT_AS = {} (the article's 32-bit user space)",
            format_size(d.address_space)
        ),
        &["stack", "AS / stack", "pthread_create", "std::thread", "stopped by"],
    );
    for r in &d.stacks {
        let mut why = stopped(&r.pthread);
        let std_why = stopped(&r.std);
        if std_why != why {
            why = format!("{why} / {std_why}");
        }
        t.row(vec![
            format_size(r.stack_size),
            r.predicted.to_string(),
            cell(&r.pthread, d.max),
            cell(&r.std, d.max),
            why,
        ]);
    }
    t.note(format!(
        "Idle threads (each blocked in read on one pipe) created by `stacklimit threads` \
         until creation failed or the cap of {} was reached; median (min-max) of {} \
         runs. `AS / stack` is the article's arithmetic (3 GiB / 8 MiB = 384); each \
         stack also has a 4 KiB guard page, and the program's own code, libraries and \
         heap take a few MiB. std::thread also maps a signal stack per thread, and \
         glibc may give a thread its own malloc arena (64 MiB of address space each).",
        d.max, d.rounds
    ));
    t
}

fn program_table(d: &Data) -> Table {
    let mut t = Table::new(
        format!(
            "2. The `thread` program, COUNT = 1000, under RLIMIT_AS = {}",
            format_size(d.address_space)
        ),
        &["threads", "stack", "ended", "what it said", "seconds"],
    );
    for r in &d.program {
        let said = if r.said.is_empty() && r.log_checked {
            "Okay (log checked: every line whole)".to_string()
        } else {
            r.said.clone()
        };
        t.row(vec![
            r.threads.to_string(),
            r.setting.to_string(),
            r.ended.clone(),
            said,
            format!("{:.3}", r.wall_s),
        ]);
    }
    t.note(
        "`default stack` is pthread_create's default with RLIMIT_STACK = 8M (8 MiB \
         stacks); `ulimit -s 1024` sets RLIMIT_STACK = 1M, as the article did; \
         `--stack-size 1M` asks for it directly (pthread_attr_setstacksize). One run each.",
    );
    t
}

fn process_table(d: &Data) -> Table {
    let mut t = Table::new(
        "3. Processes and threads under one limit each",
        &[
            "limit",
            "user",
            "predicted",
            "forks",
            "threads (64K stacks)",
            "stopped by",
        ],
    );
    for r in &d.processes {
        let forks = std::slice::from_ref(&r.forks);
        let threads = std::slice::from_ref(&r.threads);
        t.row(vec![
            r.limit.clone(),
            r.user.clone(),
            r.predicted.map_or("-".into(), |p| p.to_string()),
            cell(forks, d.max),
            cell(threads, d.max),
            format!("{} / {}", stopped(forks), stopped(threads)),
        ]);
    }
    t.note(
        "Each forked child has its own address space, so RLIMIT_AS does not limit how \
         many there are; RLIMIT_NPROC counts every task (process or thread) of the real \
         user and does not apply to root, so it is tried as uid 65534.",
    );
    t
}

fn overflow_table(d: &Data) -> Table {
    let mut t = Table::new(
        "4. A thread that overflows its stack (in a child process)",
        &["created with", "stack", "ended", "last line on stderr"],
    );
    for r in &d.overflow {
        t.row(vec![
            r.api.to_string(),
            format_size(r.stack_size),
            r.ended.clone(),
            r.said.clone(),
        ]);
    }
    t.note(
        "`stacklimit overflow`: one thread recursing with 1 KiB frames until it hits the \
         guard page below its stack.",
    );
    t
}

fn chart(d: &Data) -> Chart {
    let kib = |r: &StackRow| r.stack_size as f64 / 1024.0;
    let series = |f: fn(&StackRow) -> Option<f64>| -> Vec<(f64, f64)> {
        d.stacks.iter().filter_map(|r| f(r).map(|y| (kib(r), y))).collect()
    };
    let mut chart = Chart::new(
        &format!(
            "Threads that fit in {} of address space",
            format_size(d.address_space)
        ),
        "stack size (KiB)",
        "threads created",
    );
    chart.log_x = true;
    chart.log_y = true;
    chart
        .series("address space / stack", series(|r| Some(r.predicted as f64)))
        .series("pthread_create", series(|r| counted(&r.pthread).map(|s| s.median)))
        .series("std::thread", series(|r| counted(&r.std).map(|s| s.median)))
}
