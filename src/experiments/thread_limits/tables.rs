//! The thread-limits tables, headline and chart: what the probes created
//! from the observations, how their runs ended from the results.

use crate::chart::{Chart, Meaning};
use crate::engine::{Observations, Setting, setting};
use crate::report::Headline;
use crate::stats::Summary;
use crate::table::{Table, col, or_dash};
use labkit::limits::format_size;

use super::{Data, Overflow, ProgramRun, ProgramStack, Row, at_program, at_stack};

/// What `condition` created at `at` in each round that could count.
fn counted(obs: Observations, at: &Setting, condition: &str) -> Vec<f64> {
    let runs = obs.at(at).filter(|o| o.condition == condition);
    runs.filter_map(|o| o.metrics.get("created").copied()).collect()
}

/// `383`, `263 (263-359)`, `4096 (cap)`, plus any runs that died.
fn cell(obs: Observations, row: &Row, condition: &str, max: u32) -> String {
    let counts = counted(obs, &row.at, condition);
    let Some(runs) = row.runs.get(condition) else { return "not run".into() };
    let mut text = match Summary::of(&counts) {
        Some(s) if s.min == s.max => format!("{}", s.median),
        Some(s) => format!("{} ({}-{})", s.median, s.min, s.max),
        None => String::new(),
    };
    if counts.contains(&f64::from(max)) {
        text.push_str(" (cap)");
    }
    let died: Vec<&str> = runs
        .iter()
        .filter(|p| p.created.is_none())
        .map(|p| p.ended.as_str())
        .collect();
    if let Some(first) = died.first() {
        let sep = if text.is_empty() { "" } else { "; " };
        text.push_str(&format!(
            "{sep}{} of {} runs: {first}",
            died.len(),
            runs.len()
        ));
    }
    text
}

/// The errnos that stopped `condition`'s runs in `row`, or `-`.
fn stopped(row: &Row, condition: &str) -> String {
    let runs = row.runs.get(condition).into_iter().flatten();
    let mut names: Vec<&str> =
        runs.filter_map(|p| p.stopped_by.as_deref()).collect();
    names.sort_unstable();
    names.dedup();
    if names.is_empty() { "-".into() } else { names.join(", ") }
}

fn stack_size(r: &Row) -> u64 {
    r.at["stack_size"].as_u64().unwrap_or(0)
}

/// The figures the claims are judged on: threads that fit in the article's
/// 3 GiB at 8 MiB and 1 MiB stacks, and whether `ulimit -s 1024` let the
/// thread program create all it asked for.
pub(super) fn headline(d: &Data, obs: Observations) -> Headline {
    // A figure without rounds is left out of the headline.
    let created = |size: u64, api: &str| counted(obs, &at_stack(size), api);
    // One value per run: 1 when it created every thread, else 0.
    let fixed = obs.at(&setting([("stack", ProgramStack::Ulimit.label().into())]));
    let all_ok: Vec<f64> =
        fixed.filter_map(|o| o.metrics.get("ok").copied()).collect();
    let at_8m = d.stacks.iter().find(|r| stack_size(r) == 8 << 20);
    crate::report::headline()
        .rounds(
            "threads_at_8m",
            "pthread_create, 8 MiB stacks in 3 GiB",
            created(8 << 20, "pthread"),
            "",
        )
        .rounds(
            "std_threads_at_8m",
            "std::thread, 8 MiB stacks in 3 GiB",
            created(8 << 20, "std"),
            "",
        )
        .exact(
            "predicted_at_8m",
            "the article's arithmetic, 3 GiB / 8 MiB",
            at_8m.and_then(|r| r.predicted).map(|p| p as f64),
            "",
        )
        .rounds(
            "threads_at_256k",
            "pthread_create, 256 KiB stacks (capped at --max)",
            created(256 << 10, "pthread"),
            "",
        )
        .rounds(
            "threads_at_1m",
            "pthread_create, 1 MiB stacks in 3 GiB",
            created(1 << 20, "pthread"),
            "",
        )
        .rounds(
            "ulimit_s_1024_ok",
            "thread runs under `ulimit -s 1024` that created every thread (1) or not (0), median",
            all_ok,
            "",
        )
        .build()
}

