//! The `thread` program: its output, its stacks, its failures, its flags.

use std::process::Command as Std;

use labkit::limited::Limits;
use labkit::lines::{check_log, payload};
use labtest::{created_before_failing, worker_lines_whole};

const THREAD: &str = env!("CARGO_BIN_EXE_thread");

/// Run `thread` under `limits` ([`labkit::limited::apply`]).
fn limited(
    limits: Limits,
    args: &[&str],
    log: &std::path::Path,
) -> std::process::Output {
    let mut cmd = Std::new(THREAD);
    cmd.args(args).arg("--log").arg(log).stdout(std::process::Stdio::null());
    labkit::limited::apply(&mut cmd, limits).output().unwrap()
}

/// The article's 32-bit machine: 3 GiB of address space.
const GIB3: Limits =
    Limits { address_space: Some(3 << 30), stack: None, nproc: None, user: None };

#[test]
fn every_thread_prints_every_line_to_stdout_and_log() {
    worker_lines_whole(THREAD, &["-t", "7", "-c", "40"], None, 7, 40);
}

#[test]
fn long_lines_from_many_threads_are_never_torn() {
    let args = ["-t", "300", "-c", "40", "--line", "3000", "--stack-size", "256K"];
    worker_lines_whole(THREAD, &args, Some(3000), 300, 40);
}

#[test]
fn thread_creation_failing_under_a_3_gib_address_space_is_reported() {
    // The article's 32-bit machine: 3 GiB of address space, 8 MiB stacks,
    // at most 384 threads. The C program died with a segfault at 500.
    let dir = labtest::tempdir();
    let log = dir.path().join("log");
    let out = limited(GIB3, &["-t", "1000", "-c", "10", "--stack-size", "8M"], &log);
    let (created, stderr) = created_before_failing("thread", &out);
    assert!((300..=384).contains(&created), "near 3 GiB / 8 MiB = 384: {stderr}");
    assert!(stderr.contains("of 1000 threads; pthread_create: "), "{stderr}");
    assert!(stderr.ends_with(&format!("joined the {created}")), "{stderr}");
    // Every thread that was made finished its lines, whole.
    let data = std::fs::read(&log).unwrap();
    assert_eq!(check_log(&data, &payload(None), created, 10), Ok(()));

    // The article's fix, as a flag: 1 MiB stacks fit 1000 threads.
    let log1 = dir.path().join("log1");
    let out =
        limited(GIB3, &["-t", "1000", "-c", "10", "--stack-size", "1M"], &log1);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn default_stack_follows_ulimit_s_like_pthread_create() {
    // `ulimit -s 1024` (RLIMIT_STACK = 1 MiB) was the article's fix; the
    // default stack follows it, so 1000 threads fit in 3 GiB again.
    let dir = labtest::tempdir();
    let log = dir.path().join("log");
    let out = limited(
        Limits { stack: Some(1 << 20), ..GIB3 },
        &["-t", "1000", "-c", "2"],
        &log,
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = limited(
        Limits { stack: Some(8 << 20), ..GIB3 },
        &["-t", "1000", "-c", "2"],
        &log,
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "8 MiB stacks must not fit 1000 threads in 3 GiB"
    );
}

#[test]
fn a_log_that_cannot_be_opened_fails_before_any_thread() {
    labtest::log_cannot_be_opened(THREAD);
}

#[test]
fn bad_flags_exit_2_with_usage() {
    labtest::usage_errors(
        THREAD,
        &[
            &["--threads", "0"],
            &["--threads", "x"],
            &["--stack-size", "1K"],
            &["--stack-size", "2G"],
            &["--stack-size", "8Q"],
            &["--count", "-1"],
        ],
    );
}
