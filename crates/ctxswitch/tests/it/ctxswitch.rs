//! The `ctxswitch` program: its switch counts, its placement, its flags.

use ctxswitch::{Mode, Pin, Report};
use labtest::{usage_error, usage_errors};
use serde_json::Value;
use std::process::Command;

fn ctxswitch() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ctxswitch"))
}

fn allowed_cpus() -> Vec<usize> {
    labkit::affinity::allowed_cpus().unwrap()
}

/// Run with `args` plus `--json` and return the object. As in [`report`],
/// exit 1 is allowed when, and only when, the kernel's switch count
/// disagreed: that is the scheduler's to decide (another task on the CPU
/// adds switches), never a test's.
fn json(args: &[&str]) -> Value {
    let out = ctxswitch().args(args).arg("--json").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let v: Value = labtest::json(&out.stdout);
    match out.status.code() {
        Some(0) => assert_eq!(v["switches"]["holds"], true, "{args:?}: {v}"),
        Some(1) => assert_eq!(v["switches"]["holds"], false, "{args:?}: {stderr}"),
        code => panic!("{args:?}: exit {code:?}: {stderr}"),
    }
    v
}

/// Run with `args` plus `--json` and parse the program's own report type.
/// Exit 1 is allowed when, and only when, the kernel's count disagreed
/// (the JSON is still printed): whether it agrees is up to the scheduler
/// when the tasks are not both on one CPU.
fn report(args: &[&str]) -> Report {
    let out = ctxswitch().args(args).arg("--json").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let r: Report = labtest::json(&out.stdout);
    match out.status.code() {
        Some(0) => assert!(r.switches.holds, "{args:?}: {r:?}"),
        Some(1) => assert!(!r.switches.holds, "{args:?}: {stderr}"),
        code => panic!("{args:?}: exit {code:?}: {stderr}"),
    }
    r
}

#[test]
fn the_figures_add_up_in_every_mode_and_placement() {
    let _serial = labtest::serial();
    let mut pins = vec![Pin::Same, Pin::None];
    if allowed_cpus().len() >= 2 {
        pins.push(Pin::Cross);
    } else {
        labtest::skipped("--pin cross: this test may run on one CPU only");
    }
    for mode in [Mode::Threads, Mode::Processes] {
        for &pin in &pins {
            let args = ["-m", mode.name(), "-p", pin.name(), "-n", "200"];
            let r = report(&[&args[..], &["--warmup", "0"]].concat());
            let what = format!("{r:?}");
            assert_eq!((r.mode, r.pin, r.iterations), (mode, pin, 200), "{what}");
            let s = &r.switches;
            assert_eq!(s.expected, 400, "{what}");
            let counted = s.voluntary + s.involuntary;
            assert_eq!(s.holds, ctxswitch::agrees(400, counted), "{what}");
            assert!((s.per_round_trip - counted as f64 / 200.0).abs() < 1e-9);
            let rt = r.us_per_round_trip;
            assert!(rt > 0.0, "{what}");
            assert!((r.us_per_switch - rt / 2.0).abs() < 1e-9, "{what}");
            let net = r.net_us_per_round_trip;
            assert!((net - (rt - 2.0 * r.pipe_us)).abs() < 1e-9, "{what}");
            assert!((r.net_us_per_switch - net / 2.0).abs() < 1e-9, "{what}");
        }
    }
}

#[test]
fn the_tasks_run_where_they_were_pinned() {
    let _serial = labtest::serial();
    let cpus = allowed_cpus();
    let last = *cpus.last().unwrap();
    for mode in ["threads", "processes"] {
        let r = json(&["-m", mode, "-n", "50"]);
        assert_eq!(r["cpus"], serde_json::json!([cpus[0], cpus[0]]), "{r}");
        assert_eq!(r["last_cpus"], r["cpus"], "{r}");
        let r = json(&["-m", mode, "-n", "50", "--cpus", &last.to_string()]);
        assert_eq!(r["last_cpus"], serde_json::json!([last, last]), "{r}");
        let r = json(&["-m", mode, "-p", "none", "-n", "50"]);
        assert_eq!(r["cpus"], Value::Null, "{r}");
        if cpus.len() >= 2 {
            let pair = format!("{},{}", cpus[1], cpus[0]);
            let r = json(&["-m", mode, "-p", "cross", "-n", "50", "--cpus", &pair]);
            assert_eq!(r["cpus"], serde_json::json!([cpus[1], cpus[0]]), "{r}");
            assert_eq!(r["last_cpus"], r["cpus"], "{r}");
        }
    }
}

