//! `lab run mq-sweep` end to end at a tiny scale: the broker and the load
//! generator as separate processes, the results JSON parsed and checked.

use crate::common;

#[test]
fn tiny_sweep_writes_parsable_results() {
    let dir = labtest::tempdir();
    let args = [
        &["--threads", "1,3", "--rounds", "1", "--duration", "0.2"][..],
        &["--senders", "4", "--receivers", "3", "--queues", "2", "--size", "64"],
        &["--switch-cost-us", "2", "--brokers", "lab", "--pipeline", "1"],
    ];
    let doc = common::run_json("mq-sweep", &args.concat(), dir.path());
    assert_eq!(doc["experiment"], "mq-sweep");
    assert_eq!(doc["switch_cost"]["us"], 2.0);
    let rows = doc["designs"].as_array().unwrap();
    let modes: Vec<(&str, u64)> = rows
        .iter()
        .map(|r| (r["mode"].as_str().unwrap(), r["threads"].as_u64().unwrap()))
        .collect();
    assert_eq!(modes, [("threads", 1), ("threads", 3), ("event-loop", 0)]);
    // Every run is an observation: a warm-up of each design and of the
    // floor, then one round of each asked, made two so that each pair goes
    // in each order once, then one of the open-loop point (the lab's best
    // design, at half its rate).
    let observations = doc["observations"].as_array().unwrap();
    assert_eq!(observations.len(), 3 * (rows.len() + 1) + 1);
    let open = keys_at(&doc, 1, doc["open_loop"]["rate"].as_u64().unwrap());
    assert_eq!(open.len(), 1);
    for r in rows {
        let key = r["condition"].as_str().unwrap();
        let s = series(&doc, 1, key);
        assert!(s["messages_per_s"]["median"].as_f64().unwrap() > 0.0, "{s}");
        let runs = runs_of(&doc, key);
        let rounds = 2 + usize::from(open.contains(&key));
        assert_eq!(runs.len(), 1 + rounds, "{key}: a warm-up and its rounds");
        // Each run holds what the two programs printed.
        for m in runs {
            let sent = m["sent"].as_f64().unwrap();
            assert!(sent > 0.0);
            assert_eq!(
                (m["received"].as_f64(), m["lost"].as_f64()),
                (Some(sent), Some(0.0))
            );
            assert_eq!(
                (m["messages_in"].as_f64(), m["messages_out"].as_f64()),
                (Some(sent), Some(sent))
            );
            // The share is switches x 2 µs over the broker's CPU time.
            let switches = m["voluntary_switches"].as_f64().unwrap()
                + m["involuntary_switches"].as_f64().unwrap();
            let want = 100.0 * switches * 2e-6 / m["cpu_s"].as_f64().unwrap();
            let share = m["switch_share_pct"].as_f64().unwrap();
            assert!(
                (share - want).abs() <= 1e-9 * want.max(1.0),
                "{share} vs {want}"
            );
        }
    }
    // acceptor + 3 pools of 3
    for m in runs_of(&doc, "threads-3") {
        assert_eq!(m["threads_joined"], 10.0);
    }
    for file in ["mq-sweep.json", "tables.md", "throughput.svg", "switch-share.svg"]
    {
        assert!(dir.path().join(file).is_file(), "{file} missing");
    }
    let tables = std::fs::read_to_string(dir.path().join("tables.md")).unwrap();
    assert!(tables.contains("event loop"), "{tables}");
    // Three tables (throughput and switching; CPU and latency; every
    // broker), each with a header, a rule and one line per row, none ragged.
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
    assert_eq!(blocks.len(), 3, "{tables}");
    for bars in blocks {
        assert_eq!(bars.len(), 2 + rows.len(), "{tables}");
        assert!(bars.iter().all(|&n| n == bars[0]), "ragged table:\n{tables}");
    }
}

/// The series of design `key` at `pipeline` messages per write (no rate).
fn series<'a>(
    doc: &'a serde_json::Value,
    pipeline: u32,
    key: &str,
) -> &'a serde_json::Value {
    let all = doc["series"].as_array().unwrap();
    all.iter()
        .find(|s| {
            s["pipeline"] == pipeline && s["rate"] == 0 && s["condition"] == key
        })
        .unwrap_or_else(|| panic!("no series {key} at {pipeline} per write"))
}

