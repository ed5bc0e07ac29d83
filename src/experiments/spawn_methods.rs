//! `lab run spawn-methods`: the 2026 answer to "processes or threads?":
//! microseconds per create+destroy for every way a program can start
//! concurrent work today, then the two things that move the fork figure
//! several-fold: how much memory the parent has resident, and where the
//! tasks run (one core or two).
//!
//! Unlike the other experiments this one measures inside the runner: each
//! method is a loop timed with the monotonic clock, `rounds` times, like
//! lmbench's `lat_proc`. The runner has no other thread while a fork loop
//! runs, and a few MiB resident (see the RSS table for what more costs).

use std::ffi::{CString, OsString};
use std::os::raw::{c_char, c_int, c_void};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Instant;

use crate::bars::{self, Bars};
use crate::chart::Chart;
use crate::results::Header;
use crate::stats::Summary;
use crate::table::{Table, with_range};
use clap::Parser;
use labkit::error::describe_errno;
use labkit::limits::{format_size, pthread_default_stack, size_in};
use labkit::memory::Touched;
use labkit::{Error, Result};
use nix::errno::Errno;
use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork};
use serde::Serialize;

use super::Experiment;
use crate::report::{Common, Headline, Report};

pub const EXPERIMENT: Experiment = Experiment {
    name: "spawn-methods",
    about: "fork, vfork, exec, posix_spawn, threads, a pool, tokio: cost today",
    all_args: &[],
    run: main,
};

/// Microseconds per create+destroy for fork+wait, vfork, fork+exec,
/// posix_spawn, std::process::Command, pthread_create, std::thread at three
/// stack sizes, a pooled thread and a tokio task; then fork against the
/// parent's resident memory and against CPU placement.
#[derive(Parser)]
struct Args {
    #[command(flatten)]
    common: Common,

    /// Resident memory the parent touches before forking, for the RSS table
    #[arg(long, value_delimiter = ',', default_value = "0,64M,256M,1G",
          value_parser = size_in(0, 64 << 30))]
    rss: Vec<u64>,

    /// The tiny program the exec methods start (run with no arguments and
    /// an empty environment; it must exit 0)
    #[arg(long, value_name = "PATH", default_value = "/bin/true")]
    exec: PathBuf,

    /// Seconds each round of each loop should last; the iteration count is
    /// calibrated from a warm-up (at least 3) [default: 0.1; 0.5 with --full]
    #[arg(long, value_name = "SECONDS", value_parser = parse_budget)]
    budget: Option<f64>,
}

fn parse_budget(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if (0.0001..=60.0).contains(&x) => Ok(x),
        _ => Err(format!("'{text}' is not a number of seconds from 0.0001 to 60")),
    }
}

/// One way to create and destroy a unit of concurrent work.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Method {
    ForkWait,
    Vfork,
    ForkExec,
    PosixSpawn,
    Command,
    /// pthread_create + pthread_join with glibc's default stack.
    Pthread,
    /// std::thread with this stack (None: Rust's own default).
    Thread(Option<u64>),
    Pool,
    Tokio,
}

impl Method {
    fn label(self) -> String {
        match self {
            Method::ForkWait => "fork + _exit + waitpid".into(),
            Method::Vfork => "vfork (clone VM+VFORK) + _exit + waitpid".into(),
            Method::ForkExec => "fork + execve tiny program + waitpid".into(),
            Method::PosixSpawn => "posix_spawn tiny program + waitpid".into(),
            Method::Command => "std::process::Command status()".into(),
            Method::Pthread => "pthread_create + pthread_join, default attr".into(),
            Method::Thread(None) => {
                "std::thread spawn+join, Rust default stack".into()
            }
            Method::Thread(Some(s)) => {
                format!("std::thread spawn+join, {} stack", format_size(s))
            }
            Method::Pool => "pooled thread: hand off a job, get the reply".into(),
            Method::Tokio => {
                "tokio task spawn + await (current-thread runtime)".into()
            }
        }
    }

    /// A column header for the RSS and placement tables.
    fn short(self) -> &'static str {
        match self {
            Method::ForkWait => "fork+wait us",
            Method::Vfork => "vfork us",
            Method::Thread(None) => "std::thread us",
            Method::Pool => "pool handoff us",
            _ => "us",
        }
    }
}

