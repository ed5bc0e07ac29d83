//! The `fork` crate's integration tests, one module per file, in one
//! test binary (see the workspace's `tests/it/main.rs`): tests that
//! fork or touch what belongs to the process hold [`labtest::serial`],
//! and one that needs the process to itself runs in its own
//! ([`labtest::alone`]).

mod fork;
mod options;
mod reaping;
