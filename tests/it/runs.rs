//! Where results go: a reader's runs never touch the committed reference,
//! runs at once each get their own folder, the reference command refuses a
//! dirty checkout, `lab compare` and the then-and-now table, and `--cpus`.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command as Std;

use crate::common::{bin_dir, lab};

const TINY: [&str; 6] = ["--procs", "2", "--counts", "3", "--rounds", "1"];

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Std::new("git").arg("-C").arg(dir).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A scratch git checkout with one commit, for `LAB_CHECKOUT`.
fn scratch_checkout() -> labkit::cleanup::TempDir {
    let dir = labtest::tempdir();
    git(dir.path(), &["init", "-q"]);
    std::fs::write(dir.path().join("README"), "scratch\n").unwrap();
    git(dir.path(), &["add", "README"]);
    git(
        dir.path(),
        &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one"],
    );
    dir
}

/// The folder a run said it wrote ("lab: results written to DIR").
fn written_to(stderr: &[u8]) -> PathBuf {
    let text = String::from_utf8_lossy(stderr);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("lab: results written to "))
        .unwrap_or_else(|| panic!("no 'results written to' line in: {text}"));
    PathBuf::from(line)
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.unwrap().file_name().into_string().unwrap()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn a_plain_run_writes_a_new_run_folder_and_leaves_git_status_clean() {
    let _serial = labtest::serial();
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR"));
    let before = git(checkout, &["status", "--porcelain"]);
    let out = lab().args(["run", "fork-vs-thread"]).args(TINY).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let target = written_to(&out.stderr);
    let run = target.parent().unwrap().to_path_buf();
    let after = git(checkout, &["status", "--porcelain"]);
    let kept = target.join("fork-vs-thread.json").is_file();
    let table = run.join("then-and-now.md").is_file();
    // What else the machine did meanwhile is recorded with the results.
    let load = common::read_json(target.join("fork-vs-thread.json"))["load"].clone();
    std::fs::remove_dir_all(&run).unwrap();
    assert!(load["wall_s"].as_f64().is_some_and(|s| s > 0.0), "{load}");
    assert!(load["others_cpu_s"].as_f64().is_some_and(|s| s >= 0.0), "{load}");
    assert!(
        load["busy"].is_boolean() && load["loadavg_start"].is_string(),
        "{load}"
    );
    assert_eq!(before, after, "a plain run changed what git sees");
    assert!(run.starts_with(checkout.join("runs")), "{}", run.display());
    assert!(kept && table, "the run folder holds the results and the verdicts");
}

