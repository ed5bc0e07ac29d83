//! The `fork` program: its output, its failures, its flags.

use labkit::lines::{check_log, payload};
use labtest::worker_lines_whole;
use std::process::Command;

const FORK: &str = env!("CARGO_BIN_EXE_fork");

fn fork() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fork"))
}

#[test]
fn every_child_prints_every_line_to_stdout_and_log() {
    let _serial = labtest::serial();
    worker_lines_whole(FORK, &["--procs", "5", "--count", "50"], None, 5, 50);
}

#[test]
fn long_lines_from_many_children_are_never_torn() {
    let _serial = labtest::serial();
    // 150 children appending 2000-byte lines at once: stdio would flush
    // every 4 KiB mid-line and the children's halves would interleave.
    let args = ["-p", "150", "-c", "60", "--line", "2000"];
    worker_lines_whole(FORK, &args, Some(2000), 150, 60);
}

#[test]
fn the_log_is_appended_to_and_json_replaces_okay() {
    let _serial = labtest::serial();
    let dir = labtest::tempdir();
    let log = dir.path().join("log");
    std::fs::write(&log, "[0]hello linux\n").unwrap();
    let out = fork()
        .args(["-p", "2", "-c", "1", "--json", "--log"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(out.status.success());
    let last =
        String::from_utf8(out.stdout).unwrap().lines().last().unwrap().to_string();
    let r: labkit::cli::Report = labtest::json(last.as_bytes());
    assert_eq!((r.workers, r.count, r.lines), (2, 1, 2), "{r:?}");
    assert_eq!(
        check_log(&std::fs::read(&log).unwrap(), &payload(None), 3, 1),
        Ok(())
    );
}

#[test]
fn a_log_that_cannot_be_opened_fails_before_any_child() {
    labtest::log_cannot_be_opened(FORK);
}

#[test]
fn bad_flags_exit_2_with_usage() {
    labtest::usage_errors(
        FORK,
        &[
            &["--procs", "0"],
            &["--procs", "-3"],
            &["--procs", "lots"],
            &["--procs", "100001"],
            &["--count", "0"],
            &["--line", "5000"],
            &["--bogus"],
        ],
    );
}

#[test]
fn help_documents_defaults() {
    labtest::help_mentions(
        FORK,
        &["[default: 255]", "[default: 100]", "[default: logFile.log]"],
    );
}