#[derive(Clone, Debug, Serialize)]
struct Row {
    method: String,
    #[serde(skip)]
    short: &'static str,
    iterations: u64,
    /// Microseconds per create+destroy, one value per round.
    us: Summary,
    runs_us: Vec<f64>,
}

#[derive(Clone, Debug, Serialize)]
struct RssRow {
    touched_bytes: u64,
    /// VmRSS of the runner while it forked, KiB.
    vm_rss_kib: u64,
    rows: Vec<Row>,
}

#[derive(Clone, Debug, Serialize)]
struct PlacementRow {
    placement: String,
    rows: Vec<Row>,
}

#[derive(Serialize)]
struct Data {
    rounds: u32,
    full: bool,
    budget_s: f64,
    exec: String,
    transparent_hugepages: String,
    methods: Vec<Row>,
    rss: Vec<RssRow>,
    placement: Vec<PlacementRow>,
}

/// What the exec methods start, prepared once: path, argv, empty envp.
struct Exec {
    path: CString,
    argv: [*mut c_char; 2],
    envp: [*mut c_char; 1],
}

impl Exec {
    fn new(path: &std::path::Path) -> Result<Exec> {
        use std::os::unix::ffi::OsStrExt;
        let path = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| Error::usage("--exec: the path holds a NUL byte"))?;
        let argv = [path.as_ptr().cast_mut(), std::ptr::null_mut()];
        Ok(Exec { path, argv, envp: [std::ptr::null_mut()] })
    }
}

fn main(argv: Vec<OsString>) -> Result<()> {
    let args = labkit::cli::parse_from::<Args, _, _>(argv);
    let budget = args.budget.unwrap_or(if args.common.full { 0.5 } else { 0.1 });
    if !args.exec.is_file() {
        return Err(Error::usage(format!(
            "--exec {}: no such program",
            args.exec.display()
        )));
    }
    let out = args.common.start(EXPERIMENT.name)?;
    let exec = Exec::new(&args.exec)?;
    // Check the tiny program once, outside any timing, the way the methods
    // run it (no arguments, empty environment), keeping what it said.
    check_exec(&args.exec)?;
    run_method(Method::ForkExec, 1, &exec, None)?;
    let rounds = args.common.rounds as usize;
    let cpus = allowed_cpus()?;

    let methods = [
        Method::ForkWait,
        Method::Vfork,
        Method::ForkExec,
        Method::PosixSpawn,
        Method::Command,
        Method::Pthread,
        Method::Thread(Some(pthread_default_stack())),
        Method::Thread(None),
        Method::Thread(Some(64 << 10)),
        Method::Pool,
        Method::Tokio,
    ];
    let rss_methods = [Method::ForkWait, Method::Vfork, Method::Thread(None)];
    let placed = [Method::ForkWait, Method::Thread(None), Method::Pool];
    let placements = placements(&cpus);
    let steps = rounds
        * (methods.len()
            + rss_methods.len() * args.rss.len()
            + placements
                .iter()
                .map(|p| if p.worker_cpu.is_some() { 1 } else { placed.len() })
                .sum::<usize>());
    let bar = crate::progress::bar(steps as u64, EXPERIMENT.name);

    // 1. Every method, rounds interleaved so drift spreads over all.
    let n = calibrate_all(&methods, budget, &exec, None)?;
    let mut runs = vec![Vec::new(); methods.len()];
    for round in 0..rounds {
        for k in 0..methods.len() {
            let i = (k + round) % methods.len();
            bar.set_message(methods[i].label());
            runs[i].push(run_method(methods[i], n[i], &exec, None)?);
            bar.inc(1);
        }
    }
    let methods_rows = rows(&methods, runs, &n);

    // 2. Fork against resident memory.
    let mut rss_rows = Vec::new();
    for &bytes in &args.rss {
        bar.set_message(format!("{} resident", format_size(bytes)));
        let region = Touched::new(bytes as usize).map_err(|e| {
            Error::failed(format!(
                "cannot map {} to touch: {}",
                format_size(bytes),
                describe_errno(e)
            ))
        })?;
        let vm_rss_kib = vm_rss_kib();
        // Calibrated again: each fork copies more page tables.
        let n = calibrate_all(&rss_methods, budget, &exec, None)?;
        let mut runs = vec![Vec::new(); rss_methods.len()];
        for round in 0..rounds {
            for k in 0..rss_methods.len() {
                let i = (k + round) % rss_methods.len();
                runs[i].push(run_method(rss_methods[i], n[i], &exec, None)?);
                bar.inc(1);
            }
        }
        drop(region);
        rss_rows.push(RssRow {
            touched_bytes: bytes,
            vm_rss_kib,
            rows: rows(&rss_methods, runs, &n),
        });
    }

    // 3. Placement: everything on one core, or left to the scheduler.
    let mut placement_rows = Vec::new();
    for p in &placements {
        bar.set_message(p.label.clone());
        // The two-core placement only changes the pool: children and
        // threads inherit the creator's CPU.
        let here: Vec<Method> = if p.worker_cpu.is_some() {
            vec![Method::Pool]
        } else {
            placed.to_vec()
        };
        let n = with_placement(p, &cpus, || {
            calibrate_all(&here, budget, &exec, p.worker_cpu)
        })?;
        let mut runs = vec![Vec::new(); here.len()];
        for round in 0..rounds {
            for k in 0..here.len() {
                let i = (k + round) % here.len();
                let r = with_placement(p, &cpus, || {
                    run_method(here[i], n[i], &exec, p.worker_cpu)
                });
                runs[i].push(r?);
                bar.inc(1);
            }
        }
        placement_rows.push(PlacementRow {
            placement: p.label.clone(),
            rows: rows(&here, runs, &n),
        });
    }
    bar.finish_and_clear();

    let data = Data {
        rounds: args.common.rounds,
        full: args.common.full,
        budget_s: budget,
        exec: args.exec.display().to_string(),
        transparent_hugepages: std::fs::read_to_string(
            "/sys/kernel/mm/transparent_hugepage/enabled",
        )
        .map_or_else(|_| "unknown".into(), |s| s.trim().to_string()),
        methods: methods_rows,
        rss: rss_rows,
        placement: placement_rows,
    };
    write_bars(&data, &out)?;
    let report = Report {
        header: Header::new(EXPERIMENT.name),
        headline: headline(&data),
        tables: vec![methods_table(&data), rss_table(&data), placement_table(&data)],
        charts: charts(&data),
        files: Vec::new(),
        data,
    };
    report.publish(&args.common, &out)
}

