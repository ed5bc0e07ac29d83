//! The library's own functions, called in this process: counts read like
//! the article's script, the stream check, a run that fits the pipe, and
//! the words `Options` says for the runner and the C twin.

use pipespeed2::{Options, matches, parse_count, pattern, run};

#[test]
fn counts_read_like_the_article_script() {
    assert_eq!(parse_count("500k"), Ok(500_000));
    assert_eq!(parse_count("100K"), Ok(100_000));
    assert_eq!(parse_count("2m"), Ok(2_000_000));
    assert_eq!(parse_count("17"), Ok(17));
    assert!(parse_count("0").is_err());
    assert!(parse_count("k").is_err());
    assert!(parse_count("-3").is_err());
    assert!(parse_count("99999999999999999999").is_err());
}

#[test]
fn the_stream_check_follows_offsets() {
    let block = pattern(10);
    assert!(matches(&block, 0, &block));
    assert!(matches(&block, 7, &[block[7], block[8], block[9], block[0]]));
    assert!(matches(&block, 27, &block[7..]));
    assert!(!matches(&block, 1, &block));
    assert!(!matches(&block, 7, &[block[7], block[8], block[9], block[1]]));
}

#[test]
fn options_say_the_runners_command_lines() {
    let o = Options { json: true, ..Options::new(20_000, 64) };
    assert_eq!(labtest::words(o.args()), ["20000", "64", "--json"]);
    assert_eq!(labtest::words(o.c_args()), ["20000", "64", "--json"]);
    let o = Options { pipe_size: Some(1 << 20), ..o };
    assert_eq!(
        labtest::words(o.args()),
        ["20000", "64", "--json", "--pipe-size", "1048576"]
    );
    assert_eq!(labtest::words(o.c_args()), ["20000", "64", "1048576", "--json"]);
}

#[test]
fn options_parse_back_from_their_args() {
    let least = labtest::parse::<Options>("pipespeed2", &["1", "1"]).unwrap();
    assert_eq!(least, Options::new(1, 1));
    for o in [
        least,
        Options { json: true, ..Options::new(500_000, 4096) },
        Options { pipe_size: Some(1 << 30), json: true, ..Options::new(7, 1 << 30) },
        Options { pipe_size: Some(1), ..Options::new(1_000_000_000_000, 3) },
    ] {
        labtest::parses_back("pipespeed2", &o, o.args());
    }
}

#[test]
fn a_block_that_fits_goes_round() {
    let report = run(100, 4095, None).unwrap();
    assert_eq!(report.bytes, 409_500);
    assert!(report.pipe_size.unwrap() >= 4096);
}
