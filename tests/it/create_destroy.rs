//! `lab run create-destroy` and `lab run spawn-methods` at tiny sizes:
//! they run, check what they run, and write parseable results.

use crate::common;

#[test]
fn create_destroy_smoke_run_writes_results() {
    let _serial = labtest::serial();
    let dir = labtest::tempdir();
    // creattime's sample counts at the top of its range: a round times
    // 510 create calls of each kind at every count, so a count of 3 is
    // 170 runs of the program (each with its 10 ms sleep) and 255 is two.
    let args = ["--rounds", "2", "--iterations", "30", "--samples", "170,255"];
    labtest::run(
        common::lab_run("create-destroy", &args, dir.path())
            .args(["--lecture-iterations", "20"]),
    )
    .success()
    .stdout_has("The lecture's loops, iter = 20")
    .stdout_has("| Processes");
    let r = common::read_json(dir.path().join("create-destroy.json"));
    assert_eq!(r["experiment"], "create-destroy");
    let programs = r["programs"].as_array().unwrap();
    assert_eq!(
        programs,
        &["forkcreat --reap sigchld", "forkcreat --reap wait", "pthreadcreat"]
    );
    // Each program's series at table 1's setting: two rounds, even
    // already, so the engine's order is balanced as asked.
    let series = r["series"].as_array().unwrap();
    let find = |f: &dyn Fn(&serde_json::Value) -> bool| {
        let found: Vec<_> = series.iter().filter(|s| f(s)).collect();
        assert_eq!(found.len(), 1, "{found:?}");
        found[0]
    };
    for program in programs {
        let row = find(&|s| s["loops"] == "article" && s["condition"] == *program);
        assert_eq!(row["iterations"], 30);
        assert_eq!(row["us_per_create"]["n"], 2);
        assert!(row["us_per_create"]["median"].as_f64().unwrap() > 0.0, "{row}");
    }
    assert_eq!(r["samples"], serde_json::json!([170, 255]));
    let ct = find(&|s| s["samples"] == 255 && s["condition"] == "creattime");
    assert!(ct["ratio"]["median"].as_f64().unwrap() > 0.0);
    // Every run is an observation, exactly once: a warm-up of each program
    // (the lecture's are table 1's), then each setting's rounds, the
    // lecture's pair at twice the rounds.
    let obs = r["observations"].as_array().unwrap();
    let warm = obs.iter().filter(|o| o["round"].is_null()).count();
    assert_eq!((warm, obs.len()), (3 + 1, 3 + 1 + 3 * 2 + 2 * 4 + 2 * 2));
    assert_eq!(r["lecture_rounds"], 4);
    let lecture =
        find(&|s| s["loops"] == "lecture" && s["condition"] == "pthreadcreat");
    assert_eq!(lecture["us_per_create"]["n"], 4);
    let mut seen = std::collections::BTreeSet::new();
    for o in obs.iter().filter(|o| !o["round"].is_null()) {
        let key = (o["setting"].to_string(), o["condition"].to_string());
        assert!(seen.insert((key, o["round"].as_u64())), "twice: {o}");
    }
    for file in ["tables.md", "creattime.svg", "create-destroy.svg"] {
        assert!(dir.path().join(file).is_file(), "{file} missing");
    }
}

#[test]
fn create_destroy_pairs_rust_with_c() {
    let _serial = labtest::serial();
    labtest::require!(labtest::have_tool("cc"), "no C compiler (cc)");
    let dir = labtest::tempdir();
    let args = ["--rounds", "1", "--iterations", "20", "--lecture-iterations", "5"];
    // 255 samples: two runs of each creattime a round, where 2 would be 255.
    let args = [&args[..], &["--samples", "255", "--vs-c"]].concat();
    let r = common::run_json("create-destroy", &args, dir.path());
    let pairs = r["vs_c"].as_array().unwrap();
    // forkcreat in two reap modes against plain C and C with Rust's
    // mappings, pthreadcreat against plain C.
    let against = common::strings(&r["vs_c"], "against");
    assert_eq!(
        against,
        [
            "forkcreat --reap sigchld (C)",
            "forkcreat --reap sigchld (C, Rust's mappings)",
            "forkcreat --reap wait (C)",
            "forkcreat --reap wait (C, Rust's mappings)",
            "pthreadcreat (C)",
        ],
        "{r}"
    );
    assert!(pairs.iter().all(|p| p["ratio"]["median"].as_f64().unwrap() > 0.0));
    // One round asked is two, so that each pair goes in each order once.
    assert!(pairs.iter().all(|p| p["ratio"]["n"] == 2), "{r}");
    // creattime.c ran beside creattime, read through the same report.
    let series = r["series"].as_array().unwrap();
    let c: Vec<_> =
        series.iter().filter(|s| s["condition"] == "creattime (C)").collect();
    assert_eq!(c.len(), 1, "{r}");
    assert_eq!(c[0]["samples"], 255);
    assert!(c[0]["thread_ms"]["median"].as_f64().unwrap() > 0.0, "{r}");
    let tables = std::fs::read_to_string(dir.path().join("tables.md")).unwrap();
    assert!(tables.contains("5. creattime against creattime.c"), "{tables}");
}

