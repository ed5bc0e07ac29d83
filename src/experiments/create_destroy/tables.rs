//! create-destroy's headline, tables and charts, made from the [`Data`]
//! alone.

use crate::chart::bars::{Bars, Row};
use crate::chart::{Chart, Kind, Meaning};
use crate::report::Headline;
use crate::stats::Summary;
use crate::table::{Table, range};

use super::{CreattimeRow, Data, LoopRow};

/// Tables 1-3, and with `--vs-c` the Rust-against-C tables 4 and 5.
pub(super) fn tables(d: &Data) -> Vec<Table> {
    let mut tables = vec![article_table(d), lecture_table(d), creattime_table(d)];
    if !d.vs_c.is_empty() {
        tables.push(vs_c_table(d));
    }
    if !d.creattime_c.is_empty() {
        tables.push(creattime_vs_c_table(d));
    }
    tables
}

/// The figures the claims are judged on: the cost of one create and
/// destroy in the article's and the lecture's loops, their paired ratios,
/// and creattime's ratio at each sample count.
pub(super) fn headline(data: &Data) -> Headline {
    let us = |rows: &[LoopRow], program: &str| {
        rows.iter().find(|r| r.program == program).map(|r| r.runs_us.clone())
    };
    let fork = us(&data.article, "forkcreat --reap sigchld");
    let thread = us(&data.article, "pthreadcreat");
    let lecture_fork = us(&data.lecture, "forkcreat --reap wait");
    let lecture_thread = us(&data.lecture, "pthreadcreat");
    let mut h = crate::report::headline()
        .rounds(
            "fork_us",
            "forkcreat: one process created and reaped",
            fork.clone(),
            "µs",
        )
        .rounds(
            "thread_us",
            "pthreadcreat: one thread created and joined",
            thread.clone(),
            "µs",
        )
        .paired(
            "fork_over_thread",
            "forkcreat's µs over pthreadcreat's in the same round",
            fork,
            thread,
        )
        .rounds(
            "lecture_fork_us",
            "the lecture's fork + wait loop",
            lecture_fork.clone(),
            "µs",
        )
        .rounds(
            "lecture_thread_us",
            "the lecture's create + join loop",
            lecture_thread.clone(),
            "µs",
        )
        .paired(
            "lecture_fork_over_thread",
            "the lecture's loops: process µs over thread µs in the same round",
            lecture_fork,
            lecture_thread,
        );
    let of = |r: &CreattimeRow, f: fn(&super::run::Ct) -> f64| -> Vec<f64> {
        r.runs.iter().map(f).collect()
    };
    for r in &data.creattime {
        h = h.paired(
            &format!("creattime_ratio_{}", r.samples),
            &format!(
                "creattime: fork() over pthread_create() at {} samples, one run's pair",
                r.samples
            ),
            Some(of(r, |c| c.fork_ms)),
            Some(of(r, |c| c.thread_ms)),
        );
    }
    // Round k ran every sample count: the spread of that round's ratios.
    let rounds = data.creattime.iter().map(|r| r.runs.len()).min().unwrap_or(0);
    let spread: Vec<f64> = (0..rounds)
        .map(|k| {
            let ratios = data
                .creattime
                .iter()
                .map(|r| r.runs[k].fork_ms / r.runs[k].thread_ms);
            let (lo, hi) = ratios.fold((f64::INFINITY, 0.0_f64), |(lo, hi), x| {
                (lo.min(x), hi.max(x))
            });
            hi / lo
        })
        .collect();
    let spread = (data.creattime.len() >= 2 && rounds > 0).then_some(spread);
    let largest = data.creattime.iter().max_by_key(|r| r.samples);
    h.rounds(
        "creattime_ratio_spread",
        "creattime: highest ratio over lowest across sample counts, in one round",
        spread,
        "x",
    )
    .rounds(
        "zombies_before_reaping",
        &format!(
            "creattime: zombies counted in /proc just before reaping, {} children",
            largest.map_or(0, |r| r.samples)
        ),
        largest.map(|r| of(r, |c| c.zombies)),
        "",
    )
    .rounds(
        "zombie_share",
        "creattime: zombies counted just before reaping over the children forked",
        largest
            .map(|r| r.runs.iter().map(|c| c.zombies / r.samples as f64).collect()),
        "",
    )
    .build()
}

fn find<'a>(rows: &'a [LoopRow], program: &str) -> Option<&'a LoopRow> {
    rows.iter().find(|r| r.program == program)
}