/// The article's four tables: threads by stack size, the `thread`
/// program, processes under each limit, a stack overflow.
pub(super) fn tables(d: &Data, obs: Observations) -> Vec<Table> {
    let space = format_size(d.address_space);
    let count =
        |condition: &'static str| move |r: &Row| cell(obs, r, condition, d.max);
    let predicted = |r: &Row| or_dash(r.predicted.map(|p| p as f64), 0);
    let stacks = Table::of(
        format!("1. Threads created under RLIMIT_AS = {space} (the article's 32-bit user space)"),
        &d.stacks,
        &[
            col("stack", |r: &Row| format_size(stack_size(r))),
            col("AS / stack", predicted),
            col("pthread_create", count("pthread")),
            col("std::thread", count("std")),
            col("stopped by", |r: &Row| {
                let (why, std_why) = (stopped(r, "pthread"), stopped(r, "std"));
                if std_why == why { why } else { format!("{why} / {std_why}") }
            }),
        ],
    )
    .noted(format!(
        "Idle threads (each blocked in read on one pipe) created by `stacklimit threads` \
         until creation failed or the cap of {} was reached; median (min-max) of {} \
         runs. `AS / stack` is the article's arithmetic (3 GiB / 8 MiB = 384); each \
         stack also has a 4 KiB guard page, and the program's own code, libraries and \
         heap take a few MiB. std::thread also maps a signal stack per thread, and \
         glibc may give a thread its own malloc arena (64 MiB of address space each).",
        d.max, d.rounds
    ));
    let program = Table::of(
        format!("2. The `thread` program, COUNT = 1000, under RLIMIT_AS = {space}"),
        &d.program,
        &[
            col("threads", |r: &ProgramRun| r.threads.to_string()),
            col("stack", |r: &ProgramRun| r.setting.to_string()),
            col("ended", |r: &ProgramRun| r.ended.clone()),
            col("what it said", |r: &ProgramRun| match r.said.is_empty() && r.log_checked {
                true => "Okay (log checked: every line whole)".to_string(),
                false => r.said.clone(),
            }),
            col("seconds", |r: &ProgramRun| {
                let at = at_program(r.threads, r.setting);
                or_dash(obs.median(&at, "thread", "wall_s"), 3)
            }),
        ],
    )
    .noted(
        "`default stack` is pthread_create's default with RLIMIT_STACK = 8M (8 MiB \
         stacks); `ulimit -s 1024` sets RLIMIT_STACK = 1M, as the article did; \
         `--stack-size 1M` asks for it directly (pthread_attr_setstacksize). One run each.",
    );
    let processes = Table::of(
        "3. Processes and threads under one limit each",
        &d.processes,
        &[
            col("limit", |r: &Row| r.at["limit"].as_str().unwrap_or("").to_string()),
            col("user", |r: &Row| r.user.clone()),
            col("predicted", predicted),
            col("forks", count("forks")),
            col("threads (64K stacks)", count("threads")),
            col("stopped by", |r: &Row| {
                format!("{} / {}", stopped(r, "forks"), stopped(r, "threads"))
            }),
        ],
    )
    .noted(
        "Each forked child has its own address space, so RLIMIT_AS does not limit how \
         many there are; RLIMIT_NPROC counts every task (process or thread) of the real \
         user and does not apply to root, so it is tried as uid 65534.",
    );
    let overflow = Table::of(
        "4. A thread that overflows its stack (in a child process)",
        &d.overflow,
        &[
            col("created with", |r: &Overflow| r.api.to_string()),
            col("stack", |r: &Overflow| format_size(r.stack_size)),
            col("ended", |r: &Overflow| r.ended.clone()),
            col("last line on stderr", |r: &Overflow| r.said.clone()),
        ],
    )
    .noted(
        "`stacklimit overflow`: one thread recursing with 1 KiB frames until it hits the \
         guard page below its stack.",
    );
    vec![stacks, program, processes, overflow]
}

pub(super) fn chart(d: &Data, obs: Observations) -> Chart {
    let kib = |r: &Row| stack_size(r) as f64 / 1024.0;
    let spread = |api: &'static str| {
        let counts = move |r: &Row| Summary::of(&counted(obs, &r.at, api));
        d.stacks.iter().filter_map(move |r| Some((kib(r), counts(r)?)))
    };
    let mut chart = Chart::new(
        &format!(
            "Threads that fit in {} of address space",
            format_size(d.address_space)
        ),
        "stack size (KiB)",
        "threads created",
    );
    chart.log_x = true;
    chart.log_y = true;
    let predicted =
        d.stacks.iter().filter_map(|r| Some((kib(r), r.predicted? as f64)));
    chart
        .guide(f64::from(d.max), &format!("cap: at most {} threads (--max)", d.max))
        .limit("address space / stack", predicted.collect())
        .summaries(Meaning::Thread, "pthread_create", spread("pthread"))
        .summaries(Meaning::Thread.form(1), "std::thread", spread("std"))
}

#[cfg(test)]
mod tests {
    use super::super::{APIS, KINDS, Probe};
    use super::*;
    use crate::engine::{Engine, Observation};

    fn probe(created: Option<u32>, stopped_by: Option<&str>) -> Probe {
        Probe {
            created,
            stopped_by: stopped_by.map(String::from),
            ended: if created.is_some() { "exit 0" } else { "SIGSEGV" }.into(),
            said: String::new(),
            vm_peak_kib: created.map(|_| 1024),
            wall_s: 0.1,
        }
    }

