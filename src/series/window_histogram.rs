//! `WindowHistogram`: 1 µs-bin histograms of the trailing window, for
//! `/plot.svg?window=`, in at most `MAX_HISTOGRAM_SLOTS` slots.

use std::collections::{BTreeMap, VecDeque};

use crate::stats::LatencyStats;
use crate::units::NS_PER_SEC;

/// The most slots a [`WindowHistogram`] spans, whatever the window: a
/// slot is a twelfth of the window in whole seconds (the default 60 s: 5 s
/// slots; 24 h: 2 h slots). It bounds the memory: most of a CPU's window
/// histograms is the bins of each slot, and twelve 5 s slots hold about a
/// third of the bytes of sixty 1 s slots (ARCHITECTURE.md, "Memory per
/// CPU"), at the price of `?window=` being rounded up to whole slots.
pub const MAX_HISTOGRAM_SLOTS: u64 = 12;

/// Histograms of the recent past in 1 µs bins, for plots of a trailing
/// window. A ring of slots, each the histogram of `slot_ns` of
/// `CLOCK_MONOTONIC` time kept sparse (only the bins that hold samples),
/// filed by when the samples were taken; as for `WindowMax`, a window
/// covers every slot that overlaps it, so one more than it spans;
/// a slot is a second for windows up to 12 s and a twelfth of the window
/// beyond, so the memory stays bounded by [`MAX_HISTOGRAM_SLOTS`] × the
/// bins in use.
///
/// Slots finish and leave the window in time order, so the finished
/// slots live one after another in a single byte queue per CPU: a
/// finished slot is encoded at the back, the slot that leaves the window
/// is dropped from the front, and the open slot fills a buffer reused
/// from slot to slot. Nothing is allocated per slot; the queue grows only
/// when the window as a whole holds more bins than it ever has. A vector
/// per slot let resident memory ratchet up over a soak (docs/benchmarks.md, "Load and
/// soak").
///
/// A finished slot's bins are LEB128 varints, each bin the distance in µs
/// from the previous one and its count: bins are close together and
/// counts small, so a bin takes 2 bytes where a pair of integers took 8,
/// and any latency or count fits without a second list (ARCHITECTURE.md,
/// "Memory per CPU").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowHistogram {
    slot_ns: u64,
    /// Slots the window spans; one more is kept, since `len` slots
    /// starting at a slot boundary cannot cover a window that does not.
    len: u64,
    /// Finished slots still in the window, oldest first: (number, how many
    /// of `bytes` are theirs).
    finished: VecDeque<(u64, usize)>,
    /// The encoded bins of the finished slots, slot after slot.
    bytes: VecDeque<u8>,
    /// The slot being filled: its number (`u64::MAX`: none yet) and bins
    /// (µs, samples), sorted by µs, no zero counts.
    open_number: u64,
    open: Vec<(u64, u64)>,
}

fn add_bin(bins: &mut Vec<(u64, u64)>, us: u64, count: u64) {
    match bins.binary_search_by_key(&us, |&(bin, _)| bin) {
        Ok(i) => bins[i].1 += count,
        Err(i) => bins.insert(i, (us, count)),
    }
}

fn push_varint(out: &mut VecDeque<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push_back((value as u8 & 0x7F) | 0x80);
        value >>= 7;
    }
    out.push_back(value as u8);
}

fn varint_len(value: u64) -> usize {
    (64 - value.leading_zeros() as usize).div_ceil(7).max(1)
}

/// The bins of one encoded slot.
fn decode(mut bytes: impl Iterator<Item = u8>) -> impl Iterator<Item = (u64, u64)> {
    let mut next = move || {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = bytes.next()?;
            value |= u64::from(byte & 0x7F) << shift;
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        Some(value)
    };
    let mut us = 0u64;
    std::iter::from_fn(move || {
        let delta = next()?;
        let count = next()?;
        us += delta;
        Some((us, count))
    })
}

