//! 1 µs binning of a latencyd histogram: the bins the OSADL-style plots
//! draw (`plot`) and the daemon's window histograms keep
//! (`daemon::state`).

use std::collections::BTreeMap;

use super::LatencyStats;

/// Adds a latencyd histogram's samples to 1 µs bins (HDR buckets wider
/// than 1 µs at high latencies go to the bin of their upper edge; samples
/// past the HDR range to the bin of the exact maximum).
pub fn add_bins_us(stats: &LatencyStats, bins: &mut BTreeMap<u64, u64>) {
    for_each_bin_us(stats, |us, count| *bins.entry(us).or_insert(0) += count);
}

/// Hands each 1 µs bin of a latencyd histogram to `add` as (µs, samples),
/// by the rule of [`add_bins_us`]; bins come in ascending order, the
/// overflow bin last, and no bin is empty.
pub fn for_each_bin_us(stats: &LatencyStats, mut add: impl FnMut(u64, u64)) {
    for value in stats.hdr().iter_recorded() {
        add(value.value_iterated_to() / 1_000, value.count_at_value());
    }
    if stats.hdr_overflows > 0 {
        add(stats.max_ns / 1_000, stats.hdr_overflows);
    }
}
