//! `lab run mq-sweep`: the message-queue thread-count sweep (article 004).
//! For each pool size T, `broker --readers T --writers T --deliverers T`
//! and `load` (100 senders, 100 receivers, 4 queues, 1 KiB messages) run
//! as separate processes on loopback; then one row for the broker as a
//! single epoll thread. Each row: messages/s, the broker's CPU, its context
//! switches per message and the estimated share of its CPU time spent
//! switching (switches x the cost of one switch / CPU time), and latency.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::chart::Chart;
use crate::results::Header;
use crate::stats::Summary;
use crate::table::Table;
use clap::Parser;
use labkit::{Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Experiment;
use crate::report::{Common, Headline, Report};

pub const EXPERIMENT: Experiment = Experiment {
    name: "mq-sweep",
    about: "message-queue broker: throughput and switching vs threads per pool (article 004)",
    all_args: &["--rounds", "3"],
    run: main,
};

/// The message-queue sweep: threads per pool against messages/s and the
/// CPU spent switching, plus one single-threaded event-loop row.
#[derive(Parser)]
struct Args {
    #[command(flatten)]
    common: Common,

    /// Threads per pool (readers = writers = deliverers) to try
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,10,20,50,100",
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    threads: Vec<u32>,

    /// Seconds of sending per run [default: 1; 5 with --full]
    #[arg(long, value_name = "SECONDS", value_parser = seconds)]
    duration: Option<f64>,

    /// Sender threads (connections) of the load generator
    #[arg(long, default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    senders: u32,

    /// Receiver threads (connections) of the load generator
    #[arg(long, default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    receivers: u32,

    /// Queues
    #[arg(long, default_value_t = 4,
          value_parser = clap::value_parser!(u16).range(1..=1000))]
    queues: u16,

    /// Bytes of data per message
    #[arg(long, default_value_t = 1024,
          value_parser = clap::value_parser!(u32).range(20..=(1 << 20) - 3))]
    size: u32,

    /// Messages/s the load generator offers, all senders together; 0 sends
    /// as fast as the broker takes them (saturation, as the article did)
    #[arg(long, value_name = "MSGS_PER_S", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=100_000_000))]
    rate: u32,

    /// Leave out the event-loop row
    #[arg(long)]
    no_event_loop: bool,

    /// Cost of one context switch in microseconds, instead of taking it
    /// from this run's or the reference run's ctx-switch results, or
    /// measuring it here
    #[arg(long, value_name = "US", value_parser = seconds)]
    switch_cost_us: Option<f64>,
}

fn seconds(text: &str) -> std::result::Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s <= 3600.0 => Ok(s),
        _ => Err(format!("'{text}' is not a positive number up to 3600")),
    }
}

/// The fields of `load --json` used here.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct LoadReport {
    sent: u64,
    received: u64,
    lost: u64,
    duplicated: u64,
    corrupt: u64,
    elapsed_s: f64,
    messages_per_s: f64,
    latency: Latency,
    user_s: f64,
    sys_s: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Latency {
    p50_us: f64,
    p90_us: f64,
    p99_us: f64,
    max_us: f64,
}

/// The fields of the broker's final `--json` stats line used here.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct BrokerStats {
    messages_in: u64,
    messages_out: u64,
    threads_joined: usize,
    user_s: f64,
    sys_s: f64,
    voluntary_switches: u64,
    involuntary_switches: u64,
}

#[derive(Clone, Debug, Serialize)]
struct Run {
    load: LoadReport,
    broker: BrokerStats,
    /// From the broker's start to its exit.
    broker_wall_s: f64,
}

#[derive(Serialize)]
struct Row {
    /// "threads" or "event-loop".
    mode: &'static str,
    /// Threads per pool (0 for the event loop).
    threads: u32,
    messages_per_s: Summary,
    /// Broker CPU time / the sending window (first send to last receipt),
    /// in percent (200% = both of 2 cores).
    broker_cpu_pct: Summary,
    switches_per_message: Summary,
    /// Switches x cost per switch / broker CPU time, in percent.
    switch_share_pct: Summary,
    /// Broker CPU time per message delivered, microseconds.
    cpu_us_per_message: Summary,
    p50_ms: Summary,
    p99_ms: Summary,
    runs: Vec<Run>,
}

#[derive(Clone, Debug, Serialize)]
struct SwitchCost {
    us: f64,
    /// Where the figure came from.
    source: String,
}

