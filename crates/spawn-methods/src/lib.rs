//! `spawn-methods`: the 2026 answer to "processes or threads?":
//! microseconds per create+destroy for every way a program can start
//! concurrent work today, each a loop timed with the monotonic clock, like
//! lmbench's `lat_proc`; with, if asked, the parent's resident memory grown
//! first (`--rss`) and the process confined to some CPUs (`--cpus`, and
//! `--worker-cpu` for the pool's worker), the two things that move the
//! fork figure several-fold.
//!
//! No C original: the articles (book References: zhou-2010, lecture-2004)
//! timed fork and pthread_create only; the loops follow their shape. The
//! runner (`lab run spawn-methods`) runs this program once per round, in
//! a child limited in address space, and makes the tables.
//!
//! One process measures everything it is asked to, in the order given, so
//! a run of several methods shares one parent: one touched region, one
//! placement. SIGINT, SIGTERM or SIGHUP stop it between two loops (every
//! child of a loop is reaped before the loop returns); exit 128 + N.

mod methods;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Instant;

use labkit::limits::format_size;
use labkit::{Error, Result};
use serde::{Deserialize, Serialize};

use methods::Exec;

/// One way to create and destroy a unit of concurrent work.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum,
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// fork, the child _exits, waitpid
    ForkWait,
    /// clone(CLONE_VM | CLONE_VFORK), the child _exits, waitpid
    Vfork,
    /// fork, the child execs the tiny program, waitpid
    ForkExec,
    /// posix_spawn the tiny program, waitpid
    PosixSpawn,
    /// std::process::Command::status on the tiny program
    Command,
    /// pthread_create + pthread_join with glibc's default stack
    Pthread,
    /// std::thread spawn + join with pthread's default stack (RLIMIT_STACK)
    ThreadRlimit,
    /// std::thread spawn + join with Rust's own default stack
    Thread,
    /// std::thread spawn + join with a 64 KiB stack
    Thread64k,
    /// hand a job to a pooled thread and wait for the reply
    Pool,
    /// tokio task spawn + await on a current-thread runtime
    Tokio,
}

impl Method {
    /// Every method, in the order of the runner's first table.
    pub const ALL: [Method; 11] = [
        Method::ForkWait,
        Method::Vfork,
        Method::ForkExec,
        Method::PosixSpawn,
        Method::Command,
        Method::Pthread,
        Method::ThreadRlimit,
        Method::Thread,
        Method::Thread64k,
        Method::Pool,
        Method::Tokio,
    ];

    /// What the method does, as the tables say it.
    pub fn label(self) -> String {
        let thread = |stack: &str| format!("std::thread spawn+join, {stack} stack");
        match self {
            Method::ForkWait => "fork + _exit + waitpid".into(),
            Method::Vfork => "vfork (clone VM+VFORK) + _exit + waitpid".into(),
            Method::ForkExec => "fork + execve tiny program + waitpid".into(),
            Method::PosixSpawn => "posix_spawn tiny program + waitpid".into(),
            Method::Command => "std::process::Command status()".into(),
            Method::Pthread => "pthread_create + pthread_join, default attr".into(),
            Method::ThreadRlimit => {
                thread(&format_size(labkit::limits::pthread_default_stack()))
            }
            Method::Thread => thread("Rust default"),
            Method::Thread64k => thread("64K"),
            Method::Pool => "pooled thread: hand off a job, get the reply".into(),
            Method::Tokio => {
                "tokio task spawn + await (current-thread runtime)".into()
            }
        }
    }

    /// Its `--method` spelling: `fork-wait`.
    pub fn name(self) -> String {
        labkit::cli::spelling(&self)
    }

    /// Does it start the `--exec` program?
    pub fn execs(self) -> bool {
        matches!(self, Method::ForkExec | Method::PosixSpawn | Method::Command)
    }
}

/// One method's loop: how many times, and what each took.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Run {
    pub method: Method,
    pub label: String,
    pub iterations: u64,
    /// Microseconds per create+destroy.
    pub us: f64,
}

/// What a run measured, in the order the methods were given.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// Bytes touched before the loops (`--rss`).
    pub touched_bytes: u64,
    /// VmRSS of this process while it looped, KiB.
    pub vm_rss_kib: u64,
    /// The CPUs it was confined to (`--cpus`), as the kernel writes them;
    /// `None`: every CPU it was allowed.
    pub cpus: Option<String>,
    /// The pool worker's CPU (`--worker-cpu`).
    pub worker_cpu: Option<usize>,
    /// `--budget`: the iteration counts were calibrated to about this many
    /// seconds a loop.
    pub budget_s: Option<f64>,
    pub exec: PathBuf,
    pub runs: Vec<Run>,
}

