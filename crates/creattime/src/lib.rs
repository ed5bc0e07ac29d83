//! `creattime`: how long does the create call alone take?
//!
//! Reproduces Gergely Czuczy's test from the 2004 mailing-list post "Linux
//! 2.4 VS 2.6 fork VS thread creation time test"
//! (book References: list-2004): time only the `fork()` call, SAMPLES times,
//! each child leaving at once with `_exit(0)`; then time only the
//! thread-create call, SAMPLES times, each thread ending at once; print
//! failures, average and total per kind and the fork/thread ratio.
//!
//! What it does differently, on purpose:
//! - The original never reaped its children or joined its threads (the
//!   post saw "a lot of defunct processes" and a limit near 4K children).
//!   This one leaves them just as long, counts the zombies in `/proc`
//!   after the fork test, then reaps every child and joins every thread
//!   before it exits.
//! - `Instant` (the monotonic clock) instead of `gettimeofday`, and no
//!   `\r` progress line on stdout between samples.
//! - The thread test times `pthread_create` itself, through
//!   [`labkit::pthread`], as the C does: `std::thread::spawn` does more per
//!   thread (a signal stack, its handles), which is not what the post
//!   timed. Threads get `pthread_create`'s default stack (the soft
//!   `RLIMIT_STACK`) unless `--stack-size` says otherwise.
//! - SIGINT, SIGTERM or SIGHUP end both loops; every child is reaped, every
//!   thread joined, and the exit status is 128 + N. The children `_exit` at
//!   once, so they get no `PR_SET_PDEATHSIG` ([`labkit::relay`]).

use std::ffi::OsString;
use std::time::{Duration, Instant};

use clap::Parser;
use labkit::error::describe_errno;
use labkit::limits::size_in;
use labkit::pthread::{self, Attr, Start};
use nix::unistd::{ForkResult, Pid, fork};
use serde::{Deserialize, Serialize};

/// Time only the fork() call and only the thread-create call, SAMPLES times
/// each; children _exit and threads end at once (the 2004 mailing-list
/// test). Everything is reaped and joined before exit. Exit status: 0 ok,
/// 1 a create call failed, 2 bad usage, 128+N on signal N (SIGINT,
/// SIGTERM, SIGHUP: the loops stop, every child is reaped, every thread
/// joined).
#[derive(Parser, Clone, Debug, PartialEq)]
#[command(version)]
pub struct Options {
    /// Samples of each kind (the post used 20, 128 and 255)
    #[arg(value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub samples: u64,

    /// Stack of each thread, e.g. 64K or 8M [default: the soft
    /// RLIMIT_STACK, as pthread_create uses; 8M unless `ulimit -s` changed it]
    #[arg(long, value_name = "BYTES", value_parser = size_in(16 << 10, 1 << 40))]
    pub stack_size: Option<u64>,

    /// Print one JSON object instead of the original's lines
    #[arg(long)]
    pub json: bool,
}

impl Options {
    /// The program's command line for these options, as a caller (the
    /// runner) starts it: `SAMPLES [--stack-size BYTES] [--json]`.
    pub fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![self.samples.to_string().into()];
        if let Some(bytes) = self.stack_size {
            args.extend(["--stack-size".into(), bytes.to_string().into()]);
        }
        if self.json {
            args.push("--json".into());
        }
        args
    }

    /// The C original's command line for the same run (`c/creattime.c`):
    /// `SAMPLES [--json]`.
    ///
    /// # Panics
    ///
    /// If the options set a stack size: the C program passes a NULL attr.
    pub fn c_args(&self) -> Vec<OsString> {
        assert!(
            self.stack_size.is_none(),
            "creattime.c takes no --stack-size: {self:?}"
        );
        self.args()
    }
}

/// One kind of creation, as the original reports it.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Kind {
    pub failures: u64,
    pub successes: u64,
    /// Milliseconds spent in the create call, summed over the successes
    /// and the failures (as the original sums them).
    pub total_ms: f64,
    /// `total_ms` over the successes (the original's "average").
    pub average_ms: Option<f64>,
    pub first_error: Option<String>,
}

