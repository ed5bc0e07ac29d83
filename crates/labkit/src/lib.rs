//! The shared harness of the process-vs-thread lab.
//!
//! Every program and the `lab` runner use it for the same few jobs, so that
//! each program's own source stays the size of the C it reproduces:
//!
//! - [`error`]: one error type and the lab's exit codes (0 ok, 1 failed, 2 usage);
//! - [`lines`]: whole-line output buffers that are safe to use after `fork`;
//! - [`limits`]: resource limits and human sizes (`8M`, `256K`);
//! - [`stats`]: rounds, median, min, max and the articles' trimmed mean;
//! - [`measure`]: run a program as a whole process, timed from outside, with
//!   the kernel's `wait4` accounting (user, sys, max RSS, context switches);
//! - [`cleanup`]: process groups and temporary directories that an
//!   interrupt (SIGINT, SIGTERM, SIGHUP) stops and removes;
//! - [`relay`]: a forking program passes SIGINT, SIGTERM and SIGHUP on to
//!   its children, reaps them and exits 128 + N;
//! - [`machine`]: what machine a figure was measured on;
//! - [`results`], [`table`], [`chart`], [`progress`]: reporting.

pub mod affinity;
pub mod bars;
pub mod bins;
pub mod chart;
pub mod children;
pub mod cleanup;
pub mod cli;
pub mod error;
pub mod limited;
pub mod limits;
pub mod lines;
pub mod machine;
pub mod measure;
pub mod memory;
pub mod progress;
pub mod pthread;
pub mod relay;
pub mod results;
pub mod stats;
pub mod table;
pub mod testing;

pub use error::{Error, ExitCode, Result};