#[test]
fn two_runs_at_once_both_succeed_each_into_its_own_folder() {
    let _serial = labtest::serial();
    let checkout = labtest::tempdir();
    let start = || {
        common::lab_std()
            .env("LAB_CHECKOUT", checkout.path())
            .args(["run", "fork-vs-thread"])
            .args(TINY)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (start(), start());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    for out in [&a, &b] {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let (ta, tb) = (written_to(&a.stderr), written_to(&b.stderr));
    assert_ne!(ta, tb);
    let runs = entries(&checkout.path().join("runs"));
    assert_eq!(runs.len(), 2, "{runs:?}");
    for run in &runs {
        let dir = checkout.path().join("runs").join(run);
        // Whole runs only: the results, the verdicts and the rules they were
        // judged by, the manifest (with its end, the folders it holds and
        // the rules' hash), no staging folder.
        assert_eq!(
            entries(&dir),
            [
                "claims.toml",
                "fork-vs-thread",
                "run.json",
                "then-and-now.json",
                "then-and-now.md"
            ]
        );
        let manifest = common::read_json(dir.join("run.json"));
        assert_eq!(manifest["kind"], "run");
        assert!(manifest["ended"].is_string(), "{manifest}");
        assert_eq!(manifest["folders"], serde_json::json!(["fork-vs-thread"]));
        let rules = std::fs::read_to_string(dir.join("claims.toml")).unwrap();
        assert_eq!(manifest["rules"]["sha256"], lab::claims::sha256(&rules));
        assert!(dir.join("fork-vs-thread/fork-vs-thread.json").is_file());
    }
}

#[test]
fn a_failed_run_leaves_no_run_folder() {
    let _serial = labtest::serial();
    let checkout = labtest::tempdir();
    // Programs that fail at once, in place of the real ones.
    let bins = labtest::tempdir();
    for name in ["fork", "thread"] {
        let path = bins.path().join(name);
        labtest::write_executable(&path, "#!/bin/sh\necho broken >&2\nexit 1\n");
    }
    let err = common::lab_fails(
        lab()
            .env("LAB_CHECKOUT", checkout.path())
            .env("LAB_BIN_DIR", bins.path())
            .args(["run", "fork-vs-thread"])
            .args(TINY),
    );
    assert!(err.ends_with("exited with status 1: broken"), "{err}");
    assert_eq!(entries(&checkout.path().join("runs")), Vec::<String>::new());
}

/// `lab run all` interrupted in its first step, before any experiment
/// finished, leaves no run folder, as `lab run NAME` interrupted does;
/// asked for far more rounds than its own, it says so first.
#[test]
fn run_all_interrupted_before_a_step_finished_leaves_no_run_folder() {
    let _serial = labtest::serial();
    let checkout = labtest::tempdir();
    // Programs that say they started, then wait: the interrupt comes
    // while the first step runs them.
    let bins = labtest::tempdir();
    let started = bins.path().join("started");
    for name in ["fork", "thread"] {
        let script =
            format!("#!/bin/sh\ntouch {}\nexec sleep 600\n", started.display());
        labtest::write_executable(bins.path().join(name), &script);
    }
    let all = common::lab_std()
        .env("LAB_CHECKOUT", checkout.path())
        .env("LAB_BIN_DIR", bins.path())
        .args(["run", "all", "--rounds", "1000"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let since = std::time::Instant::now();
    while !started.exists() {
        assert!(since.elapsed().as_secs() < 60, "the first program never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pid = nix::unistd::Pid::from_raw(all.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let out = all.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    // Far more rounds than its own, said before the first step.
    let note = "lab: note: --rounds 1000 runs every step 1000 rounds, where its own \
                are 10 at most: this run takes longer than run all's 4 to 5 minutes";
    assert_eq!(stderr.lines().next(), Some(note), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("lab: interrupted by SIGINT; stopped 1 program"),
        "{stderr}"
    );
    assert_eq!(
        entries(&checkout.path().join("runs")),
        Vec::<String>::new(),
        "{stderr}"
    );
}

#[test]
fn the_reference_command_refuses_a_dirty_checkout_and_names_a_clean_commit() {
    let _serial = labtest::serial();
    let checkout = scratch_checkout();
    let head = git(checkout.path(), &["rev-parse", "--short=12", "HEAD"]);
    std::fs::write(checkout.path().join("stray.rs"), "// uncommitted\n").unwrap();
    let reference_as = |dir: &Path, id: &std::ffi::OsStr| {
        lab()
            .env("LAB_CHECKOUT", dir)
            .env("LAB_RUN_ID", id)
            .args(["run", "fork-vs-thread", "--reference"])
            .args(TINY)
            .output()
            .unwrap()
    };
    let reference = |dir: &Path| reference_as(dir, "2026-01-02-test".as_ref());
    let out = reference(checkout.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("uncommitted changes") && err.contains("stray.rs"),
        "{err}"
    );
    assert!(!checkout.path().join("results").exists());

    std::fs::remove_file(checkout.path().join("stray.rs")).unwrap();
    let out = reference(checkout.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let dir = checkout.path().join("results/2026-01-02-test");
    let json = common::read_json(dir.join("fork-vs-thread/fork-vs-thread.json"));
    assert_eq!(json["machine"]["commit"], head.trim());
    assert_eq!(json["settings"]["reference"], true);
    assert!(dir.join("then-and-now.md").is_file());
    // Results written by the reference command do not make it dirty.
    let again = reference(checkout.path());
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    // The folder's manifest keeps the command that made it, and lists the
    // second, which put results into it.
    let manifest = common::read_json(dir.join("run.json"));
    let command = manifest["command"].as_str().unwrap();
    assert!(command.starts_with("lab run fork-vs-thread --reference"), "{manifest}");
    assert_eq!(manifest["added"], serde_json::json!([command]), "{manifest}");
    // Two folder names, as `$(ls results)` gives when it holds two: refused
    // with one line, and no folder made.
    // So are a name that is not UTF-8 (never the default folder instead),
    // and one that is no date.
    use std::os::unix::ffi::OsStrExt;
    let ids: [&[u8]; 3] = [
        b"2026-01-02-test\n2026-01-03-test",
        b"2026-01-02-\xff",
        b"2026-99-99-test",
    ];
    for id in ids {
        let out = reference_as(checkout.path(), std::ffi::OsStr::from_bytes(id));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("LAB_RUN_ID"), "{err}");
        assert_eq!(entries(&checkout.path().join("results")), ["2026-01-02-test"]);
    }
}

/// A newer reference folder that cannot be the reference (its manifest
/// damaged, or one experiment's `--reference` alone beside a whole
/// reference) is passed over by name, never silently.
#[test]
fn a_newer_reference_that_does_not_read_or_is_partial_is_named_and_passed_over() {
    let checkout = labtest::tempdir();
    let results = checkout.path().join("results");
    std::fs::create_dir(&results).unwrap();
    let reference =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("results/2026-12-07-vm");
    let cp = |from: &Path, to: &Path| {
        let ok =
            std::process::Command::new("cp").arg("-r").arg(from).arg(to).status();
        assert!(ok.unwrap().success());
    };
    cp(&reference, &results);
    let newer = results.join("2026-12-09-vm");
    std::fs::create_dir(&newer).unwrap();
    std::fs::write(newer.join("run.json"), "{\"lab_run\": 1, \"added\": 5}\n")
        .unwrap();
    // One experiment's reference, made on a later day without LAB_RUN_ID.
    let partial = results.join("2026-12-08-vm");
    std::fs::create_dir(&partial).unwrap();
    cp(&reference.join("footprint"), &partial);
    let mut manifest = common::read_json(reference.join("run.json"));
    manifest["command"] = "lab run footprint --reference".into();
    manifest["folders"] = serde_json::json!(["footprint"]);
    std::fs::write(partial.join("run.json"), manifest.to_string()).unwrap();
    let out =
        lab().env("LAB_CHECKOUT", checkout.path()).arg("verdicts").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let passed = |dir: &Path, why: &str| {
        let line =
            format!("lab: passed over the reference {}: {why}", dir.display());
        assert!(err.lines().any(|l| l.starts_with(&line)), "{err}");
    };
    passed(&newer, "its manifest is damaged");
    passed(&partial, "made by `lab run footprint --reference`, not `lab reference`");
    // The verdicts are the whole reference's: the partial one has no
    // create-destroy to judge create-ratio on.
    let said = String::from_utf8_lossy(&out.stdout);
    let line = said.lines().find(|l| l.starts_with("create-ratio"));
    assert_eq!(
        line.map(|l| l.split_whitespace().last()),
        Some(Some("holds")),
        "{said}"
    );
}

#[test]
fn lab_reference_refuses_a_dirty_checkout_before_its_first_step() {
    let _serial = labtest::serial();
    let checkout = scratch_checkout();
    std::fs::write(checkout.path().join("stray.rs"), "// uncommitted\n").unwrap();
    let out = lab()
        .env("LAB_CHECKOUT", checkout.path())
        .env("LAB_RUN_ID", "2026-01-02-test")
        .arg("reference")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("uncommitted changes") && err.contains("stray.rs"),
        "{err}"
    );
    // No step started: its first line would name it.
    assert!(!err.contains("[1/"), "{err}");
    assert!(!checkout.path().join("results").exists());
}

/// A hand-made results file with a header and headline figures.
fn results(
    run: &Path,
    folder: &str,
    kernel: &str,
    cpus: usize,
    figures: &[(&str, f64)],
) {
    let experiment = folder.split('/').next().unwrap();
    let headline: serde_json::Map<String, serde_json::Value> = figures
        .iter()
        .map(|(k, v)| {
            // Five rounds of exactly `v`: its interval is `v` to `v`.
            let label = format!("figure {k}");
            let method = lab::report::Method::Median;
            let f =
                lab::report::Figure::new(&label, "x", method, vec![*v; 5]).unwrap();
            (k.to_string(), serde_json::to_value(f).unwrap())
        })
        .collect();
    let doc = serde_json::json!({
        "experiment": experiment,
        "command": "lab run x",
        "machine": {
            "cpu_model": "Test CPU", "logical_cpus": 2, "memory_mib": 1024,
            "kernel": kernel, "arch": "x86_64", "rustc": "rustc 1", "virtualization": "none",
            "hostname": "h", "date": "2026-01-01T00:00:00Z", "commit": "abc"
        },
        "settings": {
            "rounds": if cpus == 1 { 3 } else { 5 }, "full": false,
            "cpus": if cpus == 1 { Some("0") } else { None },
            "cpus_allowed": if cpus == 1 { "0" } else { "0-1" }, "cpu_count": cpus,
            "variant": null, "reference": false
        },
        "headline": headline,
    });
    let dir = run.join(folder);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{experiment}.json")), doc.to_string()).unwrap();
}

#[test]
fn compare_puts_figures_side_by_side_and_names_what_differs() {
    let root = labtest::tempdir();
    let (a, b) =
        (root.path().join("2026-01-01-a"), root.path().join("2026-01-01-b"));
    results(
        &a,
        "fork-vs-thread",
        "6.1",
        2,
        &[("fork_over_thread_c", 1.0), ("only_a", 4.0)],
    );
    results(&b, "fork-vs-thread", "2.6", 2, &[("fork_over_thread_c", 0.5)]);
    // A one-CPU sub-run in A, which the one-CPU claims prefer.
    results(&a, "fork-vs-thread/cpu0", "6.1", 1, &[("fork_over_thread_c", 3.0)]);
    results(&b, "pipe-speed", "2.6", 2, &[("pipe_buffer_bytes", 4096.0)]);

    // A was measured while other processes used 30% of a CPU.
    let file = a.join("fork-vs-thread/fork-vs-thread.json");
    let mut doc = common::read_json(&file);
    doc["load"] = serde_json::json!({
        "loadavg_start": "1.50 1.00 0.50 2/100 7", "loadavg_end": "1.70 1.1 0.5 1/99 8",
        "others_cpu_s": 3.0, "wall_s": 10.0, "busy": true
    });
    std::fs::write(&file, doc.to_string()).unwrap();
    // Neither is a run of the reader's under runs/: nothing is written
    // into them; --out says where the comparison goes.
    let saved = root.path().join("saved");
    let compare = || {
        let mut cmd = lab();
        cmd.arg("compare").arg(&a).arg(&b).arg("--out").arg(&saved);
        cmd.output().unwrap()
    };
    let out = lab().arg("compare").arg(&a).arg(&b).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("comparison not saved"), "{err}");
    assert!(!a.join("compare.json").exists() && !a.join("compare.md").exists());
    let out = compare();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("differs: kernel: 6.1 | 2.6"), "{text}");
    // Each claim's verdict on both runs: pipe-buffer-4096 holds in B and
    // is not measured in A; printing-same no longer holds in either (3x on
    // A's one CPU, 0.5x on B's two).
    assert!(
        text.contains("\n  pipe-buffer-4096  <- the verdicts differ\n"),
        "{text}"
    );
    assert!(
        text.contains("\n  printing-same\n    this run: no longer holds: 3.00x"),
        "{text}"
    );
    assert!(
        text.contains(
            "busy machine: this run: other processes used 3.0 CPU-s in 10 s (30% \
             of a CPU); load average 1.50 at the start, 1.70 at the end"
        ),
        "{text}"
    );
    let json = common::read_json(saved.join("compare.json"));
    assert!(saved.join("compare.md").is_file());
    // The element of the list `json[list]` whose `key` is `value`.
    let find = |list: &str, key: &str, value: &str| {
        let mut items = json[list].as_array().unwrap().iter();
        items.find(|e| e[key] == value).unwrap().clone()
    };
    let entry = |name| find("entries", "results", name);
    let plain = entry("fork-vs-thread");
    let fig = &plain["figures"][0];
    assert_eq!(fig["key"], "fork_over_thread_c");
    assert_eq!(fig["ratio"], 2.0);
    assert_eq!(plain["figures"][1]["against"], serde_json::Value::Null);
    assert_eq!(common::strings(&plain["differences"], 0), ["kernel"]);
    // The sub-run: only in A; and its CPUs and rounds differ from nothing.
    assert_eq!(
        entry("fork-vs-thread/cpu0")["missing"],
        "not in the run compared against"
    );
    assert_eq!(entry("pipe-speed")["missing"], "not in this run");

    // The claims, judged on A: printing-same is a one-CPU claim, so the
    // cpu0 sub-run's 3.0 judges it, not the plain run's 1.0.
    let claim = |id| find("claims", "id", id);
    let printing = claim("printing-same");
    assert_eq!(printing["today"], 3.0);
    assert_eq!(printing["verdict"], "no-longer-holds");
    assert_eq!(printing["judged_on"], "1 CPU");
    assert_eq!(claim("pipe-buffer-4096")["verdict"], "not-measured");
    assert_eq!(claim("java-337")["verdict"], "cannot-rerun");

    // The same figures judged the other way: 1.0 on the one-CPU run holds.
    results(&a, "fork-vs-thread/cpu0", "6.1", 1, &[("fork_over_thread_c", 1.0)]);
    assert!(compare().status.success());
    let json = common::read_json(saved.join("compare.json"));
    let printing = json["claims"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "printing-same")
        .unwrap();
    assert_eq!(printing["verdict"], "holds");
}

#[test]
fn a_run_is_judged_by_the_rules_stored_with_it_and_compare_names_what_differs() {
    let root = labtest::tempdir();
    let (a, b) =
        (root.path().join("2026-01-01-a"), root.path().join("2026-01-01-b"));
    for (run, kernel) in [(&a, "6.1"), (&b, "6.8")] {
        manifest(run, true);
        results(run, "fork-vs-thread", kernel, 2, &[("fork_over_thread_c", 1.0)]);
    }
    // A was judged by a lab whose printing-same held only from 2x, and
    // which had no java-337: its rules and their hash stored with it.
    lab::claims::write(&a).unwrap();
    let today = std::fs::read_to_string(a.join("claims.toml")).unwrap();
    let at = today.find("id = \"printing-same\"").unwrap();
    let from = at + today[at..].find("holds = ").unwrap();
    let to = from + today[from..].find('\n').unwrap();
    let mut older = format!("{}holds = [2.0, 3.0]{}", &today[..from], &today[to..]);
    let java = older.find("[[claim]]\nid = \"java-337\"").unwrap();
    let next = java + 1 + older[java + 1..].find("[[claim]]").unwrap();
    older.replace_range(java..next, "");
    std::fs::write(a.join("claims.toml"), &older).unwrap();
    let mut m = common::read_json(a.join("run.json"));
    assert_eq!(m["rules"]["file"], "claims.toml");
    m["rules"]["sha256"] = lab::claims::sha256(&older).into();
    std::fs::write(a.join("run.json"), m.to_string()).unwrap();
    std::fs::remove_file(a.join("then-and-now.json")).unwrap();
    // Its verdicts, by its rules: 1.0x no longer holds there.
    let out = lab().arg("verdicts").arg(&a).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("printing-same            no longer holds"), "{text}");
    assert!(!text.contains("java-337"), "{text}");
    assert!(
        text.trim_end().ends_with(&format!(
            "Judged by the rules stored with the run (claims.toml, SHA-256 {}).",
            &lab::claims::sha256(&older)[..12]
        )),
        "{text}"
    );
    // B has none: today's, and it says so, once.
    let out = lab().arg("verdicts").arg(&b).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("printing-same            holds"), "{text}");
    assert_eq!(text.matches("has no rules stored with it").count(), 1, "{text}");
    // Compared, the two sides' rules differ, and the claims that do are named.
    let saved = root.path().join("saved");
    let out = lab()
        .arg("compare")
        .arg(&a)
        .arg(&b)
        .arg("--out")
        .arg(&saved)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let line =
        text.lines().find(|l| l.contains("judged by different rules")).unwrap();
    assert!(
        line.ends_with(
            "; this run's, beside the other's: removed: java-337; changed: \
             printing-same (holds)"
        ),
        "{line}"
    );
    assert!(
        text.contains("rules: the run against is judged by today's claims.toml"),
        "{text}"
    );
    assert!(!text.contains("rules: this run is judged by today's"), "{text}");
    assert!(text.contains("\n  printing-same  <- the verdicts differ\n"), "{text}");
    let md = std::fs::read_to_string(saved.join("compare.md")).unwrap();
    assert!(
        md.contains("Rules: the two runs were judged by different rules"),
        "{md}"
    );
    let json = common::read_json(saved.join("compare.json"));
    let rules = &json["rules"];
    assert_eq!(rules["differ"], true);
    assert_eq!(rules["run_stored"], true);
    assert_eq!(rules["against_stored"], false);
    assert_eq!(rules["diff"]["removed"], serde_json::json!(["java-337"]));
    assert_eq!(
        rules["diff"]["changed"],
        serde_json::json!([{"id": "printing-same", "fields": ["holds"]}])
    );
    // A class: each run judged by its own rules, and the preamble says
    // which.
    let c = root.path().join("2026-01-01-c");
    manifest(&c, true);
    results(&c, "fork-vs-thread", "6.1", 2, &[("fork_over_thread_c", 1.1)]);
    let out = lab().arg("compare").args([&a, &b, &c]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let (shown_b, shown_c) = (b.display(), c.display());
    assert!(
        text.contains(&format!(
            "Judged by today's claims.toml, having no rules stored with them: \
             {shown_b}, {shown_c}."
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "{} was judged by the rules stored with it (SHA-256 {}), which differ \
             from today's: removed: java-337; changed: printing-same (holds).",
            a.display(),
            &lab::claims::sha256(&older)[..12]
        )),
        "{text}"
    );
    assert!(
        text.contains("\nprinting-same\n  verdicts: 2 holds, 1 no longer holds\n"),
        "{text}"
    );
    // A hand edit of the stored rules is refused, in one line.
    std::fs::write(a.join("claims.toml"), &today).unwrap();
    let line = common::lab_fails(lab().arg("verdicts").arg(&a));
    assert!(line.contains("claims.toml: its SHA-256 is"), "{line}");
}

#[test]
fn compare_without_runs_says_what_is_missing() {
    let checkout = labtest::tempdir();
    let out =
        lab().env("LAB_CHECKOUT", checkout.path()).arg("compare").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no finished run of yours"), "{err}");
    let err = common::lab_refuses(&["compare", "no-such-run"]);
    assert!(err.contains("no run 'no-such-run'"), "{err}");
}

/// A run folder with a manifest, finished or not.
fn manifest(run: &Path, ended: bool) {
    std::fs::create_dir_all(run).unwrap();
    let doc = serde_json::json!({
        "lab_run": 1, "kind": "run", "command": "lab run all",
        "lab_version": "0.1.0", "started": "2026-01-01T00:00:00Z",
        "ended": if ended { Some("2026-01-01T00:01:00Z") } else { None },
    });
    std::fs::write(run.join("run.json"), doc.to_string()).unwrap();
}

#[test]
fn compare_and_verdicts_refuse_what_is_not_a_run_and_write_nothing() {
    let checkout = labtest::tempdir();
    let stranger = labtest::tempdir();
    std::fs::write(stranger.path().join("notes.txt"), "mine").unwrap();
    let reference = checkout.path().join("results/2026-01-01-ref");
    results(&reference, "fork-vs-thread", "6.1", 2, &[("fork_over_thread_c", 1.0)]);
    let lab_in = || {
        let mut cmd = lab();
        cmd.env("LAB_CHECKOUT", checkout.path());
        cmd
    };
    let experiment = reference.join("fork-vs-thread");
    for args in [
        vec!["verdicts".to_string(), stranger.path().display().to_string()],
        vec!["compare".into(), stranger.path().display().to_string()],
        // An experiment's folder inside a run is not a run.
        vec!["compare".into(), experiment.display().to_string()],
        vec!["verdicts".into(), "/etc".into()],
    ] {
        let out = lab_in().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains("is not a lab run"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}: no verdict printed");
    }
    let names = |d: &Path| -> Vec<_> {
        std::fs::read_dir(d).unwrap().flatten().map(|e| e.file_name()).collect()
    };
    assert_eq!(names(stranger.path()), ["notes.txt"]);
    // One run named twice, by two spellings of its path: refused, in one line.
    let again = checkout.path().join("results/../results/2026-01-01-ref");
    let mut cmd = lab_in();
    let line =
        labtest::usage_error("lab", cmd.arg("compare").arg(&reference).arg(&again));
    assert!(line.contains("are the same run"), "{line}");
    assert_eq!(names(&reference), ["fork-vs-thread"]);
    // The reference compared with itself: shown, never written into results/.
    let out = lab_in().arg("compare").arg(&reference).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(names(&reference), ["fork-vs-thread"]);
    let inside = reference.join("cmp");
    let mut cmd = lab_in();
    let out = cmd.arg("compare").arg(&reference).arg("--out").arg(&inside);
    let out = out.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!inside.exists());
    // The same, named relative to the checkout, where nothing exists yet.
    let mut cmd = lab_in();
    cmd.current_dir(checkout.path()).arg("compare").arg(&reference);
    let out = cmd.args(["--out", "results/new/cmp"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!checkout.path().join("results/new").exists());
}

#[test]
fn verdicts_say_how_far_the_checkout_has_moved_on_from_the_reference() {
    let checkout = scratch_checkout();
    let commit = |dir: &Path, file: &str| {
        std::fs::create_dir_all(dir.join(file).parent().unwrap()).unwrap();
        std::fs::write(dir.join(file), file).unwrap();
        git(dir, &["add", "."]);
        let who = ["-c", "user.name=t", "-c", "user.email=t@t"];
        git(dir, &[&who[..], &["commit", "-qm", file]].concat());
    };
    let head = git(checkout.path(), &["rev-parse", "--short=12", "HEAD"]);
    let reference = checkout.path().join("results/2026-01-01-ref");
    results(&reference, "fork-vs-thread", "6.1", 2, &[("fork_over_thread_c", 1.0)]);
    let file = reference.join("fork-vs-thread/fork-vs-thread.json");
    let mut doc = common::read_json(&file);
    doc["machine"]["commit"] = head.trim().into();
    std::fs::write(&file, doc.to_string()).unwrap();
    commit(checkout.path(), "crates/a.rs");
    commit(checkout.path(), "book/b.md");
    commit(checkout.path(), "crates/c.rs");
    let out =
        lab().env("LAB_CHECKOUT", checkout.path()).arg("verdicts").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let want = format!(
        "lab: {} was made from commit {}; 2 commits that touch crates/ lie \
         between it and this checkout\n",
        std::fs::canonicalize(&reference).unwrap().display(),
        head.trim()
    );
    assert_eq!(err, want);
}

#[test]
fn the_latest_run_is_the_newest_finished_one() {
    let checkout = labtest::tempdir();
    let runs = checkout.path().join("runs");
    let finished = runs.join("2026-01-01-000000-done");
    manifest(&finished, true);
    results(&finished, "fork-vs-thread", "6.1", 2, &[("fork_over_thread_c", 1.0)]);
    // Newer, with a finished experiment, but never finished itself (a run
    // all that died): not "your latest run", and not written into.
    let died = runs.join("2026-01-02-000000-died");
    manifest(&died, false);
    results(&died, "fork-vs-thread", "6.1", 2, &[("fork_over_thread_c", 9.0)]);
    let reference = checkout.path().join("results/2026-01-01-ref");
    results(&reference, "fork-vs-thread", "6.1", 2, &[("fork_over_thread_c", 1.0)]);
    let out =
        lab().env("LAB_CHECKOUT", checkout.path()).arg("compare").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with(&finished.display().to_string()), "{text}");
    assert!(finished.join("compare.md").is_file(), "{err}");
    assert!(!died.join("compare.md").exists());
    // Named, the unfinished run is shown, and nothing is written into it.
    let out = lab()
        .env("LAB_CHECKOUT", checkout.path())
        .arg("compare")
        .arg(&died)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("not saved") && err.contains("unfinished"), "{err}");
    assert!(!died.join("compare.md").exists());
    // A dead run with nothing finished is removed by the next command.
    let empty = runs.join("2026-01-03-000000-empty");
    manifest(&empty, false);
    std::fs::create_dir(empty.join(".fork-vs-thread.partial-1")).unwrap();
    let out =
        lab().env("LAB_CHECKOUT", checkout.path()).arg("compare").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("lab: removed what dead runs left behind: "), "{err}");
    assert!(!empty.exists(), "{err}");
    assert!(died.join("fork-vs-thread/fork-vs-thread.json").is_file());
}

