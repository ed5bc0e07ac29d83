//! `thread`: the thread half of the fork-vs-thread experiment.
//!
//! Reproduces `thread.c` from the article "多线程还是多进程" (after Zhou Li
//! et al.; `shared/seeds/000_*.txt`): N threads each print `[j]hello linux`
//! COUNT times to stdout and to one shared log; the main thread joins them
//! all and says `Okay`.
//!
//! What it does differently, on purpose:
//! - Each thread gets the stack `pthread_create` would give it (the soft
//!   `RLIMIT_STACK`, 8 MiB unless `ulimit -s` changed it), not Rust's 2 MiB,
//!   so that `ulimit -s 1024` means what it meant in the article;
//!   `--stack-size` sets it directly, like `pthread_attr_setstacksize`.
//! - Each thread buffers its own whole lines (as each `fork` child does)
//!   instead of sharing one locked stdio buffer.
//! - A failing thread creation stops creation, every thread made so far is
//!   joined, and the failure is reported; the C program did not check, and
//!   crashed at 500 threads on its 32-bit machine.

use std::fs::File;
use std::os::fd::AsFd;
use std::thread;

use labkit::cli::{Report, Workload, open_log};
use labkit::error::{Error, Result, describe_errno, describe_io};
use labkit::lines::LineBuf;
use nix::errno::Errno;

pub fn run(threads: u32, stack_size: u64, work: &Workload) -> Result<Report> {
    let start = std::time::Instant::now();
    let log = open_log(&work.log)?;
    let text = work.text();
    let (created, spawn_error, failed) = thread::scope(|scope| {
        let mut handles = Vec::with_capacity(threads as usize);
        let mut spawn_error = None;

        // ANCHOR: create
        for _ in 0..threads {
            let builder = thread::Builder::new().stack_size(stack_size as usize);
            match builder.spawn_scoped(scope, || print(&log, &text, work.count)) {
                Ok(handle) => handles.push(handle),
                Err(err) => {
                    spawn_error = Some(err);
                    break;
                }
            }
        }
        let created = handles.len();
        let failed: Vec<Errno> = handles
            .into_iter()
            .filter_map(|h| h.join().map_or(Some(Errno::UnknownErrno), Result::err))
            .collect();
        // ANCHOR_END: create

        (created, spawn_error, failed)
    });

    if let Some(err) = spawn_error {
        return Err(Error::failed(format!(
            "created {created} of {threads} threads; thread spawn: {}; joined the {created}",
            describe_io(&err)
        )));
    }
    if let Some(&first) = failed.first() {
        return Err(Error::failed(format!(
            "{} of {threads} threads failed; first could not write: {}",
            failed.len(),
            describe_errno(first)
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
/// One thread's work: the same lines a `fork` child prints.
fn print(log: &File, text: &[u8], count: u64) -> Result<(), Errno> {
    let stdout = std::io::stdout();
    let mut out = LineBuf::new(&stdout.as_fd());
    let mut file = LineBuf::new(log);
    for j in 0..count {
        out.line(j, text)?;
        file.line(j, text)?;
    }
    out.flush()?;
    file.flush()
}
// ANCHOR_END: print
