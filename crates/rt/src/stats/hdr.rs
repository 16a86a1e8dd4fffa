//! `Hdr`: counts of latencies in nanoseconds, in HdrHistogram's layout at
//! 2 significant digits, stored two ways.
//!
//! The layout: values below 256 ns have a counter each; above, every
//! power of two is split into 128 equal buckets, so a bucket is at most
//! 1/128 (0.78 %) of its values wide. 3,584 counters reach 2^34 ns
//! (17.2 s). It is bucket for bucket the layout of
//! `hdrhistogram::Histogram::new_with_bounds(1, 10 s, 2)`, which is how the
//! record's `.hlog` files and `/api/v1/histogram` carry it.
//!
//! The storage depends on the role (ARCHITECTURE.md, "Memory per CPU"):
//! - `Dense`, for a sampler's interval: all 3,584 counters allocated and
//!   written up front, 16 bits each (7 KiB), so that recording never
//!   allocates nor faults. A counter that passes 65,535 carries into a
//!   small table; a page mask remembers which 128-counter pages hold
//!   anything, so that merging and resetting an interval touch only
//!   those (5 to 9 pages, 1.8 KiB, in a typical interval instead of 7 KiB).
//! - `Paged`, for the consumer's cumulative state: 128-counter pages
//!   allocated when first used, 32 bits wide until a counter passes
//!   2^32 - 1, then that page is widened to 64 bits. Latencies occupy a
//!   few powers of two, so a CPU's lifetime histogram holds a handful of
//!   pages.
//!
//! Both storages count the same way and merge into each other; quantiles
//! and the record's encoding read either:
//!
//! ```
//! use latencyd_rt::stats::hdr::{self, Hdr};
//!
//! let mut interval = Hdr::dense(); // a sampler's: 7 KiB, written up front
//! let mut lifetime = Hdr::paged(); // the consumer's: pages when first used
//! for ns in [180, 181, 20_000, 20_050] {
//!     assert!(interval.record(ns)); // false only past 2^34 ns
//! }
//! assert_eq!(lifetime.merge(&interval), 0); // nothing past the range
//! interval.reset();
//! assert_eq!((lifetime.len(), interval.len()), (4, 0));
//! // Below 256 ns each nanosecond has its counter; above, a bucket is at
//! // most 1/128 of its values wide, so 20,000 and 20,050 share one.
//! let buckets: Vec<(u64, u64)> = lifetime.buckets().map(|b| (b.lowest_ns(), b.count)).collect();
//! assert_eq!(buckets, [(180, 1), (181, 1), (19_968, 2)]);
//! assert_eq!(hdr::index_of(20_000), hdr::index_of(20_050));
//! ```

use hdrhistogram::Histogram;

/// Counters in the layout.
pub const BUCKETS: usize = 3_584;
/// Counters per page, as `Dense` tracks them and `Paged` allocates them.
pub const PAGE_LEN: usize = 128;
const PAGES: usize = BUCKETS / PAGE_LEN;
/// The largest value the layout holds: 2^34 - 1 ns, 17.2 s.
pub const HIGHEST_NS: u64 = (1 << 34) - 1;
/// Counters of one interval that may pass 65,535 samples. An interval
/// grows only while its consumer does not collect it; holding 16 bins of
/// 65,536 samples takes a million samples, 17 minutes at 1 kHz.
pub const CARRY_SLOTS: usize = 16;

/// The counter holding `ns`, or `None` past [`HIGHEST_NS`].
#[inline]
pub fn index_of(ns: u64) -> Option<usize> {
    if ns < 256 {
        return Some(ns as usize);
    }
    let shift = u64::from(63 - ns.leading_zeros()) - 7;
    let index = (128 * shift + (ns >> shift)) as usize;
    (index < BUCKETS).then_some(index)
}

/// The smallest value counted by counter `index`.
pub fn lowest_ns(index: usize) -> u64 {
    if index < 256 {
        return index as u64;
    }
    let shift = index / PAGE_LEN - 1;
    ((index % PAGE_LEN + PAGE_LEN) as u64) << shift
}

/// The largest value counted by counter `index`.
pub fn highest_ns(index: usize) -> u64 {
    if index < 256 {
        return index as u64;
    }
    lowest_ns(index) + (1 << (index / PAGE_LEN - 1)) - 1
}

/// One non-empty counter, as `Hdr::buckets` lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    pub index: usize,
    pub count: u64,
}

impl Bucket {
    /// The smallest value of the bucket.
    pub fn lowest_ns(&self) -> u64 {
        lowest_ns(self.index)
    }
    /// The largest value of the bucket: no sample in it is above this.
    pub fn highest_ns(&self) -> u64 {
        highest_ns(self.index)
    }
}

