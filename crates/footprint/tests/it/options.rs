//! `footprint::Options`: the words the runner starts `footprint` with.

use std::ffi::OsString;

use clap::Parser;
use footprint::{Kind, Options};

/// Command-line words, as text.
fn words(args: Vec<OsString>) -> Vec<String> {
    args.into_iter().map(|a| a.into_string().unwrap()).collect()
}

#[test]
fn options_say_themselves_as_the_runner_did() {
    // lab run footprint: idle workers, then copy-on-write ones.
    let idle = Options { kind: Kind::Threads, workers: 1000, touch: 0, json: true };
    assert_eq!(
        words(idle.args()),
        ["--json", "--kind", "threads", "--workers", "1000", "--touch", "0"]
    );
    let cow =
        Options { kind: Kind::Procs, workers: 100, touch: 64 << 20, json: true };
    assert_eq!(
        words(cow.args()),
        ["--json", "--kind", "procs", "--workers", "100", "--touch", "67108864"]
    );
}

#[test]
fn options_parse_back_from_their_words() {
    let default = Options::try_parse_from(["footprint"]).unwrap();
    assert_eq!(default.args().len(), 6, "no --json unless asked");
    let cow =
        Options { kind: Kind::Procs, workers: 10_000, touch: 1 << 30, json: true };
    let odd = Options { kind: Kind::Threads, workers: 1, touch: 4097, json: false };
    for o in [default, cow, odd] {
        let args = std::iter::once(OsString::from("footprint")).chain(o.args());
        assert_eq!(Options::try_parse_from(args).unwrap(), o);
    }
}
