//! pthreadcreat as a user runs it: counts, output, failures, usage.

use std::os::unix::process::CommandExt;

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn pthreadcreat() -> Command {
    Command::cargo_bin("pthreadcreat").unwrap()
}

#[test]
fn creates_and_joins_every_thread() {
    let out = pthreadcreat()
        .args(["--iterations", "500", "--stack-size", "64K", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let r: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(r["created"], 500, "{r}");
    assert_eq!(r["joined"], 500, "{r}");
    assert_eq!(r["failed"], 0, "{r}");
    assert_eq!(r["stack_size"], 65536, "{r}");
    assert_eq!(r["api"], "pthread", "{r}");
    let out = pthreadcreat()
        .args(["-n", "50", "--api", "std", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let r: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!((r["api"].as_str(), r["joined"].as_u64()), (Some("std"), Some(50)));
    pthreadcreat().args(["-n", "7"]).assert().success().stdout(
        predicate::str::is_match(
            r"^created: 7, failed: 0, joined: 7\n7 create\+destroy in [0-9.]+ s: [0-9.]+ us each\n$",
        )
        .unwrap(),
    );
}

#[test]
fn thread_create_failure_under_rlimit_as_is_counted_and_exits_1() {
    // 256 MiB of address space cannot hold a 1 GiB stack: every create
    // fails, and the program says so instead of crashing.
    for api in ["pthread", "std"] {
        as_limited(api);
    }
}

fn as_limited(api: &str) {
    let bin = assert_cmd::cargo::cargo_bin("pthreadcreat");
    let mut cmd = std::process::Command::new(bin);
    cmd.args(["-n", "5", "--stack-size", "1G", "--json", "--api", api]);
    // SAFETY: setrlimit is async-signal-safe; nothing else runs here.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit { rlim_cur: 256 << 20, rlim_max: 256 << 20 };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((r["created"].as_u64(), r["failed"].as_u64()), (Some(0), Some(5)));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("5 of 5 thread creates failed"), "{err}");
    assert!(err.contains("(E"), "names the errno: {err}");
}

#[test]
fn bad_flags_exit_2() {
    for args in [
        &["-n", "0"][..],
        &["--stack-size", "1K"],
        &["--stack-size", "8Q"],
        &["--api", "go"],
    ] {
        pthreadcreat().args(args).assert().code(2).stdout("");
    }
    pthreadcreat()
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("[default: 100000]"))
        .stdout(predicate::str::contains("RLIMIT_STACK"));
}