fn rows(methods: &[Method], runs: Vec<Vec<f64>>, n: &[u64]) -> Vec<Row> {
    methods
        .iter()
        .zip(runs)
        .zip(n)
        .map(|((&m, runs), &n)| Row {
            method: m.label(),
            short: m.short(),
            iterations: n,
            us: Summary::of(&runs).expect("at least one round"),
            runs_us: runs,
        })
        .collect()
}

// ANCHOR: calibrate
/// How many iterations make one round last about `budget` seconds, found
/// much as lmbench does: time 1, 4, 16, ... iterations (the first batch is
/// a warm-up and never decides) until a batch of at least 16 takes a tenth
/// of the budget, or any batch takes the whole budget. The faster of the
/// last two batches sets the count, so one preempted batch on a busy
/// machine does not shrink it; at least 3.
fn calibrate(
    method: Method,
    budget: f64,
    exec: &Exec,
    worker_cpu: Option<usize>,
) -> Result<u64> {
    const MAX: u64 = 10_000_000;
    let (mut k, mut previous) = (1, f64::INFINITY);
    loop {
        let us = run_method(method, k, exec, worker_cpu)?;
        let spent = us * k as f64 / 1e6;
        let enough =
            (k >= 16 && spent >= budget / 10.0) || (k > 1 && spent >= budget);
        if enough || k >= MAX {
            let per_op = if k > 1 { us.min(previous) } else { us };
            return Ok(((budget * 1e6 / per_op.max(1e-3)) as u64).clamp(3, MAX));
        }
        previous = us;
        k *= 4;
    }
}
// ANCHOR_END: calibrate

fn calibrate_all(
    methods: &[Method],
    budget: f64,
    exec: &Exec,
    worker_cpu: Option<usize>,
) -> Result<Vec<u64>> {
    methods.iter().map(|&m| calibrate(m, budget, exec, worker_cpu)).collect()
}