#[derive(Serialize)]
struct Data {
    rounds: u32,
    full: bool,
    duration_s: f64,
    senders: u32,
    receivers: u32,
    queues: u16,
    size: u32,
    /// Offered messages/s (0: saturation).
    rate: u32,
    switch_cost: SwitchCost,
    rows: Vec<Row>,
}

fn main(argv: Vec<OsString>) -> Result<()> {
    let args = labkit::cli::parse_from::<Args, _, _>(argv);
    if args.receivers < u32::from(args.queues) {
        return Err(Error::usage("--receivers must be at least --queues"));
    }
    let out = args.common.start(EXPERIMENT.name)?;
    let bins = programs()?;
    let duration = args.duration.unwrap_or(if args.common.full { 5.0 } else { 1.0 });
    let switch_cost = match args.switch_cost_us {
        Some(us) => SwitchCost { us, source: "given with --switch-cost-us".into() },
        None => from_ctx_switch().unwrap_or_else(measure_switch),
    };
    let mut points: Vec<Option<u32>> =
        args.threads.iter().map(|&t| Some(t)).collect();
    if !args.no_event_loop {
        points.push(None);
    }
    let rounds = args.common.rounds as usize;
    let bar = crate::progress::bar((points.len() * rounds) as u64, EXPERIMENT.name);
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); points.len()];
    for _ in 0..rounds {
        // One pass over every point per round, so drift on a shared machine
        // spreads over all of them instead of favouring the first.
        for (i, p) in points.iter().enumerate() {
            bar.set_message(p.map_or("event loop".into(), |t| format!("T={t}")));
            runs[i].push(run_once(&bins[0], &bins[1], *p, &args, duration)?);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let rows = points
        .iter()
        .zip(runs)
        .map(|(p, runs)| row(*p, runs, switch_cost.us))
        .collect();
    let data = Data {
        rounds: args.common.rounds,
        full: args.common.full,
        duration_s: duration,
        senders: args.senders,
        receivers: args.receivers,
        queues: args.queues,
        size: args.size,
        rate: args.rate,
        switch_cost,
        rows,
    };
    let report = Report {
        header: Header::new(EXPERIMENT.name),
        headline: headline(&data),
        tables: tables(&data),
        charts: charts(&data),
        files: Vec::new(),
        data,
    };
    report.publish(&args.common, &out)
}

/// `broker` and `load`, the two binaries of the package `mq`.
fn programs() -> Result<Vec<PathBuf>> {
    crate::bins::package_programs("mq", &["broker", "load"])
}

/// The broker process; killed and reaped if a run fails half-way.
// ANCHOR: run_once
/// One run: start the broker, run the load generator against it, stop the
/// broker with SIGTERM and read its final stats (CPU time, switches).
fn run_once(
    broker: &Path,
    load: &Path,
    threads: Option<u32>,
    a: &Args,
    duration: f64,
) -> Result<Run> {
    let mut cmd = Command::new(broker);
    match threads {
        Some(t) => {
            let t = t.to_string();
            cmd.args(["--readers", &t, "--writers", &t, "--deliverers", &t]);
        }
        None => {
            cmd.arg("--event-loop");
        }
    }
    cmd.args(["--queues", &a.queues.to_string(), "--json"]);
    let what =
        threads.map_or("broker --event-loop".into(), |t| format!("broker T={t}"));
    let start = Instant::now();
    let broker = crate::service::Service::start(&mut cmd, &what)?;
    let addr = broker.addr.clone();
    let mut load_cmd = Command::new(load);
    load_cmd
        .args(["--addr", addr.trim(), "--json"])
        .args(["--senders", &a.senders.to_string()])
        .args(["--receivers", &a.receivers.to_string()])
        .args(["--queues", &a.queues.to_string(), "--size", &a.size.to_string()])
        .args(["--duration", &duration.to_string()])
        .args(["--rate", &a.rate.to_string()]);
    let output = labkit::cleanup::output(&mut load_cmd)
        .map_err(|e| Error::io("cannot run load", e))?;
    let said = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(Error::failed(format!(
            "load against {what}: {} {}",
            output.status,
            said.lines().last().unwrap_or("")
        )));
    }
    let load: LoadReport = serde_json::from_slice(&output.stdout)
        .map_err(|e| Error::failed(format!("load printed bad JSON: {e}")))?;
    // SIGTERM: the broker delivers what it holds, joins its threads and
    // prints its stats.
    let last = broker.stop()?;
    let wall = start.elapsed().as_secs_f64();
    let stats: BrokerStats = serde_json::from_str(&last)
        .ok()
        .ok_or_else(|| Error::failed(format!("{what} printed no stats line")))?;
    if stats.messages_out != load.received || stats.messages_in != load.sent {
        return Err(Error::failed(format!(
            "{what}: broker says {} in, {} out; load says {} sent, {} received",
            stats.messages_in, stats.messages_out, load.sent, load.received
        )));
    }
    Ok(Run { load, broker: stats, broker_wall_s: wall })
}
// ANCHOR_END: run_once

