//! `fork::Options`: the words the runner starts `fork` and `fork.c` with.

use fork::Options;
use labkit::cli::Workload;

/// What `lab run fork-vs-thread` runs: P workers, COUNT lines, a log.
fn runners(line: Option<u64>) -> Options {
    let log = "/tmp/lab-fork-vs-thread-x/logFile.log".into();
    Options { procs: 255, work: Workload { count: 1000, log, line, json: false } }
}

#[test]
fn options_say_themselves_as_the_runner_did() {
    let log = "/tmp/lab-fork-vs-thread-x/logFile.log";
    assert_eq!(
        labtest::words(runners(None).args()),
        ["--procs", "255", "--count", "1000", "--log", log]
    );
    assert_eq!(
        labtest::words(runners(Some(256)).args()),
        ["--procs", "255", "--count", "1000", "--log", log, "--line", "256"]
    );
    assert_eq!(labtest::words(runners(None).c_args()), ["255", "1000", log]);
    assert_eq!(
        labtest::words(runners(Some(256)).c_args()),
        ["255", "1000", log, "256"]
    );
}

#[test]
fn options_parse_back_from_their_words() {
    let default = labtest::parse::<Options>("fork", &[]).unwrap();
    let mut every = runners(Some(4000));
    every.work.json = true;
    every.procs = 1;
    for o in [default, runners(None), runners(Some(256)), every] {
        labtest::parses_back("fork", &o, o.args());
    }
}
