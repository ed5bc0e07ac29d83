//! The thread-limits tables, headline and chart, from the results alone.

use crate::chart::{Chart, Meaning};
use crate::report::Headline;
use crate::stats::Summary;
use crate::table::Table;
use labkit::limits::format_size;

use super::{Data, Probe, ProgramRun, StackRow};

fn counted(probes: &[Probe]) -> Option<Summary> {
    let v: Vec<f64> =
        probes.iter().filter_map(|p| p.created.map(f64::from)).collect();
    Summary::of(&v)
}

/// `383`, `263 (263-359)`, `4096 (cap)`, plus any runs that died.
fn cell(probes: &[Probe], max: u32) -> String {
    let mut text = match counted(probes) {
        Some(s) if s.min == s.max => format!("{}", s.median),
        Some(s) => format!("{} ({}-{})", s.median, s.min, s.max),
        None => String::new(),
    };
    if probes.iter().any(|p| p.created == Some(max)) {
        text.push_str(" (cap)");
    }
    let died: Vec<&Probe> = probes.iter().filter(|p| p.created.is_none()).collect();
    if let Some(first) = died.first() {
        let sep = if text.is_empty() { "" } else { "; " };
        text.push_str(&format!(
            "{sep}{} of {} runs: {}",
            died.len(),
            probes.len(),
            first.ended
        ));
    }
    text
}

fn stopped(probes: &[Probe]) -> String {
    let mut names: Vec<&str> =
        probes.iter().filter_map(|p| p.stopped_by.as_deref()).collect();
    names.sort_unstable();
    names.dedup();
    if names.is_empty() { "-".into() } else { names.join(", ") }
}

