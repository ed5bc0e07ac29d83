//! `lab run mq-sweep` end to end at a tiny scale: the broker and the load
//! generator as separate processes, the results JSON parsed and checked.

mod common;

use mq::Stats;
use mq::load::LoadReport;

#[test]
fn tiny_sweep_writes_parsable_results() {
    let dir = labkit::testing::tempdir();
    let args = [
        &["--threads", "1,3", "--rounds", "1", "--duration", "0.2"][..],
        &["--senders", "4", "--receivers", "3", "--queues", "2", "--size", "64"],
        &["--switch-cost-us", "2"],
    ];
    let doc = common::run_json("mq-sweep", &args.concat(), dir.path());
    assert_eq!(doc["experiment"], "mq-sweep");
    assert_eq!(doc["switch_cost"]["us"], 2.0);
    let rows = doc["rows"].as_array().unwrap();
    let modes: Vec<(&str, u64)> = rows
        .iter()
        .map(|r| (r["mode"].as_str().unwrap(), r["threads"].as_u64().unwrap()))
        .collect();
    assert_eq!(modes, [("threads", 1), ("threads", 3), ("event-loop", 0)]);
    for r in rows {
        assert!(r["messages_per_s"]["median"].as_f64().unwrap() > 0.0, "{r}");
        // Each run holds what the two programs printed, as their own types.
        let run = &r["runs"][0];
        let load: LoadReport = serde_json::from_value(run["load"].clone()).unwrap();
        let broker: Stats = serde_json::from_value(run["broker"].clone()).unwrap();
        assert!(load.sent > 0);
        assert_eq!((load.received, load.lost), (load.sent, 0));
        assert_eq!(
            (broker.messages_in, broker.messages_out),
            (load.sent, load.sent)
        );
        // The share is switches x 2 µs over the broker's CPU time.
        let switches = broker.voluntary_switches + broker.involuntary_switches;
        let want = 100.0 * switches as f64 * 2e-6 / (broker.user_s + broker.sys_s);
        let share = r["switch_share_pct"]["median"].as_f64().unwrap();
        assert!((share - want).abs() <= 1e-9 * want.max(1.0), "{share} vs {want}");
    }
    // acceptor + 3 pools of 3
    assert_eq!(rows[1]["runs"][0]["broker"]["threads_joined"], 10);
    for file in ["mq-sweep.json", "tables.md", "throughput.svg", "switch-share.svg"]
    {
        assert!(dir.path().join(file).is_file(), "{file} missing");
    }
    let tables = std::fs::read_to_string(dir.path().join("tables.md")).unwrap();
    assert!(tables.contains("event loop"), "{tables}");
    // Two tables (throughput and switching; CPU and latency), each with a
    // header, a rule and one line per row, none ragged.
    let blocks: Vec<Vec<usize>> = tables
        .split("\n\n")
        .map(|block| {
            block
                .lines()
                .filter(|l| l.starts_with('|'))
                .map(|l| l.matches('|').count())
                .collect::<Vec<usize>>()
        })
        .filter(|bars| !bars.is_empty())
        .collect();
    assert_eq!(blocks.len(), 2, "{tables}");
    for bars in blocks {
        assert_eq!(bars.len(), 2 + rows.len(), "{tables}");
        assert!(bars.iter().all(|&n| n == bars[0]), "ragged table:\n{tables}");
    }
}

/// A real ctx-switch results file, from a tiny `lab run ctx-switch`, gives
/// mq-sweep its cost of one switch: threads on one CPU, net of the pipe.
#[test]
fn the_switch_cost_comes_from_a_real_ctx_switch_run() {
    let _serial = labkit::testing::serial();
    let dir = labkit::testing::tempdir();
    let ctx = dir.path().join("ctx-switch");
    let args = ["--rounds", "1", "-n", "500", "--no-perf", "--pins", "same"];
    let args = [&args[..], &["--modes", "threads"]].concat();
    let ctx_doc = common::run_json("ctx-switch", &args, &ctx);
    let results = ctx.join("ctx-switch.json");
    let cell = &ctx_doc["cells"][0];
    let (net, raw) =
        (cell["net_us_per_switch"].as_f64(), cell["us_per_switch"].as_f64());
    let (want, key) = match net {
        Some(net) if net > 0.0 => (net, "net_us_per_switch"),
        _ => (raw.unwrap(), "us_per_switch"),
    };
    let sweep = dir.path().join("mq-sweep");
    let args = [
        &["--threads", "1", "--rounds", "1", "--duration", "0.2"][..],
        &["--senders", "2", "--receivers", "2", "--queues", "1", "--size", "64"],
        &["--no-event-loop", "--switch-cost-from", results.to_str().unwrap()],
    ];
    let doc = common::run_json("mq-sweep", &args.concat(), &sweep);
    assert_eq!(doc["switch_cost"]["us"].as_f64(), Some(want));
    assert_eq!(
        doc["switch_cost"]["source"],
        format!("from the ctx-switch results (threads, pin same, {key})")
    );
    // A file that is not ctx-switch results is an error, not a zero.
    let not_ctx = sweep.join("mq-sweep.json");
    let args = ["--threads", "1", "--switch-cost-from", not_ctx.to_str().unwrap()];
    let never = dir.path().join("never");
    let err = common::lab_fails(&mut common::lab_run("mq-sweep", &args, &never));
    assert!(err.contains("no cost of one switch in it"), "{err}");
}

#[test]
fn bad_sweep_flags_exit_2() {
    common::bad_flags_exit_2(
        "mq-sweep",
        &[
            &["--threads", "0"],
            &["--threads", "x"],
            &["--duration", "0"],
            &["--switch-cost-us", "2", "--switch-cost-from", "x.json"],
        ],
    );
    let err = common::lab_refuses(&[
        "run",
        "mq-sweep",
        "--receivers",
        "2",
        "--queues",
        "4",
    ]);
    assert!(err.contains("--receivers 2 leaves queues without a receiver"), "{err}");
}

#[test]
fn a_sweep_alone_measures_its_switch_cost_and_never_takes_the_references() {
    let _serial = labkit::testing::serial();
    // A checkout whose reference has ctx-switch results: a run of mq-sweep
    // alone must not read them (another run, maybe another machine).
    let checkout = labkit::testing::tempdir();
    let reference = lab::runs::reference().expect("a reference run in results/");
    let theirs = checkout.path().join("results/2026-01-01-ref/ctx-switch");
    std::fs::create_dir_all(&theirs).unwrap();
    std::fs::copy(
        reference.join("ctx-switch/ctx-switch.json"),
        theirs.join("ctx-switch.json"),
    )
    .unwrap();
    let out = labkit::testing::tempdir();
    let args = [
        &["--threads", "1", "--no-event-loop", "--rounds", "1", "--duration", "0.2"]
            [..],
        &["--senders", "2", "--receivers", "2", "--queues", "1", "--size", "64"],
    ];
    let mut cmd = common::lab_run("mq-sweep", &args.concat(), out.path());
    let done =
        cmd.env("LAB_CHECKOUT", checkout.path()).arg("--json").output().unwrap();
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let doc: serde_json::Value = labkit::testing::json(&done.stdout);
    let source = doc["switch_cost"]["source"].as_str().unwrap();
    assert!(source.starts_with("measured"), "{source}");
}
