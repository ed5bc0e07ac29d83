//! The `stacklimit` probes: counts under limits, bounded, everything
//! joined; overflows die the documented way; bad flags exit 2.

use std::process::Command;
use std::time::Duration;

use labkit::limited::{Limits, NOBODY, Outcome, run};
use stacklimit::Count;

fn probe(args: &[&str], limits: Limits) -> Outcome {
    probe_with(Command::new(env!("CARGO_BIN_EXE_stacklimit")), args, limits)
}

/// [`probe`] with `cmd`, the program (a copy of it that nobody can run).
fn probe_with(mut cmd: Command, args: &[&str], limits: Limits) -> Outcome {
    cmd.args(args).env_remove("RUST_BACKTRACE");
    run(&mut cmd, limits, Duration::from_secs(60)).unwrap()
}

/// The probe's report, as its own type.
fn json(done: &Outcome) -> Count {
    assert_eq!(done.ended(), "exit 0", "{}", done.stderr);
    labtest::json(done.stdout.as_bytes())
}

#[test]
fn threads_stop_at_the_cap_and_are_all_joined() {
    let _serial = labtest::serial();
    let v = json(&probe(&["threads", "--max", "50", "--json"], Limits::default()));
    assert_eq!(v.created, 50);
    assert_eq!(v.stopped_by, None);
    assert_eq!(v.bad_exits, 0);
}

#[test]
fn an_address_space_limit_stops_threads_near_space_over_stack() {
    let _serial = labtest::serial();
    // 512 MiB / 8 MiB = 64: the article's arithmetic, minus what the
    // program itself maps.
    let limits = Limits { address_space: Some(512 << 20), ..Limits::default() };
    for api in ["pthread", "std"] {
        let args = ["threads", "--api", api, "--stack-size", "8M", "--max", "1000"];
        let v = json(&probe(&[&args[..], &["--json"]].concat(), limits));
        let created = u64::from(v.created);
        assert!(created > 0 && created < 64, "{api}: {created}");
        assert_eq!(v.stopped_by.as_deref(), Some("EAGAIN"), "{api}");
        assert_eq!(v.bad_exits, 0);
    }
    // A smaller stack fits more, as `ulimit -s 1024` did in the article.
    let v = json(&probe(
        &["threads", "--stack-size", "1M", "--max", "1000", "--json"],
        limits,
    ));
    assert!(u64::from(v.created) > 300, "{v:?}");
}

#[test]
fn the_default_stack_follows_rlimit_stack() {
    let _serial = labtest::serial();
    let limits = Limits {
        address_space: Some(512 << 20),
        stack: Some(1 << 20),
        ..Limits::default()
    };
    let v = json(&probe(&["threads", "--max", "2000", "--json"], limits));
    assert!(u64::from(v.created) > 300, "{v:?}");
    assert_eq!(v.stack_size, None);
}

#[test]
fn forks_are_not_bound_by_the_address_space_limit() {
    let _serial = labtest::serial();
    let limits = Limits { address_space: Some(256 << 20), ..Limits::default() };
    let v = json(&probe(&["forks", "--max", "40", "--json"], limits));
    assert_eq!(v.created, 40);
    assert_eq!(v.bad_exits, 0);
}

#[test]
fn nproc_limits_an_unprivileged_user() {
    let _serial = labtest::serial();
    labtest::require!(labtest::is_root(), "needs root to run the probe as nobody");
    let stacklimit = env!("CARGO_BIN_EXE_stacklimit");
    let Some(copy) = labtest::copy_for_nobody(stacklimit) else { return };
    let limits = Limits { nproc: Some(12), user: Some(NOBODY), ..Limits::default() };
    let probe = |args: &[&str]| probe_with(copy.command(), args, limits);
    let v = json(&probe(&["forks", "--max", "100", "--json"]));
    let created = u64::from(v.created);
    assert!(created < 12, "{v:?}");
    assert_eq!(v.stopped_by.as_deref(), Some("EAGAIN"));
    let v = json(&probe(&["threads", "--stack-size", "64K", "--json"]));
    assert!(u64::from(v.created) < 12, "{v:?}");
}

#[test]
fn overflows_die_in_the_documented_way() {
    let _serial = labtest::serial();
    let seg = probe(&["overflow", "--stack-size", "64K"], Limits::default());
    assert_eq!(seg.ended(), "SIGSEGV", "{}", seg.stderr);
    let std = probe(&["overflow", "--api", "std"], Limits::default());
    assert_eq!(std.ended(), "SIGABRT", "{}", std.stderr);
    assert!(std.stderr.contains("has overflowed its stack"), "{}", std.stderr);
}

#[test]
fn bad_flags_exit_2() {
    labtest::usage_errors(
        env!("CARGO_BIN_EXE_stacklimit"),
        &[
            &["threads", "--max", "0"],
            &["threads", "--stack-size", "1K"],
            &["threads", "--api", "green"],
            &["forks", "--max", "x"],
            &["sideways"],
        ],
    );
    // No subcommand: one line that names the choices, exit 2.
    let line = labtest::usage_error(
        "stacklimit",
        &mut std::process::Command::new(env!("CARGO_BIN_EXE_stacklimit")),
    );
    assert_eq!(
        line,
        "stacklimit: a subcommand is required (threads, forks, overflow); \
         see 'stacklimit --help'"
    );
}