/// Run `method` `n` times; microseconds per create+destroy.
fn run_method(
    method: Method,
    n: u64,
    exec: &Exec,
    worker_cpu: Option<usize>,
) -> Result<f64> {
    let start = Instant::now();
    match method {
        Method::ForkWait => fork_wait(n)?,
        Method::Vfork => vfork_exit(n)?,
        Method::ForkExec => fork_exec(n, exec)?,
        Method::PosixSpawn => posix_spawn(n, exec)?,
        Method::Command => command(n, exec)?,
        Method::Pthread => pthread_join(n)?,
        Method::Thread(stack) => thread_join(n, stack)?,
        Method::Pool => return pool(n, worker_cpu),
        Method::Tokio => return tokio_tasks(n),
    }
    Ok(start.elapsed().as_secs_f64() * 1e6 / n as f64)
}

/// `--exec` must start and exit 0: say why not, with the exec error or
/// the program's own last words.
fn check_exec(path: &std::path::Path) -> Result<()> {
    let what = format!("--exec {}", path.display());
    let out = labkit::cleanup::output(std::process::Command::new(path).env_clear())
        .map_err(|e| {
            Error::usage(format!(
                "{what}: cannot execute: {}",
                labkit::error::describe_io(&e)
            ))
        })?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said = stderr.lines().rev().find(|l| !l.trim().is_empty());
    Err(Error::usage(format!(
        "{what}: the program must exit 0 when run with no arguments; it ended \
         with {}{}",
        describe_status(out.status.into_raw()),
        said.map_or(String::new(), |l| format!(": {}", l.trim()))
    )))
}

/// "exit status 1", "signal SIGSEGV", from a raw wait status.
fn describe_status(raw: i32) -> String {
    if libc::WIFEXITED(raw) {
        format!("exit status {}", libc::WEXITSTATUS(raw))
    } else if libc::WIFSIGNALED(raw) {
        let sig = libc::WTERMSIG(raw);
        Signal::try_from(sig)
            .map_or_else(|_| format!("signal {sig}"), |s| format!("signal {s}"))
    } else {
        format!("wait status {raw:#x}")
    }
}

/// Reap `pid` and insist that it exited with 0.
fn wait_ok(pid: Pid, what: &str) -> Result<()> {
    loop {
        return match waitpid(pid, None) {
            Ok(WaitStatus::Exited(_, 0)) => Ok(()),
            Err(Errno::EINTR) => continue,
            Ok(WaitStatus::Exited(_, 127)) => Err(Error::failed(format!(
                "{what}: the child exited with status 127 (execve failed, or the \
                 program itself said 127)"
            ))),
            Ok(WaitStatus::Exited(_, code)) => Err(Error::failed(format!(
                "{what}: the child exited with status {code}"
            ))),
            Ok(WaitStatus::Signaled(_, sig, _)) => {
                Err(Error::failed(format!("{what}: the child was killed by {sig}")))
            }
            Ok(other) => {
                Err(Error::failed(format!("{what}: child ended with {other:?}")))
            }
            Err(e) => Err(Error::failed(format!("waitpid: {}", describe_errno(e)))),
        };
    }
}

fn create_failed(what: &str, errno: Errno) -> Error {
    Error::failed(format!("{what}: {}", describe_errno(errno)))
}

// ANCHOR: fork_wait
fn fork_wait(n: u64) -> Result<()> {
    for _ in 0..n {
        // SAFETY: the child calls only _exit, which is async-signal-safe.
        match unsafe { fork() } {
            Ok(ForkResult::Child) => unsafe { libc::_exit(0) },
            Ok(ForkResult::Parent { child }) => wait_ok(child, "fork")?,
            Err(errno) => return Err(create_failed("fork", errno)),
        }
    }
    Ok(())
}
// ANCHOR_END: fork_wait

extern "C" fn vfork_child(_: *mut c_void) -> c_int {
    // SAFETY: _exit ends the child at once, touching nothing it shares.
    unsafe { libc::_exit(0) }
}

// ANCHOR: vfork
/// vfork without its pitfalls: clone with CLONE_VM | CLONE_VFORK, as
/// glibc's posix_spawn does, so the child shares the parent's memory (no
/// page tables copied) and the parent sleeps until it exits; the child runs
/// on a stack of its own.
fn vfork_exit(n: u64) -> Result<()> {
    let mut stack = vec![0u128; 4096]; // 64 KiB, 16-byte aligned
    let top = stack.as_mut_ptr_range().end.cast::<c_void>();
    for _ in 0..n {
        let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD;
        // SAFETY: the child runs `vfork_child` on `stack`, which outlives
        // it (CLONE_VFORK: clone returns once the child has exited), and
        // only calls _exit.
        let pid =
            unsafe { libc::clone(vfork_child, top, flags, std::ptr::null_mut()) };
        if pid == -1 {
            return Err(create_failed("clone(CLONE_VM|CLONE_VFORK)", Errno::last()));
        }
        wait_ok(Pid::from_raw(pid), "vfork child")?;
    }
    Ok(())
}
// ANCHOR_END: vfork

