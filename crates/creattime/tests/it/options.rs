//! `creattime::Options`: the words the runner starts the program and its C
//! twin with, and the options they parse back into.

use creattime::Options;

#[test]
fn options_say_the_runners_command_lines() {
    let o = Options { samples: 255, stack_size: None, json: true };
    assert_eq!(labtest::words(o.args()), ["255", "--json"]);
    assert_eq!(labtest::words(o.c_args()), ["255", "--json"]);
    let o = Options { stack_size: Some(64 << 10), ..o };
    assert_eq!(labtest::words(o.args()), ["255", "--stack-size", "65536", "--json"]);
}

#[test]
#[should_panic(expected = "creattime.c takes no --stack-size")]
fn the_c_program_is_never_asked_for_a_stack_size() {
    Options { samples: 20, stack_size: Some(64 << 10), json: true }.c_args();
}

#[test]
fn options_parse_back_from_their_args() {
    let least = labtest::parse::<Options>("creattime", &["20"]).unwrap();
    assert_eq!(least, Options { samples: 20, stack_size: None, json: false });
    for o in [
        least.clone(),
        Options { samples: 1_000_000, json: true, ..least.clone() },
        Options { samples: 128, stack_size: Some(1 << 40), json: true },
        Options { stack_size: Some(16 << 10), ..least },
    ] {
        labtest::parses_back("creattime", &o, o.args());
    }
}
