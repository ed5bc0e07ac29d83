//! `lab run ctx-switch` end to end, at tiny settings.

use crate::common;

use crate::common::{lab_fails, lab_run, run_json};
use ctxswitch::{Mode, Pin};
use lab::experiments::ctx_switch::Data;
use serde_json::Value;

fn two_cpus() -> bool {
    labkit::affinity::allowed_cpus().unwrap().len() >= 2
}

/// What the runner itself asks of perf before using it: `perf bench sched
/// pipe` runs and prints its "usecs/op" line.
fn perf_works() -> bool {
    std::process::Command::new("perf")
        .args(["bench", "sched", "pipe", "-l", "10"])
        .output()
        .is_ok_and(|o| {
            o.status.success()
                && String::from_utf8_lossy(&o.stdout).contains("usecs/op")
        })
}

/// `lab run ctx-switch ARGS --json --out DIR`: the printed JSON, checked to
/// be the saved one, read as the experiment's own results type.
fn run(args: &[&str]) -> Data {
    let dir = labtest::tempdir();
    let printed = run_json("ctx-switch", args, dir.path());
    assert_eq!(printed["experiment"], "ctx-switch");
    let tables = std::fs::read_to_string(dir.path().join("tables.md")).unwrap();
    assert!(tables.contains("What one switch costs"), "{tables}");
    let svg = std::fs::read_to_string(dir.path().join("ctx-switch.svg")).unwrap();
    assert!(svg.starts_with("<svg"));
    serde_json::from_value(printed).unwrap()
}

#[test]
fn a_tiny_run_gives_a_per_switch_cost_for_every_mode_and_placement() {
    let _serial = labtest::serial();
    let saved = run(&["--rounds", "2", "-n", "300", "--no-perf"]);
    assert_eq!((saved.iterations, saved.rounds), (300, 2));
    assert!(!saved.perf.used);
    let pins: &[Pin] = if two_cpus() {
        &[Pin::Same, Pin::Cross, Pin::None]
    } else {
        &[Pin::Same, Pin::None]
    };
    assert_eq!(saved.cells.len(), 2 * pins.len());
    for mode in [Mode::Threads, Mode::Processes] {
        for &pin in pins {
            // The figure the mq-sweep experiment reads.
            let us = saved.us_per_switch[mode.name()][pin.name()];
            assert!(us > 0.0, "{mode:?} {pin:?}");
            let cell = saved.cells.iter().find(|c| c.mode == mode && c.pin == pin);
            let cell = cell.unwrap();
            assert_eq!(cell.us_per_switch, us);
            assert_eq!(cell.runs.len(), 2);
            // Each round is ctxswitch's own report, in this mode and
            // placement; the cell's summaries are made of them. (Whether
            // the kernel's count agreed is up to the scheduler.)
            for r in &cell.runs {
                assert_eq!((r.mode, r.pin), (mode, pin));
                assert_eq!(r.iterations, if pin == Pin::Cross { 60 } else { 300 });
            }
            let holds = cell.runs.iter().all(|r| r.switches.holds);
            assert_eq!(cell.counts_hold, holds);
            let rts: Vec<f64> =
                cell.runs.iter().map(|r| r.us_per_round_trip).collect();
            assert_eq!(cell.us_per_round_trip.min, rts[0].min(rts[1]));
            assert!(cell.perf.is_none() && cell.vs_perf.is_none());
        }
    }
}

#[test]
fn perf_runs_beside_it_in_the_same_mode_and_placement() {
    let _serial = labtest::serial();
    labtest::require!(perf_works(), "`perf bench sched pipe` does not run here");
    let saved = run(&["--rounds", "1", "-n", "10000"]);
    assert!(saved.perf.used, "{:?}", saved.perf);
    for cell in &saved.cells {
        let perf = cell.perf.as_ref().unwrap();
        assert!(perf.us_per_round_trip.median > 0.0);
        let ratio = cell.runs[0].us_per_round_trip / perf.runs[0].us_per_round_trip;
        let vs_perf = cell.vs_perf.unwrap();
        assert!((vs_perf - ratio).abs() <= 1e-12 * ratio, "{vs_perf} vs {ratio}");
        // For cross, one worker was moved to the second CPU.
        let moved = perf.runs[0].moved_after_ms.is_some();
        assert_eq!(moved, cell.pin == Pin::Cross, "{cell:?}");
    }
}

#[test]
fn a_missing_default_perf_is_a_note_and_a_named_one_an_error() {
    let _serial = labtest::serial();
    // No `perf` on the PATH: the default falls back, with a note.
    let dir = labtest::tempdir();
    let args = ["--rounds", "1", "-n", "50", "--json"];
    let mut cmd = lab_run("ctx-switch", &args, dir.path());
    let out = cmd.env("PATH", "/nonexistent").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("lab: note: running without perf: "), "{stderr}");
    let saved: Value = labtest::json(&out.stdout);
    assert_eq!(saved["perf"]["used"], false);
    let note = saved["perf"]["note"].as_str().unwrap();
    assert!(note.contains("perf cannot run") && note.contains("ENOENT"), "{note}");
    // A perf the user named must run.
    let args = ["--perf", "/nonexistent/perf"];
    let err = lab_fails(&mut lab_run("ctx-switch", &args, dir.path()));
    assert!(
        err.starts_with(
            "lab: --perf: /nonexistent/perf cannot run: No such file or directory"
        ),
        "{err}"
    );
}

#[test]
fn bad_flags_exit_2() {
    common::bad_flags_exit_2(
        "ctx-switch",
        &[
            &["--iterations", "0"],
            &["--rounds", "0"],
            &["--pins", "left"],
            &["--modes", "fibers"],
            &["--bogus"],
        ],
    );
}
