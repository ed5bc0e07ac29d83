//! `thread::Options`: the words the runner starts `thread` and `thread.c`
//! with.

use labkit::cli::Workload;
use thread::Options;

/// What the runner runs: `threads` threads, COUNT lines, a log.
fn runners(threads: u32, count: u64, stack_size: Option<u64>) -> Options {
    let log = "/tmp/lab-x/logFile.log".into();
    let work = Workload { count, log, line: None, json: false };
    Options { threads, stack_size, work }
}

#[test]
fn options_say_themselves_as_the_runner_did() {
    let log = "/tmp/lab-x/logFile.log";
    // lab run fork-vs-thread, and its C twin.
    let o = runners(255, 100, None);
    assert_eq!(
        labtest::words(o.args()),
        ["--threads", "255", "--count", "100", "--log", log]
    );
    assert_eq!(labtest::words(o.c_args()), ["255", "100", log]);
    let long = Options { work: Workload { line: Some(256), ..o.work.clone() }, ..o };
    assert_eq!(labtest::words(long.args())[6..], ["--line", "256"]);
    assert_eq!(labtest::words(long.c_args()), ["255", "100", log, "256"]);
    // lab run thread-limits, with --stack-size 1M.
    assert_eq!(
        labtest::words(runners(500, 1000, Some(1 << 20)).args()),
        ["--threads", "500", "--count", "1000", "--log", log, "--stack-size", "1M"]
    );
}

#[test]
fn options_parse_back_from_their_words() {
    let default = labtest::parse::<Options>("thread", &[]).unwrap();
    let mut every = runners(1, 1, Some(16 << 10));
    every.work.line = Some(1);
    every.work.json = true;
    let odd = runners(100_000, 1_000_000_000, Some((1 << 20) + 4096));
    let bytes = runners(7, 7, Some(65_537));
    for o in [
        default,
        runners(800, 1000, None),
        runners(500, 1000, Some(1 << 20)),
        every,
        odd,
        bytes,
    ] {
        labtest::parses_back("thread", &o, o.args());
    }
}
