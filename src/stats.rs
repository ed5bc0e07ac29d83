//! Rounds and their summaries: median, min and max, and the interval of a
//! median from order statistics. (The articles averaged the middle three of
//! five rounds; the lab reports the median, which needs no rounds thrown
//! away, with its interval beside it.)
//!
//! The interval of a median is distribution-free: between the `l`-th
//! smallest and the `l`-th largest of `n` rounds lies the true median with
//! probability `1 - 2 P(B <= l - 1)`, `B` binomial (`n`, 1/2), whatever the
//! rounds' distribution (Le Boudec, *Performance Evaluation of Computer
//! and Communication Systems*, 2010, section 2.2.1). That coverage is exact,
//! not a resampling estimate, and it says when the rounds are too few: the
//! widest interval, from the least round to the greatest, covers
//! `1 - 2 / 2^n`, which is 93.75% at five rounds. Six rounds are the fewest
//! for 95%.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A summary of repeated measurements of one quantity: the median, the
/// range, and the median's interval by order statistics ([`median_interval`]
/// at [`LEVEL`]) with its exact coverage (below 95% for five rounds or
/// fewer, which is then the range).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema,
)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Absent in results written before it was recorded.
    #[serde(default)]
    pub interval: [f64; 2],
    #[serde(default)]
    pub coverage: f64,
}

impl Summary {
    /// Summarise `values`; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Summary> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = median(&v);
        let (interval, coverage) = match median_interval(&v, LEVEL) {
            Some(i) => ([i.lo, i.hi], i.coverage),
            None => ([v[0], v[n - 1]], 0.0),
        };
        Some(Summary { n, median, min: v[0], max: v[n - 1], interval, coverage })
    }

    /// Summarise one quantity over an experiment's rounds. There is always
    /// at least one: `--rounds` is 1 or more, and every round records every
    /// setting or fails the run.
    pub fn of_rounds(values: impl IntoIterator<Item = f64>) -> Summary {
        let v: Vec<f64> = values.into_iter().collect();
        Summary::of(&v).expect("at least one round")
    }
}

/// The lab's one round schedule: the order in which `n` programs (or
/// settings) run in round `round`. It rotates by one each round, so that
/// over any `n` rounds in a row each goes first once, and in each position
/// once: slow drift (clock frequency, caches, other load) does not always
/// favour the same one. Over a number of rounds that `n` divides, every
/// condition goes first equally often ([`balanced`]).
pub fn round_order(n: usize, round: usize) -> Vec<usize> {
    (0..n).map(|k| (k + round) % n).collect()
}

/// Do `rounds` rounds of [`round_order`] over `n` conditions put each
/// condition first equally often?
pub fn balanced(n: usize, rounds: usize) -> bool {
    n <= 1 || rounds % n == 0
}

/// Paired ratios: `a[i] / b[i]` of each round, both measured back to back
/// in the same round, summarised. A ratio of medians would mix rounds that
/// drift apart; this is the figure the lab's "x times" claims use. `None`
/// when there is no pair.
pub fn paired_ratio(a: &[f64], b: &[f64]) -> Option<Summary> {
    Summary::of(&paired_ratios(a, b)?)
}

/// Rounds per setting unless a plan says otherwise: the fewest whose
/// interval of a median covers 95% ([`rounds_for`]), and even, so that two
/// conditions go first equally often.
pub const DEFAULT_ROUNDS: u32 = 6;

/// The coverage a figure's interval is asked for.
pub const LEVEL: f64 = 0.95;

/// The probability that the true median of a continuous quantity lies
/// between the `l`-th smallest and the `l`-th largest of `n` independent
/// rounds: `1 - 2 P(B <= l - 1)`, `B` binomial (`n`, 1/2). (With ties, the
/// interval covers at least that.) 0 when `l` is not in `1..=n/2`: one
/// round, say, is an interval of no width.
pub fn order_coverage(n: usize, l: usize) -> f64 {
    if l == 0 || 2 * l > n {
        return 0.0;
    }
    // P(B = i) for i = 0, 1, ...: 2^-n, then times (n - i) / (i + 1).
    let mut p = 0.5f64.powi(n as i32);
    let mut below = 0.0;
    for i in 0..l {
        below += p;
        p *= (n - i) as f64 / (i + 1) as f64;
    }
    (1.0 - 2.0 * below).max(0.0)
}

