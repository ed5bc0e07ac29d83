//! `stacklimit::Options`: the words the runner starts each probe with.

use std::ffi::OsString;

use clap::Parser;
use stacklimit::{Api, Options, Probe, StackSize};

/// Command-line words, as text.
fn words(probe: Probe) -> Vec<String> {
    let args = Options { probe }.args();
    args.into_iter().map(|a| a.into_string().unwrap()).collect()
}

#[test]
fn options_say_themselves_as_the_runner_did() {
    // lab run thread-limits: each API at each stack size, in bytes.
    let stack = |api| Probe::Threads {
        stack_size: Some(StackSize::bytes(8 << 20)),
        api: Some(api),
        max: 4096,
        json: true,
    };
    assert_eq!(
        words(stack(Api::Std)),
        [
            "threads",
            "--json",
            "--api",
            "std",
            "--max",
            "4096",
            "--stack-size",
            "8388608"
        ]
    );
    assert_eq!(words(stack(Api::Pthread))[2..4], ["--api", "pthread"]);
    // Forks and threads under a limit: no --api, the stack as 64K.
    let threads = Probe::Threads {
        stack_size: Some(StackSize::short(64 << 10)),
        api: None,
        max: 16384,
        json: true,
    };
    assert_eq!(
        words(threads),
        ["threads", "--json", "--max", "16384", "--stack-size", "64K"]
    );
    let forks = Probe::Forks { max: 4096, json: true };
    assert_eq!(words(forks), ["forks", "--json", "--max", "4096"]);
    // The overflows.
    let overflow = Probe::Overflow { stack_size: 64 << 10, api: Api::Std };
    assert_eq!(words(overflow), ["overflow", "--api", "std", "--stack-size", "64K"]);
}

#[test]
fn options_parse_back_from_their_words() {
    let parse = |words: &[&str]| {
        Options::try_parse_from(std::iter::once(&"stacklimit").chain(words)).unwrap()
    };
    // Said or not, pthread is the API; the words keep which.
    let Probe::Threads { api, stack_size, .. } = parse(&["threads"]).probe else {
        panic!("not threads")
    };
    assert_eq!((api, stack_size), (None, None));
    let Probe::Threads { api, .. } = parse(&["threads", "--api", "pthread"]).probe
    else {
        panic!("not threads")
    };
    assert_eq!(api, Some(Api::Pthread));
    let every = [
        parse(&["threads"]),
        parse(&["forks"]),
        parse(&["overflow"]),
        parse(&["threads", "--api", "pthread", "--stack-size", "1024K"]),
        parse(&[
            "threads",
            "--json",
            "--api",
            "std",
            "--max",
            "1",
            "--stack-size",
            "65536",
        ]),
        parse(&["forks", "--json", "--max", "100000"]),
        parse(&["overflow", "--api", "std", "--stack-size", "16385"]),
        Options {
            probe: Probe::Threads {
                stack_size: Some(StackSize::short(3 << 20)),
                api: None,
                max: 7,
                json: false,
            },
        },
    ];
    for o in every {
        let args = std::iter::once(OsString::from("stacklimit")).chain(o.args());
        assert_eq!(Options::try_parse_from(args).unwrap(), o);
    }
}