fn row(threads: Option<u32>, runs: Vec<Run>, cost_us: f64) -> Row {
    let of = |f: &dyn Fn(&Run) -> f64| {
        let v: Vec<f64> = runs.iter().map(f).collect();
        Summary::of(&v).expect("at least one round")
    };
    let cpu = |r: &Run| r.broker.user_s + r.broker.sys_s;
    let switches = |r: &Run| {
        (r.broker.voluntary_switches + r.broker.involuntary_switches) as f64
    };
    Row {
        mode: if threads.is_some() { "threads" } else { "event-loop" },
        threads: threads.unwrap_or(0),
        messages_per_s: of(&|r| r.load.messages_per_s),
        broker_cpu_pct: of(&|r| 100.0 * cpu(r) / r.load.elapsed_s.max(1e-9)),
        switches_per_message: of(&|r| {
            switches(r) / r.broker.messages_out.max(1) as f64
        }),
        switch_share_pct: of(&|r| {
            100.0 * switches(r) * cost_us * 1e-6 / cpu(r).max(1e-9)
        }),
        cpu_us_per_message: of(&|r| {
            1e6 * cpu(r) / r.broker.messages_out.max(1) as f64
        }),
        p50_ms: of(&|r| r.load.latency.p50_us / 1000.0),
        p99_ms: of(&|r| r.load.latency.p99_us / 1000.0),
        runs,
    }
}

// ANCHOR: article
/// The article's figures (one CPU, JTangMQ in Java, 2006).
fn article(threads: u32) -> (&'static str, &'static str) {
    match threads {
        100 => ("~600", "~30%"),
        10 => ("~800", "~10%"),
        4 | 20 | 50 => ("< 800", "-"),
        _ => ("-", "-"),
    }
}
// ANCHOR_END: article

/// The figures the claims are judged on: throughput and switching share at
/// 10 and 100 threads per pool, the best pool size, the event loop.
fn headline(data: &Data) -> Headline {
    let pool = |n| data.rows.iter().find(|r| r.mode == "threads" && r.threads == n);
    let rate = |n| pool(n).map(|r| r.messages_per_s.median);
    let share = |n| pool(n).map(|r| r.switch_share_pct.median);
    let best =
        data.rows.iter().filter(|r| r.mode == "threads").max_by(|a, b| {
            a.messages_per_s.median.total_cmp(&b.messages_per_s.median)
        });
    let event = data.rows.iter().find(|r| r.mode == "event-loop");
    crate::report::headline()
        .add("messages_per_s_10", "10 threads per pool", rate(10), "msg/s")
        .add("messages_per_s_100", "100 threads per pool", rate(100), "msg/s")
        .add(
            "ten_over_hundred",
            "throughput at 10 threads per pool over 100",
            rate(10).zip(rate(100)).map(|(a, b)| a / b),
            "x",
        )
        .add(
            "switch_share_10",
            "switching's share of broker CPU, 10 threads",
            share(10),
            "%",
        )
        .add(
            "switch_share_100",
            "switching's share of broker CPU, 100 threads",
            share(100),
            "%",
        )
        .add(
            "best_pool",
            "threads per pool at the best throughput",
            best.map(|r| f64::from(r.threads)),
            "",
        )
        .add(
            "best_pool_messages_per_s",
            "throughput at the best pool size",
            best.map(|r| r.messages_per_s.median),
            "msg/s",
        )
        .add(
            "event_loop_messages_per_s",
            "the epoll event loop",
            event.map(|r| r.messages_per_s.median),
            "msg/s",
        )
        .build()
}

