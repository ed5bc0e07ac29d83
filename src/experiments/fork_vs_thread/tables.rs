//! fork-vs-thread's headline, tables and charts, made from the [`Data`]
//! alone.

use crate::chart::{Chart, Meaning};
use crate::report::Headline;
use crate::table::{Table, range};

use super::{Axis, Data, GridResult, Row};

/// The median over rounds of `a`'s time over `b`'s in the same round
/// ([`crate::stats::paired_ratio`]): each round runs every program once,
/// so the pair shares whatever the machine was doing then.
fn paired_ratio(row: &Row, a: &str, b: &str) -> Option<f64> {
    crate::stats::paired_ratio(&walls(row, a)?, &walls(row, b)?).map(|s| s.median)
}

/// `program`'s wall seconds in each round of `row`.
fn walls(row: &Row, program: &str) -> Option<Vec<f64>> {
    let p = row.programs.iter().find(|p| p.program == program)?;
    Some(p.runs.iter().map(|u| u.wall_s).collect())
}

/// How far from a straight line time grows with P in round `k`: the slope
/// from the first point to the middle one over the slope from the middle
/// to the last (1 on a line, above 1 when time grows faster at large P). A
/// fixed start-up cost does not change it, where it would an R².
fn slope_ratio(rows: &[&Row], program: &str, k: usize) -> Option<f64> {
    let at =
        |r: &Row| Some((f64::from(r.setting.procs), *walls(r, program)?.get(k)?));
    let (first, mid, last) = (rows.first()?, rows[rows.len() / 2], rows.last()?);
    let ((x0, y0), (x1, y1), (x2, y2)) = (at(first)?, at(mid)?, at(last)?);
    (rows.len() >= 3).then(|| ((y2 - y1) / (x2 - x1)) / ((y1 - y0) / (x1 - x0)))
}

/// The figures the claims are judged on: fork's time over thread's across
/// every setting and at the largest COUNT, paired per round, and how
/// straight time grows with P.
pub(super) fn headline(data: &Data) -> Headline {
    let rows: Vec<&Row> = data.grids.iter().flat_map(|g| &g.rows).collect();
    let rounds = rows
        .iter()
        .flat_map(|r| &r.programs)
        .map(|p| p.runs.len())
        .min()
        .unwrap_or(0);
    let ratio =
        |r: &Row, k: usize| Some(walls(r, "fork")?[k] / walls(r, "thread")?[k]);
    // Round k ran every setting: the median of that round's pairs.
    let every: Vec<f64> = (0..rounds)
        .filter_map(|k| {
            let v: Vec<f64> = rows.iter().filter_map(|r| ratio(r, k)).collect();
            (!v.is_empty()).then(|| crate::stats::median(&v))
        })
        .collect();
    let count = data.grids.iter().find(|g| g.name == "count");
    let last = count.and_then(|g| g.rows.iter().max_by_key(|r| r.setting.count));
    let mut workers: Vec<&Row> = data
        .grids
        .iter()
        .filter(|g| g.name == "workers")
        .flat_map(|g| &g.rows)
        .collect();
    workers.sort_by_key(|r| r.setting.procs);
    let bend = |program: &str| -> Option<Vec<f64>> {
        (0..rounds).map(|k| slope_ratio(&workers, program, k)).collect()
    };
    // The program further from a straight line, in each round.
    let worse = bend("fork").zip(bend("thread")).map(|(f, t)| {
        f.into_iter()
            .zip(t)
            .map(|(f, t)| if f.ln().abs() >= t.ln().abs() { f } else { t })
            .collect::<Vec<f64>>()
    });
    crate::report::headline()
        .rounds(
            "fork_over_thread",
            "fork's time over thread's: each round's median over every setting",
            (rounds > 0 && every.len() == rounds).then_some(every),
            "x",
        )
        .paired(
            "fork_over_thread_at_largest_count",
            &format!(
                "fork's time over thread's at P = 255, COUNT = {}",
                last.map_or(0, |r| r.setting.count)
            ),
            last.and_then(|r| walls(r, "fork")),
            last.and_then(|r| walls(r, "thread")),
        )
        .rounds(
            "workers_slope_ratio",
            "time against P: the upper half's slope over the lower half's, the \
             program further from 1",
            worse,
            "x",
        )
        .rounds(
            "workers_slope_ratio_fork",
            "fork: the upper half's slope over the lower half's",
            bend("fork"),
            "x",
        )
        .rounds(
            "workers_slope_ratio_thread",
            "thread: the upper half's slope over the lower half's",
            bend("thread"),
            "x",
        )
        .build()
}

