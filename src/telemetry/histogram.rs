//! Latency histograms with fixed buckets: relaxed atomics to observe into from any thread, and
//! a plain snapshot to read. Shared by the client's counters (`telemetry`) and the node workers'
//! command latency (`node`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the latency histograms' buckets, in seconds (the last bucket is +Inf): from
/// 100 µs, a round trip on loopback or in one zone, to 10 s, a long wait.
pub const BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// A latency histogram: counts per bucket of [`BUCKETS`] (the last one +Inf), their sum and
/// count.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Histogram {
    /// Counts per bucket (not cumulative), `BUCKETS.len() + 1` of them.
    pub buckets: Vec<u64>,
    /// Sum of the observations.
    pub sum: Duration,
    /// Observations.
    pub count: u64,
}

pub(crate) struct AtomicHistogram {
    buckets: [AtomicU64; BUCKETS.len() + 1],
    sum_ns: AtomicU64,
    count: AtomicU64,
}

impl Default for AtomicHistogram {
    fn default() -> Self {
        AtomicHistogram::new()
    }
}

impl AtomicHistogram {
    pub(crate) fn new() -> Self {
        AtomicHistogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_ns: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    pub(crate) fn observe(&self, d: Duration) {
        self.observe_n(d, 1);
    }

    /// `n` observations of `d` at once (the requests of one pipeline share its round trip).
    pub(crate) fn observe_n(&self, d: Duration, n: u64) {
        let s = d.as_secs_f64();
        let i = BUCKETS
            .iter()
            .position(|&b| s <= b)
            .unwrap_or(BUCKETS.len());
        self.buckets[i].fetch_add(n, Ordering::Relaxed);
        let ns = d.as_nanos().min(u64::MAX as u128) as u64;
        self.sum_ns
            .fetch_add(ns.saturating_mul(n), Ordering::Relaxed);
        self.count.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> Histogram {
        Histogram {
            buckets: self
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
            sum: Duration::from_nanos(self.sum_ns.load(Ordering::Relaxed)),
            count: self.count.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_count_into_their_buckets() {
        let h = AtomicHistogram::new();
        h.observe(Duration::from_micros(300));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(60));
        let s = h.snapshot();
        assert_eq!(s.count, 3);
        assert_eq!(s.buckets[2], 1, "300 µs is in (250 µs, 500 µs]");
        assert_eq!(s.buckets[5], 1, "3 ms is in (2.5 ms, 5 ms]");
        assert_eq!(s.buckets[BUCKETS.len()], 1);
        assert_eq!(s.buckets.iter().sum::<u64>(), 3);
    }
}
