//! `fork`: the process half of the fork-vs-thread experiment.
//!
//! Reproduces `fork.c` from the article "多线程还是多进程" (after Zhou Li et
//! al., "Linux系统下多线程与多进程性能分析"; `shared/seeds/000_*.txt`): the
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
//! - A child that cannot write exits with the errno as its status, so the
//!   parent can say why.

use std::fs::File;

use labkit::cli::{Report, Workload, open_log};
use labkit::error::{Error, Result, describe_errno};
use labkit::lines::LineBuf;
use nix::errno::Errno;
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork};

pub fn run(procs: u32, work: &Workload) -> Result<Report> {
    let start = std::time::Instant::now();
    let log = open_log(&work.log)?;
    let text = work.text();
    let mut children: Vec<Pid> = Vec::with_capacity(procs as usize);
    let mut fork_error = None;

    // ANCHOR: create
    for _ in 0..procs {
        // SAFETY: this process has one thread, and the child runs only
        // `child`, which calls write(2) and _exit(2), both
        // async-signal-safe, and never returns.
        match unsafe { fork() } {
            Ok(ForkResult::Child) => child(&log, &text, work.count),
            Ok(ForkResult::Parent { child }) => children.push(child),
            Err(errno) => {
                fork_error = Some(errno);
                break;
            }
        }
    }
    let failed: Vec<String> = children.iter().filter_map(|&pid| reap(pid)).collect();
    // ANCHOR_END: create

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
    let mut out = LineBuf::stdout();
    let mut file = LineBuf::new(log);
    let mut print = || -> Result<(), Errno> {
        for j in 0..count {
            out.line(j, text)?;
            file.line(j, text)?;
        }
        out.flush()?;
        file.flush()
    };
    let status = match print() {
        Ok(()) => 0,
        Err(errno) => errno as i32,
    };
    // SAFETY: _exit ends the process at once; nothing is left to run.
    unsafe { libc::_exit(status) }
}
// ANCHOR_END: child

/// Wait for `pid`; `None` if it ended well, else what went wrong.
fn reap(pid: Pid) -> Option<String> {
    loop {
        return match waitpid(pid, None) {
            Ok(WaitStatus::Exited(_, 0)) => None,
            Ok(WaitStatus::Exited(_, errno)) => Some(format!(
                "child {pid} could not write: {}",
                describe_errno(Errno::from_raw(errno))
            )),
            Ok(WaitStatus::Signaled(_, signal, _)) => {
                Some(format!("child {pid} was killed by {signal}"))
            }
            Ok(other) => Some(format!("child {pid}: unexpected status {other:?}")),
            Err(Errno::EINTR) => continue,
            Err(errno) => Some(format!("waitpid({pid}): {}", describe_errno(errno))),
        };
    }
}
