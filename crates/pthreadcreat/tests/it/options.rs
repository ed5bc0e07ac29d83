//! `pthreadcreat::Options`: the words the runner starts the program and its C
//! twin with, and the options they parse back into.

use pthreadcreat::{Api, Options};

fn options(iterations: u64) -> Options {
    Options { iterations, stack_size: None, api: Api::Pthread, json: true }
}

#[test]
fn options_say_the_runners_command_lines() {
    assert_eq!(labtest::words(options(4000).args()), ["-n", "4000", "--json"]);
    assert_eq!(labtest::words(options(4000).c_args()), ["4000", "--json"]);
    let o = Options { stack_size: Some(64 << 10), api: Api::Std, ..options(2000) };
    assert_eq!(
        labtest::words(o.args()),
        ["-n", "2000", "--stack-size", "65536", "--api", "std", "--json"]
    );
}

#[test]
#[should_panic(expected = "pthreadcreat.c takes no --stack-size")]
fn the_c_program_is_never_asked_for_a_stack_size() {
    Options { stack_size: Some(64 << 10), ..options(1) }.c_args();
}

#[test]
fn options_parse_back_from_their_args() {
    let default = labtest::parse::<Options>("pthreadcreat", &[]).unwrap();
    assert_eq!(default, Options { json: false, ..options(100_000) });
    for o in [
        default.clone(),
        options(1),
        Options { stack_size: Some(8 << 20), api: Api::Std, ..options(5) },
        Options { stack_size: Some(16 << 10), ..default },
    ] {
        labtest::parses_back("pthreadcreat", &o, o.args());
    }
}