/// The interval of a median by order statistics: the narrowest
/// `[x(l), x(n + 1 - l)]` of the sorted rounds whose coverage is at least
/// `level`, with that coverage. When no interval reaches `level` (five
/// rounds or fewer for 95%), the widest, `[min, max]`, with the coverage it
/// has: [`Interval::short`] says so.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    pub lo: f64,
    pub hi: f64,
    /// Its exact coverage, `1 - 2 P(B <= l - 1)`.
    pub coverage: f64,
    /// The coverage it was asked for.
    pub level: f64,
    /// `l`: the interval runs from the `l`-th smallest round to the `l`-th
    /// largest.
    pub rank: usize,
}

impl Interval {
    /// Does it fall short of the coverage it was asked for?
    pub fn short(&self) -> bool {
        self.coverage < self.level
    }
}

/// The order-statistic interval of the median of `rounds` at `level`
/// ([`Interval`]). `None` when there is no round or one is not finite.
/// One round gives that round, with coverage 0.
pub fn median_interval(rounds: &[f64], level: f64) -> Option<Interval> {
    if rounds.is_empty() || !rounds.iter().all(|v| v.is_finite()) {
        return None;
    }
    let mut v = rounds.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    // Coverage falls as l grows: take the largest l that still reaches it.
    let mut rank = 1;
    while order_coverage(n, rank + 1) >= level {
        rank += 1;
    }
    Some(Interval {
        lo: v[rank - 1],
        hi: v[n - rank],
        coverage: order_coverage(n, rank),
        level,
        rank,
    })
}

/// What a table's note says its `[lo, hi]` are, at `n` rounds: "95%
/// interval of the median (order statistics) of 6 rounds", or, with too
/// few rounds for 95%, the range and the coverage it has.
pub fn interval_note(n: usize) -> String {
    match median_interval(&vec![0.0; n.max(1)], LEVEL) {
        Some(i) if !i.short() => format!(
            "Median [95% interval of the median, by order statistics] of {n} rounds"
        ),
        Some(i) => format!(
            "Median [range] of {n} round{}: the range covers the median with \
             probability {:.1}%, short of 95%, which needs {} rounds",
            if n == 1 { "" } else { "s" },
            i.coverage * 100.0,
            rounds_for(LEVEL)
        ),
        None => String::new(),
    }
}

/// The fewest rounds whose widest interval reaches `level`:
/// `1 - 2 / 2^n >= level`. 6 for 95%.
pub fn rounds_for(level: f64) -> usize {
    (2..=64).find(|&n| order_coverage(n, 1) >= level).unwrap_or(64)
}

/// The most looks a verdict takes: the rounds it was run with, then, when
/// its interval straddles a boundary, once more with more rounds.
pub const LOOKS: usize = 2;

/// The error each look may make, so that the two looks together are wrong
/// at most `1 - LEVEL` = 5% of the time (a Bonferroni split, fixed in
/// advance): the first look spends 1/32, what the widest interval of six
/// rounds leaves (96.875% coverage), and the second the remaining 3/160
/// (98.125%). A verdict is wrong only when the true median lies outside the
/// interval it was decided on, and the procedure decides at the first look
/// or at the second, so its chance of a wrong verdict is at most the sum.
pub const LOOK_ERROR: [f64; LOOKS] = [1.0 / 32.0, 0.05 - 1.0 / 32.0];

/// The coverage the verdict's interval is asked for at look `look` (1 or 2).
pub fn look_level(look: usize) -> f64 {
    1.0 - LOOK_ERROR[look.clamp(1, LOOKS) - 1]
}

/// Resamples of the percentile bootstrap that results of schema 1 used for
/// their intervals: kept so that such results can still be checked.
pub const RESAMPLES: usize = 10_000;

/// The bootstrap's seed in results of schema 1.
pub const SEED: u64 = 2006;

