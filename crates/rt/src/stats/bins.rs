//! 1 µs binning of a latencyd histogram: the bins the OSADL-style plots
//! draw (`plot`) and the daemon's window histograms keep
//! (`daemon::state`).

use std::collections::BTreeMap;

use super::LatencyStats;

/// Adds a latencyd histogram's samples to 1 µs bins, by the rule of
/// [`for_each_bin_us`].
pub fn add_bins_us(stats: &LatencyStats, bins: &mut BTreeMap<u64, u64>) {
    for_each_bin_us(stats, |us, count| *bins.entry(us).or_insert(0) += count);
}

/// Hands each 1 µs bin of a latencyd histogram to `add` as (µs, samples).
/// An HDR bucket narrower than 1 µs goes to the bin of its upper edge
/// (never below its values). One at least 1 µs wide (from 131 µs up) is
/// spread evenly over the bins it covers, the remainder to the highest
/// ones, so that a plot has no empty teeth between buckets; no bin is
/// past the exact maximum's. Samples past the HDR range go to the bin of
/// the maximum. Bins come in ascending order, each once, none empty.
pub fn for_each_bin_us(stats: &LatencyStats, mut add: impl FnMut(u64, u64)) {
    let top = stats.max_ns / 1_000;
    let mut pending: Option<(u64, u64)> = None;
    let mut put = |us: u64, count: u64| {
        let us = us.min(top);
        match &mut pending {
            Some((bin, sum)) if *bin == us => *sum += count,
            _ => {
                if let Some((bin, sum)) = pending.replace((us, count)) {
                    add(bin, sum);
                }
            }
        }
    };
    for bucket in stats.hdr().buckets() {
        let (low, high) = (bucket.lowest_ns(), bucket.highest_ns());
        if high - low + 1 < 1_000 {
            put(high / 1_000, bucket.count);
            continue;
        }
        let (first, last) = (low / 1_000, high / 1_000);
        let n = last - first + 1;
        let (each, extra) = (bucket.count / n, bucket.count % n);
        for (i, us) in (first..=last).enumerate() {
            let count = each + u64::from((i as u64) >= n - extra);
            if count > 0 {
                put(us, count);
            }
        }
    }
    if stats.hdr_overflows > 0 {
        put(top, stats.hdr_overflows);
    }
    if let Some((bin, sum)) = pending {
        add(bin, sum);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_buckets_go_up_and_wide_ones_spread_below_the_maximum() {
        let mut stats = LatencyStats::new(u64::MAX, None);
        // 3,984 to 3,999 is a 16 ns bucket in bin 3; 3,970 to 3,983 one
        // that ends in it too; 12,000 lies in 11,968 to 12,031: bin 12.
        for v in [3_999, 3_983, 12_000] {
            stats.record(v, 0);
        }
        // 300 µs: a 2,048 ns bucket over bins 299 to 301 (or so).
        for _ in 0..10 {
            stats.record(300_000, 0);
        }
        let mut bins = BTreeMap::new();
        add_bins_us(&stats, &mut bins);
        assert_eq!(bins.get(&3), Some(&2));
        assert_eq!(bins.get(&12), Some(&1));
        assert_eq!(bins.values().sum::<u64>(), 13);
        let wide: u64 = bins.range(290..=310).map(|(_, c)| c).sum();
        assert_eq!(wide, 10);
        assert!(bins.range(290..=310).count() >= 2, "spread: {bins:?}");
        assert!(*bins.keys().last().unwrap() <= 300, "never past the max");
        // Overflows land in the maximum's bin.
        stats.record(u64::MAX / 2, 0);
        let mut bins = BTreeMap::new();
        add_bins_us(&stats, &mut bins);
        assert_eq!(bins.get(&(u64::MAX / 2 / 1_000)), Some(&1));
        assert_eq!(bins.values().sum::<u64>(), 14);
    }
}
