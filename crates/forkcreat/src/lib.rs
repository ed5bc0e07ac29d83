//! `forkcreat`: create and destroy N processes, one after another.
//!
//! Reproduces `forkcreat.c` from the article "多线程还是多进程"
//! (book References: zhou-2010, section four: 100,000 creations on a Celeron
//! 1.5 GHz, about 0.18 ms per process) and the fork/exit/wait loop of the
//! 2004 lecture notes (book References: lecture-2004, iter = 2000). Each child
//! leaves at once with `_exit(0)`; the parent reaps it.
//!
//! Two ways to reap, as the two sources do:
//! - [`Reap::Wait`] (the lecture): `waitpid` each child before the next
//!   `fork`, so at most one child exists at a time;
//! - [`Reap::Sigchld`] (the article): a `SIGCHLD` handler reaps whatever has
//!   ended, asynchronously, so unreaped children (zombies) can pile up and
//!   a later `fork` can fail with `EAGAIN`.
//!
//! What it does differently, on purpose: a failed `fork` is counted with its
//! errno and the loop goes on (the article counts failures too), and at the
//! end every child is reaped (the handler is then blocked and the rest are
//! waited for), `/proc` is checked for anything left, and the exit status
//! is 1 if any `fork` failed. SIGINT, SIGTERM or SIGHUP end the loop: every
//! child made is reaped and the exit status is 128 + N. The children
//! `_exit` at once, so they get no `PR_SET_PDEATHSIG` (see
//! [`labkit::relay`]): it would add a system call to the lifetime measured.

use std::ffi::OsString;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use clap::Parser;
use labkit::cli::LoopEnd;
use labkit::error::describe_errno;
use nix::errno::Errno;
use nix::sys::signal::{
    SaFlags, SigAction, SigHandler, SigSet, SigmaskHow, Signal, sigaction,
    sigprocmask,
};
use nix::unistd::{ForkResult, Pid, fork};
use serde::{Deserialize, Serialize};

/// How the parent reaps its children.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Reap {
    /// waitpid each child before the next fork (the lecture's loop)
    Wait,
    /// a SIGCHLD handler reaps asynchronously (the article's forkcreat.c)
    Sigchld,
}

impl Reap {
    /// Its `--reap` spelling: `wait`, `sigchld`.
    pub fn name(self) -> String {
        labkit::cli::spelling(&self)
    }
}

/// Create and destroy N processes one after another: fork, the child
/// _exits at once, the parent reaps it (the article's forkcreat.c, the
/// lecture's fork/wait loop). Exit status: 0 ok, 1 a fork failed, 2 bad
/// usage, 128+N on signal N (SIGINT, SIGTERM, SIGHUP: the loop stops and
/// every child is reaped).
#[derive(Parser, Clone, Debug, PartialEq)]
#[command(version)]
pub struct Options {
    /// Processes to create and destroy
    #[arg(short = 'n', long, default_value_t = 100_000,
          value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub iterations: u64,

    /// How the parent reaps: wait = waitpid each child before the next fork
    /// (the lecture); sigchld = a SIGCHLD handler reaps asynchronously (the
    /// article)
    #[arg(long, value_enum, default_value_t = Reap::Wait)]
    pub reap: Reap,

    /// Print one JSON object instead of the text report
    #[arg(long)]
    pub json: bool,
}

impl Options {
    /// The program's command line for these options, as a caller (the
    /// runner) starts it: `-n N --reap MODE [--json]`, the reap mode said
    /// even when it is the default.
    pub fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> =
            vec!["-n".into(), self.iterations.to_string().into()];
        args.extend(["--reap".into(), self.reap.name().into()]);
        if self.json {
            args.push("--json".into());
        }
        args
    }

    /// The C original's command line for the same run (`c/forkcreat.c`
    /// takes its words by position): `N MODE [--json]`.
    pub fn c_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> =
            vec![self.iterations.to_string().into(), self.reap.name().into()];
        if self.json {
            args.push("--json".into());
        }
        args
    }
}

/// What a run did, counted like the article counts it. `forkcreat.c
/// --json` prints the same object.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Report {
    pub iterations: u64,
    pub reap: Option<Reap>,
    pub created: u64,
    pub failed: u64,
    pub reaped: u64,
    /// Children that did not end with status 0 (killed from outside).
    pub bad_exits: u64,
    /// The most children created but not yet reaped, seen before a fork.
    pub peak_unreaped: u64,
    /// Children of this process still in `/proc` after the run (must be 0).
    pub left_behind: u64,
    /// elapsed_s, us_per_create and the first failed fork's error.
    #[serde(flatten)]
    pub end: LoopEnd,
    /// The SIGINT, SIGTERM or SIGHUP that stopped the loop early.
    #[serde(skip)]
    pub interrupted: Option<i32>,
}

impl Report {
    /// The article-style lines.
    pub fn text(&self) -> String {
        let counts = [
            ("created", self.created),
            ("failed", self.failed),
            ("reaped", self.reaped),
        ];
        let mut out = self.end.text(&counts, self.created, "process");
        if self.reap == Some(Reap::Sigchld) {
            out += &format!(
                "at most {} children were waiting to be reaped\n",
                self.peak_unreaped
            );
        }
        out
    }
}

