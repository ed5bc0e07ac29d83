//! `stacklimit`: how many threads (or processes) can this process make
//! before the system says no, and what does a thread do when it runs off
//! the end of its stack?
//!
//! Article 000 (book References: zhou-2010, section two) saw its `thread.c`
//! die with a segmentation fault at 500, 800 and 1000 threads: with 8 MiB
//! default stacks, a 3 GiB 32-bit user address space holds at most
//! 3 GiB / 8 MiB = 384 of them, and `ulimit -s 1024` made the runs pass.
//! The article only did the arithmetic; this program counts. It creates
//! idle workers, each blocked in `read` on one pipe, until a creation call
//! fails or `--max` is reached, then closes the pipe so every worker
//! returns, and joins (or reaps) them all before it reports.
//!
//! It sets no limit itself: the caller does (`prlimit --as=3221225472`,
//! `ulimit -s`, or the `lab run thread-limits` runner, which sets them in
//! the child between `fork` and `exec`). Reaching a limit is the result,
//! not a failure: the exit status is 0 whenever the count was made.
//!
//! SIGINT, SIGTERM and SIGHUP during `forks` are passed on to the children,
//! which are reaped; the program exits 128 + N. Each child asks for
//! `PR_SET_PDEATHSIG` too, so none outlives a parent killed outright
//! ([`labkit::relay`] says why). During `threads` the default action ends
//! the process and its threads with it.

mod options;

pub use options::{Options, Probe};

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::time::Instant;

use labkit::error::{Error, Result, describe_errno, describe_io};
use labkit::pthread::{self, Attr, Start};
use nix::errno::Errno;
use nix::unistd::{ForkResult, Pid, fork};
use serde::{Deserialize, Serialize};

/// How threads are made.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// `pthread_create`, as the article's C did
    Pthread,
    /// Rust's `std::thread::Builder` (which also maps a signal stack per
    /// thread and may give each thread its own malloc arena)
    Std,
}

/// What one count found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Count {
    /// `threads` or `forks`.
    pub kind: String,
    pub api: Option<Api>,
    /// Stack asked for, in bytes; `None` for glibc's default (the soft
    /// `RLIMIT_STACK`).
    pub stack_size: Option<u64>,
    pub max: u32,
    /// Workers created (all of them ran and were joined or reaped).
    pub created: u32,
    /// Why creation stopped: `null` when `max` was reached, otherwise the
    /// errno name (`EAGAIN`, `ENOMEM`, ...).
    pub stopped_by: Option<String>,
    /// The failing call and its error, in words.
    pub error: Option<String>,
    /// Peak virtual size of this process (`VmPeak`), KiB.
    pub vm_peak_kib: u64,
    /// Workers that did not end well (a thread's or child's status).
    pub bad_exits: u32,
    pub elapsed_s: f64,
}

impl Count {
    /// One line for people.
    pub fn summary(&self) -> String {
        let what = match (self.kind.as_str(), self.api) {
            ("threads", Some(Api::Std)) => "threads (std::thread)",
            ("threads", _) => "threads (pthread_create)",
            _ => "processes (fork)",
        };
        let stack = match (self.kind.as_str(), self.stack_size) {
            ("threads", Some(s)) => {
                format!(" with {} stacks", labkit::limits::format_size(s))
            }
            ("threads", None) => " with the default stack".to_string(),
            _ => String::new(),
        };
        let why = match &self.error {
            Some(e) => format!("stopped by {e}"),
            None => format!("stopped at --max {}", self.max),
        };
        format!(
            "created {} {what}{stack}; {why}; all {} ended{}",
            self.created,
            self.created,
            if self.bad_exits > 0 {
                format!(", {} of them badly", self.bad_exits)
            } else {
                String::new()
            }
        )
    }
}

/// A pipe whose read end every worker blocks on until the write end is
/// closed: the cheapest way to keep thousands of workers alive and idle.
fn gate() -> Result<(File, OwnedFd)> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| {
        Error::failed(format!("cannot create a pipe: {}", describe_errno(e)))
    })?;
    Ok((File::from(r), w))
}