/// The metrics of every run of `key` (warm-up included), at any setting.
fn runs_of<'a>(doc: &'a serde_json::Value, key: &str) -> Vec<&'a serde_json::Value> {
    let all = doc["observations"].as_array().unwrap();
    all.iter().filter(|o| o["condition"] == key).map(|o| &o["metrics"]).collect()
}

/// The designs that ran at `pipeline` messages per write and `rate`, in
/// their order (the floor left out).
fn keys_at(doc: &serde_json::Value, pipeline: u32, rate: u64) -> Vec<&str> {
    let all = doc["series"].as_array().unwrap();
    let at = |s: &&serde_json::Value| s["pipeline"] == pipeline && s["rate"] == rate;
    let keys = all.iter().filter(at).map(|s| s["condition"].as_str().unwrap());
    keys.filter(|k| *k != "floor").collect()
}

/// A run's messages: a few thousand sent at least, each received exactly
/// once (none lost, duplicated or damaged); how many.
fn exactly_once(m: &serde_json::Value, key: &str) -> f64 {
    let sent = m["sent"].as_f64().unwrap();
    assert!(sent >= 1000.0, "{key}: {sent} sent");
    let counts =
        ["received", "lost", "duplicated", "corrupt"].map(|c| m[c].as_f64());
    assert_eq!(counts, [Some(sent), Some(0.0), Some(0.0), Some(0.0)], "{key}");
    sent
}

