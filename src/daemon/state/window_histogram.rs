//! `WindowHistogram`: 1 µs-bin histograms of the trailing window, for
//! `/plot.svg?window=`, in at most `MAX_HISTOGRAM_SLOTS` slots.

use std::collections::{BTreeMap, VecDeque};

use crate::stats::LatencyStats;
use crate::units::NS_PER_SEC;

/// The most slots a [`WindowHistogram`] keeps, whatever the window: it
/// bounds the memory of a long `export.max_window` (24 h: 12-minute slots).
pub const MAX_HISTOGRAM_SLOTS: u64 = 120;

/// Histograms of the recent past in 1 µs bins, for plots of a trailing
/// window. A ring of slots, each the histogram of `slot_ns` of
/// `CLOCK_MONOTONIC` time kept sparse (only the bins that hold samples),
/// filed by when the samples were taken; as for `WindowMax`, a window
/// covers every slot that overlaps it, so one more than it spans;
/// a slot is a second for windows up to 120 s and longer beyond, so the
/// memory stays bounded by [`MAX_HISTOGRAM_SLOTS`] × the bins in use.
///
/// Slots finish and leave the window in time order, so the bins of the
/// finished slots live one after another in a single queue per CPU: a
/// finished slot is appended at the back, the slot that leaves the window
/// is dropped from the front, and the open slot fills a buffer reused
/// from slot to slot. Nothing is allocated per slot; the queue grows only
/// when the window as a whole holds more bins than it ever has. A vector
/// per slot let resident memory ratchet up over a soak (README, "Load and
/// soak"): kept in place it held each slot's widest second, copied to
/// exact size it was a once-a-second allocation alive for a whole window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowHistogram {
    slot_ns: u64,
    /// Slots the window spans; one more is kept, since `len` slots
    /// starting at a slot boundary cannot cover a window that does not.
    len: u64,
    /// Finished slots still in the window, oldest first: (number, how many
    /// of `bins` are theirs).
    finished: VecDeque<(u64, usize)>,
    /// The narrow bins of the finished slots, slot after slot.
    bins: VecDeque<(u32, u32)>,
    /// The wide bins of the finished slots: (slot number, µs, samples).
    wide: Vec<(u64, u64, u64)>,
    /// The slot being filled: its number (`u64::MAX`: none yet) and bins.
    open_number: u64,
    open: SlotBins,
}

/// Sparse 1 µs bins of one slot. Bins and counts fit 32 bits unless a
/// latency passes 71 minutes or a slot holds more than 4·10⁹ samples of
/// one bin (a collector stopped for half a day at a 10 µs interval); such
/// a bin moves to `wide` rather than being clamped.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct SlotBins {
    /// (µs, samples), sorted by µs, no zero counts.
    narrow: Vec<(u32, u32)>,
    /// (µs, samples), sorted by µs, for bins that do not fit `narrow`;
    /// a bin is in one list or the other. Empty in practice.
    wide: Vec<(u64, u64)>,
}

impl SlotBins {
    fn add(&mut self, us: u64, count: u64) {
        if let Ok(i) = self.wide.binary_search_by_key(&us, |&(bin, _)| bin) {
            self.wide[i].1 += count;
            return;
        }
        let Ok(us32) = u32::try_from(us) else {
            return self.add_wide(us, count);
        };
        match self.narrow.binary_search_by_key(&us32, |&(bin, _)| bin) {
            Ok(i) => {
                let sum = u64::from(self.narrow[i].1) + count;
                match u32::try_from(sum) {
                    Ok(sum) => self.narrow[i].1 = sum,
                    Err(_) => {
                        self.narrow.remove(i);
                        self.add_wide(us, sum);
                    }
                }
            }
            Err(i) => match u32::try_from(count) {
                Ok(count) => self.narrow.insert(i, (us32, count)),
                Err(_) => self.add_wide(us, count),
            },
        }
    }

    /// Adds a bin known not to be in `wide` yet.
    fn add_wide(&mut self, us: u64, count: u64) {
        let i = self.wide.partition_point(|&(bin, _)| bin < us);
        self.wide.insert(i, (us, count));
    }

    fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        widen(self.narrow.iter()).chain(self.wide.iter().copied())
    }
}

fn widen<'a>(bins: impl Iterator<Item = &'a (u32, u32)>) -> impl Iterator<Item = (u64, u64)> {
    bins.map(|&(us, count)| (u64::from(us), u64::from(count)))
}

