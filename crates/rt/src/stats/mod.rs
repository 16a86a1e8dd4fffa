//! Latency statistics: exact count/min/max/sum, an HDR histogram in
//! nanoseconds, and optionally cyclictest's linear `-h` histogram.
//!
//! One `LatencyStats` type serves three roles: the interval a sampler
//! records into, the buffer that travels through the handoff, and the
//! consumer's cumulative state. The first two are made by
//! `LatencyStats::for_sampler` (or `empty_interval`): all of their memory is
//! allocated up front and `record`, `reset` and `merge` never allocate,
//! which is what lets a real-time sampler own one. `LatencyStats::new`
//! makes the third, whose histogram grows by pages as it is used.

use std::fmt;

mod bins;
pub mod hdr;
mod linear;
mod sample_log;

pub use bins::{add_bins_us, for_each_bin_us};
pub use hdr::Hdr;
pub use linear::LinearHistogram;
pub use sample_log::{LoggedSample, SampleLog};

/// The HDR histogram tracks 0 ns to 2^34 ns (17.2 s, so at least 10 s) at
/// 2 significant digits: every recorded value is within 1/128 (0.78 %) of
/// the true one. Larger samples are counted as overflows and still update
/// the exact maximum. Why 2 digits: ARCHITECTURE.md, "Memory per CPU".
pub const HDR_LOWEST_NS: u64 = 1;
pub const HDR_HIGHEST_NS: u64 = hdr::HIGHEST_NS;
pub const HDR_SIGNIFICANT_DIGITS: u8 = 2;

/// The on-disk record keeps the same 2 significant digits (a quarter of
/// the size on disk of 3 digits, measured: a minute of one CPU at 1 kHz,
/// 1.1 KB of base64 against 3.8 KB), so a record is exactly what the
/// daemon counted.
pub const RECORD_SIGNIFICANT_DIGITS: u8 = HDR_SIGNIFICANT_DIGITS;

/// The exact numbers `LatencyStats` keeps beside its histogram, to rebuild
/// one from a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exact {
    pub count: u64,
    pub sum_ns: u128,
    pub min_ns: u64,
    pub max_ns: u64,
    pub missed: u64,
    pub hdr_overflows: u64,
    pub spikes: u64,
}

/// Merging statistics of different shapes is a programming error; it is
/// reported rather than panicking, so no sample vanishes silently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeMismatch;

impl fmt::Display for ShapeMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("latency statistics with different histogram layouts cannot be merged")
    }
}

impl std::error::Error for ShapeMismatch {}

#[derive(Debug, Clone)]
pub struct LatencyStats {
    pub count: u64,
    /// `u64::MAX` while empty; use `min_ns()` to read it.
    min_ns: u64,
    pub max_ns: u64,
    pub sum_ns: u128,
    /// The most recent sample (cyclictest's "Act").
    pub last_ns: u64,
    /// Samples the HDR histogram does not hold (they are in
    /// count/min/max/sum): above its range, or, in a sampler's interval,
    /// past a 16-bit counter with the carry table full (see `hdr`).
    /// Quantiles rank them above all others.
    pub hdr_overflows: u64,
    /// Samples above `spike_threshold_ns`.
    pub spikes: u64,
    /// Periods skipped because a wake-up came after the next deadline.
    pub missed: u64,
    /// `CLOCK_MONOTONIC` times of the first and the last sample, and of the
    /// maximum (the latest one, if several are equal): where the samples
    /// lie in time, so that windows file them by when they happened, not
    /// by when they were collected. `u64::MAX`, 0 and 0 while empty.
    first_at_ns: u64,
    last_at_ns: u64,
    max_at_ns: u64,
    spike_threshold_ns: u64,
    hdr: Hdr,
    linear: Option<LinearHistogram>,
    /// Single samples for `measure -v` and `--spike`; never merged (each
    /// interval's is read as it arrives).
    samples: Option<SampleLog>,
}

