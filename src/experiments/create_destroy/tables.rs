//! create-destroy's headline, tables and charts, made from the engine's
//! observations alone.

use crate::chart::bars::{Bars, Row};
use crate::chart::{Chart, Kind, Meaning};
use crate::engine::{Observations, Paired, Setting};
use crate::report::Headline;
use crate::table::{Table, col, or_dash, range, range_or_dash};

use super::{Data, loops, samples};

const FORK: &str = "forkcreat --reap sigchld";
const WAIT: &str = "forkcreat --reap wait";
const THREAD: &str = "pthreadcreat";
const CREATTIME: &str = "creattime";
const CREATTIME_C: &str = "creattime (C)";

impl Data {
    fn article(&self) -> Setting {
        loops("article", self.iterations)
    }

    fn lecture(&self) -> Setting {
        loops("lecture", self.lecture_iterations)
    }
}

/// Tables 1-3, and with `--vs-c` the Rust-against-C tables 4 and 5.
pub(super) fn tables(d: &Data, obs: Observations) -> Vec<Table> {
    let mut tables =
        vec![article_table(d, obs), lecture_table(d, obs), creattime_table(d, obs)];
    if !d.vs_c.is_empty() {
        tables.extend([vs_c_table(d, obs), creattime_vs_c_table(d, obs)]);
    }
    tables
}

/// The figures the claims are judged on: the cost of one create and
/// destroy in the article's and the lecture's loops, their paired ratios,
/// and creattime's ratio at each sample count.
pub(super) fn headline(d: &Data, obs: Observations) -> Headline {
    let us = |at: &Setting, program| obs.rounds(at, program, "us_per_create");
    let mut h = crate::report::headline();
    // The article's loops, then the lecture's: a process, a thread, their
    // paired ratio.
    let article = [
        "forkcreat: one process created and reaped",
        "pthreadcreat: one thread created and joined",
        "forkcreat's µs over pthreadcreat's in the same round",
    ];
    let lecture = [
        "the lecture's fork + wait loop",
        "the lecture's create + join loop",
        "the lecture's loops: process µs over thread µs in the same round",
    ];
    for (key, at, fork, [process, thread, ratio]) in
        [("", d.article(), FORK, article), ("lecture_", d.lecture(), WAIT, lecture)]
    {
        h = h
            .rounds(&format!("{key}fork_us"), process, us(&at, fork), "µs")
            .rounds(&format!("{key}thread_us"), thread, us(&at, THREAD), "µs")
            .paired(
                &format!("{key}fork_over_thread"),
                ratio,
                us(&at, fork),
                us(&at, THREAD),
            );
    }
    let ct = |s: u64, metric| obs.rounds(&samples(s), CREATTIME, metric);
    for &s in &d.samples {
        h = h.paired(
            &format!("creattime_ratio_{s}"),
            &format!("creattime: fork() over pthread_create() at {s} samples, each round's pair"),
            ct(s, "fork_ms"),
            ct(s, "thread_ms"),
        );
    }
    // Round k of every sample count: the spread of those rounds' ratios.
    let ratios: Vec<Vec<f64>> =
        d.samples.iter().filter_map(|&s| ct(s, "ratio")).collect();
    let rounds = ratios.iter().map(Vec::len).min().unwrap_or(0);
    let spread = (0..rounds).map(|k| {
        let round = ratios.iter().map(|r| r[k]);
        round.clone().fold(0.0, f64::max) / round.fold(f64::INFINITY, f64::min)
    });
    let spread = (ratios.len() >= 2 && rounds > 0).then(|| spread.collect());
    let largest = d.samples.iter().copied().max();
    let zombies = largest.and_then(|s| ct(s, "zombies"));
    let share = largest
        .zip(zombies.clone())
        .map(|(s, z)| z.iter().map(|z| z / s as f64).collect());
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
            largest.unwrap_or(0)
        ),
        zombies,
        "",
    )
    .rounds(
        "zombie_share",
        "creattime: zombies counted just before reaping over the children forked",
        share,
        "",
    )
    .build()
}

