//! `lab run pipe-speed` end to end, at tiny settings.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use crate::common::{program, run_json};
use serde_json::Value;

/// The points of a run with `--blocks 1,65537` are at those sizes, but
/// for pipespeed2: 65537 bytes does not fit a default pipe, so it skips it.
fn check_blocks(points: &[&Value], program: &str) {
    let blocks: Vec<u64> =
        points.iter().map(|p| p["block_bytes"].as_u64().unwrap()).collect();
    let expected: &[u64] = if program == "pipespeed2" { &[1] } else { &[1, 65537] };
    assert_eq!(blocks, expected, "{program}");
}

/// The series of `part` whose `field` is `value`.
fn series<'a>(
    saved: &'a Value,
    part: &str,
    field: &str,
    value: &str,
) -> Vec<&'a Value> {
    let all = saved["series"].as_array().unwrap();
    all.iter().filter(|s| s["part"] == part && s[field] == value).collect()
}

/// Every condition at a setting ran exactly once per round, in as many
/// rounds as every other condition there (at least `rounds`, and even when
/// there are two or more, so that the engine's order is balanced); a
/// warm-up run of each condition is kept and marked.
fn check_rounds(saved: &Value, rounds: u64) {
    let mut seen: BTreeMap<String, BTreeMap<String, Vec<u64>>> = BTreeMap::new();
    let mut warm = BTreeSet::new();
    for o in saved["observations"].as_array().unwrap() {
        let condition = o["condition"].as_str().unwrap().to_string();
        match o["round"].as_u64() {
            Some(round) => seen
                .entry(o["setting"].to_string())
                .or_default()
                .entry(condition)
                .or_default()
                .push(round),
            None => assert!(warm.insert(condition), "one warm-up each: {o}"),
        }
    }
    for (setting, conditions) in seen {
        let n = conditions.len() as u64;
        for (condition, got) in &conditions {
            let k = got.len() as u64;
            assert!(
                k >= rounds && (n < 2 || k % 2 == 0),
                "{setting} {condition}: {k}"
            );
            assert_eq!(*got, (1..=k).collect::<Vec<_>>(), "{setting} {condition}");
        }
        let lengths: BTreeSet<usize> = conditions.values().map(Vec::len).collect();
        assert_eq!(lengths.len(), 1, "{setting}: {conditions:?}");
    }
}

/// Two block sizes, five blocks, two rounds. 65537 bytes does not fit a
/// default pipe: pipespeed2 must skip it, pipespeed2t must not.
const TINY: &[&str] = &["--blocks", "1,65537", "--count", "5", "--rounds", "2"];

#[test]
fn a_tiny_run_writes_parseable_results() {
    let _serial = labtest::serial();
    let dir = labtest::tempdir();
    let args = [TINY, &["--ladder-blocks", "4095,65537"]].concat();
    let saved = run_json("pipe-speed", &args, dir.path());
    assert_eq!(saved["experiment"], "pipe-speed");
    assert_eq!(saved["rounds"], 2);
    assert!(saved["pipe"]["default_buffer_bytes"].as_u64().unwrap() >= 4096);
    assert_eq!(saved["pipe"]["article_buffer_bytes"], 4096);

    let keys = common::strings(&saved["variants"], "key");
    assert_eq!(
        keys,
        [
            "pipespeed2",
            "pipe",
            "pipe-1M",
            "fifo",
            "processes",
            "socketpair",
            "vmsplice"
        ]
    );
    // Every variant unpinned; pipespeed2t's, a writer and a reader, at each
    // placement too: both on one CPU, and one on each of two when there are.
    let cpus = labkit::affinity::allowed_cpus().unwrap().len();
    let placements = common::strings(&saved["placements"], "name");
    assert_eq!(placements, ["unpinned", "one-cpu", "two-cpus"][..cpus.min(2) + 1]);
    for key in &keys {
        for placement in &placements {
            let points: Vec<&Value> = series(&saved, "grid", "condition", key)
                .into_iter()
                .filter(|s| s["placement"] == *placement)
                .collect();
            if *key == "pipespeed2" && *placement != "unpinned" {
                assert!(points.is_empty(), "one thread, one placement");
                continue;
            }
            check_blocks(&points, key);
            for p in points {
                assert_eq!(p["count"], 5);
                assert!(p["mb_per_s"]["n"].as_u64().unwrap() >= 2, "{p}");
                assert!(p["mb_per_s"]["median"].as_f64().unwrap() > 0.0);
            }
        }
    }
    // The copy limit at each block, in the same rounds as the unpinned.
    let copies = series(&saved, "grid", "condition", "copylimit");
    check_blocks(&copies, "copylimit");
    assert!(
        copies.iter().all(|c| c["memcpy_mb_per_s"]["min"].as_f64().unwrap() > 0.0)
    );
    let limits = saved["copy_limit"].as_array().unwrap();
    assert_eq!(limits.len(), 2);
    assert!(limits.iter().all(|c| c["mb_per_s"].as_f64().unwrap() > 0.0));
    check_rounds(&saved, 2);
    assert!(saved["vs_c"].as_array().unwrap().is_empty());

    let tables = std::fs::read_to_string(dir.path().join("tables.md")).unwrap();
    assert!(
        tables.contains("Then and now") && tables.contains(" 65537 |"),
        "{tables}"
    );
    assert!(!tables.contains("pipe ladder"), "the ladder has its own file");
    assert_eq!(tables.contains("3. Writer and reader"), cpus >= 1, "{tables}");
    check_ladder(&saved, dir.path());
    for svg in [
        "one-thread.svg",
        "two-threads.svg",
        "transports.svg",
        "placement.svg",
        "ladder.svg",
    ] {
        let text = std::fs::read_to_string(dir.path().join(svg)).unwrap();
        assert!(text.starts_with("<svg"), "{svg}");
    }
}