/// A C program's `--json` output, which must parse into the Rust twin's
/// report type.
fn run_c<T: serde::de::DeserializeOwned>(
    path: &std::path::Path,
    args: &[&str],
) -> T {
    let out = std::process::Command::new(path).args(args).output().unwrap();
    labtest::report(&out)
}

#[test]
fn forkcreat_c_prints_forkcreats_report() {
    let _serial = labtest::serial();
    let Some(c) = common::c_program("forkcreat") else { return };
    for (mode, reap) in
        [("wait", forkcreat::Reap::Wait), ("sigchld", forkcreat::Reap::Sigchld)]
    {
        let r: forkcreat::Report = run_c(&c, &["20", mode, "--json"]);
        assert_eq!(r.reap, Some(reap));
        assert_eq!((r.iterations, r.created, r.failed), (20, 20, 0), "{r:?}");
        assert_eq!((r.reaped, r.bad_exits, r.left_behind), (20, 0, 0), "{r:?}");
        assert!(r.end.us_per_create.is_some_and(|us| us > 0.0), "{r:?}");
        assert_eq!(r.end.first_error, None);
    }
    // Without --json, the article's two lines, as before.
    let out = std::process::Command::new(&c).arg("3").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("created: 3, failed: 0, reaped: 3\n"), "{text}");
}

#[test]
fn pthreadcreat_c_prints_pthreadcreats_report() {
    let Some(c) = common::c_program("pthreadcreat") else { return };
    let r: pthreadcreat::Report = run_c(&c, &["20", "--json"]);
    assert_eq!(r.api, pthreadcreat::Api::Pthread);
    assert_eq!((r.iterations, r.created, r.joined, r.failed), (20, 20, 20, 0));
    assert_eq!(r.panicked, 0);
    // A NULL attr's stack: what the Rust program uses by default.
    assert_eq!(r.stack_size, labkit::limits::pthread_default_stack());
    assert!(r.end.us_per_create.is_some_and(|us| us > 0.0), "{r:?}");
}

#[test]
fn creattime_c_prints_creattimes_report_and_reaps_everything() {
    let _serial = labtest::serial();
    let Some(c) = common::c_program("creattime") else { return };
    let r: creattime::Report = run_c(&c, &["6", "--json"]);
    assert_eq!(r.samples, 6);
    for kind in [&r.fork, &r.thread] {
        assert_eq!((kind.successes, kind.failures), (6, 0), "{r:?}");
        assert!(kind.average_ms.is_some_and(|ms| ms > 0.0), "{r:?}");
    }
    assert_eq!((r.reaped, r.joined, r.left_behind), (6, 6, 0), "{r:?}");
    assert!(r.average_ratio.is_some() && r.total_ratio.is_some(), "{r:?}");
    // The post's own lines without --json.
    let out = std::process::Command::new(&c).arg("2").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("Fork failures: 0 (success: 2)\n"), "{text}");
}