fn article_table(d: &Data, obs: Observations) -> Table {
    let at = d.article();
    let then = |p: &String| match p.as_str() {
        FORK => "about 180 us (0.18 ms)",
        THREAD => "5-6x faster than processes",
        _ => "",
    };
    let mut t = Table::of(
        format!(
            "1. Create and destroy {} processes or threads (Zhou Li et al.: 100,000)",
            d.iterations
        ),
        &d.programs,
        &[
            col("program", |p: &String| p.clone()),
            col("us per create+destroy", |p: &String| {
                range_or_dash(obs.summary(&at, p, "us_per_create"), 1)
            }),
            col("whole run s", |p: &String| {
                range_or_dash(obs.summary(&at, p, "wall_s"), 3)
            }),
            col("article (Celeron 1.5 GHz, 2.6.32)", |p: &String| then(p).into()),
        ],
    );
    let us = |p| obs.median(&at, p, "us_per_create");
    let ratio = |fork| Some(us(fork)? / us(THREAD)?);
    if let (Some(sig), Some(wait)) = (ratio(FORK), ratio(WAIT)) {
        t.note(format!(
            "Today threads are {sig:.1}x faster than processes reaped by SIGCHLD and \
             {wait:.1}x faster than processes reaped one by one (article: 5-6x)."
        ));
    }
    let rounds = obs.summary(&at, THREAD, "us_per_create").map_or(0, |s| s.n);
    t.noted(format!(
        "Microseconds as each program timed its own loop: median (min-max) of {rounds} rounds."
    ))
}

fn lecture_table(d: &Data, obs: Observations) -> Table {
    let at = d.lecture();
    let mut t = Table::new(
        format!(
            "2. The lecture's loops, iter = {} (the 2004 lecture): microseconds per create+delete",
            d.lecture_iterations
        ),
        &["", "today", "Linux 2.4.20 (2 x 728 MHz)", "Solaris 2.9 (333 MHz SPARC)"],
    );
    let us = |p| obs.summary(&at, p, "us_per_create");
    for (row, p, linux, solaris) in
        [("Threads", THREAD, "12", "138"), ("Processes", WAIT, "722", "9077")]
    {
        if let Some(s) = us(p) {
            t.row(vec![row.into(), range(&s, 1), linux.into(), solaris.into()]);
        }
    }
    if let (Some(f), Some(th)) = (us(WAIT), us(THREAD)) {
        let ratio = format!("{:.1}", f.median / th.median);
        let cells = ["Processes / threads", &ratio, "60.2", "65.8"];
        t.row(cells.map(String::from).into());
    }
    t.noted("Today: `forkcreat --reap wait` and `pthreadcreat`, median (min-max) of the rounds.")
}

fn creattime_table(d: &Data, obs: Observations) -> Table {
    let then = |s: &u64| match s {
        20 => ("4.33", "9.61"),
        128 => ("3.92", "9.38"),
        255 => ("1.64", "9.39"),
        _ => ("", ""),
    };
    let ms = |metric| {
        move |s: &u64| range_or_dash(obs.summary(&samples(*s), CREATTIME, metric), 4)
    };
    let of = |metric, digits| {
        move |s: &u64| or_dash(obs.median(&samples(*s), CREATTIME, metric), digits)
    };
    Table::of(
        "3. Only the create call (Czuczy, 2004): average ms per call, fork/thread ratio",
        &d.samples,
        &[
            col("samples", |s: &u64| s.to_string()),
            col("fork ms", ms("fork_ms")),
            col("thread ms", ms("thread_ms")),
            col("ratio today", of("ratio", 2)),
            col("zombies", of("zombies", 0)),
            col("ratio 2.4.22 P3-700", |s: &u64| then(s).0.into()),
            col("ratio 2.6.6 P4 2.6 GHz", |s: &u64| then(s).1.into()),
        ],
    )
    .noted(
        "The 2004 figures (fork 0.327/0.333/0.345 ms and thread 0.076/0.085/0.210 ms on \
         2.4.22; fork 0.258/0.243/0.242 ms and thread 0.027/0.026/0.026 ms on 2.6.6) \
         are from the post. Today: median (min-max) of the rounds' averages; zombies: \
         children ended but not yet reaped when the fork test finished (median).",
    )
}

fn vs_c_table(d: &Data, obs: Observations) -> Table {
    let at = d.article();
    let us = move |p: &str| or_dash(obs.median(&at, p, "us_per_create"), 1);
    let pairs = d.vs_c.first().map_or(0, |p| p.ratio.n);
    Table::of(
        "4. Rust against the C loops (cc -O2), each pair in the same round",
        &d.vs_c,
        &[
            col("program", |p: &Paired| p.condition.clone()),
            col("against", |p: &Paired| {
                let twin = p.against.strip_prefix(&p.condition).unwrap_or(&p.against);
                twin.trim().trim_matches(['(', ')']).to_string()
            }),
            col("Rust us", |p: &Paired| us(&p.condition)),
            col("C us", |p: &Paired| us(&p.against)),
            col("Rust / C (median of pairs)", |p: &Paired| format!("{:.3}", p.ratio.median)),
            col("min-max", |p: &Paired| format!("{:.3}-{:.3}", p.ratio.min, p.ratio.max)),
        ],
    )
    .noted(format!(
        "{pairs} pairs; each program timed its own loop with the same clock placement. \
         \"C, Rust's mappings\" is forkcreat.c linked with rust_image.c: the same \
         loop in a process with the mappings a Rust program starts with (libgcc_s, \
         the main thread's signal stack, a heap), which fork copies and exit tears \
         down for every child. All C is built with {}.",
        crate::bins::C_FLAGS.join(" ")
    ))
}