fn fork_exec(n: u64, exec: &Exec) -> Result<()> {
    for _ in 0..n {
        // SAFETY: the child calls only execve and _exit, both
        // async-signal-safe; argv and envp were built before the fork.
        match unsafe { fork() } {
            Ok(ForkResult::Child) => unsafe {
                libc::execve(
                    exec.path.as_ptr(),
                    exec.argv.as_ptr().cast(),
                    exec.envp.as_ptr().cast(),
                );
                libc::_exit(127)
            },
            Ok(ForkResult::Parent { child }) => wait_ok(child, "fork+exec")?,
            Err(errno) => return Err(create_failed("fork", errno)),
        }
    }
    Ok(())
}

fn posix_spawn(n: u64, exec: &Exec) -> Result<()> {
    for _ in 0..n {
        let mut pid = 0;
        // SAFETY: valid NUL-terminated path, NULL-terminated argv and envp
        // that outlive the call; no file actions or attributes.
        let rc = unsafe {
            libc::posix_spawn(
                &mut pid,
                exec.path.as_ptr(),
                std::ptr::null(),
                std::ptr::null(),
                exec.argv.as_ptr(),
                exec.envp.as_ptr(),
            )
        };
        if rc != 0 {
            return Err(create_failed("posix_spawn", Errno::from_raw(rc)));
        }
        wait_ok(Pid::from_raw(pid), "posix_spawn")?;
    }
    Ok(())
}

fn command(n: u64, exec: &Exec) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::OsStr::from_bytes(exec.path.as_bytes());
    for _ in 0..n {
        let status = std::process::Command::new(path)
            .env_clear()
            .status()
            .map_err(|e| Error::io("std::process::Command", e))?;
        if !status.success() {
            return Err(Error::failed(format!(
                "Command: child ended with {status}"
            )));
        }
    }
    Ok(())
}

extern "C" fn empty(arg: *mut c_void) -> *mut c_void {
    arg
}

/// The C way, for comparison with std::thread: no attributes, so glibc's
/// default stack (the soft RLIMIT_STACK) from its stack cache.
fn pthread_join(n: u64) -> Result<()> {
    for _ in 0..n {
        let mut tid: libc::pthread_t = 0;
        // SAFETY: `empty` touches nothing; `tid` is valid for the call.
        let rc = unsafe {
            libc::pthread_create(
                &mut tid,
                std::ptr::null(),
                empty,
                std::ptr::null_mut(),
            )
        };
        if rc != 0 {
            return Err(create_failed("pthread_create", Errno::from_raw(rc)));
        }
        // SAFETY: a joinable thread created just now, joined once.
        let rc = unsafe { libc::pthread_join(tid, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(create_failed("pthread_join", Errno::from_raw(rc)));
        }
    }
    Ok(())
}

fn thread_join(n: u64, stack: Option<u64>) -> Result<()> {
    for _ in 0..n {
        let mut builder = std::thread::Builder::new();
        if let Some(s) = stack {
            builder = builder.stack_size(s as usize);
        }
        let thread =
            builder.spawn(|| {}).map_err(|e| Error::io("thread spawn", e))?;
        thread.join().map_err(|_| Error::failed("an empty thread panicked"))?;
    }
    Ok(())
}

// ANCHOR: pool
/// The pool the articles argue about, at its smallest: one thread made
/// once, waiting on a channel; each "creation" hands it a job and waits
/// for the answer. Timed without the pool's own start and end.
fn pool(n: u64, worker_cpu: Option<usize>) -> Result<f64> {
    let (jobs, inbox) = mpsc::channel::<u64>();
    let (replies, answers) = mpsc::channel::<u64>();
    let worker = std::thread::Builder::new()
        .spawn(move || {
            if let Some(cpu) = worker_cpu {
                let _ = pin_self(&[cpu]);
            }
            for job in inbox {
                if replies.send(job).is_err() {
                    break;
                }
            }
        })
        .map_err(|e| Error::io("thread spawn", e))?;
    // One job before the clock starts, so the worker is up and waiting.
    let mut lost = jobs.send(n).is_err() || answers.recv() != Ok(n);
    let start = Instant::now();
    for job in 0..n {
        if lost || jobs.send(job).is_err() || answers.recv() != Ok(job) {
            lost = true;
            break;
        }
    }
    let us = start.elapsed().as_secs_f64() * 1e6 / n as f64;
    drop(jobs);
    let joined = worker.join().is_ok();
    if lost || !joined {
        return Err(Error::failed("the pool thread lost a job"));
    }
    Ok(us)
}
// ANCHOR_END: pool

// ANCHOR: tokio
fn tokio_tasks(n: u64) -> Result<f64> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| Error::io("tokio runtime", e))?;
    rt.block_on(async {
        let start = Instant::now();
        for i in 0..n {
            match tokio::spawn(async move { i }).await {
                Ok(j) if j == i => {}
                _ => return Err(Error::failed("a tokio task lost its result")),
            }
        }
        Ok(start.elapsed().as_secs_f64() * 1e6 / n as f64)
    })
}
// ANCHOR_END: tokio

