//! The `pipespeed2` program: bytes counted, blocks refused rather than
//! hung on, pipe sizes granted or denied, bad usage.

use std::time::Duration;

use labkit::limited::{Limits, NOBODY, apply};
use serde_json::Value;
use std::process::Command;

fn pipespeed2() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pipespeed2"))
}

/// A hang is the failure this program exists to avoid: never wait long.
const LIMIT: Duration = Duration::from_secs(30);

/// `pipespeed2 ARGS --json`, which must succeed: its report.
fn report(args: &[&str]) -> Value {
    labtest::report(&labtest::output_within(
        pipespeed2().args(args).arg("--json"),
        LIMIT,
    ))
}

#[test]
fn odd_blocks_go_round_byte_for_byte() {
    for (count, bytes, pipe_size) in
        [(1000, 1, None), (50, 4095, None), (5, 65537, Some("65537"))]
    {
        let (count_arg, bytes_arg) = (count.to_string(), bytes.to_string());
        let mut args = vec![count_arg.as_str(), &bytes_arg];
        if let Some(size) = pipe_size {
            args.extend(["--pipe-size", size]);
        }
        let v = report(&args);
        assert_eq!(v["bytes"], count * bytes);
        assert_eq!(v["count"], count);
        assert_eq!(v["block_bytes"], bytes);
        assert_eq!(v["verified"], true);
        assert!(v["pipe_size"].as_u64().unwrap() >= bytes);
        assert!(v["mb_per_s"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn a_mebibyte_and_one_needs_a_bigger_pipe_than_unprivileged_users_get() {
    // 1 MiB + 1 rounds up to a 2 MiB pipe: above the default
    // /proc/sys/fs/pipe-max-size (1 MiB), which only CAP_SYS_RESOURCE may
    // exceed. Either way the answer is clear and nothing hangs.
    let out = labtest::output_within(
        pipespeed2().args(["3", "1048577", "--pipe-size", "1048577", "--json"]),
        LIMIT,
    );
    if out.status.success() {
        let v: Value = labtest::json(&out.stdout);
        assert_eq!(v["bytes"], 3 * 1_048_577);
        assert!(v["pipe_size"].as_u64().unwrap() >= 2 << 20);
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("pipe-max-size"), "{err}");
    }
}

#[test]
fn a_block_larger_than_the_pipe_is_refused_not_hung_on() {
    labtest::run_within(pipespeed2().args(["10", "1M"]), LIMIT)
        .code(2)
        .stdout_is("")
        .stderr_has("does not fit")
        .stderr_has("--pipe-size")
        .stderr_has("would wait forever");
    // A pipe shrunk to one page refuses anything larger, and says what it
    // was granted.
    labtest::run_within(
        pipespeed2().args(["10", "4097", "--pipe-size", "4096"]),
        LIMIT,
    )
    .code(2)
    .stderr_has("was granted a 4096-byte buffer");
}

#[test]
fn the_kernel_rounds_a_pipe_size_up() {
    let v = report(&["2", "5000", "--pipe-size", "5000"]);
    assert_eq!(v["pipe_size"], 8192);
}

#[test]
fn unprivileged_users_are_told_the_pipe_max_size() {
    labtest::require!(labtest::is_root(), "needs root to run pipespeed2 as nobody");
    let max: u64 = std::fs::read_to_string("/proc/sys/fs/pipe-max-size")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let pipespeed2 = env!("CARGO_BIN_EXE_pipespeed2");
    let Some(copy) = labtest::copy_for_nobody(pipespeed2) else { return };
    let mut cmd = copy.command();
    cmd.args(["1", "1", "--pipe-size", &(max * 2).to_string()]);
    let nobody = Limits { user: Some(NOBODY), ..Limits::default() };
    apply(&mut cmd, nobody);
    let out = labtest::output_within(&mut cmd, LIMIT);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("EPERM") && err.contains("pipe-max-size"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn bad_usage_exits_2() {
    labtest::usage_errors(
        env!("CARGO_BIN_EXE_pipespeed2"),
        &[
            &[],
            &["10"],
            &["0", "64"],
            &["10", "0"],
            &["ten", "64"],
            &["10", "8X"],
            &["10", "64", "--pipe-size", "big"],
            &["10", "64", "--bogus"],
        ],
    );
}

#[test]
fn help_documents_every_flag_and_default() {
    labtest::help_mentions(
        env!("CARGO_BIN_EXE_pipespeed2"),
        &["--pipe-size", "--json", "default: the kernel's", "Exit status"],
    );
}

#[test]
fn the_human_line_names_the_rate_and_the_buffer() {
    let want = "100 x 64 bytes = 6400 bytes in # s: # MB/s \
                (pipe, single thread, pipe buffer # bytes)\n";
    labtest::run_within(pipespeed2().args(["100", "64"]), LIMIT)
        .success()
        .stdout_that(want, |out| labtest::shape(out, want));
}
