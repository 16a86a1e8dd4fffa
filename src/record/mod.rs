//! The on-disk record: every CPU's histogram of every interval, in
//! HdrHistogram's interval log format, kept across restarts.
//!
//! - `format`: the lines of an `.hlog` file, written and read; `gap`:
//!   the stretches without samples it names.
//! - `writer`: whole intervals appended, files rotated and pruned.
//! - `reader`: a time range read back, streaming; `lines`: each line of
//!   a file read within a bound, an overlong one read past; `summary`:
//!   a range's statistics per CPU, whole or apart by load.
//! - `keeper`: the daemon's writer thread, its backlog and its status.
//! - `qualification`: the host's last `latencyd qualify`, for the daemon.
//! - `Accumulator`: the interval in progress, filled by the exporter side
//!   from the intervals the samplers publish (never by a sampler).

pub mod format;
pub mod gap;
pub mod hwnoise;
pub mod keeper;
mod lines;
mod payload;
pub mod qualification;
pub mod reader;
mod seconds;
pub mod summary;
pub mod writer;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use format::{Context, Entry, Gap, GapReason, HostFacts, HwnoiseLine, HwnoiseOutcome};
pub use keeper::{Keeper, Status};
pub use reader::{Range, ReadReport};
pub use summary::{Summary, summarize, summarize_while};
pub use writer::{Batch, LogWriter, Settings, Target};

use crate::host::Fingerprint;
use crate::stats::LatencyStats;

/// The interval in progress: per CPU, what the samplers published since
/// it began, at the record's precision. Intervals are aligned to
/// multiples of their length in wall time, so hosts' records line up.
#[derive(Debug)]
pub struct Accumulator {
    interval_ns: u64,
    spike_threshold_ns: u64,
    /// When the interval in progress began (wall time, ns since the epoch).
    start_ns: u64,
    cpus: BTreeMap<usize, LatencyStats>,
    /// The kernel's timerlat, by CPU and context (`irq`, `thread`, `user`).
    timerlat: BTreeMap<(usize, &'static str), LatencyStats>,
    /// The host's facts in force; a finished interval is filed under
    /// those in force when it ends.
    fingerprint: Option<Arc<Fingerprint>>,
    /// The load running now; intervals are cut where it starts or ends.
    load: Option<String>,
    /// The CPUs a `[hwnoise]` window spins now; intervals are cut where
    /// the set changes.
    spun: Vec<usize>,
    /// Stretches without samples that ended in this interval.
    gaps: Vec<Gap>,
    /// `[hwnoise]` windows that ended in this interval.
    hwnoise: Vec<HwnoiseLine>,
}

impl Accumulator {
    pub fn new(interval_ns: u64, spike_threshold_ns: u64, now_ns: u64) -> Accumulator {
        Accumulator {
            interval_ns,
            spike_threshold_ns,
            start_ns: now_ns,
            cpus: BTreeMap::new(),
            timerlat: BTreeMap::new(),
            fingerprint: None,
            load: None,
            spun: Vec::new(),
            gaps: Vec::new(),
            hwnoise: Vec::new(),
        }
    }

    /// Files a finished `[hwnoise]` window (written with the interval in
    /// progress).
    pub fn add_hwnoise(&mut self, window: HwnoiseLine) {
        self.hwnoise.push(window);
    }

    /// The CPUs a hwnoise window spins from `now_ns` on (empty: none).
    /// When they change, the interval in progress ends here, as for a
    /// load, so that no interval mixes spun and undisturbed time.
    pub fn set_spun(&mut self, cpus: Vec<usize>, now_ns: u64) -> Vec<Batch> {
        if cpus == self.spun {
            return Vec::new();
        }
        let batches = [self.take(now_ns, false), self.take(now_ns, true)];
        self.spun = cpus;
        batches.into_iter().flatten().collect()
    }

    /// Files a stretch without samples (written with the interval in
    /// progress).
    pub fn add_gap(&mut self, gap: Gap) {
        self.gaps.push(gap);
    }

