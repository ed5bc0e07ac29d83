//! `lab run server-designs`: Stevens' chapter 30 table re-run (UNP vol. 1,
//! 3rd ed.; the table article 000 leans on). Every design of the `servers`
//! crate serves the same closed-loop load from `client` (CHILDREN
//! concurrent clients x LOOPS connections, BYTES per reply) on loopback;
//! the server's own CPU (itself plus its reaped children, as
//! `pr_cpu_time.c` prints it on SIGINT) minus the iterative server's CPU for
//! the same number of connections from one client is Stevens' "process
//! control CPU time". Each row also has connections/s and latency from the
//! client, the pool's meter and, where they can be counted, wake-ups per
//! connection.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use crate::chart::Chart;
use crate::results::Header;
use crate::stats::{Summary, round_order};
use crate::table::Table;
use crate::table::or_dash;
use clap::Parser;
use labkit::{Error, Result};
use serde::Serialize;

use super::Experiment;
use crate::report::{Common, Headline, Report};
use crate::service::Service;

pub const EXPERIMENT: Experiment = Experiment {
    name: "server-designs",
    about: concat!(
        "Stevens' server designs and today's: CPU per connection above an ",
        "iterative baseline (article 000, UNP ch. 30)"
    ),
    all_args: &["--quick"],
    run: main,
};

/// Every design, in Stevens' row order, then today's; the first is the
/// baseline. `epoll-herd` is the runner's own: `server --design
/// epoll-exclusive --herd`.
pub const DESIGNS: &[&str] = &[
    "iterative",
    "fork",
    "prefork",
    "prefork-select",
    "prefork-flock",
    "prefork-mutex",
    "prefork-pass",
    "thread",
    "prethread-mutex",
    "prethread-handoff",
    "prethread-nolock",
    "epoll",
    "epoll-exclusive",
    "epoll-herd",
    "reuseport",
    "tokio",
    "io-uring",
];

/// The designs whose pool is a set of event loops or runtime workers: one
/// per CPU is what they are built for, so they get `--modern-pool`.
/// (epoll-exclusive and epoll-herd keep Stevens' pool: their point is how
/// many of 15 waiting loops wake per connection.)
const MODERN_POOLED: &[&str] = &["reuseport", "tokio"];

/// Server designs under one load: CPU above the iterative baseline,
/// connections/s, latency, the pool's meter and wake-ups.
#[derive(Parser)]
struct Args {
    #[command(flatten)]
    common: Common,

    /// Designs to run besides the iterative baseline, which always runs
    /// [default: all]
    #[arg(long, value_delimiter = ',', value_parser = design)]
    designs: Vec<String>,

    /// Concurrent clients (the book's client ran 5 per host)
    #[arg(long, default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    children: u32,

    /// Connections per client [default: 1000, so 5 clients make the book's
    /// 5000; 200 with --quick; capped so one run uses at most a quarter of
    /// the ephemeral ports]
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    loops: Option<u64>,

    /// Bytes per reply (the book's 4000)
    #[arg(long, default_value_t = 4000,
          value_parser = clap::value_parser!(u64).range(1..=16384))]
    bytes: u64,

    /// Pool members of Stevens' pooled designs (the book's 15)
    #[arg(long, default_value_t = 15,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pool: u32,

    /// Event loops or runtime workers of reuseport and tokio [default: the
    /// CPUs this process may run on]
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    modern_pool: Option<u32>,

    /// Every server reads requests one byte per read(2), as Stevens'
    /// threaded servers did
    #[arg(long)]
    byte_reads: bool,

    /// A light run for `lab run all`: 200 loops per client and one round
    /// (overrides --rounds; --loops still applies)
    #[arg(long)]
    quick: bool,
}

fn design(text: &str) -> std::result::Result<String, String> {
    if DESIGNS.contains(&text) {
        Ok(text.to_string())
    } else {
        Err(format!("'{text}' is not a design; designs: {}", DESIGNS.join(", ")))
    }
}

#[derive(Clone, Debug, Serialize)]
struct Run {
    /// What `server --json` printed when it stopped.
    server: servers::Stats,
    /// What `client --json` printed.
    client: servers::client::Report,
    /// From the server's start to its exit.
    server_wall_s: f64,
}

/// How one server run is set up.
#[derive(Clone, Debug)]
struct Load {
    children: u64,
    loops: u64,
    bytes: u64,
    rate: Option<f64>,
}

