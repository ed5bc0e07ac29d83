//! What this experiment derives from the observations: CPU above the same
//! round's baseline, the best pools, the ratios the claims are judged on.

use crate::engine::{Observations, Series, Setting};
use crate::report::Headline;
use crate::stats::Summary;

use super::{BASELINE, Best, Verdict, closed};

/// `design`'s CPU seconds above the same round's baseline at `at`, and the
/// same in µs per connection, one value per round.
pub(super) fn above(
    obs: Observations,
    at: &Setting,
    design: &str,
) -> Option<(Vec<f64>, Vec<f64>)> {
    let base = obs.rounds(at, BASELINE, "cpu_s")?;
    let cpu = obs.rounds(at, design, "cpu_s")?;
    let connections = obs.rounds(at, design, "connections_ok")?;
    let above: Vec<f64> = cpu.iter().zip(&base).map(|(c, b)| c - b).collect();
    let per: Vec<f64> =
        above.iter().zip(&connections).map(|(a, n)| a * 1e6 / n.max(1.0)).collect();
    Some((above, per))
}

/// Each design's [`above`] at every load that has a baseline, summed up.
pub(super) fn above_baseline(obs: Observations) -> Vec<Series> {
    let designs = obs.series().into_iter().filter(|s| s.condition != BASELINE);
    designs
        .filter_map(|s| {
            let (cpu, per) = above(obs, &s.setting, &s.condition)?;
            let metrics = [("cpu_s", cpu), ("cpu_us_per_connection", per)]
                .into_iter()
                .map(|(m, rounds)| Some((m.to_string(), Summary::of(&rounds)?)))
                .collect::<Option<_>>()?;
            Some(Series { setting: s.setting, condition: s.condition, metrics })
        })
        .collect()
}

/// The median of `design`'s [`above`] at `at`: seconds, or µs per
/// connection.
pub(super) fn above_median(
    obs: Observations,
    at: &Setting,
    design: &str,
    per_connection: bool,
) -> Option<f64> {
    let (cpu, per) = above(obs, at, design)?;
    Some(crate::stats::median(if per_connection { &per } else { &cpu }))
}

/// The figures the claims are judged on: fork per client's total CPU per
/// connection over the best prefork's, paired per round (a pool sits so
/// near the iterative baseline that its CPU *above* the baseline lies
/// within the baseline's own spread, and a ratio over it means nothing);
/// the same for threads; and Stevens' measure above the baseline beside
/// them, kept only where the pool's CPU above the baseline is clear of
/// the baseline's noise in every round.
pub(super) fn headline(obs: Observations, v: &Verdict) -> Headline {
    let at = closed();
    fn best(b: &Option<Best>) -> Option<&str> {
        b.as_ref().map(|b| b.design.as_str())
    }
    let total = |d: Option<&str>| obs.rounds(&at, d?, "cpu_us_per_connection");
    let per_conn = |d: Option<&str>| Some(above(obs, &at, d?)?.1);
    let above_clear = |d: Option<&str>| {
        let (cpu, per) = above(obs, &at, d?)?;
        cpu.iter().all(|a| *a > v.baseline_noise_cpu_s).then_some(per)
    };
    let (prefork, prethread) = (best(&v.best_prefork), best(&v.best_prethread));
    let cps = |b: &Option<Best>| obs.rounds(&at, best(b)?, "connections_per_s");
    crate::report::headline()
        .paired(
            "fork_over_prefork_total_cpu",
            "fork per client's total CPU per connection over the best prefork's",
            total(Some("fork")),
            total(prefork),
        )
        .paired(
            "thread_over_prethread_total_cpu",
            "thread per client's total CPU per connection over the best prethreaded's",
            total(Some("thread")),
            total(prethread),
        )
        .paired(
            "fork_over_prefork",
            "fork per client's CPU above the baseline over the best prefork's",
            per_conn(Some("fork")),
            above_clear(prefork),
        )
        .paired(
            "thread_over_prethread",
            "thread per client's CPU above the baseline over the best prethreaded's",
            per_conn(Some("thread")),
            above_clear(prethread),
        )
        .rounds(
            "fork_us_per_connection",
            "fork per client: CPU per connection above the baseline",
            per_conn(Some("fork")),
            "µs",
        )
        .rounds(
            "prefork_us_per_connection",
            "the best prefork: CPU per connection above the baseline",
            per_conn(prefork),
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

/// unpv13e's name for a design (`serv01`), from the servers crate's own
/// table; None for today's designs and the runner's `epoll-herd`.
pub(super) fn stevens(design: &str) -> Option<&'static str> {
    <servers::Design as clap::ValueEnum>::from_str(design, false)
        .ok()
        .and_then(servers::Design::stevens)
}

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

/// The design with the least value, or the most.
fn best<'a>(of: impl Iterator<Item = (&'a str, f64)>, most: bool) -> Option<Best> {
    let order = |a: &(&str, f64), b: &(&str, f64)| a.1.total_cmp(&b.1);
    let found = if most { of.max_by(order) } else { of.min_by(order) };
    found.map(|(design, value)| Best { design: design.to_string(), value })
}

/// The verdict on the closed loop's medians: the best pools (the least
/// CPU above the baseline), the ratios over them, the best rates.
pub(super) fn verdict(obs: Observations, designs: &[&str]) -> Verdict {
    let at = closed();
    let above = |d: &str| above_median(obs, &at, d, false);
    let best_of = |prefix: &str| {
        let pools = designs.iter().filter(|d| d.starts_with(prefix));
        best(pools.filter_map(|d| Some((*d, above(d)?))), false)
    };
    let best_cps = |modern: bool| {
        let of = designs.iter().filter(|d| stevens(d).is_none() == modern);
        let cps = |d: &str| obs.median(&at, d, "connections_per_s");
        best(of.filter_map(|d| Some((*d, cps(d)?))), true)
    };
    let (best_prefork, best_prethread) = (best_of("prefork"), best_of("prethread"));
    let ratio = |num: &str, den: &Option<Best>, total: bool| {
        let pick = |d: &str| match total {
            true => obs.median(&at, d, "cpu_s"),
            false => above(d),
        };
        let (n, d) = (pick(num)?, pick(&den.as_ref()?.design)?);
        (d > 0.0).then(|| n / d)
    };
    let base = obs.summary(&at, BASELINE, "cpu_s");
    Verdict {
        baseline_noise_cpu_s: base.map_or(0.0, |b| b.max - b.min),
        fork_over_best_prefork: ratio("fork", &best_prefork, false),
        thread_over_best_prethread: ratio("thread", &best_prethread, false),
        fork_over_best_prefork_total_cpu: ratio("fork", &best_prefork, true),
        thread_over_best_prethread_total_cpu: ratio("thread", &best_prethread, true),
        best_prefork,
        best_prethread,
        stevens_factor: 10.0,
        article_fork_over_prefork: ARTICLE_FORK / ARTICLE_PREFORK,
        best_classic_connections_per_s: best_cps(false),
        best_modern_connections_per_s: best_cps(true),
    }
}
