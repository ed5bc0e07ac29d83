//! The mq-sweep tables and charts, from the results alone.

use crate::chart::Chart;
use crate::table::Table;

use super::{Data, Row, article};

/// Two tables, each fitting the book's column with one line per row: the
/// throughput and switching the chapter compares with 2006 (each column
/// beside the article's figure), then the broker's CPU and the latency.
pub(super) fn tables(d: &Data) -> Vec<Table> {
    let offered = if d.rate == 0 {
        "as fast as the broker takes them".to_string()
    } else {
        format!("offered at {} messages/s", d.rate)
    };
    let title = format!(
        "Threads per pool vs throughput: {} senders, {} receivers, {} queues, \
         {}-byte messages {offered}, {} s per run",
        d.senders, d.receivers, d.queues, d.size, d.duration_s
    );
    let mut t = Table::new(
        title,
        &[
            "threads/pool",
            "msg/s",
            "2006 msg/s",
            "switch share %",
            "2006 switch share",
            "switches/msg",
        ],
    );
    let mut cost = Table::new(
        "The broker's CPU and the messages' latency",
        &["threads/pool", "broker CPU %", "CPU us/msg", "p50 ms", "p99 ms"],
    );
    for r in &d.rows {
        let (msgs, share) =
            if r.mode == "threads" { article(r.threads) } else { ("-", "-") };
        let threads = if r.mode == "threads" {
            r.threads.to_string()
        } else {
            "event loop (1)".into()
        };
        t.row(vec![
            threads.clone(),
            format!(
                "{:.0} ({:.0}-{:.0})",
                r.messages_per_s.median, r.messages_per_s.min, r.messages_per_s.max
            ),
            msgs.into(),
            format!("{:.1}", r.switch_share_pct.median),
            share.into(),
            format!("{:.3}", r.switches_per_message.median),
        ]);
        cost.row(vec![
            threads,
            format!("{:.0}", r.broker_cpu_pct.median),
            format!("{:.2}", r.cpu_us_per_message.median),
            format!("{:.1}", r.p50_ms.median),
            format!("{:.1}", r.p99_ms.median),
        ]);
    }
    t.note(format!(
        "Medians of {} round(s) (msg/s: median (min-max)). Switches are the \
         broker's voluntary+involuntary context switches (getrusage). Switch \
         share = switches x {:.2} us / broker CPU time; the {:.2} us per switch: {}. \
         The 2006 figures: the single-CPU server of article 004 (2006; see the \
         book's References).",
        d.rounds, d.switch_cost.us, d.switch_cost.us, d.switch_cost.source
    ));
    cost.note(
        "Medians of the rounds. Broker CPU % is its user+sys time (whole life, \
         set-up and drain included) over the sending window (first send to last \
         receipt); 100% is one core. CPU us/msg: the broker's CPU time per \
         message delivered. Latency is send to receipt; at saturation (no --rate) \
         it mostly measures the messages waiting in queues and socket buffers.",
    );
    vec![t, cost]
}

pub(super) fn charts(d: &Data) -> Vec<(String, Chart)> {
    let threaded: Vec<&Row> =
        d.rows.iter().filter(|r| r.mode == "threads").collect();
    let event = d.rows.iter().find(|r| r.mode == "event-loop");
    if threaded.is_empty() {
        return Vec::new();
    }
    let xs: Vec<f64> = threaded.iter().map(|r| f64::from(r.threads)).collect();
    let flat = |s| xs.iter().map(move |&x| (x, s));
    let mut tp = Chart::new(
        "Throughput vs threads per pool",
        "threads/pool",
        "messages/s (median, band: min-max)",
    )
    .summaries(
        "thread pools",
        threaded.iter().map(|r| (f64::from(r.threads), &r.messages_per_s)),
    );
    let mut share = Chart::new(
        "CPU share spent switching vs threads per pool",
        "threads/pool",
        "% of broker CPU (median, band: min-max)",
    )
    .summaries(
        "thread pools",
        threaded.iter().map(|r| (f64::from(r.threads), &r.switch_share_pct)),
    );
    if let Some(e) = event {
        tp = tp.summaries("event loop (1 thread)", flat(&e.messages_per_s));
        share = share.summaries("event loop (1 thread)", flat(&e.switch_share_pct));
    }
    let article_pts = |f: fn(u32) -> Option<f64>| {
        threaded
            .iter()
            .filter_map(|r| f(r.threads).map(|y| (f64::from(r.threads), y)))
            .collect::<Vec<_>>()
    };
    let a_tp = article_pts(|t| match t {
        100 => Some(600.0),
        10 => Some(800.0),
        _ => None,
    });
    let a_sh = article_pts(|t| match t {
        100 => Some(30.0),
        10 => Some(10.0),
        _ => None,
    });
    if xs.len() > 1 {
        tp.log_x = true;
        share.log_x = true;
    }
    tp.log_y = true;
    if !a_tp.is_empty() {
        tp = tp.series("2006 article (1 CPU)", a_tp);
    }
    if !a_sh.is_empty() {
        share = share.series("2006 article (1 CPU)", a_sh);
    }
    vec![("throughput".into(), tp), ("switch-share".into(), share)]
}