#[derive(Serialize)]
struct Row {
    design: String,
    /// unpv13e's name for it (serv00 ... serv09), if it is Stevens'.
    stevens: Option<&'static str>,
    pool: usize,
    /// Server CPU, user + sys, itself and its reaped children, seconds.
    cpu_s: Summary,
    /// `cpu_s` minus the same round's baseline (Stevens' measure).
    cpu_s_above_baseline: Summary,
    cpu_us_per_connection_above_baseline: Summary,
    connections_per_s: Summary,
    p50_ms: Summary,
    p99_ms: Summary,
    /// Listener wake-ups that returned to the program (select or
    /// epoll_wait), per connection.
    wakeups_per_connection: Option<Summary>,
    /// The server's context switches (voluntary + involuntary, itself,
    /// its threads and reaped children) per connection: wake-ups the
    /// kernel counts, including those a herd causes inside select or
    /// epoll_wait, which never return to the program.
    switches_per_connection: Summary,
    /// Connections per pool member in the first round (Stevens' meter).
    per_member_first_round: Vec<u64>,
    runs: Vec<Run>,
}

#[derive(Serialize)]
struct Skipped {
    design: String,
    reason: String,
}

#[derive(Serialize)]
struct Ports {
    low: u32,
    high: u32,
    count: u32,
    /// net.ipv4.tcp_tw_reuse (2: reuse TIME_WAIT ports for loopback).
    tw_reuse: Option<u32>,
}

#[derive(Serialize)]
struct RatePoint {
    design: String,
    offered_per_s: f64,
    achieved_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
}

/// One design's figures for the verdict (medians over the rounds).
#[derive(Serialize)]
struct VerdictDesign {
    cpu_s_above_baseline: f64,
    cpu_us_per_connection_above_baseline: f64,
    connections_per_s: f64,
    p99_ms: f64,
    switches_per_connection: f64,
}

#[derive(Serialize)]
struct Best {
    design: String,
    value: f64,
}

/// What the claims need. Article 000: "prefork and thread pools bring no
/// real advantage" at hundreds to thousands of connections. Stevens'
/// summary: pools cut the process-control CPU "by a factor of 10 or more".
#[derive(Serialize)]
struct Verdict {
    /// Median CPU seconds of the iterative baseline.
    baseline_cpu_s: f64,
    /// Spread of the baseline over the rounds (max - min), seconds: a CPU
    /// figure above baseline smaller than this is within the noise.
    baseline_noise_cpu_s: f64,
    connections_per_run: u64,
    /// By design name (`/verdict/designs/fork/...`).
    designs: std::collections::BTreeMap<String, VerdictDesign>,
    /// The prefork design with the least CPU above baseline.
    best_prefork: Option<Best>,
    /// The prethreaded design with the least CPU above baseline.
    best_prethread: Option<Best>,
    /// fork's CPU above baseline / best prefork's; `None` when either is
    /// missing or the denominator is not above 0.
    fork_over_best_prefork: Option<f64>,
    /// thread's CPU above baseline / best prethreaded's; `None` likewise.
    thread_over_best_prethread: Option<f64>,
    /// The same ratios of total CPU (baseline not subtracted): less
    /// sensitive to noise when the pools sit near the baseline.
    fork_over_best_prefork_total_cpu: Option<f64>,
    thread_over_best_prethread_total_cpu: Option<f64>,
    /// Stevens' factor.
    stevens_factor: f64,
    /// The article's Solaris figures: 504.2 / 21.5.
    article_fork_over_prefork: f64,
    best_classic_connections_per_s: Option<Best>,
    best_modern_connections_per_s: Option<Best>,
}

#[derive(Serialize)]
struct Data {
    rounds: u32,
    full: bool,
    quick: bool,
    children: u32,
    loops: u64,
    bytes: u64,
    pool: u32,
    modern_pool: u32,
    byte_reads: bool,
    connections_per_run: u64,
    ports: Ports,
    /// The iterative server, one client making every connection in turn.
    baseline: Row,
    rows: Vec<Row>,
    skipped: Vec<Skipped>,
    /// --full: more concurrent clients than pool members.
    overload: Vec<Row>,
    overload_children: u64,
    /// --full: open-loop latency against offered rate.
    rate_sweep: Vec<RatePoint>,
    verdict: Verdict,
}

