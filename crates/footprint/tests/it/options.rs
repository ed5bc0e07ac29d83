//! `footprint::Options`: the words the runner starts `footprint` with.

use footprint::{Kind, Options};

#[test]
fn options_say_themselves_as_the_runner_did() {
    // lab run footprint: idle workers, then copy-on-write ones.
    let idle = Options { kind: Kind::Threads, workers: 1000, touch: 0, json: true };
    assert_eq!(
        labtest::words(idle.args()),
        ["--json", "--kind", "threads", "--workers", "1000", "--touch", "0"]
    );
    let cow =
        Options { kind: Kind::Procs, workers: 100, touch: 64 << 20, json: true };
    assert_eq!(
        labtest::words(cow.args()),
        ["--json", "--kind", "procs", "--workers", "100", "--touch", "67108864"]
    );
}

#[test]
fn options_parse_back_from_their_words() {
    let default = labtest::parse::<Options>("footprint", &[]).unwrap();
    assert_eq!(default.args().len(), 6, "no --json unless asked");
    let cow =
        Options { kind: Kind::Procs, workers: 10_000, touch: 1 << 30, json: true };
    let odd = Options { kind: Kind::Threads, workers: 1, touch: 4097, json: false };
    for o in [default, cow, odd] {
        labtest::parses_back("footprint", &o, o.args());
    }
}
