//! `lab run thread-limits` end to end, at tiny settings: every probe runs
//! bounded in its own limited child and its results parse.

use crate::common;

use crate::common::run_json;

#[test]
fn a_tiny_run_writes_parseable_results() {
    let _serial = labtest::serial();
    let dir = labtest::tempdir();
    let args: Vec<&str> =
        "--rounds 2 --as 512M --stacks 8M,1M --max 200 --threads 100 --nproc 16"
            .split(' ')
            .collect();
    let saved = run_json("thread-limits", &args, dir.path());
    assert_eq!(saved["experiment"], "thread-limits");
    assert_eq!(saved["max"], 200);

    // 512 MiB / 8 MiB = 64: fewer fit (the program's own mappings, guard
    // pages), creation stops with EAGAIN; 1 MiB stacks reach the cap.
    let stacks = saved["stacks"].as_array().unwrap();
    assert_eq!(stacks.len(), 2);
    assert_eq!(stacks[0]["predicted"], 64);
    // Every run is an observation: a warm-up of each condition, then the
    // rounds. What each round of `api` at `stack` created:
    let obs = saved["observations"].as_array().unwrap();
    let rounds = |factor: &str, value: serde_json::Value, condition: &str| {
        let at = |o: &&serde_json::Value| {
            o["setting"][factor] == value && o["condition"] == condition
        };
        let measured = obs.iter().filter(at).filter(|o| !o["round"].is_null());
        measured.map(|o| o["metrics"]["created"].as_f64()).collect::<Vec<_>>()
    };
    let created = rounds("stack_size", (8u64 << 20).into(), "pthread");
    assert_eq!(created.len(), 2);
    for c in created {
        assert!(c.is_some_and(|c| c > 0.0 && c < 64.0), "{c:?}");
    }
    assert_eq!(stacks[0]["runs"]["pthread"].as_array().unwrap().len(), 2);
    for probe in stacks[0]["runs"]["pthread"].as_array().unwrap() {
        assert_eq!(probe["stopped_by"], "EAGAIN");
    }
    assert_eq!(
        rounds("stack_size", (1u64 << 20).into(), "pthread"),
        [Some(200.0); 2]
    );
    assert_eq!(rounds("stack_size", (8u64 << 20).into(), "std").len(), 2);
    assert_eq!(stacks[0]["runs"]["std"].as_array().unwrap().len(), 2);
    let warm: Vec<&str> = obs
        .iter()
        .filter(|o| o["round"].is_null())
        .map(|o| o["condition"].as_str().unwrap())
        .collect();
    assert_eq!(warm, ["pthread", "std", "forks", "threads", "thread"]);
    let forks = rounds("limit", "RLIMIT_AS = 512M".into(), "forks");
    assert_eq!(forks, [Some(200.0); 2], "forks ignore RLIMIT_AS");

    // The thread program: 100 threads of 8 MiB do not fit in 512 MiB, and
    // it says so in one line with exit 1; 1 MiB stacks pass.
    let program = saved["program"].as_array().unwrap();
    assert_eq!(program.len(), 3);
    assert_eq!(program[0]["ended"], "exit 1");
    let said = program[0]["said"].as_str().unwrap();
    assert!(
        said.starts_with("thread: created ") && said.contains("EAGAIN"),
        "{said}"
    );
    for run in &program[1..] {
        assert_eq!(run["ended"], "exit 0", "{run}");
        assert_eq!(run["log_checked"], true);
    }
    // One run of the program at each setting, and its seconds.
    let runs =
        obs.iter().filter(|o| o["condition"] == "thread" && !o["round"].is_null());
    assert_eq!(
        runs.filter(|o| o["metrics"]["wall_s"].as_f64() > Some(0.0)).count(),
        3
    );

    let procs = saved["processes"].as_array().unwrap();
    assert_eq!(procs[0]["limit"], "RLIMIT_AS = 512M");
    assert_eq!(procs[0]["runs"]["forks"].as_array().unwrap().len(), 2);
    let overflow = saved["overflow"].as_array().unwrap();
    assert_eq!(overflow[0]["ended"], "SIGSEGV");
    assert_eq!(overflow[1]["ended"], "SIGABRT");

    let tables = std::fs::read_to_string(dir.path().join("tables.md")).unwrap();
    assert!(tables.contains("| stack |"), "{tables}");
    let svg =
        std::fs::read_to_string(dir.path().join("threads-vs-stack.svg")).unwrap();
    assert!(svg.starts_with("<svg"));
}

#[test]
fn bad_flags_exit_2() {
    common::bad_flags_exit_2(
        "thread-limits",
        &[
            &["--as", "1K"],
            &["--stacks", "8X"],
            &["--max", "0"],
            &["--nproc", "1"],
            &["--bogus"],
        ],
    );
}
