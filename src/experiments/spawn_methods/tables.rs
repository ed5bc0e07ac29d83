//! spawn-methods' headline, tables and charts, made from the engine's
//! observations and the parts' settings alone.

use crate::chart::bars::{Bars, Row};
use crate::chart::{Chart, Kind, Meaning};
use crate::engine::{Observations, Setting, spread};
use crate::report::Headline;
use crate::table::{Table, col};
use labkit::limits::format_size;

use super::{Data, PLACED, RSS, methods, placed, touched};
use spawn_methods::Method;

/// A method's meaning on the charts: a process (`vfork` its second form,
/// a new program its third), a thread (`std::thread` its second form, a
/// pooled thread its third), or a task.
fn kind(method: &str) -> Kind {
    match method {
        "vfork" => Meaning::Process.form(1),
        "fork-exec" | "posix-spawn" | "command" => Meaning::Process.form(2),
        "pthread" => Meaning::Thread.into(),
        "thread-rlimit" | "thread" | "thread64k" => Meaning::Thread.form(1),
        "pool" => Meaning::Thread.form(2),
        "tokio" => Meaning::Task.into(),
        _ => Meaning::Process.into(),
    }
}

/// A method's column in the RSS and placement tables.
fn short(method: &str) -> &'static str {
    match method {
        "fork-wait" => "fork+wait us",
        "vfork" => "vfork us",
        "thread" => "std::thread us",
        _ => "pool handoff us",
    }
}

/// Microseconds of `method`'s rounds at `at`: the median with its range,
/// more decimals for smaller figures. The pool's hand-off is a two-party
/// measurement: unpinned, its rounds may fall apart (some on one CPU, some
/// on two), and then each cluster's range is given instead.
fn us_cell(obs: Observations, at: &Setting, method: &str) -> String {
    let Some(rounds) = obs.rounds(at, method, "us") else { return "-".into() };
    let median = crate::stats::median(&rounds);
    let digits = if median < 1.0 {
        3
    } else if median < 10.0 {
        2
    } else {
        1
    };
    let unpinned = at.get("placement").is_none_or(|p| p == "unpinned");
    spread(&rounds, digits, method == "pool" && unpinned)
}

/// Each method's cost, keyed by its label as a slug.
pub(super) fn headline(obs: Observations) -> Headline {
    let mut h = crate::report::headline();
    for m in Method::ALL {
        let (label, rounds) = (m.label(), obs.rounds(&methods(), &m.name(), "us"));
        let key = format!("{}_us", crate::report::slug(&label));
        h = h.rounds(&key, &label, rounds, "µs");
    }
    h.build()
}

type Named = (String, String);

pub(super) fn methods_table(d: &Data, obs: Observations) -> Table {
    let at = methods();
    let median = |m: &str, metric| obs.median(&at, m, metric).unwrap_or(f64::NAN);
    let fork = median("fork-wait", "us");
    let t = Table::of(
        "1. Create and destroy one unit of concurrent work, 2026",
        d.methods.iter().filter(|(m, _)| obs.rounds(&at, m, "us").is_some()),
        &[
            col("method", |(_, label): &Named| label.clone()),
            col("us each", |(m, _): &Named| us_cell(obs, &at, m)),
            col("iterations", |(m, _): &Named| {
                format!("{:.0}", median(m, "iterations"))
            }),
            col("vs fork+wait", |(m, _): &Named| {
                format!("{:.3}", median(m, "us") / fork)
            }),
        ],
    );
    t.noted(format!(
        "Microseconds per create+destroy: median (min-max) of {} rounds, each a timed \
         loop of `iterations` (calibrated to about {} s a round), in the \
         spawn-methods program (a few MiB resident). Tiny program: `{}` with an \
         empty environment.",
        obs.rounds(&at, "fork-wait", "us").map_or(0, |r| r.len()),
        d.budget_s,
        d.exec
    ))
}

pub(super) fn rss_table(d: &Data, obs: Observations) -> Table {
    let mut columns = vec![
        col("touched", |b: &u64| format_size(*b)),
        col("VmRSS MiB", |b: &u64| {
            let kib = obs.median(&touched(*b), "fork-wait", "vm_rss_kib");
            format!("{:.0}", kib.unwrap_or(f64::NAN) / 1024.0)
        }),
    ];
    for m in RSS.map(Method::name) {
        columns.push(col(short(&m), move |b: &u64| us_cell(obs, &touched(*b), &m)));
    }
    let n = d.rss.first().and_then(|&b| obs.rounds(&touched(b), "fork-wait", "us"));
    let n = n.map_or(0, |r| r.len());
    Table::of("2. Fork against the parent's resident memory", &d.rss, &columns).noted(format!(
        "The parent maps and writes every 4 KiB page of the region (MADV_NOHUGEPAGE; \
         transparent huge pages here: `{}`), then creates and destroys children or \
         threads; median (min-max) of {n} rounds. At least 3 forks a round: the largest \
         sizes may take longer than the budget.",
        d.transparent_hugepages
    ))
}

