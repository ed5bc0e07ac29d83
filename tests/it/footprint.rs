//! `lab run footprint` end to end, at tiny settings.

use crate::common;

use crate::common::run_json;

#[test]
fn a_tiny_run_writes_parseable_results() {
    let _serial = labtest::serial();
    let dir = labtest::tempdir();
    let args: Vec<&str> =
        "--rounds 2 --workers 2,5 --touch 256K --cow-workers 3".split(' ').collect();
    let saved = run_json("footprint", &args, dir.path());
    assert_eq!(saved["experiment"], "footprint");

    // Threads and processes at each setting: idle at 2 and 5 workers, then
    // copy-on-write at 3, each kind once per round in each.
    let series = saved["series"].as_array().unwrap();
    let shape: Vec<(&str, u64, &str)> = series
        .iter()
        .map(|s| {
            let test = s["test"].as_str().unwrap();
            (test, s["workers"].as_u64().unwrap(), s["condition"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        shape,
        [
            ("idle", 2, "threads"),
            ("idle", 2, "processes"),
            ("idle", 5, "threads"),
            ("idle", 5, "processes"),
            ("cow", 3, "threads"),
            ("cow", 3, "processes"),
        ]
    );
    // Every run is an observation: a warm-up of each kind, then two rounds
    // of each at each setting.
    let obs = saved["observations"].as_array().unwrap();
    assert_eq!(obs.len(), 2 + 3 * 2 * 2);
    assert_eq!(obs.iter().filter(|o| o["round"].is_null()).count(), 2);
    // The thread stack glibc gives footprint's workers (it inherits this
    // process's RLIMIT_STACK), in KiB.
    let stack_kib = labkit::limits::pthread_default_stack() as f64 / 1024.0;
    for s in series.iter().filter(|s| s["test"] == "idle") {
        assert_eq!(s["pss_kib"]["n"], 2, "{s}");
        let space = s["address_space_kib"]["median"].as_f64().unwrap();
        if s["condition"] == "threads" {
            // Every thread reserves a whole stack (and a guard page).
            assert!(space >= stack_kib, "{space} KiB < a {stack_kib} KiB stack");
        } else {
            // Every child maps all the parent had when it forked.
            let parent = s["parent_address_space_kib"]["min"].as_f64().unwrap();
            assert!(space >= 0.9 * parent, "{space} KiB, parent {parent} KiB");
        }
    }
    // Copy-on-write: each process copied the 256 KiB it wrote.
    let cow = &series[5];
    assert_eq!(
        (&cow["test"], &cow["condition"]),
        (&"cow".into(), &"processes".into())
    );
    assert_eq!(cow["touch_bytes"], 256 << 10);
    let copied = cow["pss_kib"]["median"].as_f64().unwrap();
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
