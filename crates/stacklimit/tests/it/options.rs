//! `stacklimit::Options`: the words the runner starts each probe with.

use stacklimit::{Api, Options, Probe};

/// Command-line words, as text.
fn words(probe: Probe) -> Vec<String> {
    labtest::words(Options { probe }.args())
}

#[test]
fn options_say_themselves_with_each_size_in_its_shortest_form() {
    // lab run thread-limits: each API at each stack size.
    let stack = |api| Probe::Threads {
        stack_size: Some(8 << 20),
        api,
        max: 4096,
        json: true,
    };
    assert_eq!(
        words(stack(Api::Std)),
        ["threads", "--json", "--api", "std", "--max", "4096", "--stack-size", "8M"]
    );
    assert_eq!(words(stack(Api::Pthread))[2..4], ["--api", "pthread"]);
    // Threads under a limit, with no stack size and no JSON.
    let threads =
        Probe::Threads { stack_size: None, api: Api::Pthread, max: 7, json: false };
    assert_eq!(words(threads), ["threads", "--api", "pthread", "--max", "7"]);
    let forks = Probe::Forks { max: 4096, json: true };
    assert_eq!(words(forks), ["forks", "--json", "--max", "4096"]);
    // The overflows; a size that is no whole KiB stays in bytes.
    let overflow = Probe::Overflow { stack_size: 64 << 10, api: Api::Std };
    assert_eq!(words(overflow), ["overflow", "--api", "std", "--stack-size", "64K"]);
    let odd = Probe::Overflow { stack_size: 16385, api: Api::Pthread };
    assert_eq!(words(odd)[3..], ["--stack-size", "16385"]);
}

#[test]
fn options_parse_back_from_their_words() {
    let parse =
        |words: &[&str]| labtest::parse::<Options>("stacklimit", words).unwrap();
    // Said or not, pthread is the API.
    assert_eq!(parse(&["threads"]), parse(&["threads", "--api", "pthread"]));
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
                stack_size: Some(3 << 20),
                api: Api::Std,
                max: 7,
                json: false,
            },
        },
    ];
    for o in every {
        labtest::parses_back("stacklimit", &o, o.args());
    }
}
