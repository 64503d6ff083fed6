//! Order statistics over per-evaluation timings, and units.

use std::time::Duration;

/// Per-evaluation timings, sorted on construction.
#[derive(Clone, Debug)]
pub struct Samples {
    sorted_ns: Vec<u64>,
}

impl Samples {
    pub fn new(mut ns: Vec<u64>) -> Samples {
        assert!(!ns.is_empty(), "no samples");
        ns.sort_unstable();
        Samples { sorted_ns: ns }
    }

    pub fn from_durations(durations: &[Duration]) -> Samples {
        Samples::new(
            durations
                .iter()
                .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
                .collect(),
        )
    }

    pub fn len(&self) -> usize {
        self.sorted_ns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sorted_ns.is_empty()
    }

    /// Nearest-rank percentile: the smallest sample with at least `p`% of the samples at or
    /// below it. With fewer than 100 samples p99 is the maximum.
    pub fn percentile(&self, p: f64) -> f64 {
        let n = self.sorted_ns.len();
        let rank = ((p / 100.0) * n as f64).ceil() as usize;
        self.sorted_ns[rank.clamp(1, n) - 1] as f64
    }

    pub fn p50(&self) -> f64 {
        self.percentile(50.0)
    }

    pub fn p99(&self) -> f64 {
        self.percentile(99.0)
    }
}

/// `1234` ns as `1.23 us`, `12.3 ms`, ...
pub fn fmt_ns(ns: f64) -> String {
    if ns < 0.0 {
        return format!("-{}", fmt_ns(-ns));
    }
    if ns < 1_000.0 {
        format!("{ns:.0} ns")
    } else if ns < 1_000_000.0 {
        format!("{:.1} us", ns / 1_000.0)
    } else if ns < 1_000_000_000.0 {
        format!("{:.2} ms", ns / 1_000_000.0)
    } else {
        format!("{:.2} s", ns / 1_000_000_000.0)
    }
}

/// Bytes as `512 B`, `9.8 KiB`, `2.00 MiB`.
pub fn fmt_bytes(bytes: u64) -> String {
    let b = bytes as f64;
    if bytes < 1024 {
        format!("{bytes} B")
    } else if b < 1024.0 * 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{:.2} MiB", b / (1024.0 * 1024.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let s = Samples::new((1..=100).rev().collect());
        assert_eq!(s.p50(), 50.0);
        assert_eq!(s.p99(), 99.0);
        let few = Samples::new(vec![3, 1, 2]);
        assert_eq!(few.p99(), 3.0);
        assert_eq!(few.p50(), 2.0);
    }

    #[test]
    fn formats_units() {
        assert_eq!(fmt_ns(950.0), "950 ns");
        assert_eq!(fmt_ns(41_234.0), "41.2 us");
        assert_eq!(fmt_ns(12_345_678.0), "12.35 ms");
        assert_eq!(fmt_ns(-73_475.0), "-73.5 us");
        assert_eq!(fmt_bytes(512), "512 B");
        assert_eq!(fmt_bytes(10 * 1024), "10.0 KiB");
        assert_eq!(fmt_bytes(3 * 1024 * 1024), "3.00 MiB");
    }
}
