//! `forkcreat::Options`: the words the runner starts the program and its C
//! twin with, and the options they parse back into.

use forkcreat::{Options, Reap};

#[test]
fn options_say_the_runners_command_lines() {
    let o = Options { iterations: 4000, reap: Reap::Sigchld, json: true };
    assert_eq!(
        labtest::words(o.args()),
        ["-n", "4000", "--reap", "sigchld", "--json"]
    );
    assert_eq!(labtest::words(o.c_args()), ["4000", "sigchld", "--json"]);
    let o = Options { reap: Reap::Wait, json: false, ..o };
    assert_eq!(labtest::words(o.args()), ["-n", "4000", "--reap", "wait"]);
    assert_eq!(labtest::words(o.c_args()), ["4000", "wait"]);
}

#[test]
fn options_parse_back_from_their_args() {
    let default = labtest::parse::<Options>("forkcreat", &[]).unwrap();
    assert_eq!(
        default,
        Options { iterations: 100_000, reap: Reap::Wait, json: false }
    );
    for o in [
        default.clone(),
        Options { iterations: 1, reap: Reap::Sigchld, json: true },
        Options { iterations: 100_000_000, json: true, ..default },
    ] {
        labtest::parses_back("forkcreat", &o, o.args());
    }
}