impl WindowHistogram {
    pub fn new(window_ns: u64) -> WindowHistogram {
        let seconds = (window_ns / NS_PER_SEC).max(1);
        let slot_seconds = seconds.div_ceil(MAX_HISTOGRAM_SLOTS);
        let len = seconds.div_ceil(slot_seconds);
        WindowHistogram {
            slot_ns: slot_seconds * NS_PER_SEC,
            len,
            finished: VecDeque::with_capacity(len as usize + 1),
            bytes: VecDeque::new(),
            open_number: u64::MAX,
            open: Vec::new(),
        }
    }

    /// The length of one slot: windows are covered in whole slots.
    pub fn slot_ns(&self) -> u64 {
        self.slot_ns
    }

    pub fn window_ns(&self) -> u64 {
        self.len * self.slot_ns
    }

    /// Adds one interval's samples to the slot of its last sample (an
    /// interval spans one publish period, unless the collector fell
    /// behind: then all of it is filed late rather than early).
    pub fn record(&mut self, interval: &LatencyStats) {
        let Some((_, last_at_ns)) = interval.span_ns() else {
            return;
        };
        let bins = self.bins_of(last_at_ns);
        crate::stats::for_each_bin_us(interval, |us, count| add_bin(bins, us, count));
    }

    /// The bins of the slot holding `now_ns`, opening it (and putting the
    /// open slot away) if it is not the open one. Time that goes backwards
    /// lands in the open slot rather than reopening a finished one.
    fn bins_of(&mut self, now_ns: u64) -> &mut Vec<(u64, u64)> {
        let number = now_ns / self.slot_ns;
        if self.open_number == u64::MAX || number > self.open_number {
            // Forget first, so the queue never holds more than a window.
            let oldest = number.saturating_sub(self.len);
            self.forget_before(oldest);
            self.close_open_slot();
            self.forget_before(oldest);
            self.open_number = number;
        }
        &mut self.open
    }

    fn close_open_slot(&mut self) {
        if self.open_number == u64::MAX {
            return;
        }
        let before = self.bytes.len();
        // Grow to measure, not by doubling: the queue is most of a CPU's
        // window memory, and its size is reached within a window.
        let mut previous = 0;
        let needed: usize = self
            .open
            .iter()
            .map(|&(us, count)| {
                let delta = us - std::mem::replace(&mut previous, us);
                varint_len(delta) + varint_len(count)
            })
            .sum();
        self.bytes.reserve_exact(needed);
        let mut previous = 0;
        for (us, count) in self.open.drain(..) {
            push_varint(&mut self.bytes, us - previous);
            push_varint(&mut self.bytes, count);
            previous = us;
        }
        self.finished
            .push_back((self.open_number, self.bytes.len() - before));
    }

    /// Drops the finished slots numbered below `oldest`.
    fn forget_before(&mut self, oldest: u64) {
        while let Some(&(number, len)) = self.finished.front() {
            if number >= oldest {
                break;
            }
            self.finished.pop_front();
            self.bytes.drain(..len);
        }
    }

    /// Every slot's number and bins, oldest first, the open one last.
    fn for_each_slot(&self, mut visit: impl FnMut(u64, &mut dyn Iterator<Item = (u64, u64)>)) {
        let mut start = 0;
        for &(number, len) in &self.finished {
            visit(
                number,
                &mut decode(self.bytes.range(start..start + len).copied()),
            );
            start += len;
        }
        if self.open_number != u64::MAX {
            visit(self.open_number, &mut self.open.iter().copied());
        }
    }

    /// Bytes on the heap (capacities), to account memory per CPU.
    pub fn heap_bytes(&self) -> usize {
        self.bytes.capacity()
            + self.finished.capacity() * std::mem::size_of::<(u64, usize)>()
            + self.open.capacity() * std::mem::size_of::<(u64, u64)>()
    }

    /// The bins of the slots that overlap the last `window_ns` rounded up
    /// to whole slots (at most this ring's window), and that rounded span.
    pub fn bins_within(&self, now_ns: u64, window_ns: u64) -> (BTreeMap<u64, u64>, u64) {
        let current = now_ns / self.slot_ns;
        let n = window_ns.div_ceil(self.slot_ns).clamp(1, self.len);
        let mut bins = BTreeMap::new();
        self.for_each_slot(|number, slot| {
            if number <= current && current - number <= n {
                for (us, count) in slot {
                    *bins.entry(us).or_insert(0) += count;
                }
            }
        });
        (bins, n * self.slot_ns)
    }

