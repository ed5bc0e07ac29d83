//! Latency summaries for the load generators (`mq`'s `load`, `servers`'
//! `client`): nearest-rank percentiles, the largest and the mean of the
//! latencies a run measured, in microseconds.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Latency {
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
}

impl Latency {
    /// Summarise latencies in nanoseconds (sorted here); all zero when
    /// there are none. Percentile p is the nearest rank: the smallest
    /// value with at least p% of the values at or below it.
    pub fn of_ns(ns: &mut [u64]) -> Latency {
        if ns.is_empty() {
            return Latency::default();
        }
        ns.sort_unstable();
        let us = |v: u64| v as f64 / 1e3;
        let rank = |p: f64| {
            let i = ((p / 100.0) * ns.len() as f64).ceil() as usize;
            us(ns[i.clamp(1, ns.len()) - 1])
        };
        Latency {
            p50_us: rank(50.0),
            p90_us: rank(90.0),
            p99_us: rank(99.0),
            max_us: us(ns[ns.len() - 1]),
            mean_us: ns.iter().map(|&v| v as f64).sum::<f64>()
                / ns.len() as f64
                / 1e3,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_ranks() {
        let mut ns: Vec<u64> = (1..=100).rev().map(|v| v * 1000).collect();
        let l = Latency::of_ns(&mut ns);
        assert_eq!(
            (l.p50_us, l.p90_us, l.p99_us, l.max_us),
            (50.0, 90.0, 99.0, 100.0)
        );
        assert_eq!(l.mean_us, 50.5);
        let l = Latency::of_ns(&mut [7000, 1000]);
        assert_eq!((l.p50_us, l.p99_us, l.mean_us), (1.0, 7.0, 4.0));
        assert_eq!(Latency::of_ns(&mut []), Latency::default());
    }
}