impl Report {
    /// One line per method: microseconds each.
    pub fn text(&self) -> String {
        let mut out = format!(
            "{} touched ({} KiB resident){}\n",
            format_size(self.touched_bytes),
            self.vm_rss_kib,
            self.cpus.as_ref().map_or(String::new(), |c| format!(", on CPUs {c}"))
        );
        for r in &self.runs {
            out += &format!(
                "{:>10.3} us each  ({} iterations)  {}\n",
                r.us, r.iterations, r.label
            );
        }
        out
    }
}

/// What to measure, and where.
pub struct Options {
    /// In the order to run them.
    pub methods: Vec<Method>,
    /// Iterations of each method's loop; `None`: calibrate to `budget`.
    pub counts: Option<Vec<u64>>,
    /// Seconds each calibrated loop should last.
    pub budget: f64,
    /// Bytes to touch before the loops.
    pub rss: u64,
    /// Confine the process to these CPUs first.
    pub cpus: Option<Vec<usize>>,
    /// Pin the pool's worker to this CPU.
    pub worker_cpu: Option<usize>,
    /// The tiny program of the exec methods.
    pub exec: PathBuf,
}

impl Options {
    /// The program's command line that runs these options and prints its
    /// report as JSON: how a caller (the runner) starts it as a process.
    pub fn args(&self) -> Vec<OsString> {
        let list = |v: Vec<String>| v.join(",");
        let mut args = vec!["--method".into()];
        args.push(list(self.methods.iter().map(|m| m.name()).collect()).into());
        match &self.counts {
            Some(n) => args.extend([
                "--iterations".into(),
                list(n.iter().map(u64::to_string).collect()).into(),
            ]),
            None => args.extend(["--budget".into(), self.budget.to_string().into()]),
        }
        args.extend(["--rss".into(), self.rss.to_string().into()]);
        args.extend(["--exec".into(), self.exec.clone().into_os_string()]);
        if let Some(cpus) = &self.cpus {
            let cpus = list(cpus.iter().map(usize::to_string).collect());
            args.extend(["--cpus".into(), cpus.into()]);
        }
        if let Some(worker) = self.worker_cpu {
            args.extend(["--worker-cpu".into(), worker.to_string().into()]);
        }
        args.push("--json".into());
        args
    }
}

/// Check `o`, confine the process, touch the memory, and time each method
/// in turn. A size larger than the memory available, a CPU this process
/// may not use and an `--exec` that does not exit 0 are usage errors,
/// found before anything is measured.
pub fn run(o: &Options) -> Result<Report> {
    if let Some(n) = &o.counts
        && n.len() != o.methods.len()
    {
        return Err(Error::usage(format!(
            "{} iteration counts for {} methods",
            n.len(),
            o.methods.len()
        )));
    }
    check_rss(o.rss, mem_available())?;
    let exec = Exec::new(&o.exec)?;
    if o.methods.iter().any(|m| m.execs()) {
        // Once, outside any timing, the way the methods run it.
        check_exec(&o.exec)?;
    }
    if let Some(cpu) = o.worker_cpu {
        labkit::affinity::check_allowed(&[cpu]).map_err(|e| Error {
            message: format!("--worker-cpu: {}", e.message),
            ..e
        })?;
    }
    if let Some(cpus) = &o.cpus {
        labkit::affinity::confine(cpus)?;
    }
    // SIGINT, SIGTERM, SIGHUP: finish the loop under way (it reaps its
    // children), then stop.
    labkit::relay::install(0);
    let region = labkit::memory::Touched::new(o.rss as usize).map_err(|e| {
        Error::failed(format!(
            "cannot map {} to touch: {}",
            format_size(o.rss),
            labkit::error::describe_errno(e)
        ))
    })?;
    let vm_rss_kib = vm_rss_kib();
    let setup = Setup { exec: &exec, worker_cpu: o.worker_cpu };
    let mut runs = Vec::new();
    for (i, &method) in o.methods.iter().enumerate() {
        if let Some(sig) = labkit::relay::pending() {
            return Err(labkit::relay::interrupted(
                sig,
                &format!("stopped after {i} of {} methods", o.methods.len()),
            ));
        }
        let iterations = match &o.counts {
            Some(n) => n[i],
            None => calibrate(method, o.budget, &setup)?,
        };
        let us = run_method(method, iterations, &setup)?;
        runs.push(Run { method, label: method.label(), iterations, us });
    }
    drop(region);
    Ok(Report {
        touched_bytes: o.rss,
        vm_rss_kib,
        cpus: o.cpus.as_deref().map(labkit::affinity::format_list),
        worker_cpu: o.worker_cpu,
        budget_s: o.counts.is_none().then_some(o.budget),
        exec: o.exec.clone(),
        runs,
    })
}

/// What the loops need besides the method.
struct Setup<'a> {
    exec: &'a Exec,
    worker_cpu: Option<usize>,
}

