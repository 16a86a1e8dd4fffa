//! Prometheus native (exponential) histograms from the HDR histograms,
//! counted as intervals arrive (`NativeCounts`, beside `BucketCounts`),
//! so a scrape only encodes them.
//!
//! A native histogram of schema `s` has bucket `i` covering
//! `(2^((i-1)/2^s), 2^(i/2^s)]` seconds. The HDR histogram's buckets are
//! 1/256 to 1/128 (0.39 to 0.78 %) of their values wide; schema 7's are
//! 0.54 %, the schema of matching resolution (8 would split buckets the
//! data cannot split, 6's are 1.09 %, coarser than the data). Each HDR
//! bucket goes whole into the native bucket of its upper edge (never
//! below its values, as the classic buckets), so a native quantile is
//! within one native bucket above the HDR one. The samples past the HDR
//! range go to the bucket of the exact maximum.

use crate::stats::{LatencyStats, hdr};

/// The schema used: base 2^(1/128).
pub const SCHEMA: i32 = 7;
/// The zero bucket's half-width: far below a nanosecond, so it only
/// marks the histogram as native (as Prometheus' Go client does).
pub const ZERO_THRESHOLD: f64 = 2.938_735_877_055_719e-39;

/// One native histogram's buckets: spans of consecutive indices and the
/// counts delta-encoded, as the exposition carries them. The reference
/// the tests hold `NativeCounts` and `render::protobuf` to (the exposition
/// writes the same straight from the counts).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Native {
    pub spans: Vec<(i32, u32)>,
    pub deltas: Vec<i64>,
}

/// The index of the native bucket holding `ns` nanoseconds.
pub fn index_of(ns: u64) -> i32 {
    let seconds = ns as f64 / 1e9;
    let scaled = seconds.log2() * f64::from(1u32 << SCHEMA);
    let mut index = scaled.ceil() as i32;
    // log2 can land a hair off an exact boundary; the bucket's upper bound
    // is inclusive, so step down when the value is at or below it.
    if seconds <= bound(index - 1) {
        index -= 1;
    } else if seconds > bound(index) {
        index += 1;
    }
    index
}

/// The upper bound of bucket `index`, in seconds.
pub fn bound(index: i32) -> f64 {
    (f64::from(index) / f64::from(1u32 << SCHEMA)).exp2()
}

/// `stats`' samples as native bucket counts, in index order. HDR values
/// come in ascending order and several share a native bucket, so the
/// logarithm is taken only when a value passes the current bucket's
/// upper bound. The tests' reference for `NativeCounts::add`.
fn counts_of(stats: &LatencyStats) -> Vec<(i32, u64)> {
    let mut counts: Vec<(i32, u64)> = Vec::new();
    let mut upper_ns = 0.0f64;
    for bucket in stats.hdr().buckets() {
        let ns = bucket.highest_ns().max(1);
        let count = bucket.count;
        match counts.last_mut() {
            Some(last) if ns as f64 <= upper_ns => last.1 += count,
            _ => {
                let index = index_of(ns);
                upper_ns = bound(index) * 1e9;
                counts.push((index, count));
            }
        }
    }
    if stats.hdr_overflows > 0 {
        let index = index_of(stats.max_ns);
        match counts.last_mut() {
            Some(last) if last.0 == index => last.1 += stats.hdr_overflows,
            _ => counts.push((index, stats.hdr_overflows)),
        }
    }
    counts
}

/// The native bucket of each HDR bucket's upper edge, computed once.
fn native_of_hdr() -> &'static [i32] {
    static TABLE: std::sync::OnceLock<Vec<i32>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        (0..hdr::BUCKETS)
            .map(|i| index_of(hdr::highest_ns(i).max(1)))
            .collect()
    })
}

/// Spans and deltas of bucket counts in index order (zero counts skipped).
fn encode(counts: impl IntoIterator<Item = (i32, u64)>) -> Native {
    let mut native = Native::default();
    let mut previous: Option<(i32, i64)> = None;
    for (index, count) in counts {
        if count == 0 {
            continue;
        }
        let count = count as i64;
        match previous {
            Some((p, _)) if index == p + 1 => {
                native.spans.last_mut().expect("a span is open").1 += 1;
            }
            Some((p, _)) => native.spans.push((index - p - 1, 1)),
            None => native.spans.push((index, 1)),
        }
        native
            .deltas
            .push(count - previous.map_or(0, |(_, previous_count)| previous_count));
        previous = Some((index, count));
    }
    native
}