/// The grid's table: the setting, the times (median and range), and the
/// paired ratios the chapter quotes. With the C programs too, the ratios
/// get a table of their own, first, so that each table fits the book's
/// column with one line per row.
pub(super) fn tables(g: &GridResult) -> Vec<Table> {
    let names: Vec<&str> = g
        .rows
        .first()
        .map_or(Vec::new(), |r| r.programs.iter().map(|p| p.program).collect());
    let ratios = [
        ("fork/thread", "fork", "thread"),
        ("fork/fork.c", "fork", "fork.c"),
        ("thread/thread.c", "thread", "thread.c"),
    ];
    let with_c = names.len() > 2;
    let ratios = &ratios[..if with_c { 3 } else { 1 }];
    let setting =
        |r: &Row| vec![r.setting.procs.to_string(), r.setting.count.to_string()];
    let ratio_cells = |r: &Row| -> Vec<String> {
        ratios
            .iter()
            .map(|(_, a, b)| {
                paired_ratio(r, a, b).map_or("-".into(), |x| format!("{x:.2}"))
            })
            .collect()
    };
    let time_cells = |r: &Row| -> Vec<String> {
        r.programs.iter().map(|p| range(&p.wall_s, 3)).collect()
    };
    let ratio_note = "Ratios: median over the rounds of one program's time over the \
                      other's in the same round.";
    let time_note = "Seconds of wall-clock time (`time`'s real): median (min-max) of \
                     the rounds.";
    let labels: Vec<String> = names.iter().map(|p| format!("{p} s")).collect();
    let mut time_headers = vec!["P", "COUNT"];
    time_headers.extend(labels.iter().map(String::as_str));
    let mut ratio_headers = vec!["P", "COUNT"];
    ratio_headers.extend(ratios.iter().map(|r| r.0));
    if !with_c {
        let mut headers = ratio_headers;
        headers.extend(&time_headers[2..]);
        let mut t = Table::new(&g.title, &headers);
        for r in &g.rows {
            t.row([setting(r), ratio_cells(r), time_cells(r)].concat());
        }
        t.note(format!("{ratio_note} {time_note}"));
        return vec![t];
    }
    let mut ratios_table = Table::new(
        format!("{}: paired ratios of the times", g.title),
        &ratio_headers,
    );
    let mut times_table = Table::new(format!("{}: seconds", g.title), &time_headers);
    for r in &g.rows {
        ratios_table.row([setting(r), ratio_cells(r)].concat());
        times_table.row([setting(r), time_cells(r)].concat());
    }
    ratios_table.note(ratio_note);
    times_table.note(time_note);
    vec![ratios_table, times_table]
}

pub(super) fn chart(g: &GridResult) -> Option<(String, Chart)> {
    let (x_label, x): (&str, fn(&Row) -> f64) = match g.axis {
        Axis::Count => ("lines per worker (COUNT, log scale)", |r| r.setting.count as f64),
        Axis::Workers => ("workers (P, log scale)", |r| f64::from(r.setting.procs)),
        Axis::None => return None,
    };
    let first = g.rows.first()?;
    // Log axes: the programs' times differ several-fold (thread.c's grows
    // far faster than the rest), and a linear axis would flatten the lines
    // the chapter compares.
    let mut chart = Chart {
        log_x: true,
        log_y: true,
        ..Chart::new(&g.title, x_label, "seconds (median, band: min-max; log scale)")
    };
    for (i, p) in first.programs.iter().enumerate() {
        let points = g.rows.iter().map(|r| (x(r), &r.programs[i].wall_s));
        // A process or a thread; the C original is the second form.
        let meaning =
            if p.program.starts_with("thread") { Meaning::Thread } else { Meaning::Process };
        let kind = meaning.form(u8::from(p.program.ends_with(".c")));
        chart = chart.summaries(kind, p.program, points);
    }
    Some((g.name.to_string(), chart))
}

