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
/// be the saved one, as it is and read as the experiment's own results type.
fn run(args: &[&str]) -> (Data, Value) {
    let dir = labtest::tempdir();
    let printed = run_json("ctx-switch", args, dir.path());
    assert_eq!(printed["experiment"], "ctx-switch");
    let tables = std::fs::read_to_string(dir.path().join("tables.md")).unwrap();
    assert!(tables.contains("What one switch costs"), "{tables}");
    let svg = std::fs::read_to_string(dir.path().join("ctx-switch.svg")).unwrap();
    assert!(svg.starts_with("<svg"));
    (serde_json::from_value(printed.clone()).unwrap(), printed)
}

/// The engine's name of a pin: the `placement` of the observations.
fn placement(pin: Pin) -> &'static str {
    match pin {
        Pin::Same => "one-cpu",
        Pin::Cross => "two-cpus",
        Pin::None => "unpinned",
    }
}

/// `tool`'s measured runs (warm-ups left out) in `mode` and `pin`.
fn runs<'a>(doc: &'a Value, mode: Mode, pin: Pin, tool: &str) -> Vec<&'a Value> {
    let obs = doc["observations"].as_array().unwrap();
    obs.iter()
        .filter(|o| o["setting"]["mode"] == mode.name() && o["condition"] == tool)
        .filter(|o| o["setting"]["placement"] == placement(pin))
        .filter(|o| !o["round"].is_null())
        .collect()
}

#[test]
fn a_tiny_run_gives_a_per_switch_cost_for_every_mode_and_placement() {
    let _serial = labtest::serial();
    let (saved, doc) = run(&["--rounds", "2", "-n", "300", "--no-perf"]);
    assert_eq!((saved.iterations, saved.rounds), (300, 2));
    assert!(!saved.perf.used);
    let pins: &[Pin] = if two_cpus() {
        &[Pin::Same, Pin::Cross, Pin::None]
    } else {
        &[Pin::Same, Pin::None]
    };
    let measured: Vec<Pin> = saved.placements.iter().map(|p| p.pin).collect();
    assert_eq!(measured, pins);
    // One series per mode and placement, named by them: ctxswitch alone.
    let series = doc["series"].as_array().unwrap();
    assert_eq!(series.len(), 2 * pins.len());
    // A warm-up run of ctxswitch, then two rounds of each mode and placement.
    let obs = doc["observations"].as_array().unwrap();
    assert_eq!(obs.len(), 1 + 2 * 2 * pins.len());
    for mode in [Mode::Threads, Mode::Processes] {
        for &pin in pins {
            // The figure the mq-sweep experiment reads.
            let us = saved.us_per_switch[mode.name()][pin.name()];
            assert!(us > 0.0, "{mode:?} {pin:?}");
            assert_eq!(saved.per_switch(mode, pin).unwrap().0, us);
            let s = series.iter().find(|s| {
                s["mode"] == mode.name() && s["placement"] == placement(pin)
            });
            let s = s.unwrap();
            assert_eq!(s["condition"], "ctxswitch");
            assert_eq!(s["us_per_switch"]["median"].as_f64(), Some(us));
            // Each round is ctxswitch's own report, in this mode and
            // placement; the series is made of them. (Whether the kernel's
            // count agreed is up to the scheduler.)
            let runs = runs(&doc, mode, pin, "ctxswitch");
            assert_eq!(runs.len(), 2);
            for r in &runs {
                let n = if pin == Pin::Cross { 60.0 } else { 300.0 };
                assert_eq!(r["metrics"]["iterations"].as_f64(), Some(n));
                let holds = r["metrics"]["counts_hold"].as_f64().unwrap();
                assert!(holds == 0.0 || holds == 1.0, "{r}");
            }
            let rts: Vec<f64> = runs
                .iter()
                .map(|r| r["metrics"]["us_per_round_trip"].as_f64().unwrap())
                .collect();
            let min = s["us_per_round_trip"]["min"].as_f64().unwrap();
            assert_eq!(min, rts[0].min(rts[1]));
        }
    }
    assert!(saved.vs_perf.is_empty());
    assert!(obs.iter().all(|o| o["condition"] == "ctxswitch"));
}

#[test]
fn perf_runs_beside_it_in_the_same_mode_and_placement() {
    let _serial = labtest::serial();
    labtest::require!(perf_works(), "`perf bench sched pipe` does not run here");
    let (saved, doc) = run(&["--rounds", "1", "-n", "10000"]);
    assert!(saved.perf.used, "{:?}", saved.perf);
    assert_eq!(saved.vs_perf.len(), 2 * saved.placements.len());
    for mode in [Mode::Threads, Mode::Processes] {
        for p in &saved.placements {
            let perf = runs(&doc, mode, p.pin, "perf");
            let ours = runs(&doc, mode, p.pin, "ctxswitch");
            // Two tools: balanced, two rounds of each.
            assert_eq!((perf.len(), ours.len()), (2, 2));
            let rt = |r: &Value| r["metrics"]["us_per_round_trip"].as_f64().unwrap();
            assert!(perf.iter().all(|r| rt(r) > 0.0));
            let ratios: Vec<f64> =
                ours.iter().zip(&perf).map(|(a, b)| rt(a) / rt(b)).collect();
            let pair = saved.vs_perf.iter().find(|v| {
                v.setting["mode"] == mode.name()
                    && v.setting["placement"] == placement(p.pin)
            });
            let vs_perf = pair.unwrap().ratio.median;
            let ratio = (ratios[0] + ratios[1]) / 2.0;
            assert!(
                (vs_perf - ratio).abs() <= 1e-12 * ratio,
                "{vs_perf} vs {ratio}"
            );
            // For cross, one worker was moved to the second CPU.
            for r in &perf {
                let moved = !r["metrics"]["moved_after_ms"].is_null();
                assert_eq!(moved, p.pin == Pin::Cross, "{r}");
            }
        }
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
    let saved: Value = common::printed_json(&out.stdout);
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
