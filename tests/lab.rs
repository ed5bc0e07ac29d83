//! The runner itself: listing, unknown names, usage.

mod common;

use common::lab;
use predicates::prelude::*;

#[test]
fn list_names_every_experiment() {
    let out = lab().arg("list").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    // One line per experiment, in the book's order: its name, then what
    // it is about.
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), lab::experiments::ALL.len(), "{text}");
    for (line, experiment) in lines.iter().zip(lab::experiments::ALL) {
        let (name, about) = line.split_once(' ').unwrap();
        assert_eq!((name, about.trim()), (experiment.name, experiment.about));
    }
}

#[test]
fn an_unknown_experiment_exits_2_listing_the_known_ones() {
    lab()
        .args(["run", "fork-vs-threads"])
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::starts_with(
            "lab: unknown experiment 'fork-vs-threads'",
        ))
        .stderr(predicate::str::contains("fork-vs-thread"));
}

#[test]
fn bad_usage_exits_2() {
    // No subcommand: one line that names the choices, exit 2.
    let err = common::lab_refuses(&[]);
    assert!(err.starts_with("lab: a subcommand is required (list, run, "), "{err}");
    assert!(err.ends_with("); see 'lab --help'"), "{err}");
    let err = common::lab_refuses(&["walk"]);
    assert_eq!(err, "lab: unrecognized subcommand 'walk'; see 'lab --help'");
    common::bad_flags_exit_2(
        "fork-vs-thread",
        &[
            &["--rounds", "0"],
            &["--procs", "4"],
            &["--full", "--procs", "4", "--counts", "1"],
        ],
    );
    // The conflict names both flags.
    let full = ["run", "fork-vs-thread", "--full", "--procs", "4", "--counts", "1"];
    let err = labkit::testing::usage_error(
        "lab run fork-vs-thread",
        common::lab_std().args(full),
    );
    assert!(err.contains("'--full'") && err.contains("'--procs"), "{err}");
}

#[test]
fn help_reaches_the_runner_and_each_experiment() {
    lab()
        .args(["run", "--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains("Usage: lab run NAME"))
        .stdout(predicate::str::contains("fork-vs-thread"));
    for experiment in lab::experiments::ALL {
        lab().args(["run", experiment.name, "--help"]).assert().success().stdout(
            predicate::str::contains(format!("Usage: lab run {}", experiment.name)),
        );
    }
}