/// Two tables, each fitting the book's column with one line per row: the
/// throughput and switching the chapter compares with 2006 (each column
/// beside the article's figure), then the broker's CPU and the latency.
fn tables(d: &Data) -> Vec<Table> {
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

fn charts(d: &Data) -> Vec<(String, Chart)> {
    let threaded: Vec<&Row> =
        d.rows.iter().filter(|r| r.mode == "threads").collect();
    let event = d.rows.iter().find(|r| r.mode == "event-loop");
    if threaded.is_empty() {
        return Vec::new();
    }
    let xs: Vec<f64> = threaded.iter().map(|r| f64::from(r.threads)).collect();
    let flat = |v: f64| xs.iter().map(|&x| (x, v)).collect::<Vec<_>>();
    let mut tp = Chart::new(
        "Throughput vs threads per pool",
        "threads/pool",
        "messages/s (median)",
    )
    .series(
        "thread pools",
        threaded
            .iter()
            .map(|r| (f64::from(r.threads), r.messages_per_s.median))
            .collect(),
    );
    let mut share = Chart::new(
        "CPU share spent switching vs threads per pool",
        "threads/pool",
        "% of broker CPU (median)",
    )
    .series(
        "thread pools",
        threaded
            .iter()
            .map(|r| (f64::from(r.threads), r.switch_share_pct.median))
            .collect(),
    );
    if let Some(e) = event {
        tp = tp.series("event loop (1 thread)", flat(e.messages_per_s.median));
        share =
            share.series("event loop (1 thread)", flat(e.switch_share_pct.median));
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

/// Microseconds per switch from the ctx-switch experiment's results, if
/// they are there: threads pinned to one CPU (there the time per switch is
/// CPU time; unpinned figures include waiting for the other CPU to wake),
/// with the pipe calls' own cost subtracted when that is positive.
fn from_ctx_switch() -> Option<SwitchCost> {
    let path = crate::runs::earlier_result("ctx-switch")?;
    parse_ctx_switch(&std::fs::read_to_string(path).ok()?)
}

/// Find the cells (objects with a `mode`) anywhere in the ctx-switch
/// results and take the best match; `None` for anything unexpected.
fn parse_ctx_switch(text: &str) -> Option<SwitchCost> {
    let json: Value = serde_json::from_str(text).ok()?;
    let mut cells = Vec::new();
    collect(&json, &mut cells);
    let score = |c: &&Value| {
        let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("");
        let place = if !s("pin").is_empty() { s("pin") } else { s("placement") };
        match place {
            "same" => 2,
            "none" | "unpinned" => 1,
            _ => 0,
        }
    };
    let best = cells
        .iter()
        .filter(|c| c.get("mode").and_then(Value::as_str) == Some("threads"))
        .max_by_key(|c| score(c))?;
    let num = |k: &str| {
        best.get(k).and_then(Value::as_f64).filter(|v| v.is_finite() && *v > 0.0)
    };
    let (key, us) = match (num("net_us_per_switch"), num("us_per_switch")) {
        (Some(v), _) => ("net_us_per_switch", v),
        (None, Some(v)) => ("us_per_switch", v),
        _ => return None,
    };
    let pin = best
        .get("pin")
        .or_else(|| best.get("placement"))
        .and_then(Value::as_str)
        .unwrap_or("?");
    Some(SwitchCost {
        us,
        source: format!("from the ctx-switch results (threads, pin {pin}, {key})"),
    })
}

fn collect<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
    match v {
        Value::Object(map) => {
            if map.contains_key("mode") {
                out.push(v);
            }
            map.values().for_each(|x| collect(x, out));
        }
        Value::Array(items) => items.iter().for_each(|x| collect(x, out)),
        _ => {}
    }
}

// ANCHOR: measure_switch
/// No ctx-switch results: two threads pinned to one CPU bounce a byte over
/// a pair of Unix sockets. Each round trip makes each thread block once,
/// two switches; one thread's own write + read is timed alone and
/// subtracted (lmbench's way). On one CPU the CPU is busy the whole time, so
/// the time per switch is also CPU time per switch.
fn measure_switch() -> SwitchCost {
    let measured = std::thread::spawn(|| {
        // Pin this thread (the echo thread it starts inherits the mask),
        // never the runner's main thread, whose mask the programs inherit.
        let me = nix::unistd::Pid::from_raw(0);
        let pinned = nix::sched::sched_getaffinity(me).ok().and_then(|all| {
            let cpu = (0..nix::sched::CpuSet::count())
                .find(|&c| all.is_set(c) == Ok(true))?;
            let mut one = nix::sched::CpuSet::new();
            one.set(cpu).ok()?;
            nix::sched::sched_setaffinity(me, &one).ok().map(|()| cpu)
        });
        ping_pong().map(|(round_trip, solo)| (round_trip, solo, pinned))
    })
    .join();
    let Ok(Ok((round_trip, solo, pinned))) = measured else {
        return SwitchCost {
            us: 0.0,
            source: "not measured: the ping-pong failed".into(),
        };
    };
    let net = (round_trip - 2.0 * solo) / 2.0;
    let (us, how) = if net > 0.0 {
        (net * 1e6, "minus the one-thread write+read")
    } else {
        (round_trip / 2.0 * 1e6, "raw, half a round trip")
    };
    let place = pinned.map_or("unpinned (pinning failed)".to_string(), |c| {
        format!("both pinned to CPU {c}")
    });
    SwitchCost {
        us,
        source: format!(
            "measured here: two threads bouncing a byte over socketpairs, {place}, \
             {PING_PONGS} round trips, {how} (no ctx-switch results found)"
        ),
    }
}

const PING_PONGS: u32 = 20_000;

/// Seconds per round trip between two threads, and per write+read of one
/// thread alone.
fn ping_pong() -> std::io::Result<(f64, f64)> {
    use std::io::Write;
    use std::os::unix::net::UnixStream;
    let ((mut a_tx, mut b_rx), (mut b_tx, mut a_rx)) =
        (UnixStream::pair()?, UnixStream::pair()?);
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let mut byte = [0u8];
        for _ in 0..PING_PONGS {
            b_rx.read_exact(&mut byte)?;
            b_tx.write_all(&byte)?;
        }
        Ok(())
    });
    let mut byte = [0u8];
    let t = Instant::now();
    for _ in 0..PING_PONGS {
        a_tx.write_all(&byte)?;
        a_rx.read_exact(&mut byte)?;
    }
    let round_trip = t.elapsed().as_secs_f64() / f64::from(PING_PONGS);
    echo.join().map_err(|_| std::io::Error::other("echo thread panicked"))??;
    let (mut x, mut y) = UnixStream::pair()?;
    let t = Instant::now();
    for _ in 0..PING_PONGS {
        x.write_all(&byte)?;
        y.read_exact(&mut byte)?;
    }
    Ok((round_trip, t.elapsed().as_secs_f64() / f64::from(PING_PONGS)))
}
// ANCHOR_END: measure_switch

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switch_cost_prefers_threads_on_one_cpu_net_of_the_pipe() {
        let text = r#"{"experiment": "ctx-switch", "cells": [
            {"mode": "processes", "pin": "same", "net_us_per_switch": 9.0},
            {"mode": "threads", "pin": "none", "net_us_per_switch": 2.5,
             "us_per_switch": 3.0},
            {"mode": "threads", "pin": "same", "net_us_per_switch": 1.5,
             "us_per_switch": 2.0},
            {"mode": "threads", "pin": "cross", "net_us_per_switch": 90.0}]}"#;
        let cost = parse_ctx_switch(text).unwrap();
        assert_eq!(cost.us, 1.5);
        assert!(
            cost.source.contains("pin same, net_us_per_switch"),
            "{}",
            cost.source
        );
    }

    #[test]
    fn switch_cost_falls_back_and_refuses_nonsense() {
        // A net figure that came out negative: the raw one is used.
        let text = r#"[{"mode": "threads", "placement": "none",
                        "net_us_per_switch": -0.2, "us_per_switch": 1.75}]"#;
        let cost = parse_ctx_switch(text).unwrap();
        assert_eq!(cost.us, 1.75);
        assert!(cost.source.contains("pin none, us_per_switch"), "{}", cost.source);
        for bad in [
            "",
            "{",
            "[]",
            r#"{"mode": "threads"}"#,
            r#"{"mode": "threads", "us_per_switch": "fast"}"#,
            r#"{"mode": "processes", "us_per_switch": 3.0}"#,
        ] {
            assert!(parse_ctx_switch(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn the_fallback_measures_a_positive_cost_and_says_how() {
        let cost = measure_switch();
        assert!(cost.us > 0.0 && cost.us.is_finite(), "{cost:?}");
        assert!(cost.source.starts_with("measured here"), "{}", cost.source);
        assert!(cost.source.contains("pinned to CPU"), "{}", cost.source);
    }
}
