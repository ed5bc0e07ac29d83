//! Rounds and their summaries: median, min and max, and the 95% interval
//! of a median by the bootstrap. (The articles averaged the middle three of
//! five rounds; the lab reports the median, which needs no rounds thrown
//! away, with its interval beside it.)

use serde::{Deserialize, Serialize};

/// A summary of repeated measurements of one quantity.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
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
        let median =
            if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        Some(Summary { n, median, min: v[0], max: v[n - 1] })
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
/// settings) run in round `round`. It rotates by one each round, so two
/// programs alternate who goes first, and slow drift (clock frequency,
/// caches, other load) does not always favour the same one.
pub fn round_order(n: usize, round: usize) -> Vec<usize> {
    (0..n).map(|k| (k + round) % n).collect()
}

/// Paired ratios: `a[i] / b[i]` of each round, both measured back to back
/// in the same round, summarised. A ratio of medians would mix rounds that
/// drift apart; this is the figure the lab's "x times" claims use. `None`
/// when there is no pair.
pub fn paired_ratio(a: &[f64], b: &[f64]) -> Option<Summary> {
    Summary::of(&paired_ratios(a, b)?)
}

/// Resamples of the bootstrap: criterion.rs's default, and the least the
/// lab's verdicts accept.
pub const RESAMPLES: usize = 10_000;

/// The bootstrap's seed, recorded with every interval, so that the
/// interval (and the verdict on it) can be recomputed from the file.
pub const SEED: u64 = 2006;

/// The interval's coverage.
pub const LEVEL: f64 = 0.95;

/// A small, fixed pseudo-random generator (SplitMix64, Steele et al.
/// 2014): the same seed gives the same resamples on every machine.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// An index below `n`, by Lemire's multiply-shift (the bias, below
    /// n / 2^64, does not matter for a few thousand rounds).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }
}

/// The median of `values`, which are not empty.
pub fn median(values: &[f64]) -> f64 {
    Summary::of(values).map_or(f64::NAN, |s| s.median)
}

/// The percentile bootstrap interval of the median of `rounds`: draw
/// `rounds.len()` rounds with replacement, `resamples` times, take each
/// draw's median, and return the 2.5th and 97.5th percentiles of those
/// medians (for [`LEVEL`] 0.95). One round gives the round itself: an
/// interval of no width, which says nothing about the spread. `None` when
/// there is no round or one is not finite.
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
        draw.sort_by(f64::total_cmp);
        medians.push(if n % 2 == 1 {
            draw[n / 2]
        } else {
            (draw[n / 2 - 1] + draw[n / 2]) / 2.0
        });
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
        // Five rounds: the 95% interval of the median is the whole range
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
        // The same spread, 5 against 41 rounds.
        let spread = |n: usize| -> Vec<f64> {
            (0..n)
                .map(|k| 1.0 + 0.1 * ((k * 7 % n) as f64 / n as f64 - 0.5))
                .collect()
        };
        let width = |n| {
            let [lo, hi] = super::bootstrap_median(&spread(n), 10_000, 3).unwrap();
            hi - lo
        };
        assert!(width(41) < width(5) / 2.0, "{} {}", width(41), width(5));
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
