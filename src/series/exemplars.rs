//! Exemplars of a latency series: a late wake-up forensics captured,
//! with the capture's id, and the series' window maximum, each with its
//! exact latency and time. The protobuf exposition and the OpenMetrics
//! text carry them (a classic bucket the newest of its range, a native
//! histogram its newest few); the Prometheus text format has no place
//! for them. Whoever keeps a series lists its own ([`Captures`] is what
//! forensics captured in this run, and what it is about to).
//!
//! Only what happened since this daemon started is an exemplar: the
//! histograms count from the start, and a capture kept from an earlier
//! run is not one of their samples.

use std::collections::BTreeMap;

use super::{Key, WindowMax};
use crate::stats::hdr;

/// At most this many exemplars per series (a native histogram's list).
pub const MAX_PER_SERIES: usize = 8;

/// The exemplar label Grafana's data links and the alerts' annotations
/// read: the capture's id.
pub const CAPTURE_LABEL: &str = "capture";

#[derive(Debug, Clone, PartialEq)]
pub struct Exemplar {
    /// Sorted by name.
    pub labels: Vec<(&'static str, String)>,
    /// The latency, in seconds.
    pub value: f64,
    /// When the wake-up happened, Unix nanoseconds.
    pub unix_ns: u64,
    /// Where the sample was counted, in seconds: the upper edge of its
    /// HDR bucket, as `BucketCounts` files it (its value past the HDR
    /// range), so the exemplar rides on the classic bucket that counts it.
    pub counted_at: f64,
}

impl Exemplar {
    pub fn new(labels: Vec<(&'static str, String)>, ns: u64, unix_ns: u64) -> Exemplar {
        let counted_ns = hdr::index_of(ns).map_or(ns, hdr::highest_ns);
        Exemplar {
            labels,
            value: ns as f64 / 1e9,
            unix_ns,
            counted_at: counted_ns as f64 / 1e9,
        }
    }
}

/// Each series' exemplars, oldest first.
pub type Exemplars = BTreeMap<Key, Vec<Exemplar>>;

/// The newest exemplar counted in `(lower, upper]` seconds.
pub fn in_bucket(list: &[Exemplar], lower: f64, upper: f64) -> Option<&Exemplar> {
    list.iter()
        .rev()
        .find(|e| e.counted_at > lower && e.counted_at <= upper)
}

/// Each classic bucket's exemplar for the upper bounds `bounds` (the
/// last may be `+Inf`), and one past the last bound when an exemplar lies
/// above it (a `+Inf` bucket to carry it). With `newest_wins`, a bucket
/// keeps its exemplar only if no higher bucket's is newer: a Prometheus
/// that reads a native histogram's exemplars from its classic buckets
/// (2.42) takes the first, one per scrape, and the first is then the
/// newest.
pub fn for_buckets(
    list: &[Exemplar],
    bounds: impl Iterator<Item = f64>,
    newest_wins: bool,
) -> Vec<Option<&Exemplar>> {
    let mut lower = f64::NEG_INFINITY;
    let mut chosen: Vec<Option<&Exemplar>> = bounds
        .map(|upper| {
            let e = in_bucket(list, lower, upper);
            lower = upper;
            e
        })
        .collect();
    if lower < f64::INFINITY {
        chosen.push(in_bucket(list, lower, f64::INFINITY));
    }
    if newest_wins {
        let mut newest_above = None;
        for e in chosen.iter_mut().rev() {
            if let Some(ex) = *e {
                if newest_above.is_some_and(|t| t >= ex.unix_ns) {
                    *e = None;
                } else {
                    newest_above = Some(ex.unix_ns);
                }
            }
        }
    }
    chosen
}

/// How long a wake-up forensics will capture waits for its capture before
/// the window maximum stands in for it: a capture takes well under a
/// second to read and attribute.
pub const CAPTURE_GRACE_NS: u64 = 5_000_000_000;

/// Which window maxima forensics is about to capture: those at least
/// its threshold late (or every new maximum, with
/// `forensics.capture_new_max`), while it runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pending {
    pub capturing: bool,
    pub threshold_ns: u64,
    pub new_max: bool,
}

impl Pending {
    /// Whether the maximum `max_ns`, sampled `age_ns` ago, may still get
    /// a capture.
    pub fn waits(self, max_ns: u64, age_ns: u64) -> bool {
        self.capturing && (self.new_max || max_ns >= self.threshold_ns) && age_ns < CAPTURE_GRACE_NS
    }
}

/// A capture of this run as an exemplar, with whose it is.
#[derive(Debug, Clone)]
pub struct Captured {
    pub cpu: usize,
    /// The observed task's (name, container); `None` for a sampler's.
    pub task: Option<(String, String)>,
    pub exemplar: Exemplar,
}

/// What forensics captured in this run (newest first, as its journal
/// keeps them) and is about to, at one scrape's time.
#[derive(Debug, Clone, Default)]
pub struct Captures {
    pub list: Vec<Captured>,
    pub pending: Pending,
    /// `CLOCK_MONOTONIC` and wall time at the scrape, ns.
    pub monotonic_ns: u64,
    pub unix_ns: u64,
}

impl Captures {
    /// The Unix time of the `CLOCK_MONOTONIC` time `mono_ns`.
    pub fn unix_ns_of(&self, mono_ns: u64) -> u64 {
        self.unix_ns
            .saturating_sub(self.monotonic_ns.saturating_sub(mono_ns))
    }

