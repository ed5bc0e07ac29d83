//! `lab run fork-vs-thread` end to end, at tiny settings.

use crate::common;

use crate::common::{lab_fails, lab_run, run_json};

#[test]
fn a_tiny_run_writes_parseable_results() {
    let _serial = labtest::serial();
    let dir = labtest::tempdir();
    let args = ["--procs", "3", "--counts", "5,20", "--rounds", "2"];
    let saved = run_json("fork-vs-thread", &args, dir.path());

    assert_eq!(saved["experiment"], "fork-vs-thread");
    assert!(saved["command"].as_str().unwrap().contains("--counts 5,20"));
    assert!(!saved["machine"]["kernel"].as_str().unwrap().is_empty());
    assert!(saved["machine"]["logical_cpus"].as_u64().unwrap() >= 1);
    assert_eq!(saved["rounds"], 2);
    let grids = saved["grids"].as_array().unwrap();
    assert_eq!(grids.len(), 1);
    assert_eq!(
        (&grids[0]["name"], &grids[0]["axis"]),
        (&"custom".into(), &"count".into())
    );
    // One series per program and setting, named by its factors.
    let series = saved["series"].as_array().unwrap();
    assert_eq!(series.len(), 4);
    for count in [5, 20] {
        for program in ["fork", "thread"] {
            let s = series
                .iter()
                .find(|s| s["count"] == count && s["condition"] == program)
                .unwrap_or_else(|| panic!("no series {program} at {count}"));
            assert_eq!(s["procs"], 3);
            let wall = &s["wall_s"];
            assert_eq!(wall["n"], 2);
            assert!(wall["min"].as_f64().unwrap() > 0.0);
            assert!(wall["min"].as_f64() <= wall["median"].as_f64());
            assert!(wall["median"].as_f64() <= wall["max"].as_f64());
            assert!(s["max_rss_kib"]["min"].as_f64().unwrap() > 0.0);
        }
    }
    // Every run is an observation: a warm-up of each program, then two
    // rounds of each at each setting, in the engine's order.
    let obs = saved["observations"].as_array().unwrap();
    assert_eq!(obs.len(), 2 + 2 * 2 * 2);
    let warm: Vec<_> = obs.iter().filter(|o| o["round"].is_null()).collect();
    assert_eq!(warm.len(), 2);
    for o in obs.iter().filter(|o| !o["round"].is_null()) {
        assert!(o["metrics"]["wall_s"].as_f64().unwrap() > 0.0, "{o}");
    }
    let tables = std::fs::read_to_string(dir.path().join("tables.md")).unwrap();
    assert!(tables.contains("| fork/thread |"), "{tables}");
    assert!(tables.contains("lab run fork-vs-thread"), "{tables}");
    let svg = std::fs::read_to_string(dir.path().join("custom.svg")).unwrap();
    assert!(svg.starts_with("<svg"));
    // Nothing but the results: every run's temporary log was removed.
    let mut files: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    assert_eq!(files, ["custom.svg", "fork-vs-thread.json", "tables.md"]);
}

#[test]
fn the_table_is_printed_by_default() {
    let _serial = labtest::serial();
    let dir = labtest::tempdir();
    let args = ["--procs", "2,4", "--counts", "3", "--rounds", "1"];
    labtest::run(&mut lab_run("fork-vs-thread", &args, dir.path()))
        .success()
        .stdout_has("P | COUNT | fork/thread |")
        .stderr_has("results written to");
    assert!(dir.path().join("custom.svg").is_file(), "workers axis chart");
}

#[test]
fn an_unwritable_results_directory_fails_before_measuring() {
    let dir = labtest::tempdir();
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    let sub = file.join("sub");
    let args = ["--procs", "2", "--counts", "1"];
    let err = lab_fails(&mut lab_run("fork-vs-thread", &args, &sub));
    let not_a_dir = "Not a directory (ENOTDIR)";
    assert_eq!(err, format!("lab: {}: {not_a_dir}", sub.display()));
}

#[test]
fn a_failing_program_fails_the_experiment_with_its_reason() {
    let _serial = labtest::serial();
    // A program that cannot run its setting: fork under a tiny process limit
    // would need another user, so use a bad binary directory instead.
    let dir = labtest::tempdir();
    labtest::write_executable(
        dir.path().join("fork"),
        "#!/bin/sh\necho 'fork: boom' >&2; exit 1\n",
    );
    labtest::write_executable(dir.path().join("thread"), "#!/bin/sh\nexit 0\n");
    let out = labtest::tempdir();
    let args = ["--procs", "2", "--counts", "1", "--rounds", "1"];
    let mut cmd = lab_run("fork-vs-thread", &args, out.path());
    let err = lab_fails(cmd.env("LAB_BIN_DIR", dir.path()));
    assert_eq!(err, "lab: fork P=2 COUNT=1: exited with status 1: fork: boom");
}

#[test]
fn vs_c_runs_the_c_originals_and_checks_their_bytes() {
    let _serial = labtest::serial();
    labtest::require!(labtest::have_tool("cc"), "no C compiler (cc)");
    let dir = labtest::tempdir();
    let args = ["--procs", "3", "--counts", "4", "--rounds", "2", "--vs-c"];
    let saved = run_json("fork-vs-thread", &args, dir.path());
    let names = common::strings(&saved["series"], "condition");
    assert_eq!(names, ["fork", "thread", "fork.c", "thread.c"]);
    for s in saved["series"].as_array().unwrap() {
        assert_eq!(s["wall_s"]["n"], 2, "two rounds, balanced as they are: {s}");
    }
    let tables = std::fs::read_to_string(dir.path().join("tables.md")).unwrap();
    assert!(tables.contains("fork/fork.c | thread/thread.c |"), "{tables}");
    assert!(tables.contains("fork.c s |") && tables.contains("thread.c s |"));
}

#[test]
fn fork_c_and_thread_c_print_the_rust_programs_report() {
    let _serial = labtest::serial();
    for name in ["fork", "thread"] {
        let Some(c) = common::c_program(name) else { return };
        let dir = labtest::tempdir();
        let log = dir.path().join("log");
        let out = std::process::Command::new(&c)
            .args(["3", "4"])
            .arg(&log)
            .args(["16", "--json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        // The workers' lines, then the report instead of "Okay".
        let stdout = String::from_utf8(out.stdout).unwrap();
        let (lines, last) = stdout.trim_end().rsplit_once('\n').unwrap();
        let r: labkit::cli::Report = labtest::json(last.as_bytes());
        assert_eq!((r.workers, r.count, r.lines), (3, 4, 12), "{name}: {r:?}");
        assert!(r.elapsed_s > 0.0, "{name}: {r:?}");
        assert_eq!(lines.lines().count(), 12, "{name}: {stdout}");
        // 12 lines of "[j]" and 16 bytes of text and "\n".
        assert_eq!(std::fs::read(&log).unwrap().len(), 12 * (3 + 16 + 1), "{name}");
    }
}
