//! The ctx-switch tables, headline and chart, from the results alone.

use crate::chart::Meaning;
use crate::chart::bars::{Bars, Row};
use crate::report::Headline;
use crate::table::{Table, range};
use ctxswitch::{Mode, Pin};

use super::{Cell, Data, round_trips};

pub(super) fn cpus_text(c: &Cell) -> String {
    match c.cpus {
        Some([a, b]) if a == b => a.to_string(),
        Some([a, b]) => format!("{a},{b}"),
        None => {
            let ends: Vec<String> = c
                .runs
                .iter()
                .map(|r| format!("{}-{}", r.last_cpus[0], r.last_cpus[1]))
                .collect();
            format!("ended {}", ends.join(" "))
        }
    }
}

pub(super) fn cost_table(d: &Data) -> Table {
    let mut t = Table::new(
        format!(
            "What one switch costs: ctxswitch, {} round trips per run ({} for \
             cross), {} rounds",
            d.iterations,
            round_trips(d.iterations, Pin::Cross),
            d.rounds
        ),
        &[
            "mode",
            "placement",
            "CPUs",
            "round trip µs",
            "per switch µs",
            "pipe w+r µs",
            "net per switch µs",
            "kernel switches / round trip",
        ],
    );
    for c in &d.cells {
        let r = &c.us_per_round_trip;
        let k = &c.kernel_switches_per_round_trip;
        t.row(vec![
            c.mode.name().into(),
            c.pin.name().into(),
            cpus_text(c),
            range(r, 2),
            format!("{:.2}", c.us_per_switch),
            format!("{:.2}", c.pipe_us.median),
            format!("{:.2}", c.net_us_per_switch),
            format!("{:.3}{}", k.median, if c.counts_hold { "" } else { " (!)" }),
        ]);
    }
    t.note(
        "Round trip: median (min-max) of the rounds. Per switch: half the median \
         round trip. Pipe w+r: one task writing a byte and reading it back (no \
         switch); net per switch: (round trip - 2 x pipe w+r) / 2, median. Kernel \
         switches: voluntary + involuntary of both tasks (getrusage per thread, \
         wait4 for the child process) per round trip; the method assumes 2. \
         `(!)`: a round where the count was off by more than 10%.",
    );
    t.note(
        "CPUs: where A and B were pinned; for `none`, the CPUs A and B ended on, \
         one `A-B` pair per round.",
    );
    for s in &d.skipped {
        t.note(format!("Skipped {s}."));
    }
    t
}

pub(super) fn perf_table(d: &Data) -> Table {
    let mut t = Table::new(
        "ctxswitch against `perf bench sched pipe`, same mode and placement",
        &[
            "mode",
            "placement",
            "ctxswitch µs / round trip",
            "perf µs / round trip",
            "ctxswitch / perf",
            "within 15%",
        ],
    );
    for c in &d.cells {
        let Some(p) = &c.perf else { continue };
        let (r, q) = (&c.us_per_round_trip, &p.us_per_round_trip);
        let ratio = c.vs_perf.unwrap_or(f64::NAN);
        t.row(vec![
            c.mode.name().into(),
            c.pin.name().into(),
            range(r, 2),
            range(q, 2),
            format!("{ratio:.2}"),
            if (ratio - 1.0).abs() <= 0.15 { "yes" } else { "no" }.into(),
        ]);
    }
    t.note(format!(
        "{}. {}. Rounds alternate which tool goes first; the ratio is the \
         median of the rounds' ctxswitch/perf pairs. perf times its whole run, \
         including creating the second task and no warm-up; ctxswitch times \
         only the round trips after 1000 warm-up ones.",
        d.perf.version.as_deref().unwrap_or("perf"),
        d.perf.note
    ));
    t
}

/// One switch's cost in each mode and placement measured, raw and net of
/// the pipe calls, each the median of its rounds.
pub(super) fn headline(data: &Data) -> Headline {
    let mut h = crate::report::headline();
    for c in &data.cells {
        let (mode, pin) = (c.mode.name(), c.pin.name());
        let raw: Vec<f64> = c.runs.iter().map(|r| r.us_per_switch).collect();
        let net: Vec<f64> = c.runs.iter().map(|r| r.net_us_per_switch).collect();
        h = h
            .rounds(
                &format!("{mode}_{pin}_us"),
                &format!("one switch between {mode}, {pin} CPU placement"),
                raw,
                "µs",
            )
            .rounds(
                &format!("{mode}_{pin}_net_us"),
                "the same, net of the pipe calls' cost",
                net,
                "µs",
            );
    }
    h.build()
}

