//! The busy-poll windows as the daemon knows them: what is configured,
//! the window polling now and the next, each CPU's gaps over every
//! window (in the export's buckets) and the last window's figures.

use std::collections::BTreeMap;

use serde_json::value::RawValue;

use super::BusypollConfig;
use crate::config::Config;
use crate::instruments::shape::{PageLine, Part};
use crate::load::Window;
use crate::rt::poll::Tally;

/// One CPU's gaps over every window that ran.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuGaps {
    /// Gaps per bucket of `export.buckets` (not cumulative), the last
    /// entry those above every bound.
    pub counts: Vec<u64>,
    pub count: u64,
    pub sum_ns: u128,
    /// Gaps at least `busypoll.threshold` long.
    pub over_threshold: u64,
}

/// One CPU in the last window that ran.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WindowCpu {
    pub gaps: u64,
    /// Exact, to the counter's tick.
    pub max_ns: u64,
    pub p99_ns: u64,
    pub p9999_ns: u64,
    pub over_threshold: u64,
}

/// The last window that ran.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LastWindow {
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    /// The counter read (`tsc`, `cntvct`, `CLOCK_MONOTONIC`).
    pub counter: &'static str,
    pub per_cpu: BTreeMap<usize, WindowCpu>,
    /// CPUs whose poller ended off its CPU (offline, or moved): their
    /// figures are another CPU's too, and left out.
    pub moved_off: Vec<usize>,
}

#[derive(Debug, Clone)]
pub struct BusypollPart {
    /// The section as the daemon started with it (changes wait for a
    /// restart).
    pub config: BusypollConfig,
    /// `export.buckets`, ns.
    pub bounds_ns: Vec<u64>,
    /// The window polling now.
    pub active: Option<Window>,
    pub next: Option<Window>,
    /// Windows whose pollers ran to their end.
    pub windows_total: u64,
    /// Windows that could not run, by reason, and the latest one's why.
    pub skipped: BTreeMap<&'static str, u64>,
    pub last_skip: Option<String>,
    pub per_cpu: BTreeMap<usize, CpuGaps>,
    pub last_window: Option<LastWindow>,
}

impl BusypollPart {
    pub fn new(config: &Config) -> BusypollPart {
        BusypollPart {
            config: config.section::<super::BusypollConfig>().clone(),
            bounds_ns: config.export.buckets_ns.clone(),
            active: None,
            next: None,
            windows_total: 0,
            skipped: BTreeMap::new(),
            last_skip: None,
            per_cpu: BTreeMap::new(),
            last_window: None,
        }
    }

    /// A window's tallies taken in: each gap into its CPU's buckets (the
    /// first bound at or above the upper edge of its HDR bucket, so that
    /// no bucket holds a gap above its bound), the window's figures kept;
    /// a poller that ended off its CPU is left out and named.
    pub fn take_in(&mut self, window: &Window, counter: &'static str, tallies: &[Tally]) {
        let threshold = self.config.threshold_ns;
        let mut last = LastWindow {
            start_unix_ns: unix_ns(window.start),
            end_unix_ns: unix_ns(window.end),
            counter,
            per_cpu: BTreeMap::new(),
            moved_off: (tallies.iter())
                .filter(|t| t.moved)
                .map(|t| t.cpu)
                .collect(),
        };
        for tally in tallies.iter().filter(|t| !t.moved) {
            let gaps = self.per_cpu.entry(tally.cpu).or_default();
            gaps.counts.resize(self.bounds_ns.len() + 1, 0);
            let h = &tally.histogram;
            let mut over = 0;
            for v in h.iter_recorded() {
                let (value, n) = (v.value_iterated_to(), v.count_at_value());
                let top = h.highest_equivalent(value);
                let at = self.bounds_ns.partition_point(|&bound| bound < top);
                gaps.counts[at] += n;
                gaps.sum_ns += u128::from(h.median_equivalent(value)) * u128::from(n);
                if h.lowest_equivalent(value) >= threshold {
                    over += n;
                }
            }
            gaps.count += h.len();
            gaps.over_threshold += over;
            let quantile = |q: f64| h.value_at_quantile(q).min(tally.max_ns);
            last.per_cpu.insert(
                tally.cpu,
                WindowCpu {
                    gaps: h.len(),
                    max_ns: tally.max_ns,
                    p99_ns: quantile(0.99),
                    p9999_ns: quantile(0.9999),
                    over_threshold: over,
                },
            );
        }
        self.windows_total += 1;
        self.last_window = Some(last);
    }

    /// A window that could not run, and why.
    pub fn skip(&mut self, reason: &'static str, why: String) {
        *self.skipped.entry(reason).or_default() += 1;
        self.last_skip = Some(why);
    }
}

pub(super) fn unix_ns(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

impl Part for BusypollPart {
    fn status(&self) -> Option<Box<RawValue>> {
        Some(super::render::status(self))
    }

    fn page_line(&self) -> Option<PageLine> {
        super::render::page_line(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rt::poll::BucketLayout;
    use std::time::{Duration, UNIX_EPOCH};

    fn tally(cpu: usize, gaps_ns: &[u64]) -> Tally {
        // 1,000 ticks a µs: a tick is a nanosecond.
        let mut t = Tally::new(cpu, 1_000, BucketLayout::oslat_default());
        for &ns in gaps_ns {
            t.file(ns);
        }
        t.settle();
        t
    }

    #[test]
    fn a_window_files_each_gap_in_its_bucket_and_leaves_out_a_moved_poller() {
        let mut config = crate::instruments::registry::builtin_config();
        config
            .section_mut::<super::super::BusypollConfig>()
            .threshold_ns = 20_000;
        let mut part = BusypollPart::new(&config);
        let window = Window {
            start: UNIX_EPOCH + Duration::from_secs(100),
            end: UNIX_EPOCH + Duration::from_secs(160),
        };
        let mut moved = tally(3, &[5_000_000]);
        moved.moved = true;
        part.take_in(&window, "tsc", &[tally(2, &[1_500, 1_500, 30_000]), moved]);
        let gaps = &part.per_cpu[&2];
        assert_eq!((gaps.count, gaps.over_threshold), (3, 1));
        // 1.5 µs in the 2 µs bucket, 30 µs in the 50 µs one.
        let at = |ns: u64| {
            config
                .export
                .buckets_ns
                .iter()
                .position(|&b| b == ns)
                .unwrap()
        };
        assert_eq!((gaps.counts[at(2_000)], gaps.counts[at(50_000)]), (2, 1));
        let last = part.last_window.as_ref().unwrap();
        assert_eq!(last.per_cpu[&2].max_ns, 30_000);
        assert_eq!(last.moved_off, [3]);
        assert!(!part.per_cpu.contains_key(&3), "another CPU's figures");
        assert_eq!(part.windows_total, 1);
    }
}