fn article_table(d: &Data) -> Table {
    let n = d.article.first().map_or(0, |r| r.iterations);
    let mut t = Table::new(
        format!(
            "1. Create and destroy {n} processes or threads (Zhou Li et al.: 100,000)"
        ),
        &[
            "program",
            "us per create+destroy",
            "whole run s",
            "article (Celeron 1.5 GHz, 2.6.32)",
        ],
    );
    for r in &d.article {
        let then = match r.program.as_str() {
            "forkcreat --reap sigchld" => "about 180 us (0.18 ms)",
            "pthreadcreat" => "5-6x faster than processes",
            _ => "",
        };
        t.row(vec![
            r.program.clone(),
            range(&r.us_per_create, 1),
            range(&r.wall_s, 3),
            then.into(),
        ]);
    }
    let ratio = |fork: &str| {
        find(&d.article, fork)
            .zip(find(&d.article, "pthreadcreat"))
            .map(|(f, t)| f.us_per_create.median / t.us_per_create.median)
    };
    if let (Some(sig), Some(wait)) =
        (ratio("forkcreat --reap sigchld"), ratio("forkcreat --reap wait"))
    {
        t.note(format!(
            "Today threads are {sig:.1}x faster than processes reaped by SIGCHLD and \
             {wait:.1}x faster than processes reaped one by one (article: 5-6x)."
        ));
    }
    t.note(format!(
        "Microseconds as each program timed its own loop: median (min-max) of {} rounds.",
        d.rounds
    ));
    t
}

fn lecture_table(d: &Data) -> Table {
    let n = d.lecture.first().map_or(0, |r| r.iterations);
    let mut t = Table::new(
        format!(
            "2. The lecture's loops, iter = {n} (the 2004 lecture): microseconds per create+delete"
        ),
        &["", "today", "Linux 2.4.20 (2 x 728 MHz)", "Solaris 2.9 (333 MHz SPARC)"],
    );
    let fork = find(&d.lecture, "forkcreat --reap wait");
    let thread = find(&d.lecture, "pthreadcreat");
    if let Some(r) = thread {
        t.row(vec![
            "Threads".into(),
            range(&r.us_per_create, 1),
            "12".into(),
            "138".into(),
        ]);
    }
    if let Some(r) = fork {
        t.row(vec![
            "Processes".into(),
            range(&r.us_per_create, 1),
            "722".into(),
            "9077".into(),
        ]);
    }
    if let (Some(f), Some(th)) = (fork, thread) {
        t.row(vec![
            "Processes / threads".into(),
            format!("{:.1}", f.us_per_create.median / th.us_per_create.median),
            "60.2".into(),
            "65.8".into(),
        ]);
    }
    t.note("Today: `forkcreat --reap wait` and `pthreadcreat`, median (min-max) of the rounds.");
    t
}

fn creattime_table(d: &Data) -> Table {
    let mut t = Table::new(
        "3. Only the create call (Czuczy, 2004): average ms per call, fork/thread ratio",
        &[
            "samples",
            "fork ms",
            "thread ms",
            "ratio today",
            "zombies",
            "ratio 2.4.22 P3-700",
            "ratio 2.6.6 P4 2.6 GHz",
        ],
    );
    let then = |s: u64| match s {
        20 => ("4.33", "9.61"),
        128 => ("3.92", "9.38"),
        255 => ("1.64", "9.39"),
        _ => ("", ""),
    };
    for r in &d.creattime {
        let (a, b) = then(r.samples);
        t.row(vec![
            r.samples.to_string(),
            range(&r.fork_ms, 4),
            range(&r.thread_ms, 4),
            format!("{:.2}", r.ratio.median),
            format!("{:.0}", r.zombies_before_reaping.median),
            a.into(),
            b.into(),
        ]);
    }
    t.note(
        "The 2004 figures (fork 0.327/0.333/0.345 ms and thread 0.076/0.085/0.210 ms on \
         2.4.22; fork 0.258/0.243/0.242 ms and thread 0.027/0.026/0.026 ms on 2.6.6) \
         are from the post. Today: median (min-max) of the rounds' averages; zombies: \
         children ended but not yet reaped when the fork test finished (median).",
    );
    t
}

