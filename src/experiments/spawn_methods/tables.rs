//! spawn-methods' headline, tables and charts, made from the [`Data`]
//! alone.

use crate::chart::bars::{self, Bars};
use crate::chart::{Chart, Kind, Meaning};
use crate::report::Headline;
use crate::stats::Summary;
use crate::table::{Table, range};
use labkit::limits::format_size;
use spawn_methods::Method;

use super::{Data, Row};

/// A column header for the RSS and placement tables.
/// A method's meaning on the charts: a process (`vfork` its second form,
/// a new program its third), a thread (`std::thread` its second form, a
/// pooled thread its third), or a task.
fn kind(method: Option<Method>) -> Kind {
    match method {
        Some(Method::ForkWait) | None => Meaning::Process.into(),
        Some(Method::Vfork) => Meaning::Process.form(1),
        Some(Method::ForkExec | Method::PosixSpawn | Method::Command) => {
            Meaning::Process.form(2)
        }
        Some(Method::Pthread) => Meaning::Thread.into(),
        Some(Method::ThreadRlimit | Method::Thread | Method::Thread64k) => {
            Meaning::Thread.form(1)
        }
        Some(Method::Pool) => Meaning::Thread.form(2),
        Some(Method::Tokio) => Meaning::Task.into(),
    }
}

fn short(row: &Row) -> &'static str {
    match row.kind {
        Some(Method::ForkWait) => "fork+wait us",
        Some(Method::Vfork) => "vfork us",
        Some(Method::Thread) => "std::thread us",
        Some(Method::Pool) => "pool handoff us",
        _ => "us",
    }
}

fn us_cell(s: &Summary) -> String {
    let digits = if s.median < 1.0 {
        3
    } else if s.median < 10.0 {
        2
    } else {
        1
    };
    range(s, digits)
}

/// Each method's cost, keyed by its short name.
pub(super) fn headline(data: &Data) -> Headline {
    let mut h = crate::report::headline();
    for r in &data.methods {
        let key = format!("{}_us", crate::report::slug(&r.method));
        h = h.rounds(&key, &r.method, r.runs_us.clone(), "µs");
    }
    h.build()
}

pub(super) fn methods_table(d: &Data) -> Table {
    let mut t = Table::new(
        "1. Create and destroy one unit of concurrent work, 2026",
        &["method", "us each", "iterations", "vs fork+wait"],
    );
    let fork = d.methods.first().map_or(f64::NAN, |r| r.us.median);
    for r in &d.methods {
        t.row(vec![
            r.method.clone(),
            us_cell(&r.us),
            r.iterations.to_string(),
            format!("{:.3}", r.us.median / fork),
        ]);
    }
    t.note(format!(
        "Microseconds per create+destroy: median (min-max) of {} rounds, each a timed \
         loop of `iterations` (calibrated to about {} s a round), in the \
         spawn-methods program (a few MiB resident). Tiny program: `{}` with an \
         empty environment.",
        d.rounds, d.budget_s, d.exec
    ));
    t
}

pub(super) fn rss_table(d: &Data) -> Table {
    let labels: Vec<String> = d
        .rss
        .first()
        .map(|r| r.rows.iter().map(|x| short(x).to_string()).collect())
        .unwrap_or_default();
    let mut headers = vec!["touched", "VmRSS MiB"];
    headers.extend(labels.iter().map(String::as_str));
    let mut t = Table::new("2. Fork against the parent's resident memory", &headers);
    for r in &d.rss {
        let mut cells = vec![
            format_size(r.touched_bytes),
            format!("{:.0}", r.vm_rss_kib as f64 / 1024.0),
        ];
        cells.extend(r.rows.iter().map(|x| us_cell(&x.us)));
        t.row(cells);
    }
    t.note(format!(
        "The parent maps and writes every 4 KiB page of the region (MADV_NOHUGEPAGE; \
         transparent huge pages here: `{}`), then creates and destroys children or \
         threads; median (min-max) of {} rounds. At least 3 forks a round: the largest \
         sizes may take longer than the budget.",
        d.transparent_hugepages, d.rounds
    ));
    t
}

pub(super) fn placement_table(d: &Data) -> Table {
    let columns: Vec<&'static str> = d
        .placement
        .first()
        .map(|r| r.rows.iter().map(short).collect())
        .unwrap_or_default();
    let mut headers = vec!["placement"];
    headers.extend(columns.iter());
    let mut t = Table::new(
        "3. The same against CPU placement (sched_setaffinity)",
        &headers,
    );
    for p in &d.placement {
        let mut cells = vec![p.placement.clone()];
        cells.extend(columns.iter().map(|c| {
            p.rows
                .iter()
                .find(|x| short(x) == *c)
                .map_or("-".into(), |x| us_cell(&x.us))
        }));
        t.row(cells);
    }
    t.note(
        "Pinning applies to the program (sched_setaffinity before it starts) and \
         everything it creates (children and threads inherit the mask), so only the \
         pool can be split over two cores: its worker pins itself to the second CPU.",
    );
    t
}

