//! creattime as a user runs it: the original's layout, zombies counted and
//! then reaped, failures, usage.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use serial_test::serial;

fn creattime() -> Command {
    Command::cargo_bin("creattime").unwrap()
}

#[test]
#[serial(fork)]
fn prints_the_original_layout() {
    let lines = [
        r"Fork failures: 0 \(success: 20\)",
        r"Average fork time: [0-9]+\.[0-9]{6} msecs",
        r"Total fork time: [0-9]+\.[0-9]{6} msecs",
        r"Thread failures: 0 \(success: 20\)",
        r"Average thread time: [0-9]+\.[0-9]{6} msecs",
        r"Total thread time: [0-9]+\.[0-9]{6} msecs",
        r"Average fork/thread ratio: [0-9]+\.[0-9]{6}",
        r"Total fork/thread ratio: [0-9]+\.[0-9]{6}",
        r"Zombies before reaping: [0-9]+ of 20 children \(reaped 20, joined 20 threads\)",
    ];
    let pattern = format!("^{}\n$", lines.join("\n"));
    creattime()
        .arg("20")
        .assert()
        .success()
        .stdout(predicate::str::is_match(pattern).unwrap());
}

#[test]
#[serial(fork)]
fn children_pile_up_as_zombies_then_all_are_reaped() {
    let out = creattime()
        .args(["64", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let r: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(r["fork"]["successes"], 64, "{r}");
    assert_eq!(r["thread"]["successes"], 64, "{r}");
    assert_eq!(r["reaped"], 64, "{r}");
    assert_eq!(r["joined"], 64, "{r}");
    assert_eq!(r["left_behind"], 0, "{r}");
    // Nobody reaps during the fork test, so the children that have ended
    // are zombies; on an idle machine that is all of them.
    let zombies = r["zombies_before_reaping"].as_u64().unwrap();
    assert!(zombies <= 64, "{r}");
    let (avg, total) = (r["average_ratio"].as_f64(), r["total_ratio"].as_f64());
    assert!(avg.is_some_and(|x| x > 0.0) && total.is_some_and(|x| x > 0.0), "{r}");
}

#[test]
#[serial(fork)]
fn fork_failures_are_counted_and_exit_1() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        labkit::testing::skipped("needs root to become an unprivileged user");
        return;
    }
    let out = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "prlimit",
            "--nproc=1",
        ])
        .arg(assert_cmd::cargo::cargo_bin("creattime"))
        .args(["5", "--json"])
        .output();
    let Ok(out) = out else {
        labkit::testing::skipped("setpriv/prlimit not available");
        return;
    };
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["fork"]["failures"], 5, "{r}");
    assert_eq!(r["fork"]["average_ms"], Value::Null, "{r}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("5 of 5 fork calls failed"), "{err}");
    assert!(err.contains("EAGAIN"), "{err}");
}

#[test]
fn bad_usage_exits_2() {
    creattime().assert().code(2);
    creattime().arg("0").assert().code(2);
    creattime().arg("ten").assert().code(2);
    creattime().args(["5", "--stack-size", "1K"]).assert().code(2);
}
