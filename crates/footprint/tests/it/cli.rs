//! The `footprint` program: its figures make sense, copy-on-write copies,
//! threads share, bad flags exit 2.

use footprint::{Footprint, Kind, Snapshot};
use std::process::Command;

/// `footprint ARGS --json`: its report, as its own type.
fn footprint(args: &[&str]) -> Footprint {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_footprint"));
    labtest::report(&cmd.args(args).arg("--json").output().unwrap())
}

/// `during - before` of one figure, all workers together, KiB.
fn delta(v: &Footprint, field: fn(&Snapshot) -> u64) -> i64 {
    field(&v.during) as i64 - field(&v.before) as i64
}

#[test]
fn idle_threads_reserve_stacks_and_use_little() {
    let _serial = labtest::serial();
    let v = footprint(&["--kind", "threads", "--workers", "6"]);
    assert_eq!((v.workers, v.kind), (6, Kind::Threads));
    // Each thread reserves a whole stack (glibc's default: this process's
    // RLIMIT_STACK, which footprint inherits) but touches only a few pages.
    let stack_kib = labkit::limits::pthread_default_stack() as i64 / 1024;
    assert!(delta(&v, |s| s.vm_size_kib) >= 6 * stack_kib, "{v:?}");
    let pss = delta(&v, |s| s.pss_anon_kib);
    assert!(pss > 0 && pss < 6 * 1024, "{v:?}");
}

#[test]
fn written_pages_are_copied_for_processes_only() {
    let _serial = labtest::serial();
    // 1 MiB filled by the parent, then written by every worker.
    let procs = footprint(&["--kind", "procs", "--workers", "4", "--touch", "1M"]);
    assert!(delta(&procs, |s| s.pss_anon_kib) >= 4 * 1000, "{procs:?}");
    let threads =
        footprint(&["--kind", "threads", "--workers", "4", "--touch", "1M"]);
    assert!(delta(&threads, |s| s.pss_anon_kib) < 1000, "{threads:?}");
}

#[test]
fn bad_flags_exit_2() {
    let _serial = labtest::serial();
    labtest::usage_errors(
        env!("CARGO_BIN_EXE_footprint"),
        &[
            &["--workers", "0"],
            &["--kind", "fibers"],
            &["--touch", "2G"],
            &["--touch", "lots"],
        ],
    );
}
