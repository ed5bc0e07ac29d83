//! The mq-sweep tables and charts, from the results alone.

use crate::chart::{Chart, Meaning};
use crate::table::Table;

use super::{Data, Row, Run, article};
use crate::stats::Summary;

/// Three tables, each fitting the book's column with one line per row: the
/// throughput and switching the chapter compares with 2006 (each column
/// beside the article's figure), the broker's CPU and the latency, then
/// every broker on the same load, Redis and NATS beside the lab's.
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
    for r in d.rows.iter().filter(|r| is_ours(r)) {
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
         The 2006 figures: the single-CPU server of the 2006 message-queue post (see the \
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
    if d.rows.iter().any(is_ours) {
        vec![t, cost, brokers(d)]
    } else {
        vec![brokers(d)] // --brokers without lab: no pool to tabulate
    }
}

/// A row's median of `value` over its rounds, with the interval of that
/// median, as the headline figures have: `157457 [141514, 168688]`.
fn with_interval(r: &Row, value: &dyn Fn(&Run) -> f64, digits: usize) -> String {
    let rounds: Vec<f64> = r.runs.iter().map(value).collect();
    interval_of(&rounds, digits)
}

/// A row of the lab's own broker (a pool size or the event loop).
pub(super) fn is_ours(r: &Row) -> bool {
    r.mode == "threads" || r.mode == "event-loop"
}

/// Every broker on the same load: the lab's rows, then Redis's and NATS's,
/// each with its CPU per message and its voluntary and involuntary
/// switches per message, from its own counters.
pub(super) fn brokers(d: &Data) -> Table {
    let mut t = Table::new(
        "Every broker on the same load: the lab's, Redis pub/sub and NATS core",
        &[
            "broker",
            "msg/s",
            "p50 ms",
            "p99 ms",
            "CPU us/msg",
            "vol. sw/msg",
            "invol. sw/msg",
        ],
    );
    for r in &d.rows {
        let mark = if r.above_cpus { " *" } else { "" };
        let per_message =
            |n: u64, run: &Run| n as f64 / run.delivered().max(1) as f64;
        t.row(vec![
            format!("{}{mark}", r.label),
            with_interval(r, &|run| run.load.messages_per_s, 0),
            with_interval(r, &|run| run.load.latency.p50_us / 1000.0, 1),
            with_interval(r, &|run| run.load.latency.p99_us / 1000.0, 1),
            with_interval(
                r,
                &|run| 1e6 * run.cpu_s() / run.delivered().max(1) as f64,
                2,
            ),
            with_interval(r, &|run| per_message(run.switches().0, run), 3),
            with_interval(r, &|run| per_message(run.switches().1, run), 3),
        ]);
    }
    let versions: Vec<String> = d
        .rows
        .iter()
        .filter_map(|r| r.server.as_ref())
        .map(|s| format!("{} {}", s.program, s.version))
        .fold(Vec::new(), |mut v, s| {
            if !v.contains(&s) {
                v.push(s);
            }
            v
        });
    t.note(format!(
        "{}, one pass over every broker per round. \
         The same load generator drives all: each sender and receiver a thread \
         with its own connection, one message per write; Redis receivers each \
         subscribe to a channel of their own that the senders of their queue take \
         in turn, NATS receivers form one queue group per queue. Redis and NATS \
         run with persistence off, each started for its point and stopped after \
         it; their CPU time and switches are the kernel's accounting of the whole \
         server (wait4), start-up included.{}{}",
        crate::stats::interval_note(d.rounds as usize),
        if versions.is_empty() { String::new() } else { format!(" Versions: {}.", versions.join(", ")) },
        if d.rows.iter().any(|r| r.above_cpus) {
            " * a thread count (per pool, io-threads, GOMAXPROCS) above the CPUs the \
             run was allowed."
        } else {
            ""
        }
    ));
    for m in &d.missing {
        t.note(format!(
            "{} is not installed here: `{}` adds its rows.",
            m.program, m.install
        ));
    }
    t
}

/// The page on pipelining: for each --pipeline above 1, every broker and
/// pool size with the columns of the sweep (intervals included) and the
/// generator's CPU beside the broker's, each rate as a fraction of the
/// floor; the floor itself; and the open-loop point.
pub(super) fn pipelined(d: &Data) -> Vec<Table> {
    let mut out = Vec::new();
    let mut ns: Vec<u32> = d.pipelined.iter().map(|r| r.pipeline).collect();
    ns.dedup();
    for n in ns {
        let floor = d.floor.iter().find(|f| f.pipeline == n);
        let mut t = Table::new(
            format!(
                "{n} messages per write: {} senders, {} receivers, {} queues, \
                 {}-byte messages, {} s per run",
                d.senders, d.receivers, d.queues, d.size, d.duration_s
            ),
            &[
                "broker",
                "msg/s",
                "of floor",
                "p50 ms",
                "p99 ms",
                "CPU us/msg",
                "load us/msg",
                "sw/msg",
            ],
        );
        let per_message = |run: &Run| {
            let (v, i) = run.switches();
            (v + i) as f64 / run.delivered().max(1) as f64
        };
        for r in d.pipelined.iter().filter(|r| r.pipeline == n) {
            let fraction = floor.map_or("-".to_string(), |f| {
                let rounds: Vec<f64> = r
                    .runs
                    .iter()
                    .zip(&f.runs)
                    .map(|(run, f)| {
                        run.load.messages_per_s / f.floor_messages_per_s.max(1e-9)
                    })
                    .collect();
                interval_of(&rounds, 2)
            });
            t.row(vec![
                format!("{}{}", r.label, if r.above_cpus { " *" } else { "" }),
                with_interval(r, &|run| run.load.messages_per_s, 0),
                fraction,
                with_interval(r, &|run| run.load.latency.p50_us / 1000.0, 1),
                with_interval(r, &|run| run.load.latency.p99_us / 1000.0, 1),
                with_interval(
                    r,
                    &|run| 1e6 * run.cpu_s() / run.delivered().max(1) as f64,
                    2,
                ),
                with_interval(r, &|run| run.load.cpu_us_per_message, 2),
                with_interval(r, &per_message, 3),
            ]);
        }
        if let Some(f) = floor {
            let rounds: Vec<f64> =
                f.runs.iter().map(|f| f.floor_messages_per_s).collect();
            let hop: Vec<f64> =
                f.runs.iter().map(|f| 2.0 * f.hop_cpu_us_per_message).collect();
            t.row(vec![
                "floor: the work alone, no broker".into(),
                interval_of(&rounds, 0),
                "1".into(),
                "-".into(),
                "-".into(),
                interval_of(&hop, 2),
                "-".into(),
                "-".into(),
            ]);
        }
        t.note(format!(
            "{}. Each sender \
             writes {n} messages per write (Redis: {n} PUBLISH commands, replies read \
             as they come; NATS: {n} PUB frames); receivers read 64 KiB at a time. \
             CPU us/msg is the broker's, load us/msg the load generator's own (all \
             its senders and receivers), per message delivered. The floor is the \
             work without a broker: a thread writing {n} messages per write to \
             another over loopback TCP, twice (sender to broker, broker to \
             receiver: the four copies of a message), on the CPUs the run was \
             allowed; its CPU us/msg is those two hops'. `of floor`: msg/s over the \
             floor of the same round.",
            crate::stats::interval_note(d.rounds as usize)
        ));
        let pools = |rows: &[Row], n: u32| -> Vec<u32> {
            rows.iter()
                .filter(|r| r.mode == "threads" && r.pipeline == n)
                .map(|r| r.threads)
                .collect()
        };
        let (here, all) = (pools(&d.pipelined, n), pools(&d.rows, 1));
        if !all.is_empty() && here != all {
            let list = |v: &[u32]| {
                v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
            };
            t.note(format!(
                "At {n} per write only {} threads per pool ran (of {} at one per write): \
                 `lab run all` takes one pipelined point per design to stay within its \
                 time; `lab run mq-sweep` repeats the whole sweep.",
                if here.is_empty() { "no pool size of".to_string() } else { list(&here) },
                list(&all)
            ));
        }
        if let Some(f) = floor {
            let memcpy: Vec<f64> =
                f.runs.iter().map(|f| f.memcpy4_ns_per_message).collect();
            t.note(format!(
                "The four copies alone (memcpy of a message, user space): {} ns per message.",
                interval_of(&memcpy, 0)
            ));
        }
        out.push(t);
    }
    if let Some(open) = &d.open_loop {
        let mut t = Table::new(
            format!(
                "Open loop: {} messages/s offered, {} per write",
                open.rate, open.pipeline
            ),
            &["broker", "msg/s", "p50 ms", "p99 ms", "CPU us/msg"],
        );
        for r in &open.rows {
            t.row(vec![
                r.label.clone(),
                with_interval(r, &|run| run.load.messages_per_s, 0),
                with_interval(r, &|run| run.load.latency.p50_us / 1000.0, 2),
                with_interval(r, &|run| run.load.latency.p99_us / 1000.0, 2),
                with_interval(
                    r,
                    &|run| 1e6 * run.cpu_s() / run.delivered().max(1) as f64,
                    2,
                ),
            ]);
        }
        t.note(format!(
            "The rate: {}. Each sender sends on a fixed schedule and stamps each \
             message with the time it was due, not the time it went out, so a \
             broker that makes senders wait shows it in the latency (no \
             coordinated omission).",
            open.rule
        ));
        out.push(t);
    }
    out
}

/// Every broker's throughput at the open-loop point's pipeline (16 per
/// write, or the largest swept), one bar per row: median, whisker min-max;
/// the floor of the work, measured beside them, in the title.
pub(super) fn pipelined_chart(d: &Data) -> Option<crate::chart::bars::Bars> {
    use crate::chart::bars::{Bars, Row as Bar};
    let n = d.pipelined.iter().map(|r| r.pipeline).max()?;
    let n = if d.pipelined.iter().any(|r| r.pipeline == 16) { 16 } else { n };
    let floor = d.floor.iter().find(|f| f.pipeline == n);
    let title = match floor {
        Some(f) => format!(
            "{n} messages per write (the floor, no broker: {:.0} msg/s)",
            f.floor_messages_per_s.median
        ),
        None => format!("{n} messages per write"),
    };
    let mut chart = Bars::new(
        &title,
        "messages/s: median, whisker min-max of the rounds",
        false,
    );
    let meaning = |r: &Row| match r.mode {
        "threads" => Meaning::Thread,
        "event-loop" => Meaning::EventLoop,
        "redis" => Meaning::Redis,
        _ => Meaning::Nats,
    };
    let rows: Vec<Bar> = d
        .pipelined
        .iter()
        .filter(|r| r.pipeline == n)
        .map(|r| {
            let m = &r.messages_per_s;
            Bar::new(meaning(r), r.label.clone(), m.median).range(m.min, m.max)
        })
        .collect();
    chart = chart.group("", rows);
    Some(chart)
}

/// Median [95% interval] of some rounds (order statistics; the rounds'
/// whole range when they are too few for 95%).
fn interval_of(rounds: &[f64], digits: usize) -> String {
    let Some(crate::stats::Interval { lo, hi, .. }) =
        crate::stats::median_interval(rounds, crate::stats::LEVEL)
    else {
        return "-".into();
    };
    let median = Summary::of_rounds(rounds.iter().copied()).median;
    format!("{median:.digits$} [{lo:.digits$}, {hi:.digits$}]")
}

pub(super) fn charts(d: &Data) -> Vec<(String, Chart)> {
    let threaded: Vec<&Row> =
        d.rows.iter().filter(|r| r.mode == "threads").collect();
    let event = d.rows.iter().find(|r| r.mode == "event-loop");
    if threaded.is_empty() {
        return brokers_chart(d).into_iter().collect();
    }
    let xs: Vec<f64> = threaded.iter().map(|r| f64::from(r.threads)).collect();
    let flat = |s| xs.iter().map(move |&x| (x, s));
    let mut tp = Chart::new(
        "Throughput vs threads per pool",
        "threads/pool",
        "messages/s (median, band: min-max)",
    )
    .summaries(
        Meaning::Thread,
        "thread pools",
        threaded.iter().map(|r| (f64::from(r.threads), &r.messages_per_s)),
    );
    let mut share = Chart::new(
        "CPU share spent switching vs threads per pool",
        "threads/pool",
        "% of broker CPU (median, band: min-max)",
    )
    .summaries(
        Meaning::Thread,
        "thread pools",
        threaded.iter().map(|r| (f64::from(r.threads), &r.switch_share_pct)),
    );
    if let Some(e) = event {
        let label = "event loop (1 thread)";
        tp = tp.summaries(Meaning::EventLoop, label, flat(&e.messages_per_s));
        share =
            share.summaries(Meaning::EventLoop, label, flat(&e.switch_share_pct));
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
        tp = tp.series(Meaning::Article, "2006 article (1 CPU)", a_tp);
    }
    if !a_sh.is_empty() {
        share = share.series(Meaning::Article, "2006 article (1 CPU)", a_sh);
    }
    let mut out = vec![("throughput".into(), tp), ("switch-share".into(), share)];
    out.extend(brokers_chart(d));
    out
}

/// Redis's and NATS's throughput against their threads (io-threads,
/// GOMAXPROCS), with the lab broker's best row as a guide; none without
/// either server.
fn brokers_chart(d: &Data) -> Option<(String, Chart)> {
    let series = |keep: &dyn Fn(&Row) -> bool| {
        d.rows
            .iter()
            .filter(|r| keep(r))
            .map(|r| (f64::from(r.threads), &r.messages_per_s))
            .collect::<Vec<_>>()
    };
    let writes = series(&|r| r.mode == "redis" && r.reads_in_threads != Some(true));
    // Reading in the I/O threads starts from io-threads 1 (no I/O threads),
    // the point both lines share; a line only where some row reads.
    let some_read = d.rows.iter().any(|r| r.reads_in_threads == Some(true));
    let reads = series(&|r| {
        some_read
            && r.mode == "redis"
            && (r.reads_in_threads == Some(true) || r.threads == 1)
    });
    let nats = series(&|r| r.mode == "nats");
    if writes.is_empty() && nats.is_empty() {
        return None;
    }
    let mut chart = Chart::new(
        "Redis and NATS on the same load, by their threads",
        "threads (Redis io-threads, NATS GOMAXPROCS)",
        "messages/s (median, band: min-max)",
    );
    let xs: Vec<u32> =
        d.rows.iter().filter(|r| !is_ours(r)).map(|r| r.threads).collect();
    chart.log_x = xs.iter().any(|&x| x != xs[0]);
    for (kind, label, points) in [
        (Meaning::Redis.form(0), "Redis, I/O threads write only", writes),
        (Meaning::Redis.form(1), "Redis, I/O threads read too", reads),
        (Meaning::Nats.form(0), "NATS", nats),
    ] {
        if !points.is_empty() {
            chart = chart.summaries(kind, label, points);
        }
    }
    let best =
        d.rows.iter().filter(|r| is_ours(r)).max_by(|a, b| {
            a.messages_per_s.median.total_cmp(&b.messages_per_s.median)
        });
    if let Some(b) = best {
        chart = chart.guide(
            b.messages_per_s.median,
            &format!("the lab broker's best: {}", b.label),
        );
    }
    Some(("brokers".into(), chart))
}

#[cfg(test)]
mod tests {
    use super::super::{Offer, Point, Run, SwitchCost, row};

    const ONE: Offer = Offer { pipeline: 1, rate: 0 };
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
        Run { load, broker: Some(broker), server: None, broker_wall_s: elapsed }
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
            missing: Vec::new(),
            pipelined: Vec::new(),
            floor: Vec::new(),
            open_loop: None,
            rows: vec![
                // 1000 msgs in 1 s, 0.5 s CPU, 50000 switches: 20% share.
                row(Point::Pool(10), ONE, vec![run(1000, 1.0, 0.5, 50_000)], cost),
                row(Point::Pool(100), ONE, vec![run(500, 1.0, 0.5, 100_000)], cost),
                row(Point::EventLoop, ONE, vec![run(2000, 1.0, 0.25, 0)], cost),
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
        assert_eq!(t.len(), 3);
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
        d.rows[0] = row(
            Point::Pool(10),
            ONE,
            vec![run(1000, 1.0, 0.5, 0), run(2000, 0.5, 0.5, 0)],
            2.0,
        );
        d.rows[1] = row(
            Point::Pool(100),
            ONE,
            vec![run(500, 1.0, 0.5, 0), run(1000, 0.5, 0.5, 0)],
            2.0,
        );
        let h = super::super::headline(&d);
        assert_eq!(h["ten_over_hundred"]["value"], 2.0);
        assert_eq!(h["event_loop_messages_per_s"]["value"], 2000.0);
        assert_eq!(h["best_pool"]["value"], 10.0);
    }

    #[test]
    fn the_headline_pairs_each_server_setting_and_the_brokers_by_round() {
        use super::super::servers::{Kind, Setting};
        let redis = |threads| {
            Point::Server(Setting { kind: Kind::Redis, threads, reads: false })
        };
        let mut d = data();
        // Two rounds; the event loop (2000, 4000) is the lab's best.
        d.rows[2] = row(
            Point::EventLoop,
            ONE,
            vec![run(2000, 1.0, 0.2, 0), run(4000, 1.0, 0.2, 0)],
            2.0,
        );
        d.rows.push(row(
            redis(1),
            ONE,
            vec![run(1000, 1.0, 0.5, 0), run(2000, 1.0, 0.5, 0)],
            2.0,
        ));
        d.rows.push(row(
            redis(4),
            ONE,
            vec![run(250, 1.0, 0.5, 0), run(1000, 1.0, 0.5, 0)],
            2.0,
        ));
        for r in &mut d.rows {
            while r.runs.len() < 2 {
                r.runs.push(r.runs[0].clone());
            }
        }
        let h = super::super::headline(&d);
        // Per round: 1000/250 = 4 and 2000/1000 = 2; their median is 3.
        assert_eq!(h["redis_one_over_four"]["value"], 3.0);
        assert_eq!(h["redis_one_over_four"]["method"], "paired-ratio");
        // The lab's best over Redis's best: 2000/1000 and 4000/2000.
        assert_eq!(h["ours_over_redis"]["value"], 2.0);
        assert_eq!(
            h["redis_best_messages_per_s"]["rounds"],
            serde_json::json!([1000.0, 2000.0])
        );
        assert!(h.get("nats_one_over_two").is_none(), "no NATS rows, no figure");
        let t = brokers(&d);
        assert_eq!(t.rows.len(), 5);
        assert_eq!(t.rows[3][0], "Redis, io-threads 1 (all in the main thread)");
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