#[test]
fn creattime_c_reports_failed_forks_in_the_same_json() {
    let _serial = labtest::serial();
    labtest::require!(labtest::is_root(), "needs root to run as nobody");
    let Some(c) = common::c_program("creattime") else { return };
    // nobody may have one process (itself): every fork fails with EAGAIN.
    let Some(copy) = labtest::copy_for_nobody(&c) else { return };
    let mut cmd = copy.command();
    cmd.args(["3", "--json"]);
    let limits = labkit::limited::Limits {
        nproc: Some(1),
        user: Some(labkit::limited::NOBODY),
        ..Default::default()
    };
    let out = labkit::limited::apply(&mut cmd, limits).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let r: creattime::Report = labtest::json(&out.stdout);
    assert_eq!((r.fork.failures, r.fork.successes), (3, 0), "{r:?}");
    assert_eq!(r.fork.average_ms, None);
    let err = r.fork.first_error.unwrap();
    assert!(err.contains("EAGAIN"), "{err}");
}

#[test]
fn spawn_methods_smoke_run_writes_results() {
    let _serial = labtest::serial();
    let dir = labtest::tempdir();
    let args = ["--rounds", "1", "--budget", "0.002", "--rss", "0,8M"];
    let r = common::run_json("spawn-methods", &args, dir.path());
    let series = r["series"].as_array().unwrap();
    let part = |name: &'static str| series.iter().filter(move |s| s["part"] == name);
    // Every method, each a condition: eleven of them, in one round asked,
    // made two so that each pair goes in each order once.
    let methods: Vec<_> = part("methods").collect();
    assert_eq!(methods.len(), 11, "{r}");
    for m in &methods {
        assert!(m["us"]["median"].as_f64().unwrap() > 0.0, "{m}");
        assert_eq!(m["us"]["n"], 2, "{m}");
    }
    // A warm-up of each method, the first time it runs: eleven in all.
    let obs = r["observations"].as_array().unwrap();
    assert_eq!(obs.iter().filter(|o| o["round"].is_null()).count(), 11);
    assert_eq!(r["rss"], serde_json::json!([0, 8 << 20]));
    // The touched region really was resident while the children forked.
    let vm_rss = |bytes: u64| {
        let fork = part("rss")
            .find(|s| s["touched_bytes"] == bytes && s["condition"] == "fork-wait");
        fork.unwrap()["vm_rss_kib"]["median"].as_f64().unwrap()
    };
    let (small, big) = (vm_rss(0), vm_rss(8 << 20));
    assert!(big >= small + 7.0 * 1024.0, "{small} KiB then {big} KiB");
    // The pool's hand-off at each placement: unpinned and on one CPU, and
    // with two CPUs on two.
    let placements: Vec<&str> = r["placements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[0].as_str().unwrap())
        .collect();
    assert!(placements.len() >= 2 && placements[..2] == ["unpinned", "one-cpu"]);
    for p in placements {
        let pool = part("placement")
            .find(|s| s["placement"] == p && s["condition"] == "pool");
        assert!(pool.is_some(), "no pool hand-off at {p}");
    }
    for file in ["tables.md", "spawn-methods.svg", "rss.svg", "placement.svg"] {
        assert!(dir.path().join(file).is_file(), "{file} missing");
    }
}

#[test]
fn spawn_methods_refuses_more_rss_than_the_memory_available() {
    let available = spawn_methods::mem_available().unwrap();
    labtest::require!(
        available < 64 << 30,
        "64 GiB or more available: nothing to refuse"
    );
    let dir = labtest::tempdir();
    let out = dir.path().to_str().unwrap();
    let args = ["run", "spawn-methods", "--rss", "0,64G", "--out", out];
    let err = common::lab_refuses(&args);
    assert!(err.contains("--rss 64G: more than the memory available"), "{err}");
    // Refused before anything ran: no results.
    assert!(!dir.path().join("spawn-methods.json").exists());
}

#[test]
fn bad_flags_exit_2() {
    common::bad_flags_exit_2(
        "create-destroy",
        &[&["--samples", "0"], &["--iterations", "x"]],
    );
    common::bad_flags_exit_2(
        "spawn-methods",
        &[&["--rss", "12Q"], &["--budget", "0"]],
    );
    let exec = ["run", "spawn-methods", "--exec", "/nonexistent/program"];
    let err = common::lab_refuses(&exec);
    assert!(err.contains("--exec /nonexistent/program: no such program"), "{err}");
    let err = common::lab_refuses(&["run", "spawn-methods", "--exec", "/tmp"]);
    assert!(err.contains("--exec /tmp: a folder, not a program"), "{err}");
}