/// Charts for the tables whose rows are methods, which `publish` writes
/// beside the line chart: spawn-methods.svg and placement.svg. The values
/// span decades, so a log axis, with dots (a bar's length means nothing
/// on a log axis).
pub(super) fn bars(d: &Data) -> Vec<(String, String)> {
    let unit = "microseconds (log scale): median, whisker min-max of the rounds";
    let row = |r: &Row, label: &str| {
        bars::Row::new(kind(r.kind), label, r.us.median).range(r.us.min, r.us.max)
    };
    let rows = d.methods.iter().map(|r| row(r, &r.method)).collect();
    let svg =
        Bars::new("Create + destroy, 2026", unit, true).group("", rows).to_svg();
    let mut chart = Bars::new("CPU placement", unit, true);
    for p in &d.placement {
        let mut rows = Vec::new();
        for r in &p.rows {
            let short = short(r);
            rows.push(row(r, short.strip_suffix(" us").unwrap_or(short)));
        }
        chart = chart.group(&p.placement, rows);
    }
    vec![("spawn-methods.svg".into(), svg), ("placement.svg".into(), chart.to_svg())]
}

pub(super) fn charts(d: &Data) -> Vec<(String, Chart)> {
    let mut charts = Vec::new();
    if d.rss.len() > 1 {
        // A log y axis: fork+wait's cost grows a thousandfold with the
        // parent's memory, and on a linear axis vfork's and the thread's
        // lines would lie on one another at the bottom.
        let mut c = Chart {
            log_y: true,
            ..Chart::new(
                "Creation cost against the parent's resident memory",
                "touched MiB",
                "microseconds (median, band: min-max; log scale)",
            )
        };
        for (i, r) in d.rss[0].rows.iter().enumerate() {
            let points = d.rss.iter().map(|x| {
                (x.touched_bytes as f64 / f64::from(1 << 20), &x.rows[i].us)
            });
            c = c.summaries(kind(r.kind), &r.method, points);
        }
        charts.push(("rss".to_string(), c));
    }
    charts
}

#[cfg(test)]
mod tests {
    use super::super::{PlacementRow, RssRow};
    use super::*;

    fn row(kind: Method, us: f64) -> Row {
        Row {
            method: kind.label(),
            kind: Some(kind),
            iterations: 10,
            us: Summary {
                n: 2,
                median: us,
                min: us * 0.5,
                max: us * 2.0,
                ..Summary::default()
            },
            runs_us: vec![us * 0.5, us, us * 2.0],
        }
    }

    fn rss(bytes: u64, fork: f64) -> RssRow {
        RssRow {
            touched_bytes: bytes,
            vm_rss_kib: (bytes >> 10) + 2048,
            rows: vec![
                row(Method::ForkWait, fork),
                row(Method::Vfork, 40.0),
                row(Method::Thread, 50.0),
            ],
        }
    }

    /// fork+wait 100 µs, the i-th method 5 i µs.
    fn data() -> Data {
        let methods = Method::ALL
            .iter()
            .enumerate()
            .map(|(i, &m)| row(m, if i == 0 { 100.0 } else { 5.0 * i as f64 }))
            .collect();
        let placed = |pool| {
            vec![
                row(Method::ForkWait, 90.0),
                row(Method::Thread, 30.0),
                row(Method::Pool, pool),
            ]
        };
        Data {
            rounds: 2,
            full: false,
            budget_s: 0.1,
            exec: "/bin/true".into(),
            transparent_hugepages: "never".into(),
            methods,
            rss: vec![rss(0, 100.0), rss(1 << 30, 2000.0)],
            placement: vec![
                PlacementRow { placement: "unpinned".into(), rows: placed(20.0) },
                PlacementRow { placement: "same core".into(), rows: placed(4.0) },
                PlacementRow {
                    placement: "two cores".into(),
                    rows: vec![row(Method::Pool, 30.0)],
                },
            ],
        }
    }

    #[test]
    fn the_methods_table_compares_each_with_fork() {
        let t = methods_table(&data());
        assert_eq!(t.rows.len(), 11);
        assert_eq!(t.rows[0][..2], ["fork + _exit + waitpid", "100.0 (50.0-200.0)"]);
        // vfork at 5 µs: two decimals below 10 µs, a twentieth of fork.
        assert_eq!(t.rows[1][1..], ["5.00 (2.50-10.00)", "10", "0.050"]);
        assert_eq!(t.rows[10][3], "0.500");
    }

    #[test]
    fn rss_and_placement_tables_put_methods_in_columns() {
        let d = data();
        let t = rss_table(&d);
        assert_eq!(
            t.headers,
            ["touched", "VmRSS MiB", "fork+wait us", "vfork us", "std::thread us"]
        );
        assert_eq!(t.rows[1][..3], ["1G", "1026", "2000.0 (1000.0-4000.0)"]);
        let t = placement_table(&d);
        assert_eq!(
            t.headers,
            ["placement", "fork+wait us", "std::thread us", "pool handoff us"]
        );
        // The two-core placement only has the pool: dashes elsewhere.
        assert_eq!(t.rows[2], ["two cores", "-", "-", "30.0 (15.0-60.0)"]);
        assert_eq!(t.rows[1][3], "4.00 (2.00-8.00)");
    }

    #[test]
    fn headline_charts_and_bar_files() {
        let d = data();
        let h = headline(&d);
        assert_eq!(h["fork_exit_waitpid_us"]["value"].as_f64(), Some(100.0));
        assert_eq!(h.len(), 11);
        let c = charts(&d);
        assert_eq!(c[0].0, "rss");
        assert_eq!(c[0].1.series[0].points, [(0.0, 100.0), (1024.0, 2000.0)]);
        assert_eq!(c[0].1.series[2].points, [(0.0, 50.0), (1024.0, 50.0)]);
        let files = bars(&d);
        let names: Vec<&str> = files.iter().map(|f| f.0.as_str()).collect();
        assert_eq!(names, ["spawn-methods.svg", "placement.svg"]);
        assert!(
            files[1].1.contains("two cores") && files[1].1.contains("pool handoff")
        );
    }
}
