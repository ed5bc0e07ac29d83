//! The ctx-switch figures, tables, headline and chart, from the
//! observations alone.

use crate::chart::Meaning;
use crate::chart::bars::{Bars, Row};
use crate::engine::{Observations, Placement, spread};
use crate::report::Headline;
use crate::table::{Table, col};
use ctxswitch::{Mode, Pin};

use super::{ByPin, Data, Placed, round_trips};

/// One mode in one placement: a row of the tables.
type Cell = (Mode, Placed);
/// A cell where both tools ran, with the median of its rounds' ratios.
type Vs = (Cell, f64);

/// Every mode in every placement measured, in the order measured.
fn cells(d: &Data, obs: Observations) -> Vec<Cell> {
    let every =
        d.modes.iter().flat_map(|&m| d.placements.iter().map(move |&p| (m, p)));
    every.filter(|(m, p)| obs.at(&p.at(*m)).next().is_some()).collect()
}

/// `tool`'s rounds of metric `m` in a cell, in round order.
fn rounds(obs: Observations, c: &Cell, tool: &str, m: &str) -> Vec<f64> {
    obs.rounds(&c.1.at(c.0), tool, m).unwrap_or_default()
}

/// The median of ctxswitch's rounds of metric `m` in a cell.
fn median(obs: Observations, c: &Cell, m: &str) -> f64 {
    obs.median(&c.1.at(c.0), "ctxswitch", m).unwrap_or(f64::NAN)
}

/// `tool`'s round trips in a cell: median (min-max); unpinned, each
/// cluster's range when the rounds fall in several ([`distribution`]).
fn round_trip(obs: Observations, c: &Cell, tool: &str) -> String {
    let r = rounds(obs, c, tool, "us_per_round_trip");
    spread(&r, 2, c.1.placement == Placement::Unpinned)
}

/// What mq-sweep reads: ctxswitch's median raw and net cost of one switch,
/// by mode and pin.
pub(super) fn per_switch(d: &mut Data, obs: Observations) {
    let by_pin = |metric| -> ByPin {
        let mut by = ByPin::new();
        for (mode, p) in cells(d, obs) {
            if let Some(us) = obs.median(&p.at(mode), "ctxswitch", metric) {
                let pins = by.entry(mode.name().into()).or_default();
                pins.insert(p.pin.name().into(), us);
            }
        }
        by
    };
    (d.us_per_switch, d.net_us_per_switch) =
        (by_pin("us_per_switch"), by_pin("net_us_per_switch"));
}

fn cpus_text(obs: Observations, c: &Cell) -> String {
    match c.1.placement.cpus() {
        Some([a, b]) if a == b => a.to_string(),
        Some([a, b]) => format!("{a},{b}"),
        None => {
            let [a, b] =
                ["last_cpu_a", "last_cpu_b"].map(|m| rounds(obs, c, "ctxswitch", m));
            let ends: Vec<String> =
                a.iter().zip(&b).map(|(a, b)| format!("{a}-{b}")).collect();
            format!("ended {}", ends.join(" "))
        }
    }
}

