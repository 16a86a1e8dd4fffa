//! The hardware-noise windows as the daemon knows them (`[hwnoise]`):
//! the windows thread's own status, which CPUs spin now (or did until
//! moments ago), and what the samplers and timerlat measured on them
//! meanwhile, kept out of their latency figures.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use serde_json::value::RawValue;

use super::{Status, Windows};
use crate::instruments::shape::{PageLine, Part};
use crate::units::NS_PER_SEC;

/// How long after a window's tracer stopped its CPUs still count as
/// spun: a wake-up the spin delayed is published in the samplers' next
/// interval (200 ms) and drained at the tick after it.
pub const SPUN_AFTER_NS: u64 = NS_PER_SEC;

/// What was kept apart on one CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeptApart {
    /// Sampler wake-ups measured while a window spun the CPU.
    pub wakeups: u64,
    /// Their largest latency, ns.
    pub max_ns: u64,
    /// timerlat periods of the CPU meanwhile.
    pub timerlat_periods: u64,
}

pub struct HwnoisePart {
    /// The windows thread's status (locked on its own, briefly).
    pub status: Arc<Mutex<Status>>,
    /// The CPUs spun now, as the collector's latest tick found them.
    pub spun: BTreeSet<usize>,
    pub kept_apart: BTreeMap<usize, KeptApart>,
}

impl HwnoisePart {
    /// `hwnoise.enabled = false`.
    pub fn off() -> HwnoisePart {
        HwnoisePart::new(Windows::disabled().status())
    }

    pub fn new(status: Arc<Mutex<Status>>) -> HwnoisePart {
        HwnoisePart {
            status,
            spun: BTreeSet::new(),
            kept_apart: BTreeMap::new(),
        }
    }

    /// A copy of the windows' status.
    pub fn status(&self) -> Status {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The CPUs whose wake-ups are kept apart at `now_mono_ns`: those of
    /// the window running, and of the last one for `SPUN_AFTER_NS` after
    /// its tracer stopped.
    pub fn spun_at(status: &Status, now_mono_ns: u64) -> BTreeSet<usize> {
        if let Some(active) = &status.active {
            return active.cpus.iter().copied().collect();
        }
        match (&status.last_window, status.ended_mono_ns) {
            (Some(last), Some(ended)) if now_mono_ns.saturating_sub(ended) < SPUN_AFTER_NS => {
                last.cpus.iter().copied().collect()
            }
            _ => BTreeSet::new(),
        }
    }
}

impl Part for HwnoisePart {
    fn status(&self) -> Option<Box<RawValue>> {
        Some(super::render::status(self))
    }

    fn page_line(&self) -> Option<PageLine> {
        super::render::page_line(self)
    }

    /// A sampler's interval of a spun CPU (counted, not merged), or
    /// timerlat's periods of it.
    fn keep_apart(&mut self, cpu: usize, source: &'static str, count: u64, max_ns: Option<u64>) {
        let k = self.kept_apart.entry(cpu).or_default();
        match source {
            "timerlat" => k.timerlat_periods += count,
            _ => {
                k.wakeups += count;
                if count > 0 {
                    k.max_ns = k.max_ns.max(max_ns.unwrap_or(0));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instruments::hwnoise::{Active, Outcome, WindowReport};
    use crate::stats::LatencyStats;

    #[test]
    fn cpus_count_as_spun_through_the_window_and_a_second_after() {
        let mut status = Status::default();
        assert!(HwnoisePart::spun_at(&status, 5).is_empty());
        status.active = Some(Active {
            cpus: vec![1, 3],
            start_unix_ns: 0,
            end_unix_ns: 0,
            since_mono_ns: 0,
        });
        assert_eq!(HwnoisePart::spun_at(&status, 5), BTreeSet::from([1, 3]));
        status.active = None;
        status.ended_mono_ns = Some(10 * NS_PER_SEC);
        status.last_window = Some(WindowReport {
            start_unix_ns: 0,
            end_unix_ns: 0,
            cpus: vec![1, 3],
            outcome: Outcome::Ran,
            noise: BTreeMap::new(),
            smis: None,
            notes: Vec::new(),
        });
        assert_eq!(
            HwnoisePart::spun_at(&status, 10 * NS_PER_SEC + 900_000_000).len(),
            2
        );
        assert!(HwnoisePart::spun_at(&status, 11 * NS_PER_SEC).is_empty());
    }

    #[test]
    fn kept_apart_wakeups_are_counted_with_their_maximum() {
        let mut state = HwnoisePart::off();
        let mut interval = LatencyStats::new(100_000, None);
        interval.record(400_000_000, 0);
        interval.record(3_000, 1);
        state.keep_apart(1, "sampler", interval.count, Some(interval.max_ns));
        let empty = LatencyStats::new(100_000, None);
        state.keep_apart(1, "sampler", empty.count, Some(empty.max_ns));
        assert_eq!(
            state.kept_apart[&1],
            KeptApart {
                wakeups: 2,
                max_ns: 400_000_000,
                timerlat_periods: 0
            }
        );
    }
}