/// A small, fixed pseudo-random generator (SplitMix64, Steele et al.
/// 2014): the same seed gives the same draws on every machine.
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// An index below `n`, by Lemire's multiply-shift (the bias, below
    /// n / 2^64, does not matter for a few thousand rounds).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// A number in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The median of `values`, which are not empty.
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The percentile bootstrap interval of the median that results of schema
/// 1 recorded: draw `rounds.len()` rounds with replacement, `resamples`
/// times, and take the 2.5th and 97.5th percentiles of the draws' medians.
/// At five rounds or fewer it is `[min, max]`, whose coverage is below 95%:
/// the reason the lab moved to [`median_interval`]. Used only to check an
/// older file.
pub fn bootstrap_median(
    rounds: &[f64],
    resamples: usize,
    seed: u64,
) -> Option<[f64; 2]> {
    if rounds.is_empty() || resamples == 0 || !rounds.iter().all(|v| v.is_finite()) {
        return None;
    }
    let n = rounds.len();
    let mut rng = SplitMix64(seed);
    let mut draw = vec![0.0; n];
    let mut medians = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        for d in draw.iter_mut() {
            *d = rounds[rng.below(n)];
        }
        medians.push(median(&draw));
    }
    medians.sort_by(f64::total_cmp);
    let tail = (1.0 - LEVEL) / 2.0;
    // Nearest rank, inclusive: the lowest and highest 2.5% fall outside.
    let at = |q: f64| {
        medians[((q * resamples as f64).ceil() as usize).clamp(1, resamples) - 1]
    };
    Some([at(tail), at(1.0 - tail)])
}

/// The rounds' paired ratios `a[k] / b[k]`: the figure an "x times" claim
/// is judged on. `None` when the lists differ in length or are empty.
pub fn paired_ratios(a: &[f64], b: &[f64]) -> Option<Vec<f64>> {
    (a.len() == b.len() && !a.is_empty())
        .then(|| a.iter().zip(b).map(|(a, b)| a / b).collect())
}

/// Round k's median across `lists` (one list of rounds per setting, each
/// round's values measured together), for every round all of them have:
/// `None` when there is no list or one is empty.
pub fn round_medians(lists: &[Vec<f64>]) -> Option<Vec<f64>> {
    let n = lists.iter().map(Vec::len).min().filter(|&n| n > 0)?;
    let round = |k: usize| median(&lists.iter().map(|r| r[k]).collect::<Vec<_>>());
    Some((0..n).map(round).collect())
}