    /// The host's facts from now on.
    pub fn set_fingerprint(&mut self, fingerprint: Arc<Fingerprint>) {
        self.fingerprint = Some(fingerprint);
    }

    /// The load running from `now_ns` on (None: none). When it changes,
    /// the interval in progress ends here, filed under the load it was
    /// measured with (an interval already due first, whole), so that no
    /// interval mixes idle and loaded time.
    pub fn set_load(&mut self, load: Option<String>, now_ns: u64) -> Vec<Batch> {
        if load == self.load {
            return Vec::new();
        }
        let batches = [self.take(now_ns, false), self.take(now_ns, true)];
        self.load = load;
        batches.into_iter().flatten().collect()
    }

    /// Adds an interval a sampler published.
    pub fn add(&mut self, cpu: usize, stats: &LatencyStats) {
        let threshold = self.spike_threshold_ns;
        let acc = self
            .cpus
            .entry(cpu)
            .or_insert_with(|| LatencyStats::new(threshold, None));
        // Both without linear histograms and over the same range.
        let _ = acc.merge(stats);
    }

    /// Adds what timerlat measured on `cpu` in `context`.
    pub fn add_timerlat(&mut self, cpu: usize, context: &'static str, stats: &LatencyStats) {
        let threshold = self.spike_threshold_ns;
        let acc = self
            .timerlat
            .entry((cpu, context))
            .or_insert_with(|| LatencyStats::new(threshold, None));
        // Plain HDR statistics on both sides.
        let _ = acc.merge(stats);
    }

    /// The next boundary: the first multiple of the interval after the
    /// interval's start.
    pub fn due_ns(&self) -> u64 {
        (self.start_ns / self.interval_ns + 1) * self.interval_ns
    }

