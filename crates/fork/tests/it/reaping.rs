//! No child is left behind, even when fork fails. This test process makes
//! itself a child subreaper, so any child that `fork` left unreaped would be
//! re-parented to it and show up in `waitpid(-1)`: each test runs in a
//! process of its own ([`labtest::alone`]), where no other test's children
//! are.

use std::process::Command;

use labkit::limited::{Limits, NOBODY};
use labkit::lines::{check_log, payload};
use labtest::{become_subreaper, no_child_left};

#[test]
fn children_are_reaped() {
    if !labtest::alone() {
        return;
    }
    let _serial = labtest::serial();
    become_subreaper();
    let dir = labtest::tempdir();
    let status = Command::new(env!("CARGO_BIN_EXE_fork"))
        .args(["-p", "40", "-c", "5", "--log"])
        .arg(dir.path().join("log"))
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    no_child_left();
}

#[test]
fn fork_failing_under_rlimit_nproc_is_reported_and_cleaned_up() {
    if !labtest::alone() {
        return;
    }
    let _serial = labtest::serial();
    // RLIMIT_NPROC does not bind root, so the program runs as `nobody`
    // with a limit of 12 processes for that user.
    labtest::require!(labtest::is_root(), "needs root to run as nobody");
    let busy = Command::new("pgrep").args(["-u", "65534"]).output().unwrap();
    if !busy.stdout.is_empty() {
        labtest::skipped(
            "uid 65534 already runs processes, the limit would be shared",
        );
        return;
    }
    become_subreaper();
    let dir = labtest::tempdir();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let log = dir.path().join("log");
    let Some(fork) = labtest::copy_for_nobody(env!("CARGO_BIN_EXE_fork")) else {
        return;
    };
    let mut cmd = fork.command();
    cmd.args(["-p", "50", "-c", "20", "--log"]).arg(&log);
    let limits = Limits { nproc: Some(12), user: Some(NOBODY), ..Limits::default() };
    let out = labkit::limited::apply(&mut cmd, limits).output().unwrap();
    let (created, stderr) = labtest::created_before_failing("fork", &out);
    assert!((1..50).contains(&created), "{stderr}");
    assert!(
        stderr.ends_with(&format!(
            "of 50 processes; fork: Resource temporarily unavailable (EAGAIN); \
             waited for the {created}"
        )),
        "{stderr}"
    );
    // The children that were made finished their work, whole.
    let data = std::fs::read(&log).unwrap();
    assert_eq!(check_log(&data, &payload(None), created, 20), Ok(()));
    no_child_left();
}