fn main(argv: Vec<OsString>) -> Result<()> {
    let args = labkit::cli::parse_from::<Args, _, _>(argv);
    let out = args.common.start(EXPERIMENT.name)?;
    let bins = crate::bins::package_programs("servers", &["server", "client"])?;
    let ports = ports();
    let rounds = if args.quick { 1 } else { args.common.rounds as usize };
    let children = u64::from(args.children);
    let wanted = args.loops.unwrap_or(if args.quick { 200 } else { 1000 });
    // TIME_WAIT lands on the client: keep one run within a quarter of the
    // ephemeral ports (loopback reuse, tw_reuse=2, handles the rest).
    let cap = (u64::from(ports.count) / 4 / children).max(1);
    let loops = wanted.min(cap);
    if loops < wanted {
        eprintln!(
            "lab: --loops {wanted} capped to {loops}: {} ephemeral ports, \
             {children} clients",
            ports.count
        );
    }
    let modern_pool = args.modern_pool.unwrap_or_else(|| {
        labkit::affinity::allowed_cpus().map_or(1, |c| c.len().max(1) as u32)
    });
    let mut designs: Vec<&str> = if args.designs.is_empty() {
        DESIGNS[1..].to_vec()
    } else {
        DESIGNS[1..]
            .iter()
            .copied()
            .filter(|d| args.designs.iter().any(|a| a == d))
            .collect()
    };
    let ctx = Ctx {
        server: bins[0].clone(),
        client: bins[1].clone(),
        pool: args.pool,
        modern_pool,
        byte_reads: args.byte_reads,
    };
    let load = Load { children, loops, bytes: args.bytes, rate: None };
    let base_load = Load { children: 1, loops: children * loops, ..load.clone() };
    // io_uring (or anything the kernel refuses) is skipped with the
    // server's own reason.
    let mut skipped = Vec::new();
    designs.retain(|d| match ctx.probe(d) {
        Ok(()) => true,
        Err(reason) => {
            skipped.push(Skipped { design: d.to_string(), reason });
            false
        }
    });
    let steps = (rounds * (designs.len() + 1)) as u64;
    let bar = crate::progress::bar(steps, EXPERIMENT.name);
    let mut base_runs = Vec::new();
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); designs.len()];
    for round in 0..rounds {
        // One pass over every design per round (the baseline is 0), in the
        // lab's rotating order, so drift on a shared machine spreads over
        // all of them.
        for k in round_order(designs.len() + 1, round) {
            let Some(i) = k.checked_sub(1) else {
                bar.set_message("iterative (baseline)");
                base_runs.push(ctx.run_once("iterative", &base_load)?);
                bar.inc(1);
                continue;
            };
            bar.set_message(designs[i].to_string());
            runs[i].push(ctx.run_once(designs[i], &load)?);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let base_cpu: Vec<f64> = base_runs.iter().map(cpu).collect();
    let baseline = row("iterative", base_runs, &base_cpu);
    let rows: Vec<Row> =
        designs.iter().zip(runs).map(|(d, r)| row(d, r, &base_cpu)).collect();
    let overload_children = 2 * u64::from(args.pool.max(modern_pool));
    let (overload, rate_sweep) = if args.common.full {
        full_phases(&ctx, &designs, &rows, &load, overload_children, &base_cpu)?
    } else {
        (Vec::new(), Vec::new())
    };
    let verdict = verdict(&baseline, &rows, children * loops);
    let data = Data {
        rounds: rounds as u32,
        full: args.common.full,
        quick: args.quick,
        children: args.children,
        loops,
        bytes: args.bytes,
        pool: args.pool,
        modern_pool,
        byte_reads: args.byte_reads,
        connections_per_run: children * loops,
        ports,
        baseline,
        rows,
        skipped,
        overload,
        overload_children,
        rate_sweep,
        verdict,
    };
    let report = Report {
        header: Header::new(EXPERIMENT.name),
        headline: headline(&data.verdict),
        tables: tables(&data),
        charts: charts(&data),
        files: bars(&data),
        data,
    };
    report.publish(&args.common, &out)
}

/// The figures the claims are judged on: fork per client's CPU above the
/// baseline over the best prefork's (Stevens' measure), thread per
/// client's over the best prethreaded pool's, and the same on total CPU.
fn headline(v: &Verdict) -> Headline {
    let per =
        |d: &str| v.designs.get(d).map(|d| d.cpu_us_per_connection_above_baseline);
    crate::report::headline()
        .add(
            "fork_over_prefork",
            "fork per client's CPU above the baseline over the best prefork's",
            v.fork_over_best_prefork,
            "x",
        )
        .add(
            "thread_over_prethread",
            "thread per client's CPU above the baseline over the best prethreaded's",
            v.thread_over_best_prethread,
            "x",
        )
        .add(
            "fork_over_prefork_total_cpu",
            "fork per client's total CPU over the best prefork's",
            v.fork_over_best_prefork_total_cpu,
            "x",
        )
        .add(
            "thread_over_prethread_total_cpu",
            "thread per client's total CPU over the best prethreaded's",
            v.thread_over_best_prethread_total_cpu,
            "x",
        )
        .add(
            "fork_us_per_connection",
            "fork per client: CPU per connection above the baseline",
            per("fork"),
            "µs",
        )
        .add(
            "prefork_us_per_connection",
            "prefork: CPU per connection above the baseline",
            per("prefork"),
            "µs",
        )
        .add(
            "best_classic_connections_per_s",
            "best of Stevens' designs: connections per second",
            v.best_classic_connections_per_s.as_ref().map(|b| b.value),
            "conn/s",
        )
        .add(
            "best_modern_connections_per_s",
            "best of today's designs: connections per second",
            v.best_modern_connections_per_s.as_ref().map(|b| b.value),
            "conn/s",
        )
        .build()
}

/// The programs and the pool sizes.
struct Ctx {
    server: PathBuf,
    client: PathBuf,
    pool: u32,
    modern_pool: u32,
    byte_reads: bool,
}

/// A running server; killed and reaped if a run fails half-way.
impl Ctx {
    fn pool_of(&self, design: &str) -> usize {
        if MODERN_POOLED.contains(&design) {
            self.modern_pool as usize
        } else {
            self.pool as usize
        }
    }

    /// Start `server --design D` and read the address it prints.
    fn start(&self, design: &str) -> Result<(Service, String)> {
        let mut cmd = Command::new(&self.server);
        // epoll-herd: epoll-exclusive without EPOLLEXCLUSIVE.
        match design {
            "epoll-herd" => {
                cmd.args(["--design", "epoll-exclusive", "--herd", "--json"])
            }
            _ => cmd.args(["--design", design, "--json"]),
        };
        cmd.args(["--pool", &self.pool_of(design).to_string()]);
        if self.byte_reads {
            cmd.arg("--byte-reads");
        }
        let server = Service::start(&mut cmd, &format!("server --design {design}"))?;
        let addr = server.addr.clone();
        Ok((server, addr))
    }

    /// Can this design start here? `Err(reason)` for one the kernel
    /// refuses (io_uring under seccomp, say); other designs must start.
    fn probe(&self, design: &str) -> std::result::Result<(), String> {
        if design != "io-uring" {
            return Ok(());
        }
        match self.start(design) {
            Ok((server, _)) => {
                drop(server); // killed and reaped
                Ok(())
            }
            Err(e) => Err(e.message),
        }
    }

    // ANCHOR: run_once
    /// One run: start the server, run the client against it, stop the
    /// server with SIGTERM and read what it printed (CPU, meter).
    fn run_once(&self, design: &str, load: &Load) -> Result<Run> {
        let start = Instant::now();
        let (server, addr) = self.start(design)?;
        let mut cmd = Command::new(&self.client);
        cmd.args(["--addr", &addr, "--json"])
            .args(["--children", &load.children.to_string()])
            .args(["--loops", &load.loops.to_string()])
            .args(["--bytes", &load.bytes.to_string()]);
        if let Some(rate) = load.rate {
            cmd.args(["--rate", &rate.to_string()]);
        }
        let output = labkit::cleanup::output(&mut cmd)
            .map_err(|e| Error::io("cannot run client", e))?;
        let client: servers::client::Report = serde_json::from_slice(&output.stdout)
            .map_err(|e| {
                let said = String::from_utf8_lossy(&output.stderr);
                Error::failed(format!(
                    "client against {design}: {e}: {}",
                    said.trim()
                ))
            })?;
        if client.error_total > 0 {
            return Err(Error::failed(format!(
                "client against {design}: {} connections failed or got a \
                 short reply",
                client.error_total
            )));
        }
        let last = server.stop()?;
        let wall = start.elapsed().as_secs_f64();
        let stats: servers::Stats =
            serde_json::from_str(&last).ok().ok_or_else(|| {
                Error::failed(format!("server {design} printed no stats"))
            })?;
        check(design, &stats, &client)?;
        Ok(Run { server: stats, client, server_wall_s: wall })
    }
    // ANCHOR_END: run_once
}

/// Nothing lost, nothing left: the server answered every request the
/// client counted and left no child or thread behind.
fn check(
    design: &str,
    s: &servers::Stats,
    c: &servers::client::Report,
) -> Result<()> {
    if s.requests != c.connections_ok || s.bad_connections != 0 {
        return Err(Error::failed(format!(
            "server {design}: answered {} requests ({} closed early); client got {}",
            s.requests, s.bad_connections, c.connections_ok
        )));
    }
    if s.children_left != 0 || s.threads_left != 0 {
        return Err(Error::failed(format!(
            "server {design} left {} children and {} threads",
            s.children_left, s.threads_left
        )));
    }
    Ok(())
}

fn cpu(r: &Run) -> f64 {
    r.server.user_s + r.server.sys_s
}

fn row(design: &str, runs: Vec<Run>, base_cpu: &[f64]) -> Row {
    let of = |v: Vec<f64>| Summary::of(&v).expect("at least one round");
    let conns = |r: &Run| r.client.connections_ok.max(1) as f64;
    let above: Vec<f64> =
        runs.iter().zip(base_cpu).map(|(r, b)| cpu(r) - b).collect();
    let per_conn: Vec<f64> =
        runs.iter().zip(&above).map(|(r, a)| a * 1e6 / conns(r)).collect();
    let wakes: Vec<f64> =
        runs.iter().filter_map(|r| r.server.wakeups_per_connection).collect();
    Row {
        design: design.to_string(),
        stevens: stevens(design),
        pool: runs[0].server.pool,
        cpu_s: of(runs.iter().map(cpu).collect()),
        cpu_s_above_baseline: of(above),
        cpu_us_per_connection_above_baseline: of(per_conn),
        connections_per_s: of(runs
            .iter()
            .map(|r| r.client.connections_per_s)
            .collect()),
        p50_ms: of(runs.iter().map(|r| r.client.latency.p50_us / 1e3).collect()),
        p99_ms: of(runs.iter().map(|r| r.client.latency.p99_us / 1e3).collect()),
        wakeups_per_connection: Summary::of(&wakes),
        switches_per_connection: of(runs
            .iter()
            .map(|r| {
                (r.server.voluntary_switches + r.server.involuntary_switches) as f64
                    / conns(r)
            })
            .collect()),
        per_member_first_round: runs[0].server.per_member.clone(),
        runs,
    }
}

fn stevens(design: &str) -> Option<&'static str> {
    Some(match design {
        "iterative" => "serv00",
        "fork" => "serv01",
        "prefork" => "serv02",
        "prefork-select" => "serv02l",
        "prefork-flock" => "serv03",
        "prefork-mutex" => "serv04",
        "prefork-pass" => "serv05",
        "thread" => "serv06",
        "prethread-mutex" => "serv07",
        "prethread-handoff" => "serv08",
        "prethread-nolock" => "serv09",
        _ => return None,
    })
}

