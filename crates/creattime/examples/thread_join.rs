//! The lecture's thread loop (book References: lecture-2004, "Making Threads")
//! in its smallest form: create a thread that runs an empty `f`, join it;
//! ITER times (default 2000, as in the lecture).
//!
//! `cargo run --release --example thread_join [ITER]`

use std::io::Write;
use std::time::Instant;

fn f() {}

fn main() {
    let iter: u32 = match std::env::args().nth(1).map(|a| a.parse()) {
        None => 2000,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("usage: thread_join [ITER > 0]");
            std::process::exit(2);
        }
    };
    let start = Instant::now();
    for _ in 0..iter {
        let thread = match std::thread::Builder::new().spawn(f) {
            Ok(thread) => thread,
            Err(e) => {
                eprintln!("create failed: {e}");
                std::process::exit(1);
            }
        };
        if thread.join().is_err() {
            eprintln!("join failed");
            std::process::exit(1);
        }
    }
    let us = start.elapsed().as_secs_f64() * 1e6 / f64::from(iter);
    // A full disk or a closed pipe is an error with a message, not a panic.
    let line =
        format!("threads: {us:.1} us per create+delete ({iter} iterations)\n");
    if let Err(e) = std::io::stdout().write_all(line.as_bytes()) {
        eprintln!("thread_join: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}