fn vm_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
            line.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

struct Placement {
    label: String,
    /// CPUs the runner's main thread (and what it creates) may use.
    cpus: Option<Vec<usize>>,
    /// For the pool: the CPU its worker pins itself to.
    worker_cpu: Option<usize>,
}

fn placements(cpus: &[usize]) -> Vec<Placement> {
    let mut list = vec![Placement {
        label: format!("unpinned ({} CPUs allowed)", cpus.len()),
        cpus: None,
        worker_cpu: None,
    }];
    if let Some(&first) = cpus.first() {
        list.push(Placement {
            label: format!("same core (all on CPU {first})"),
            cpus: Some(vec![first]),
            worker_cpu: None,
        });
        if let Some(&second) = cpus.get(1) {
            list.push(Placement {
                label: format!(
                    "two cores (creator on CPU {first}, pool worker on {second})"
                ),
                cpus: Some(vec![first]),
                worker_cpu: Some(second),
            });
        }
    }
    list
}

fn allowed_cpus() -> Result<Vec<usize>> {
    let set = sched_getaffinity(Pid::from_raw(0)).map_err(|e| {
        Error::failed(format!("sched_getaffinity: {}", describe_errno(e)))
    })?;
    Ok((0..CpuSet::count()).filter(|&c| set.is_set(c).unwrap_or(false)).collect())
}

/// Restrict the calling thread (and what it creates from now on) to `cpus`.
fn pin_self(cpus: &[usize]) -> Result<()> {
    let mut set = CpuSet::new();
    for &c in cpus {
        set.set(c)
            .map_err(|e| Error::failed(format!("CPU {c}: {}", describe_errno(e))))?;
    }
    sched_setaffinity(Pid::from_raw(0), &set).map_err(|e| {
        Error::failed(format!("sched_setaffinity: {}", describe_errno(e)))
    })
}

/// Run `f` with the runner pinned as `p` says, then put the mask back.
fn with_placement<T>(
    p: &Placement,
    all: &[usize],
    f: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let Some(cpus) = &p.cpus else { return f() };
    pin_self(cpus)?;
    let result = f();
    pin_self(all)?;
    result
}

fn us_cell(s: &Summary) -> String {
    let digits = if s.median < 1.0 {
        3
    } else if s.median < 10.0 {
        2
    } else {
        1
    };
    with_range(s.median, s.min, s.max, digits)
}

/// Each method's cost, keyed by its short name.
fn headline(data: &Data) -> Headline {
    let mut h = crate::report::headline();
    for r in &data.methods {
        let key = format!("{}_us", crate::report::slug(&r.method));
        h = h.add(&key, &r.method, r.us.median, "µs");
    }
    h.build()
}

fn methods_table(d: &Data) -> Table {
    let mut t = Table::new(
        "1. Create and destroy one unit of concurrent work, 2026",
        &["method", "us each", "iterations", "vs fork+wait"],
    );
    let fork = d.methods.first().map_or(f64::NAN, |r| r.us.median);
    for r in &d.methods {
        t.row(vec![
            r.method.clone(),
            us_cell(&r.us),
            r.iterations.to_string(),
            format!("{:.3}", r.us.median / fork),
        ]);
    }
    t.note(format!(
        "Microseconds per create+destroy: median (min-max) of {} rounds, each a timed \
         loop of `iterations` (calibrated to about {} s a round), inside the runner (a \
         few MiB resident). Tiny program: `{}` with an empty environment.",
        d.rounds, d.budget_s, d.exec
    ));
    t
}