/// The ladder of a tiny run: five rungs at each block size, each with the
/// figures the book and the issue ask for; only rungs 1 to 4 verified.
fn check_ladder(saved: &Value, dir: &std::path::Path) {
    let ladder = &saved["ladder"];
    let rungs = ladder["rungs"].as_array().unwrap();
    assert_eq!(rungs.len(), 5);
    let mut seen = Vec::new();
    for r in series(saved, "ladder", "placement", "unpinned") {
        let name = r["condition"].as_str().unwrap();
        let rung: u64 = name.strip_prefix("rung-").unwrap().parse().unwrap();
        let method = rungs[rung as usize - 1]["method"].as_str().unwrap();
        seen.push((r["block_bytes"].as_u64().unwrap(), rung));
        let verified = r["verified"]["min"] == 1.0;
        assert_eq!(verified, method != "splice-null", "{r}");
        assert_eq!(verified, rung <= 4, "{r}");
        assert_eq!(r["count"], 5);
        assert!(r["mb_per_s"]["n"].as_u64().unwrap() >= 2, "{r}");
        assert!(r["mb_per_s"]["median"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["copy_mb_per_s"]["median"].as_f64().unwrap() > 0.0, "{r}");
        // vmsplice's ring covers the pipe plus two blocks.
        let slots = r["ring_slots"]["median"].as_f64().unwrap();
        assert_eq!(slots == 1.0, method == "write", "{r}");
    }
    let expected: Vec<(u64, u64)> =
        [4095, 65537].iter().flat_map(|&b| (1..=5).map(move |k| (b, k))).collect();
    assert_eq!(seen, expected);
    let md = std::fs::read_to_string(dir.join("ladder.md")).unwrap();
    assert!(md.contains("The pipe ladder") && md.contains("NOT VERIFIED"), "{md}");
    assert!(md.contains("Where the time goes"), "{md}");
}

/// The keys of a JSON object.
fn keys(v: &serde_json::Value) -> BTreeSet<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

/// Each C reference, built the runner's way, prints with `--json` the
/// object its Rust twin prints, and the runner's type reads it.
#[test]
fn the_c_twins_print_the_rust_programs_report() {
    labtest::require!(
        labtest::have_tool("cc"),
        "no C compiler (cc) for the C references"
    );
    for (name, mode) in [("pipespeed2", "single thread"), ("pipespeed2t", "threads")]
    {
        let c = lab::experiments::pipe_speed::c_twin(name).unwrap();
        let out = std::process::Command::new(&c)
            .args(["100", "4097", "--json"])
            .output()
            .unwrap();
        let report: pipespeed2::Report = labtest::report(&out);
        assert_eq!(report.program, format!("{name}.c"));
        assert_eq!(
            (report.transport.as_str(), report.mode.as_str()),
            ("pipe", mode)
        );
        assert_eq!((report.count, report.block_bytes), (100, 4097));
        assert_eq!(report.bytes, 100 * 4097);
        assert!(report.verified && report.pipe_size.unwrap() >= 4097);
        let rust = program(name).args(["100", "4097", "--json"]).output().unwrap();
        assert_eq!(
            keys(&labtest::json(&out.stdout)),
            keys(&labtest::json(&rust.stdout)),
            "{name}: the same fields"
        );
        // Without --json, the Rust program's line.
        let line =
            std::process::Command::new(&c).args(["3", "10"]).output().unwrap();
        let line = String::from_utf8(line.stdout).unwrap();
        assert!(
            line.starts_with("3 x 10 bytes = 30 bytes in ")
                && line.contains(&format!("MB/s (pipe, {mode}, pipe buffer ")),
            "{line}"
        );
    }
}

#[test]
fn vs_c_pairs_both_programs_with_c_on_one_cpu_and_unpinned() {
    let _serial = labtest::serial();
    labtest::require!(
        labtest::have_tool("cc"),
        "no C compiler (cc) for the C references"
    );
    let dir = labtest::tempdir();
    let args = [TINY, &["--vs-c", "--no-ladder"]].concat();
    let saved = run_json("pipe-speed", &args, dir.path());
    assert!(saved["ladder"].is_null());
    let vs_c = saved["vs_c"].as_array().unwrap();
    let mut cells: Vec<(&str, &str, &str)> = Vec::new();
    for c in vs_c {
        let cell =
            ["program", "against", "placement"].map(|k| c[k].as_str().unwrap());
        if !cells.contains(&cell.into()) {
            cells.push(cell.into());
        }
    }
    let mut expected = Vec::new();
    for placement in ["one-cpu", "unpinned"] {
        expected.extend([
            ("pipespeed2", "pipespeed2.c", placement),
            ("pipespeed2t", "pipespeed2t.c", placement),
            // the control: the C program against itself
            ("pipespeed2t.c", "pipespeed2t.c", placement),
        ]);
    }
    assert_eq!(cells, expected);
    for (program, against, placement) in cells {
        let points: Vec<&Value> = vs_c
            .iter()
            .filter(|c| {
                (&c["program"], &c["against"]) == (&program.into(), &against.into())
            })
            .filter(|c| c["placement"] == placement)
            .collect();
        check_blocks(&points, program);
        for p in points {
            assert_eq!(p["cpu"].is_u64(), placement == "one-cpu", "{p}");
            assert_eq!(p["count"], 5);
            assert_eq!(p["ratio"]["n"], 2);
            assert!(p["ratio"]["median"].as_f64().unwrap() > 0.0);
        }
    }
    // Each pair's two programs ran once per round, back to back.
    check_rounds(&saved, 2);
    let text = std::fs::read_to_string(dir.path().join("vs-c.md")).unwrap();
    // One table per placement, one column per pair.
    for placement in ["one CPU", "unpinned"] {
        assert!(text.contains(&format!("C (gcc -O2), {placement}: ")), "{text}");
    }
    assert!(text.contains(" pipespeed2t |") && text.contains(" 65537 |"), "{text}");
    let svg = std::fs::read_to_string(dir.path().join("vs-c.svg")).unwrap();
    assert!(svg.starts_with("<svg"));
}

#[test]
fn bad_options_exit_2() {
    common::bad_flags_exit_2(
        "pipe-speed",
        &[
            &["--blocks", "0"],
            &["--blocks", "1,x"],
            &["--count", "0"],
            &["--rounds", "0"],
            &["--ladder-blocks", "0"],
            &["--ladder-mib", "0"],
            &["--no-ladder", "--ladder-blocks", "64k"],
            &["--no-ladder", "--ladder-busy-poll"],
            &["--full", "--blocks", "64"],
        ],
    );
    // The conflict names both flags.
    let err = labtest::usage_error(
        "lab run pipe-speed",
        common::lab_std().args(["run", "pipe-speed", "--full", "--blocks", "64"]),
    );
    assert!(err.contains("'--full'") && err.contains("'--blocks"), "{err}");
}
