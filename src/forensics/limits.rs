//! The flight recorder's rate limits: at most one capture per CPU and
//! trigger within `forensics.per_cpu_interval`, at most
//! `forensics.max_per_minute` per trigger, except for a wake-up that
//! escalates: one `ESCALATION` times as late as every capture of its CPU
//! within the interval, so that the worst spike always gets its capture.

use std::collections::{BTreeMap, VecDeque};

use super::journal::Trigger;
use crate::units::NS_PER_SEC;

/// A wake-up at least this many times as late as every capture of its CPU
/// within `forensics.per_cpu_interval` is captured despite the rate
/// limits: the worst spike, the one an alert pages on, always gets its
/// capture when the trace holds it, while a storm of slowly growing
/// spikes can escalate only a bounded number of times (from 1 ms to the
/// 17 s the histograms hold, at most 24 times per interval).
pub const ESCALATION: f64 = 1.5;

/// What the limits say of a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admission {
    /// Within the limits.
    Within,
    /// Past them, as the worst spike so far (counted apart).
    Escalated,
    /// Rate-limited.
    Refused,
}

#[cfg(test)]
impl Admission {
    fn admitted(self) -> bool {
        self != Admission::Refused
    }
}

/// The recorder's rate limits: at most one capture per CPU and trigger
/// per `per_cpu_gap_ns`, at most `max_per_minute` per trigger, unless a
/// wake-up escalates (`ESCALATION`).
#[derive(Debug)]
pub(super) struct RateLimits {
    per_cpu_gap_ns: u64,
    max_per_minute: usize,
    /// Each trigger's and CPU's last captured wake-up: new maxima have
    /// their own budget, never counted against threshold captures.
    last_capture: BTreeMap<(Trigger, usize), u64>,
    /// Each CPU's captures of the last `per_cpu_gap_ns`, any trigger, as
    /// (wake-up time, latency): a later wake-up larger than all of them
    /// by `ESCALATION` is captured despite the limits.
    recent: BTreeMap<usize, VecDeque<(u64, u64)>>,
    /// Each trigger's wake-ups captured in the last minute.
    minute: BTreeMap<Trigger, VecDeque<u64>>,
}

impl RateLimits {
    pub(super) fn new(per_cpu_gap_ns: u64, max_per_minute: usize) -> RateLimits {
        RateLimits {
            per_cpu_gap_ns,
            max_per_minute,
            last_capture: BTreeMap::new(),
            recent: BTreeMap::new(),
            minute: BTreeMap::new(),
        }
    }

    /// Whether a capture of `cpu` at `wakeup_ns`, `latency_ns` late, is
    /// within the limits or escalates past them; if so it is counted
    /// against them.
    pub(super) fn admit(
        &mut self,
        cpu: usize,
        wakeup_ns: u64,
        latency_ns: u64,
        trigger: Trigger,
    ) -> Admission {
        let minute_ago = wakeup_ns.saturating_sub(60 * NS_PER_SEC);
        let minute = self.minute.entry(trigger).or_default();
        while minute.front().is_some_and(|&t| t < minute_ago) {
            minute.pop_front();
        }
        let recent = self.recent.entry(cpu).or_default();
        let gap_ago = wakeup_ns.saturating_sub(self.per_cpu_gap_ns);
        while recent.front().is_some_and(|&(t, _)| t < gap_ago) {
            recent.pop_front();
        }
        let largest = recent.iter().map(|&(_, latency)| latency).max();
        let escalates =
            largest.is_some_and(|largest| latency_ns as f64 >= largest as f64 * ESCALATION);
        // Symmetric: a capture made elsewhere (the observer's) may arrive
        // after a later wake-up of the same CPU was captured.
        let too_soon = self
            .last_capture
            .get(&(trigger, cpu))
            .is_some_and(|&last| wakeup_ns.abs_diff(last) < self.per_cpu_gap_ns);
        let limited = too_soon || minute.len() >= self.max_per_minute;
        if limited && !escalates {
            return Admission::Refused;
        }
        minute.push_back(wakeup_ns);
        recent.push_back((wakeup_ns, latency_ns));
        self.last_capture.insert((trigger, cpu), wakeup_ns);
        if limited {
            Admission::Escalated
        } else {
            Admission::Within
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::NS_PER_MS;

    #[test]
    fn a_larger_spike_escalates_past_the_per_cpu_limit_a_bounded_number_of_times() {
        let ms = NS_PER_MS;
        let mut limits = RateLimits::new(10 * NS_PER_SEC, 60);
        let t = 100 * NS_PER_SEC;
        assert_eq!(
            limits.admit(1, t, 2 * ms, Trigger::Threshold),
            Admission::Within,
            "the first"
        );
        // Within the interval: a smaller or slightly larger one waits...
        assert!(!limits.admit(1, t + ms, ms, Trigger::Threshold).admitted());
        assert!(
            !limits
                .admit(1, t + 2 * ms, 2 * ms + ms / 2, Trigger::Threshold)
                .admitted()
        );
        // ...the 8 ms one after the 2 ms one is captured, and another CPU
        // is not held back by this one.
        assert_eq!(
            limits.admit(1, t + 3 * ms, 8 * ms, Trigger::Threshold),
            Admission::Escalated
        );
        assert!(
            limits
                .admit(0, t + 3 * ms, ms, Trigger::Threshold)
                .admitted()
        );
        // Escalation is against the largest capture of the interval.
        assert!(
            !limits
                .admit(1, t + 4 * ms, 11 * ms, Trigger::Threshold)
                .admitted()
        );
        assert!(
            limits
                .admit(1, t + 5 * ms, 12 * ms, Trigger::Threshold)
                .admitted()
        );
        // A storm of growing spikes: each must beat the last by the
        // factor, so from 12 ms to 17 s at most log1.5(1430) = 18 more.
        let mut latency = 12 * ms;
        let mut admitted = 0;
        for i in 0..100_000u64 {
            latency = (latency + latency / 100).min(17 * NS_PER_SEC);
            if limits
                .admit(1, t + 6 * ms + i * 1000, latency, Trigger::Threshold)
                .admitted()
            {
                admitted += 1;
            }
        }
        assert!((1..=18).contains(&admitted), "{admitted}");
        // After the interval, the ordinary limit applies again.
        assert!(
            limits
                .admit(1, t + 11 * NS_PER_SEC, ms, Trigger::Threshold)
                .admitted()
        );
        // Without a per-CPU interval, order does not matter: a wake-up
        // before the last capture (the observer's, arriving late) is
        // not "too soon".
        let mut unlimited = RateLimits::new(0, 600);
        assert!(
            unlimited
                .admit(1, t + ms, ms, Trigger::Threshold)
                .admitted()
        );
        assert!(unlimited.admit(1, t, ms, Trigger::Threshold).admitted());
        // The minute's budget is also passed by an escalating spike only.
        let mut tight = RateLimits::new(0, 1);
        assert!(tight.admit(0, t, ms, Trigger::Threshold).admitted());
        assert!(!tight.admit(1, t + ms, ms, Trigger::Threshold).admitted());
    }
}
