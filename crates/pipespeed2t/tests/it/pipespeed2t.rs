//! The `pipespeed2t` program: every byte arrives unchanged over every
//! transport, with threads and with processes; a reader that goes away is
//! an EPIPE message, not a death by SIGPIPE; bad usage exits 2.

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use serde_json::Value;
use std::process::Command;

fn pipespeed2t() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pipespeed2t"))
}

/// None of these runs takes long: one that hangs is killed, and fails.
const LIMIT: Duration = Duration::from_secs(60);

/// Run `pipespeed2t ARGS --json`, check that it succeeded (`what` names the
/// case in a failure) and return its report.
fn report<I, S>(args: I, what: &str) -> Value
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let out = labtest::output_within(pipespeed2t().args(args).arg("--json"), LIMIT);
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    labtest::json(&out.stdout)
}

const TRANSPORTS: [(&str, &[&str]); 6] = [
    ("pipe", &[]),
    ("fifo", &["--fifo"]),
    ("socketpair", &["--socketpair"]),
    // A one-page pipe: every block larger than 4 KiB takes many partial
    // reads, and the writer blocks mid-block.
    ("pipe", &["--pipe-size", "4096"]),
    // The writer hands over its pages instead of copying them.
    ("pipe", &["--vmsplice"]),
    ("fifo", &["--fifo", "--vmsplice", "--pipe-size", "4096"]),
];

/// Odd sizes, so that reads and writes never line up with pages.
const SIZES: [(u64, u64); 4] =
    [(3000, 1), (40, 4095), (9, 65537), (3, (1 << 20) + 1)];

fn check(mode: &[&str]) {
    for (transport, flags) in TRANSPORTS {
        for (count, bytes) in SIZES {
            let what = format!("{count} x {bytes} {flags:?} {mode:?}");
            let args = [count.to_string(), bytes.to_string()];
            let args = args.iter().map(String::as_str).chain(flags.iter().copied());
            let v = report(args.chain(mode.iter().copied()), &what);
            assert_eq!(v["bytes"], count * bytes, "{what}");
            assert_eq!(v["verified"], true, "{what}");
            assert_eq!(v["transport"], transport, "{what}");
            assert_eq!(
                v["pipe_size"].is_null(),
                transport == "socketpair",
                "{what}"
            );
        }
    }
}

#[test]
fn threads_move_odd_blocks_byte_for_byte() {
    check(&[]);
}

#[test]
fn processes_move_odd_blocks_byte_for_byte() {
    let _serial = labtest::serial();
    check(&["--processes"]);
}

#[test]
fn a_bigger_pipe_is_granted_and_reported() {
    let v = report(["4", "1M", "--pipe-size", "1M"], "a 1 MiB pipe");
    assert_eq!(v["pipe_size"], 1 << 20);
}