fn vs_c_table(d: &Data) -> Table {
    let mut t = Table::new(
        "4. Rust against the C loops (cc -O2), run back to back in each round",
        &[
            "program",
            "against",
            "Rust us",
            "C us",
            "Rust / C (median of pairs)",
            "min-max",
        ],
    );
    for p in &d.vs_c {
        let (Some(rust), Some(c)) =
            (find(&d.article, &p.program), find(&d.article, &p.against))
        else {
            continue;
        };
        let against = p.against.strip_prefix(&p.program).unwrap_or(&p.against);
        t.row(vec![
            p.program.clone(),
            against.trim().trim_matches(['(', ')']).to_string(),
            format!("{:.1}", rust.us_per_create.median),
            format!("{:.1}", c.us_per_create.median),
            format!("{:.3}", p.ratio.median),
            format!("{:.3}-{:.3}", p.ratio.min, p.ratio.max),
        ]);
    }
    t.note(format!(
        "{} pairs; each program timed its own loop with the same clock placement. \
         \"C, Rust's mappings\" is forkcreat.c linked with rust_image.c: the same \
         loop in a process with the mappings a Rust program starts with (libgcc_s, \
         the main thread's signal stack, a heap), which fork copies and exit tears \
         down for every child. All C is built with {}.",
        d.rounds,
        crate::bins::C_FLAGS.join(" ")
    ));
    t
}

fn creattime_vs_c_table(d: &Data) -> Table {
    let mut t = Table::new(
        "5. creattime against creattime.c, run back to back in each round",
        &[
            "samples",
            "fork ms",
            "fork ms (C)",
            "pthread_create ms",
            "pthread_create ms (C)",
            "ratio",
            "ratio (C)",
        ],
    );
    let ms = |s: &Summary| format!("{:.4}", s.median);
    for (r, c) in d.creattime.iter().zip(&d.creattime_c) {
        t.row(vec![
            r.samples.to_string(),
            ms(&r.fork_ms),
            ms(&c.fork_ms),
            ms(&r.thread_ms),
            ms(&c.thread_ms),
            format!("{:.2}", r.ratio.median),
            format!("{:.2}", c.ratio.median),
        ]);
    }
    t.note(format!(
        "Both time the same two calls, fork() and pthread_create(), one sample at a \
         time; medians of {} rounds' averages. creattime.c is built with {}.",
        d.rounds,
        crate::bins::C_FLAGS.join(" ")
    ));
    t
}

/// A program's meaning on the charts, from its row's label: forkcreat a
/// process, pthreadcreat a thread; a C twin is the second form, the C
/// twin linked with a Rust program's mappings the third.
fn kind(program: &str) -> Kind {
    let meaning = if program.starts_with("pthreadcreat") {
        Meaning::Thread
    } else {
        Meaning::Process
    };
    let form = if program.ends_with("(C, Rust's mappings)") {
        2
    } else {
        u8::from(program.ends_with("(C)"))
    };
    meaning.form(form)
}

/// A bar chart (rows that are programs, not points on an axis), which
/// `publish` writes as create-destroy.svg beside the line charts.
pub(super) fn bars(d: &Data) -> String {
    let rows = d
        .article
        .iter()
        .map(|r| {
            let u = &r.us_per_create;
            Row::new(kind(&r.program), &r.program, u.median).range(u.min, u.max)
        })
        .collect();
    Bars::new(
        "Create and destroy one process or thread",
        "microseconds: median, whisker min-max of the rounds",
        false,
    )
    .group("", rows)
    .to_svg()
}

pub(super) fn charts(d: &Data) -> Vec<(String, Chart)> {
    let mut charts = Vec::new();
    if d.creattime.len() > 1 {
        let points = |f: fn(&CreattimeRow) -> &Summary| {
            d.creattime.iter().map(move |r| (r.samples as f64, f(r)))
        };
        charts.push((
            "creattime".to_string(),
            Chart::new(
                "Only the create call (creattime): average per call",
                "samples",
                "milliseconds (median of rounds, band: min-max)",
            )
            .summaries(Meaning::Process, "fork()", points(|r| &r.fork_ms))
            .summaries(
                Meaning::Thread,
                "pthread_create()",
                points(|r| &r.thread_ms),
            ),
        ));
    }
    charts
}

#[cfg(test)]
mod tests {
    use super::super::{CreattimeRow, Data, LoopRow, Pair};
    use super::*;

    fn s(median: f64, min: f64, max: f64) -> Summary {
        Summary { n: 3, median, min, max, ..Summary::default() }
    }

    fn row(program: &str, us: f64) -> LoopRow {
        LoopRow {
            program: program.into(),
            iterations: 100,
            us_per_create: s(us, us - 1.0, us + 1.0),
            wall_s: s(0.5, 0.4, 0.6),
            runs_us: vec![us - 1.0, us, us + 1.0],
        }
    }