#[cfg(test)]
mod tests {
    use super::super::{Run, SwitchCost, row};
    use super::*;
    use mq::Stats;
    use mq::load::LoadReport;

    /// One run: `out` messages in `elapsed` s, the broker spending `cpu` s
    /// and switching `switches` times.
    fn run(out: u64, elapsed: f64, cpu: f64, switches: u64) -> Run {
        let mut load = LoadReport {
            sent: out,
            received: out,
            elapsed_s: elapsed,
            messages_per_s: out as f64 / elapsed,
            ..LoadReport::default()
        };
        load.latency.p50_us = 1500.0;
        load.latency.p99_us = 9000.0;
        let broker = Stats {
            mode: "threads".into(),
            readers: 1,
            writers: 1,
            deliverers: 1,
            queues: 1,
            messages_in: out,
            messages_out: out,
            connections: 2,
            closed_bad: 0,
            refused: 0,
            threads_joined: 4,
            user_s: cpu / 2.0,
            sys_s: cpu / 2.0,
            voluntary_switches: switches,
            involuntary_switches: 0,
        };
        Run { load, broker, broker_wall_s: elapsed }
    }

    /// T=10 and T=100 (the article's points) and the event loop; a switch
    /// costs 2 µs.
    fn data() -> Data {
        let cost = 2.0;
        Data {
            rounds: 1,
            full: false,
            duration_s: 1.0,
            senders: 4,
            receivers: 4,
            queues: 2,
            size: 64,
            rate: 0,
            switch_cost: SwitchCost { us: cost, source: "test".into() },
            rows: vec![
                // 1000 msgs in 1 s, 0.5 s CPU, 50000 switches: 20% share.
                row(Some(10), vec![run(1000, 1.0, 0.5, 50_000)], cost),
                row(Some(100), vec![run(500, 1.0, 0.5, 100_000)], cost),
                row(None, vec![run(2000, 1.0, 0.25, 0)], cost),
            ],
        }
    }

    #[test]
    fn rows_derive_share_and_cost_per_message_from_the_runs() {
        let d = data();
        let r = &d.rows[0];
        assert_eq!(r.messages_per_s.median, 1000.0);
        assert_eq!(r.broker_cpu_pct.median, 50.0);
        assert_eq!(r.switches_per_message.median, 50.0);
        assert!((r.switch_share_pct.median - 20.0).abs() < 1e-9);
        assert_eq!(r.cpu_us_per_message.median, 500.0);
        assert_eq!((r.p50_ms.median, r.p99_ms.median), (1.5, 9.0));
        assert!((d.rows[1].switch_share_pct.median - 40.0).abs() < 1e-9);
    }

    #[test]
    fn the_tables_put_each_row_beside_the_articles_figures() {
        let t = tables(&data());
        assert_eq!(t.len(), 2);
        assert_eq!(
            t[0].rows[0],
            ["10", "1000 (1000-1000)", "~800", "20.0", "~10%", "50.000"]
        );
        assert_eq!(t[0].rows[1][2..5], ["~600", "40.0", "~30%"]);
        assert_eq!(t[0].rows[2][..3], ["event loop (1)", "2000 (2000-2000)", "-"]);
        assert!(
            t[0].notes[0].contains("2.00 us per switch: test"),
            "{:?}",
            t[0].notes
        );
        assert_eq!(t[1].rows[0], ["10", "50", "500.00", "1.5", "9.0"]);
    }

    #[test]
    fn the_headline_pairs_rounds_for_ten_over_hundred() {
        let mut d = data();
        // Round 2: both twice as fast; the paired ratio stays 2.
        d.rows[0] =
            row(Some(10), vec![run(1000, 1.0, 0.5, 0), run(2000, 0.5, 0.5, 0)], 2.0);
        d.rows[1] =
            row(Some(100), vec![run(500, 1.0, 0.5, 0), run(1000, 0.5, 0.5, 0)], 2.0);
        let h = super::super::headline(&d);
        assert_eq!(h["ten_over_hundred"]["value"], 2.0);
        assert_eq!(h["event_loop_messages_per_s"]["value"], 2000.0);
        assert_eq!(h["best_pool"]["value"], 10.0);
    }

    #[test]
    fn the_charts_have_the_pools_the_event_loop_and_the_article() {
        let charts = charts(&data());
        let names: Vec<&str> = charts.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["throughput", "switch-share"]);
        let tp = &charts[0].1;
        let labels: Vec<&str> = tp.series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            ["thread pools", "event loop (1 thread)", "2006 article (1 CPU)"]
        );
        assert_eq!(tp.series[0].points, [(10.0, 1000.0), (100.0, 500.0)]);
        assert_eq!(tp.series[1].points, [(10.0, 2000.0), (100.0, 2000.0)]);
        assert_eq!(tp.series[2].points, [(10.0, 800.0), (100.0, 600.0)]);
        let share = &charts[1].1;
        assert_eq!(share.series[2].points, [(10.0, 10.0), (100.0, 30.0)]);
    }
}
