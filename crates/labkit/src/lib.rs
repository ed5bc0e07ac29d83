//! What the process-vs-thread lab's programs need at run time, and nothing
//! more: no tables, charts or progress bars (those are the runner's, in the
//! `lab` crate), so that a program such as `fork` builds from a handful of
//! packages.
//!
//! - [`error`]: one error type and the lab's exit codes (0 ok, 1 failed, 2 usage);
//! - [`cli`]: flag parsing and the one JSON-or-text output of every program;
//! - [`lines`]: whole-line output buffers that are safe to use after `fork`;
//! - [`limits`]: resource limits and human sizes (`8M`, `256K`);
//! - [`affinity`]: CPU lists and pinning;
//! - [`pthread`], [`memory`]: raw threads and touched pages, as the C does;
//! - [`relay`], [`children`]: a forking program passes SIGINT, SIGTERM and
//!   SIGHUP on to its children, reaps them and exits 128 + N;
//! - [`latency`]: the load generators' latency percentiles;
//! - [`measure`]: the kernel's `wait4`/`getrusage` accounting, and a whole
//!   program timed from outside;
//! - [`cleanup`], [`limited`]: process groups, temporary directories and
//!   limited children that an interrupt stops and removes (the runner's
//!   signal handling and its guard process are its own `supervisor`
//!   crate's, which no program needs).
//!
//! What the tests share (skips, the exit-code checks) is the `labtest`
//! crate's, a dev-dependency.

pub mod affinity;
pub mod children;
pub mod cleanup;
pub mod cli;
pub mod error;
pub mod latency;
pub mod limited;
pub mod limits;
pub mod lines;
pub mod measure;
pub mod memory;
pub mod pthread;
pub mod relay;

pub use error::{Error, ExitCode, Result};