#[test]
fn cpus_confines_the_programs_and_is_recorded() {
    let _serial = labtest::serial();
    // Stand-ins that record the CPUs they may use, then run the real
    // program: what `--cpus` gave the runner's children.
    let bins = labtest::tempdir();
    let record = bins.path().join("cpus.txt");
    for name in ["fork", "thread"] {
        let path = bins.path().join(name);
        let real = bin_dir().join(name);
        let script = format!(
            "#!/bin/sh\ngrep Cpus_allowed_list /proc/self/status >> {}\nexec {} \"$@\"\n",
            record.display(),
            real.display()
        );
        labtest::write_executable(&path, &script);
    }
    let out_dir = labtest::tempdir();
    let args = ["--cpus", "0", "--json"];
    let mut cmd = common::lab_run("fork-vs-thread", &args, out_dir.path());
    let out = cmd.env("LAB_BIN_DIR", bins.path()).args(TINY).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = common::printed_json(&out.stdout);
    // Every run of a program, its warm-up included, is one observation.
    let seen = std::fs::read_to_string(&record).unwrap();
    let runs = json["observations"].as_array().unwrap().len();
    assert_eq!(seen.lines().count(), runs, "{seen}");
    for line in seen.lines() {
        assert_eq!(line.split_whitespace().last(), Some("0"), "{seen}");
    }
    assert_eq!(json["settings"]["cpus"], "0");
    assert_eq!(json["settings"]["cpus_allowed"], "0");
    assert_eq!(json["settings"]["cpu_count"], 1);

    common::bad_flags_exit_2("fork-vs-thread", &[&["--cpus", "9999"]]);
}

