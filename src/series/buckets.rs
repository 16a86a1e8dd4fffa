//! `BucketCounts`: the Prometheus histogram's buckets, added from each
//! interval's HDR histogram as it arrives.

use crate::stats::LatencyStats;

/// Counts per Prometheus bucket, derived from the HDR histograms of the
/// intervals as they arrive, so they are cumulative and monotonic for the
/// life of the process. A sample goes to the first bucket whose bound is
/// at or above the upper edge of its HDR bucket (within 1/128 of the
/// value): never into a bucket below its true value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketCounts {
    bounds_ns: Vec<u64>,
    /// Per bucket, not cumulative; the last entry counts samples above every
    /// bound (they appear only in `+Inf`).
    counts: Vec<u64>,
}

impl BucketCounts {
    pub fn new(bounds_ns: &[u64]) -> BucketCounts {
        BucketCounts {
            bounds_ns: bounds_ns.to_vec(),
            counts: vec![0; bounds_ns.len() + 1],
        }
    }

    pub fn add(&mut self, interval: &LatencyStats) {
        for bucket in interval.hdr().buckets() {
            let upper_edge = bucket.highest_ns();
            let idx = self.bounds_ns.partition_point(|&bound| bound < upper_edge);
            self.counts[idx] += bucket.count;
        }
        // Samples past the HDR range are above every bound.
        *self.counts.last_mut().expect("never empty") += interval.hdr_overflows;
    }

    pub fn merge(&mut self, other: &BucketCounts) {
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
    }

    pub fn bounds_ns(&self) -> &[u64] {
        &self.bounds_ns
    }

    /// Cumulative counts per bound (Prometheus' `le`), without `+Inf`.
    pub fn cumulative(&self) -> Vec<u64> {
        self.counts[..self.bounds_ns.len()]
            .iter()
            .scan(0, |sum, c| {
                *sum += c;
                Some(*sum)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::NS_PER_SEC;

    #[test]
    fn bucket_counts_never_put_a_sample_below_its_value() {
        let bounds = [1_000, 2_000, 5_000, 10_000];
        let mut buckets = BucketCounts::new(&bounds);
        let mut interval = LatencyStats::new(u64::MAX, None);
        for v in [
            996, 999, 1_000, 1_001, 2_000, 4_999, 4_992, 5_023, 5_024, 9_000, 50_000,
        ] {
            interval.record(v, 0);
        }
        interval.record(100 * NS_PER_SEC, 0); // past the HDR range
        buckets.add(&interval);
        // 996 to 999 share an HDR bucket within the 1 µs bound; 1,000 to
        // 1,003 one whose upper edge is above it, so 1,000 itself is
        // counted above the bound, never below its value; so are 4,992 to
        // 5,023 above 5 µs.
        assert_eq!(buckets.cumulative(), vec![2, 4, 5, 10]);
        assert_eq!(buckets.counts.iter().sum::<u64>(), interval.count);
        let mut twice = buckets.clone();
        twice.merge(&buckets);
        assert_eq!(twice.cumulative(), vec![4, 8, 10, 20]);
    }
}
