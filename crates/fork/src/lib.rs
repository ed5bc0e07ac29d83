//! `fork`: the process half of the fork-vs-thread experiment.
//!
//! Reproduces `fork.c` from the article "多线程还是多进程" (after Zhou Li et
//! al., "Linux系统下多线程与多进程性能分析"; book References: zhou-2010): the
//! parent opens a log, forks P children, each child prints `[j]hello linux`
//! COUNT times to stdout and to the log, and the parent waits for them all
//! and says `Okay`.
//!
//! What it does differently, on purpose:
//! - Lines are buffered in a [`LineBuf`] that flushes only whole lines, at
//!   most `PIPE_BUF` bytes per `write`; the C program's stdio flushes in the
//!   middle of lines, and 255 children appending to one file tear each
//!   other's lines.
//! - A failing `fork` stops creation, every child made so far is reaped, and
//!   the failure is reported; the C program did not check.
//! - A child that cannot write exits with the errno as its status (plus
//!   128 if the log failed rather than stdout), so the parent can say what
//!   failed and why.
//! - SIGINT, SIGTERM and SIGHUP are passed on to the children, which are
//!   reaped; the program then exits 128 + N. Each child also asks for
//!   `PR_SET_PDEATHSIG`, so it dies with a parent killed outright
//!   ([`labkit::relay`] says why).

use std::ffi::OsString;
use std::fs::File;
use std::os::fd::AsFd;

use clap::Parser;
use labkit::cli::{Report, Workload, open_log};
use labkit::error::{Error, Result, describe_errno, describe_io};
use labkit::lines::{LineBuf, Sink, describe_failure, failure_status};
use labkit::relay;
use nix::errno::Errno;
use nix::unistd::{ForkResult, Pid, fork};

/// Fork N children that each print C lines to stdout and to a shared log
/// (the article's fork.c). Exit status: 0 ok, 1 failed, 2 bad usage,
/// 128+N on signal N (SIGINT, SIGTERM, SIGHUP: passed on to the children,
/// which are reaped).
#[derive(Parser, Debug, Clone, PartialEq, Eq)]
#[command(version)]
pub struct Options {
    /// Child processes to fork (the article's P_NUMBER)
    #[arg(short, long, default_value_t = 255,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub procs: u32,

    /// What each worker prints, and where
    #[command(flatten)]
    pub work: Workload,
}

impl Options {
    /// The program's command line for these options: `--procs N`, then
    /// the workload's flags ([`Workload::args`]).
    pub fn args(&self) -> Vec<OsString> {
        let mut args = vec!["--procs".into(), self.procs.to_string().into()];
        args.extend(self.work.args());
        args
    }

    /// The same run as `fork.c`'s positional command line:
    /// `P COUNT LOG [LINE_BYTES] [--json]` ([`Workload::c_args`]).
    pub fn c_args(&self) -> Vec<OsString> {
        self.work.c_args(self.procs)
    }
}

/// Fork `procs` children that each print `work`'s lines, and reap them all.
pub fn run(procs: u32, work: &Workload) -> Result<Report> {
    let start = std::time::Instant::now();
    let log = open_log(&work.log)?;
    let text = work.text();
    let mut children: Vec<Pid> = Vec::with_capacity(procs as usize);
    let mut fork_error = None;
    // SIGINT, SIGTERM, SIGHUP: passed on to the children (see labkit::relay).
    relay::install(procs as usize);

    // ANCHOR: create
    for _ in 0..procs {
        if relay::pending().is_some() {
            break;
        }
        // SAFETY: the child runs only `child`, which calls prctl, getppid,
        // write(2) and _exit(2), all async-signal-safe, allocates nothing
        // (the line buffer is a fixed array, the text was built before the
        // fork) and never returns: sound even with the second thread that
        // labkit::limits::enough_stack starts under a tiny RLIMIT_STACK.
        match unsafe { fork() } {
            Ok(ForkResult::Child) => child(&log, &text, work.count),
            Ok(ForkResult::Parent { child }) => {
                relay::add(child.as_raw());
                children.push(child);
            }
            Err(errno) => {
                fork_error = Some(errno);
                break;
            }
        }
    }
    let failed: Vec<String> =
        children.iter().enumerate().filter_map(|(i, &pid)| reap(i, pid)).collect();
    // ANCHOR_END: create

    if let Some(sig) = relay::pending() {
        return Err(relay::interrupted(
            sig,
            &format!(
                "passed it on to the {} children and reaped them",
                children.len()
            ),
        ));
    }

    if let Some(errno) = fork_error {
        return Err(Error::failed(format!(
            "created {} of {procs} processes; fork: {}; waited for the {}",
            children.len(),
            describe_errno(errno),
            children.len()
        )));
    }
    if let Some(first) = failed.first() {
        return Err(Error::failed(format!(
            "{} of {procs} children failed; first: {first}",
            failed.len()
        )));
    }
    Ok(Report {
        workers: procs,
        count: work.count,
        lines: u64::from(procs) * work.count,
        elapsed_s: start.elapsed().as_secs_f64(),
    })
}

// ANCHOR: child
/// The child's whole life: print, flush, leave with `_exit` (not `exit`,
/// which would run the parent's atexit handlers and flush its stdio).
fn child(log: &File, text: &[u8], count: u64) -> ! {
    relay::in_child();
    let mut out = LineBuf::stdout();
    let mut file = LineBuf::new(log.as_fd());
    let to = |sink| move |errno| (sink, errno);
    let mut print = || -> Result<(), (Sink, Errno)> {
        for j in 0..count {
            out.line(j, text).map_err(to(Sink::Stdout))?;
            file.line(j, text).map_err(to(Sink::Log))?;
        }
        out.flush().map_err(to(Sink::Stdout))?;
        file.flush().map_err(to(Sink::Log))
    };
    let status = match print() {
        Ok(()) => 0,
        Err((sink, errno)) => failure_status(sink, errno),
    };
    // SAFETY: _exit ends the process at once; nothing is left to run.
    unsafe { libc::_exit(status) }
}
// ANCHOR_END: child

/// Wait for `pid`, registered in relay slot `slot`; `None` if it ended
/// well (or of the signal passed on to it), else what went wrong.
fn reap(slot: usize, pid: Pid) -> Option<String> {
    use std::os::unix::process::ExitStatusExt;
    // Its relay slot is cleared before it is reaped, and an EINTR passes
    // the signal on and waits again (labkit::relay::reap).
    let status = match relay::reap(slot, pid.as_raw()) {
        Ok(status) => status,
        Err(e) => return Some(format!("wait for child {pid}: {}", describe_io(&e))),
    };
    match (status.code(), status.signal()) {
        (Some(0), _) => None,
        (Some(code), _) => Some(format!("child {pid} {}", describe_failure(code))),
        (None, Some(_)) if relay::pending().is_some() => None,
        _ => Some(format!("child {pid} {}", labkit::children::ended(status))),
    }
}