// ANCHOR: past
/// Dan Kegel's Linux re-run of the 2nd edition's servers (Pentium III
/// 450 MHz, Red Hat 6.2): user and sys CPU seconds, `None` where he had no
/// figure (no process-shared mutexes, no CPU accounting for short threads).
fn kegel(stevens: &str) -> Option<(f64, f64)> {
    Some(match stevens {
        "serv00" => (0.5, 5.0),
        "serv01" => (3.7, 17.8),
        "serv02" => (0.6, 7.1),
        "serv03" => (0.8, 7.8),
        "serv05" => (0.9, 6.4),
        "serv07" => (0.8, 7.1),
        "serv08" => (1.0, 5.5),
        "serv09" => (0.7, 7.3),
        _ => return None,
    })
}

/// Article 000's Solaris figures from Stevens' table, CPU seconds above
/// the baseline: fork per client and prefork.
const ARTICLE_FORK: f64 = 504.2;
const ARTICLE_PREFORK: f64 = 21.5;
// ANCHOR_END: past

fn verdict(base: &Row, rows: &[Row], connections: u64) -> Verdict {
    let find = |d: &str| rows.iter().find(|r| r.design == d);
    let best_of = |prefix: &str| {
        rows.iter().filter(|r| r.design.starts_with(prefix)).min_by(|a, b| {
            a.cpu_s_above_baseline.median.total_cmp(&b.cpu_s_above_baseline.median)
        })
    };
    let best_prefork = best_of("prefork");
    let best_prethread = best_of("prethread");
    let ratio = |num: Option<&Row>, den: Option<&Row>, total: bool| {
        let (n, d) = (num?, den?);
        let pick = |r: &Row| {
            if total { r.cpu_s.median } else { r.cpu_s_above_baseline.median }
        };
        (pick(d) > 0.0).then(|| pick(n) / pick(d))
    };
    let best_cps = |modern: bool| {
        rows.iter()
            .filter(|r| r.stevens.is_none() == modern)
            .max_by(|a, b| {
                a.connections_per_s.median.total_cmp(&b.connections_per_s.median)
            })
            .map(|r| Best {
                design: r.design.clone(),
                value: r.connections_per_s.median,
            })
    };
    Verdict {
        baseline_cpu_s: base.cpu_s.median,
        baseline_noise_cpu_s: base.cpu_s.max - base.cpu_s.min,
        connections_per_run: connections,
        designs: rows
            .iter()
            .map(|r| {
                let v = VerdictDesign {
                    cpu_s_above_baseline: r.cpu_s_above_baseline.median,
                    cpu_us_per_connection_above_baseline: r
                        .cpu_us_per_connection_above_baseline
                        .median,
                    connections_per_s: r.connections_per_s.median,
                    p99_ms: r.p99_ms.median,
                    switches_per_connection: r.switches_per_connection.median,
                };
                (r.design.clone(), v)
            })
            .collect(),
        best_prefork: best_prefork.map(|r| Best {
            design: r.design.clone(),
            value: r.cpu_s_above_baseline.median,
        }),
        best_prethread: best_prethread.map(|r| Best {
            design: r.design.clone(),
            value: r.cpu_s_above_baseline.median,
        }),
        fork_over_best_prefork: ratio(find("fork"), best_prefork, false),
        thread_over_best_prethread: ratio(find("thread"), best_prethread, false),
        fork_over_best_prefork_total_cpu: ratio(find("fork"), best_prefork, true),
        thread_over_best_prethread_total_cpu: ratio(
            find("thread"),
            best_prethread,
            true,
        ),
        stevens_factor: 10.0,
        article_fork_over_prefork: ARTICLE_FORK / ARTICLE_PREFORK,
        best_classic_connections_per_s: best_cps(false),
        best_modern_connections_per_s: best_cps(true),
    }
}

