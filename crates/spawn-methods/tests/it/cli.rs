//! spawn-methods as a user runs it alone: the methods in the order given,
//! calibrated or counted, memory touched, refused when too large, failing
//! cleanly when limited, usage.

use labkit::limited::Limits;
use labtest::{json, usage_error};
use spawn_methods::{Method, Report};
use std::process::Command;

fn spawn_methods() -> Command {
    Command::new(env!("CARGO_BIN_EXE_spawn-methods"))
}

#[test]
fn methods_run_in_the_order_given() {
    let _serial = labtest::serial();
    let out = labtest::run(
        spawn_methods()
            .args(["--method", "pool,fork-wait", "--method", "posix-spawn"])
            .args(["--iterations", "4,5,3", "--cpus", "0", "--json"]),
    )
    .success();
    let r: Report = json(&out.output.stdout);
    let got: Vec<(Method, u64)> =
        r.runs.iter().map(|r| (r.method, r.iterations)).collect();
    assert_eq!(
        got,
        [(Method::Pool, 4), (Method::ForkWait, 5), (Method::PosixSpawn, 3)]
    );
    assert!(r.runs.iter().all(|r| r.us > 0.0), "{r:?}");
    assert_eq!((r.cpus.as_deref(), r.budget_s), (Some("0"), None));
    assert_eq!(r.runs[1].label, "fork + _exit + waitpid");
}

#[test]
fn a_budget_calibrates_and_rss_is_resident() {
    let _serial = labtest::serial();
    let out =
        labtest::run(spawn_methods().args([
            "--method", "vfork", "--budget", "0.001", "--rss", "8M", "--json",
        ]))
        .success();
    let r: Report = json(&out.output.stdout);
    assert_eq!((r.touched_bytes, r.budget_s), (8 << 20, Some(0.001)));
    assert!(r.runs[0].iterations >= 3, "{r:?}");
    // Every page of the 8 MiB was written, so it is resident.
    assert!(r.vm_rss_kib >= 8 << 10, "{r:?}");
    labtest::run(spawn_methods().args(["--method", "tokio", "--iterations", "3"]))
        .success()
        .stdout_has("us each  (3 iterations)  tokio task");
}

#[test]
fn rss_above_the_memory_available_is_refused() {
    let available = spawn_methods::mem_available().unwrap();
    labtest::require!(
        available < 64 << 30,
        "64 GiB or more available: nothing to refuse"
    );
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_spawn-methods"));
    let err = usage_error("spawn-methods", cmd.args(["--rss", "64G"]));
    assert!(err.contains("--rss 64G: more than the memory available"), "{err}");
}

#[test]
fn limited_in_address_space_it_fails_in_one_line() {
    // What the runner does: the program in a child whose address space is
    // limited. Touching more than the limit fails the program, cleanly.
    let bin = env!("CARGO_BIN_EXE_spawn-methods");
    let mut cmd = std::process::Command::new(bin);
    cmd.args(["--method", "fork-wait", "--iterations", "3", "--rss", "512M"]);
    let limits = Limits { address_space: Some(256 << 20), ..Limits::default() };
    let out = labkit::limited::apply(&mut cmd, limits).output().unwrap();
    let err = labtest::failed("spawn-methods", &out);
    assert!(
        err.contains("cannot map 512M to touch: Cannot allocate memory"),
        "{err}"
    );
}

#[test]
fn bad_usage_exits_2() {
    let bin = env!("CARGO_BIN_EXE_spawn-methods");
    labtest::usage_errors(
        bin,
        &[
            &["--method", "bogus"],
            &["--iterations", "0"],
            &["--budget", "0"],
            &["--budget", "1", "--iterations", "3"],
            &["--rss", "65G"],
            &["--cpus", "x"],
        ],
    );
    // Refused once parsed, saying why (no "see --help").
    for (args, says) in [
        (
            &["--method", "vfork", "--iterations", "1,2"][..],
            "2 counts for 1 methods",
        ),
        (&["--worker-cpu", "100000"], "is not one this process may run on"),
        (
            &["--method", "fork-exec", "--exec", "/nonexistent/program"],
            "cannot execute: No such file or directory (ENOENT)",
        ),
    ] {
        let err =
            usage_error("spawn-methods", std::process::Command::new(bin).args(args));
        assert!(err.contains(says), "{err}");
    }
}

#[test]
fn sigint_stops_a_loop_with_every_child_reaped_and_exit_130() {
    let _serial = labtest::serial();
    let bin = env!("CARGO_BIN_EXE_spawn-methods");
    let child = std::process::Command::new(bin)
        .args(["--method", "fork-wait", "--iterations", "100000000"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // The loop is running once the program has a child of its own.
    let children = format!("/proc/{pid}/task/{pid}/children");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::fs::read_to_string(&children).unwrap_or_default().trim().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no fork within 20 s");
        std::thread::yield_now();
    }
    // SAFETY: kill only sends a signal, to our own child.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("every child was reaped"), "{err}");
}
