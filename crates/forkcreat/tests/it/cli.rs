//! forkcreat as a user runs it: counts, output, reaping, failures, usage.

use forkcreat::{Reap, Report};
use labkit::limited::{Limits, NOBODY};
use labtest::json;
use std::process::Command;

fn forkcreat() -> Command {
    Command::new(env!("CARGO_BIN_EXE_forkcreat"))
}

/// Run as nobody with at most `nproc` processes for that uid
/// (`RLIMIT_NPROC` does not bind root), from a copy nobody can reach.
/// `None` when not root, or when no such copy can be made.
fn as_nobody_with_nproc(nproc: u64, args: &[&str]) -> Option<std::process::Output> {
    if !labtest::is_root() {
        labtest::skipped("needs root to run as nobody");
        return None;
    }
    let forkcreat = env!("CARGO_BIN_EXE_forkcreat");
    let copy = labtest::copy_for_nobody(forkcreat)?;
    let mut cmd = copy.command();
    cmd.args(args);
    let limits =
        Limits { nproc: Some(nproc), user: Some(NOBODY), ..Limits::default() };
    Some(labkit::limited::apply(&mut cmd, limits).output().unwrap())
}

#[test]
fn both_reap_modes_create_reap_and_leave_nothing() {
    let _serial = labtest::serial();
    for (mode, reap) in [("wait", Reap::Wait), ("sigchld", Reap::Sigchld)] {
        let out = labtest::run(forkcreat().args([
            "--iterations",
            "300",
            "--reap",
            mode,
            "--json",
        ]))
        .success();
        let r: Report = json(&out.output.stdout);
        assert_eq!(r.reap, Some(reap));
        assert_eq!((r.created, r.failed, r.reaped, r.bad_exits), (300, 0, 300, 0));
        // /proc shows no child of forkcreat, zombie or not, at the end.
        assert_eq!(r.left_behind, 0, "{r:?}");
        assert!(r.end.us_per_create.is_some_and(|us| us > 0.0), "{r:?}");
        if reap == Reap::Wait {
            assert_eq!(r.peak_unreaped, 0, "{r:?}");
        }
    }
}

#[test]
fn text_report_has_the_article_counts() {
    let _serial = labtest::serial();
    let want =
        "created: 20, failed: 0, reaped: 20\n20 create+destroy in # s: # us each\n";
    labtest::run(forkcreat().args(["-n", "20"]))
        .success()
        .stdout_that(want, |out| labtest::shape(out, want));
    labtest::run(forkcreat().args(["-n", "20", "--reap", "sigchld"]))
        .success()
        .stdout_has("children were waiting to be reaped");
}

#[test]
fn fork_failures_under_rlimit_nproc_are_counted_and_exit_1() {
    let _serial = labtest::serial();
    // One process allowed for the uid: forkcreat itself, so every fork fails.
    let Some(out) = as_nobody_with_nproc(1, &["-n", "10", "--json"]) else { return };
    let err = labtest::failed("forkcreat", &out);
    let r: Report = json(&out.stdout);
    assert_eq!((r.created, r.failed), (0, 10), "{r:?}");
    assert!(
        err.contains("10 of 10 fork calls failed (first: Resource temporarily"),
        "{err}"
    );
    assert!(err.contains("EAGAIN"), "{err}");
}

#[test]
fn sigchld_mode_under_a_small_limit_loses_nothing() {
    let _serial = labtest::serial();
    // A few processes allowed: zombies pile up until the handler reaps
    // them, so some forks may fail; whatever happens, the counts add up
    // and every child is reaped.
    let Some(out) =
        as_nobody_with_nproc(4, &["-n", "400", "--reap", "sigchld", "--json"])
    else {
        return;
    };
    let r: Report = json(&out.stdout);
    let (created, failed) = (r.created, r.failed);
    assert_eq!(created + failed, 400, "{r:?}");
    assert_eq!((r.reaped, r.left_behind), (created, 0), "{r:?}");
    assert!(r.peak_unreaped <= 3, "{r:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    if failed > 0 {
        assert_eq!(out.status.code(), Some(1));
        assert!(err.contains("EAGAIN"), "{err}");
    } else {
        assert!(out.status.success(), "{err}");
    }
}

#[test]
fn bad_flags_exit_2() {
    labtest::usage_errors(
        env!("CARGO_BIN_EXE_forkcreat"),
        &[&["-n", "0"], &["--reap", "never"], &["-n", "x"], &["--bogus"]],
    );
    labtest::help_mentions(
        env!("CARGO_BIN_EXE_forkcreat"),
        &["[default: 100000]", "[default: wait]"],
    );
}