/// --full: every design with more concurrent clients than pool members,
/// then an open-loop sweep for a few designs at fractions of the best
/// closed-loop rate.
fn full_phases(
    ctx: &Ctx,
    designs: &[&str],
    rows: &[Row],
    load: &Load,
    children: u64,
    base_cpu: &[f64],
) -> Result<(Vec<Row>, Vec<RatePoint>)> {
    let total = load.children * load.loops;
    let over = Load { children, loops: (total / children).max(1), ..load.clone() };
    let bar = crate::progress::bar(designs.len() as u64, "server-designs overload");
    let mut overload = Vec::new();
    for d in designs {
        bar.set_message(d.to_string());
        let run = ctx.run_once(d, &over)?;
        overload.push(row(d, vec![run], &base_cpu[..1]));
        bar.inc(1);
    }
    bar.finish_and_clear();
    let best = rows.iter().map(|r| r.connections_per_s.median).fold(0.0, f64::max);
    let mut sweep = Vec::new();
    let chosen: Vec<&str> =
        ["fork", "prefork", "thread", "prethread-mutex", "epoll", "tokio"]
            .into_iter()
            .filter(|d| designs.contains(d))
            .collect();
    for d in chosen {
        for fraction in [0.25, 0.5, 0.75, 1.0] {
            let rate = (best * fraction).max(1.0);
            let open = Load { rate: Some(rate), ..load.clone() };
            let r = ctx.run_once(d, &open)?;
            sweep.push(RatePoint {
                design: d.to_string(),
                offered_per_s: rate,
                achieved_per_s: r.client.connections_per_s,
                p50_ms: r.client.latency.p50_us / 1e3,
                p99_ms: r.client.latency.p99_us / 1e3,
                max_ms: r.client.latency.max_us / 1e3,
            });
        }
    }
    Ok((overload, sweep))
}