/// Run `method` `n` times; microseconds per create+destroy.
fn run_method(method: Method, n: u64, setup: &Setup<'_>) -> Result<f64> {
    let start = Instant::now();
    match method {
        Method::ForkWait => methods::fork_wait(n)?,
        Method::Vfork => methods::vfork_exit(n)?,
        Method::ForkExec => methods::fork_exec(n, setup.exec)?,
        Method::PosixSpawn => methods::posix_spawn(n, setup.exec)?,
        Method::Command => methods::command(n, setup.exec)?,
        Method::Pthread => methods::pthread_join(n)?,
        Method::ThreadRlimit => {
            methods::thread_join(n, Some(labkit::limits::pthread_default_stack()))?
        }
        Method::Thread => methods::thread_join(n, None)?,
        Method::Thread64k => methods::thread_join(n, Some(64 << 10))?,
        Method::Pool => return methods::pool(n, setup.worker_cpu),
        #[cfg(feature = "run")]
        Method::Tokio => return methods::tokio_tasks(n),
        #[cfg(not(feature = "run"))]
        Method::Tokio => {
            return Err(Error::failed(
                "the tokio method needs spawn-methods' `run` feature (tokio)",
            ));
        }
    }
    Ok(start.elapsed().as_secs_f64() * 1e6 / n as f64)
}

// ANCHOR: calibrate
/// How many iterations make one loop last about `budget` seconds, found
/// much as lmbench does: time 1, 4, 16, ... iterations (the first batch is
/// a warm-up and never decides) until a batch of at least 16 takes a tenth
/// of the budget, or any batch takes the whole budget. The faster of the
/// last two batches sets the count, so one preempted batch on a busy
/// machine does not shrink it; at least 3.
fn calibrate(method: Method, budget: f64, setup: &Setup<'_>) -> Result<u64> {
    const MAX: u64 = 10_000_000;
    let (mut k, mut previous) = (1, f64::INFINITY);
    loop {
        let us = run_method(method, k, setup)?;
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

pub use labkit::memory::mem_available;

/// Refuse to touch more than the memory available: `--rss` above
/// `available` bytes is a usage error, not an out-of-memory kill.
pub fn check_rss(bytes: u64, available: Option<u64>) -> Result<()> {
    match available {
        Some(free) if bytes > free => Err(Error::usage(format!(
            "--rss {}: more than the memory available ({} MiB, MemAvailable in \
             /proc/meminfo); touching it would push this machine into swap or \
             the OOM killer",
            format_size(bytes),
            free >> 20
        ))),
        _ => Ok(()),
    }
}

/// `--exec` must start and exit 0: say why not, with the exec error or
/// the program's own last words.
pub fn check_exec(path: &Path) -> Result<()> {
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
        "{what}: the program must exit 0 when run with no arguments; it {}{}",
        labkit::children::ended(out.status),
        said.map_or(String::new(), |l| format!(": {}", l.trim()))
    )))
}

/// This process's VmRSS, KiB.
fn vm_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
            line.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rss_above_the_memory_available_is_a_usage_error() {
        assert!(check_rss(1 << 30, Some(2 << 30)).is_ok());
        assert!(check_rss(1 << 30, None).is_ok());
        let err = check_rss(64 << 30, Some(20 << 30)).unwrap_err();
        assert_eq!(err.code, labkit::ExitCode::Usage);
        assert!(
            err.to_string()
                .contains("--rss 64G: more than the memory available (20480 MiB")
        );
    }

    #[test]
    fn options_say_themselves_as_the_programs_flags() {
        let o = Options {
            methods: vec![Method::ForkWait, Method::Pool],
            counts: Some(vec![4, 5]),
            budget: 0.1,
            rss: 8 << 20,
            cpus: Some(vec![0]),
            worker_cpu: Some(1),
            exec: "/bin/true".into(),
        };
        let text = |o: &Options| labtest::words(o.args());
        assert_eq!(
            text(&o),
            [
                "--method",
                "fork-wait,pool",
                "--iterations",
                "4,5",
                "--rss",
                "8388608",
                "--exec",
                "/bin/true",
                "--cpus",
                "0",
                "--worker-cpu",
                "1",
                "--json"
            ]
        );
        let o = Options { counts: None, cpus: None, worker_cpu: None, ..o };
        assert_eq!(text(&o)[2..4], ["--budget", "0.1"]);
        assert_eq!(text(&o).len(), 9);
    }

    #[test]
    fn every_method_creates_and_destroys() {
        let exec = Exec::new(Path::new("/bin/true")).unwrap();
        let setup = Setup { exec: &exec, worker_cpu: None };
        for m in Method::ALL {
            let us = run_method(m, 3, &setup).unwrap();
            assert!(us > 0.0, "{m:?}: {us}");
        }
    }
}