impl LatencyStats {
    /// Cumulative statistics: the histogram allocates its pages as they
    /// are first used. Never for a sampler (see `for_sampler`).
    pub fn new(spike_threshold_ns: u64, linear: Option<LinearHistogram>) -> LatencyStats {
        LatencyStats::with_hdr(spike_threshold_ns, linear, Hdr::paged())
    }

    /// Statistics a real-time sampler records into: everything allocated
    /// and written now, nothing later.
    pub fn for_sampler(spike_threshold_ns: u64, linear: Option<LinearHistogram>) -> LatencyStats {
        LatencyStats::with_hdr(spike_threshold_ns, linear, Hdr::dense())
    }

    /// Empty statistics of the same shape (threshold, linear histogram)
    /// that a sampler can record into.
    pub fn empty_interval(&self) -> LatencyStats {
        let mut linear = self.linear.clone();
        if let Some(linear) = &mut linear {
            linear.reset();
        }
        let mut samples = self.samples.clone();
        if let Some(samples) = &mut samples {
            samples.reset();
        }
        LatencyStats::for_sampler(self.spike_threshold_ns, linear).with_sample_log(samples)
    }

    /// The same statistics keeping single samples in `log` too.
    pub fn with_sample_log(mut self, log: Option<SampleLog>) -> LatencyStats {
        self.samples = log;
        self
    }

    /// The single samples kept since the last reset, if any are kept.
    pub fn sample_log(&self) -> Option<&SampleLog> {
        self.samples.as_ref()
    }

    fn with_hdr(
        spike_threshold_ns: u64,
        linear: Option<LinearHistogram>,
        hdr: Hdr,
    ) -> LatencyStats {
        LatencyStats {
            count: 0,
            min_ns: u64::MAX,
            max_ns: 0,
            sum_ns: 0,
            last_ns: 0,
            hdr_overflows: 0,
            spikes: 0,
            missed: 0,
            first_at_ns: u64::MAX,
            last_at_ns: 0,
            max_at_ns: 0,
            spike_threshold_ns,
            hdr,
            linear,
            samples: None,
        }
    }

    /// Statistics rebuilt from a histogram and the exact numbers kept
    /// beside it (a record's entry). Times of samples are unknown (0).
    /// Samples of `hdr` past the layout's range join the overflows.
    pub fn from_parts(
        spike_threshold_ns: u64,
        hdr: &hdrhistogram::Histogram<u64>,
        exact: Exact,
    ) -> LatencyStats {
        let mut stats = LatencyStats::new(spike_threshold_ns, None);
        let (hdr, past) = Hdr::from_hdrhistogram(hdr);
        stats.hdr = hdr;
        stats.count = exact.count;
        stats.sum_ns = exact.sum_ns;
        stats.min_ns = if exact.count == 0 {
            u64::MAX
        } else {
            exact.min_ns
        };
        stats.max_ns = exact.max_ns;
        stats.missed = exact.missed;
        stats.hdr_overflows = exact.hdr_overflows + past;
        stats.spikes = exact.spikes;
        if exact.count > 0 {
            stats.first_at_ns = 0;
        }
        stats
    }

    /// The exact numbers, as `from_parts` takes them.
    pub fn exact(&self) -> Exact {
        Exact {
            count: self.count,
            sum_ns: self.sum_ns,
            min_ns: self.min_ns(),
            max_ns: self.max_ns,
            missed: self.missed,
            hdr_overflows: self.hdr_overflows,
            spikes: self.spikes,
        }
    }

    /// Records one wake-up latency whose time is not known (tests,
    /// benchmarks): as `record_at` at time 0.
    #[inline]
    pub fn record(&mut self, latency_ns: u64, sample_idx: u64) {
        self.record_at(latency_ns, sample_idx, 0);
    }

