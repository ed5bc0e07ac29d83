//! The tables, the bar charts (files of the report) and the rate chart,
//! from the observations.

use crate::chart::{Chart, Kind, Meaning};
use crate::engine::{Observations, Setting};
use crate::table::{Table, col, or_dash};

use super::run::SWEPT;
use super::verdict::{ARTICLE_FORK, ARTICLE_PREFORK, above_median, kegel, stevens};
use super::{BASELINE, Best, Data, closed, overload};

/// Connections per pool member in the first round (Stevens' meter):
/// `min-max`.
fn members(obs: Observations, at: &Setting, design: &str) -> String {
    let first = |m: &str| obs.rounds(at, design, m).and_then(|r| r.first().copied());
    match (first("per_member_min"), first("per_member_max")) {
        (Some(lo), Some(hi)) => format!("{lo}-{hi}"),
        _ => "-".into(),
    }
}

pub(super) fn tables(d: &Data, obs: Observations) -> Vec<Table> {
    let at = closed();
    let at = &at;
    let rows: Vec<&str> = std::iter::once(BASELINE)
        .chain(d.designs.iter().map(String::as_str))
        .collect();
    let name = |r: &&str| match *r {
        BASELINE => "iterative (baseline)".to_string(),
        r => r.to_string(),
    };
    let median = |metric: &'static str, n| {
        move |r: &&str| or_dash(obs.median(at, r, metric), n)
    };
    let above = |per_connection, n| {
        move |r: &&str| match *r {
            BASELINE => "0".into(),
            r => or_dash(above_median(obs, at, r, per_connection), n),
        }
    };
    // Two tables, so that each fits the book's column: the CPU Stevens
    // measured and what it bought, then the pools' own counters.
    let title = format!(
        "Server designs: CPU above the iterative baseline (Stevens' measure), {} \
         clients x {} connections, {} bytes per reply",
        d.children, d.loops, d.bytes
    );
    let mut t = Table::of(
        title,
        &rows,
        &[
            col("design", name),
            col("Stevens", |r: &&str| stevens(r).unwrap_or("-").to_string()),
            col("CPU s", median("cpu_s", 3)),
            col("CPU s above baseline", above(false, 3)),
            col("CPU us/conn above baseline", above(true, 1)),
            col("conn/s", median("connections_per_s", 0)),
            col("p99 ms", median("p99_ms", 2)),
        ],
    );
    let pools = Table::of(
        "Server designs: pools, switches and wake-ups",
        &rows,
        &[
            col("design", name),
            col("pool", |r: &&str| {
                match or_dash(obs.median(at, r, "pool"), 0).as_str() {
                    "0" => "-".into(),
                    pool => pool.into(),
                }
            }),
            col("p50 ms", median("p50_ms", 2)),
            col("switches/conn", median("switches_per_connection", 2)),
            col("wake-ups/conn", median("wakeups_per_connection", 2)),
            col("per member (min-max)", |r: &&str| members(obs, at, r)),
            col("Kegel 2000 user/sys s", |r: &&str| {
                let kegel = stevens(r).and_then(kegel);
                kegel.map_or("-".into(), |(u, s)| format!("{u}/{s}"))
            }),
        ],
    );
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
        if d.byte_reads { "one byte per read(2) (--byte-reads)" } else { "buffered" },
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
    // A ratio above the baseline over the best pool, and of total CPU.
    let today = |above, best: &Option<Best>, total| {
        let best = best.as_ref().map_or("-", |b| b.design.as_str());
        format!("{} ({best}); total CPU {}", or_dash(above, 1), or_dash(total, 2))
    };
    // Kegel's total CPU above his serv00's: fork's and his best prefork's.
    let kegel_total = |s| kegel(s).map_or(f64::NAN, |(u, s)| u + s);
    let kegel_above = |s| kegel_total(s) - kegel_total("serv00");
    let kegel_prefork = ["serv02", "serv03", "serv05"].map(kegel_above);
    let kegel_prefork = kegel_prefork.into_iter().fold(f64::MAX, f64::min);
    claims.row(vec![
        "fork / best prefork".into(),
        format!(
            "{:.1} (Solaris, {ARTICLE_FORK} / {ARTICLE_PREFORK} s); \
             {:.1} (Kegel, Linux 2000)",
            ARTICLE_FORK / ARTICLE_PREFORK,
            kegel_above("serv01") / kegel_prefork
        ),
        today(
            v.fork_over_best_prefork,
            &v.best_prefork,
            v.fork_over_best_prefork_total_cpu,
        ),
    ]);
    claims.row(vec![
        "thread / best prethreaded".into(),
        "- (no figure survives)".into(),
        today(
            v.thread_over_best_prethread,
            &v.best_prethread,
            v.thread_over_best_prethread_total_cpu,
        ),
    ]);
    claims.note(format!(
        "Stevens' summary: pools cut the process-control CPU \"by a factor of 10 or \
         more\". Zhou Li et al.: creation is cheap enough that pools bring no real \
         advantage. A ratio is `-` when the pool's CPU is not above the baseline; \
         the baseline varied by {:.3} s between rounds, so smaller differences are \
         noise. Kegel's ratio uses his best prefork (serv05) and his serv00 as the \
         baseline.",
        v.baseline_noise_cpu_s
    ));
    let mut out = vec![t, pools, claims];
    if d.full {
        let at = &overload(d.overload_children);
        let median = |metric: &'static str, n| {
            move |r: &&str| or_dash(obs.median(at, r, metric), n)
        };
        let title = format!(
            "More clients than pool members: {} concurrent clients",
            d.overload_children
        );
        let table = Table::of(
            title,
            &rows[1..],
            &[
                col("design", name),
                col("CPU s above baseline", |r: &&str| {
                    or_dash(above_median(obs, at, r, false), 3)
                }),
                col("conn/s", median("connections_per_s", 0)),
                col("p50 ms", median("p50_ms", 2)),
                col("p99 ms", median("p99_ms", 2)),
                col("per member (min-max)", |r: &&str| members(obs, at, r)),
            ],
        );
        out.push(table.noted(format!(
            "Medians of {} rounds; above baseline: minus the same round's iterative \
             server serving as many connections from one client. Per member: the \
             first round's.",
            d.rounds
        )));
    }
    let sweep = open_loop(d, obs);
    if !sweep.is_empty() {
        let median = |metric: &'static str, n| {
            move |(d, at): &(&str, &Setting)| or_dash(obs.median(at, d, metric), n)
        };
        let table = Table::of(
            "Open loop: latency from the intended start against the offered rate",
            &sweep,
            &[
                col("design", |(d, _): &(&str, &Setting)| d.to_string()),
                col("offered conn/s", |(_, at): &(&str, &Setting)| {
                    or_dash(at["offered_per_s"].as_f64(), 0)
                }),
                col("achieved conn/s", median("connections_per_s", 0)),
                col("p50 ms", median("p50_ms", 2)),
                col("p99 ms", median("p99_ms", 2)),
                col("max ms", median("max_ms", 2)),
            ],
        );
        out.push(table.noted(
            "Offered rates are 25, 50, 75 and 100% of the best closed-loop rate \
             measured; medians of the rounds.",
        ));
    }
    out
}

