//! pthreadcreat as a user runs it: counts, output, failures, usage.

use labkit::limited::Limits;
use labtest::json;
use pthreadcreat::{Api, Report};
use std::process::Command;

fn pthreadcreat() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pthreadcreat"))
}

/// `pthreadcreat ARGS --json`, successful, its report.
fn report(args: &[&str]) -> Report {
    let out = labtest::run(pthreadcreat().args(args).arg("--json")).success();
    json(&out.output.stdout)
}

#[test]
fn creates_and_joins_every_thread() {
    let r = report(&["--iterations", "500", "--stack-size", "64K"]);
    assert_eq!((r.created, r.joined, r.failed), (500, 500, 0), "{r:?}");
    assert_eq!((r.stack_size, r.api), (65536, Api::Pthread));
    let r = report(&["-n", "50", "--api", "std"]);
    assert_eq!((r.api, r.joined), (Api::Std, 50));
    let want =
        "created: 7, failed: 0, joined: 7\n7 create+destroy in # s: # us each\n";
    labtest::run(pthreadcreat().args(["-n", "7"]))
        .success()
        .stdout_that(want, |out| labtest::shape(out, want));
}

#[test]
fn thread_create_failure_under_rlimit_as_is_counted_and_exits_1() {
    // 256 MiB of address space cannot hold a 1 GiB stack: every create
    // fails, and the program says so instead of crashing.
    for (api, call) in [("pthread", "pthread_create"), ("std", "std::thread spawn")]
    {
        let bin = env!("CARGO_BIN_EXE_pthreadcreat");
        let mut cmd = std::process::Command::new(bin);
        cmd.args(["-n", "5", "--stack-size", "1G", "--json", "--api", api]);
        let limits = Limits { address_space: Some(256 << 20), ..Limits::default() };
        let out = labkit::limited::apply(&mut cmd, limits).output().unwrap();
        let err = labtest::failed("pthreadcreat", &out);
        let r: Report = json(&out.stdout);
        assert_eq!((r.created, r.failed), (0, 5), "{r:?}");
        assert!(
            err.contains(&format!("5 of 5 {call} calls failed (first: ")),
            "{err}"
        );
        assert!(err.contains("(E"), "names the errno: {err}");
    }
}

#[test]
fn bad_flags_exit_2() {
    labtest::usage_errors(
        env!("CARGO_BIN_EXE_pthreadcreat"),
        &[
            &["-n", "0"],
            &["--stack-size", "1K"],
            &["--stack-size", "8Q"],
            &["--api", "go"],
        ],
    );
    labtest::help_mentions(
        env!("CARGO_BIN_EXE_pthreadcreat"),
        &["[default: 100000]", "RLIMIT_STACK"],
    );
}
