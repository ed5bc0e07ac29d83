//! fork-vs-thread's headline, tables and charts, made from the engine's
//! observations alone.

use crate::chart::{Chart, Meaning};
use crate::engine::Observations;
use crate::report::Headline;
use crate::table::{Table, col, or_dash, range_or_dash};

use super::{Axis, Grid, Setting};

/// How far from a straight line time grows with P in round `k`: the slope
/// from the first point to the middle one over the slope from the middle
/// to the last (1 on a line, above 1 when time grows faster at large P). A
/// fixed start-up cost does not change it, where it would an R².
fn slope_ratio(obs: Observations, g: &Grid, program: &str, k: usize) -> Option<f64> {
    let mut points: Vec<&Setting> = g.settings.iter().collect();
    points.sort_by_key(|s| s.procs);
    let at = |s: &Setting| {
        let wall = obs.rounds(&s.factors(g.name), program, "wall_s")?;
        Some((f64::from(s.procs), *wall.get(k)?))
    };
    let (first, mid, last) =
        (points.first()?, points[points.len() / 2], points.last()?);
    let ((x0, y0), (x1, y1), (x2, y2)) = (at(first)?, at(mid)?, at(last)?);
    (points.len() >= 3).then(|| ((y2 - y1) / (x2 - x1)) / ((y1 - y0) / (x1 - x0)))
}

/// The figures the claims are judged on, for the Rust pair (`fork`,
/// `thread`: today's way to write the programs) and, when they ran, for
/// the article's own C programs (`fork.c`, `thread.c`, keys ending in
/// `_c`): fork's time over thread's across every setting and at the
/// largest COUNT, paired per round, and how straight time grows with P.
pub(super) fn headline(grids: &[Grid], obs: Observations) -> Headline {
    let mut h = crate::report::headline();
    let count = grids.iter().find(|g| g.name == "count");
    let last =
        count.and_then(|g| Some((g, g.settings.iter().max_by_key(|s| s.count)?)));
    let workers = grids.iter().find(|g| g.name == "workers");
    for (fork, thread, suffix) in
        [("fork", "thread", ""), ("fork.c", "thread.c", "_c")]
    {
        let ratios: Vec<Vec<f64>> = grids
            .iter()
            .flat_map(|g| g.settings.iter().map(move |s| (g, s)))
            .filter_map(|(g, s)| {
                obs.paired(&s.factors(g.name), fork, thread, "wall_s")
            })
            .collect();
        let rounds = ratios.iter().map(Vec::len).min().unwrap_or(0);
        let bend = |program: &str| -> Option<Vec<f64>> {
            let g = workers?;
            (0..rounds).map(|k| slope_ratio(obs, g, program, k)).collect()
        };
        // The program further from a straight line, in each round.
        let worse = bend(fork).zip(bend(thread)).map(|(f, t)| {
            f.into_iter()
                .zip(t)
                .map(|(f, t)| if f.ln().abs() >= t.ln().abs() { f } else { t })
                .collect::<Vec<f64>>()
        });
        let key = |k: &str| format!("{k}{suffix}");
        let at_last = |program| {
            let (g, s) = last?;
            obs.rounds(&s.factors(g.name), program, "wall_s")
        };
        h = h
            .rounds(
                &key("fork_over_thread"),
                &format!(
                    "{fork}'s time over {thread}'s: each round's median over every setting"
                ),
                // Round k ran every setting: the median of that round's pairs.
                crate::stats::round_medians(&ratios),
                "x",
            )
            .paired(
                &key("fork_over_thread_at_largest_count"),
                &format!(
                    "{fork}'s time over {thread}'s at P = 255, COUNT = {}",
                    last.map_or(0, |(_, s)| s.count)
                ),
                at_last(fork),
                at_last(thread),
            )
            .rounds(
                &key("workers_slope_ratio"),
                &format!(
                    "{fork} and {thread}, time against P: the upper half's slope over \
                     the lower half's, the program further from 1"
                ),
                worse,
                "x",
            );
        for (role, p) in [("fork", fork), ("thread", thread)] {
            h = h.rounds(
                &key(&format!("workers_slope_ratio_{role}")),
                &format!("{p}: the upper half's slope over the lower half's"),
                bend(p),
                "x",
            );
        }
    }
    h.build()
}

/// The grid's table: the setting, the paired ratios the chapter quotes and
/// the times (median and range). With the C programs too, the ratios get a
/// table of their own, first, so that each table fits the book's column
/// with one line per row.
pub(super) fn tables(g: &Grid, programs: &[&str], obs: Observations) -> Vec<Table> {
    let pairs = [("fork", "thread"), ("fork", "fork.c"), ("thread", "thread.c")];
    let with_c = programs.len() > 2;
    let pairs = &pairs[..if with_c { 3 } else { 1 }];
    let setting = || {
        vec![
            col("P", |s: &Setting| s.procs.to_string()),
            col("COUNT", |s: &Setting| s.count.to_string()),
        ]
    };
    let (mut ratios, mut times) = (setting(), setting());
    for &(a, b) in pairs {
        ratios.push(col(format!("{a}/{b}"), move |s: &Setting| {
            let r = obs.paired(&s.factors(g.name), a, b, "wall_s");
            or_dash(r.map(|r| crate::stats::median(&r)), 2)
        }));
    }
    for &p in programs {
        times.push(col(format!("{p} s"), move |s: &Setting| {
            range_or_dash(obs.summary(&s.factors(g.name), p, "wall_s"), 3)
        }));
    }
    let best = (g.best_of > 1).then(|| {
        let n = g.best_of;
        format!(" Each round's time is the quickest of {n} runs, a pass over the grid apart.")
    });
    let best = best.unwrap_or_default();
    let ratio_note = format!(
        "Ratios: median over the rounds of one program's time over the other's in \
         the same round.{best}"
    );
    let time_note = format!(
        "Seconds of wall-clock time (`time`'s real): median (min-max) of the \
         rounds.{best}"
    );
    if !with_c {
        ratios.extend(times.drain(2..));
        let t = Table::of(g.title, &g.settings, &ratios);
        return vec![t.noted(format!("{ratio_note} {time_note}"))];
    }
    vec![
        Table::of(
            format!("{}: paired ratios of the times", g.title),
            &g.settings,
            &ratios,
        )
        .noted(&ratio_note),
        Table::of(format!("{}: seconds", g.title), &g.settings, &times)
            .noted(&time_note),
    ]
}