    fn ct(samples: u64, fork: f64, thread: f64) -> CreattimeRow {
        let run =
            super::super::run::Ct { fork_ms: fork, thread_ms: thread, zombies: 7.0 };
        CreattimeRow {
            runs: vec![
                run.clone(),
                super::super::run::Ct { zombies: 6.0, ..run.clone() },
                super::super::run::Ct { zombies: 8.0, ..run },
            ],
            samples,
            fork_ms: s(fork, fork, fork),
            thread_ms: s(thread, thread, thread),
            ratio: s(fork / thread, fork / thread, fork / thread),
            zombies_before_reaping: s(7.0, 6.0, 8.0),
        }
    }

    /// Fixed figures: fork 120 or 60 µs, threads 20 µs.
    fn data(vs_c: bool) -> Data {
        let mut article = vec![
            row("forkcreat --reap sigchld", 120.0),
            row("forkcreat --reap wait", 60.0),
            row("pthreadcreat", 20.0),
        ];
        let mut pairs = Vec::new();
        let mut creattime_c = Vec::new();
        if vs_c {
            article.push(row("pthreadcreat (C)", 16.0));
            pairs.push(Pair {
                program: "pthreadcreat".into(),
                against: "pthreadcreat (C)".into(),
                ratio: s(1.25, 1.2, 1.3),
            });
            creattime_c.push(ct(20, 0.1, 0.04));
        }
        Data {
            rounds: 3,
            full: false,
            article,
            lecture: vec![
                row("forkcreat --reap wait", 700.0),
                row("pthreadcreat", 10.0),
            ],
            creattime: vec![ct(20, 1.0, 0.25), ct(255, 1.5, 0.25)],
            vs_c: pairs,
            creattime_c,
        }
    }

    #[test]
    fn tables_put_today_beside_the_articles() {
        let t = tables(&data(false));
        assert_eq!(t.len(), 3);
        assert_eq!(
            t[0].rows[0][..2],
            ["forkcreat --reap sigchld", "120.0 (119.0-121.0)"]
        );
        assert!(
            t[0].notes[0].contains("6.0x faster than processes reaped by SIGCHLD")
        );
        assert!(t[0].notes[0].contains("3.0x faster than processes reaped one"));
        // Lecture: threads, processes, then their ratio beside 60.2 and 65.8.
        assert_eq!(t[1].rows[0][0], "Threads");
        assert_eq!(t[1].rows[2], ["Processes / threads", "70.0", "60.2", "65.8"]);
        // creattime: the ratio, the zombies, the post's ratios at 20 samples.
        assert_eq!(t[2].rows[0][3..], ["4.00", "7", "4.33", "9.61"]);
        assert_eq!(t[2].rows[1][3..], ["6.00", "7", "1.64", "9.39"]);
    }

    #[test]
    fn vs_c_tables_pair_each_program_with_its_c_twin() {
        let t = tables(&data(true));
        assert_eq!(t.len(), 5);
        assert_eq!(
            t[3].rows[0],
            ["pthreadcreat", "C", "20.0", "16.0", "1.250", "1.200-1.300"]
        );
        assert_eq!(
            t[4].rows,
            [["20", "1.0000", "0.1000", "0.2500", "0.0400", "4.00", "2.50"]]
        );
    }

    #[test]
    fn headline_charts_and_bars_follow_the_data() {
        let d = data(false);
        let h = headline(&d);
        let value = |k: &str| h.get(k).and_then(|f| f["value"].as_f64());
        assert_eq!(value("fork_us"), Some(120.0));
        assert_eq!(value("fork_over_thread"), Some(6.0));
        assert_eq!(value("lecture_fork_over_thread"), Some(70.0));
        assert_eq!(value("creattime_ratio_255"), Some(6.0));
        assert_eq!(value("creattime_ratio_spread"), Some(1.5));
        assert_eq!(value("zombies_before_reaping"), Some(7.0));
        assert_eq!(value("zombie_share"), Some(7.0 / 255.0));
        // Every figure carries its rounds and its interval.
        assert_eq!(h["fork_us"]["rounds"], serde_json::json!([119.0, 120.0, 121.0]));
        assert_eq!(h["fork_us"]["interval"], serde_json::json!([119.0, 121.0]));
        assert_eq!(h["fork_over_thread"]["method"], "paired-ratio");
        let c = charts(&d);
        assert_eq!(c[0].0, "creattime");
        assert_eq!(c[0].1.series[0].points, [(20.0, 1.0), (255.0, 1.5)]);
        assert_eq!(c[0].1.series[1].points, [(20.0, 0.25), (255.0, 0.25)]);
        let svg = bars(&d);
        assert!(
            svg.contains("forkcreat --reap wait") && svg.contains("pthreadcreat")
        );
    }
}
