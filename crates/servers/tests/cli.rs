//! The `server` and `client` binaries on their own: bad usage is one line
//! and exit 2. (The designs under load are tested end to end with the
//! runner in the workspace's `tests/server_designs.rs`; this crate's own
//! integration tests also make Cargo build both binaries for them.)

use assert_cmd::Command;

fn one_line_exit_2(program: &str, args: &[&str]) {
    let out = Command::cargo_bin(program).unwrap().args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{program} {args:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{program} {args:?}: {err}");
    assert!(err.starts_with(&format!("{program}: ")), "{err}");
}

#[test]
fn bad_usage_is_one_line_and_exit_2() {
    one_line_exit_2("server", &["--design", "no-such-design"]);
    one_line_exit_2("server", &["--pool", "0"]);
    one_line_exit_2("client", &["--children", "5"]);
    one_line_exit_2("client", &["--addr", "127.0.0.1:1", "--bytes", "x"]);
}