/// Bins per slot the queue has room for before it first grows (256 bytes
/// a slot), so that most of its growth happens at start-up.
const BINS_RESERVED_PER_SLOT: usize = 32;

impl WindowHistogram {
    pub fn new(window_ns: u64) -> WindowHistogram {
        let seconds = (window_ns / NS_PER_SEC).max(1);
        let slot_seconds = seconds.div_ceil(MAX_HISTOGRAM_SLOTS);
        let len = seconds.div_ceil(slot_seconds);
        WindowHistogram {
            slot_ns: slot_seconds * NS_PER_SEC,
            len,
            finished: VecDeque::with_capacity(len as usize + 1),
            bins: VecDeque::with_capacity((len as usize + 1) * BINS_RESERVED_PER_SLOT),
            wide: Vec::new(),
            open_number: u64::MAX,
            open: SlotBins::default(),
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
        crate::stats::for_each_bin_us(interval, |us, count| bins.add(us, count));
    }

    /// The bins of the slot holding `now_ns`, opening it (and putting the
    /// open slot away) if it is not the open one. Time that goes backwards
    /// lands in the open slot rather than reopening a finished one.
    fn bins_of(&mut self, now_ns: u64) -> &mut SlotBins {
        let number = now_ns / self.slot_ns;
        if self.open_number == u64::MAX || number > self.open_number {
            self.close_open_slot();
            self.open_number = number;
            self.forget_before(number.saturating_sub(self.len));
        }
        &mut self.open
    }

    fn close_open_slot(&mut self) {
        if self.open_number == u64::MAX {
            return;
        }
        let number = self.open_number;
        self.finished.push_back((number, self.open.narrow.len()));
        self.bins.extend(self.open.narrow.drain(..));
        self.wide.extend(
            self.open
                .wide
                .drain(..)
                .map(|(us, count)| (number, us, count)),
        );
    }

    /// Drops the finished slots numbered below `oldest`.
    fn forget_before(&mut self, oldest: u64) {
        while let Some(&(number, count)) = self.finished.front() {
            if number >= oldest {
                break;
            }
            self.finished.pop_front();
            self.bins.drain(..count);
        }
        if self
            .wide
            .first()
            .is_some_and(|&(number, _, _)| number < oldest)
        {
            self.wide.retain(|&(number, _, _)| number >= oldest);
        }
    }

    /// Every slot's number and bins, oldest first, the open one last.
    fn for_each_slot(&self, mut visit: impl FnMut(u64, &mut dyn Iterator<Item = (u64, u64)>)) {
        let mut start = 0;
        for &(number, count) in &self.finished {
            let narrow = widen(self.bins.range(start..start + count));
            let wide = self
                .wide
                .iter()
                .filter(move |&&(n, _, _)| n == number)
                .map(|&(_, us, count)| (us, count));
            visit(number, &mut narrow.chain(wide));
            start += count;
        }
        if self.open_number != u64::MAX {
            visit(self.open_number, &mut self.open.iter());
        }
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
                target.add(us, count);
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
        assert_eq!(h.slot_ns(), S, "one-second slots up to 120 s");
        h.record(&interval(100 * S, &[3_200, 3_900, 12_000]));
        h.record(&interval(100 * S + 500_000_000, &[3_100]));
        h.record(&interval(130 * S, &[5_000]));
        h.record(&LatencyStats::new(u64::MAX, None)); // empty: nothing
        let (bins, covered) = h.bins_within(131 * S, 60 * S);
        assert_eq!(covered, 60 * S);
        assert_eq!(bins, BTreeMap::from([(3, 3), (5, 1), (12, 1)]));
        // The last 2 s hold only second 130.
        let (bins, covered) = h.bins_within(131 * S, 2 * S);
        assert_eq!((bins, covered), (BTreeMap::from([(5, 1)]), 2 * S));
        // A window past the ring's is the ring's.
        assert_eq!(h.bins_within(131 * S, 3600 * S).1, 60 * S);
        // Second 100 overlaps the 60 s window until second 161.
        let (bins, _) = h.bins_within(160 * S + S / 2, 60 * S);
        assert_eq!(bins.get(&12), Some(&1));
        let (bins, _) = h.bins_within(161 * S, 60 * S);
        assert_eq!(bins, BTreeMap::from([(5, 1)]));
        // A reused slot starts afresh.
        h.record(&interval(191 * S, &[7_000]));
        assert_eq!(h.bins_within(191 * S, 60 * S).0, BTreeMap::from([(7, 1)]));
    }

    #[test]
    fn window_histogram_allocates_nothing_per_slot() {
        let mut h = WindowHistogram::new(60 * S);
        h.record(&interval(100 * S, &[1_000, 2_000, 3_000, 40_000, 900_000]));
        let open = (h.open.narrow.as_ptr(), h.open.narrow.capacity());
        let queue = h.bins.capacity();
        // Two laps of the ring, each second a few bins: slots come and go
        // through the same two buffers.
        for second in 101..220 {
            h.record(&interval(second * S, &[2_000, 3_000, 7_000]));
        }
        assert_eq!((h.open.narrow.as_ptr(), h.open.narrow.capacity()), open);
        assert_eq!(
            h.bins.capacity(),
            queue,
            "the finished slots' queue kept its size"
        );
        assert_eq!(h.finished.len(), 60, "60 finished slots and the open one");
        assert_eq!(h.bins.len(), 60 * 3);
        let (bins, _) = h.bins_within(219 * S, 60 * S);
        assert_eq!(bins, BTreeMap::from([(2, 61), (3, 61), (7, 61)]));
        // Bins stay sorted and merged whatever order they arrive in.
        h.record(&interval(219 * S, &[900_000, 1_000]));
        h.record(&interval(219 * S, &[2_500]));
        assert_eq!(
            h.open.narrow,
            vec![(1, 1), (2, 2), (3, 1), (7, 1), (900, 1)]
        );
    }

    #[test]
    fn window_histogram_keeps_wide_bins_with_their_slot() {
        let mut h = WindowHistogram::new(3 * S);
        // Past the HDR range: the bin of the maximum, 2 hours.
        h.record(&interval(10 * S, &[5_000, 7_200 * S]));
        h.record(&interval(11 * S, &[6_000]));
        assert_eq!(h.wide, vec![(10, 7_200_000_000, 1)]);
        let (bins, _) = h.bins_within(12 * S, 3 * S);
        assert_eq!(bins, BTreeMap::from([(5, 1), (6, 1), (7_200_000_000, 1)]));
        // Slot 10 leaves the window when slot 14 opens, its wide bin too.
        h.record(&interval(13 * S, &[4_000]));
        assert_eq!(h.wide.len(), 1);
        h.record(&interval(14 * S, &[4_000]));
        assert!(h.wide.is_empty());
        assert_eq!(
            h.bins_within(14 * S, 3 * S).0,
            BTreeMap::from([(4, 2), (6, 1)])
        );
    }

    #[test]
    fn slot_bins_too_big_for_32_bits_are_kept_whole() {
        let mut bins = SlotBins::default();
        let big = u64::from(u32::MAX);
        bins.add(5, big - 1);
        bins.add(7, 1);
        bins.add(5, 3); // past u32: moves to the wide list
        bins.add(5, 2); // and stays there
        bins.add(big + 10, 1); // a latency of 71 minutes and more
        bins.add(9, big + 1);
        assert_eq!(bins.narrow, vec![(7, 1)]);
        assert_eq!(
            bins.iter().collect::<BTreeMap<_, _>>(),
            BTreeMap::from([(5, big + 4), (7, 1), (9, big + 1), (big + 10, 1)])
        );
    }

    #[test]
    fn window_histogram_slots_grow_with_long_windows() {
        let day = WindowHistogram::new(24 * 3600 * S);
        assert_eq!(day.slot_ns(), 720 * S);
        assert_eq!(day.window_ns(), 24 * 3600 * S);
        assert!(day.len <= MAX_HISTOGRAM_SLOTS);
        let odd = WindowHistogram::new(121 * S);
        assert_eq!(odd.slot_ns(), 2 * S);
        assert!(odd.window_ns() >= 121 * S);
        // A 10 s question of 2 s slots covers 5 slots.
        assert_eq!(odd.bins_within(1_000 * S, 9 * S).1, 10 * S);
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
        // And back: 12-minute slots squeezed into 1 s slots keep their
        // samples within the new window rather than dropping them.
        let back = day.resized(60 * S, 159 * S);
        assert_eq!(back.bins_within(159 * S, 60 * S).0.values().sum::<u64>(), 3);
    }
}
