//! The stretches without samples the daemon saw: stalls (a sampler that
//! did not run for longer than `measure.stall_threshold`) and offline
//! CPUs, the latest of them kept for `/api/v1/status` and the status
//! page, those still going on included.

use std::collections::VecDeque;

use crate::record::GapReason;

/// Stretches kept; older ones are dropped (the record keeps them all).
pub const MAX_GAPS_SEEN: usize = 32;

/// One stretch without samples on one CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GapSeen {
    pub cpu: usize,
    pub reason: GapReason,
    /// Unix time, ns: the last wake-up before it.
    pub start_unix_ns: u64,
    /// Unix time, ns: the wake-up that ended it; None while it lasts.
    pub end_unix_ns: Option<u64>,
    /// What held the CPU when the stall was found (`SCHED_FIFO 90 task
    /// spin (pid 42)`), where /proc told; None for offline CPUs.
    pub held_by: Option<String>,
}

/// The latest stretches, newest last.
#[derive(Debug, Clone, Default)]
pub struct GapLog {
    pub seen: VecDeque<GapSeen>,
}

impl GapLog {
    /// One that began.
    pub fn open(&mut self, cpu: usize, reason: GapReason, start_unix_ns: u64) {
        if self.seen.len() == MAX_GAPS_SEEN {
            self.seen.pop_front();
        }
        self.seen.push_back(GapSeen {
            cpu,
            reason,
            start_unix_ns,
            end_unix_ns: None,
            held_by: None,
        });
    }

    /// The open one of `cpu` and `reason`, if still kept.
    pub fn open_mut(&mut self, cpu: usize, reason: GapReason) -> Option<&mut GapSeen> {
        self.seen
            .iter_mut()
            .rev()
            .find(|g| g.cpu == cpu && g.reason == reason && g.end_unix_ns.is_none())
    }

    /// The open one of `cpu` and `reason` ended at `end_unix_ns`.
    pub fn close(&mut self, cpu: usize, reason: GapReason, end_unix_ns: u64) {
        if let Some(gap) = self.open_mut(cpu, reason) {
            gap.end_unix_ns = Some(end_unix_ns);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_keeps_the_latest_and_closes_the_open_one() {
        let mut log = GapLog::default();
        for cpu in 0..MAX_GAPS_SEEN + 3 {
            log.open(cpu, GapReason::Offline, cpu as u64);
        }
        assert_eq!(log.seen.len(), MAX_GAPS_SEEN);
        assert_eq!(log.seen[0].cpu, 3, "the oldest dropped");
        log.open(1, GapReason::Stalled, 100);
        log.open_mut(1, GapReason::Stalled).unwrap().held_by = Some("spin".into());
        log.close(1, GapReason::Stalled, 200);
        let stall = log.seen.back().unwrap();
        assert_eq!(
            (stall.end_unix_ns, stall.held_by.as_deref()),
            (Some(200), Some("spin"))
        );
        assert!(log.open_mut(1, GapReason::Stalled).is_none(), "closed");
    }
}