#[derive(Debug, Clone)]
pub struct Hdr {
    storage: Storage,
}

#[derive(Debug, Clone)]
enum Storage {
    Dense(Box<Dense>),
    Paged(Box<[Option<Page>; PAGES]>),
}

#[derive(Debug, Clone)]
struct Dense {
    counts: [u16; BUCKETS],
    /// Bit p: page p may hold a non-zero counter.
    touched: u32,
    /// Multiples of 65,536 that counters passed: (index, amount).
    carry: [(u16, u64); CARRY_SLOTS],
    carried: u8,
}

#[derive(Debug, Clone)]
enum Page {
    Narrow(Box<[u32; PAGE_LEN]>),
    Wide(Box<[u64; PAGE_LEN]>),
}

impl Hdr {
    /// A histogram for a real-time sampler: every counter allocated and
    /// written now (so its pages are mapped and, under `mlockall`,
    /// locked), none later.
    pub fn dense() -> Hdr {
        let mut dense = Box::new(Dense {
            counts: [0; BUCKETS],
            touched: 0,
            carry: [(0, 0); CARRY_SLOTS],
            carried: 0,
        });
        // Allocation may hand out zero pages never written; write every
        // counter where the optimiser cannot see it is already zero.
        std::hint::black_box(&mut dense.counts[..]).fill(0);
        Hdr {
            storage: Storage::Dense(dense),
        }
    }

    /// A histogram that allocates its pages as they are first used (the
    /// consumer's side; never on a sampler).
    pub fn paged() -> Hdr {
        Hdr {
            storage: Storage::Paged(Box::new(std::array::from_fn(|_| None))),
        }
    }

    /// An empty histogram stored as `self` is.
    pub fn empty_like(&self) -> Hdr {
        match self.storage {
            Storage::Dense(_) => Hdr::dense(),
            Storage::Paged(_) => Hdr::paged(),
        }
    }

    pub fn is_dense(&self) -> bool {
        matches!(self.storage, Storage::Dense(_))
    }

    /// Counts one sample of `ns`. Returns `false` when the histogram
    /// cannot hold it (past [`HIGHEST_NS`], or a dense counter at 65,535
    /// with the carry table full); the caller counts it aside. A dense
    /// histogram never allocates here.
    #[inline]
    pub fn record(&mut self, ns: u64) -> bool {
        match index_of(ns) {
            Some(index) => self.add(index, 1),
            None => false,
        }
    }

    /// Adds `count` samples to counter `index`; `false` (and nothing
    /// added) when they cannot be held.
    #[inline]
    pub fn add(&mut self, index: usize, count: u64) -> bool {
        match &mut self.storage {
            Storage::Dense(dense) => dense.add(index, count),
            Storage::Paged(pages) => {
                let page = pages[index / PAGE_LEN]
                    .get_or_insert_with(|| Page::Narrow(Box::new([0; PAGE_LEN])));
                page.add(index % PAGE_LEN, count);
                true
            }
        }
    }

    /// Adds every counter of `other`; returns the samples that could not
    /// be held (only a dense histogram refuses any).
    pub fn merge(&mut self, other: &Hdr) -> u64 {
        let mut refused = 0;
        for bucket in other.buckets() {
            if !self.add(bucket.index, bucket.count) {
                refused += bucket.count;
            }
        }
        refused
    }

    /// Empties the histogram. A dense one keeps its memory and writes only
    /// the pages it used; a paged one frees its pages.
    pub fn reset(&mut self) {
        match &mut self.storage {
            Storage::Dense(dense) => dense.reset(),
            Storage::Paged(pages) => pages.iter_mut().for_each(|page| *page = None),
        }
    }