/// The three placements as three categories, one bar (median, with the
/// rounds' min-max) per tool and mode: a category is not a point on an
/// axis. A linear axis, so that bar lengths compare.
pub(super) fn chart(d: &Data) -> Bars {
    let mut chart = Bars::new(
        "Round trip (two switches) by placement",
        "microseconds per round trip: median, whisker min-max of the rounds",
        false,
    );
    for pin in [Pin::Same, Pin::Cross, Pin::None] {
        let mut rows = Vec::new();
        for mode in [Mode::Threads, Mode::Processes] {
            let meaning = match mode {
                Mode::Threads => Meaning::Thread,
                Mode::Processes => Meaning::Process,
            };
            let Some(c) = d.cells.iter().find(|c| c.pin == pin && c.mode == mode)
            else {
                continue;
            };
            let r = &c.us_per_round_trip;
            rows.push(
                Row::new(meaning, format!("ctxswitch, {}", mode.name()), r.median)
                    .range(r.min, r.max),
            );
            if let Some(p) = &c.perf {
                let q = &p.us_per_round_trip;
                rows.push(
                    // perf's measure of the same: the second form.
                    Row::new(
                        meaning.form(1),
                        format!("perf bench, {}", mode.name()),
                        q.median,
                    )
                    .range(q.min, q.max),
                );
            }
        }
        if !rows.is_empty() {
            chart = chart.group(placement_name(pin), rows);
        }
    }
    chart
}

fn placement_name(pin: Pin) -> &'static str {
    match pin {
        Pin::Same => "same CPU (same)",
        Pin::Cross => "two CPUs (cross)",
        Pin::None => "not pinned (none)",
    }
}

#[cfg(test)]
mod tests {
    use super::super::{PerfInfo, PerfRun, cell};
    use super::*;
    use std::collections::BTreeMap;

    /// What `ctxswitch --json` would print for a round trip of `rt` µs.
    fn report(mode: Mode, pin: Pin, rt: f64, last: [usize; 2]) -> ctxswitch::Report {
        ctxswitch::Report {
            mode,
            pin,
            cpus: (pin == Pin::Same).then_some([0, 0]),
            last_cpus: last,
            iterations: 100,
            warmup: 10,
            elapsed_s: rt * 1e-4,
            us_per_round_trip: rt,
            us_per_switch: rt / 2.0,
            pipe_us: 0.5,
            net_us_per_round_trip: rt - 1.0,
            net_us_per_switch: (rt - 1.0) / 2.0,
            switches: ctxswitch::Switches {
                expected: 220,
                voluntary: 220,
                involuntary: 0,
                per_round_trip: 2.0,
                holds: rt < 100.0,
            },
        }
    }

    fn perf(rt: f64) -> PerfRun {
        PerfRun { us_per_round_trip: rt, moved_after_ms: None }
    }

    /// Threads on one CPU with perf beside (ratios 4/5 and 6/5: median 1),
    /// processes unpinned without perf, one round off its switch count.
    fn data() -> Data {
        let same = cell(
            Mode::Threads,
            Pin::Same,
            100,
            Some([0, 0]),
            vec![
                report(Mode::Threads, Pin::Same, 4.0, [0, 0]),
                report(Mode::Threads, Pin::Same, 6.0, [0, 0]),
            ],
            vec![perf(5.0), perf(5.0)],
        );
        let none = cell(
            Mode::Processes,
            Pin::None,
            100,
            None,
            vec![
                report(Mode::Processes, Pin::None, 10.0, [1, 0]),
                report(Mode::Processes, Pin::None, 200.0, [0, 1]),
            ],
            Vec::new(),
        );
        let mut us = BTreeMap::new();
        us.entry("threads".to_string())
            .or_insert_with(BTreeMap::new)
            .insert("same".to_string(), same.us_per_switch);
        Data {
            iterations: 100,
            rounds: 2,
            full: false,
            perf: PerfInfo { used: true, version: None, note: "test".into() },
            us_per_switch: us,
            net_us_per_switch: BTreeMap::new(),
            cells: vec![same, none],
            skipped: vec!["cross: one CPU".into()],
        }
    }

    #[test]
    fn the_cost_table_shows_medians_ranges_and_flags_a_bad_count() {
        let t = cost_table(&data());
        assert_eq!(t.rows.len(), 2);
        let same = &t.rows[0];
        assert_eq!(same[..3], ["threads", "same", "0"]);
        assert_eq!(same[3], "5.00 (4.00-6.00)");
        assert_eq!(same[4], "2.50"); // half the median round trip
        assert_eq!(same[7], "2.000");
        let none = &t.rows[1];
        assert_eq!(none[2], "ended 1-0 0-1");
        assert!(none[7].ends_with(" (!)"), "{none:?}");
        assert!(t.notes.iter().any(|n| n == "Skipped cross: one CPU."));
    }

    #[test]
    fn the_perf_table_pairs_rounds_and_says_within_15_percent() {
        let d = data();
        assert_eq!(d.cells[0].vs_perf, Some(1.0));
        assert_eq!(d.cells[1].vs_perf, None);
        let t = perf_table(&d);
        // Only the cell with perf runs has a row.
        assert_eq!(t.rows.len(), 1);
        assert_eq!(t.rows[0][4..], ["1.00", "yes"]);
    }

    #[test]
    fn the_chart_has_one_group_per_placement_measured() {
        let c = chart(&data());
        let groups: Vec<&str> = c.groups.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(groups, ["same CPU (same)", "not pinned (none)"]);
        let same: Vec<(&str, f64)> =
            c.groups[0].rows.iter().map(|r| (r.label.as_str(), r.value)).collect();
        assert_eq!(
            same,
            [("ctxswitch, threads", 5.0), ("perf bench, threads", 5.0)]
        );
        assert_eq!(c.groups[1].rows[0].range, Some((10.0, 200.0)));
        let h = headline(&data());
        assert!(h.get("threads_same_us").is_some());
    }
}
