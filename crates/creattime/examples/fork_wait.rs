//! The lecture's process loop (book References: lecture-2004, "Making
//! Processes") in its smallest form: fork, the child exits, the parent
//! waits; ITER times (default 2000, as in the lecture).
//!
//! `cargo run --release --example fork_wait [ITER]`

use std::io::Write;
use std::time::Instant;

fn main() {
    let iter: u32 = match std::env::args().nth(1).map(|a| a.parse()) {
        None => 2000,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("usage: fork_wait [ITER > 0]");
            std::process::exit(2);
        }
    };
    let start = Instant::now();
    for _ in 0..iter {
        // SAFETY: this program has one thread, and the child calls only
        // _exit, which is async-signal-safe.
        match unsafe { libc::fork() } {
            // SAFETY: in the child; _exit ends it at once.
            0 => unsafe { libc::_exit(0) },
            -1 => {
                eprintln!("fork() error: {}", std::io::Error::last_os_error());
                std::process::exit(1);
            }
            // SAFETY: a null status pointer is allowed.
            pid if unsafe { libc::wait(std::ptr::null_mut()) } == pid => {}
            _ => {
                eprintln!("wait() error: {}", std::io::Error::last_os_error());
                std::process::exit(1);
            }
        }
    }
    let us = start.elapsed().as_secs_f64() * 1e6 / f64::from(iter);
    // A full disk or a closed pipe is an error with a message, not a panic.
    let line =
        format!("processes: {us:.1} us per create+delete ({iter} iterations)\n");
    if let Err(e) = std::io::stdout().write_all(line.as_bytes()) {
        eprintln!("fork_wait: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}
