//! `lab run create-destroy` and `lab run spawn-methods` at tiny sizes:
//! they run, check what they run, and write parseable results.

mod common;

use predicates::prelude::*;
use serde_json::Value;
use serial_test::serial;

fn results(dir: &std::path::Path, name: &str) -> Value {
    let text = std::fs::read_to_string(dir.join(format!("{name}.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
#[serial(fork)]
fn create_destroy_smoke_run_writes_results() {
    let dir = tempfile::tempdir().unwrap();
    common::lab()
        .args(["run", "create-destroy", "--rounds", "2", "--iterations", "30"])
        .args(["--lecture-iterations", "20", "--samples", "3,5", "--out"])
        .arg(dir.path())
        .assert()
        .success()
        .stdout(predicate::str::contains("The lecture's loops, iter = 20"))
        .stdout(predicate::str::contains("| Processes"));
    let r = results(dir.path(), "create-destroy");
    assert_eq!(r["experiment"], "create-destroy");
    let programs: Vec<&str> = r["article"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["program"].as_str().unwrap())
        .collect();
    assert_eq!(
        programs,
        ["forkcreat --reap sigchld", "forkcreat --reap wait", "pthreadcreat"]
    );
    for row in r["article"].as_array().unwrap() {
        assert_eq!(row["iterations"], 30);
        assert_eq!(row["runs_us"].as_array().unwrap().len(), 2);
        assert!(row["us_per_create"]["median"].as_f64().unwrap() > 0.0, "{row}");
    }
    let ct = r["creattime"].as_array().unwrap();
    assert_eq!(ct.len(), 2);
    assert_eq!(ct[1]["samples"], 5);
    assert!(ct[1]["ratio"]["median"].as_f64().unwrap() > 0.0);
    for file in ["tables.md", "creattime.svg", "create-destroy.svg"] {
        assert!(dir.path().join(file).is_file(), "{file} missing");
    }
}

#[test]
#[serial(fork)]
fn create_destroy_pairs_rust_with_c() {
    if !common::have_cc() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    common::lab()
        .args(["run", "create-destroy", "--rounds", "1", "--iterations", "20"])
        .args([
            "--lecture-iterations",
            "5",
            "--samples",
            "2",
            "--vs-c",
            "--json",
            "--out",
        ])
        .arg(dir.path())
        .assert()
        .success();
    let r = results(dir.path(), "create-destroy");
    let pairs = r["vs_c"].as_array().unwrap();
    // forkcreat in two reap modes against plain C and C with Rust's
    // mappings, pthreadcreat against plain C.
    let against: Vec<&str> =
        pairs.iter().map(|p| p["against"].as_str().unwrap()).collect();
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
}

#[test]
#[serial(fork)]
fn spawn_methods_smoke_run_writes_results() {
    let dir = tempfile::tempdir().unwrap();
    common::lab()
        .args(["run", "spawn-methods", "--rounds", "1", "--budget", "0.002"])
        .args(["--rss", "0,8M", "--json", "--out"])
        .arg(dir.path())
        .assert()
        .success();
    let r = results(dir.path(), "spawn-methods");
    let methods = r["methods"].as_array().unwrap();
    assert_eq!(methods.len(), 11, "{r}");
    assert!(methods.iter().all(|m| m["us"]["median"].as_f64().unwrap() > 0.0));
    let rss = r["rss"].as_array().unwrap();
    assert_eq!(rss[1]["touched_bytes"], 8 << 20);
    // The touched region really was resident while the children forked.
    let (small, big) = (
        rss[0]["vm_rss_kib"].as_u64().unwrap(),
        rss[1]["vm_rss_kib"].as_u64().unwrap(),
    );
    assert!(big >= small + 7 * 1024, "{small} KiB then {big} KiB");
    assert!(r["placement"].as_array().unwrap().len() >= 2);
    for file in ["tables.md", "spawn-methods.svg", "rss.svg", "placement.svg"] {
        assert!(dir.path().join(file).is_file(), "{file} missing");
    }
}

#[test]
fn bad_flags_exit_2() {
    for args in [
        &["run", "create-destroy", "--samples", "0"][..],
        &["run", "create-destroy", "--iterations", "x"],
        &["run", "spawn-methods", "--rss", "12Q"],
        &["run", "spawn-methods", "--budget", "0"],
        &["run", "spawn-methods", "--exec", "/nonexistent/program"],
    ] {
        common::lab().args(args).assert().code(2);
    }
}