#[cfg(test)]
mod tests {
    use super::super::{ProgramRuns, Setting};
    use super::*;
    use crate::stats::Summary;
    use labkit::measure::Usage;

    fn runs(program: &'static str, walls: &[f64]) -> ProgramRuns {
        let wall = Summary::of(walls).unwrap();
        ProgramRuns {
            program,
            wall_s: wall,
            cpu_s: wall,
            runs: walls
                .iter()
                .map(|&wall_s| Usage { wall_s, ..Usage::default() })
                .collect(),
        }
    }

    /// Three settings of P; fork's rounds take 2, 2-4 and 2 times thread's.
    fn grid(with_c: bool) -> GridResult {
        let walls = [
            (100, [1.0, 2.0], [0.5, 1.0]),
            (200, [2.0, 4.0], [1.0, 1.0]),
            (300, [3.0, 3.0], [1.5, 1.5]),
        ];
        let rows = walls
            .iter()
            .map(|&(procs, fork, thread)| {
                let mut programs =
                    vec![runs("fork", &fork), runs("thread", &thread)];
                if with_c {
                    programs.push(runs("fork.c", &[1.0, 1.0]));
                    programs.push(runs("thread.c", &[0.5, 0.5]));
                }
                Row {
                    setting: Setting { procs, count: 1000, line_bytes: None },
                    programs,
                }
            })
            .collect();
        GridResult {
            name: "workers",
            title: "2. P workers".into(),
            axis: Axis::Workers,
            rows,
        }
    }

    #[test]
    fn one_table_with_paired_ratios_then_times() {
        let t = tables(&grid(false));
        assert_eq!(t.len(), 1);
        assert_eq!(
            t[0].headers,
            ["P", "COUNT", "fork/thread", "fork s", "thread s"]
        );
        let ratios: Vec<&str> = t[0].rows.iter().map(|r| r[2].as_str()).collect();
        assert_eq!(ratios, ["2.00", "3.00", "2.00"]);
        assert_eq!(t[0].rows[1][3], "3.000 (2.000-4.000)");
    }

    #[test]
    fn with_c_the_ratios_get_a_table_of_their_own() {
        let t = tables(&grid(true));
        assert_eq!(t.len(), 2);
        let h = ["P", "COUNT", "fork/thread", "fork/fork.c", "thread/thread.c"];
        assert_eq!(t[0].headers, h);
        assert_eq!(t[0].rows[0], ["100", "1000", "2.00", "1.50", "1.50"]);
        assert_eq!(
            t[1].headers[2..],
            ["fork s", "thread s", "fork.c s", "thread.c s"]
        );
    }

    #[test]
    fn headline_and_chart_follow_the_rows() {
        let data = Data {
            rounds: 2,
            full: false,
            stdout: "/dev/null",
            grids: vec![grid(false)],
        };
        let h = headline(&data);
        let value = |k: &str| h.get(k).and_then(|f| f["value"].as_f64());
        // Each round's median over the settings: 2 and 2.
        assert_eq!(value("fork_over_thread"), Some(2.0));
        assert_eq!(h["fork_over_thread"]["rounds"], serde_json::json!([2.0, 2.0]));
        // No "count" grid, so no figure at the largest COUNT.
        assert_eq!(value("fork_over_thread_at_largest_count"), None);
        // fork: slopes 1 then 1 (round 1), 2 then -0.5 (round 2).
        assert_eq!(
            h["workers_slope_ratio_fork"]["rounds"],
            serde_json::json!([1.0, -0.5])
        );
        // thread's lower half is flat in round 2: no finite ratio, no figure.
        assert_eq!(value("workers_slope_ratio_thread"), None);
        assert_eq!(value("workers_slope_ratio"), None);
        let (stem, chart) = chart(&data.grids[0]).unwrap();
        assert_eq!(stem, "workers");
        assert_eq!(
            chart.series[0].points,
            [(100.0, 1.5), (200.0, 3.0), (300.0, 3.0)]
        );
        assert_eq!(chart.series[1].label, "thread");
    }
}
