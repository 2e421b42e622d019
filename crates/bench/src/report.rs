//! Latency summaries, the seed's 300 ns bins, and process resource usage.

use hdrhistogram::Histogram;
use serde::Serialize;

/// min/mean/p50/p99/max of a latency histogram, in nanoseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Summary {
    /// Samples.
    pub count: u64,
    /// Minimum.
    pub min: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Maximum.
    pub max: u64,
}

impl Summary {
    /// Summarises `h` (all zeros when empty).
    pub fn of(h: &Histogram<u64>) -> Summary {
        if h.is_empty() {
            return Summary::default();
        }
        Summary {
            count: h.len(),
            min: h.min(),
            mean: h.mean(),
            p50: h.value_at_quantile(0.5),
            p99: h.value_at_quantile(0.99),
            max: h.max(),
        }
    }
}

/// Width of the seed's histogram bins.
pub const BIN_NS: u64 = 300;
/// Bins reported individually; the last one collects everything above.
pub const BINS: u64 = 10;

/// One 300 ns bin: its centre, its count and its share of all samples.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Bin {
    /// Centre of the bin in ns (`u64::MAX` for the overflow bin).
    pub centre_ns: u64,
    /// Samples in the bin.
    pub count: u64,
    /// Percentage of all samples.
    pub percent: f64,
}

/// The histogram in 300 ns bins (150, 450, ... 2850) plus one overflow bin.
pub fn bins_300ns(h: &Histogram<u64>) -> Vec<Bin> {
    let total = h.len().max(1) as f64;
    let mut counts = vec![0u64; BINS as usize + 1];
    for v in h.iter_recorded() {
        let bin = (v.value_iterated_to() / BIN_NS).min(BINS) as usize;
        counts[bin] += v.count_at_value();
    }
    counts
        .into_iter()
        .enumerate()
        .map(|(i, count)| Bin {
            centre_ns: if i as u64 == BINS {
                u64::MAX
            } else {
                i as u64 * BIN_NS + BIN_NS / 2
            },
            count,
            percent: count as f64 * 100.0 / total,
        })
        .collect()
}

/// Context switches of the whole process so far.
#[derive(Debug, Clone, Copy, Default)]
pub struct ContextSwitches {
    /// Voluntary (blocked: waited for a futex, socket...).
    pub voluntary: u64,
    /// Involuntary (preempted).
    pub involuntary: u64,
}

impl ContextSwitches {
    /// Reads `getrusage(RUSAGE_SELF)` (zeros if it fails).
    pub fn now() -> ContextSwitches {
        use nix::sys::resource::{getrusage, UsageWho};
        match getrusage(UsageWho::RUSAGE_SELF) {
            Ok(u) => ContextSwitches {
                voluntary: u64::try_from(u.voluntary_context_switches()).unwrap_or(0),
                involuntary: u64::try_from(u.involuntary_context_switches()).unwrap_or(0),
            },
            Err(_) => ContextSwitches::default(),
        }
    }

    /// `self - earlier`.
    pub fn since(self, earlier: ContextSwitches) -> ContextSwitches {
        ContextSwitches {
            voluntary: self.voluntary.saturating_sub(earlier.voluntary),
            involuntary: self.involuntary.saturating_sub(earlier.involuntary),
        }
    }
}

/// Median of `values` (NaN when empty).
pub fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 0 {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    }
}

/// This process's user + system CPU seconds so far (`getrusage`; 0 if
/// unknown).
pub(crate) fn own_cpu_seconds() -> f64 {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_SELF)
        .map(|u| {
            let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 * 1e-6;
            t(u.user_time()) + t(u.system_time())
        })
        .unwrap_or(0.0)
}

/// A latency histogram in ns: 1 ns .. 100 s, 3 significant figures.
#[allow(
    clippy::expect_used,
    reason = "constant bounds that hdrhistogram accepts"
)]
pub(crate) fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_split_at_300ns_and_overflow() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 2).unwrap();
        for v in [100, 299, 700, 760, 5000] {
            h.record(v).unwrap();
        }
        let b = bins_300ns(&h);
        assert_eq!(b.len(), 11);
        assert_eq!((b[0].centre_ns, b[0].count), (150, 2));
        assert_eq!((b[2].centre_ns, b[2].count), (750, 2));
        assert_eq!((b[10].centre_ns, b[10].count), (u64::MAX, 1));
        assert!((b.iter().map(|b| b.percent).sum::<f64>() - 100.0).abs() < 1e-9);
    }

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&mut []).is_nan());
    }
}