/// Block until the gate's write end is closed everywhere. Only `read(2)`:
/// async-signal-safe, so a forked child may call it too.
fn wait_at(gate: i32) -> i32 {
    let mut byte = 0u8;
    loop {
        // SAFETY: a valid one-byte buffer; the fd stays open while any
        // worker waits on it.
        let n = unsafe { libc::read(gate, (&raw mut byte).cast(), 1) };
        if n == 0 {
            return 0;
        }
        if n < 0 && Errno::last() != Errno::EINTR {
            return Errno::last() as i32;
        }
    }
}

fn idle(gate: &File) -> i32 {
    wait_at(gate.as_raw_fd())
}

fn vm_peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmPeak:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Create up to `max` idle threads with `stack` (glibc's default when
/// `None`), then let them all go and join them.
pub fn threads(api: Api, stack: Option<u64>, max: u32) -> Result<Count> {
    let start = Instant::now();
    let (gate, opener) = gate()?;
    let (created, vm_peak_kib, bad_exits, error) = match api {
        // ANCHOR: pthread
        Api::Pthread => {
            let attr = match stack {
                None => Attr::default_stack(),
                Some(bytes) => Attr::stack_size(bytes as usize).map_err(|e| {
                    Error::usage(format!(
                        "stack size {bytes}: {}",
                        describe_errno(e)
                    ))
                })?,
            };
            let job = Start { run: idle, data: &gate };
            let mut ids = Vec::with_capacity(max as usize);
            let mut error = None;
            while ids.len() < max as usize {
                // SAFETY: `job` and `gate` outlive every thread: all are
                // joined below, before this block ends.
                match unsafe { pthread::spawn(&attr, &job) } {
                    Ok(id) => ids.push(id),
                    Err(errno) => {
                        error = Some((errno, "pthread_create"));
                        break;
                    }
                }
            }
            let (created, peak) = (ids.len() as u32, vm_peak_kib());
            drop(opener); // every read() now returns 0: the threads end
            let bad = ids.into_iter().map(pthread::join).filter(|r| *r != Ok(0));
            (created, peak, bad.count() as u32, error)
        }
        // ANCHOR_END: pthread
        Api::Std => {
            let size = stack.unwrap_or_else(labkit::limits::pthread_default_stack);
            std::thread::scope(|scope| {
                let mut handles = Vec::with_capacity(max as usize);
                let mut error = None;
                while handles.len() < max as usize {
                    let builder =
                        std::thread::Builder::new().stack_size(size as usize);
                    match builder.spawn_scoped(scope, || idle(&gate)) {
                        Ok(h) => handles.push(h),
                        Err(e) => {
                            let raw = e.raw_os_error().unwrap_or(0);
                            error =
                                Some((Errno::from_raw(raw), "std::thread spawn"));
                            break;
                        }
                    }
                }
                let (created, peak) = (handles.len() as u32, vm_peak_kib());
                drop(opener);
                let bad = handles
                    .into_iter()
                    .map(|h| h.join())
                    .filter(|r| !matches!(r, Ok(0)));
                (created, peak, bad.count() as u32, error)
            })
        }
    };
    Ok(Count {
        kind: "threads".into(),
        api: Some(api),
        stack_size: stack,
        max,
        created,
        stopped_by: error.map(|(e, _)| format!("{e:?}")),
        error: error.map(|(e, call)| format!("{call}: {}", describe_errno(e))),
        vm_peak_kib,
        bad_exits,
        elapsed_s: start.elapsed().as_secs_f64(),
    })
}

/// Fork up to `max` idle children, then let them all go and reap them.
pub fn forks(max: u32) -> Result<Count> {
    let start = Instant::now();
    let (gate, opener) = gate()?;
    let mut children: Vec<Pid> = Vec::with_capacity(max as usize);
    let mut error = None;
    // SIGINT, SIGTERM, SIGHUP: passed on to the children (labkit::relay).
    labkit::relay::install(max as usize);
    // ANCHOR: forks
    while children.len() < max as usize && labkit::relay::pending().is_none() {
        // SAFETY: the child only asks for its death signal (prctl,
        // getppid), closes its copy of the write end, blocks in read(2)
        // and leaves with _exit(2): all async-signal-safe, no allocation,
        // so it is sound whatever other thread the parent has (the one
        // enough_stack starts under a tiny RLIMIT_STACK).
        match unsafe { fork() } {
            // SAFETY: as above: async-signal-safe calls only, then _exit.
            Ok(ForkResult::Child) => unsafe {
                labkit::relay::in_child();
                libc::close(opener.as_raw_fd());
                libc::_exit(wait_at(gate.as_raw_fd()))
            },
            Ok(ForkResult::Parent { child }) => {
                labkit::relay::add(child.as_raw());
                children.push(child);
            }
            Err(errno) => {
                error = Some(errno);
                break;
            }
        }
    }
    // ANCHOR_END: forks
    let vm_peak_kib = vm_peak_kib();
    drop(opener);
    let mut bad_exits = 0;
    for (i, pid) in children.iter().enumerate() {
        // A child killed by the signal relayed to it is not a bad exit.
        // Its relay slot is cleared before it is reaped (relay::reap).
        let status = labkit::relay::reap(i, pid.as_raw()).ok();
        match status.map(|s| (s.code(), s.signal())) {
            Some((Some(0), _)) => {}
            Some((None, Some(_))) if labkit::relay::pending().is_some() => {}
            _ => bad_exits += 1,
        }
    }
    if let Some(sig) = labkit::relay::pending() {
        return Err(labkit::relay::interrupted(
            sig,
            &format!(
                "passed it on to the {} children and reaped them",
                children.len()
            ),
        ));
    }
    Ok(Count {
        kind: "forks".into(),
        api: None,
        stack_size: None,
        max,
        created: children.len() as u32,
        stopped_by: error.map(|e| format!("{e:?}")),
        error: error.map(|e| format!("fork: {}", describe_errno(e))),
        vm_peak_kib,
        bad_exits,
        elapsed_s: start.elapsed().as_secs_f64(),
    })
}

// ANCHOR: overflow
/// Recurse, 1 KiB of stack per call, until the stack runs out.
#[inline(never)]
fn deeper(depth: u64) -> u64 {
    let mut frame = [0u8; 1024];
    std::hint::black_box(&mut frame);
    if depth == u64::MAX { 0 } else { deeper(depth + 1) + u64::from(frame[0]) }
}
// ANCHOR_END: overflow

fn overflow_thread(_: &()) -> i32 {
    deeper(0) as i32
}

/// Run one thread with `stack` bytes of stack that recurses forever. It
/// does not come back: the process dies of the overflow (`SIGSEGV` on the
/// guard page for a `pthread_create` thread; Rust's message and `SIGABRT`
/// for a `std::thread`). Run it in a child process. The crash is the
/// point, so it first sets `RLIMIT_CORE` to 0: no core file is left in the
/// current directory.
pub fn overflow(api: Api, stack: u64) -> Result<()> {
    let no_core = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: a valid pointer to a local rlimit; lowering a limit always
    // succeeds.
    unsafe { libc::setrlimit(libc::RLIMIT_CORE, &no_core) };
    eprintln!(
        "stacklimit: overflowing a {} stack in a {} thread",
        labkit::limits::format_size(stack),
        if api == Api::Std { "std::thread" } else { "pthread_create" }
    );
    match api {
        Api::Pthread => {
            let attr = Attr::stack_size(stack as usize).map_err(|e| {
                Error::usage(format!("stack size {stack}: {}", describe_errno(e)))
            })?;
            let start = Start { run: overflow_thread, data: &() };
            // SAFETY: `start` lives until the join below.
            let id = unsafe { pthread::spawn(&attr, &start) }.map_err(|e| {
                Error::failed(format!("pthread_create: {}", describe_errno(e)))
            })?;
            let _ = pthread::join(id);
        }
        Api::Std => {
            let handle = std::thread::Builder::new()
                .stack_size(stack as usize)
                .spawn(|| deeper(0))
                .map_err(|e| Error::failed(format!("spawn: {}", describe_io(&e))))?;
            let _ = handle.join();
        }
    }
    Err(Error::failed("the thread came back: its stack never overflowed"))
}