/// Create and destroy `iterations` processes. Never fails as a whole: a
/// failed `fork` is counted in the report (the caller turns it into exit
/// status 1).
pub fn run(iterations: u64, reap: Reap) -> Report {
    let mut r = Report { iterations, reap: Some(reap), ..Report::default() };
    let mut first_error = None;
    // SIGINT, SIGTERM, SIGHUP end the loop; every child made is reaped.
    // The children _exit at once, so there is nothing to pass on and no
    // death signal to ask for: their lifetime is what is measured.
    labkit::relay::install(0);
    let start = Instant::now();
    match reap {
        Reap::Wait => wait_loop(&mut r, &mut first_error),
        Reap::Sigchld => sigchld_loop(&mut r, &mut first_error),
    }
    r.end.finish(start, r.created);
    r.end.first_error = first_error.map(describe_errno);
    r.left_behind = labkit::children::of_self().map_or(0, |(n, _)| n as u64);
    r.interrupted = labkit::relay::pending();
    r
}

fn wait_loop(r: &mut Report, first_error: &mut Option<Errno>) {
    // ANCHOR: wait
    for _ in 0..r.iterations {
        if labkit::relay::pending().is_some() {
            break;
        }
        // SAFETY: the child calls only _exit, which is async-signal-safe.
        match unsafe { fork() } {
            // SAFETY: in the child; _exit ends it at once.
            Ok(ForkResult::Child) => unsafe { libc::_exit(0) },
            Ok(ForkResult::Parent { child }) => {
                r.created += 1;
                reap_child(child, r);
            }
            Err(errno) => {
                r.failed += 1;
                first_error.get_or_insert(errno);
            }
        }
    }
    // ANCHOR_END: wait
}

/// Wait for `pid` (`-1`: any child) and count it; `false` when there was
/// none to wait for.
fn reap_child(pid: Pid, r: &mut Report) -> bool {
    let Ok(Some((status, _))) = labkit::children::wait4(pid.as_raw(), 0) else {
        return false; // ECHILD: none left (or someone else reaped it)
    };
    r.reaped += 1;
    if status.code() != Some(0) {
        r.bad_exits += 1;
    }
    true
}

/// Children the SIGCHLD handler has reaped, and how many of those did not
/// exit with status 0. Atomics, because a handler may touch nothing else.
static REAPED: AtomicU64 = AtomicU64::new(0);
static BAD_EXITS: AtomicU64 = AtomicU64::new(0);

// ANCHOR: handler
/// Reap every child that has ended; several may be behind one SIGCHLD.
extern "C" fn on_sigchld(_: libc::c_int) {
    // SAFETY: errno is thread-local; the handler must leave it as it was.
    let saved = unsafe { *libc::__errno_location() };
    let mut status = 0;
    // SAFETY: waitpid is async-signal-safe; `status` is a local.
    while unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) } > 0 {
        REAPED.fetch_add(1, Ordering::Relaxed);
        if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
            BAD_EXITS.fetch_add(1, Ordering::Relaxed);
        }
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
}
// ANCHOR_END: handler

fn sigchld_loop(r: &mut Report, first_error: &mut Option<Errno>) {
    REAPED.store(0, Ordering::Relaxed);
    BAD_EXITS.store(0, Ordering::Relaxed);
    // SA_RESTART: the parent's own calls are not cut short by the signal;
    // SA_NOCLDSTOP: only ended children matter.
    let action = SigAction::new(
        SigHandler::Handler(on_sigchld),
        SaFlags::SA_RESTART | SaFlags::SA_NOCLDSTOP,
        SigSet::empty(),
    );
    // SAFETY: the handler only calls waitpid and touches atomics and errno.
    let old = unsafe { sigaction(Signal::SIGCHLD, &action) };

    // ANCHOR: sigchld
    for _ in 0..r.iterations {
        if labkit::relay::pending().is_some() {
            break;
        }
        let unreaped = r.created - REAPED.load(Ordering::Relaxed);
        r.peak_unreaped = r.peak_unreaped.max(unreaped);
        // SAFETY: the child calls only _exit, which is async-signal-safe.
        match unsafe { fork() } {
            // SAFETY: in the child; _exit ends it at once.
            Ok(ForkResult::Child) => unsafe { libc::_exit(0) },
            Ok(ForkResult::Parent { .. }) => r.created += 1,
            Err(errno) => {
                r.failed += 1;
                first_error.get_or_insert(errno);
            }
        }
    }
    // ANCHOR_END: sigchld

    // The stragglers: block the handler so it cannot race us, then wait
    // for every child that is left.
    let mut block = SigSet::empty();
    block.add(Signal::SIGCHLD);
    let mut old_mask = SigSet::empty();
    let blocked =
        sigprocmask(SigmaskHow::SIG_BLOCK, Some(&block), Some(&mut old_mask))
            .is_ok();
    r.reaped = REAPED.load(Ordering::Relaxed);
    r.bad_exits = BAD_EXITS.load(Ordering::Relaxed);
    while reap_child(Pid::from_raw(-1), r) {}
    if let Ok(old) = old {
        // SAFETY: putting back the handler that was there before.
        let _ = unsafe { sigaction(Signal::SIGCHLD, &old) };
    }
    if blocked {
        let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&old_mask), None);
    }
}