/// How well a straight line fits `points` (x, y): the coefficient of
/// determination R² of the least-squares line, 1 for a perfect fit. `None`
/// for fewer than three points or when y does not vary.
pub fn r_squared(points: &[(f64, f64)]) -> Option<f64> {
    let n = points.len() as f64;
    if points.len() < 3 {
        return None;
    }
    let (mx, my) =
        points.iter().fold((0.0, 0.0), |(sx, sy), (x, y)| (sx + x / n, sy + y / n));
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    let syy: f64 = points.iter().map(|(_, y)| (y - my) * (y - my)).sum();
    if sxx == 0.0 || syy == 0.0 {
        return None;
    }
    Some(sxy * sxy / (sxx * syy))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_bootstrap_is_reproducible_and_brackets_the_median() {
        let rounds = [10.0, 11.0, 9.5, 10.4, 30.0, 10.1, 9.9, 10.2, 10.3, 10.0];
        let a = super::bootstrap_median(&rounds, 10_000, 7).unwrap();
        assert_eq!(Some(a), super::bootstrap_median(&rounds, 10_000, 7));
        let m = super::median(&rounds);
        assert!(a[0] <= m && m <= a[1], "{a:?} around {m}");
        // The outlier moves the median's interval little.
        assert!(a[1] < 11.0, "{a:?}");
        // Five rounds: its "95%" interval of the median is the whole range
        // (each end is drawn three times or more in over 2.5% of draws).
        let five = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(super::bootstrap_median(&five, 10_000, 1), Some([1.0, 5.0]));
        // One round: no width; none or a NaN: no interval.
        assert_eq!(super::bootstrap_median(&[2.0], 100, 1), Some([2.0, 2.0]));
        assert_eq!(super::bootstrap_median(&[], 100, 1), None);
        assert_eq!(super::bootstrap_median(&[1.0, f64::NAN], 100, 1), None);
    }

    #[test]
    fn more_rounds_narrow_the_interval() {
        // The same spread, 6 against 41 rounds.
        let spread = |n: usize| -> Vec<f64> {
            (0..n)
                .map(|k| 1.0 + 0.1 * ((k * 7 % n) as f64 / n as f64 - 0.5))
                .collect()
        };
        let width = |n| {
            let i = super::median_interval(&spread(n), super::LEVEL).unwrap();
            i.hi - i.lo
        };
        assert!(width(41) < width(6) / 2.0, "{} {}", width(41), width(6));
    }

    #[test]
    fn order_statistics_give_the_exact_coverage_and_say_when_it_falls_short() {
        use super::{LEVEL, median_interval, order_coverage, rounds_for};
        // 1 - 2 / 2^n for the whole range: 75%, 87.5%, 93.75%, 96.875%.
        for (n, c) in [(3, 0.75), (4, 0.875), (5, 0.9375), (6, 0.96875)] {
            assert!((order_coverage(n, 1) - c).abs() < 1e-12, "{n}");
        }
        // Ten rounds: the 2nd smallest to the 2nd largest, 1 - 2 * 11 / 1024.
        assert!((order_coverage(10, 2) - (1.0 - 22.0 / 1024.0)).abs() < 1e-12);
        assert_eq!(rounds_for(LEVEL), 6);
        let five = median_interval(&[5.0, 1.0, 3.0, 4.0, 2.0], LEVEL).unwrap();
        assert_eq!((five.lo, five.hi, five.rank), (1.0, 5.0, 1));
        assert!(five.short(), "{five:?}");
        let ten: Vec<f64> = (1..=10).map(f64::from).collect();
        let i = median_interval(&ten, LEVEL).unwrap();
        assert_eq!((i.lo, i.hi, i.rank), (2.0, 9.0, 2));
        assert!(!i.short() && i.coverage >= LEVEL, "{i:?}");
        // One round: no width, no coverage; none or a NaN: no interval.
        let one = median_interval(&[2.0], LEVEL).unwrap();
        assert_eq!((one.lo, one.hi, one.coverage), (2.0, 2.0, 0.0));
        assert_eq!(median_interval(&[], LEVEL), None);
        assert_eq!(median_interval(&[1.0, f64::NAN], LEVEL), None);
    }

    /// `n` rounds of a skewed quantity (exponential, median ln 2), drawn.
    fn draw(rng: &mut super::SplitMix64, n: usize) -> Vec<f64> {
        (0..n).map(|_| -(1.0 - rng.unit()).ln()).collect()
    }

    /// Four standard errors of a proportion near `p` over `draws` draws:
    /// the tolerance of a simulated coverage (its seed is fixed, so the
    /// test gives the same answer every time).
    fn tolerance(p: f64, draws: usize) -> f64 {
        4.0 * (p * (1.0 - p) / draws as f64).sqrt()
    }

    #[test]
    fn the_intervals_cover_what_they_say_on_ten_thousand_simulated_runs() {
        use super::{LEVEL, SplitMix64, median_interval};
        let truth = std::f64::consts::LN_2;
        let draws = 10_000;
        let mut rng = SplitMix64(32);
        for n in [3, 5, 6, 10, 30] {
            let (mut covered, mut stated) = (0, 0.0);
            for _ in 0..draws {
                let i = median_interval(&draw(&mut rng, n), LEVEL).unwrap();
                covered += usize::from(i.lo <= truth && truth <= i.hi);
                stated = i.coverage;
            }
            let seen = covered as f64 / draws as f64;
            eprintln!("{n} rounds: covered {seen:.4}, stated {stated:.4}");
            assert!(
                (seen - stated).abs() <= tolerance(stated, draws),
                "{n} rounds: covered {seen}, stated {stated}"
            );
            // From six rounds on, at least 95%; below, the shortfall is
            // what the interval says it is.
            assert_eq!(stated >= LEVEL, n >= 6, "{n} rounds: {stated}");
        }
        // The percentile bootstrap at five rounds is [min, max] too, but
        // called 95%: it covers 93.75%.
        let mut covered = 0;
        for k in 0..draws {
            let [lo, hi] =
                super::bootstrap_median(&draw(&mut rng, 5), 1000, k as u64).unwrap();
            covered += usize::from(lo <= truth && truth <= hi);
        }
        let seen = covered as f64 / draws as f64;
        assert!((seen - 0.9375).abs() <= tolerance(0.9375, draws), "{seen}");
    }

    /// The share of simulated verdicts decided on an interval that misses
    /// the true median, when a rule's boundary sits at the true median (the
    /// worst case: every look whose interval covers it is too close to
    /// call, so the second look is taken as often as it can be), with the
    /// looks at `levels`: 6 rounds, then 18 fresh ones.
    fn wrong_share(levels: [f64; 2], draws: usize) -> f64 {
        let truth = std::f64::consts::LN_2;
        let mut rng = super::SplitMix64(33);
        let mut wrong = 0;
        for _ in 0..draws {
            for (look, n) in [(0, 6), (1, 18)] {
                let i = super::median_interval(&draw(&mut rng, n), levels[look])
                    .unwrap();
                if !(i.lo <= truth && truth <= i.hi) {
                    wrong += 1; // decided, on the wrong side
                    break;
                }
                // Too close to call: look again, if a look is left.
            }
        }
        wrong as f64 / draws as f64
    }

    #[test]
    fn two_looks_stay_within_five_percent_where_an_unadjusted_second_look_does_not()
    {
        use super::{LEVEL, look_level};
        let draws = 10_000;
        let split = wrong_share([look_level(1), look_level(2)], draws);
        let naive = wrong_share([LEVEL, LEVEL], draws);
        eprintln!("wrong: {split:.4} split, {naive:.4} unadjusted");
        assert!(split <= 1.0 - LEVEL, "{split}");
        // Each look at 95%, as the lab did before: about 6%.
        assert!(naive - tolerance(0.06, draws) > 1.0 - LEVEL, "{naive}");
        assert!((super::LOOK_ERROR.iter().sum::<f64>() - 0.05).abs() < 1e-12);
    }

    #[test]
    fn balanced_means_each_condition_first_equally_often() {
        for (n, rounds) in [(2, 6), (3, 6), (4, 8), (1, 5)] {
            assert!(super::balanced(n, rounds));
            let mut first = vec![0; n];
            for r in 0..rounds {
                first[super::round_order(n, r)[0]] += 1;
            }
            assert!(first.iter().all(|f| *f == rounds / n), "{first:?}");
        }
        assert!(!super::balanced(2, 5));
    }

    #[test]
    fn rounds_rotate_and_two_programs_alternate() {
        assert_eq!(super::round_order(2, 0), [0, 1]);
        assert_eq!(super::round_order(2, 1), [1, 0]);
        assert_eq!(super::round_order(3, 1), [1, 2, 0]);
        assert_eq!(super::round_order(3, 5), [2, 0, 1]);
        assert!(super::round_order(0, 3).is_empty());
    }

    #[test]
    fn ratios_pair_rounds_not_medians() {
        // Round by round the first is twice the second, although the
        // medians' quotient (4 / 3) says otherwise.
        let r = super::paired_ratio(&[2.0, 4.0, 8.0], &[1.0, 2.0, 4.0]).unwrap();
        assert_eq!((r.min, r.median, r.max), (2.0, 2.0, 2.0));
        assert!(super::paired_ratio(&[], &[]).is_none());
    }

    #[test]
    fn round_medians_take_each_round_all_lists_have() {
        let lists = [vec![1.0, 5.0, 9.0], vec![2.0, 6.0], vec![3.0, 4.0, 0.0]];
        assert_eq!(super::round_medians(&lists), Some(vec![2.0, 5.0]));
        assert_eq!(super::round_medians(&[]), None);
        assert_eq!(super::round_medians(&[vec![1.0], vec![]]), None);
    }

    #[test]
    fn r_squared_is_one_on_a_line_and_low_off_it() {
        let line = [(1.0, 3.0), (2.0, 5.0), (4.0, 9.0)];
        assert!((super::r_squared(&line).unwrap() - 1.0).abs() < 1e-12);
        let bent = [(1.0, 1.0), (2.0, 9.0), (3.0, 1.0), (4.0, 9.0)];
        assert!(super::r_squared(&bent).unwrap() < 0.5);
        assert_eq!(super::r_squared(&line[..2]), None);
    }

    use super::*;

    #[test]
    fn five_rounds_like_the_article() {
        let s = Summary::of(&[5.0, 1.0, 3.0, 100.0, 4.0]).unwrap();
        assert_eq!(s.n, 5);
        assert_eq!(s.median, 4.0);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 100.0);
    }

    #[test]
    fn small_and_even_counts() {
        assert_eq!(Summary::of(&[]), None);
        let one = Summary::of(&[2.0]).unwrap();
        assert_eq!((one.median, one.min, one.max), (2.0, 2.0, 2.0));
        let two = Summary::of(&[2.0, 4.0]).unwrap();
        assert_eq!((two.median, two.min, two.max), (3.0, 2.0, 4.0));
        let four = Summary::of(&[1.0, 2.0, 4.0, 9.0]).unwrap();
        assert_eq!((four.n, four.median), (4, 3.0));
    }
}
