//! `pthreadcreat`: create and destroy N threads, one after another.
//!
//! Reproduces `pthreadcreat.c` from the article "多线程还是多进程"
//! (book References: zhou-2010, section four: 100,000 creations, threads 5-6
//! times faster than processes) and the pthread_create/join loop of the
//! 2004 lecture notes (book References: lecture-2004, iter = 2000): start an
//! empty thread, join it, again.
//!
//! It calls `pthread_create` and `pthread_join` itself, as the C program
//! does: `std::thread::spawn` does more per thread (its own `Arc`s, and a
//! signal stack mapped and unmapped for stack-overflow reports: eight more
//! system calls per thread under `strace -c`), which is worth knowing but
//! is not what the article timed. `--api std` times `std::thread` instead.
//!
//! What it does differently, on purpose:
//! - Each thread gets the stack `pthread_create` would give it (the soft
//!   `RLIMIT_STACK`, 8 MiB unless `ulimit -s` changed it) rather than
//!   Rust's 2 MiB, so the comparison with C is like for like;
//!   `--stack-size` sets it, like `pthread_attr_setstacksize`.
//! - A failed create is counted with its OS error and the loop goes on, as
//!   `forkcreat` counts failed forks; the exit status is then 1.

use std::time::Instant;

use labkit::cli::LoopEnd;
use labkit::error::{describe_errno, describe_io};
use labkit::pthread::Attr;
use nix::errno::Errno;
use serde::{Deserialize, Serialize};

/// Which thread API creates the threads.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// pthread_create + pthread_join, as pthreadcreat.c
    #[default]
    Pthread,
    /// std::thread::Builder::spawn + JoinHandle::join
    Std,
}

/// What a run did. `pthreadcreat.c --json` prints the same object.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Report {
    pub iterations: u64,
    pub api: Api,
    pub stack_size: u64,
    pub created: u64,
    pub failed: u64,
    pub joined: u64,
    /// Threads that panicked or could not be joined (cannot happen with an
    /// empty body; counted so that nothing goes unseen).
    pub panicked: u64,
    /// elapsed_s, us_per_create and the first failed create's error.
    #[serde(flatten)]
    pub end: LoopEnd,
}

impl Report {
    /// The article-style lines, like `forkcreat`'s.
    pub fn text(&self) -> String {
        let counts = [
            ("created", self.created),
            ("failed", self.failed),
            ("joined", self.joined),
        ];
        self.end.text(&counts, self.created, "thread")
    }
}

/// Create and join `iterations` empty threads with `stack_size`-byte
/// stacks. A failed create is counted, not returned.
pub fn run(iterations: u64, stack_size: u64, api: Api) -> Report {
    let mut r = Report { iterations, api, stack_size, ..Report::default() };
    let start = Instant::now();
    match api {
        Api::Pthread => pthread_loop(&mut r),
        Api::Std => std_loop(&mut r),
    }
    r.end.finish(start, r.created);
    r
}

/// The empty thread body of pthreadcreat.c.
extern "C" fn f(arg: *mut libc::c_void) -> *mut libc::c_void {
    arg
}

fn pthread_loop(r: &mut Report) {
    // EINVAL for a stack below PTHREAD_STACK_MIN: every create would fail.
    let attr = match Attr::stack_size(r.stack_size as usize) {
        Ok(attr) => attr,
        Err(errno) => {
            r.failed = r.iterations;
            r.end.first_error = Some(format!(
                "pthread_attr_setstacksize: {}",
                describe_errno(errno)
            ));
            return;
        }
    };
    let attr_ptr = attr.as_ptr(); // valid until `attr` is dropped at the end

    // ANCHOR: create
    for _ in 0..r.iterations {
        let mut tid: libc::pthread_t = 0;
        // SAFETY: `f` is a valid start routine that touches nothing; `tid`
        // is valid for the call and `attr_ptr` points into `attr`, which
        // lives, unmoved, to the end of this function.
        match unsafe {
            libc::pthread_create(&mut tid, attr_ptr, f, std::ptr::null_mut())
        } {
            0 => {
                r.created += 1;
                // SAFETY: `tid` is a joinable thread created just now and
                // joined exactly once.
                match unsafe { libc::pthread_join(tid, std::ptr::null_mut()) } {
                    0 => r.joined += 1,
                    _ => r.panicked += 1,
                }
            }
            rc => {
                r.failed += 1;
                r.end
                    .first_error
                    .get_or_insert_with(|| describe_errno(Errno::from_raw(rc)));
            }
        }
    }
    // ANCHOR_END: create
}

fn std_loop(r: &mut Report) {
    let stack_size = r.stack_size;
    // ANCHOR: std
    for _ in 0..r.iterations {
        let builder = std::thread::Builder::new().stack_size(stack_size as usize);
        match builder.spawn(|| {}) {
            Ok(thread) => {
                r.created += 1;
                match thread.join() {
                    Ok(()) => r.joined += 1,
                    Err(_) => r.panicked += 1,
                }
            }
            Err(err) => {
                r.failed += 1;
                r.end.first_error.get_or_insert_with(|| describe_io(&err));
            }
        }
    }
    // ANCHOR_END: std
}
