//! The tables, the bar charts (files of the report) and the rate chart.

use crate::chart::{Chart, Kind, Meaning};
use crate::table::{Table, or_dash};

use super::Data;
use super::verdict::{ARTICLE_FORK, ARTICLE_PREFORK, kegel};

pub(super) fn tables(d: &Data) -> Vec<Table> {
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
         more\". Zhou Li et al.: creation is cheap enough that pools bring no real \
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
pub(super) fn bars(d: &Data) -> Vec<(String, String)> {
    let cpu: Vec<(Kind, String, f64)> = d
        .rows
        .iter()
        .map(|r| {
            let cpu = r.cpu_us_per_connection_above_baseline.median;
            (kind(&r.design), r.design.clone(), cpu)
        })
        .collect();
    let cps: Vec<(Kind, String, f64)> = std::iter::once(&d.baseline)
        .chain(&d.rows)
        .map(|r| (kind(&r.design), r.design.clone(), r.connections_per_s.median))
        .collect();
    vec![
        (
            "cpu-per-connection.svg".into(),
            crate::chart::bars::svg(
                "Server CPU per connection above the iterative baseline",
                "microseconds per connection (median; bars at or below 0 not drawn)",
                &cpu,
                false,
            ),
        ),
        (
            "connections-per-s.svg".into(),
            crate::chart::bars::svg(
                "Connections per second, closed loop",
                "connections/s (median)",
                &cps,
                false,
            ),
        ),
    ]
}

pub(super) fn charts(d: &Data) -> Vec<(String, Chart)> {
    if d.rate_sweep.is_empty() {
        return Vec::new();
    }
    let mut chart = Chart::new(
        "Open loop: p99 latency against offered rate",
        "offered connections/s",
        "p99 latency, ms (one run per point: no spread to draw)",
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
        chart = chart.series(kind(n), n, pts);
    }
    chart.log_y = true;
    vec![("rate-sweep".into(), chart)]
}