    /// The same histograms in a window of another length (a live reload);
    /// a slot that moves to a longer slot lands in the one holding its
    /// start.
    pub fn resized(&self, window_ns: u64, now_ns: u64) -> WindowHistogram {
        let mut resized = WindowHistogram::new(window_ns);
        // The start of the oldest slot the new ring still covers.
        let oldest = (now_ns / resized.slot_ns).saturating_sub(resized.len);
        let earliest = oldest * resized.slot_ns;
        self.for_each_slot(|number, slot| {
            let start_ns = number.saturating_mul(self.slot_ns);
            let end_ns = start_ns.saturating_add(self.slot_ns);
            if start_ns > now_ns || end_ns <= earliest {
                return;
            }
            let target = resized.bins_of(start_ns.max(earliest));
            for (us, count) in slot {
                add_bin(target, us, count);
            }
        });
        resized
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = NS_PER_SEC;

    /// An interval of `values_ns`, the last sampled at `at_ns`.
    fn interval(at_ns: u64, values_ns: &[u64]) -> LatencyStats {
        let mut stats = LatencyStats::new(u64::MAX, None);
        for &v in values_ns {
            stats.record_at(v, 0, at_ns);
        }
        stats
    }

    #[test]
    fn window_histogram_keeps_only_the_recent_slots() {
        let mut h = WindowHistogram::new(60 * S);
        assert_eq!(h.slot_ns(), 5 * S, "twelve 5 s slots for 60 s");
        h.record(&interval(100 * S, &[3_200, 3_900, 12_000]));
        h.record(&interval(100 * S + 500_000_000, &[3_100]));
        h.record(&interval(130 * S, &[5_000]));
        h.record(&LatencyStats::new(u64::MAX, None)); // empty: nothing
        let (bins, covered) = h.bins_within(131 * S, 60 * S);
        assert_eq!(covered, 60 * S);
        assert_eq!(bins, BTreeMap::from([(3, 3), (5, 1), (12, 1)]));
        // The last 2 s, rounded up to a slot, hold only second 130.
        let (bins, covered) = h.bins_within(131 * S, 2 * S);
        assert_eq!((bins, covered), (BTreeMap::from([(5, 1)]), 5 * S));
        // A window past the ring's is the ring's.
        assert_eq!(h.bins_within(131 * S, 3600 * S).1, 60 * S);
        // The slot of second 100 (100 to 105) overlaps the 60 s window
        // until its slot is 13 slots old, at second 165.
        let (bins, _) = h.bins_within(164 * S + S / 2, 60 * S);
        assert_eq!(bins.get(&12), Some(&1));
        let (bins, _) = h.bins_within(165 * S, 60 * S);
        assert_eq!(bins, BTreeMap::from([(5, 1)]));
        // A reused slot starts afresh.
        h.record(&interval(196 * S, &[7_000]));
        assert_eq!(h.bins_within(196 * S, 60 * S).0, BTreeMap::from([(7, 1)]));
    }

    #[test]
    fn window_histogram_allocates_nothing_per_slot() {
        let mut h = WindowHistogram::new(12 * S);
        assert_eq!(h.slot_ns(), S);
        h.record(&interval(100 * S, &[1_000, 2_000, 3_000, 40_000, 900_000]));
        let open = (h.open.as_ptr(), h.open.capacity());
        // A lap of the ring fills the queue; two more, each second a few
        // bins, go through the same two buffers.
        for second in 101..114 {
            h.record(&interval(second * S, &[2_000, 3_000, 7_000]));
        }
        let queue = h.bytes.capacity();
        for second in 114..140 {
            h.record(&interval(second * S, &[2_000, 3_000, 7_000]));
        }
        assert_eq!((h.open.as_ptr(), h.open.capacity()), open);
        assert_eq!(
            h.bytes.capacity(),
            queue,
            "the finished slots' queue kept its size"
        );
        assert_eq!(h.finished.len(), 12, "12 finished slots and the open one");
        // Three bins of small distances and counts: 2 bytes each.
        assert_eq!(h.bytes.len(), 12 * 3 * 2);
        let (bins, _) = h.bins_within(139 * S, 12 * S);
        assert_eq!(bins, BTreeMap::from([(2, 13), (3, 13), (7, 13)]));
        // Bins stay sorted and merged whatever order they arrive in.
        h.record(&interval(139 * S, &[900_000, 1_000]));
        h.record(&interval(139 * S, &[2_500]));
        assert_eq!(h.open, vec![(1, 1), (2, 2), (3, 1), (7, 1), (900, 1)]);
    }

    #[test]
    fn window_histogram_keeps_huge_bins_with_their_slot() {
        let mut h = WindowHistogram::new(3 * S);
        // Past the HDR range: the bin of the maximum, 2 hours.
        h.record(&interval(10 * S, &[5_000, 7_200 * S]));
        h.record(&interval(11 * S, &[6_000]));
        let (bins, _) = h.bins_within(12 * S, 3 * S);
        assert_eq!(bins, BTreeMap::from([(5, 1), (6, 1), (7_200_000_000, 1)]));
        // Slot 10 leaves the window when slot 14 opens, its huge bin too.
        h.record(&interval(13 * S, &[4_000]));
        h.record(&interval(14 * S, &[4_000]));
        assert_eq!(
            h.bins_within(14 * S, 3 * S).0,
            BTreeMap::from([(4, 2), (6, 1)])
        );
    }

    #[test]
    fn encoded_bins_keep_any_latency_and_count_whole() {
        let big = u64::MAX - 1;
        let bins = vec![(0, 1), (5, u64::from(u32::MAX) + 4), (7, 1), (big, big)];
        let mut bytes = VecDeque::new();
        let mut previous = 0;
        for &(us, count) in &bins {
            push_varint(&mut bytes, us - previous);
            push_varint(&mut bytes, count);
            previous = us;
        }
        assert_eq!(decode(bytes.iter().copied()).collect::<Vec<_>>(), bins);
        // (distance, count) pairs: 1 + 1, 1 + 5, 1 + 1, 10 + 10 bytes.
        let lengths: usize = [0, 1, 5, u64::from(u32::MAX) + 4, 2, 1, big - 7, big]
            .into_iter()
            .map(varint_len)
            .sum();
        assert_eq!(lengths, 30);
        assert_eq!(bytes.len(), lengths);
        // A truncated slot yields the whole bins before the cut, no more.
        bytes.pop_back();
        assert_eq!(decode(bytes.iter().copied()).count(), 3);
    }

    #[test]
    fn window_histogram_slots_grow_with_long_windows() {
        let day = WindowHistogram::new(24 * 3600 * S);
        assert_eq!(day.slot_ns(), 7_200 * S);
        assert_eq!(day.window_ns(), 24 * 3600 * S);
        assert!(day.len <= MAX_HISTOGRAM_SLOTS);
        let odd = WindowHistogram::new(121 * S);
        assert_eq!(odd.slot_ns(), 11 * S);
        assert!(odd.window_ns() >= 121 * S);
        // A 20 s question of 11 s slots covers 2 slots.
        assert_eq!(odd.bins_within(1_000 * S, 20 * S).1, 22 * S);
    }

    #[test]
    fn window_histogram_resizing_keeps_what_still_fits() {
        let mut h = WindowHistogram::new(60 * S);
        h.record(&interval(100 * S, &[2_000]));
        h.record(&interval(150 * S, &[4_000]));
        h.record(&interval(159 * S, &[6_000]));
        let shorter = h.resized(10 * S, 159 * S);
        assert_eq!(
            shorter.bins_within(159 * S, 10 * S).0,
            BTreeMap::from([(4, 1), (6, 1)])
        );
        let day = h.resized(24 * 3600 * S, 159 * S);
        assert_eq!(
            day.bins_within(159 * S, 24 * 3600 * S).0,
            BTreeMap::from([(2, 1), (4, 1), (6, 1)])
        );
        // And back: 2-hour slots squeezed into 5 s slots keep their
        // samples within the new window rather than dropping them.
        let back = day.resized(60 * S, 159 * S);
        assert_eq!(back.bins_within(159 * S, 60 * S).0.values().sum::<u64>(), 3);
    }
}
