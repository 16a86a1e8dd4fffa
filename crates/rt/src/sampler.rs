//! The sampler's loop: sleep to an absolute deadline, record how late the
//! wake-up was, and hand the interval over now and then.
//!
//! Everything the loop uses is allocated by `thread::spawn` before the
//! thread starts. Once the thread has switched to its real-time policy it
//! runs `hot_loop` only: no allocation, no lock, no logging, no system call
//! but `clock_nanosleep` (`clock_gettime` is served by the vDSO). It talks
//! to the outside through atomics (`thread::SamplerShared`) and the
//! wait-free handoff (`handoff::Publisher`).
//!
//! Deadlines are kept as period numbers on a fixed grid, `start + k ·
//! interval`, so every period is accounted for exactly once: a wake-up
//! later than the next deadline skips the periods it overran (as
//! cyclictest does) and counts them as missed, hence over a run
//! `samples + missed == periods`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::clock::Clock;
use super::handoff::Publisher;

/// How long a sampler runs and what it counts, in periods of the grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopPlan {
    pub interval_ns: u64,
    /// Periods at the start whose samples and misses are discarded.
    pub warmup_periods: u64,
    /// Periods to measure after the warm-up (`None`: until stopped).
    pub measure_periods: Option<u64>,
    /// Stop after this many samples (cyclictest's `--loops`).
    pub max_samples: Option<u64>,
    /// Hand the interval to the consumer at every multiple of this much
    /// `CLOCK_MONOTONIC` time: intervals then hold the samples of one
    /// stretch `[k·P, (k+1)·P)` each, and with a `P` that divides a second
    /// none straddles a second (which the daemon's per-second windows rely
    /// on), unless the consumer fell behind and a publish had to wait.
    pub publish_period_ns: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopEndReason {
    /// The planned periods or samples were done.
    Completed,
    /// The stop flag was raised.
    Stopped,
    /// `clock_nanosleep` failed with this error number.
    SleepFailed(i32),
    /// The thread woke up on another CPU than its own (the CPU went
    /// offline, or the affinity was changed from outside); that wake-up
    /// is not counted.
    Displaced,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopEnd {
    pub reason: LoopEndReason,
    /// Periods of the measurement (after warm-up) that were sampled or
    /// missed; equals samples + missed.
    pub periods: u64,
}

/// The period after `period` to sleep to next: the first whose deadline
/// is not before `now_ns` (a deadline equal to now is kept, as cyclictest
/// keeps it). Periods in between were overrun and are skipped.
#[inline]
pub fn next_period(period: u64, now_ns: u64, start_ns: u64, interval_ns: u64) -> u64 {
    let next_deadline = start_ns + (period + 1) * interval_ns;
    if now_ns <= next_deadline {
        period + 1
    } else {
        period + 2 + (now_ns - next_deadline - 1) / interval_ns
    }
}

/// The sampler's real-time loop. `start_ns` is the first deadline.
///
/// Invariant: no allocation, lock, log or system call other than the
/// clock's sleep happens here; `crates/rt/tests/no_alloc.rs` runs this function
/// under an allocator that fails the test if it allocates.
#[inline(never)]
pub fn hot_loop<C: Clock>(
    clock: &mut C,
    plan: &LoopPlan,
    start_ns: u64,
    publisher: &mut Publisher,
    stop: &AtomicBool,
    heartbeat_ns: &AtomicU64,
) -> LoopEnd {
    let interval = plan.interval_ns;
    let measure_from = plan.warmup_periods;
    let end = plan
        .measure_periods
        .map_or(u64::MAX, |n| measure_from.saturating_add(n));
    let max_samples = plan.max_samples.unwrap_or(u64::MAX);
    let mut period = 0;
    let mut samples = 0;
    let publish_period = plan.publish_period_ns.max(1);
    let mut next_publish_ns = (start_ns / publish_period + 1) * publish_period;
    let reason = loop {
        if period >= end || samples >= max_samples {
            break LoopEndReason::Completed;
        }
        // Relaxed: the flag carries no data; seeing it one period late is fine.
        if stop.load(Ordering::Relaxed) {
            break LoopEndReason::Stopped;
        }
        let deadline = start_ns + period * interval;
        if let Err(errno) = clock.sleep_until_ns(deadline) {
            break LoopEndReason::SleepFailed(errno);
        }
        // The time first: whatever runs between the wake-up and this read
        // would be added to the sample.
        let now = clock.now_ns();
        // Then the hotplug check: `sched_getcpu` is free on x86 with
        // glibc's rseq but a real system call elsewhere.
        if clock.displaced() {
            break LoopEndReason::Displaced;
        }
        // Relaxed: a liveness signal read by watchers, ordering nothing else.
        heartbeat_ns.store(now, Ordering::Relaxed);
        // A wake-up past the boundary belongs to the next interval: hand
        // the finished one over before recording it.
        if now >= next_publish_ns && publisher.publish() {
            next_publish_ns = (now / publish_period + 1) * publish_period;
        }
        let next = next_period(period, now, start_ns, interval);
        let stats = publisher.stats_mut();
        if period >= measure_from {
            // An absolute sleep cannot end before its deadline.
            stats.record_at(now.saturating_sub(deadline), samples, now);
            samples += 1;
        }
        let missed_from = (period + 1).max(measure_from);
        let missed_to = next.min(end);
        if missed_to > missed_from {
            stats.missed += missed_to - missed_from;
        }
        period = next;
    };
    LoopEnd {
        reason,
        periods: period.min(end).saturating_sub(measure_from),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handoff;
    use crate::stats::LatencyStats;

    /// A clock whose wake-ups come `latencies[i]` after the i-th deadline.
    struct ScriptedClock {
        latencies: Vec<u64>,
        woken: usize,
        now: u64,
    }

    impl Clock for ScriptedClock {
        fn now_ns(&mut self) -> u64 {
            self.now
        }
        fn sleep_until_ns(&mut self, deadline_ns: u64) -> Result<(), i32> {
            let latency = self.latencies.get(self.woken).copied().unwrap_or(0);
            self.woken += 1;
            self.now = self.now.max(deadline_ns) + latency;
            Ok(())
        }
    }

    fn run(latencies: &[u64], plan: LoopPlan) -> (LatencyStats, LoopEnd, usize) {
        let template = LatencyStats::new(u64::MAX, None);
        let (mut publisher, mut collector) = handoff::channel(&template, 4);
        let mut clock = ScriptedClock {
            latencies: latencies.to_vec(),
            woken: 0,
            now: 0,
        };
        let stop = AtomicBool::new(false);
        let heartbeat = AtomicU64::new(0);
        let end = hot_loop(&mut clock, &plan, 1_000, &mut publisher, &stop, &heartbeat);
        assert_eq!(heartbeat.load(Ordering::Relaxed), clock.now);
        let mut total = template.clone();
        collector.drain(|s| total.merge(s)).unwrap();
        total.merge(&publisher.into_remainder()).unwrap();
        (total, end, clock.woken)
    }

    fn plan(periods: u64) -> LoopPlan {
        LoopPlan {
            interval_ns: 100,
            warmup_periods: 0,
            measure_periods: Some(periods),
            max_samples: None,
            publish_period_ns: 300,
        }
    }

    /// The scripted clock, moved off its CPU at the `after`-th wake-up.
    struct MovedClock {
        inner: ScriptedClock,
        after: usize,
    }

    impl Clock for MovedClock {
        fn now_ns(&mut self) -> u64 {
            self.inner.now_ns()
        }
        fn sleep_until_ns(&mut self, deadline_ns: u64) -> Result<(), i32> {
            self.inner.sleep_until_ns(deadline_ns)
        }
        fn displaced(&mut self) -> bool {
            self.inner.woken > self.after
        }
    }

    #[test]
    fn a_displaced_sampler_stops_without_counting_that_wake_up() {
        let template = LatencyStats::new(u64::MAX, None);
        let (mut publisher, mut collector) = handoff::channel(&template, 4);
        let mut clock = MovedClock {
            inner: ScriptedClock {
                latencies: vec![5, 250, 5, 5, 5, 5],
                woken: 0,
                now: 0,
            },
            after: 3,
        };
        let stop = AtomicBool::new(false);
        let heartbeat = AtomicU64::new(0);
        let end = hot_loop(
            &mut clock,
            &plan(100),
            1_000,
            &mut publisher,
            &stop,
            &heartbeat,
        );
        let mut total = template.clone();
        collector.drain(|s| total.merge(s)).unwrap();
        total.merge(&publisher.into_remainder()).unwrap();
        assert_eq!(end.reason, LoopEndReason::Displaced);
        // Periods 0 and 1 sampled, 2 and 3 missed (period 1 woke 250 ns
        // late, past both deadlines), 4 sampled; the wake-up for period 5
        // was on another CPU and is neither.
        assert_eq!((total.count, total.missed), (3, 2));
        assert_eq!(end.periods, total.count + total.missed);
    }

    /// A clock whose hotplug check takes 40 µs, as a slow `sched_getcpu`
    /// system call might.
    struct SlowCheckClock(ScriptedClock);

    impl Clock for SlowCheckClock {
        fn now_ns(&mut self) -> u64 {
            self.0.now_ns()
        }
        fn sleep_until_ns(&mut self, deadline_ns: u64) -> Result<(), i32> {
            self.0.sleep_until_ns(deadline_ns)
        }
        fn displaced(&mut self) -> bool {
            self.0.now += 40_000;
            false
        }
    }

    #[test]
    fn the_hotplug_check_is_not_part_of_the_sample() {
        let template = LatencyStats::new(u64::MAX, None);
        let (mut publisher, _collector) = handoff::channel(&template, 2);
        let mut clock = SlowCheckClock(ScriptedClock {
            latencies: vec![7; 3],
            woken: 0,
            now: 0,
        });
        let mut p = plan(3);
        p.interval_ns = 1_000_000;
        p.publish_period_ns = u64::MAX / 2;
        let stop = AtomicBool::new(false);
        let heartbeat = AtomicU64::new(0);
        hot_loop(&mut clock, &p, 1_000, &mut publisher, &stop, &heartbeat);
        let stats = publisher.into_remainder();
        assert_eq!((stats.count, stats.max_ns), (3, 7));
        // Each sample is filed at its wake-up time.
        assert_eq!(stats.span_ns(), Some((1_007, 2_001_007)));
    }

    #[test]
    fn intervals_are_cut_at_multiples_of_the_publish_period() {
        let template = LatencyStats::new(u64::MAX, None);
        let (mut publisher, mut collector) = handoff::channel(&template, 8);
        // Every wake-up 30 ns late on a 100 ns grid from 1 000: samples at
        // 1 030, 1 130, … ; intervals cut at multiples of 250.
        let mut clock = ScriptedClock {
            latencies: vec![30; 12],
            woken: 0,
            now: 0,
        };
        let mut p = plan(12);
        p.publish_period_ns = 250;
        let stop = AtomicBool::new(false);
        let heartbeat = AtomicU64::new(0);
        hot_loop(&mut clock, &p, 1_000, &mut publisher, &stop, &heartbeat);
        let mut spans = Vec::new();
        collector
            .drain(|s| {
                spans.push(s.span_ns());
                Ok::<_, std::convert::Infallible>(())
            })
            .unwrap();
        spans.push(publisher.into_remainder().span_ns());
        assert_eq!(
            spans,
            vec![
                Some((1_030, 1_230)),
                Some((1_330, 1_430)),
                Some((1_530, 1_730)),
                Some((1_830, 1_930)),
                Some((2_030, 2_130)),
            ]
        );
    }

    #[test]
    fn next_period_skips_only_overrun_deadlines() {
        // Grid: start 1000, interval 100 → period k at 1000 + 100k.
        assert_eq!(next_period(0, 1_000, 1_000, 100), 1);
        assert_eq!(next_period(0, 1_099, 1_000, 100), 1);
        assert_eq!(
            next_period(0, 1_100, 1_000, 100),
            1,
            "equal to the next deadline"
        );
        assert_eq!(next_period(0, 1_101, 1_000, 100), 2);
        assert_eq!(next_period(0, 1_200, 1_000, 100), 2);
        assert_eq!(next_period(0, 1_201, 1_000, 100), 3);
        assert_eq!(next_period(5, 1_500 + 1_000, 1_000, 100), 15);
    }

    #[test]
    fn on_time_wakeups_are_all_sampled() {
        let (stats, end, woken) = run(&[7; 10], plan(10));
        assert_eq!(
            (stats.count, stats.missed, end.periods, woken),
            (10, 0, 10, 10)
        );
        assert_eq!(stats.sum_ns, 70);
        assert_eq!(end.reason, LoopEndReason::Completed);
    }

    #[test]
    fn late_wakeups_count_the_periods_they_overran() {
        // Period 2 wakes 350 ns late: deadlines 3, 4 and 5 (at +100, +200,
        // +300) have passed, so they are missed and period 6 is next.
        let latencies = [5, 5, 350, 5, 5, 5, 5];
        let (stats, end, woken) = run(&latencies, plan(10));
        assert_eq!(stats.missed, 3);
        assert_eq!(stats.count, 7);
        assert_eq!(stats.count + stats.missed, end.periods);
        assert_eq!(end.periods, 10);
        assert_eq!(woken, 7);
        assert_eq!(stats.max_ns, 350);
    }

    #[test]
    fn a_wakeup_exactly_on_the_next_deadline_misses_nothing() {
        let (stats, end, _) = run(&[100, 0, 0], plan(3));
        assert_eq!((stats.count, stats.missed, end.periods), (3, 0, 3));
    }

    #[test]
    fn misses_past_the_end_of_the_run_are_not_counted() {
        // The last period overruns by far: only the run's own periods count.
        let (stats, end, _) = run(&[0, 0, 0, 1_000_000], plan(5));
        assert_eq!(stats.count, 4);
        assert_eq!(stats.missed, 1);
        assert_eq!(end.periods, 5);
    }

    #[test]
    fn warmup_discards_samples_and_misses() {
        let mut p = plan(5);
        p.warmup_periods = 3;
        // Period 1 overruns periods 2 and 3: period 2 belongs to the warm-up,
        // period 3 to the measurement.
        let (stats, end, _) = run(&[0, 250, 1, 2, 3, 4, 5], p);
        assert_eq!(stats.missed, 1);
        assert_eq!(stats.count, 4);
        assert_eq!(stats.min_ns(), 1);
        assert_eq!(end.periods, 5);
    }

    #[test]
    fn max_samples_stops_after_that_many_samples() {
        let mut p = plan(1_000);
        p.max_samples = Some(4);
        let (stats, end, _) = run(&[0, 150, 0, 0, 0, 0], p);
        assert_eq!(stats.count, 4);
        assert_eq!(stats.missed, 1);
        assert_eq!(end.periods, 5);
    }

    #[test]
    fn the_stop_flag_ends_the_loop_before_the_next_sleep() {
        let template = LatencyStats::new(u64::MAX, None);
        let (mut publisher, _collector) = handoff::channel(&template, 2);
        let stop = AtomicBool::new(true);
        let heartbeat = AtomicU64::new(0);
        let mut clock = ScriptedClock {
            latencies: vec![],
            woken: 0,
            now: 0,
        };
        let end = hot_loop(&mut clock, &plan(10), 0, &mut publisher, &stop, &heartbeat);
        assert_eq!(end.reason, LoopEndReason::Stopped);
        assert_eq!((end.periods, clock.woken), (0, 0));
    }

    #[test]
    fn a_failing_sleep_ends_the_loop_with_its_error() {
        // Any error number will do (22 is EINVAL): the loop passes it on.
        const ERRNO: i32 = 22;
        struct Broken;
        impl Clock for Broken {
            fn now_ns(&mut self) -> u64 {
                0
            }
            fn sleep_until_ns(&mut self, _: u64) -> Result<(), i32> {
                Err(ERRNO)
            }
        }
        let template = LatencyStats::new(u64::MAX, None);
        let (mut publisher, _collector) = handoff::channel(&template, 2);
        let end = hot_loop(
            &mut Broken,
            &plan(10),
            0,
            &mut publisher,
            &AtomicBool::new(false),
            &AtomicU64::new(0),
        );
        assert_eq!(end.reason, LoopEndReason::SleepFailed(ERRNO));
    }
}