    /// The finished interval once `now_ns` has passed its end, or at once
    /// with `force` (shutdown: the part in progress, its true length).
    pub fn take(&mut self, now_ns: u64, force: bool) -> Option<Batch> {
        let due = self.due_ns();
        if now_ns < due && !force {
            return None;
        }
        let end = if force {
            now_ns.min(due).max(self.start_ns)
        } else {
            due
        };
        let start = std::mem::replace(&mut self.start_ns, end);
        let samplers = std::mem::take(&mut self.cpus)
            .into_iter()
            .map(|(cpu, s)| (cpu, None, s));
        let timerlat = std::mem::take(&mut self.timerlat)
            .into_iter()
            .map(|((cpu, context), s)| (cpu, Some(context.to_string()), s));
        let entries: Vec<Entry> = samplers
            .chain(timerlat)
            .map(|(cpu, timerlat, stats)| Entry {
                cpu,
                start_ns: start,
                length_ns: end - start,
                stats,
                fingerprint: self.fingerprint.as_ref().map(|f| f.id()),
                load: self.load.clone(),
                hwnoise: self.spun.contains(&cpu),
                timerlat,
            })
            .collect();
        let gaps = std::mem::take(&mut self.gaps);
        let hwnoise = std::mem::take(&mut self.hwnoise);
        (!entries.is_empty() || !gaps.is_empty() || !hwnoise.is_empty()).then(|| Batch {
            entries,
            gaps,
            hwnoise,
            fingerprint: self.fingerprint.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::NS_PER_SEC;

    #[test]
    fn a_load_starting_or_ending_cuts_the_interval_and_files_each_part_under_its_state() {
        let t = 1_000 * NS_PER_SEC;
        let mut acc = Accumulator::new(60 * NS_PER_SEC, 100_000, t);
        let mut one = LatencyStats::new(100_000, None);
        one.record(5_000, 0);
        acc.add(0, &one);
        assert!(acc.set_load(None, t + 5).is_empty(), "no change, no cut");
        let idle = acc.set_load(Some("cpu".into()), 1_010 * NS_PER_SEC);
        assert_eq!(idle.len(), 1);
        assert_eq!(idle[0].entries[0].load, None);
        assert_eq!(idle[0].entries[0].length_ns, 10 * NS_PER_SEC);
        acc.add(0, &one);
        acc.add(0, &one);
        // Past the aligned boundary (1020 s): the due interval whole, then
        // the part after it, each under the load.
        let loaded = acc.set_load(None, 1_010 * NS_PER_SEC + 5 * NS_PER_SEC);
        assert_eq!(loaded.len(), 1);
        assert_eq!(loaded[0].entries[0].load.as_deref(), Some("cpu"));
        assert_eq!(loaded[0].entries[0].stats.count, 2);
        assert_eq!(loaded[0].entries[0].start_ns, 1_010 * NS_PER_SEC);
        acc.add(0, &one);
        acc.add(1, &one);
        // The rest runs to the aligned boundary, idle again.
        let rest = acc.take(1_020 * NS_PER_SEC, false).unwrap();
        assert_eq!(rest.entries[0].load, None);
        assert_eq!(rest.entries[0].start_ns, 1_015 * NS_PER_SEC);
        assert_eq!(rest.entries[0].length_ns, 5 * NS_PER_SEC);
        // A change found after the boundary passed: both parts, each whole.
        acc.set_load(Some("cpu".into()), 1_025 * NS_PER_SEC);
        acc.add(0, &one);
        let parts = acc.set_load(None, 1_090 * NS_PER_SEC);
        assert_eq!(parts.len(), 1, "the part after the boundary had no samples");
        assert_eq!(parts[0].entries[0].start_ns, 1_025 * NS_PER_SEC);
        assert_eq!(parts[0].entries[0].load.as_deref(), Some("cpu"));
    }

    #[test]
    fn timerlat_is_filed_beside_the_samplers_by_cpu_and_context() {
        let t = 1_000 * NS_PER_SEC;
        let mut acc = Accumulator::new(60 * NS_PER_SEC, 100_000, t);
        let mut one = LatencyStats::new(100_000, None);
        one.record(5_000, 0);
        acc.add(0, &one);
        acc.add_timerlat(0, "irq", &one);
        acc.add_timerlat(0, "irq", &one);
        acc.add_timerlat(0, "thread", &one);
        let batch = acc.take(1_020 * NS_PER_SEC, false).unwrap();
        let filed: Vec<(usize, Option<&str>, u64)> = (batch.entries.iter())
            .map(|e| (e.cpu, e.timerlat.as_deref(), e.stats.count))
            .collect();
        assert_eq!(
            filed,
            vec![(0, None, 1), (0, Some("irq"), 2), (0, Some("thread"), 1)]
        );
    }

    #[test]
    fn intervals_are_aligned_to_wall_time_and_keep_every_sample() {
        let t = 1_000 * NS_PER_SEC + 123;
        let mut acc = Accumulator::new(60 * NS_PER_SEC, 100_000, t);
        assert_eq!(acc.due_ns(), 1_020 * NS_PER_SEC);
        let mut one = LatencyStats::new(100_000, None);
        one.record(5_000, 0);
        acc.add(0, &one);
        acc.add(1, &one);
        assert!(acc.take(1_019 * NS_PER_SEC, false).is_none());
        let batch = acc.take(1_020 * NS_PER_SEC + 7, false).unwrap();
        assert_eq!(batch.entries.len(), 2);
        assert_eq!(batch.entries[0].start_ns, t);
        assert_eq!(batch.entries[0].length_ns, 1_020 * NS_PER_SEC - t);
        acc.add(0, &one);
        acc.add(0, &one);
        let last = acc.take(1_050 * NS_PER_SEC, true).unwrap();
        assert_eq!(last.entries[0].stats.count, 2);
        assert_eq!(last.entries[0].start_ns, 1_020 * NS_PER_SEC);
        assert_eq!(last.entries[0].length_ns, 30 * NS_PER_SEC);
        assert!(
            acc.take(1_100 * NS_PER_SEC, false).is_none(),
            "nothing recorded, nothing written"
        );
    }
}