    /// The non-empty counters in ascending order.
    pub fn buckets(&self) -> impl Iterator<Item = Bucket> + '_ {
        (0..PAGES)
            .filter(move |&p| self.page_in_use(p))
            .flat_map(move |p| {
                (p * PAGE_LEN..(p + 1) * PAGE_LEN).filter_map(move |index| {
                    let count = self.count_at(index);
                    (count > 0).then_some(Bucket { index, count })
                })
            })
    }

    /// The samples held.
    pub fn len(&self) -> u64 {
        self.buckets().map(|b| b.count).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.buckets().next().is_none()
    }

    fn page_in_use(&self, page: usize) -> bool {
        match &self.storage {
            Storage::Dense(dense) => dense.touched & (1 << page) != 0,
            Storage::Paged(pages) => pages[page].is_some(),
        }
    }

    fn count_at(&self, index: usize) -> u64 {
        match &self.storage {
            Storage::Dense(dense) => dense.count_at(index),
            Storage::Paged(pages) => match &pages[index / PAGE_LEN] {
                None => 0,
                Some(Page::Narrow(counts)) => u64::from(counts[index % PAGE_LEN]),
                Some(Page::Wide(counts)) => counts[index % PAGE_LEN],
            },
        }
    }

    /// Bytes on the heap, to account memory per CPU.
    pub fn heap_bytes(&self) -> usize {
        match &self.storage {
            Storage::Dense(_) => std::mem::size_of::<Dense>(),
            Storage::Paged(pages) => {
                std::mem::size_of::<[Option<Page>; PAGES]>()
                    + pages
                        .iter()
                        .map(|page| match page {
                            None => 0,
                            Some(Page::Narrow(_)) => PAGE_LEN * 4,
                            Some(Page::Wide(_)) => PAGE_LEN * 8,
                        })
                        .sum::<usize>()
            }
        }
    }

    /// The same counts as an `hdrhistogram` histogram (1 ns to 10 s, 2
    /// digits: the same buckets), to serialise.
    pub fn to_hdrhistogram(&self) -> Histogram<u64> {
        let mut hdr = Histogram::new_with_bounds(1, 10_000_000_000, 2)
            .expect("constant HDR bounds are valid");
        for bucket in self.buckets() {
            // The layouts are the same, so every bucket has a home; the
            // crate's lowest trackable value is 1, so the 0 ns bucket goes
            // in as 0 too (its index is 0 either way).
            let _ = hdr.record_n(bucket.lowest_ns(), bucket.count);
        }
        hdr
    }

    /// Counts read from an `hdrhistogram` histogram of any precision (a
    /// finer one is coarsened: each of its buckets lies inside one of
    /// ours). Returns the paged histogram and the samples past its range.
    pub fn from_hdrhistogram(hdr: &Histogram<u64>) -> (Hdr, u64) {
        let mut ours = Hdr::paged();
        let mut past = 0;
        for value in hdr.iter_recorded() {
            match index_of(value.value_iterated_to()) {
                Some(index) => {
                    ours.add(index, value.count_at_value());
                }
                None => past += value.count_at_value(),
            }
        }
        (ours, past)
    }
}

/// Histograms are equal when they count the same, however stored.
impl PartialEq for Hdr {
    fn eq(&self, other: &Hdr) -> bool {
        self.buckets().eq(other.buckets())
    }
}

impl Eq for Hdr {}

impl Dense {
    #[inline]
    fn add(&mut self, index: usize, count: u64) -> bool {
        let total = u64::from(self.counts[index]) + count;
        if total > u64::from(u16::MAX) {
            let whole = total & !0xFFFF;
            if !self.carry_add(index, whole) {
                return false;
            }
        }
        self.counts[index] = (total & 0xFFFF) as u16;
        self.touched |= 1 << (index / PAGE_LEN);
        true
    }

    /// Adds `amount` to the carry of counter `index`, taking a free slot
    /// if it has none; `false` when the table is full.
    #[cold]
    fn carry_add(&mut self, index: usize, amount: u64) -> bool {
        let used = usize::from(self.carried);
        if let Some(slot) = self.carry[..used]
            .iter_mut()
            .find(|slot| usize::from(slot.0) == index)
        {
            slot.1 += amount;
            return true;
        }
        if used == CARRY_SLOTS {
            return false;
        }
        self.carry[used] = (index as u16, amount);
        self.carried += 1;
        true
    }

    #[inline]
    fn count_at(&self, index: usize) -> u64 {
        let low = u64::from(self.counts[index]);
        if self.carried == 0 {
            return low;
        }
        low + self.carry[..usize::from(self.carried)]
            .iter()
            .filter(|slot| usize::from(slot.0) == index)
            .map(|slot| slot.1)
            .sum::<u64>()
    }

    fn reset(&mut self) {
        let mut touched = self.touched;
        while touched != 0 {
            let page = touched.trailing_zeros() as usize;
            self.counts[page * PAGE_LEN..(page + 1) * PAGE_LEN].fill(0);
            touched &= touched - 1;
        }
        self.touched = 0;
        self.carried = 0;
    }
}