    /// Records one wake-up latency, taken at `at_ns` (`CLOCK_MONOTONIC`).
    /// `sample_idx` is the sample's 0-based number over the whole run (kept
    /// for `-h` overflows). Never allocates.
    #[inline]
    pub fn record_at(&mut self, latency_ns: u64, sample_idx: u64, at_ns: u64) {
        self.count += 1;
        self.sum_ns += u128::from(latency_ns);
        self.min_ns = self.min_ns.min(latency_ns);
        if latency_ns >= self.max_ns {
            self.max_ns = latency_ns;
            self.max_at_ns = at_ns;
        }
        self.first_at_ns = self.first_at_ns.min(at_ns);
        self.last_at_ns = at_ns;
        self.last_ns = latency_ns;
        if latency_ns > self.spike_threshold_ns {
            self.spikes += 1;
        }
        if !self.hdr.record(latency_ns) {
            self.hdr_overflows += 1;
        }
        if let Some(linear) = &mut self.linear {
            linear.record(latency_ns, sample_idx);
        }
        if let Some(samples) = &mut self.samples {
            samples.record(sample_idx, latency_ns, at_ns);
        }
    }

    /// Adds `other` into `self`. Allocates only for a cumulative
    /// histogram's new pages, never into a sampler's.
    pub fn merge(&mut self, other: &LatencyStats) -> Result<(), ShapeMismatch> {
        match (&mut self.linear, &other.linear) {
            (Some(mine), Some(theirs))
                if mine.bins().len() == theirs.bins().len()
                    && mine.unit_ns() == theirs.unit_ns() =>
            {
                mine.merge(theirs)
            }
            (None, None) => {}
            _ => return Err(ShapeMismatch),
        }
        let refused = self.hdr.merge(&other.hdr);
        self.count += other.count;
        self.sum_ns += other.sum_ns;
        self.min_ns = self.min_ns.min(other.min_ns);
        // On a tie the later maximum wins, as in `record_at`.
        if other.count > 0 && (other.max_ns, other.max_at_ns) > (self.max_ns, self.max_at_ns) {
            (self.max_ns, self.max_at_ns) = (other.max_ns, other.max_at_ns);
        }
        if other.count > 0 {
            self.last_ns = other.last_ns;
            self.first_at_ns = self.first_at_ns.min(other.first_at_ns);
            self.last_at_ns = self.last_at_ns.max(other.last_at_ns);
        }
        self.hdr_overflows += other.hdr_overflows + refused;
        self.spikes += other.spikes;
        self.missed += other.missed;
        Ok(())
    }

    /// Empties the statistics. A sampler's keep their memory (and write
    /// only the histogram pages they used); cumulative ones free their
    /// histogram's pages.
    pub fn reset(&mut self) {
        self.count = 0;
        self.min_ns = u64::MAX;
        self.max_ns = 0;
        self.sum_ns = 0;
        self.last_ns = 0;
        self.hdr_overflows = 0;
        self.spikes = 0;
        self.missed = 0;
        self.first_at_ns = u64::MAX;
        self.last_at_ns = 0;
        self.max_at_ns = 0;
        self.hdr.reset();
        if let Some(linear) = &mut self.linear {
            linear.reset();
        }
        if let Some(samples) = &mut self.samples {
            samples.reset();
        }
    }

    /// The smallest sample, or 0 when there is none.
    pub fn min_ns(&self) -> u64 {
        if self.count == 0 { 0 } else { self.min_ns }
    }

