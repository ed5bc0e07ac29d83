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

use labkit::error::{describe_errno, describe_io};
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
    pub elapsed_s: f64,
    /// Wall time per successful create+destroy, in microseconds.
    pub us_per_create: Option<f64>,
    /// The first failed create's error, e.g. "Cannot allocate memory
    /// (ENOMEM)".
    pub first_error: Option<String>,
}

impl Report {
    /// The article-style lines, like `forkcreat`'s.
    pub fn text(&self) -> String {
        let counts = [
            ("created", self.created),
            ("failed", self.failed),
            ("joined", self.joined),
        ];
        labkit::cli::loop_text(
            &counts,
            self.created,
            self.elapsed_s,
            self.us_per_create,
            "thread",
        )
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
    r.elapsed_s = start.elapsed().as_secs_f64();
    r.us_per_create = (r.created > 0).then(|| r.elapsed_s * 1e6 / r.created as f64);
    r
}

/// The empty thread body of pthreadcreat.c.
extern "C" fn f(arg: *mut libc::c_void) -> *mut libc::c_void {
    arg
}

fn pthread_loop(r: &mut Report) {
    // SAFETY: pthread_attr_t is plain data that pthread_attr_init sets up.
    let mut attr: libc::pthread_attr_t = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to our attribute object.
    unsafe { libc::pthread_attr_init(&mut attr) };
    // SAFETY: `attr` was initialised above; the call takes any size and
    // answers EINVAL for one below PTHREAD_STACK_MIN, reported just below.
    let rc =
        unsafe { libc::pthread_attr_setstacksize(&mut attr, r.stack_size as usize) };
    if rc != 0 {
        r.failed = r.iterations;
        r.first_error = Some(format!(
            "pthread_attr_setstacksize: {}",
            describe_errno(Errno::from_raw(rc))
        ));
        // SAFETY: destroying the object initialised above.
        unsafe { libc::pthread_attr_destroy(&mut attr) };
        return;
    }

    // ANCHOR: create
    for _ in 0..r.iterations {
        let mut tid: libc::pthread_t = 0;
        // SAFETY: `f` is a valid start routine that touches nothing; `tid`
        // and `attr` are valid for the call.
        match unsafe {
            libc::pthread_create(&mut tid, &attr, f, std::ptr::null_mut())
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
                r.first_error
                    .get_or_insert_with(|| describe_errno(Errno::from_raw(rc)));
            }
        }
    }
    // ANCHOR_END: create

    // SAFETY: destroying the object initialised above.
    unsafe { libc::pthread_attr_destroy(&mut attr) };
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
                r.first_error.get_or_insert_with(|| describe_io(&err));
            }
        }
    }
    // ANCHOR_END: std
}
