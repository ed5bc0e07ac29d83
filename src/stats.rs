//! Rounds and their summaries: median, min and max. (The articles averaged
//! the middle three of five rounds; the lab reports the median, which needs
//! no rounds thrown away, with the lowest and the highest beside it.)

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
    let ratios: Vec<f64> = a.iter().zip(b).map(|(a, b)| a / b).collect();
    Summary::of(&ratios)
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