fn creattime_vs_c_table(d: &Data, obs: Observations) -> Table {
    let of = |program, metric, digits| {
        move |s: &u64| or_dash(obs.median(&samples(*s), program, metric), digits)
    };
    let rounds = d
        .samples
        .first()
        .and_then(|&s| obs.summary(&samples(s), CREATTIME, "ratio"));
    let least = d.samples.iter().copied().min().unwrap_or(1).max(1);
    Table::of(
        "5. creattime against creattime.c, run back to back in each round",
        &d.samples,
        &[
            col("samples", |s: &u64| s.to_string()),
            col("fork ms", of(CREATTIME, "fork_ms", 4)),
            col("fork ms (C)", of(CREATTIME_C, "fork_ms", 4)),
            col("pthread_create ms", of(CREATTIME, "thread_ms", 4)),
            col("pthread_create ms (C)", of(CREATTIME_C, "thread_ms", 4)),
            col("ratio", of(CREATTIME, "ratio", 2)),
            col("ratio (C)", of(CREATTIME_C, "ratio", 2)),
        ],
    )
    .noted(format!(
        "Both time the same two calls, fork() and pthread_create(), one sample at a \
         time; medians of {} rounds' averages. A round runs the program at each count until it has timed {} calls of \
         each kind ({least} samples: {} runs), so every count's average rests on \
         as many calls. creattime.c is built with {}.",
        rounds.map_or(0, |s| s.n),
        super::run::CREATTIME_CALLS,
        super::run::CREATTIME_CALLS.div_ceil(least),
        crate::bins::C_FLAGS.join(" ")
    ))
}

/// A program's meaning on the charts, from its row's label: forkcreat a
/// process, pthreadcreat a thread; a C twin is the second form, the C
/// twin linked with a Rust program's mappings the third.
fn kind(program: &str) -> Kind {
    let meaning =
        if program.starts_with(THREAD) { Meaning::Thread } else { Meaning::Process };
    let form = if program.ends_with("(C, Rust's mappings)") {
        2
    } else {
        u8::from(program.ends_with("(C)"))
    };
    meaning.form(form)
}

/// A bar chart (rows that are programs, not points on an axis), which
/// `publish` writes as create-destroy.svg beside the line charts.
pub(super) fn bars(d: &Data, obs: Observations) -> String {
    let at = d.article();
    let row = |p: &String| {
        Some(Row::summary(kind(p), p, &obs.summary(&at, p, "us_per_create")?))
    };
    Bars::new(
        "Create and destroy one process or thread",
        "microseconds: median, whisker min-max of the rounds",
        false,
    )
    .group("", d.programs.iter().filter_map(row).collect())
    .to_svg()
}

