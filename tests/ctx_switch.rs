//! `lab run ctx-switch` end to end, at tiny settings.

mod common;

use common::{lab, run_json};
use predicates::prelude::*;
use serde_json::Value;
use serial_test::serial;

fn two_cpus() -> bool {
    labkit::affinity::allowed_cpus().unwrap().len() >= 2
}

fn perf_works() -> bool {
    std::process::Command::new("perf")
        .args(["bench", "sched", "pipe", "-l", "1"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `lab run ctx-switch ARGS --json --out DIR`: the printed JSON, checked to
/// be the saved one.
fn run(args: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let printed = run_json("ctx-switch", args, dir.path());
    let tables = std::fs::read_to_string(dir.path().join("tables.md")).unwrap();
    assert!(tables.contains("What one switch costs"), "{tables}");
    let svg = std::fs::read_to_string(dir.path().join("ctx-switch.svg")).unwrap();
    assert!(svg.starts_with("<svg"));
    printed
}

#[test]
#[serial(fork)]
fn a_tiny_run_gives_a_per_switch_cost_for_every_mode_and_placement() {
    let saved = run(&["--rounds", "2", "-n", "300", "--no-perf"]);
    assert_eq!(saved["experiment"], "ctx-switch");
    assert_eq!(
        (saved["iterations"].as_u64(), saved["rounds"].as_u64()),
        (Some(300), Some(2))
    );
    assert_eq!(saved["perf"]["used"], false);
    let pins: &[&str] =
        if two_cpus() { &["same", "cross", "none"] } else { &["same", "none"] };
    let cells = saved["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2 * pins.len());
    for mode in ["threads", "processes"] {
        for pin in pins {
            // The figure the mq-sweep experiment reads.
            let us = saved["us_per_switch"][mode][pin].as_f64().unwrap();
            assert!(us > 0.0, "{mode} {pin}");
            let cell = cells.iter().find(|c| c["mode"] == mode && c["pin"] == *pin);
            let cell = cell.unwrap();
            assert_eq!(cell["us_per_switch"].as_f64().unwrap(), us);
            assert_eq!(cell["runs"].as_array().unwrap().len(), 2);
            assert_eq!(cell["counts_hold"], true, "{cell}");
            let k = &cell["kernel_switches_per_round_trip"];
            assert!((1.8..=2.2).contains(&k["median"].as_f64().unwrap()), "{cell}");
            assert!(cell["perf"].is_null());
        }
    }
}

#[test]
#[serial(fork)]
fn perf_runs_beside_it_in_the_same_mode_and_placement() {
    if !perf_works() {
        labkit::testing::skipped("`perf bench sched pipe` does not run here");
        return;
    }
    let saved = run(&["--rounds", "1", "-n", "10000"]);
    assert_eq!(saved["perf"]["used"], true, "{}", saved["perf"]);
    for cell in saved["cells"].as_array().unwrap() {
        let perf = &cell["perf"];
        assert!(perf["us_per_round_trip"]["median"].as_f64().unwrap() > 0.0);
        assert!(cell["vs_perf"].as_f64().unwrap() > 0.0);
        // For cross, one worker was moved to the second CPU.
        let moved = perf["runs"][0].get("moved_after_ms").is_some();
        assert_eq!(moved, cell["pin"] == "cross", "{cell}");
    }
}

#[test]
#[serial(fork)]
fn a_missing_default_perf_is_a_note_and_a_named_one_an_error() {
    // No `perf` on the PATH: the default falls back, with a note.
    let dir = tempfile::tempdir().unwrap();
    let out = lab()
        .env("PATH", "/nonexistent")
        .args(["run", "ctx-switch", "--rounds", "1", "-n", "50", "--json", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("lab: note: running without perf: "), "{stderr}");
    let saved: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(saved["perf"]["used"], false);
    let note = saved["perf"]["note"].as_str().unwrap();
    assert!(note.contains("perf cannot run") && note.contains("ENOENT"), "{note}");
    // A perf the user named must run.
    lab()
        .args(["run", "ctx-switch", "--perf", "/nonexistent/perf", "--out"])
        .arg(dir.path())
        .assert()
        .code(1)
        .stderr(predicate::str::starts_with(
            "lab: --perf: /nonexistent/perf cannot run: No such file or directory",
        ));
}

#[test]
fn bad_flags_exit_2() {
    for args in [
        &["--iterations", "0"][..],
        &["--rounds", "0"],
        &["--pins", "left"],
        &["--modes", "fibers"],
        &["--bogus"],
    ] {
        lab()
            .args(["run", "ctx-switch"])
            .args(args)
            .assert()
            .code(2)
            .stderr(predicate::str::starts_with("lab run ctx-switch: "))
            .stderr(predicate::function(|s: &str| s.lines().count() == 1));
    }
}