#[test]
fn run_all_checks_its_flags_before_anything_starts() {
    let checkout = scratch_checkout();
    for (args, says) in [
        (&["--cpus", "9999"][..], "'9999' for '--cpus <LIST>'"),
        (&["--cpus", "0,0"], "names CPU 0 twice"),
        (&["--cpus"], "a value is required for '--cpus <LIST>'"),
        (&["--rounds", "0"], "'0' for '--rounds <N>': 0 is not in 1..=1000"),
        (&["--rounds=x"], "'x' for '--rounds <N>'"),
        (&["--bogus"], "unexpected argument '--bogus'"),
    ] {
        let out = lab()
            .env("LAB_CHECKOUT", checkout.path())
            .args(["run", "all"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("lab run all: ") && err.contains(says),
            "{args:?}: {err}"
        );
        // Refused before the first experiment: no run folder at all.
        assert!(!checkout.path().join("runs").exists(), "{args:?}");
    }
    labtest::run(lab().args(["run", "all", "--help"])).success();
}

/// The committed reference run: every claim the lab can re-run has a
/// verdict on it, every file in it was written by the reference command
/// from a clean commit, and the then-and-now page matches its results.
#[test]
fn the_reference_judges_every_claim_from_clean_commits() {
    let reference = lab::runs::reference().expect("a reference run in results/");
    // Judged once, for both checks: nothing here changes the reference.
    let rows = lab::claims::evaluate(&reference).unwrap();
    for row in &rows {
        assert!(
            !matches!(row.verdict, lab::claims::Verdict::NotMeasured(_)),
            "{}: {}",
            row.claim.id,
            row.verdict
        );
        // A one-CPU claim rests on the reference's one-CPU run.
        if row.claim.one_cpu {
            assert_eq!(row.judged_on, "1 CPU", "{}", row.claim.id);
        }
    }
    let mut files = 0;
    let mut stack = vec![reference.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let name = path.file_name().unwrap().to_str().unwrap().to_string();
            let Some(experiment) = name.strip_suffix(".json") else { continue };
            // The verdicts and the run's manifest carry no machine.
            if experiment.starts_with("then-and-now") || experiment == "run" {
                continue;
            }
            let json = common::read_json(&path);
            let commit = json["machine"]["commit"].as_str().unwrap();
            assert!(
                !commit.ends_with("-dirty") && commit != "unknown",
                "{path:?}: {commit}"
            );
            assert_eq!(json["settings"]["reference"], true, "{path:?}");
            files += 1;
        }
    }
    assert!(files >= lab::experiments::ALL.len(), "{files} results files");
    let page = std::fs::read_to_string(reference.join("then-and-now.md")).unwrap();
    let name = reference.file_name().unwrap().to_str().unwrap();
    assert_eq!(
        page,
        lab::claims::markdown(&rows, name, &|_| None),
        "then-and-now.md is stale"
    );
}

