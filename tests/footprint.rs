//! `lab run footprint` end to end, at tiny settings.

mod common;

use common::{lab, run_json};
use serial_test::serial;

#[test]
#[serial(fork)]
fn a_tiny_run_writes_parseable_results() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--rounds",
        "2",
        "--workers",
        "2,5",
        "--touch",
        "256K",
        "--cow-workers",
        "3",
    ];
    let saved = run_json("footprint", &args, dir.path());
    assert_eq!(saved["experiment"], "footprint");

    let idle = saved["idle"].as_array().unwrap();
    let shape: Vec<(String, u64)> = idle
        .iter()
        .map(|r| {
            (r["kind"].as_str().unwrap().into(), r["workers"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(
        shape,
        [
            ("threads".into(), 2),
            ("procs".into(), 2),
            ("threads".into(), 5),
            ("procs".into(), 5)
        ]
    );
    for r in idle {
        assert_eq!(r["runs"].as_array().unwrap().len(), 2);
        // Every thread reserves a stack: address space grows per worker.
        let space = r["per_worker_kib"]["address_space"]["median"].as_f64().unwrap();
        assert!(space > 16.0, "{r}");
    }
    // Copy-on-write: each process copied the 256 KiB it wrote.
    let cow = saved["cow"].as_array().unwrap();
    assert_eq!(cow[1]["kind"], "procs");
    let copied = cow[1]["per_worker_kib"]["pss"]["median"].as_f64().unwrap();
    assert!(copied >= 200.0, "{copied}");

    let tables = std::fs::read_to_string(dir.path().join("tables.md")).unwrap();
    assert!(tables.contains("copy-on-write"), "{tables}");
    assert!(dir.path().join("per-worker.svg").is_file());
}

#[test]
fn bad_flags_exit_2() {
    for args in [
        &["--workers", "0"][..],
        &["--touch", "1"],
        &["--cow-workers", "100"],
        &["--timeout", "0"],
    ] {
        lab().args(["run", "footprint"]).args(args).assert().code(2);
    }
}
