//! The `footprint` program: its figures make sense, copy-on-write copies,
//! threads share, bad flags exit 2.

use assert_cmd::Command;
use serde_json::Value;
use serial_test::serial;

fn footprint(args: &[&str]) -> Value {
    let out = Command::cargo_bin("footprint")
        .unwrap()
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn delta(v: &Value, field: &str) -> i64 {
    v["during"][field].as_i64().unwrap() - v["before"][field].as_i64().unwrap()
}

#[test]
#[serial(fork)]
fn idle_threads_reserve_stacks_and_use_little() {
    let v = footprint(&["--kind", "threads", "--workers", "6"]);
    assert_eq!(v["workers"], 6);
    assert_eq!(v["kind"], "threads");
    // Each thread reserves a whole stack (at least 16 KiB) but touches only
    // a few pages of it.
    assert!(delta(&v, "vm_size_kib") >= 6 * 16, "{v}");
    let pss = delta(&v, "pss_anon_kib");
    assert!(pss > 0 && pss < 6 * 1024, "{v}");
}

#[test]
#[serial(fork)]
fn written_pages_are_copied_for_processes_only() {
    // 1 MiB filled by the parent, then written by every worker.
    let procs = footprint(&["--kind", "procs", "--workers", "4", "--touch", "1M"]);
    assert!(delta(&procs, "pss_anon_kib") >= 4 * 1000, "{procs}");
    let threads =
        footprint(&["--kind", "threads", "--workers", "4", "--touch", "1M"]);
    assert!(delta(&threads, "pss_anon_kib") < 1000, "{threads}");
}

#[test]
#[serial(fork)]
fn bad_flags_exit_2() {
    for args in [
        &["--workers", "0"][..],
        &["--kind", "fibers"],
        &["--touch", "2G"],
        &["--touch", "lots"],
    ] {
        Command::cargo_bin("footprint").unwrap().args(args).assert().code(2);
    }
}
