//! A compact log-linear latency histogram: 8 linear sub-buckets per power of two,
//! in units of 64 ns, from 0 to 2^36 ns (68.7 s; longer samples land in the last
//! bucket, the exact maximum is kept separately). A bucket is at most 1/8 of its
//! lower bound wide, so a percentile reported as the bucket's midpoint is within
//! 6.25% of the true value (plus 32 ns at the bottom of the range).
//!
//! 224 buckets. The per-thread arrays hold them as `u32` (896 bytes per procedure
//! per thread); totals are `u64`.

/// log2 of the unit, in nanoseconds.
const UNIT_SHIFT: u32 = 6;
/// log2 of the sub-buckets per power of two.
const SUB_BITS: u32 = 3;
const SUB: usize = 1 << SUB_BITS;
/// Largest exponent (of the value in units) with its own buckets.
const MAX_EXP: u32 = 29;

/// Number of buckets.
pub(crate) const BUCKETS: usize = (MAX_EXP - SUB_BITS + 2) as usize * SUB;

/// The bucket of a duration of `ns` nanoseconds.
#[inline]
pub(crate) fn bucket(ns: u64) -> usize {
    let u = ns >> UNIT_SHIFT;
    if u < SUB as u64 {
        return u as usize;
    }
    let exp = 63 - u.leading_zeros();
    if exp > MAX_EXP {
        return BUCKETS - 1;
    }
    let mantissa = ((u >> (exp - SUB_BITS)) as usize) & (SUB - 1);
    (exp - SUB_BITS + 1) as usize * SUB + mantissa
}

/// The range `[low, high)` of bucket `i`, in nanoseconds.
pub(crate) fn bounds(i: usize) -> (u64, u64) {
    let (low, width) = if i < 2 * SUB {
        (i as u64, 1)
    } else {
        let exp = (i / SUB) as u32 + SUB_BITS - 1;
        let mantissa = (SUB + i % SUB) as u64;
        let shift = exp - SUB_BITS;
        (mantissa << shift, 1u64 << shift)
    };
    (low << UNIT_SHIFT, (low + width) << UNIT_SHIFT)
}

/// The value below which a fraction `q` of the samples in `counts` lie, as the
/// midpoint of its bucket, at most `max` (the largest sample). 0 with no samples.
pub(crate) fn quantile(counts: &[u64], total: u64, q: f64, max: u64) -> u64 {
    if total == 0 {
        return 0;
    }
    // The rank of the sample wanted, 1-based: at least the first sample.
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
    let mut seen = 0;
    for (i, &c) in counts.iter().enumerate() {
        seen += c;
        if seen >= rank {
            let (low, high) = bounds(i);
            return (low + (high - low) / 2).min(max);
        }
    }
    max
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_cover_the_range() {
        assert_eq!(BUCKETS, 224);
        let mut next = 0;
        for i in 0..BUCKETS {
            let (low, high) = bounds(i);
            assert_eq!(low, next, "bucket {i}");
            assert!(high > low);
            assert_eq!(bucket(low), i);
            assert_eq!(bucket(high - 1), i);
            // Width at most 1/8 of the lower bound above the linear part.
            if i >= 2 * SUB {
                assert!((high - low) * 8 <= low, "bucket {i}");
            }
            next = high;
        }
        assert_eq!(next, 1 << 36);
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        assert_eq!(bucket(1 << 40), BUCKETS - 1);
    }

    #[test]
    fn quantiles_are_within_the_stated_error() {
        let mut counts = vec![0u64; BUCKETS];
        // 1..=1000 µs, one sample each.
        for us in 1..=1000u64 {
            counts[bucket(us * 1000)] += 1;
        }
        for (q, exact) in [(0.5, 500_000.0), (0.9, 900_000.0), (0.99, 990_000.0)] {
            let got = quantile(&counts, 1000, q, 1_000_000) as f64;
            assert!((got - exact).abs() / exact < 0.0625, "q {q}: {got}");
        }
        assert_eq!(quantile(&counts, 1000, 1.0, 1_000_000), 1_000_000);
        assert_eq!(quantile(&counts, 0, 0.5, 0), 0);
    }
}
