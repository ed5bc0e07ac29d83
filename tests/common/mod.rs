//! Helpers for the workspace's integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

use assert_cmd::Command;

/// The directory holding every program binary of this build (`lab`'s own).
pub fn bin_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_lab")).parent().unwrap().to_path_buf()
}

/// A program binary of the workspace (`fork`, `thread`, ...), which
/// `cargo test` at the workspace root builds along with `lab`.
pub fn program(name: &str) -> Command {
    let path = bin_dir().join(name);
    assert!(
        path.is_file(),
        "{} is not built: run `cargo test` at the workspace root (or `cargo build --workspace`)",
        path.display()
    );
    Command::new(path)
}

/// The runner, told where the programs are so it does not call cargo.
pub fn lab() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lab"));
    cmd.env("LAB_BIN_DIR", bin_dir());
    cmd
}