type Placed = (&'static str, String);

pub(super) fn placement_table(d: &Data, obs: Observations) -> Table {
    let mut columns = vec![col("placement", |(_, row): &Placed| row.clone())];
    for m in PLACED.map(Method::name) {
        columns.push(col(short(&m), move |(p, _): &Placed| {
            us_cell(obs, &placed(p), &m)
        }));
    }
    let t = Table::of(
        "3. The same against CPU placement (sched_setaffinity)",
        &d.placements,
        &columns,
    );
    t.noted(
        "Pinning applies to the program (sched_setaffinity before it starts) and \
         everything it creates (children and threads inherit the mask), so only the \
         pool can be split over two cores: its worker pins itself to the second CPU. \
         The pool's unpinned rounds, when they fall in separate clusters (some on one \
         core, some on two), are given as each cluster's range and count.",
    )
}

/// Charts for the tables whose rows are methods, which `publish` writes
/// beside the line chart: spawn-methods.svg and placement.svg. The values
/// span decades, so a log axis, with dots (a bar's length means nothing
/// on a log axis).
pub(super) fn bars(d: &Data, obs: Observations) -> Vec<(String, String)> {
    let unit = "microseconds (log scale): median, whisker min-max of the rounds";
    let row = |at: &Setting, m: &str, label: &str| {
        Some(Row::summary(kind(m), label, &obs.summary(at, m, "us")?))
    };
    let rows = d
        .methods
        .iter()
        .filter_map(|(m, label)| row(&methods(), m, label))
        .collect();
    let svg =
        Bars::new("Create + destroy, 2026", unit, true).group("", rows).to_svg();
    let mut chart = Bars::new("CPU placement", unit, true);
    for (p, label) in &d.placements {
        let short = |m: &str| short(m).trim_end_matches(" us").to_string();
        let rows = PLACED
            .map(Method::name)
            .into_iter()
            .filter_map(|m| row(&placed(p), &m, &short(&m)));
        chart = chart.group(label, rows.collect());
    }
    vec![("spawn-methods.svg".into(), svg), ("placement.svg".into(), chart.to_svg())]
}

pub(super) fn charts(d: &Data, obs: Observations) -> Vec<(String, Chart)> {
    if d.rss.len() < 2 {
        return Vec::new();
    }
    // A log y axis: fork+wait's cost grows a thousandfold with the
    // parent's memory, and on a linear axis vfork's and the thread's lines
    // would lie on one another at the bottom.
    let mut c = Chart {
        log_y: true,
        ..Chart::new(
            "Creation cost against the parent's resident memory",
            "touched MiB",
            "microseconds (median, band: min-max; log scale)",
        )
    };
    for m in RSS {
        let mib = |b: u64| b as f64 / f64::from(1 << 20);
        let points = d.rss.iter().filter_map(|&b| {
            Some((mib(b), obs.summary(&touched(b), &m.name(), "us")?))
        });
        c = c.summaries(kind(&m.name()), &m.label(), points);
    }
    vec![("rss".to_string(), c)]
}

#[cfg(test)]
mod tests {
    use super::super::{Data, parts};
    use super::*;
    use crate::engine::Engine;
    use spawn_methods::{Report, Run};

    /// Every part measured through the engine, 1 GiB touched at most and
    /// two CPUs, six rounds of each method at half, once and twice its
    /// microseconds in turn: fork+wait 100 µs, the i-th method 5 i; fork
    /// 2000 µs at 1 GiB, vfork 40, the thread 50; placed, fork 90, the
    /// thread 30 and the pool 4 µs on one core, 30 on two and, unpinned,
    /// 2 to 3 µs in some rounds, 20 to 22 in the others.
    fn measured() -> (Data, Vec<crate::engine::Observation>) {
        let (parts, placements) = parts(&[0, 1 << 30], &[0, 1]);
        let mut engine = Engine::new(6);
        for p in &parts {
            let names: Vec<String> = p.methods.iter().map(|m| m.name()).collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let (part, placement) = (&p.at["part"], &p.at["placement"]);
            let mut calls = vec![0; names.len()];
            engine
                .measure(&p.at, &names, |k| {
                    let (m, call) = (p.methods[k], calls[k]);
                    calls[k] += 1;
                    let i = Method::ALL.iter().position(|x| *x == m).unwrap();
                    let us = match (
                        part.as_str().unwrap(),
                        placement.as_str().unwrap(),
                        m,
                    ) {
                        ("methods", ..) if i == 0 => 100.0,
                        ("methods", ..) => 5.0 * i as f64,
                        ("rss", _, Method::ForkWait) if p.rss > 0 => 2000.0,
                        ("rss", _, Method::ForkWait) => 100.0,
                        ("rss", _, Method::Vfork) => 40.0,
                        (_, "unpinned", Method::Pool) => {
                            return Ok(report(
                                m,
                                [2.0, 20.0, 3.0, 21.0, 22.0, 2.5][call % 6],
                                p.rss,
                            ));
                        }
                        (_, "one-cpu", Method::Pool) => 4.0,
                        (_, "two-cpus", _) => 30.0,
                        ("placement", _, Method::ForkWait) => 90.0,
                        ("placement", ..) => 30.0,
                        _ => 50.0,
                    };
                    Ok(report(m, us * [0.5, 1.0, 2.0][call % 3], p.rss))
                })
                .unwrap();
        }
        let data = Data {
            rounds: 6,
            full: false,
            budget_s: 0.1,
            exec: "/bin/true".into(),
            transparent_hugepages: "never".into(),
            methods: Method::ALL.iter().map(|&m| (m.name(), m.label())).collect(),
            rss: vec![0, 1 << 30],
            placements,
            series: Vec::new(),
        };
        (data, engine.finish())
    }

    /// The program's report of one run of `method`, `bytes` touched.
    fn report(method: Method, us: f64, bytes: u64) -> Report {
        let label = method.label();
        Report {
            touched_bytes: bytes,
            vm_rss_kib: (bytes >> 10) + 2048,
            cpus: None,
            worker_cpu: None,
            budget_s: None,
            exec: "/bin/true".into(),
            runs: vec![Run { method, label, iterations: 10, us }],
        }
    }

    #[test]
    fn the_methods_table_compares_each_with_fork() {
        let (d, log) = measured();
        let t = methods_table(&d, Observations(&log));
        assert_eq!(t.rows.len(), 11);
        assert_eq!(t.rows[0][..2], ["fork + _exit + waitpid", "100.0 (50.0-200.0)"]);
        // vfork at 5 µs: two decimals below 10 µs, a twentieth of fork.
        assert_eq!(t.rows[1][1..], ["5.00 (2.50-10.00)", "10", "0.050"]);
        assert_eq!(t.rows[10][3], "0.500");
        // Eleven methods in six rounds, even as the engine's order asks.
        assert!(
            t.notes[0].contains("median (min-max) of 6 rounds"),
            "{:?}",
            t.notes
        );
    }

    #[test]
    fn rss_and_placement_tables_put_methods_in_columns() {
        let (d, log) = measured();
        let t = rss_table(&d, Observations(&log));
        assert_eq!(
            t.headers,
            ["touched", "VmRSS MiB", "fork+wait us", "vfork us", "std::thread us"]
        );
        assert_eq!(t.rows[1][..3], ["1G", "1026", "2000.0 (1000.0-4000.0)"]);
        let t = placement_table(&d, Observations(&log));
        assert_eq!(
            t.headers,
            ["placement", "fork+wait us", "std::thread us", "pool handoff us"]
        );
        // The two-core placement only has the pool: dashes elsewhere.
        let two = "two cores (creator on CPU 0, pool worker on 1)";
        assert_eq!(t.rows[2], [two, "-", "-", "30.0 (15.0-60.0)"]);
        assert_eq!(t.rows[1][3], "4.00 (2.00-8.00)");
        // Unpinned, the hand-off's rounds fell in two clusters: each given.
        assert_eq!(t.rows[0][3], "2.0-3.0 (3) | 20.0-22.0 (3)");
    }

    #[test]
    fn headline_charts_and_bar_files() {
        let (d, log) = measured();
        let obs = Observations(&log);
        let h = headline(obs);
        assert_eq!(h["fork_exit_waitpid_us"]["value"].as_f64(), Some(100.0));
        assert_eq!(h.len(), 11);
        let c = charts(&d, obs);
        assert_eq!(c[0].0, "rss");
        assert_eq!(c[0].1.series[0].points, [(0.0, 100.0), (1024.0, 2000.0)]);
        assert_eq!(c[0].1.series[2].points, [(0.0, 50.0), (1024.0, 50.0)]);
        let files = bars(&d, obs);
        let names: Vec<&str> = files.iter().map(|f| f.0.as_str()).collect();
        assert_eq!(names, ["spawn-methods.svg", "placement.svg"]);
        assert!(
            files[1].1.contains("two cores") && files[1].1.contains("pool handoff")
        );
    }
}