pub(super) fn cost_table(d: &Data, obs: Observations) -> Table {
    let two = |m| move |c: &Cell| format!("{:.2}", median(obs, c, m));
    let title = format!(
        "What one switch costs: ctxswitch, {} round trips per run ({} for cross), {} rounds",
        d.iterations,
        round_trips(d.iterations, Pin::Cross),
        d.rounds
    );
    let mut t = Table::of(
        title,
        &cells(d, obs),
        &[
            col("mode", |c: &Cell| c.0.name().into()),
            col("placement", |c: &Cell| c.1.pin.name().into()),
            col("CPUs", |c: &Cell| cpus_text(obs, c)),
            col("round trip µs", |c: &Cell| round_trip(obs, c, "ctxswitch")),
            col("per switch µs", two("us_per_switch")),
            col("pipe w+r µs", two("pipe_us")),
            col("net per switch µs", two("net_us_per_switch")),
            col("kernel switches / round trip", |c: &Cell| {
                let hold = rounds(obs, c, "ctxswitch", "counts_hold");
                let flag = if hold.iter().all(|h| *h == 1.0) { "" } else { " (!)" };
                format!("{:.3}{flag}", median(obs, c, "switches_per_round_trip"))
            }),
        ],
    );
    t.note(
        "Round trip: median (min-max) of the rounds; unpinned rounds that fall in \
         separate clusters, each cluster's min-max (rounds). Per switch: half the \
         median round trip. Pipe w+r: one task writing a byte and reading it back \
         (no switch); net per switch: (round trip - 2 x pipe w+r) / 2, median. \
         Kernel switches: voluntary + involuntary of both tasks (getrusage per \
         thread, wait4 for the child process) per round trip; the method assumes 2. \
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

pub(super) fn perf_table(d: &Data, obs: Observations) -> Table {
    // The cells where both tools ran, each with its paired ratio.
    let pair = |c: &Cell| d.vs_perf.iter().find(|p| p.setting == c.1.at(c.0));
    let rows: Vec<Vs> = cells(d, obs)
        .into_iter()
        .filter_map(|c| Some((c, pair(&c)?.ratio.median)))
        .collect();
    let t = Table::of(
        "ctxswitch against `perf bench sched pipe`, same mode and placement",
        &rows,
        &[
            col("mode", |(c, _): &Vs| c.0.name().into()),
            col("placement", |(c, _): &Vs| c.1.pin.name().into()),
            col("ctxswitch µs / round trip", |(c, _): &Vs| {
                round_trip(obs, c, "ctxswitch")
            }),
            col("perf µs / round trip", |(c, _): &Vs| round_trip(obs, c, "perf")),
            col("ctxswitch / perf", |(_, r): &Vs| format!("{r:.2}")),
            col("within 15%", |(_, r): &Vs| {
                if (r - 1.0).abs() <= 0.15 { "yes" } else { "no" }.into()
            }),
        ],
    );
    t.noted(format!(
        "{}. {}. Rounds alternate which tool goes first; the ratio is the \
         median of the rounds' ctxswitch/perf pairs. perf times its whole run, \
         including creating the second task and no warm-up; ctxswitch times \
         only the round trips after 1000 warm-up ones.",
        d.perf.version.as_deref().unwrap_or("perf"),
        d.perf.note
    ))
}

/// One switch's cost in each mode and placement measured, raw and net of
/// the pipe calls, each the median of its rounds.
pub(super) fn headline(d: &Data, obs: Observations) -> Headline {
    let mut h = crate::report::headline();
    for (mode, p) in cells(d, obs) {
        let (name, pin, at) = (mode.name(), p.pin.name(), p.at(mode));
        h = h
            .rounds(
                &format!("{name}_{pin}_us"),
                &format!("one switch between {name}, {pin} CPU placement"),
                obs.rounds(&at, "ctxswitch", "us_per_switch"),
                "µs",
            )
            .rounds(
                &format!("{name}_{pin}_net_us"),
                "the same, net of the pipe calls' cost",
                obs.rounds(&at, "ctxswitch", "net_us_per_switch"),
                "µs",
            );
    }
    h.build()
}

/// The three placements as three categories, one bar (median, with the
/// rounds' min-max) per tool and mode: a category is not a point on an
/// axis. A linear axis, so that bar lengths compare. Unpinned rounds that
/// fall in separate clusters get a bar per cluster, since one median would
/// describe none of them.
pub(super) fn chart(d: &Data, obs: Observations) -> Bars {
    let mut chart = Bars::new(
        "Round trip (two switches) by placement",
        "microseconds per round trip: median, whisker min-max of the rounds",
        false,
    );
    for p in &d.placements {
        let mut rows = Vec::new();
        for &mode in &d.modes {
            let meaning = match mode {
                Mode::Threads => Meaning::Thread,
                Mode::Processes => Meaning::Process,
            };
            // perf's measure of the same: the second form.
            for (form, tool, label) in
                [(0, "ctxswitch", "ctxswitch"), (1, "perf", "perf bench")]
            {
                let r = rounds(obs, &(mode, *p), tool, "us_per_round_trip");
                let label = format!("{label}, {}", mode.name());
                let split = p.placement == Placement::Unpinned;
                rows.extend(Row::rounds(meaning.form(form), &label, &r, split));
            }
        }
        let name = match p.pin {
            Pin::Same => "same CPU (same)",
            Pin::Cross => "two CPUs (cross)",
            Pin::None => "not pinned (none)",
        };
        if !rows.is_empty() {
            chart = chart.group(name, rows);
        }
    }
    chart
}

#[cfg(test)]
mod tests {
    use super::super::{PerfInfo, run::PerfRun};
    use super::*;
    use crate::engine::Observation;

    /// What `ctxswitch --json` would print for a round trip of `rt` µs.
    fn report(rt: f64, last: [usize; 2]) -> ctxswitch::Report {
        let holds = rt < 100.0;
        let json = serde_json::json!({
            "mode": "threads", "pin": "same", "cpus": null, "last_cpus": last,
            "iterations": 100, "warmup": 10, "elapsed_s": rt * 1e-4,
            "us_per_round_trip": rt, "us_per_switch": rt / 2.0, "pipe_us": 0.5,
            "net_us_per_round_trip": rt - 1.0, "net_us_per_switch": (rt - 1.0) / 2.0,
            "switches": { "expected": 220, "voluntary": 220, "involuntary": 0,
                          "per_round_trip": 2.0, "holds": holds },
        });
        serde_json::from_value(json).unwrap()
    }

    /// Threads on one CPU with perf beside (ratios 4/5 and 6/5: median 1),
    /// processes unpinned without perf, one round off its switch count, its
    /// round trips `none`.
    fn data(none: &[f64]) -> (Data, Vec<Observation>) {
        let same = Placed { pin: Pin::Same, placement: Placement::OneCpu(0) };
        let unpinned = Placed { pin: Pin::None, placement: Placement::Unpinned };
        let perf = |rt| PerfRun { us_per_round_trip: rt, moved_after_ms: None };
        let threads = same.at(Mode::Threads);
        let runs = [report(4.0, [0, 0]), report(6.0, [0, 0])];
        let mut log = Observation::rounds(&threads, "ctxswitch", &runs);
        log.extend(Observation::rounds(&threads, "perf", &[perf(5.0), perf(5.0)]));
        let ends = [[1, 0], [0, 1], [1, 1], [0, 0]];
        let none: Vec<_> =
            none.iter().zip(ends).map(|(&rt, e)| report(rt, e)).collect();
        let at = unpinned.at(Mode::Processes);
        log.extend(Observation::rounds(&at, "ctxswitch", &none));
        let obs = Observations(&log);
        let mut d = Data {
            iterations: 100,
            rounds: 2,
            perf: PerfInfo { used: true, version: None, note: "test".into() },
            modes: vec![Mode::Threads, Mode::Processes],
            placements: vec![same, unpinned],
            vs_perf: obs.pairs("ctxswitch", "perf", "us_per_round_trip"),
            skipped: vec!["cross: one CPU".into()],
            ..Data::default()
        };
        per_switch(&mut d, obs);
        (d, log)
    }

    #[test]
    fn the_cost_table_shows_medians_ranges_and_flags_a_bad_count() {
        let (d, log) = data(&[10.0, 200.0]);
        let t = cost_table(&d, Observations(&log));
        // Threads unpinned and processes on one CPU were not measured.
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
        // The figures mq-sweep reads.
        assert_eq!(d.per_switch(Mode::Threads, Pin::Same), Some((2.5, 2.0)));
        assert_eq!(d.per_switch(Mode::Processes, Pin::None), Some((52.5, 52.0)));
    }

    #[test]
    fn the_perf_table_pairs_rounds_and_says_within_15_percent() {
        let (d, log) = data(&[10.0, 200.0]);
        // Only the cell with perf runs has a pair, and a row.
        assert_eq!(d.vs_perf.len(), 1);
        assert_eq!(d.vs_perf[0].ratio.median, 1.0);
        let t = perf_table(&d, Observations(&log));
        assert_eq!(t.rows.len(), 1);
        assert_eq!(t.rows[0][4..], ["1.00", "yes"]);
    }

    #[test]
    fn the_chart_has_one_group_per_placement_measured() {
        let (d, log) = data(&[10.0, 200.0]);
        let c = chart(&d, Observations(&log));
        let groups: Vec<&str> = c.groups.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(groups, ["same CPU (same)", "not pinned (none)"]);
        let same: Vec<(&str, f64)> =
            c.groups[0].rows.iter().map(|r| (r.label.as_str(), r.value)).collect();
        assert_eq!(
            same,
            [("ctxswitch, threads", 5.0), ("perf bench, threads", 5.0)]
        );
        assert_eq!(c.groups[1].rows[0].range, Some((10.0, 200.0)));
        let h = headline(&d, Observations(&log));
        assert!(h.get("threads_same_us").is_some());
        let net = &h["processes_none_net_us"]["rounds"];
        assert_eq!(net, &serde_json::json!([4.5, 99.5]));
    }

    #[test]
    fn unpinned_rounds_in_two_clusters_are_shown_as_a_distribution() {
        let (d, log) = data(&[10.0, 200.0, 11.0, 210.0]);
        let t = cost_table(&d, Observations(&log));
        assert_eq!(t.rows[1][3], "10.00-11.00 (2) | 200.00-210.00 (2)");
        // One placement pinned: its median and range, as ever.
        assert_eq!(t.rows[0][3], "5.00 (4.00-6.00)");
        let c = chart(&d, Observations(&log));
        let labels: Vec<&str> =
            c.groups[1].rows.iter().map(|r| r.label.as_str()).collect();
        let each = |i| format!("ctxswitch, processes (cluster {i}: 2 rounds)");
        assert_eq!(labels, [each(1), each(2)]);
    }
}
