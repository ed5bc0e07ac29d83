//! forkcreat as a user runs it: counts, output, reaping, failures, usage.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use serial_test::serial;

fn forkcreat() -> Command {
    Command::cargo_bin("forkcreat").unwrap()
}

fn json(out: &[u8]) -> Value {
    serde_json::from_slice(out).expect("one JSON object")
}

/// Run as nobody with at most `nproc` processes for that uid, via
/// setpriv/prlimit (util-linux). `None` when that cannot be done here.
fn as_nobody_with_nproc(nproc: u32, args: &[&str]) -> Option<std::process::Output> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        labkit::testing::skipped("needs root to become an unprivileged user");
        return None;
    }
    let bin = assert_cmd::cargo::cargo_bin("forkcreat");
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "prlimit"])
        .arg(format!("--nproc={nproc}"))
        .arg(bin)
        .args(args)
        .output();
    match out {
        Ok(out) if out.status.code() != Some(127) => Some(out),
        _ => {
            labkit::testing::skipped("setpriv/prlimit not available");
            None
        }
    }
}

#[test]
#[serial(fork)]
fn both_reap_modes_create_reap_and_leave_nothing() {
    for mode in ["wait", "sigchld"] {
        let out = forkcreat()
            .args(["--iterations", "300", "--reap", mode, "--json"])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let r = json(&out);
        assert_eq!(r["reap"], mode);
        assert_eq!(r["created"], 300, "{r}");
        assert_eq!(r["failed"], 0, "{r}");
        assert_eq!(r["reaped"], 300, "{r}");
        assert_eq!(r["bad_exits"], 0, "{r}");
        // /proc shows no child of forkcreat, zombie or not, at the end.
        assert_eq!(r["left_behind"], 0, "{r}");
        assert!(r["us_per_create"].as_f64().unwrap() > 0.0);
        if mode == "wait" {
            assert_eq!(r["peak_unreaped"], 0, "{r}");
        }
    }
}

#[test]
#[serial(fork)]
fn text_report_has_the_article_counts() {
    forkcreat()
        .args(["-n", "20"])
        .assert()
        .success()
        .stdout(predicate::str::is_match(
            r"^created: 20, failed: 0, reaped: 20\n20 create\+destroy in [0-9.]+ s: [0-9.]+ us each\n$",
        )
        .unwrap());
    forkcreat()
        .args(["-n", "20", "--reap", "sigchld"])
        .assert()
        .success()
        .stdout(predicate::str::contains("children were waiting to be reaped"));
}

#[test]
#[serial(fork)]
fn fork_failures_under_rlimit_nproc_are_counted_and_exit_1() {
    // One process allowed for the uid: forkcreat itself, so every fork fails.
    let Some(out) = as_nobody_with_nproc(1, &["-n", "10", "--json"]) else { return };
    assert_eq!(out.status.code(), Some(1));
    let r = json(&out.stdout);
    assert_eq!((r["created"].as_u64(), r["failed"].as_u64()), (Some(0), Some(10)));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("10 of 10 forks failed"), "{err}");
    assert!(err.contains("EAGAIN"), "{err}");
}

#[test]
#[serial(fork)]
fn sigchld_mode_under_a_small_limit_loses_nothing() {
    // A few processes allowed: zombies pile up until the handler reaps
    // them, so some forks may fail; whatever happens, the counts add up
    // and every child is reaped.
    let Some(out) =
        as_nobody_with_nproc(4, &["-n", "400", "--reap", "sigchld", "--json"])
    else {
        return;
    };
    let r = json(&out.stdout);
    let (created, failed) =
        (r["created"].as_u64().unwrap(), r["failed"].as_u64().unwrap());
    assert_eq!(created + failed, 400, "{r}");
    assert_eq!(r["reaped"].as_u64(), Some(created), "{r}");
    assert_eq!(r["left_behind"], 0, "{r}");
    assert!(r["peak_unreaped"].as_u64().unwrap() <= 3, "{r}");
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
    for args in [&["-n", "0"][..], &["--reap", "never"], &["-n", "x"], &["--bogus"]]
    {
        forkcreat().args(args).assert().code(2).stdout("");
    }
    forkcreat()
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("[default: 100000]"))
        .stdout(predicate::str::contains("[default: wait]"));
}