impl Page {
    fn add(&mut self, offset: usize, count: u64) {
        match self {
            Page::Narrow(counts) => {
                let total = u64::from(counts[offset]) + count;
                match u32::try_from(total) {
                    Ok(total) => counts[offset] = total,
                    Err(_) => {
                        let mut wide = Box::new([0u64; PAGE_LEN]);
                        for (w, &n) in wide.iter_mut().zip(counts.iter()) {
                            *w = u64::from(n);
                        }
                        wide[offset] = total;
                        *self = Page::Wide(wide);
                    }
                }
            }
            Page::Wide(counts) => counts[offset] += count,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_hdrhistograms_two_digit_layout() {
        // Every bucket edge agrees with the hdrhistogram crate's.
        let theirs = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 2).unwrap();
        assert_eq!(theirs.distinct_values(), BUCKETS);
        for index in (0..BUCKETS).step_by(7).chain([255, 256, 257, BUCKETS - 1]) {
            let (low, high) = (lowest_ns(index), highest_ns(index));
            assert_eq!(index_of(low), Some(index), "{index}");
            assert_eq!(index_of(high), Some(index), "{index}");
            if low > 0 {
                assert_eq!(theirs.lowest_equivalent(low), low, "{index}");
                assert_eq!(theirs.highest_equivalent(low), high, "{index}");
            }
            // Buckets are at most 1/128 of their values wide.
            assert!((high - low) * 128 <= low.max(1), "{index}: {low}..={high}");
        }
        assert_eq!(highest_ns(BUCKETS - 1), HIGHEST_NS);
        assert_eq!(index_of(HIGHEST_NS + 1), None);
        assert_eq!(index_of(u64::MAX), None);
    }

    #[test]
    fn dense_and_paged_count_alike_and_convert_both_ways() {
        let mut dense = Hdr::dense();
        let mut paged = Hdr::paged();
        let values = [0, 1, 255, 256, 1_000, 4_005, 123_456, 9_999_999, HIGHEST_NS];
        for (i, &v) in values.iter().enumerate() {
            for _ in 0..=i {
                assert!(dense.record(v));
                assert!(paged.record(v));
            }
        }
        assert!(!dense.record(HIGHEST_NS + 1));
        assert!(!paged.record(HIGHEST_NS + 1));
        assert_eq!(dense, paged);
        assert_eq!(dense.len(), 45);
        let theirs = dense.to_hdrhistogram();
        assert_eq!(theirs.len(), 45);
        assert_eq!(theirs.max(), HIGHEST_NS);
        let (back, past) = Hdr::from_hdrhistogram(&theirs);
        assert_eq!((back, past), (paged.clone(), 0));
        // A finer histogram is coarsened into the same buckets.
        let mut fine = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3).unwrap();
        for &v in &values[1..] {
            fine.record(v).unwrap();
        }
        let (coarse, _) = Hdr::from_hdrhistogram(&fine);
        let mut expected = Hdr::paged();
        values[1..]
            .iter()
            .for_each(|&v| assert!(expected.record(v)));
        assert_eq!(coarse, expected);
    }

    #[test]
    fn dense_counters_carry_past_sixteen_bits_and_refuse_when_full() {
        let mut dense = Hdr::dense();
        for _ in 0..70_000 {
            assert!(dense.record(5_000));
        }
        assert!(dense.add(index_of(5_000).unwrap(), 1 << 33));
        assert_eq!(dense.len(), 70_000 + (1 << 33));
        // Fill the carry table with other counters.
        for slot in 1..CARRY_SLOTS {
            assert!(dense.add(slot, 70_000), "slot {slot}");
        }
        // A new counter past 65,535 has no slot: refused, nothing added.
        let before = dense.len();
        assert!(!dense.add(1_000, 70_000));
        assert_eq!(dense.len(), before);
        // Below 65,536 it still fits, and a carried counter still grows.
        assert!(dense.add(1_000, 60_000));
        assert!(dense.add(1, 1 << 20));
        let mut paged = Hdr::paged();
        assert_eq!(paged.merge(&dense), 0);
        assert_eq!(paged, dense);
        // Reset clears carries too.
        dense.reset();
        assert!(dense.is_empty());
        assert!(dense.add(1_000, 70_000));
    }

    #[test]
    fn paged_pages_widen_instead_of_clamping() {
        let mut paged = Hdr::paged();
        paged.add(300, u64::from(u32::MAX));
        paged.add(301, 7);
        let narrow = paged.heap_bytes();
        paged.add(300, 2);
        assert_eq!(paged.heap_bytes(), narrow + PAGE_LEN * 4);
        let counts: Vec<(usize, u64)> = paged.buckets().map(|b| (b.index, b.count)).collect();
        assert_eq!(counts, vec![(300, u64::from(u32::MAX) + 2), (301, 7)]);
        paged.reset();
        assert!(paged.is_empty());
    }

    #[test]
    fn dense_reset_writes_only_used_pages_and_empties_all() {
        let mut dense = Hdr::dense();
        for v in [3, 70_000, 5_000_000] {
            dense.record(v);
        }
        let Storage::Dense(inner) = &dense.storage else {
            unreachable!()
        };
        assert_eq!(inner.touched.count_ones(), 3);
        dense.reset();
        assert!(dense.is_empty());
        let Storage::Dense(inner) = &dense.storage else {
            unreachable!()
        };
        assert!(inner.counts.iter().all(|&c| c == 0));
        assert_eq!(inner.touched, 0);
    }
}