fn rss_table(d: &Data) -> Table {
    let labels: Vec<String> = d
        .rss
        .first()
        .map(|r| r.rows.iter().map(|x| x.short.to_string()).collect())
        .unwrap_or_default();
    let mut headers = vec!["touched", "VmRSS MiB"];
    headers.extend(labels.iter().map(String::as_str));
    let mut t = Table::new("2. Fork against the parent's resident memory", &headers);
    for r in &d.rss {
        let mut cells = vec![
            format_size(r.touched_bytes),
            format!("{:.0}", r.vm_rss_kib as f64 / 1024.0),
        ];
        cells.extend(r.rows.iter().map(|x| us_cell(&x.us)));
        t.row(cells);
    }
    t.note(format!(
        "The parent maps and writes every 4 KiB page of the region (MADV_NOHUGEPAGE; \
         transparent huge pages here: `{}`), then creates and destroys children or \
         threads; median (min-max) of {} rounds. At least 3 forks a round: the largest \
         sizes may take longer than the budget.",
        d.transparent_hugepages, d.rounds
    ));
    t
}

fn placement_table(d: &Data) -> Table {
    let columns: Vec<&'static str> = d
        .placement
        .first()
        .map(|r| r.rows.iter().map(|x| x.short).collect())
        .unwrap_or_default();
    let mut headers = vec!["placement"];
    headers.extend(columns.iter());
    let mut t = Table::new(
        "3. The same against CPU placement (sched_setaffinity)",
        &headers,
    );
    for p in &d.placement {
        let mut cells = vec![p.placement.clone()];
        cells.extend(columns.iter().map(|c| {
            p.rows
                .iter()
                .find(|x| x.short == *c)
                .map_or("-".into(), |x| us_cell(&x.us))
        }));
        t.row(cells);
    }
    t.note(
        "Pinning applies to the runner's thread and everything it creates afterwards \
         (children and threads inherit the mask), so only the pool can be split over \
         two cores: its worker pins itself to the second CPU.",
    );
    t
}

/// Charts for the tables whose rows are methods, written beside the line
/// chart `publish` writes. The values span decades, so a log axis, with dots
/// (a bar's length means nothing on a log axis).
fn write_bars(d: &Data, out: &std::path::Path) -> Result<()> {
    let unit = "microseconds (log scale): median, whisker min-max of the rounds";
    let row = |label: &str, s: &Summary| {
        bars::Row::new(label, s.median).range(s.min, s.max)
    };
    let rows = d.methods.iter().map(|r| row(&r.method, &r.us)).collect();
    let svg =
        Bars::new("Create + destroy, 2026", unit, true).group("", rows).to_svg();
    crate::results::write_file(&out.join("spawn-methods.svg"), &svg)?;
    // One colour per method, whatever placements it appears under.
    let mut methods: Vec<&str> = Vec::new();
    let mut chart = Bars::new("CPU placement", unit, true);
    for p in &d.placement {
        let mut rows = Vec::new();
        for r in &p.rows {
            if !methods.contains(&r.short) {
                methods.push(r.short);
            }
            let colour = methods.iter().position(|m| *m == r.short).unwrap_or(0);
            let label = r.short.strip_suffix(" us").unwrap_or(r.short);
            rows.push(row(label, &r.us).colour(colour));
        }
        chart = chart.group(&p.placement, rows);
    }
    crate::results::write_file(&out.join("placement.svg"), &chart.to_svg())
}

fn charts(d: &Data) -> Vec<(String, Chart)> {
    let mut charts = Vec::new();
    if d.rss.len() > 1 {
        let mut c = Chart::new(
            "Creation cost against the parent's resident memory",
            "touched MiB",
            "microseconds (median)",
        );
        for (i, r) in d.rss[0].rows.iter().enumerate() {
            let points = d
                .rss
                .iter()
                .map(|x| {
                    (
                        x.touched_bytes as f64 / f64::from(1 << 20),
                        x.rows[i].us.median,
                    )
                })
                .collect();
            c = c.series(&r.method, points);
        }
        charts.push(("rss".to_string(), c));
    }
    charts
}