/// The ephemeral port range and whether TIME_WAIT ports are reused.
fn ports() -> Ports {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let range: Vec<u32> = read("/proc/sys/net/ipv4/ip_local_port_range")
        .map(|t| t.split_whitespace().filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_default();
    let (low, high) = match range[..] {
        [l, h] if h >= l => (l, h),
        _ => (32768, 60999), // the kernel's default
    };
    Ports {
        low,
        high,
        count: high - low + 1,
        tw_reuse: read("/proc/sys/net/ipv4/tcp_tw_reuse")
            .and_then(|t| t.trim().parse().ok()),
    }
}

fn tables(d: &Data) -> Vec<Table> {
    let title = format!(
        "Server designs: CPU above the iterative baseline (Stevens' measure), {} \
         clients x {} connections, {} bytes per reply",
        d.children, d.loops, d.bytes
    );
    // Two tables, so that each fits the book's column: the CPU Stevens
    // measured and what it bought, then the pools' own counters.
    let mut t = Table::new(
        title,
        &[
            "design",
            "Stevens",
            "CPU s",
            "CPU s above baseline",
            "CPU us/conn above baseline",
            "conn/s",
            "p99 ms",
        ],
    );
    let mut pools = Table::new(
        "Server designs: pools, switches and wake-ups",
        &[
            "design",
            "pool",
            "p50 ms",
            "switches/conn",
            "wake-ups/conn",
            "per member (min-max)",
            "Kegel 2000 user/sys s",
        ],
    );
    for r in std::iter::once(&d.baseline).chain(&d.rows) {
        let members = match (
            r.per_member_first_round.iter().min(),
            r.per_member_first_round.iter().max(),
        ) {
            (Some(lo), Some(hi)) => format!("{lo}-{hi}"),
            _ => "-".into(),
        };
        let kegel = r
            .stevens
            .and_then(kegel)
            .map_or("-".into(), |(u, s)| format!("{u}/{s}"));
        let baseline = r.design == "iterative";
        let name: String =
            if baseline { "iterative (baseline)".into() } else { r.design.clone() };
        t.row(vec![
            name.clone(),
            r.stevens.unwrap_or("-").into(),
            format!("{:.3}", r.cpu_s.median),
            if baseline {
                "0".into()
            } else {
                format!("{:.3}", r.cpu_s_above_baseline.median)
            },
            if baseline {
                "0".into()
            } else {
                format!("{:.1}", r.cpu_us_per_connection_above_baseline.median)
            },
            format!("{:.0}", r.connections_per_s.median),
            format!("{:.2}", r.p99_ms.median),
        ]);
        pools.row(vec![
            name,
            if r.pool == 0 { "-".into() } else { r.pool.to_string() },
            format!("{:.2}", r.p50_ms.median),
            format!("{:.2}", r.switches_per_connection.median),
            or_dash(r.wakeups_per_connection.map(|w| w.median), 2),
            members,
            kegel,
        ]);
    }
    t.note(format!(
        "Medians of {} round(s), in this table and the next. CPU: the server's user + sys time, itself and its \
         reaped children, as it printed it on SIGTERM (`pr_cpu_time.c`); above \
         baseline: minus the same round's iterative server serving the same {} \
         connections from one client. Reads: {}. Pools: {} members for Stevens' \
         designs and epoll-exclusive/epoll-herd (epoll-exclusive without \
         EPOLLEXCLUSIVE), {} for reuseport and tokio. Switches: the server's \
         context switches (voluntary + involuntary, all its threads and reaped \
         children) per connection. Wake-ups: returns from select or epoll_wait for \
         the listener per connection; a woken waiter that finds the connection \
         taken goes back to sleep inside the call, so herds show in the switches, \
         not here. Per member: connections per pool member in the first round \
         (Stevens' meter). Kegel 2000: Dan Kegel's Linux re-run of the 2nd \
         edition's servers (Pentium III 450 MHz, Red Hat 6.2), total CPU, not above \
         baseline; `-` where he had none.",
        d.rounds,
        d.connections_per_run,
        if d.byte_reads {
            "one byte per read(2) (--byte-reads)"
        } else {
            "buffered"
        },
        d.pool,
        d.modern_pool
    ));
    for s in &d.skipped {
        t.note(format!("Skipped {}: {}", s.design, s.reason));
    }
    let v = &d.verdict;
    let mut claims = Table::new(
        "The claims: process or thread per client against the best pool \
         (CPU above baseline)",
        &["ratio", "then", "today"],
    );
    let kegel_fork = 3.7 + 17.8 - 5.5;
    let kegel_prefork =
        [(0.6 + 7.1), (0.8 + 7.8), (0.9 + 6.4)].into_iter().fold(f64::MAX, f64::min)
            - 5.5;
    claims.row(vec![
        "fork / best prefork".into(),
        format!(
            "{:.1} (Solaris, {ARTICLE_FORK} / {ARTICLE_PREFORK} s); \
             {:.1} (Kegel, Linux 2000)",
            ARTICLE_FORK / ARTICLE_PREFORK,
            kegel_fork / kegel_prefork
        ),
        format!(
            "{} ({}); total CPU {}",
            or_dash(v.fork_over_best_prefork, 1),
            v.best_prefork.as_ref().map_or("-", |b| b.design.as_str()),
            or_dash(v.fork_over_best_prefork_total_cpu, 2)
        ),
    ]);
    claims.row(vec![
        "thread / best prethreaded".into(),
        "- (no figure survives)".into(),
        format!(
            "{} ({}); total CPU {}",
            or_dash(v.thread_over_best_prethread, 1),
            v.best_prethread.as_ref().map_or("-", |b| b.design.as_str()),
            or_dash(v.thread_over_best_prethread_total_cpu, 2)
        ),
    ]);
    claims.note(format!(
        "Stevens' summary: pools cut the process-control CPU \"by a factor of 10 or \
         more\". Article 000: creation is cheap enough that pools bring no real \
         advantage. A ratio is `-` when the pool's CPU is not above the baseline; \
         the baseline varied by {:.3} s between rounds, so smaller differences are \
         noise. Kegel's ratio uses his best prefork (serv05) and his serv00 as the \
         baseline.",
        v.baseline_noise_cpu_s
    ));
    let mut out = vec![t, pools, claims];
    if !d.overload.is_empty() {
        let mut o = Table::new(
            format!(
                "More clients than pool members: {} concurrent clients",
                d.overload_children
            ),
            &[
                "design",
                "CPU s above baseline",
                "conn/s",
                "p50 ms",
                "p99 ms",
                "per member (min-max)",
            ],
        );
        for r in &d.overload {
            let m = &r.per_member_first_round;
            o.row(vec![
                r.design.clone(),
                format!("{:.3}", r.cpu_s_above_baseline.median),
                format!("{:.0}", r.connections_per_s.median),
                format!("{:.2}", r.p50_ms.median),
                format!("{:.2}", r.p99_ms.median),
                match (m.iter().min(), m.iter().max()) {
                    (Some(lo), Some(hi)) => format!("{lo}-{hi}"),
                    _ => "-".into(),
                },
            ]);
        }
        o.note("One round each; the baseline is the first round's.");
        out.push(o);
    }
    if !d.rate_sweep.is_empty() {
        let mut s = Table::new(
            "Open loop: latency from the intended start against the offered rate",
            &[
                "design",
                "offered conn/s",
                "achieved conn/s",
                "p50 ms",
                "p99 ms",
                "max ms",
            ],
        );
        for p in &d.rate_sweep {
            s.row(vec![
                p.design.clone(),
                format!("{:.0}", p.offered_per_s),
                format!("{:.0}", p.achieved_per_s),
                format!("{:.2}", p.p50_ms),
                format!("{:.2}", p.p99_ms),
                format!("{:.2}", p.max_ms),
            ]);
        }
        s.note(
            "Offered rates are 25, 50, 75 and 100% of the best closed-loop rate \
             measured.",
        );
        out.push(s);
    }
    out
}

/// Bar charts (one bar per design), files of the report: CPU per
/// connection above baseline, and connections/s.
fn bars(d: &Data) -> Vec<(String, String)> {
    let cpu: Vec<(String, f64)> = d
        .rows
        .iter()
        .map(|r| (r.design.clone(), r.cpu_us_per_connection_above_baseline.median))
        .collect();
    let cps: Vec<(String, f64)> = std::iter::once(&d.baseline)
        .chain(&d.rows)
        .map(|r| (r.design.clone(), r.connections_per_s.median))
        .collect();
    vec![
        (
            "cpu-per-connection.svg".into(),
            crate::bars::svg(
                "Server CPU per connection above the iterative baseline",
                "microseconds per connection (median; bars at or below 0 not drawn)",
                &cpu,
                false,
            ),
        ),
        (
            "connections-per-s.svg".into(),
            crate::bars::svg(
                "Connections per second, closed loop",
                "connections/s (median)",
                &cps,
                false,
            ),
        ),
    ]
}

fn charts(d: &Data) -> Vec<(String, Chart)> {
    if d.rate_sweep.is_empty() {
        return Vec::new();
    }
    let mut chart = Chart::new(
        "Open loop: p99 latency against offered rate",
        "offered connections/s",
        "p99 latency, ms",
    );
    let mut names: Vec<&str> =
        d.rate_sweep.iter().map(|p| p.design.as_str()).collect();
    names.dedup();
    for n in names {
        let pts = d
            .rate_sweep
            .iter()
            .filter(|p| p.design == n)
            .map(|p| (p.offered_per_s, p.p99_ms.max(1e-3)))
            .collect();
        chart = chart.series(n, pts);
    }
    chart.log_y = true;
    vec![("rate-sweep".into(), chart)]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row with one round: `cpu` total seconds, baseline `base`.
    fn fake(design: &str, cpu: f64, base: f64, cps: f64) -> Row {
        let one = |v: f64| Summary::of(&[v]).unwrap();
        Row {
            design: design.into(),
            stevens: stevens(design),
            pool: 15,
            cpu_s: one(cpu),
            cpu_s_above_baseline: one(cpu - base),
            cpu_us_per_connection_above_baseline: one((cpu - base) * 1e6 / 1000.0),
            connections_per_s: one(cps),
            p50_ms: one(0.1),
            p99_ms: one(1.0),
            wakeups_per_connection: None,
            switches_per_connection: one(2.0),
            per_member_first_round: Vec::new(),
            runs: Vec::new(),
        }
    }

    #[test]
    fn the_ratios_use_the_cheapest_pool_and_refuse_a_pool_at_baseline() {
        let base = fake("iterative", 1.0, 1.0, 100.0);
        let rows = vec![
            fake("fork", 11.0, 1.0, 50.0),
            fake("prefork", 2.0, 1.0, 300.0),
            fake("prefork-pass", 1.5, 1.0, 200.0),
            fake("thread", 3.0, 1.0, 80.0),
            fake("prethread-mutex", 0.9, 1.0, 250.0),
            fake("epoll", 1.1, 1.0, 400.0),
        ];
        let v = verdict(&base, &rows, 1000);
        assert_eq!(v.best_prefork.as_ref().unwrap().design, "prefork-pass");
        assert_eq!(v.fork_over_best_prefork, Some(20.0));
        assert_eq!(v.fork_over_best_prefork_total_cpu, Some(11.0 / 1.5));
        // The best prethreaded pool is below the baseline: no ratio above
        // it, but the total-CPU ratio stands.
        assert_eq!(v.best_prethread.as_ref().unwrap().design, "prethread-mutex");
        assert_eq!(v.thread_over_best_prethread, None);
        assert_eq!(v.thread_over_best_prethread_total_cpu, Some(3.0 / 0.9));
        assert_eq!(
            v.best_classic_connections_per_s.as_ref().unwrap().design,
            "prefork"
        );
        assert_eq!(
            v.best_modern_connections_per_s.as_ref().unwrap().design,
            "epoll"
        );
        let fork = &v.designs["fork"];
        assert_eq!(fork.cpu_us_per_connection_above_baseline, 10_000.0);
        // Without fork or a prefork pool there is no ratio at all.
        let v = verdict(&base, &rows[3..], 1000);
        assert!(v.best_prefork.is_none() && v.fork_over_best_prefork.is_none());
    }
}