impl Kind {
    fn finish(&mut self) {
        self.average_ms =
            (self.successes > 0).then(|| self.total_ms / self.successes as f64);
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Report {
    pub samples: u64,
    pub fork: Kind,
    pub thread: Kind,
    pub average_ratio: Option<f64>,
    pub total_ratio: Option<f64>,
    /// Children that were zombies (ended, not yet reaped) just before the
    /// reaping, out of `fork.successes`.
    pub zombies_before_reaping: u64,
    pub reaped: u64,
    pub joined: u64,
    /// Children of this process still in `/proc` at the end (must be 0).
    pub left_behind: u64,
    /// The SIGINT, SIGTERM or SIGHUP that stopped the loops early.
    #[serde(skip)]
    pub interrupted: Option<i32>,
}

impl Report {
    /// The original's output, line for line (with "Average" spelt right).
    pub fn text(&self) -> String {
        let ms = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.6}"));
        let ratio =
            |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.6}"));
        format!(
            "Fork failures: {} (success: {})\n\
             Average fork time: {} msecs\n\
             Total fork time: {:.6} msecs\n\
             Thread failures: {} (success: {})\n\
             Average thread time: {} msecs\n\
             Total thread time: {:.6} msecs\n\
             Average fork/thread ratio: {}\n\
             Total fork/thread ratio: {}\n\
             Zombies before reaping: {} of {} children (reaped {}, joined {} threads)\n",
            self.fork.failures,
            self.fork.successes,
            ms(self.fork.average_ms),
            self.fork.total_ms,
            self.thread.failures,
            self.thread.successes,
            ms(self.thread.average_ms),
            self.thread.total_ms,
            ratio(self.average_ratio),
            ratio(self.total_ratio),
            self.zombies_before_reaping,
            self.fork.successes,
            self.reaped,
            self.joined,
        )
    }
}

/// The post's thread body: end at once.
fn threadfunc(_: &()) -> i32 {
    0
}

/// Run the test with `samples` of each kind; threads get `attr`'s stack.
pub fn run(samples: u64, attr: &Attr) -> Report {
    let mut r = Report { samples, ..Report::default() };
    let mut children: Vec<Pid> = Vec::with_capacity(samples as usize);
    // SIGINT, SIGTERM, SIGHUP end both loops; every child is reaped and
    // every thread joined. The children _exit at once: nothing to pass on.
    labkit::relay::install(0);

    // ANCHOR: fork
    for _ in 0..samples {
        if labkit::relay::pending().is_some() {
            break;
        }
        let begin = Instant::now();
        // SAFETY: the child runs Instant::elapsed (clock_gettime:
        // async-signal-safe, no allocation) and then only _exit.
        let result = unsafe { fork() };
        let took = begin.elapsed();
        match result {
            // SAFETY: in the child; _exit ends it at once.
            Ok(ForkResult::Child) => unsafe { libc::_exit(0) },
            Ok(ForkResult::Parent { child }) => {
                r.fork.successes += 1;
                children.push(child);
            }
            Err(errno) => {
                r.fork.failures += 1;
                r.fork.first_error.get_or_insert_with(|| describe_errno(errno));
            }
        }
        r.fork.total_ms += took.as_secs_f64() * 1e3;
        std::thread::sleep(Duration::from_micros(1)); // the original's usleep(1)
    }
    // ANCHOR_END: fork

    std::thread::sleep(Duration::from_millis(10)); // usleep(10000)
    r.zombies_before_reaping =
        labkit::children::of_self().map_or(0, |(_, zombies)| zombies as u64);

    let start = Start { run: threadfunc, data: &() };
    let mut threads = Vec::with_capacity(samples as usize);
    // ANCHOR: thread
    for _ in 0..samples {
        if labkit::relay::pending().is_some() {
            break;
        }
        let begin = Instant::now();
        // SAFETY: `start` borrows only a static unit and lives to the end
        // of this function; every thread made here is joined below.
        let result = unsafe { pthread::spawn(attr, &start) };
        let took = begin.elapsed();
        match result {
            Ok(id) => {
                r.thread.successes += 1;
                threads.push(id);
            }
            Err(errno) => {
                r.thread.failures += 1;
                r.thread.first_error.get_or_insert_with(|| describe_errno(errno));
            }
        }
        r.thread.total_ms += took.as_secs_f64() * 1e3;
        std::thread::sleep(Duration::from_micros(1));
    }
    // ANCHOR_END: thread

    // What the original left to exit(): reap and join everything.
    for pid in children {
        if labkit::children::wait4(pid.as_raw(), 0).is_ok_and(|s| s.is_some()) {
            r.reaped += 1;
        }
    }
    for id in threads {
        if pthread::join(id).is_ok() {
            r.joined += 1;
        }
    }
    r.fork.finish();
    r.thread.finish();
    r.average_ratio = r.fork.average_ms.zip(r.thread.average_ms).map(|(f, t)| f / t);
    r.total_ratio =
        (r.thread.total_ms > 0.0).then(|| r.fork.total_ms / r.thread.total_ms);
    r.left_behind = labkit::children::of_self().map_or(0, |(n, _)| n as u64);
    r.interrupted = labkit::relay::pending();
    r
}
