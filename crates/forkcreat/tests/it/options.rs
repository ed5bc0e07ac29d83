//! `forkcreat::Options`: the words the runner starts the program and its C
//! twin with, and the options they parse back into.

use std::ffi::OsString;

use clap::Parser;
use forkcreat::{Options, Reap};

/// The words, as text.
fn text(args: Vec<OsString>) -> Vec<String> {
    args.into_iter().map(|a| a.into_string().unwrap()).collect()
}

#[test]
fn options_say_the_runners_command_lines() {
    let o = Options { iterations: 4000, reap: Reap::Sigchld, json: true };
    assert_eq!(text(o.args()), ["-n", "4000", "--reap", "sigchld", "--json"]);
    assert_eq!(text(o.c_args()), ["4000", "sigchld", "--json"]);
    let o = Options { reap: Reap::Wait, json: false, ..o };
    assert_eq!(text(o.args()), ["-n", "4000", "--reap", "wait"]);
    assert_eq!(text(o.c_args()), ["4000", "wait"]);
}

#[test]
fn options_parse_back_from_their_args() {
    let default = Options::try_parse_from(["forkcreat"]).unwrap();
    assert_eq!(
        default,
        Options { iterations: 100_000, reap: Reap::Wait, json: false }
    );
    for o in [
        default.clone(),
        Options { iterations: 1, reap: Reap::Sigchld, json: true },
        Options { iterations: 100_000_000, json: true, ..default },
    ] {
        let line = std::iter::once("forkcreat".into()).chain(o.args());
        assert_eq!(Options::try_parse_from(line).unwrap(), o);
    }
}