#[test]
fn a_reader_that_goes_away_gives_the_writer_epipe() {
    let _serial = labtest::serial();
    for mode in [&[][..], &["--processes"], &["--socketpair"], &["--fifo"]] {
        let out = labtest::output_within(
            pipespeed2t()
                .args(["100000", "4096", "--reader-stops-after", "1"])
                .args(mode),
            LIMIT,
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.signal(), None, "{mode:?} killed: {stderr}");
        let err = labtest::failed("pipespeed2t", &out);
        assert!(
            err.contains("went away") && err.contains("write: "),
            "{mode:?}: {err}"
        );
        assert!(
            err.contains("EPIPE") || err.contains("ECONNRESET"),
            "{mode:?}: {err}"
        );
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn a_short_stream_is_a_failure_not_a_rate() {
    // The reader stops after its first read. Both blocks fit in the pipe,
    // so the writer usually finishes first (no EPIPE) and the run must say
    // that bytes are missing; if the reader closes its end before the
    // second write, the writer's EPIPE says the same. Either way: exit 1,
    // no rate, and how many of the 200 bytes arrived.
    labtest::run_within(
        pipespeed2t().args(["2", "100", "--reader-stops-after", "1"]),
        LIMIT,
    )
    .code(1)
    .stdout_is("")
    .stderr_that("received or read 100 of 200 bytes", |err| {
        err.contains("received 100 of 200 bytes")
            || err.contains("after reading 100 of 200 bytes")
    });
}

#[test]
fn the_fifo_directory_is_removed() {
    let tmp = labtest::tempdir();
    labtest::run_within(
        pipespeed2t().env("TMPDIR", tmp.path()).args(["100", "1000", "--fifo"]),
        LIMIT,
    )
    .success();
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn bad_usage_exits_2() {
    let bin = env!("CARGO_BIN_EXE_pipespeed2t");
    labtest::usage_errors(
        bin,
        &[
            &[],
            &["0", "64"],
            &["10", "0"],
            &["10", "2G"],
            &["10", "64", "--fifo", "--socketpair"],
            &["10", "64", "--socketpair", "--pipe-size", "1M"],
            &["10", "64", "--socketpair", "--vmsplice"],
            &["10", "64", "--reader-stops-after", "x"],
            &["10", "64", "--method", "copy"],
            &["10", "64", "--method", "vmsplice", "--fifo"],
            &["10", "64", "--method", "write", "--processes"],
            &["10", "64", "--method", "write", "--socketpair"],
            &["10", "64", "--huge-pages"],
            &["10", "64", "--busy-poll"],
            &["10", "64", "--ring", "4"],
            &["10", "64", "--method", "write", "--ring", "0"],
            &["10", "64", "--cpus", "0"],
            &["10", "64", "--cpus", "0,1,2"],
            &["10", "64", "--cpus", "x,0"],
            &["10", "64", "--cpus", "0,100000"],
            &["10", "64", "--cpus", "0,0", "--method", "write"],
        ],
    );
    // A ring larger than half the available memory, refused once parsed.
    let mut cmd = std::process::Command::new(bin);
    cmd.args(["10", "1G", "--method", "write", "--ring", "1000000"]);
    let err = labtest::usage_error("pipespeed2t", &mut cmd);
    assert!(err.contains("more than half of the"), "{err}");
}

#[test]
fn help_documents_every_flag() {
    labtest::help_mentions(
        env!("CARGO_BIN_EXE_pipespeed2t"),
        &[
            "--fifo",
            "--socketpair",
            "--pipe-size",
            "--processes",
            "--reader-stops-after",
            "--json",
            "--method",
            "--huge-pages",
            "--ring",
            "--check",
            "--busy-poll",
            "default",
        ],
    );
}

/// The ladder's rungs, as `lab run pipe-speed` runs them.
const RUNGS: [&[&str]; 5] = [
    &["--method", "write"],
    &["--method", "write", "--pipe-size", "1M"],
    &["--method", "vmsplice", "--pipe-size", "1M"],
    &["--method", "vmsplice", "--pipe-size", "1M", "--huge-pages"],
    &["--method", "splice-null", "--pipe-size", "1M", "--huge-pages"],
];

#[test]
fn every_rung_moves_every_block_byte_exact() {
    for rung in RUNGS {
        let unverified = rung.contains(&"splice-null");
        // `--check bytes` compares every byte; the default, a checksum.
        for check in ["bytes", "checksum"] {
            for (count, bytes) in SIZES {
                let what = format!("{count} x {bytes} {rung:?} --check {check}");
                let args = [count.to_string(), bytes.to_string()];
                let args =
                    args.iter().map(String::as_str).chain(rung.iter().copied());
                let v = report(args.chain(["--check", check]), &what);
                assert_eq!(v["bytes"], count * bytes, "{what}");
                assert_eq!(v["verified"], !unverified, "{what}");
                let expected = if unverified {
                    "none: bytes counted only"
                } else if check == "bytes" {
                    "sequence number and every byte of every block"
                } else {
                    "sequence number and checksum of every block"
                };
                assert_eq!(v["check"], expected, "{what}");
                // The reader made at least one call per block.
                assert!(v["reader"]["calls"].as_u64().unwrap() >= count, "{what}");
            }
        }
    }
}

#[test]
fn busy_polling_moves_every_block_too() {
    for method in ["write", "vmsplice", "splice-null"] {
        let v =
            report(
                ["3", "65537", "--busy-poll", "--method", method]
                    .into_iter()
                    .chain(["--pipe-size", "1M", "--check", "bytes"]),
                method,
            );
        assert_eq!(v["bytes"], 3 * 65537, "{method}");
        assert_eq!(v["verified"], method != "splice-null", "{method}");
        assert!(v["mode"].as_str().unwrap().contains("busy-polling"), "{v}");
    }
}

#[test]
fn the_unverified_rung_is_never_reported_as_verified() {
    let out = labtest::output_within(
        pipespeed2t().args([
            "100",
            "64k",
            "--method",
            "splice-null",
            "--check",
            "bytes",
        ]),
        LIMIT,
    );
    assert!(out.status.success());
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(line.contains("not verified"), "{line}");
    let v = report(["100", "64k", "--method", "splice-null"], "splice-null");
    assert_eq!(v["verified"], false);
    assert_eq!(v["method"], "splice-null");
}

#[test]
fn a_ring_too_small_for_vmsplice_is_refused() {
    // A 64 KiB pipe holds 16 blocks of 4 KiB: 18 slots are needed; a
    // 1 MiB pipe holds 256.
    for (pipe, need) in [("64k", 18), ("1M", 258)] {
        for method in ["vmsplice", "splice-null"] {
            labtest::run_within(
                pipespeed2t()
                    .args(["100", "4096", "--method", method, "--pipe-size", pipe])
                    .args(["--ring", &(need - 1).to_string()]),
                LIMIT,
            )
            .code(2)
            .stdout_is("")
            .stderr_has("too small for vmsplice")
            .stderr_has(&format!("at least {need} "));
            let ring = need.to_string();
            let v = report(
                [
                    "100",
                    "4096",
                    "--method",
                    method,
                    "--pipe-size",
                    pipe,
                    "--ring",
                    &ring,
                ],
                method,
            );
            assert_eq!(v["ring_slots"], need);
        }
    }
    // `write` copies: one slot is enough, and is the default.
    let v = report(["100", "4096", "--method", "write"], "write");
    assert_eq!(v["ring_slots"], 1);
}

/// `--cpus A,B` pins the writer to CPU A and the reader (thread or child
/// process) to B, and the report names the CPU each loop ended on; without
/// it the report has no `cpus`.
#[test]
fn cpus_pin_the_writer_and_the_reader() {
    let cpus = labkit::affinity::allowed_cpus().unwrap();
    let (a, b) = (cpus[0], cpus[cpus.len() - 1]);
    for (pair, mode) in
        [([a, b], &[][..]), ([a, b], &["--processes"]), ([a, a], &[])]
    {
        let flag = format!("{},{}", pair[0], pair[1]);
        let what = format!("--cpus {flag} {mode:?}");
        let v = report(["20000", "4096", "--cpus", &flag].iter().chain(mode), &what);
        assert_eq!(v["cpus"], serde_json::json!(pair), "{what}");
        assert_eq!(v["bytes"], 20000 * 4096, "{what}");
    }
    assert!(report(["100", "64"], "unpinned").get("cpus").is_none());
}

/// `copylimit`, the limit the runner puts beside the pipes: its JSON reads
/// as its report type, and says what it copied.
#[test]
fn copylimit_reports_what_it_copied() {
    for (args, copies, slots, stride) in [
        (&["4097"][..], 2, 1, 4097),
        (&["4097", "--copies", "1", "--ring", "3"], 1, 3, 8192),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_copylimit"))
            .args(args)
            .args(["--iterations", "5", "--json"])
            .output()
            .unwrap();
        let r: pipespeed2t::copy::CopyReport = labtest::report(&out);
        assert_eq!((r.block_bytes, r.copies, r.iterations), (4097, copies, 5));
        assert_eq!((r.ring_slots, r.slot_bytes), (slots, stride));
        assert_eq!(r.mb_per_s, r.memcpy_mb_per_s.max(r.vector_loop_mb_per_s));
    }
    let mut bad = std::process::Command::new(env!("CARGO_BIN_EXE_copylimit"));
    bad.args(["64", "--copies", "3"]);
    let err = labtest::usage_error("copylimit", &mut bad);
    let hint = "; see 'copylimit --help'";
    assert!(err.contains("--copies") && err.ends_with(hint), "{err}");
}