/// The figures the claims are judged on: threads that fit in the article's
/// 3 GiB at 8 MiB and 1 MiB stacks, and whether `ulimit -s 1024` let the
/// thread program create all it asked for.
pub(super) fn headline(data: &Data) -> Headline {
    let created = |size: u64, std: bool| {
        let row = data.stacks.iter().find(|r| r.stack_size == size)?;
        let probes = if std { &row.std } else { &row.pthread };
        let counts: Vec<f64> =
            probes.iter().filter_map(|p| p.created).map(f64::from).collect();
        (!counts.is_empty()).then_some(counts)
    };
    let predicted = data
        .stacks
        .iter()
        .find(|r| r.stack_size == 8 << 20)
        .map(|r| r.predicted as f64);
    let fixed: Vec<&ProgramRun> =
        data.program.iter().filter(|r| r.setting == "ulimit -s 1024").collect();
    // One value per run: 1 when it created every thread, else 0.
    let all_ok = (!fixed.is_empty()).then(|| {
        fixed
            .iter()
            .map(|r| if r.ended == "exit 0" { 1.0 } else { 0.0 })
            .collect::<Vec<f64>>()
    });
    crate::report::headline()
        .rounds(
            "threads_at_8m",
            "pthread_create, 8 MiB stacks in 3 GiB",
            created(8 << 20, false),
            "",
        )
        .rounds(
            "std_threads_at_8m",
            "std::thread, 8 MiB stacks in 3 GiB",
            created(8 << 20, true),
            "",
        )
        .exact(
            "predicted_at_8m",
            "the article's arithmetic, 3 GiB / 8 MiB",
            predicted,
            "",
        )
        .rounds(
            "threads_at_256k",
            "pthread_create, 256 KiB stacks (capped at --max)",
            created(256 << 10, false),
            "",
        )
        .rounds(
            "threads_at_1m",
            "pthread_create, 1 MiB stacks in 3 GiB",
            created(1 << 20, false),
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

pub(super) fn stack_table(d: &Data) -> Table {
    let mut t = Table::new(
        format!(
            "1. Threads created under RLIMIT_AS = {} (the article's 32-bit user space)",
            format_size(d.address_space)
        ),
        &["stack", "AS / stack", "pthread_create", "std::thread", "stopped by"],
    );
    for r in &d.stacks {
        let mut why = stopped(&r.pthread);
        let std_why = stopped(&r.std);
        if std_why != why {
            why = format!("{why} / {std_why}");
        }
        t.row(vec![
            format_size(r.stack_size),
            r.predicted.to_string(),
            cell(&r.pthread, d.max),
            cell(&r.std, d.max),
            why,
        ]);
    }
    t.note(format!(
        "Idle threads (each blocked in read on one pipe) created by `stacklimit threads` \
         until creation failed or the cap of {} was reached; median (min-max) of {} \
         runs. `AS / stack` is the article's arithmetic (3 GiB / 8 MiB = 384); each \
         stack also has a 4 KiB guard page, and the program's own code, libraries and \
         heap take a few MiB. std::thread also maps a signal stack per thread, and \
         glibc may give a thread its own malloc arena (64 MiB of address space each).",
        d.max, d.rounds
    ));
    t
}

pub(super) fn program_table(d: &Data) -> Table {
    let mut t = Table::new(
        format!(
            "2. The `thread` program, COUNT = 1000, under RLIMIT_AS = {}",
            format_size(d.address_space)
        ),
        &["threads", "stack", "ended", "what it said", "seconds"],
    );
    for r in &d.program {
        let said = if r.said.is_empty() && r.log_checked {
            "Okay (log checked: every line whole)".to_string()
        } else {
            r.said.clone()
        };
        t.row(vec![
            r.threads.to_string(),
            r.setting.to_string(),
            r.ended.clone(),
            said,
            format!("{:.3}", r.wall_s),
        ]);
    }
    t.note(
        "`default stack` is pthread_create's default with RLIMIT_STACK = 8M (8 MiB \
         stacks); `ulimit -s 1024` sets RLIMIT_STACK = 1M, as the article did; \
         `--stack-size 1M` asks for it directly (pthread_attr_setstacksize). One run each.",
    );
    t
}

pub(super) fn process_table(d: &Data) -> Table {
    let mut t = Table::new(
        "3. Processes and threads under one limit each",
        &[
            "limit",
            "user",
            "predicted",
            "forks",
            "threads (64K stacks)",
            "stopped by",
        ],
    );
    for r in &d.processes {
        let forks = std::slice::from_ref(&r.forks);
        let threads = std::slice::from_ref(&r.threads);
        t.row(vec![
            r.limit.clone(),
            r.user.clone(),
            r.predicted.map_or("-".into(), |p| p.to_string()),
            cell(forks, d.max),
            cell(threads, d.max),
            format!("{} / {}", stopped(forks), stopped(threads)),
        ]);
    }
    t.note(
        "Each forked child has its own address space, so RLIMIT_AS does not limit how \
         many there are; RLIMIT_NPROC counts every task (process or thread) of the real \
         user and does not apply to root, so it is tried as uid 65534.",
    );
    t
}

pub(super) fn overflow_table(d: &Data) -> Table {
    let mut t = Table::new(
        "4. A thread that overflows its stack (in a child process)",
        &["created with", "stack", "ended", "last line on stderr"],
    );
    for r in &d.overflow {
        t.row(vec![
            r.api.to_string(),
            format_size(r.stack_size),
            r.ended.clone(),
            r.said.clone(),
        ]);
    }
    t.note(
        "`stacklimit overflow`: one thread recursing with 1 KiB frames until it hits the \
         guard page below its stack.",
    );
    t
}

pub(super) fn chart(d: &Data) -> Chart {
    let kib = |r: &StackRow| r.stack_size as f64 / 1024.0;
    let series = |f: fn(&StackRow) -> Option<f64>| -> Vec<(f64, f64)> {
        d.stacks.iter().filter_map(|r| f(r).map(|y| (kib(r), y))).collect()
    };
    let spread = |f: fn(&StackRow) -> Option<Summary>| {
        d.stacks.iter().filter_map(move |r| f(r).map(|s| (kib(r), s)))
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
    chart
        .guide(f64::from(d.max), &format!("cap: at most {} threads (--max)", d.max))
        .limit("address space / stack", series(|r| Some(r.predicted as f64)))
        .summaries(
            Meaning::Thread,
            "pthread_create",
            spread(|r| counted(&r.pthread)),
        )
        .summaries(
            Meaning::Thread.form(1),
            "std::thread",
            spread(|r| counted(&r.std)),
        )
}

#[cfg(test)]
mod tests {
    use super::super::{Overflow, ProcRow};
    use super::*;

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
    /// one run, and a run that died.
    fn data() -> Data {
        let eagain = |n| probe(Some(n), Some("EAGAIN"));
        Data {
            address_space: 512 << 20,
            max: 100,
            rounds: 2,
            stacks: vec![
                StackRow {
                    stack_size: 8 << 20,
                    predicted: 64,
                    pthread: vec![eagain(60), eagain(50)],
                    std: vec![eagain(40), eagain(40)],
                },
                StackRow {
                    stack_size: 1 << 20,
                    predicted: 512,
                    pthread: vec![probe(Some(100), None), probe(None, None)],
                    std: vec![probe(Some(100), None), probe(Some(100), None)],
                },
            ],
            program: vec![ProgramRun {
                threads: 500,
                setting: "ulimit -s 1024",
                ended: "exit 0".into(),
                said: String::new(),
                wall_s: 0.5,
                log_checked: true,
            }],
            processes: vec![ProcRow {
                limit: "RLIMIT_NPROC = 16".into(),
                user: "uid 65534".into(),
                predicted: Some(15),
                forks: probe(Some(15), Some("EAGAIN")),
                threads: probe(Some(15), Some("EAGAIN")),
            }],
            overflow: vec![Overflow {
                api: "pthread_create",
                stack_size: 64 << 10,
                ended: "SIGSEGV".into(),
                said: "x".into(),
            }],
        }
    }

    #[test]
    fn the_stack_table_gives_medians_ranges_caps_and_deaths() {
        let t = stack_table(&data());
        assert_eq!(t.rows[0], ["8M", "64", "55 (50-60)", "40", "EAGAIN"]);
        assert_eq!(t.rows[1][..2], ["1M", "512"]);
        assert_eq!(t.rows[1][2], "100 (cap); 1 of 2 runs: SIGSEGV");
        assert_eq!(t.rows[1][3], "100 (cap)");
        assert_eq!(t.rows[1][4], "-");
    }

    #[test]
    fn the_other_tables_say_what_each_run_did() {
        let d = data();
        let p = program_table(&d);
        assert_eq!(p.rows[0][3], "Okay (log checked: every line whole)");
        let q = process_table(&d);
        assert_eq!(q.rows[0][2..], ["15", "15", "15", "EAGAIN / EAGAIN"]);
        let o = overflow_table(&d);
        assert_eq!(o.rows[0], ["pthread_create", "64K", "SIGSEGV", "x"]);
    }

    #[test]
    fn the_chart_and_headline_use_the_medians() {
        let d = data();
        let c = chart(&d);
        let pthread = c.series.iter().find(|s| s.label == "pthread_create").unwrap();
        assert_eq!(pthread.points, [(8192.0, 55.0), (1024.0, 100.0)]);
        let arithmetic = &c.series[0].points;
        assert_eq!(arithmetic, &[(8192.0, 64.0), (1024.0, 512.0)]);
        let h = headline(&d);
        let figure = |k: &str| h.get(k).and_then(|f| f.get("value")).cloned();
        assert_eq!(figure("threads_at_8m"), Some(serde_json::json!(55.0)));
        assert_eq!(figure("threads_at_1m"), Some(serde_json::json!(100.0)));
        assert_eq!(figure("ulimit_s_1024_ok"), Some(serde_json::json!(1.0)));
    }
}