    pub fn avg_ns(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.count as f64
        }
    }

    /// The latency at a quantile given in parts per million (p99.99 is
    /// 999_900), by the nearest-rank rule: the smallest recorded value with
    /// at least `ceil(q·count)` samples at or below it. The answer is the
    /// upper edge of its HDR bucket (so never below the true value), capped
    /// at the exact maximum. Samples past the HDR range rank above all
    /// others, so a quantile that lands among them is the exact maximum.
    pub fn quantile_ns(&self, quantile_ppm: u32) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let ppm = u128::from(quantile_ppm.min(1_000_000));
        let rank = (ppm * u128::from(self.count)).div_ceil(1_000_000).max(1) as u64;
        let in_range = self.count - self.hdr_overflows;
        if rank > in_range {
            return self.max_ns;
        }
        let mut seen = 0;
        for bucket in self.hdr.buckets() {
            seen += bucket.count;
            if seen >= rank {
                return bucket.highest_ns().min(self.max_ns);
            }
        }
        self.max_ns
    }

    /// When the samples were taken: the `CLOCK_MONOTONIC` times of the
    /// first and the last, or `None` when there is none.
    pub fn span_ns(&self) -> Option<(u64, u64)> {
        (self.count > 0).then_some((self.first_at_ns, self.last_at_ns))
    }

    /// When the maximum was taken (`CLOCK_MONOTONIC`; the latest of equal
    /// maxima), or `None` when there is no sample.
    pub fn max_at_ns(&self) -> Option<u64> {
        (self.count > 0).then_some(self.max_at_ns)
    }

    pub fn hdr(&self) -> &Hdr {
        &self.hdr
    }

    pub fn linear(&self) -> Option<&LinearHistogram> {
        self.linear.as_ref()
    }

    pub fn spike_threshold_ns(&self) -> u64 {
        self.spike_threshold_ns
    }
}

/// The quantiles latencyd reports, in parts per million.
pub const P50: u32 = 500_000;
pub const P90: u32 = 900_000;
pub const P99: u32 = 990_000;
pub const P999: u32 = 999_000;
pub const P9999: u32 = 999_900;