    /// The window maximum of `window` (a series of `cpu`) as an exemplar,
    /// unless a capture of the same latency already is one (`captured`),
    /// or may soon be: Prometheus keeps one exemplar per series and time,
    /// so the maximum's own would shut out the capture's of the same
    /// wake-up.
    pub fn window_exemplar(
        &self,
        window: &WindowMax,
        cpu: usize,
        captured: &[Exemplar],
    ) -> Option<Exemplar> {
        let (max_ns, at_ns) = window.max_and_time(self.monotonic_ns)?;
        let value = max_ns as f64 / 1e9;
        if captured.iter().any(|e| e.value == value)
            || (self.pending).waits(max_ns, self.monotonic_ns.saturating_sub(at_ns))
        {
            return None;
        }
        Some(Exemplar::new(
            vec![("cpu", cpu.to_string())],
            max_ns,
            self.unix_ns_of(at_ns),
        ))
    }
}

/// Keeps the newest `MAX_PER_SERIES`, oldest first.
pub fn finish(mut list: Vec<Exemplar>) -> Vec<Exemplar> {
    list.sort_by_key(|e| e.unix_ns);
    let extra = list.len().saturating_sub(MAX_PER_SERIES);
    list.drain(..extra);
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(value: f64, unix_ns: u64) -> Exemplar {
        Exemplar {
            labels: vec![],
            value,
            unix_ns,
            counted_at: value,
        }
    }

    #[test]
    fn an_exemplar_rides_on_the_bucket_that_counts_its_sample() {
        // 2 ms exactly: its HDR bucket reaches above 2 ms, so BucketCounts
        // counts it under the next bound; so does its exemplar.
        let e = Exemplar::new(vec![], 2_000_000, 1);
        assert_eq!(e.value, 0.002);
        assert!(e.counted_at > 0.002 && e.counted_at < 0.00202, "{e:?}");
        assert!(in_bucket(std::slice::from_ref(&e), 0.001, 0.002).is_none());
        assert!(in_bucket(std::slice::from_ref(&e), 0.002, 0.005).is_some());
        // Past the HDR range: where its value is.
        assert_eq!(Exemplar::new(vec![], 100_000_000_000, 1).counted_at, 100.0);
    }

    #[test]
    fn a_bucket_takes_the_newest_exemplar_of_its_range() {
        let list = vec![at(0.002, 1), at(0.0025, 2), at(0.004, 3)];
        assert_eq!(in_bucket(&list, 0.001, 0.0025).unwrap().unix_ns, 2);
        assert_eq!(in_bucket(&list, 0.0025, 0.005).unwrap().unix_ns, 3);
        assert!(in_bucket(&list, 0.005, f64::INFINITY).is_none());
        assert!(
            in_bucket(&list, 0.0, 0.002).unwrap().unix_ns == 1,
            "the bound is inclusive"
        );
    }

    #[test]
    fn a_maximum_forensics_will_capture_waits_for_its_capture() {
        let pending = Pending {
            capturing: true,
            threshold_ns: 1_000_000,
            new_max: false,
        };
        assert!(pending.waits(1_000_000, 0));
        assert!(pending.waits(2_000_000, CAPTURE_GRACE_NS - 1));
        assert!(
            !pending.waits(2_000_000, CAPTURE_GRACE_NS),
            "no capture came"
        );
        assert!(
            !pending.waits(999_999, 0),
            "under the threshold: never captured"
        );
        assert!(
            Pending {
                new_max: true,
                ..pending
            }
            .waits(10, 0)
        );
        assert!(
            !Pending {
                capturing: false,
                ..pending
            }
            .waits(2_000_000, 0)
        );
    }

    #[test]
    fn with_native_buckets_the_first_bucket_exemplar_is_the_newest() {
        // Buckets up to 1 ms, 2 ms, 5 ms; an exemplar above them all.
        let list = vec![at(0.0015, 3), at(0.003, 1), at(0.0008, 2), at(0.009, 0)];
        let bounds = [0.001, 0.002, 0.005];
        let times = |chosen: Vec<Option<&Exemplar>>| -> Vec<Option<u64>> {
            chosen.iter().map(|e| e.map(|e| e.unix_ns)).collect()
        };
        assert_eq!(
            times(for_buckets(&list, bounds.into_iter(), false)),
            vec![Some(2), Some(3), Some(1), Some(0)],
            "each bucket its own, +Inf added"
        );
        assert_eq!(
            times(for_buckets(&list, bounds.into_iter(), true)),
            vec![None, Some(3), Some(1), Some(0)],
            "only what no higher bucket's exemplar is newer than: the first is the newest"
        );
        let none_above = for_buckets(&list[2..3], [0.001, f64::INFINITY].into_iter(), false);
        assert_eq!(none_above.len(), 2, "+Inf is there already");
    }

    #[test]
    fn only_the_newest_are_kept_oldest_first() {
        let list: Vec<Exemplar> = (0..20).rev().map(|i| at(0.001, i)).collect();
        let kept = finish(list);
        assert_eq!(kept.len(), MAX_PER_SERIES);
        assert_eq!(kept.first().unwrap().unix_ns, 20 - MAX_PER_SERIES as u64);
        assert_eq!(kept.last().unwrap().unix_ns, 19);
    }
}
