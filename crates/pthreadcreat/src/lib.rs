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

use std::ffi::OsString;
use std::time::Instant;

use clap::Parser;
use labkit::cli::LoopEnd;
use labkit::error::{describe_errno, describe_io};
use labkit::limits::size_in;
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

impl Api {
    /// Its `--api` spelling: `pthread`, `std`.
    pub fn name(self) -> String {
        labkit::cli::spelling(&self)
    }
}

/// Create and destroy N threads one after another: spawn an empty thread,
/// join it (the article's pthreadcreat.c, the lecture's create/join loop).
/// Exit status: 0 ok, 1 a create failed, 2 bad usage.
#[derive(Parser, Clone, Debug, PartialEq)]
#[command(version)]
pub struct Options {
    /// Threads to create and destroy
    #[arg(short = 'n', long, default_value_t = 100_000,
          value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub iterations: u64,

    /// Stack of each thread, e.g. 64K or 8M [default: the soft
    /// RLIMIT_STACK, as pthread_create uses; 8M unless `ulimit -s` changed it]
    #[arg(long, value_name = "BYTES", value_parser = size_in(16 << 10, 1 << 40))]
    pub stack_size: Option<u64>,

    /// The thread API: pthread = pthread_create/pthread_join as in the C
    /// program; std = std::thread spawn/join
    #[arg(long, value_enum, default_value_t = Api::Pthread)]
    pub api: Api,

    /// Print one JSON object instead of the text report
    #[arg(long)]
    pub json: bool,
}

impl Options {
    /// The program's command line for these options, as a caller (the
    /// runner) starts it: `-n N [--stack-size BYTES] [--api API] [--json]`,
    /// the stack and the API said only when not the default.
    pub fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> =
            vec!["-n".into(), self.iterations.to_string().into()];
        if let Some(bytes) = self.stack_size {
            args.extend(["--stack-size".into(), bytes.to_string().into()]);
        }
        if self.api != Api::Pthread {
            args.extend(["--api".into(), self.api.name().into()]);
        }
        if self.json {
            args.push("--json".into());
        }
        args
    }

    /// The C original's command line for the same run: `N [--json]`
    /// (`c/pthreadcreat.c` takes N by position).
    ///
    /// # Panics
    ///
    /// If the options set a stack size or the std API: the C program has
    /// neither.
    pub fn c_args(&self) -> Vec<OsString> {
        assert!(
            self.stack_size.is_none() && self.api == Api::Pthread,
            "pthreadcreat.c takes no --stack-size and no --api: {self:?}"
        );
        let mut args: Vec<OsString> = vec![self.iterations.to_string().into()];
        if self.json {
            args.push("--json".into());
        }
        args
    }
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