#[test]
fn the_text_report_names_both_figures_and_the_check() {
    let out = ctxswitch().args(["-m", "processes", "-n", "100"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for part in ["per switch (raw)", "per switch (net)", "pipe write+read alone"] {
        assert!(text.contains(part), "{part}: {text}");
    }
    // The check's verdict is the scheduler's (a busy machine adds
    // switches): ok and exit 0, or MISMATCH and exit 1, never another mix.
    let check = "expected 2200 (2 per round trip): ";
    match out.status.code() {
        Some(0) => assert!(text.contains(&format!("{check}ok")), "{text}"),
        Some(1) => assert!(text.contains(&format!("{check}MISMATCH")), "{text}"),
        code => panic!("exit {code:?}: {text}"),
    }
}

#[test]
fn impossible_placements_exit_2() {
    for (pin, cpus, says) in [
        ("none", "0", "--cpus needs --pin same or cross"),
        ("cross", "0,0", "two different CPUs"),
        ("same", "4000", "CPU 4000 is not one this process may run on"),
    ] {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ctxswitch"));
        let line =
            usage_error("ctxswitch", cmd.args(["--pin", pin, "--cpus", cpus]));
        assert!(line.contains(says), "{line}");
    }
    let taskset = std::process::Command::new("taskset").arg("-V").output();
    if !taskset.is_ok_and(|o| o.status.success()) {
        labtest::skipped("the one-CPU case: no taskset");
        return;
    }
    let cpu = allowed_cpus()[0].to_string();
    let mut taskset = std::process::Command::new("taskset");
    taskset.args(["-c", &cpu]).arg(env!("CARGO_BIN_EXE_ctxswitch"));
    assert_eq!(
        usage_error("ctxswitch", taskset.args(["--pin", "cross"])),
        format!(
            "ctxswitch: --pin cross needs two CPUs; this process may run only on CPU {cpu}"
        )
    );
}

#[test]
fn bad_flags_exit_2_with_usage() {
    usage_errors(
        env!("CARGO_BIN_EXE_ctxswitch"),
        &[
            &["--mode", "fibers"],
            &["--pin", "left"],
            &["--iterations", "0"],
            &["-n", "many"],
            &["--warmup", "-1"],
            &["--cpus", "x"],
            &["--frobnicate"],
        ],
    );
}

#[test]
fn help_documents_every_flag_and_default() {
    labtest::help_mentions(
        env!("CARGO_BIN_EXE_ctxswitch"),
        &[
            "--mode",
            "[default: threads]",
            "--pin",
            "[default: same]",
            "--iterations",
            "[default: 100000]",
            "--warmup",
            "[default: 1000]",
            "--cpus",
            "--json",
            "Exit status",
        ],
    );
}

#[test]
fn a_killed_child_is_reported_not_waited_for_forever() {
    let _serial = labtest::serial();
    // Long enough (seconds) that the child is still bouncing when killed.
    let mut parent = std::process::Command::new(env!("CARGO_BIN_EXE_ctxswitch"))
        .args(["-m", "processes", "-p", "none", "-n", "500000"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the event, the child appearing, not for a time: a parent
    // that ends first never forked, which is a failure.
    let child = loop {
        if let Some(&pid) = labkit::affinity::children(parent.id()).first() {
            break Some(pid);
        }
        if parent.try_wait().unwrap().is_some() {
            break None;
        }
        std::thread::yield_now();
    };
    let Some(child) = child else {
        let out = parent.wait_with_output().unwrap();
        panic!("ctxswitch ended without forking: {out:?}");
    };
    // SAFETY: a plain kill(2) of ctxswitch's own child.
    assert_eq!(unsafe { libc::kill(child, libc::SIGKILL) }, 0);
    let out = parent.wait_with_output().unwrap();
    assert_eq!(
        labtest::failed("ctxswitch", &out),
        format!("ctxswitch: task B: child {child}: was killed by SIGKILL")
    );
}
