//! What the rows and the verdict make of the runs: CPU above the baseline,
//! the pools' counters, the ratios the claims are judged on.

use crate::report::Headline;
use crate::stats::Summary;

use super::{Best, Row, Run, Verdict, VerdictDesign};

/// The figures the claims are judged on: fork per client's total CPU per
/// connection over the best prefork's, paired per round (a pool sits so
/// near the iterative baseline that its CPU *above* the baseline lies
/// within the baseline's own spread, and a ratio over it means nothing);
/// the same for threads; and Stevens' measure above the baseline beside
/// them, kept only where the pool's CPU above the baseline is clear of
/// the baseline's noise in every round.
pub(super) fn headline(v: &Verdict, rows: &[Row]) -> Headline {
    let find = |d: &str| rows.iter().find(|r| r.design == d);
    let best = |b: &Option<Best>| b.as_ref().and_then(|b| find(&b.design));
    let per_conn = |r: &Row, above: bool| -> Vec<f64> {
        r.runs
            .iter()
            .zip(&r.cpu_s_above_baseline_rounds)
            .map(|(run, a)| {
                let cpu = if above { *a } else { cpu(run) };
                cpu * 1e6 / run.client.connections_ok.max(1) as f64
            })
            .collect()
    };
    let clear = |r: &Row| {
        r.cpu_s_above_baseline_rounds.iter().all(|a| *a > v.baseline_noise_cpu_s)
    };
    let ratio = |num: Option<&Row>, den: Option<&Row>, above: bool| {
        let (n, d) = (num?, den?);
        (!above || clear(d)).then(|| (per_conn(n, above), per_conn(d, above)))
    };
    let pair = |p: Option<(Vec<f64>, Vec<f64>)>| {
        p.map_or((None, None), |(a, b)| (Some(a), Some(b)))
    };
    let (fa, fb) = pair(ratio(find("fork"), best(&v.best_prefork), false));
    let (ta, tb) = pair(ratio(find("thread"), best(&v.best_prethread), false));
    let (fa2, fb2) = pair(ratio(find("fork"), best(&v.best_prefork), true));
    let (ta2, tb2) = pair(ratio(find("thread"), best(&v.best_prethread), true));
    let cps = |b: &Option<Best>| -> Option<Vec<f64>> {
        Some(best(b)?.runs.iter().map(|r| r.client.connections_per_s).collect())
    };
    crate::report::headline()
        .paired(
            "fork_over_prefork_total_cpu",
            "fork per client's total CPU per connection over the best prefork's",
            fa,
            fb,
        )
        .paired(
            "thread_over_prethread_total_cpu",
            "thread per client's total CPU per connection over the best prethreaded's",
            ta,
            tb,
        )
        .paired(
            "fork_over_prefork",
            "fork per client's CPU above the baseline over the best prefork's",
            fa2,
            fb2,
        )
        .paired(
            "thread_over_prethread",
            "thread per client's CPU above the baseline over the best prethreaded's",
            ta2,
            tb2,
        )
        .rounds(
            "fork_us_per_connection",
            "fork per client: CPU per connection above the baseline",
            find("fork").map(|r| per_conn(r, true)),
            "µs",
        )
        .rounds(
            "prefork_us_per_connection",
            "the best prefork: CPU per connection above the baseline",
            best(&v.best_prefork).map(|r| per_conn(r, true)),
            "µs",
        )
        .rounds(
            "best_classic_connections_per_s",
            "best of Stevens' designs: connections per second",
            cps(&v.best_classic_connections_per_s),
            "conn/s",
        )
        .rounds(
            "best_modern_connections_per_s",
            "best of today's designs: connections per second",
            cps(&v.best_modern_connections_per_s),
            "conn/s",
        )
        .build()
}

pub(super) fn cpu(r: &Run) -> f64 {
    r.server.user_s + r.server.sys_s
}

pub(super) fn row(design: &str, runs: Vec<Run>, base_cpu: &[f64]) -> Row {
    let conns = |r: &Run| r.client.connections_ok.max(1) as f64;
    let above: Vec<f64> =
        runs.iter().zip(base_cpu).map(|(r, b)| cpu(r) - b).collect();
    let per_conn: Vec<f64> =
        runs.iter().zip(&above).map(|(r, a)| a * 1e6 / conns(r)).collect();
    let wakes: Vec<f64> =
        runs.iter().filter_map(|r| r.server.wakeups_per_connection).collect();
    Row {
        design: design.to_string(),
        cpu_s_above_baseline_rounds: above.clone(),
        stevens: stevens(design),
        pool: runs[0].server.pool,
        cpu_s: Summary::of_rounds(runs.iter().map(cpu)),
        cpu_s_above_baseline: Summary::of_rounds(above),
        cpu_us_per_connection_above_baseline: Summary::of_rounds(per_conn),
        connections_per_s: Summary::of_rounds(
            runs.iter().map(|r| r.client.connections_per_s),
        ),
        p50_ms: Summary::of_rounds(
            runs.iter().map(|r| r.client.latency.p50_us / 1e3),
        ),
        p99_ms: Summary::of_rounds(
            runs.iter().map(|r| r.client.latency.p99_us / 1e3),
        ),
        wakeups_per_connection: Summary::of(&wakes),
        switches_per_connection: Summary::of_rounds(runs.iter().map(|r| {
            (r.server.voluntary_switches + r.server.involuntary_switches) as f64
                / conns(r)
        })),
        per_member_first_round: runs[0].server.per_member.clone(),
        runs,
    }
}

/// unpv13e's name for a design (`serv01`), from the servers crate's own
/// table; None for today's designs and the runner's `epoll-herd`.
pub(super) fn stevens(design: &str) -> Option<&'static str> {
    <servers::Design as clap::ValueEnum>::from_str(design, false)
        .ok()
        .and_then(servers::Design::stevens)
}

// ANCHOR: past
/// Dan Kegel's Linux re-run of the 2nd edition's servers (Pentium III
/// 450 MHz, Red Hat 6.2): user and sys CPU seconds, `None` where he had no
/// figure (no process-shared mutexes, no CPU accounting for short threads).
pub(super) fn kegel(stevens: &str) -> Option<(f64, f64)> {
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
pub(super) const ARTICLE_FORK: f64 = 504.2;
pub(super) const ARTICLE_PREFORK: f64 = 21.5;
// ANCHOR_END: past

pub(super) fn verdict(base: &Row, rows: &[Row], connections: u64) -> Verdict {
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