/// A real ctx-switch results file, from a tiny `lab run ctx-switch`, gives
/// mq-sweep its cost of one switch: threads on one CPU, net of the pipe.
#[test]
fn the_switch_cost_comes_from_a_real_ctx_switch_run() {
    let _serial = labtest::serial();
    let dir = labtest::tempdir();
    let ctx = dir.path().join("ctx-switch");
    let args = ["--rounds", "1", "-n", "500", "--no-perf", "--pins", "same"];
    let args = [&args[..], &["--modes", "threads"]].concat();
    let ctx_doc = common::run_json("ctx-switch", &args, &ctx);
    let results = ctx.join("ctx-switch.json");
    // The figures as its headline gives them, each the median of its rounds.
    let figure = |key: &str| ctx_doc["headline"][key]["value"].as_f64();
    let (net, raw) = (figure("threads_same_net_us"), figure("threads_same_us"));
    let (want, key) = match net {
        Some(net) if net > 0.0 => (net, "net_us_per_switch"),
        _ => (raw.unwrap(), "us_per_switch"),
    };
    let sweep = dir.path().join("mq-sweep");
    let args = [
        &["--threads", "1", "--rounds", "1", "--duration", "0.2"][..],
        &["--senders", "2", "--receivers", "2", "--queues", "1", "--size", "64"],
        &["--no-event-loop", "--brokers", "lab"],
        &["--switch-cost-from", results.to_str().unwrap()],
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
    // A path that is no file is a bad flag: one line, exit 2.
    let folder = dir.path().to_str().unwrap();
    for (path, what) in
        [(folder, "a folder, not a results file"), ("/no/such", "no such file")]
    {
        let err =
            common::lab_refuses(&["run", "mq-sweep", "--switch-cost-from", path]);
        assert_eq!(err, format!("lab: --switch-cost-from {path}: {what}"));
    }
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
    let _serial = labtest::serial();
    // A checkout whose reference has ctx-switch results: a run of mq-sweep
    // alone must not read them (another run, maybe another machine).
    let checkout = labtest::tempdir();
    let reference = lab::runs::reference().expect("a reference run in results/");
    let theirs = checkout.path().join("results/2026-01-01-ref/ctx-switch");
    std::fs::create_dir_all(&theirs).unwrap();
    std::fs::copy(
        reference.join("ctx-switch/ctx-switch.json"),
        theirs.join("ctx-switch.json"),
    )
    .unwrap();
    let out = labtest::tempdir();
    let args = [
        &["--threads", "1", "--no-event-loop", "--rounds", "1", "--duration", "0.2"]
            [..],
        &["--senders", "2", "--receivers", "2", "--queues", "1", "--size", "64"],
        &["--brokers", "lab"],
    ];
    let mut cmd = common::lab_run("mq-sweep", &args.concat(), out.path());
    let done =
        cmd.env("LAB_CHECKOUT", checkout.path()).arg("--json").output().unwrap();
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let doc: serde_json::Value = common::printed_json(&done.stdout);
    let source = doc["switch_cost"]["source"].as_str().unwrap();
    assert!(source.starts_with("measured just before each"), "{source}");
    // Each run of a design carries the cost it was reckoned at, measured
    // just before it; the floor runs no broker and has none.
    let runs = doc["observations"].as_array().unwrap();
    let designs: Vec<_> =
        runs.iter().filter(|o| o["condition"] != "floor").collect();
    assert!(!designs.is_empty());
    for o in designs {
        let us = o["metrics"]["switch_cost_us"].as_f64();
        assert!(us.is_some_and(|us| us > 0.0 && us < 1000.0), "{o}");
    }
}

// ------------------------------------------- Redis and NATS on the same load

/// Is `program` (redis-server, nats-server) installed where mq-sweep looks
/// for it: on PATH or in the system's sbin folders?
fn installed(program: &str) -> bool {
    labtest::have_tool(program)
        || ["/usr/local/sbin", "/usr/sbin", "/sbin"]
            .iter()
            .any(|d| std::path::Path::new(d).join(program).is_file())
}

/// Skip the calling test, saying what to install, unless `$program` is
/// installed (under CI=true, which installs both servers, a skip fails).
macro_rules! need {
    ($program:literal) => {
        labtest::require!(
            installed($program),
            "needs {} (apt-get install {})",
            $program,
            $program
        )
    };
}

/// The tiny load every server test uses.
const TINY_LOAD: &[&str] = &[
    "--rounds",
    "1",
    "--senders",
    "4",
    "--receivers",
    "4",
    "--queues",
    "2",
    "--size",
    "64",
    "--switch-cost-us",
    "2",
];

#[test]
fn redis_and_nats_take_the_same_load_exactly_once() {
    need!("redis-server");
    need!("nats-server");
    let dir = labtest::tempdir();
    let args = [
        TINY_LOAD,
        &[
            "--brokers",
            "redis,nats",
            "--redis-io-threads",
            "1,2",
            "--nats-gomaxprocs",
            "1",
        ],
        // The open-loop point has a test of its own (16 per write).
        &["--duration", "0.3", "--no-open-loop"],
    ];
    let doc = common::run_json("mq-sweep", &args.concat(), dir.path());
    let rows = doc["designs"].as_array().unwrap();
    let keys = common::strings(&doc["designs"], "condition");
    assert_eq!(keys, ["redis-1", "redis-2", "redis-2-reads", "nats-1"]);
    assert_eq!(keys_at(&doc, 1, 0), keys);
    for r in rows {
        let key = r["condition"].as_str().unwrap();
        // The load spoke the server's protocol (the runner refuses a report
        // in another) and delivered a few thousand messages at least, each
        // exactly once, in every run.
        for m in runs_of(&doc, key) {
            exactly_once(m, key);
            // The server's own accounting.
            assert!(m["cpu_s"].as_f64().unwrap() > 0.0, "{key}");
        }
        let s = series(&doc, 1, key);
        assert!(s["voluntary_per_message"]["median"].as_f64().unwrap() >= 0.0);
        // What it was.
        let server = &r["server"];
        assert!(!server["version"].as_str().unwrap().is_empty(), "{server}");
        assert!(server["settings"].to_string().contains(if r["mode"] == "redis" {
            "io-threads"
        } else {
            "GOMAXPROCS"
        }));
    }
    assert_eq!(doc["missing"], serde_json::json!([]));
    let tables = std::fs::read_to_string(dir.path().join("tables.md")).unwrap();
    assert!(tables.contains("Redis, io-threads 2, reads in them too"), "{tables}");
    assert!(dir.path().join("brokers.svg").is_file());
}

/// Pipelined, 16 messages per write, on every broker: each message of a
/// few thousand delivered exactly once, the generator's CPU beside the
/// broker's, the floor measured, each rate a fraction of it, and the
/// open-loop point run at one rate for all three.
#[test]
fn every_broker_takes_16_per_write_exactly_once() {
    need!("redis-server");
    need!("nats-server");
    let dir = labtest::tempdir();
    let args = [
        TINY_LOAD,
        &["--brokers", "lab,redis,nats", "--threads", "2", "--pipeline", "16"],
        &["--redis-io-threads", "1", "--nats-gomaxprocs", "1", "--duration", "0.3"],
    ];
    let doc = common::run_json("mq-sweep", &args.concat(), dir.path());
    assert!(keys_at(&doc, 1, 0).is_empty(), "no run at 1 per write");
    let keys = keys_at(&doc, 16, 0);
    assert_eq!(keys, ["threads-2", "event-loop", "redis-1", "nats-1"]);
    let rate = doc["open_loop"]["rate"].as_u64().unwrap();
    assert!(rate > 0);
    assert_eq!(doc["open_loop"]["pipeline"], 16);
    assert_eq!(keys_at(&doc, 16, rate).len(), 3, "one open-loop design per broker");
    for key in keys {
        let runs = runs_of(&doc, key);
        // A warm-up and two rounds at 16 per write, and for the open-loop
        // point's three designs (one per broker) its two rounds: each at
        // 16 per write.
        assert!(runs.len() == 3 || runs.len() == 5, "{key}: {} runs", runs.len());
        for m in runs {
            assert_eq!(m["per_write"], 16.0, "{key}");
            let sent = exactly_once(m, key);
            assert_eq!(sent % 16.0, 0.0, "{key}: whole writes of 16");
            assert!(m["load_cpu_us_per_message"].as_f64().unwrap() > 0.0, "{key}");
        }
        assert!(
            series(&doc, 16, key)["load_cpu_us_per_message"]["median"]
                .as_f64()
                .unwrap()
                > 0.0
        );
    }
    for o in doc["observations"].as_array().unwrap() {
        let open = o["setting"]["rate"] != 0;
        assert!(!open || o["setting"]["rate"] == rate, "{o}");
    }
    // The floor at 16 per write, and the lab's best as a fraction of it,
    // round by round: each round's best over the same round's floor.
    let floor = series(&doc, 16, "floor")["messages_per_s"]["median"].as_f64();
    let h = |key: &str| doc["headline"][key].clone();
    assert_eq!(h("floor_messages_per_s_p16")["value"].as_f64(), floor);
    let rounds = |key: &str| -> Vec<f64> {
        let r = h(key)["rounds"].as_array().unwrap().clone();
        r.iter().map(|v| v.as_f64().unwrap()).collect()
    };
    let (best, floors) =
        (rounds("ours_best_messages_per_s_p16"), rounds("floor_messages_per_s_p16"));
    let fractions = rounds("ours_fraction_of_floor_p16");
    assert_eq!((best.len(), floors.len(), fractions.len()), (2, 2, 2));
    for k in 0..2 {
        let want = best[k] / floors[k];
        assert!((fractions[k] - want).abs() <= 1e-9 * want.max(1.0), "{k}: {want}");
    }
    for key in ["ours_over_nats_p16", "ours_over_redis_p16", "open_loop_p99_ms_nats"]
    {
        assert!(
            doc["headline"][key]["interval"].is_array(),
            "{key}: {}",
            doc["headline"]
        );
    }
    let page = std::fs::read_to_string(dir.path().join("pipelined.md")).unwrap();
    assert!(page.contains("floor: the work alone"), "{page}");
    assert!(page.contains("Open loop"), "{page}");
    assert!(dir.path().join("pipelined.svg").is_file());
}

#[test]
fn a_missing_server_gives_a_row_that_says_how_to_install_it() {
    need!("nats-server");
    let dir = labtest::tempdir();
    let args = [
        TINY_LOAD,
        &["--brokers", "redis,nats", "--nats-gomaxprocs", "1", "--duration", "0.2"],
    ];
    let out = common::lab_run("mq-sweep", &args.concat(), dir.path())
        .env("LAB_REDIS_SERVER", "/nonexistent/redis-server")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "lab: note: redis-server is not installed (apt-get install redis-server)"
        ),
        "{stderr}"
    );
    let doc = common::read_json(dir.path().join("mq-sweep.json"));
    assert_eq!(doc["missing"][0]["program"], "redis-server");
    let keys = common::strings(&doc["designs"], "condition");
    assert_eq!(keys, ["nats-1"], "the rest of the sweep ran");
    assert_eq!(keys_at(&doc, 1, 0), ["nats-1"]);
    let tables = std::fs::read_to_string(dir.path().join("tables.md")).unwrap();
    assert!(
        tables.contains(
            "redis-server is not installed here: `apt-get install redis-server`"
        ),
        "{tables}"
    );
}