/// The recorded commit is the lab checkout's own, whatever directory `lab`
/// was started in: here another repository, whose commit it must not take.
#[test]
fn the_recorded_commit_is_the_checkouts_from_another_directory() {
    let _serial = labtest::serial();
    let checkout = scratch_checkout();
    let elsewhere = scratch_checkout();
    std::fs::write(elsewhere.path().join("other"), "a second commit\n").unwrap();
    git(elsewhere.path(), &["add", "other"]);
    git(
        elsewhere.path(),
        &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "two"],
    );
    let head = git(checkout.path(), &["rev-parse", "--short=12", "HEAD"]);
    let other = git(elsewhere.path(), &["rev-parse", "--short=12", "HEAD"]);
    assert_ne!(head, other);
    let out = lab()
        .current_dir(elsewhere.path())
        .env("LAB_CHECKOUT", checkout.path())
        .env("LAB_RUN_ID", "2026-01-03-test")
        .args(["run", "fork-vs-thread", "--reference"])
        .args(TINY)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json = common::read_json(
        checkout
            .path()
            .join("results/2026-01-03-test/fork-vs-thread/fork-vs-thread.json"),
    );
    assert_eq!(json["machine"]["commit"], head.trim());
    assert!(!elsewhere.path().join("results").exists());
    assert!(!elsewhere.path().join("runs").exists());
}