/// The native buckets of `stats`.
pub fn of(stats: &LatencyStats) -> Native {
    encode(counts_of(stats))
}

/// A series' native bucket counts for the life of the process, added
/// from each interval as it arrives: bucket `offset + i` is the `i`th
/// count. Kept as small as the HDR histogram they mirror: 32-bit counts
/// until one passes 4·10⁹, then all 64-bit, in vectors grown to the size
/// needed (a bucket range is extended only by a new extreme). Shared on
/// clone: a scrape copies them under the state's lock in constant time
/// and encodes them after; the next interval added copies them only if
/// a scrape still holds them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NativeCounts {
    offset: i32,
    counts: std::sync::Arc<Counts>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Counts {
    Narrow(Vec<u32>),
    Wide(Vec<u64>),
}

impl Default for Counts {
    fn default() -> Counts {
        Counts::Narrow(Vec::new())
    }
}

/// `v` with `front` zeros before it and room for exactly `len` counts.
fn regrown<T: Copy + Default>(v: &[T], front: usize, len: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(len);
    out.resize(front, T::default());
    out.extend_from_slice(v);
    out.resize(len, T::default());
    out
}

impl Counts {
    fn len(&self) -> usize {
        match self {
            Counts::Narrow(v) => v.len(),
            Counts::Wide(v) => v.len(),
        }
    }

    /// Room for `front` more buckets below and `len` in all.
    fn regrow(&mut self, front: usize, len: usize) {
        *self = match self {
            Counts::Narrow(v) => Counts::Narrow(regrown(v, front, len)),
            Counts::Wide(v) => Counts::Wide(regrown(v, front, len)),
        };
    }

    fn add(&mut self, at: usize, count: u64) {
        if let Counts::Narrow(v) = self {
            match u32::try_from(u64::from(v[at]) + count) {
                Ok(sum) => {
                    v[at] = sum;
                    return;
                }
                Err(_) => *self = Counts::Wide(v.iter().map(|&c| u64::from(c)).collect()),
            }
        }
        if let Counts::Wide(v) = self {
            v[at] += count;
        }
    }

    fn slices(&self) -> (&[u32], &[u64]) {
        match self {
            Counts::Narrow(v) => (v, &[]),
            Counts::Wide(v) => (&[], v),
        }
    }
}

impl NativeCounts {
    /// Adds an interval's samples: a table lookup per non-empty HDR
    /// bucket (each goes whole into the native bucket of its upper edge).
    pub fn add(&mut self, interval: &LatencyStats) {
        let table = native_of_hdr();
        for bucket in interval.hdr().buckets() {
            self.add_count(table[bucket.index], bucket.count);
        }
        if interval.hdr_overflows > 0 {
            self.add_count(index_of(interval.max_ns), interval.hdr_overflows);
        }
    }

    fn add_count(&mut self, index: i32, count: u64) {
        let counts = std::sync::Arc::make_mut(&mut self.counts);
        let len = counts.len();
        if len == 0 {
            self.offset = index;
        }
        if index < self.offset {
            let front = (self.offset - index) as usize;
            counts.regrow(front, len + front);
            self.offset = index;
        }
        let at = (index - self.offset) as usize;
        if at >= counts.len() {
            counts.regrow(0, at + 1);
        }
        counts.add(at, count);
    }

