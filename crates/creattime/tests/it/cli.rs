//! creattime as a user runs it: the original's layout, zombies counted and
//! then reaped, failures, usage.

use creattime::Report;
use labkit::limited::{Limits, NOBODY};
use labtest::json;
use std::process::Command;

fn creattime() -> Command {
    Command::new(env!("CARGO_BIN_EXE_creattime"))
}

#[test]
fn prints_the_original_layout() {
    let _serial = labtest::serial();
    let lines = [
        "Fork failures: 0 (success: 20)",
        "Average fork time: # msecs",
        "Total fork time: # msecs",
        "Thread failures: 0 (success: 20)",
        "Average thread time: # msecs",
        "Total thread time: # msecs",
        "Average fork/thread ratio: #",
        "Total fork/thread ratio: #",
        "Zombies before reaping: # of 20 children (reaped 20, joined 20 threads)",
    ];
    let pattern = format!("{}\n", lines.join("\n"));
    labtest::run(creattime().arg("20"))
        .success()
        .stdout_that(&pattern, |out| labtest::shape(out, &pattern));
}

#[test]
fn children_pile_up_as_zombies_then_all_are_reaped() {
    let _serial = labtest::serial();
    let out = labtest::run(creattime().args(["64", "--json"])).success();
    let r: Report = json(&out.output.stdout);
    assert_eq!((r.fork.successes, r.thread.successes), (64, 64), "{r:?}");
    assert_eq!((r.reaped, r.joined, r.left_behind), (64, 64, 0), "{r:?}");
    let (avg, total) = (r.average_ratio, r.total_ratio);
    assert!(avg.is_some_and(|x| x > 0.0) && total.is_some_and(|x| x > 0.0), "{r:?}");
}

#[test]
fn fork_failures_are_counted_and_exit_1() {
    let _serial = labtest::serial();
    labtest::require!(labtest::is_root(), "needs root to run as nobody");
    // nobody may own one process, itself: every fork fails with EAGAIN.
    let creattime = env!("CARGO_BIN_EXE_creattime");
    let Some(copy) = labtest::copy_for_nobody(creattime) else { return };
    let mut cmd = copy.command();
    cmd.args(["5", "--json"]);
    let limits = Limits { nproc: Some(1), user: Some(NOBODY), ..Limits::default() };
    let out = labkit::limited::apply(&mut cmd, limits).output().unwrap();
    let err = labtest::failed("creattime", &out);
    let r: Report = json(&out.stdout);
    assert_eq!((r.fork.failures, r.fork.average_ms), (5, None), "{r:?}");
    assert!(err.contains("5 of 5 fork calls failed"), "{err}");
    assert!(err.contains("EAGAIN"), "{err}");
}

#[test]
fn thread_failures_are_counted_and_exit_1() {
    // 64 MiB of address space cannot hold a 1 GiB stack: pthread_create
    // fails every time, and the program says so instead of crashing.
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_creattime"));
    cmd.args(["3", "--stack-size", "1G", "--json"]);
    let limits = Limits { address_space: Some(64 << 20), ..Limits::default() };
    let out = labkit::limited::apply(&mut cmd, limits).output().unwrap();
    let err = labtest::failed("creattime", &out);
    let r: Report = json(&out.stdout);
    assert_eq!((r.thread.failures, r.thread.successes), (3, 0), "{r:?}");
    assert!(err.contains("3 of 3 pthread_create calls failed"), "{err}");
}

#[test]
fn bad_usage_exits_2() {
    labtest::usage_errors(
        env!("CARGO_BIN_EXE_creattime"),
        &[&[], &["0"], &["ten"], &["5", "--stack-size", "1K"]],
    );
}