pub(super) fn chart(
    g: &Grid,
    programs: &[&str],
    obs: Observations,
) -> Option<(String, Chart)> {
    let (x_label, x): (&str, fn(&Setting) -> f64) = match g.axis {
        Axis::Count => ("lines per worker (COUNT, log scale)", |s| s.count as f64),
        Axis::Workers => ("workers (P, log scale)", |s| f64::from(s.procs)),
        Axis::None => return None,
    };
    // Log axes: the programs' times differ several-fold (thread.c's grows
    // far faster than the rest), and a linear axis would flatten the lines
    // the chapter compares.
    let mut chart = Chart {
        log_x: true,
        log_y: true,
        ..Chart::new(g.title, x_label, "seconds (median, band: min-max; log scale)")
    };
    for p in programs {
        let points = g.settings.iter().filter_map(|s| {
            Some((x(s), obs.summary(&s.factors(g.name), p, "wall_s")?))
        });
        // A process or a thread; the C original is the second form.
        let meaning =
            if p.starts_with("thread") { Meaning::Thread } else { Meaning::Process };
        chart =
            chart.summaries(meaning.form(u8::from(p.ends_with(".c"))), p, points);
    }
    Some((g.name.to_string(), chart))
}

#[cfg(test)]
mod tests {
    use super::super::{Grid, set};
    use super::*;
    use crate::engine::Engine;

    /// Three settings of P, two rounds; fork takes 2, 2-4 and 2 times as
    /// long as thread; the C twins 1 s and 0.5 s.
    fn measured(
        with_c: bool,
    ) -> (Grid, Vec<&'static str>, Vec<crate::engine::Observation>) {
        let walls = [
            (100, [1.0, 2.0], [0.5, 1.0]),
            (200, [2.0, 4.0], [1.0, 1.0]),
            (300, [3.0, 3.0], [1.5, 1.5]),
        ];
        let g = Grid {
            name: "workers",
            title: "2. P workers",
            axis: Axis::Workers,
            settings: walls.iter().map(|w| set(w.0, 1000, None)).collect(),
            best_of: 1,
        };
        let mut programs = vec!["fork", "thread"];
        if with_c {
            programs.extend(["fork.c", "thread.c"]);
        }
        let mut engine = Engine::new(2);
        for (i, (s, (_, fork, thread))) in g.settings.iter().zip(walls).enumerate() {
            // Each program's calls at this setting; at the first, its first
            // call is its warm-up, which takes round 1's time, unused.
            let mut calls = [0usize; 4];
            let wall = [fork, thread, [1.0; 2], [0.5; 2]];
            engine
                .measure(&s.factors(g.name), &programs, |k| {
                    let r =
                        if i == 0 { calls[k].saturating_sub(1) } else { calls[k] };
                    calls[k] += 1;
                    Ok(labkit::measure::Usage {
                        wall_s: wall[k][r % 2],
                        ..Default::default()
                    })
                })
                .unwrap();
        }
        (g, programs, engine.finish())
    }

    #[test]
    fn one_table_with_paired_ratios_then_times() {
        let (g, programs, log) = measured(false);
        let t = tables(&g, &programs, Observations(&log));
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
        let (g, programs, log) = measured(true);
        let t = tables(&g, &programs, Observations(&log));
        assert_eq!(t.len(), 2);
        let h = ["P", "COUNT", "fork/thread", "fork/fork.c", "thread/thread.c"];
        assert_eq!(t[0].headers, h);
        assert_eq!(t[0].rows[0][..2], ["100", "1000"]);
        assert_eq!(
            t[1].headers[2..],
            ["fork s", "thread s", "fork.c s", "thread.c s"]
        );
    }

    #[test]
    fn headline_and_chart_follow_the_rounds() {
        let (g, programs, log) = measured(false);
        let obs = Observations(&log);
        let h = headline(std::slice::from_ref(&g), obs);
        let value = |k: &str| h.get(k).and_then(|f| f["value"].as_f64());
        assert_eq!(value("fork_over_thread"), Some(2.0));
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
        let (stem, chart) = chart(&g, &programs, obs).unwrap();
        assert_eq!(stem, "workers");
        assert_eq!(
            chart.series[0].points,
            [(100.0, 1.5), (200.0, 3.0), (300.0, 3.0)]
        );
        assert_eq!(chart.series[1].label, "thread");
    }
}
