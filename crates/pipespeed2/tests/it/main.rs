//! The `pipespeed2` crate's integration tests, one module per file, in one
//! test binary (see the workspace's `tests/it/main.rs`): tests that
//! fork or touch what belongs to the process hold [`labtest::serial`].

mod library;
mod pipespeed2;