/// Start `lab run mq-sweep` on Redis alone for `seconds` a point, with a
/// TMPDIR of its own, and wait until its redis-server and its load
/// generator both run: the lab process, the server's pid and the TMPDIR.
fn lab_on_redis(
    seconds: &str,
) -> (std::process::Child, i32, labkit::cleanup::TempDir, labkit::cleanup::TempDir) {
    let tmp = labtest::tempdir();
    let out = labtest::tempdir();
    let args = [
        TINY_LOAD,
        &["--brokers", "redis", "--redis-io-threads", "1", "--duration", seconds],
    ];
    let mut cmd = common::lab_std();
    cmd.args(["run", "mq-sweep"]).args(args.concat()).arg("--out").arg(out.path());
    cmd.env("TMPDIR", tmp.path()).stdout(std::process::Stdio::null());
    cmd.stderr(std::process::Stdio::piped());
    let mut lab = cmd.spawn().unwrap();
    let pid = lab.id() as i32;
    let comm = |p: i32| {
        std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default()
    };
    let started = std::time::Instant::now();
    let server = loop {
        if let Some(status) = lab.try_wait().unwrap() {
            panic!("lab ended first: {status}");
        }
        let kids = labkit::children::of(pid).unwrap();
        let server = kids.iter().find(|k| comm(k.pid).starts_with("redis-server"));
        let load = kids.iter().any(|k| comm(k.pid).trim() == "load");
        if let (Some(s), true) = (server, load) {
            break s.pid;
        }
        assert!(
            started.elapsed().as_secs() < 60,
            "no redis-server and load after 60 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    (lab, server, tmp, out)
}

/// What lab said, once it has ended.
fn ended(lab: &mut std::process::Child) -> (std::process::ExitStatus, String) {
    use std::io::Read;
    let mut said = String::new();
    lab.stderr.take().unwrap().read_to_string(&mut said).unwrap();
    (lab.wait().unwrap(), said)
}

/// Gone: no process `pid`, and nothing left in the run's TMPDIR.
fn nothing_left(server: i32, tmp: &std::path::Path) {
    assert!(
        !std::path::Path::new(&format!("/proc/{server}")).exists(),
        "redis-server {server} left running"
    );
    let left: Vec<_> =
        std::fs::read_dir(tmp).unwrap().flatten().map(|e| e.path()).collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
}

#[test]
fn a_server_killed_mid_run_fails_the_run_with_one_line() {
    need!("redis-server");
    // Killed as soon as the load runs, well inside its 2 s of sending; the
    // load then waits out --duration and its drain (5 s) before it fails.
    let (mut lab, server, tmp, _out) = lab_on_redis("2");
    // SAFETY: kill only sends a signal, to the server lab started.
    assert_eq!(unsafe { libc::kill(server, libc::SIGKILL) }, 0);
    let (status, said) = ended(&mut lab);
    assert_eq!(status.code(), Some(1), "{said}");
    let lines: Vec<&str> =
        said.lines().filter(|l| !l.starts_with("lab: note")).collect();
    assert_eq!(lines.len(), 1, "one line: {said:?}");
    assert!(lines[0].starts_with("lab: ") && lines[0].contains("Redis"), "{said}");
    nothing_left(server, tmp.path());
}

#[test]
fn sigterm_to_lab_during_a_redis_point_leaves_no_server() {
    need!("redis-server");
    let (mut lab, server, tmp, _out) = lab_on_redis("600");
    // SAFETY: kill only sends a signal, to the lab we started.
    assert_eq!(unsafe { libc::kill(lab.id() as i32, libc::SIGTERM) }, 0);
    let (status, said) = ended(&mut lab);
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{said}");
    let last = said.lines().last().unwrap_or("");
    assert!(last.starts_with("lab: interrupted by SIGTERM; stopped"), "{said}");
    nothing_left(server, tmp.path());
}
