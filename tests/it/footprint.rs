//! `lab run footprint` end to end, at tiny settings.

use crate::common;

use crate::common::run_json;
use footprint::Footprint;

#[test]
fn a_tiny_run_writes_parseable_results() {
    let _serial = labtest::serial();
    let dir = labtest::tempdir();
    let args: Vec<&str> =
        "--rounds 2 --workers 2,5 --touch 256K --cow-workers 3".split(' ').collect();
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
    // The thread stack glibc gives footprint's workers (it inherits this
    // process's RLIMIT_STACK), in KiB.
    let stack_kib = labkit::limits::pthread_default_stack() as f64 / 1024.0;
    for r in idle {
        let runs: Vec<Footprint> =
            serde_json::from_value(r["runs"].clone()).unwrap();
        assert_eq!(runs.len(), 2);
        let space = r["per_worker_kib"]["address_space"]["median"].as_f64().unwrap();
        if r["kind"] == "threads" {
            // Every thread reserves a whole stack (and a guard page).
            assert!(space >= stack_kib, "{space} KiB < a {stack_kib} KiB stack");
        } else {
            // Every child maps all the parent had when it forked.
            let parent = runs[0].before.vm_size_kib as f64;
            assert!(space >= 0.9 * parent, "{space} KiB, parent {parent} KiB");
        }
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
    common::bad_flags_exit_2(
        "footprint",
        &[
            &["--workers", "0"],
            &["--touch", "1"],
            &["--cow-workers", "100"],
            &["--timeout", "0"],
        ],
    );
}