/// The same with the names used in field names (`p50` … `p9999`).
pub const REPORTED_QUANTILES: [(u32, &str); 5] = [
    (P50, "p50"),
    (P90, "p90"),
    (P99, "p99"),
    (P999, "p999"),
    (P9999, "p9999"),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator, so failures reproduce.
    struct XorShift(u64);
    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    /// Latencies shaped like real ones: mostly a few µs, a long tail.
    fn latency_like_samples(n: usize, seed: u64) -> Vec<u64> {
        let mut rng = XorShift(seed);
        (0..n)
            .map(|_| {
                let r = rng.next();
                match r % 1000 {
                    0 => 100_000 + r % 5_000_000,
                    1..=20 => 20_000 + r % 80_000,
                    _ => 1_500 + r % 8_000,
                }
            })
            .collect()
    }

    fn nearest_rank(sorted: &[u64], ppm: u32) -> u64 {
        let rank = (ppm as u128 * sorted.len() as u128)
            .div_ceil(1_000_000)
            .max(1) as usize;
        sorted[rank - 1]
    }

    #[test]
    fn quantiles_match_a_brute_force_reference() {
        for (n, seed) in [
            (1, 1),
            (2, 2),
            (7, 3),
            (1_000, 4),
            (100_000, 5),
            (12_345, 6),
        ] {
            let samples = latency_like_samples(n, seed);
            // A sampler's histogram and a cumulative one answer alike.
            let mut stats = LatencyStats::new(u64::MAX, None);
            let mut interval = LatencyStats::for_sampler(u64::MAX, None);
            for (i, &s) in samples.iter().enumerate() {
                stats.record(s, i as u64);
                interval.record(s, i as u64);
            }
            assert_eq!(stats.hdr(), interval.hdr());
            let mut sorted = samples.clone();
            sorted.sort_unstable();
            let mut quantiles: Vec<u32> = REPORTED_QUANTILES.iter().map(|q| q.0).collect();
            quantiles.extend([0, 1, 250_000, 999_999, 1_000_000]);
            for ppm in quantiles {
                let exact = nearest_rank(&sorted, ppm);
                let reported = stats.quantile_ns(ppm);
                // 2 significant digits: the bucket's upper edge is within
                // 1/128 above the true value, and never past the maximum.
                assert!(
                    reported >= exact && reported <= exact + exact / 128,
                    "n={n} q={ppm}ppm: exact {exact}, reported {reported}"
                );
                assert!(reported <= *sorted.last().unwrap());
            }
            assert_eq!(stats.max_ns, *sorted.last().unwrap());
            assert_eq!(stats.min_ns(), sorted[0]);
            assert_eq!(
                stats.sum_ns,
                samples.iter().map(|&s| s as u128).sum::<u128>()
            );
        }
    }

    #[test]
    fn samples_past_the_hdr_range_are_counted_not_dropped() {
        let mut stats = LatencyStats::new(u64::MAX, None);
        stats.record(5_000, 0);
        stats.record(HDR_HIGHEST_NS * 100, 1);
        assert_eq!(stats.count, 2);
        assert_eq!(stats.hdr_overflows, 1);
        assert_eq!(stats.max_ns, HDR_HIGHEST_NS * 100);
        let p50 = stats.quantile_ns(500_000);
        assert!((5_000..=5_000 + 5_000 / 128).contains(&p50), "{p50}");
        // The top sample is past the histogram: the p99 is the exact max.
        assert_eq!(stats.quantile_ns(990_000), HDR_HIGHEST_NS * 100);
        // 10 s and the top of the range are still in it.
        stats.record(10_000_000_000, 2);
        stats.record(HDR_HIGHEST_NS, 3);
        assert_eq!(stats.hdr_overflows, 1);
        stats.record(HDR_HIGHEST_NS + 1, 4);
        assert_eq!(stats.hdr_overflows, 2);
    }

    #[test]
    fn an_interval_that_cannot_hold_a_sample_counts_it_aside() {
        // 17 counters past 65,535 in one interval (the consumer never
        // collected it): the carry table holds 16, the 17th's samples are
        // overflows, ranked at the exact maximum, never lost.
        let mut interval = LatencyStats::for_sampler(u64::MAX, None);
        let mut total = LatencyStats::new(u64::MAX, None);
        let bins: Vec<u64> = (0..17).map(|i| 1_000 + 100 * i).collect();
        for &v in &bins {
            for _ in 0..65_536 {
                interval.record(v, 0);
            }
        }
        assert_eq!(interval.count, 17 * 65_536);
        assert_eq!(interval.hdr_overflows, 1);
        total.merge(&interval).unwrap();
        assert_eq!(total.count, interval.count);
        assert_eq!(total.hdr_overflows, 1);
        assert_eq!(total.hdr().len(), interval.count - 1);
        assert_eq!(total.quantile_ns(1_000_000), total.max_ns);
    }

    #[test]
    fn spikes_count_samples_strictly_above_the_threshold() {
        let mut stats = LatencyStats::new(100_000, None);
        for latency in [99_999, 100_000, 100_001, 5_000_000] {
            stats.record(latency, 0);
        }
        assert_eq!(stats.spikes, 2);
    }

    #[test]
    fn merge_equals_recording_everything_in_one() {
        let samples = latency_like_samples(10_000, 9);
        let linear = || Some(LinearHistogram::new(50, 1_000));
        let mut whole = LatencyStats::new(30_000, linear());
        let mut parts = LatencyStats::new(30_000, linear());
        let mut interval = parts.empty_interval();
        for (i, chunk) in samples.chunks(777).enumerate() {
            for (j, &s) in chunk.iter().enumerate() {
                let idx = (i * 777 + j) as u64;
                whole.record(s, idx);
                interval.record(s, idx);
            }
            interval.missed += 1;
            whole.missed += 1;
            parts.merge(&interval).unwrap();
            interval.reset();
        }
        assert_eq!(parts.count, whole.count);
        assert_eq!(parts.min_ns(), whole.min_ns());
        assert_eq!(parts.max_ns, whole.max_ns);
        assert_eq!(parts.sum_ns, whole.sum_ns);
        assert_eq!(parts.last_ns, whole.last_ns);
        assert_eq!(parts.spikes, whole.spikes);
        assert_eq!(parts.missed, whole.missed);
        assert_eq!(parts.hdr(), whole.hdr());
        assert_eq!(parts.linear(), whole.linear());
        let linear = parts.linear().unwrap();
        assert_eq!(
            linear.bins().iter().sum::<u64>() + linear.overflows(),
            parts.count
        );
        // Only the first 50 overflow sample numbers are kept, in order.
        assert_eq!(linear.overflow_samples().len(), 50);
        assert!(linear.overflow_samples().windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn sample_times_survive_merging_in_any_order() {
        let mut early = LatencyStats::new(u64::MAX, None);
        early.record_at(500, 0, 1_000);
        early.record_at(9_000, 1, 2_000);
        early.record_at(400, 2, 3_000);
        let mut late = LatencyStats::new(u64::MAX, None);
        late.record_at(9_000, 3, 7_000);
        late.record_at(100, 4, 8_000);
        assert_eq!(early.span_ns(), Some((1_000, 3_000)));
        assert_eq!(early.max_at_ns(), Some(2_000));
        let mut a = LatencyStats::new(u64::MAX, None);
        a.merge(&late).unwrap();
        a.merge(&early).unwrap();
        let mut b = LatencyStats::new(u64::MAX, None);
        b.merge(&early).unwrap();
        b.merge(&late).unwrap();
        for total in [a, b] {
            assert_eq!(total.span_ns(), Some((1_000, 8_000)));
            // Equal maxima: the later one is kept, so a window holds it longest.
            assert_eq!(total.max_at_ns(), Some(7_000));
        }
        let mut empty = LatencyStats::new(u64::MAX, None);
        assert_eq!((empty.span_ns(), empty.max_at_ns()), (None, None));
        empty.merge(&LatencyStats::new(u64::MAX, None)).unwrap();
        assert_eq!(empty.span_ns(), None);
        early.reset();
        assert_eq!((early.span_ns(), early.max_at_ns()), (None, None));
    }

    #[test]
    fn merging_different_shapes_is_an_error() {
        let mut a = LatencyStats::new(0, None);
        let b = LatencyStats::new(0, Some(LinearHistogram::new(10, 1_000)));
        assert_eq!(a.merge(&b), Err(ShapeMismatch));
        let mut c = LatencyStats::new(0, Some(LinearHistogram::new(20, 1_000)));
        assert_eq!(c.merge(&b), Err(ShapeMismatch));
    }

    #[test]
    fn clones_keep_room_for_overflow_sample_numbers() {
        let template = LatencyStats::new(u64::MAX, Some(LinearHistogram::new(2, 1_000)));
        let mut copy = template.clone();
        for idx in 0..5 {
            copy.record(9_000, idx);
        }
        assert_eq!(copy.linear().unwrap().overflow_samples(), &[0, 1]);
        assert_eq!(copy.linear().unwrap().overflows(), 5);
    }

    #[test]
    fn linear_bins_follow_cyclictest() {
        // Bins are whole display units, truncated; N units and above overflow.
        let mut stats = LatencyStats::new(u64::MAX, Some(LinearHistogram::new(3, 1_000)));
        for (idx, latency) in [0, 999, 1_000, 2_999, 3_000, 7_000].into_iter().enumerate() {
            stats.record(latency, idx as u64);
        }
        let linear = stats.linear().unwrap();
        assert_eq!(linear.bins(), &[2, 1, 1]);
        assert_eq!(linear.overflows(), 2);
        assert_eq!(linear.overflow_samples(), &[4, 5]);
    }

    #[test]
    fn empty_stats_report_zeroes() {
        let stats = LatencyStats::new(0, None);
        assert_eq!(stats.min_ns(), 0);
        assert_eq!(stats.avg_ns(), 0.0);
        assert_eq!(stats.quantile_ns(990_000), 0);
    }
}