pub(super) fn charts(d: &Data, obs: Observations) -> Vec<(String, Chart)> {
    if d.samples.len() < 2 {
        return Vec::new();
    }
    let points = |metric| {
        let at = move |s: &u64| {
            Some((*s as f64, obs.summary(&samples(*s), CREATTIME, metric)?))
        };
        d.samples.iter().filter_map(at)
    };
    let chart = Chart::new(
        "Only the create call (creattime): average per call",
        "samples",
        "milliseconds (median of rounds, band: min-max)",
    )
    .summaries(Meaning::Process, "fork()", points("fork_ms"))
    .summaries(Meaning::Thread, "pthread_create()", points("thread_ms"));
    vec![("creattime".to_string(), chart)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Observation;

    /// `program`'s three rounds at `at`: each metric's value in each round.
    fn observe(
        log: &mut Vec<Observation>,
        at: &Setting,
        program: &str,
        metrics: &[(&'static str, [f64; 3])],
    ) {
        let run = |k: usize| metrics.iter().map(|(m, v)| (*m, v[k])).collect();
        let runs: Vec<Vec<_>> = (0..3).map(run).collect();
        log.extend(Observation::rounds(at, program, &runs));
    }

    /// Fixed figures: fork 120 or 60 µs, threads 20 µs (each ±1 across the
    /// rounds); with `vs_c`, pthreadcreat.c 16 µs and creattime.c beside.
    fn data(vs_c: bool) -> (Data, Vec<Observation>) {
        let mut programs = vec![FORK, WAIT, THREAD];
        if vs_c {
            programs.push("pthreadcreat (C)");
        }
        let mut d = Data {
            rounds: 3,
            full: false,
            iterations: 100,
            lecture_iterations: 2000,
            lecture_rounds: 6,
            samples: vec![20, 255],
            programs: programs.iter().map(|p| p.to_string()).collect(),
            series: Vec::new(),
            vs_c: Vec::new(),
        };
        let mut log = Vec::new();
        let us = |us: f64| {
            [
                ("us_per_create", [us - 1.0, us, us + 1.0]),
                ("wall_s", [0.4, 0.5, 0.6]),
            ]
        };
        for (p, v) in programs.iter().zip([120.0, 60.0, 20.0, 16.0]) {
            observe(&mut log, &d.article(), p, &us(v));
        }
        observe(&mut log, &d.lecture(), WAIT, &us(700.0));
        observe(&mut log, &d.lecture(), THREAD, &us(10.0));
        let ct = |f: f64, t: f64| {
            let zombies = ("zombies", [7.0, 6.0, 8.0]);
            [
                ("fork_ms", [f; 3]),
                ("thread_ms", [t; 3]),
                ("ratio", [f / t; 3]),
                zombies,
            ]
        };
        observe(&mut log, &samples(20), CREATTIME, &ct(1.0, 0.25));
        observe(&mut log, &samples(255), CREATTIME, &ct(1.5, 0.25));
        if vs_c {
            observe(&mut log, &samples(20), CREATTIME_C, &ct(0.1, 0.04));
            d.vs_c = Observations(&log).pairs(
                THREAD,
                "pthreadcreat (C)",
                "us_per_create",
            );
        }
        (d, log)
    }

    #[test]
    fn tables_put_today_beside_the_articles() {
        let (d, log) = data(false);
        let t = tables(&d, Observations(&log));
        assert_eq!(t.len(), 3);
        assert_eq!(t[0].rows[0][..2], [FORK, "120.0 (119.0-121.0)"]);
        assert!(
            t[0].notes[0].contains("6.0x faster than processes reaped by SIGCHLD")
        );
        assert!(t[0].notes[0].contains("3.0x faster than processes reaped one"));
        assert!(t[0].notes[1].ends_with("median (min-max) of 3 rounds."));
        // Lecture: threads, processes, then their ratio beside 60.2 and 65.8.
        assert_eq!(t[1].rows[0][0], "Threads");
        assert_eq!(t[1].rows[2], ["Processes / threads", "70.0", "60.2", "65.8"]);
        // creattime: the ratio, the zombies, the post's ratios at 20 samples.
        assert_eq!(t[2].rows[0][3..], ["4.00", "7", "4.33", "9.61"]);
        assert_eq!(t[2].rows[1][3..], ["6.00", "7", "1.64", "9.39"]);
    }

    #[test]
    fn vs_c_tables_pair_each_program_with_its_c_twin() {
        let (d, log) = data(true);
        let t = tables(&d, Observations(&log));
        assert_eq!(t.len(), 5);
        // Rounds 19/15, 20/16, 21/17: the median pair 1.25.
        assert_eq!(
            t[3].rows[0],
            ["pthreadcreat", "C", "20.0", "16.0", "1.250", "1.235-1.267"]
        );
        assert!(t[3].notes[0].starts_with("3 pairs;"), "{:?}", t[3].notes);
        assert_eq!(
            t[4].rows[0],
            ["20", "1.0000", "0.1000", "0.2500", "0.0400", "4.00", "2.50"]
        );
        // creattime.c did not run at 255 samples.
        assert_eq!(t[4].rows[1][2], "-");
    }

    #[test]
    fn headline_charts_and_bars_follow_the_data() {
        let (d, log) = data(false);
        let obs = Observations(&log);
        let h = headline(&d, obs);
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
        let c = charts(&d, obs);
        assert_eq!(c[0].0, "creattime");
        assert_eq!(c[0].1.series[0].points, [(20.0, 1.0), (255.0, 1.5)]);
        assert_eq!(c[0].1.series[1].points, [(20.0, 0.25), (255.0, 0.25)]);
        let svg = bars(&d, obs);
        assert!(
            svg.contains("forkcreat --reap wait") && svg.contains("pthreadcreat")
        );
    }
}