    /// 8 MiB stacks: 60 and 50 threads (EAGAIN); 1 MiB: the cap of 100 in
    /// one run, and a run that died; 15 forks and threads under NPROC.
    fn measured() -> (Data, Vec<Observation>) {
        let eagain = |n| probe(Some(n), Some("EAGAIN"));
        let cap = || probe(Some(100), None);
        let mut engine = Engine::new(2);
        let mut row = |at: Setting,
                       names: [&'static str; 2],
                       runs: [[Probe; 2]; 2]| {
            // Each condition's first run here is its warm-up, or round 1.
            let warm = engine.observations().0.is_empty() || names == KINDS;
            let mut calls = [0usize; 2];
            let measured = engine.measure(&at, &names, |k| {
                calls[k] += 1;
                Ok(runs[k][(calls[k] - 1).saturating_sub(usize::from(warm))].clone())
            });
            let runs = names.into_iter().zip(measured.unwrap()).collect();
            let predicted =
                at.get("stack_size").and_then(|s| Some((512 << 20) / s.as_u64()?));
            Row { at, user: "root".into(), predicted, runs }
        };
        let stacks = vec![
            row(
                at_stack(8 << 20),
                APIS,
                [[eagain(60), eagain(50)], [eagain(40), eagain(40)]],
            ),
            row(
                at_stack(1 << 20),
                APIS,
                [[cap(), probe(None, None)], [cap(), cap()]],
            ),
        ];
        let nproc = setting([("limit", "RLIMIT_NPROC = 16".into())]);
        let mut processes = vec![row(
            nproc,
            KINDS,
            [[eagain(15), eagain(15)], [eagain(15), eagain(15)]],
        )];
        processes[0].predicted = Some(15);
        let mut once = Engine::new(1);
        let run = || ProgramRun {
            threads: 500,
            setting: ProgramStack::Ulimit.label(),
            ended: "exit 0".into(),
            said: String::new(),
            log_checked: true,
            wall_s: 0.5,
        };
        let program = once.measure(
            &at_program(500, run().setting),
            &["thread"],
            |_| Ok(run()),
        );
        let log = [engine.finish(), once.finish()].concat();
        let data = Data {
            address_space: 512 << 20,
            max: 100,
            rounds: 2,
            stacks,
            processes,
            series: Observations(&log).series(),
            program: program.unwrap().into_iter().flatten().collect(),
            overflow: vec![Overflow {
                api: "pthread_create",
                stack_size: 64 << 10,
                ended: "SIGSEGV".into(),
                said: "x".into(),
            }],
        };
        (data, log)
    }

    #[test]
    fn the_stack_table_gives_medians_ranges_caps_and_deaths() {
        let (d, log) = measured();
        let t = &tables(&d, Observations(&log))[0];
        assert_eq!(t.rows[0], ["8M", "64", "55 (50-60)", "40", "EAGAIN"]);
        assert_eq!(t.rows[1][..2], ["1M", "512"]);
        assert_eq!(t.rows[1][2], "100 (cap); 1 of 2 runs: SIGSEGV");
        assert_eq!(t.rows[1][3], "100 (cap)");
        assert_eq!(t.rows[1][4], "-");
    }

    #[test]
    fn the_other_tables_say_what_each_run_did() {
        let (d, log) = measured();
        let t = tables(&d, Observations(&log));
        assert_eq!(t[1].rows[0][3], "Okay (log checked: every line whole)");
        assert_eq!(t[1].rows[0][4], "0.500", "the one run's seconds");
        assert_eq!(t[2].rows[0][2..], ["15", "15", "15", "EAGAIN / EAGAIN"]);
        assert_eq!(t[3].rows[0], ["pthread_create", "64K", "SIGSEGV", "x"]);
    }

    #[test]
    fn the_chart_and_headline_use_the_medians() {
        let (d, log) = measured();
        let c = chart(&d, Observations(&log));
        let pthread = c.series.iter().find(|s| s.label == "pthread_create").unwrap();
        assert_eq!(pthread.points, [(8192.0, 55.0), (1024.0, 100.0)]);
        let arithmetic = &c.series[0].points;
        assert_eq!(arithmetic, &[(8192.0, 64.0), (1024.0, 512.0)]);
        let h = headline(&d, Observations(&log));
        let figure = |k: &str| h.get(k).and_then(|f| f.get("value")).cloned();
        assert_eq!(figure("threads_at_8m"), Some(serde_json::json!(55.0)));
        assert_eq!(figure("threads_at_1m"), Some(serde_json::json!(100.0)));
        assert_eq!(figure("ulimit_s_1024_ok"), Some(serde_json::json!(1.0)));
    }
}
