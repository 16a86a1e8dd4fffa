//! Prometheus native (exponential) histograms from the HDR histograms.
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

use std::collections::BTreeMap;

use crate::stats::LatencyStats;

/// The schema used: base 2^(1/128).
pub const SCHEMA: i32 = 7;
/// The zero bucket's half-width: far below a nanosecond, so it only
/// marks the histogram as native (as Prometheus' Go client does).
pub const ZERO_THRESHOLD: f64 = 2.938_735_877_055_719e-39;

/// One native histogram's buckets: spans of consecutive indices and the
/// counts delta-encoded, as the exposition carries them.
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
/// upper bound.
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

fn add_counts(stats: &LatencyStats, counts: &mut BTreeMap<i32, u64>) {
    for (index, count) in counts_of(stats) {
        *counts.entry(index).or_insert(0) += count;
    }
}

/// Spans and deltas of bucket counts in index order.
fn encode(counts: impl IntoIterator<Item = (i32, u64)>) -> Native {
    let mut native = Native::default();
    let mut previous: Option<(i32, i64)> = None;
    for (index, count) in counts {
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

/// The native buckets of several CPUs' statistics together.
pub fn of_all<'a>(all: impl IntoIterator<Item = &'a LatencyStats>) -> Native {
    let mut counts = BTreeMap::new();
    for stats in all {
        add_counts(stats, &mut counts);
    }
    encode(counts)
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
}
