//! `thread`: the thread half of the fork-vs-thread experiment.
//!
//! Reproduces `thread.c` from the article "多线程还是多进程" (after Zhou Li
//! et al.; book References: zhou-2010): N threads each print `[j]hello linux`
//! COUNT times to stdout and to one shared log; the main thread joins them
//! all and says `Okay`.
//!
//! What it does differently, on purpose:
//! - Threads are made with `pthread_create` itself ([`labkit::pthread`]),
//!   like the C, rather than `std::thread`, whose extra per-thread signal
//!   stack made this program about a fifth slower than the C at 255
//!   threads of 100 lines. Without `--stack-size` the attributes are NULL,
//!   so the stack is glibc's default (the soft `RLIMIT_STACK`, 8 MiB unless
//!   `ulimit -s` changed it), exactly as in the article.
//! - Each thread buffers its own whole lines (as each `fork` child does)
//!   instead of sharing one locked stdio buffer. The buffers are made by
//!   the main thread, so that the smallest stack accepted, 16 KiB, holds a
//!   worker even in a debug build.
//! - A failing thread creation stops creation, every thread made so far is
//!   joined, and the failure is reported; the C program did not check, and
//!   crashed at 500 threads on its 32-bit machine.

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use clap::Parser;
use labkit::cli::{Report, Workload, open_log};
use labkit::error::{Error, Result, describe_errno};
use labkit::limits::{format_size, size_in};
use labkit::lines::{LineBuf, Sink, describe_failure, failure_status};
use labkit::pthread::{self, Attr, Start};
use nix::errno::Errno;

/// Start N threads that each print C lines to stdout and to a shared log
/// (the article's thread.c). Exit status: 0 ok, 1 failed, 2 bad usage.
#[derive(Parser, Debug, Clone, PartialEq, Eq)]
#[command(version)]
pub struct Options {
    /// Threads to start (the article's P_NUMBER)
    #[arg(short, long, default_value_t = 255,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub threads: u32,

    /// Stack of each thread, e.g. 1M or 65536 [default: pthread_create's,
    /// the soft RLIMIT_STACK: 8M unless `ulimit -s` changed it]
    #[arg(long, value_name = "BYTES", value_parser = size_in(16 << 10, 1 << 30))]
    pub stack_size: Option<u64>,

    /// What each worker prints, and where
    #[command(flatten)]
    pub work: Workload,
}

impl Options {
    /// The program's command line for these options: `--threads N`, then
    /// the workload's flags ([`Workload::args`]), then `--stack-size`, if
    /// set, in its shortest exact spelling ([`format_size`]: `1M`).
    pub fn args(&self) -> Vec<OsString> {
        let mut args = vec!["--threads".into(), self.threads.to_string().into()];
        args.extend(self.work.args());
        if let Some(bytes) = self.stack_size {
            args.extend(["--stack-size".into(), format_size(bytes).into()]);
        }
        args
    }

    /// The same run as `thread.c`'s positional command line:
    /// `P COUNT LOG [LINE_BYTES] [--json]` ([`Workload::c_args`]). The C
    /// takes no stack size: its threads get glibc's default whatever
    /// `stack_size` says.
    pub fn c_args(&self) -> Vec<OsString> {
        self.work.c_args(self.threads)
    }
}

/// What every thread reads: what to print, and each thread's own pair of
/// line buffers, which borrow the shared log (open for `'log`).
struct Job<'log> {
    text: Vec<u8>,
    count: u64,
    /// Two 4 KiB buffers per thread (stdout, log), made by the main thread.
    /// On the thread's own stack they do not fit the smallest stack,
    /// 16 KiB, in a debug build, and allocating them in the thread would
    /// make glibc reserve a 64 MiB malloc arena for it.
    buffers: Vec<Mutex<[LineBuf<'log>; 2]>>,
    /// The next unused pair.
    next: AtomicUsize,
}

/// Run `threads` threads, each with a stack of `stack_size` bytes, or
/// glibc's default stack when `None`.
pub fn run(
    threads: u32,
    stack_size: Option<u64>,
    work: &Workload,
) -> Result<Report> {
    let start = std::time::Instant::now();
    let log = open_log(&work.log)?;
    let pair = || Mutex::new([LineBuf::stdout(), LineBuf::new(log.as_fd())]);
    let mut buffers = Vec::new();
    buffers.try_reserve_exact(threads as usize).map_err(|_| {
        Error::failed(format!(
            "cannot allocate line buffers for {threads} threads ({} bytes); \
             no thread was started",
            threads as usize * std::mem::size_of::<[LineBuf; 2]>()
        ))
    })?;
    buffers.extend((0..threads).map(|_| pair()));
    let job = Job {
        text: work.text(),
        count: work.count,
        buffers,
        next: AtomicUsize::new(0),
    };
    let attr = match stack_size {
        None => Attr::default_stack(),
        Some(bytes) => Attr::stack_size(bytes as usize).map_err(|e| {
            Error::usage(format!("stack size {bytes}: {}", describe_errno(e)))
        })?,
    };
    let print = Start { run: print, data: &job };
    let mut ids = Vec::with_capacity(threads as usize);
    let mut spawn_error = None;

    // ANCHOR: create
    for _ in 0..threads {
        // SAFETY: `print` and `job` live until the end of this function,
        // and every thread made here is joined just below, before it.
        match unsafe { pthread::spawn(&attr, &print) } {
            Ok(id) => ids.push(id),
            Err(errno) => {
                spawn_error = Some(errno);
                break;
            }
        }
    }
    let created = ids.len();
    let failed: Vec<String> = ids
        .into_iter()
        .filter_map(|id| match pthread::join(id) {
            Ok(0) => None,
            Ok(status) => Some(describe_failure(status)),
            Err(errno) => Some(format!("pthread_join: {}", describe_errno(errno))),
        })
        .collect();
    // ANCHOR_END: create

    if let Some(errno) = spawn_error {
        return Err(Error::failed(format!(
            "created {created} of {threads} threads; pthread_create: {}; joined the {created}",
            describe_errno(errno)
        )));
    }
    if let Some(first) = failed.first() {
        return Err(Error::failed(format!(
            "{} of {threads} threads failed; first {first}",
            failed.len(),
        )));
    }
    Ok(Report {
        workers: threads,
        count: work.count,
        lines: u64::from(threads) * work.count,
        elapsed_s: start.elapsed().as_secs_f64(),
    })
}

// ANCHOR: print
/// One thread's work: the same lines a `fork` child prints. Returns 0, or
/// the failed write as a [`failure_status`] (errno, + 128 for the log).
fn print(job: &Job<'_>) -> i32 {
    let mine = &job.buffers[job.next.fetch_add(1, Ordering::Relaxed)];
    let mut pair = mine.lock().unwrap_or_else(|e| e.into_inner());
    let [out, file] = &mut *pair;
    let to = |sink| move |errno| (sink, errno);
    let mut lines = || -> Result<(), (Sink, Errno)> {
        for j in 0..job.count {
            out.line(j, &job.text).map_err(to(Sink::Stdout))?;
            file.line(j, &job.text).map_err(to(Sink::Log))?;
        }
        out.flush().map_err(to(Sink::Stdout))?;
        file.flush().map_err(to(Sink::Log))
    };
    match lines() {
        Ok(()) => 0,
        Err((sink, errno)) => failure_status(sink, errno),
    }
}
// ANCHOR_END: print