/// The open loop's points, design by design, each at every offered rate.
fn open_loop<'a>(
    d: &Data,
    obs: Observations<'a>,
) -> Vec<(&'static str, &'a Setting)> {
    let open = obs.settings().into_iter().filter(|s| s["load"] == "open");
    let open: Vec<&Setting> = open.collect();
    let swept = SWEPT.into_iter().filter(|s| d.designs.iter().any(|d| d == s));
    swept.flat_map(|d| open.iter().map(move |at| (d, *at))).collect()
}

/// A design's meaning on the charts: what serves a connection. A process
/// (fork, the prefork pools), a thread (a thread per client, the
/// prethreaded pools), a task (tokio), or an event loop, one thread
/// serving many clients (epoll, io_uring, and the iterative server, which
/// serves one at a time: its second form).
fn kind(design: &str) -> Kind {
    match design {
        "iterative" => Meaning::EventLoop.form(1),
        "tokio" => Meaning::Task.into(),
        d if d == "fork" || d.starts_with("prefork") => Meaning::Process.into(),
        d if d == "thread" || d.starts_with("prethread") => Meaning::Thread.into(),
        _ => Meaning::EventLoop.into(),
    }
}

/// Bar charts (one bar per design), files of the report: CPU per
/// connection above baseline, and connections/s.
pub(super) fn bars(d: &Data, obs: Observations) -> Vec<(String, String)> {
    let at = closed();
    let bar =
        |d: &str, v: Option<f64>| (kind(d), d.to_string(), v.unwrap_or(f64::NAN));
    let cpu: Vec<(Kind, String, f64)> =
        d.designs.iter().map(|d| bar(d, above_median(obs, &at, d, true))).collect();
    let designs =
        std::iter::once(BASELINE).chain(d.designs.iter().map(String::as_str));
    let cps = |d| obs.median(&at, d, "connections_per_s");
    let cps: Vec<(Kind, String, f64)> = designs.map(|d| bar(d, cps(d))).collect();
    [
        (
            "cpu-per-connection.svg",
            "Server CPU per connection above the iterative baseline",
            "microseconds per connection (median; bars at or below 0 not drawn)",
            cpu,
        ),
        (
            "connections-per-s.svg",
            "Connections per second, closed loop",
            "connections/s (median)",
            cps,
        ),
    ]
    .map(|(file, title, unit, rows)| {
        (file.into(), crate::chart::bars::svg(title, unit, &rows, false))
    })
    .into()
}

pub(super) fn charts(d: &Data, obs: Observations) -> Vec<(String, Chart)> {
    let sweep = open_loop(d, obs);
    if sweep.is_empty() {
        return Vec::new();
    }
    let mut chart = Chart::new(
        "Open loop: p99 latency against offered rate",
        "offered connections/s",
        "p99 latency, ms (median, band: min-max of the rounds)",
    );
    chart.log_y = true;
    for design in SWEPT.into_iter().filter(|s| sweep.iter().any(|p| p.0 == *s)) {
        let points = sweep.iter().filter(|p| p.0 == design).filter_map(|(_, at)| {
            Some((at["offered_per_s"].as_f64()?, obs.summary(at, design, "p99_ms")?))
        });
        chart = chart.summaries(kind(design), design, points);
    }
    vec![("rate-sweep".into(), chart)]
}