/// A run folder holding one tiny create-destroy of 3 rounds, judged.
fn judged_run() -> (labkit::cleanup::TempDir, std::path::PathBuf) {
    let run = labtest::tempdir();
    let dir = run.path().join("create-destroy");
    // creattime's largest counts: a round times 510 calls of each kind,
    // in 170 runs of the program at 3 samples and in 2 at 255.
    let args = ["--rounds", "3", "--iterations", "30", "--samples", "170,255"];
    let out = common::lab_run("create-destroy", &args, &dir)
        .args(["--lecture-iterations", "20"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json = dir.join("create-destroy.json");
    (run, json)
}

/// `lab verdicts RUN` and `lab compare RUN` (beside the reference) on a
/// run whose results were edited by hand: one line naming the file and the
/// field, exit 1, and no verdict printed.
fn refused(run: &std::path::Path, field: &str) {
    let shown = run.display().to_string();
    for args in [vec!["verdicts", &shown], vec!["compare", &shown]] {
        let line = common::lab_fails(common::lab().args(&args));
        assert!(
            line.contains("create-destroy.json") && line.contains(field),
            "{args:?}: {line}"
        );
    }
}

#[test]
fn verdicts_refuse_a_figure_that_does_not_follow_from_its_rounds() {
    let (run, json) = judged_run();
    // As made, the figures read and the claims are judged.
    let out = common::lab().args(["verdicts"]).arg(run.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("create-ratio"));
    let original = std::fs::read_to_string(&json).unwrap();
    let edit = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut doc: serde_json::Value = serde_json::from_str(&original).unwrap();
        f(&mut doc["headline"]["fork_over_thread"]);
        std::fs::write(&json, serde_json::to_string(&doc).unwrap()).unwrap();
    };
    // A hand-edited value, a NaN (JSON writes it null), no rounds, a
    // missing interval, a widened interval.
    edit(&|f| f["value"] = serde_json::json!(99.0));
    refused(run.path(), "headline.fork_over_thread.value");
    edit(&|f| f["value"] = serde_json::Value::Null);
    refused(run.path(), "headline.fork_over_thread");
    edit(&|f| f["rounds"] = serde_json::json!([]));
    refused(run.path(), "headline.fork_over_thread.rounds");
    edit(&|f| {
        f.as_object_mut().unwrap().remove("interval");
    });
    refused(run.path(), "headline.fork_over_thread");
    edit(&|f| f["interval"] = serde_json::json!([0.0, 100.0]));
    refused(run.path(), "headline.fork_over_thread.interval");
}

#[test]
fn verdicts_refuse_a_hand_edited_verdict() {
    let (run, _) = judged_run();
    // A then-and-now table of its own, then one verdict in it changed.
    let rows = lab::claims::write(run.path()).unwrap();
    let at = rows.iter().position(|r| r.claim.id == "create-ratio").unwrap();
    let path = run.path().join("then-and-now.json");
    let mut table: serde_json::Value = common::read_json(&path);
    let was = table[at]["verdict"].clone();
    table[at]["verdict"] =
        serde_json::json!(if was == "holds" { "no-longer-holds" } else { "holds" });
    std::fs::write(&path, serde_json::to_string(&table).unwrap()).unwrap();
    let line = common::lab_fails(common::lab().arg("verdicts").arg(run.path()));
    assert!(
        line.contains("then-and-now.json") && line.contains("verdict"),
        "{line}"
    );
}

/// A class's folder: three machines, a run without one experiment, a run
/// from an older lab (figures without rounds or interval) and a truncated
/// copy.
fn class_folder() -> labkit::cleanup::TempDir {
    let class = labtest::tempdir();
    let at = |name: &str| class.path().join(name);
    for (name, kernel, ratio) in
        [("ann", "6.1.0", 2.0), ("bob", "6.8.0", 1.0), ("cat", "6.8.0", 3.0)]
    {
        results(
            &at(name),
            "fork-vs-thread",
            kernel,
            2,
            &[("fork_over_thread_c", ratio)],
        );
        if name != "cat" {
            results(&at(name), "create-destroy", kernel, 2, &[("fork_us", 100.0)]);
        }
    }
    // An older lab: a figure was its value, label and unit only.
    results(
        &at("dan"),
        "fork-vs-thread",
        "5.10.0",
        2,
        &[("fork_over_thread_c", 1.5)],
    );
    let old = at("dan/fork-vs-thread/fork-vs-thread.json");
    let mut doc = common::read_json(&old);
    doc["headline"]["fork_over_thread_c"] =
        serde_json::json!({"label": "fork over thread", "value": 1.5, "unit": "x"});
    std::fs::write(&old, doc.to_string()).unwrap();
    // A truncated copy.
    results(
        &at("eve"),
        "fork-vs-thread",
        "6.8.0",
        2,
        &[("fork_over_thread_c", 1.0)],
    );
    let cut = at("eve/fork-vs-thread/fork-vs-thread.json");
    let text = std::fs::read_to_string(&cut).unwrap();
    std::fs::write(&cut, &text[..text.len() / 2]).unwrap();
    class
}

#[test]
fn compare_puts_a_class_side_by_side() {
    let class = class_folder();
    let out = common::lab().arg("compare").arg(class.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("A class of 4 runs"), "{stdout}");
    // The truncated copy is named in one line and left out.
    let left: Vec<&str> =
        stderr.lines().filter(|l| l.contains("left out")).collect();
    assert_eq!(left.len(), 1, "{stderr}");
    assert!(left[0].contains("eve") && left[0].contains("not JSON"), "{stderr}");
    // fork over thread at 2, 1 and 3 (judged) and 1.5 (the older run's
    // value): printing-same holds for bob only, and the older run gives
    // no verdict.
    let json = common::read_json(class.path().join("class.json"));
    let row = json["claims"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "printing-same")
        .unwrap();
    assert_eq!(row["verdicts"]["holds"], 1, "{row}");
    assert_eq!(row["verdicts"]["no longer holds"], 2, "{row}");
    assert_eq!(row["verdicts"]["not judged (another version's figure)"], 1, "{row}");
    assert_eq!(
        (row["median"].as_f64(), row["min"].as_f64(), row["max"].as_f64()),
        (Some(1.75), Some(1.0), Some(3.0))
    );
    // cat and dan have no create-destroy: process-cost is "not measured"
    // there.
    let cost = json["claims"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "process-cost")
        .unwrap();
    assert_eq!(cost["runs"], 2, "{cost}");
    assert_eq!(cost["verdicts"]["not yet measured"], 2, "{cost}");
    // Grouped by machine; the older run's missing fields are listed.
    let groups = json["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 3, "{groups:?}");
    let md = std::fs::read_to_string(class.path().join("class.md")).unwrap();
    assert!(md.contains("today's in interval, coverage, rounds, method"), "{md}");
}

#[test]
fn a_class_with_nothing_to_compare_fails_naming_its_runs() {
    let class = class_folder();
    for gone in ["ann", "bob", "cat", "eve"] {
        std::fs::remove_dir_all(class.path().join(gone)).unwrap();
    }
    // Only the older run is left, and without a value nothing compares.
    let old = class.path().join("dan/fork-vs-thread/fork-vs-thread.json");
    let mut doc = common::read_json(&old);
    doc["headline"]["fork_over_thread_c"] =
        serde_json::json!({"label": "x", "unit": "x"});
    std::fs::write(&old, doc.to_string()).unwrap();
    let line = common::lab_fails(common::lab().arg("compare").arg(class.path()));
    assert!(
        line.contains("no run can be compared") && line.contains("dan"),
        "{line}"
    );
    assert!(!class.path().join("class.md").exists());
}

#[test]
fn a_class_is_never_written_beside_a_reference_and_a_folder_of_no_runs_is_refused() {
    // A folder that holds a reference run (another checkout's results/,
    // say): compared, but nothing written into it.
    let class = class_folder();
    let reference = lab::runs::reference().expect("a reference run in results/");
    let copy = class.path().join(reference.file_name().unwrap());
    std::fs::create_dir_all(&copy).unwrap();
    std::fs::copy(reference.join("run.json"), copy.join("run.json")).unwrap();
    let out = common::lab().arg("compare").arg(class.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("class comparison not saved"), "{stderr}");
    assert!(!class.path().join("class.md").exists());
    assert!(!class.path().join("class.json").exists());
    // A folder none of whose sub-folders is known to be a run (one whose
    // manifest cannot be read is not known to be one) is no class: it is
    // refused as not a lab run, exit 2.
    let none = labtest::tempdir();
    std::fs::create_dir_all(none.path().join("odd/run.json")).unwrap();
    std::fs::create_dir_all(none.path().join("plain")).unwrap();
    let line = common::lab_refuses(&["compare", none.path().to_str().unwrap()]);
    assert!(line.contains("is not a lab run"), "{line}");
    assert!(!none.path().join("class.md").exists());
}

/// A scratch checkout of the lab, committed: its marks (Cargo.toml and
/// claims.toml), a .gitignore like the lab's, a tracked book page and a
/// reference run in results/.
fn scratch_lab() -> labkit::cleanup::TempDir {
    let dir = scratch_checkout();
    let root = dir.path();
    std::fs::write(root.join("Cargo.toml"), "[workspace]\n").unwrap();
    std::fs::write(root.join("claims.toml"), "").unwrap();
    std::fs::write(root.join(".gitignore"), "/runs\n/target\n").unwrap();
    std::fs::create_dir_all(root.join("book")).unwrap();
    std::fs::write(root.join("book/page.md"), "# A page\n").unwrap();
    let reference = root.join("results/2026-01-01-ref");
    results(&reference, "fork-vs-thread", "6.1", 2, &[("fork_over_thread_c", 1.0)]);
    git(root, &["add", "."]);
    git(
        root,
        &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "lab"],
    );
    dir
}

/// Every file under `dir`, with its contents.
fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                todo.push(e.path());
            } else {
                out.push((e.path(), std::fs::read(e.path()).unwrap_or_default()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn no_command_writes_under_results_or_into_a_tracked_file() {
    let _serial = labtest::serial();
    let checkout = scratch_lab();
    let root = checkout.path();
    let reference = root.join("results/2026-01-01-ref");
    let before =
        (git(root, &["status", "--porcelain"]), tree(&root.join("results")));
    assert_eq!(before.0, "", "the scratch checkout starts clean");
    // A link elsewhere that leads into results/.
    let elsewhere = labtest::tempdir();
    std::os::unix::fs::symlink(root.join("results"), elsewhere.path().join("link"))
        .unwrap();
    let link = elsewhere.path().join("link/new").display().to_string();
    let abs = root.join("results/new").display().to_string();
    let refd = reference.display().to_string();
    let run = |out: &str| -> Vec<String> {
        ["run", "fork-vs-thread"]
            .iter()
            .chain(&TINY)
            .chain(&["--out", out])
            .map(|s| s.to_string())
            .collect()
    };
    // (working folder, arguments)
    let cases: Vec<(PathBuf, Vec<String>)> = vec![
        (root.into(), run("results/2026-01-01-ref/fork-vs-thread")),
        (root.into(), run(&abs)),
        // Relative, from another folder of the checkout.
        (root.join("book"), run("../results/x")),
        (root.into(), run(&link)),
        // A tracked folder, a tracked file, a folder git does not ignore.
        (root.into(), run("book")),
        (root.into(), run("book/page.md")),
        (root.into(), run("notes")),
        (
            root.into(),
            vec![
                "compare".into(),
                refd.clone(),
                "--out".into(),
                "results/cmp".into(),
            ],
        ),
        (
            root.into(),
            vec!["compare".into(), refd.clone(), "--out".into(), "book".into()],
        ),
        (
            root.into(),
            vec!["compare".into(), refd.clone(), "--out".into(), link.clone()],
        ),
        (root.into(), run("runs/../results/y")),
    ];
    for (cwd, args) in &cases {
        let mut cmd = common::lab_std();
        cmd.env("LAB_CHECKOUT", root).current_dir(cwd).args(args);
        let line = labtest::usage_error("lab", &mut cmd);
        assert!(
            line.contains("results") || line.contains("git"),
            "{args:?}: {line}"
        );
    }
    // `runs` that leads into results/, or that is not a folder.
    std::os::unix::fs::symlink(root.join("results"), root.join("runs")).unwrap();
    let mut cmd = common::lab_std();
    cmd.env("LAB_CHECKOUT", root).args(["run", "fork-vs-thread"]).args(TINY);
    let line = labtest::usage_error("lab", &mut cmd);
    assert!(line.contains("holds only the reference run"), "{line}");
    std::fs::remove_file(root.join("runs")).unwrap();
    std::fs::write(root.join("runs"), "not a folder").unwrap();
    let line = labtest::usage_error("lab", &mut cmd);
    assert!(line.contains("is not a folder"), "{line}");
    let mut cmd = common::lab_std();
    let line =
        labtest::usage_error("lab", cmd.env("LAB_CHECKOUT", root).arg("compare"));
    assert!(line.contains("is not a folder"), "{line}");
    std::fs::remove_file(root.join("runs")).unwrap();
    // A class folder that is results/ itself: compared, not written into.
    let out = lab()
        .env("LAB_CHECKOUT", root)
        .arg("compare")
        .arg(root.join("results"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("not saved"), "{err}");
    // Places git ignores are written: runs/ and target/.
    let out = lab()
        .env("LAB_CHECKOUT", root)
        .current_dir(root)
        .args(["compare", &refd, "--out", "target/cmp"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(root.join("target/cmp/compare.md").is_file());
    let after = (git(root, &["status", "--porcelain"]), tree(&root.join("results")));
    assert_eq!(before, after, "a command changed what git sees, or results/");
}

#[test]
fn the_lab_names_every_run_it_passes_over() {
    let checkout = labtest::tempdir();
    let runs = checkout.path().join("runs");
    let reference = checkout.path().join("results/2026-01-01-ref");
    results(&reference, "fork-vs-thread", "6.1", 2, &[("fork_over_thread_c", 1.0)]);
    let good = runs.join("2026-01-01-000000-good");
    manifest(&good, true);
    results(&good, "fork-vs-thread", "6.1", 2, &[("fork_over_thread_c", 1.0)]);
    // Newer, each unreadable in its own way.
    let bad_manifest = runs.join("2026-01-02-000000-bad-manifest");
    results(
        &bad_manifest,
        "fork-vs-thread",
        "6.1",
        2,
        &[("fork_over_thread_c", 1.0)],
    );
    std::fs::write(bad_manifest.join("run.json"), "{\"lab_run\": ").unwrap();
    let bad_results = runs.join("2026-01-03-000000-bad-results");
    manifest(&bad_results, true);
    std::fs::create_dir_all(bad_results.join("fork-vs-thread")).unwrap();
    std::fs::write(bad_results.join("fork-vs-thread/fork-vs-thread.json"), "{")
        .unwrap();
    let cut = runs.join("2026-01-04-000000-cut");
    manifest(&cut, false);
    results(&cut, "fork-vs-thread", "6.1", 2, &[("fork_over_thread_c", 1.0)]);
    // Finished, its manifest listing two results files, one since deleted.
    let gone = runs.join("2026-01-04-120000-gone");
    manifest(&gone, true);
    results(&gone, "fork-vs-thread", "6.1", 2, &[("fork_over_thread_c", 1.0)]);
    let mut listed = common::read_json(gone.join("run.json"));
    listed["folders"] = serde_json::json!(["fork-vs-thread", "ctx-switch"]);
    std::fs::write(gone.join("run.json"), listed.to_string()).unwrap();
    // Finished, with a headline figure that is not a number.
    let typed = runs.join("2026-01-04-180000-typed");
    manifest(&typed, true);
    results(&typed, "fork-vs-thread", "6.1", 2, &[("fork_over_thread_c", 1.0)]);
    let file = typed.join("fork-vs-thread/fork-vs-thread.json");
    let mut doc = common::read_json(&file);
    doc["headline"]["fork_over_thread_c"]["value"] = "1.0".into();
    std::fs::write(&file, doc.to_string()).unwrap();
    let out =
        lab().env("LAB_CHECKOUT", checkout.path()).arg("compare").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .starts_with(&good.display().to_string())
    );
    for (run, why) in [
        (&bad_manifest, "its manifest is damaged"),
        (&bad_results, "a results file is damaged"),
        (&cut, "it never finished"),
        (&gone, "a results file is missing (ctx-switch/ctx-switch.json)"),
        (
            &typed,
            "a results file is damaged (fork-vs-thread: headline.fork_over_thread_c",
        ),
    ] {
        let line = format!("lab: passed over {}: {why}", run.display());
        assert_eq!(
            err.lines().filter(|l| l.starts_with(&line)).count(),
            1,
            "{line}\n{err}"
        );
    }
    // Named, a run whose results file is gone is read, and the file named.
    let out = lab()
        .env("LAB_CHECKOUT", checkout.path())
        .arg("compare")
        .arg(&gone)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let line = format!(
        "lab: {}: its manifest lists ctx-switch/ctx-switch.json, which is missing",
        gone.display()
    );
    assert!(err.lines().any(|l| l.starts_with(&line)), "{err}");
    // Named, a folder whose manifest does not read is no lab run: exit 2.
    let line = common::lab_refuses(&["compare", bad_manifest.to_str().unwrap()]);
    assert!(line.contains("not a lab run"), "{line}");
    // A class of these runs, with a copy of the good one and a run whose
    // figure was edited: every tally adds up to the runs counted, and
    // each run left out is named with why.
    let copy = runs.join("2026-01-05-000000-copy");
    std::fs::create_dir_all(copy.join("fork-vs-thread")).unwrap();
    for f in ["run.json", "fork-vs-thread/fork-vs-thread.json"] {
        std::fs::copy(good.join(f), copy.join(f)).unwrap();
    }
    let edited = runs.join("2026-01-06-000000-edited");
    manifest(&edited, true);
    results(&edited, "fork-vs-thread", "6.1", 2, &[("fork_over_thread_c", 1.0)]);
    let file = edited.join("fork-vs-thread/fork-vs-thread.json");
    let mut doc = common::read_json(&file);
    doc["headline"]["fork_over_thread_c"]["value"] = 9.0.into();
    std::fs::write(&file, doc.to_string()).unwrap();
    let out = lab()
        .env("LAB_CHECKOUT", checkout.path())
        .arg("compare")
        .arg(&runs)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let json = common::read_json(runs.join("class.json"));
    assert_eq!(json["members"].as_array().unwrap().len(), 1, "{json}");
    for row in json["claims"].as_array().unwrap() {
        let sum: u64 = row["verdicts"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(sum, 1, "{row}");
    }
    let left: Vec<String> = json["left_out"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| format!("{} {}", l[0], l[1]))
        .collect();
    assert_eq!(left.len(), 6, "{left:?}");
    for (name, why) in [
        ("bad-manifest", "not a lab run"),
        ("bad-results", "not JSON"),
        ("cut", "never finished"),
        ("gone", "a results file is missing"),
        ("typed", "is damaged"),
        ("edited", "is damaged"),
    ] {
        assert!(
            left.iter().any(|l| l.contains(name) && l.contains(why)),
            "{name}: {left:?}"
        );
    }
    assert!(!left.iter().any(|l| l.contains("another version")), "{left:?}");
    assert_eq!(json["duplicates"][0][0], copy.display().to_string(), "{json}");
    assert!(err.contains("is a copy of"), "{err}");
}

#[test]
fn busy_is_shown_wherever_a_verdict_is() {
    let checkout = labtest::tempdir();
    let run = checkout.path().join("runs/2026-01-01-000000-busy");
    manifest(&run, true);
    results(&run, "fork-vs-thread", "6.1", 2, &[("fork_over_thread_c", 1.0)]);
    results(&run, "create-destroy", "6.1", 2, &[("fork_us", 100.0)]);
    let file = run.join("fork-vs-thread/fork-vs-thread.json");
    let mut doc = common::read_json(&file);
    doc["load"] = serde_json::json!({
        "loadavg_start": "3.0 1.0 0.5 3/100 1", "loadavg_end": "3.5 1.2 0.6 3/100 2",
        "others_cpu_s": 6.0, "wall_s": 10.0, "busy": true
    });
    std::fs::write(&file, doc.to_string()).unwrap();
    let verdicts = |markdown: bool| {
        let mut cmd = lab();
        cmd.env("LAB_CHECKOUT", checkout.path()).arg("verdicts").arg(&run);
        if markdown {
            cmd.arg("--markdown");
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (text, err) = verdicts(false);
    assert!(text.contains("Busy run: "), "{text}");
    let line = text.lines().find(|l| l.starts_with("printing-same")).unwrap();
    assert!(line.ends_with("[busy]"), "{line}");
    assert!(text.contains("busy:  measured while the machine was busy: other processes used 6.0 CPU-s"), "{text}");
    // A verdict on the same run's other, quiet results is marked too.
    let line = text.lines().find(|l| l.starts_with("process-cost")).unwrap();
    assert!(line.ends_with("[busy]"), "{line}");
    assert!(text.contains("on a busy run (busy during fork-vs-thread)"), "{text}");
    assert!(err.contains("the machine was busy during fork-vs-thread"), "{err}");
    let (md, _) = verdicts(true);
    assert!(md.starts_with("**Busy run:**"), "{md}");
    assert!(
        md.contains("**no longer holds** (*busy*)")
            || md.contains("**holds** (*busy*)"),
        "{md}"
    );
    // The class view.
    let out =
        lab().arg("compare").arg(checkout.path().join("runs")).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains("Busy: ") && stdout.contains("(1 on a busy run)"),
        "{stdout}"
    );
}

#[test]
fn a_run_cut_short_while_adding_rounds_is_never_finished() {
    use std::io::BufRead;
    let _serial = labtest::serial();
    let checkout = labtest::tempdir();
    let reference = checkout.path().join("results/2026-01-01-ref");
    results(&reference, "fork-vs-thread", "6.1", 2, &[("fork_over_thread_c", 1.0)]);
    // printing-same is judged on fork.c over thread.c. A C compiler that
    // builds each of them and puts a slower script in its place: after
    // each program's warm-up run, fork.c over thread.c is far below 0.8
    // in the first round and far above 1.25 in the next three (3 rounds
    // asked, 4 run, so that each goes first as often), so printing-same
    // is too close to call and the run adds rounds, in which the C
    // programs wait. The Rust programs are the real ones.
    let bins = labtest::tempdir();
    for name in ["fork", "thread"] {
        std::os::unix::fs::symlink(bin_dir().join(name), bins.path().join(name))
            .unwrap();
    }
    let cc = bins.path().join("slow-cc");
    labtest::write_executable(
        &cc,
        "#!/bin/sh\n\
         prev=; out=\n\
         for a do shift; if [ \"$prev\" = -o ]; then out=$a; a=$a.real; fi; \
         set -- \"$@\" \"$a\"; prev=$a; done\n\
         cc \"$@\" || exit 1\n\
         case $(basename \"$out\") in *fork-c*) first=0 later=0.6;; *) first=0.3 later=0.3;; esac\n\
         printf '#!/bin/sh\\nn=$(cat %s.count 2>/dev/null || echo 0); n=$((n + 1)); \
         echo $n > %s.count\\ncase $n in 1) ;; 2) sleep %s;; 3|4|5) sleep %s;; \
         *) sleep 3600;; esac\\nexec %s.real \"$@\"\\n' \
         \"$out\" \"$out\" $first $later \"$out\" > \"$out\" && chmod +x \"$out\"\n",
    );
    let mut lab = common::lab_std()
        .env("LAB_CHECKOUT", checkout.path())
        .env("LAB_BIN_DIR", bins.path())
        .env("CC", &cc)
        .args(["run", "fork-vs-thread", "--procs", "2", "--counts", "3", "--vs-c"])
        .args(["--rounds", "3", "--cpus", "0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen = String::new();
    let mut lines = std::io::BufReader::new(lab.stderr.take().unwrap()).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        seen.push_str(&line);
        seen.push('\n');
        if line.contains("too close to call at 3 rounds; making") {
            break;
        }
    }
    assert!(seen.contains("making"), "no added rounds: {seen}");
    // The programs wait: the interrupt comes while the rounds are added.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(lab.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = lab.wait().unwrap();
    let rest: Vec<String> = lines.map_while(|l| l.ok()).collect();
    assert_eq!(status.code(), Some(130), "{seen}{rest:?}");
    let run = written_to(seen.as_bytes()).parent().unwrap().to_path_buf();
    // Its first results are kept, and it says it never finished.
    assert!(run.join("fork-vs-thread/fork-vs-thread.json").is_file());
    let manifest = common::read_json(run.join("run.json"));
    assert!(manifest["ended"].is_null(), "{manifest}");
    let out = lab_in(checkout.path()).arg("compare").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "not your latest finished run: {err}");
    assert!(err.contains("it never finished"), "{err}");
    let out = lab_in(checkout.path()).arg("compare").arg(&run).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!run.join("compare.md").exists(), "{err}");
}

fn lab_in(checkout: &Path) -> Std {
    let mut cmd = lab();
    cmd.env("LAB_CHECKOUT", checkout);
    cmd
}

#[test]
fn a_binary_copied_with_its_tree_writes_into_its_own_tree() {
    let _serial = labtest::serial();
    let tree = labtest::tempdir();
    std::fs::write(tree.path().join("Cargo.toml"), "[workspace]\n").unwrap();
    std::fs::write(tree.path().join("claims.toml"), "").unwrap();
    let release = tree.path().join("target/release");
    std::fs::create_dir_all(&release).unwrap();
    labtest::copy_executable(env!("CARGO_BIN_EXE_lab"), release.join("lab"));
    let copied = || {
        let mut cmd = Std::new(release.join("lab"));
        cmd.env("LAB_BIN_DIR", bin_dir())
            .env_remove("LAB_CHECKOUT")
            .env_remove("CARGO_MANIFEST_DIR");
        cmd
    };
    let out = copied().args(["run", "fork-vs-thread"]).args(TINY).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let target = written_to(&out.stderr);
    assert!(
        target.starts_with(std::fs::canonicalize(tree.path()).unwrap().join("runs"))
    );
    labtest::help_mentions(release.join("lab"), &["LAB_CHECKOUT"]);
    // With no tree around it, it says so, and how to name one.
    let alone = labtest::tempdir();
    labtest::copy_executable(env!("CARGO_BIN_EXE_lab"), alone.path().join("lab"));
    let mut cmd = Std::new(alone.path().join("lab"));
    cmd.env_remove("LAB_CHECKOUT").env_remove("CARGO_MANIFEST_DIR").arg("compare");
    let line = labtest::usage_error("lab", &mut cmd);
    assert!(
        line.contains("cannot find the lab's checkout")
            && line.contains("LAB_CHECKOUT"),
        "{line}"
    );
}

#[test]
fn lab_test_tells_a_suite_cut_short_from_a_finished_one() {
    let fake = labtest::tempdir();
    let cargo = |name: &str, body: &str| {
        let path = fake.path().join(name);
        labtest::write_executable(
            &path,
            &format!(
                "#!/bin/sh\necho 'x::y: skipped: no perf' >> \"$LAB_SKIP_LOG\"\n{body}\n"
            ),
        );
        path
    };
    let run =
        |cargo: PathBuf| lab().env("CARGO", cargo).arg("test").output().unwrap();
    let done = run(cargo("done", "exit 0"));
    let text = String::from_utf8_lossy(&done.stdout);
    assert!(done.status.success(), "{done:?}");
    assert_eq!(
        text,
        "lab test: 1 test skipped (did not run here):\n  x::y: skipped: no perf\n"
    );
    let killed = run(cargo("killed", "kill -TERM $$"));
    let text = String::from_utf8_lossy(&killed.stdout);
    assert_eq!(killed.status.code(), Some(1), "{killed:?}");
    assert!(text.contains("skipped among the tests that ran"), "{text}");
    assert!(
        text.lines()
            .last()
            .unwrap()
            .contains("did not finish: cargo test was killed by SIGTERM"),
        "{text}"
    );
    let failed = run(cargo("failed", "exit 101"));
    let text = String::from_utf8_lossy(&failed.stdout);
    assert_eq!(failed.status.code(), Some(1), "{failed:?}");
    assert!(text.lines().last().unwrap().contains("did not finish"), "{text}");
}