    /// (bucket index, count) in index order, zero counts included.
    pub fn indexed(&self) -> impl Iterator<Item = (i32, u64)> + '_ {
        let (narrow, wide) = self.counts.slices();
        narrow
            .iter()
            .map(|&c| u64::from(c))
            .chain(wide.iter().copied())
            .enumerate()
            .map(|(i, c)| (self.offset + i as i32, c))
    }

    /// The bucket index of the first count.
    pub fn offset(&self) -> i32 {
        self.offset
    }

    /// The counts from `offset` on: 32-bit ones, or 64-bit ones once one
    /// passed 4·10⁹ (the other slice is empty).
    pub fn slices(&self) -> (&[u32], &[u64]) {
        self.counts.slices()
    }

    /// The spans and deltas the exposition carries.
    pub fn native(&self) -> Native {
        encode(self.indexed())
    }

    /// Several series' counts together (the sum over CPUs).
    pub fn merged<'a>(all: impl IntoIterator<Item = &'a NativeCounts>) -> NativeCounts {
        let mut sum = NativeCounts::default();
        for counts in all {
            for (index, count) in counts.indexed().filter(|&(_, c)| c > 0) {
                sum.add_count(index, count);
            }
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_follow_prometheus_bucket_bounds() {
        // 1 s is the upper bound of bucket 0; a hair more is bucket 1.
        assert_eq!(index_of(1_000_000_000), 0);
        assert_eq!(index_of(1_000_000_001), 1);
        assert_eq!(index_of(500_000_000), -128);
        for ns in [1u64, 999, 12_345, 1_000_000, 87_654_321] {
            let i = index_of(ns);
            let s = ns as f64 / 1e9;
            assert!(bound(i - 1) < s && s <= bound(i), "{ns}: {i}");
        }
    }

    #[test]
    fn spans_and_deltas_encode_the_counts() {
        let mut stats = LatencyStats::new(u64::MAX, None);
        // Two samples in one bucket, one in the next, one far above.
        for (i, v) in [10_000u64, 10_001, 10_030, 20_000].iter().enumerate() {
            stats.record(*v, i as u64);
        }
        let native = of(&stats);
        let total: i64 = {
            let mut running = 0;
            native
                .deltas
                .iter()
                .map(|d| {
                    running += d;
                    running
                })
                .sum()
        };
        assert_eq!(total, 4);
        assert_eq!(
            native.spans.iter().map(|s| s.1 as usize).sum::<usize>(),
            native.deltas.len()
        );
        assert_eq!(
            native.spans[0].0,
            index_of(crate::stats::hdr::highest_ns(
                crate::stats::hdr::index_of(10_000).unwrap()
            ))
        );
        assert!(native.spans.len() >= 2, "a gap up to 20 µs: {native:?}");
        // Empty statistics: no spans.
        assert_eq!(of(&LatencyStats::new(1, None)), Native::default());
    }

    #[test]
    fn counts_added_by_interval_equal_the_whole_histograms() {
        let mut whole = LatencyStats::new(u64::MAX, None);
        let mut counts = NativeCounts::default();
        let mut other = NativeCounts::default();
        // Intervals that reach below and above what came before.
        for (i, values) in [
            vec![10_000u64, 10_030, 20_000],
            vec![1_200, 3_000_000],
            vec![500, 10_001, 90_000_000_000],
        ]
        .iter()
        .enumerate()
        {
            let mut interval = LatencyStats::new(u64::MAX, None);
            for v in values {
                interval.record(*v, i as u64);
                whole.record(*v, i as u64);
            }
            counts.add(&interval);
            if i == 1 {
                other.add(&interval);
            }
        }
        assert_eq!(counts.native(), of(&whole));
        let mut both = whole.clone();
        let mut again = LatencyStats::new(u64::MAX, None);
        again.record(1_200, 0);
        again.record(3_000_000, 0);
        both.merge(&again).unwrap();
        assert_eq!(NativeCounts::merged([&counts, &other]).native(), of(&both));
        assert_eq!(NativeCounts::default().native(), Native::default());
    }

    #[test]
    fn counts_widen_past_32_bits_and_never_wrap() {
        let mut counts = NativeCounts::default();
        counts.add_count(5, u64::from(u32::MAX) - 1);
        counts.add_count(3, 7);
        assert_eq!(counts.counts.slices().1.len(), 0, "narrow while they fit");
        counts.add_count(5, 2);
        counts.add_count(9, 1);
        let all: Vec<(i32, u64)> = counts.indexed().filter(|&(_, c)| c > 0).collect();
        assert_eq!(all, vec![(3, 7), (5, u64::from(u32::MAX) + 1), (9, 1)]);
        let (narrow, wide) = counts.counts.slices();
        assert_eq!((narrow.len(), wide.len()), (0, 7), "widened, sized exactly");
    }
}
