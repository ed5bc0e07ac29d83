//! `lab run mq-sweep` end to end at a tiny scale: the broker and the load
//! generator as separate processes, the results JSON parsed and checked.

mod common;

use serde_json::Value;

#[test]
fn tiny_sweep_writes_parsable_results() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::lab()
        .args(["run", "mq-sweep", "--threads", "1,3", "--rounds", "1"])
        .args(["--duration", "0.2", "--senders", "4", "--receivers", "3"])
        .args(["--queues", "2", "--size", "64", "--switch-cost-us", "2", "--json"])
        .arg("--out")
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
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
        let run = &r["runs"][0];
        let sent = run["load"]["sent"].as_u64().unwrap();
        assert!(sent > 0);
        assert_eq!(run["load"]["received"], sent);
        assert_eq!(run["load"]["lost"], 0);
        assert_eq!(run["broker"]["messages_out"], sent);
        let share = r["switch_share_pct"]["median"].as_f64().unwrap();
        assert!(share.is_finite() && share >= 0.0);
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

#[test]
fn bad_sweep_flags_exit_2() {
    for args in [
        &["--threads", "0"][..],
        &["--threads", "x"],
        &["--duration", "0"],
        &["--receivers", "2", "--queues", "4"],
    ] {
        let out =
            common::lab().args(["run", "mq-sweep"]).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}
