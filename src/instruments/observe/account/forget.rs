//! What one CPU's account forgets once an interval: the entries of its
//! per-timer and per-task tables that nothing can use any more, so that
//! each table holds what is live, not everything seen since its last
//! reset, and gives its memory back when it shrinks.
//!
//! The caps (`MAX_TIMERS`) stay as the last bound for a storm; before
//! this, entries went only when their event came or the table was full,
//! and every observed CPU's tables filled towards those caps over hours
//! (timers cancelled before they fired, tasks that went elsewhere): the
//! chaos soak's heap profile (heaptrack, 2 CPUs) grew 270 KiB in 14
//! minutes in these tables and in the thread names.

use std::collections::HashMap;
use std::hash::Hash;

use super::{CpuAccount, TIMER_WAKEUP_GAP_NS};

/// A timer armed this long ago without an expiry seen here was most
/// likely cancelled, or fired on another CPU. (Its own expiry time cannot
/// tell: each timer counts in its clock, monotonic, real or boot time, and
/// the events do not say which.) A real-time task that does sleep longer
/// than this on a timer has that wake-up measured from the wake-up, not
/// from the timer's expiry: short by the expiry's interrupt, once.
const TIMER_KEPT_NS: u64 = 10_000_000_000;

/// A real-time task preempted here this long ago that has not come back
/// went elsewhere or ended; if it does come back, it counts as a wake-up
/// not seen (`unseen_wakeups`).
const PREEMPTED_KEPT_NS: u64 = 60_000_000_000;

impl CpuAccount {
    pub(super) fn forget_stale(&mut self) {
        let now = self.last_ts;
        // A fired timer explains only a wake-up within the gap after it.
        self.fired
            .retain(|_, &mut (at, _)| now.saturating_sub(at) <= TIMER_WAKEUP_GAP_NS);
        self.timers
            .retain(|_, &mut (_, _, armed)| now.saturating_sub(armed) <= TIMER_KEPT_NS);
        self.preempted
            .retain(|_, &mut at| now.saturating_sub(at) <= PREEMPTED_KEPT_NS);
        give_back(&mut self.fired);
        give_back(&mut self.timers);
        give_back(&mut self.preempted);
    }
}

/// A table far larger than what it holds (after a burst) gives the rest
/// back.
fn give_back<K: Hash + Eq, V>(table: &mut HashMap<K, V>) {
    if table.capacity() > 4 * table.len() + 64 {
        table.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instruments::observe::events::Event;
    use crate::instruments::observe::tally::TaskKinds;

    struct NoKernelThreads;
    impl TaskKinds for NoKernelThreads {
        fn is_kernel_thread(&mut self, _pid: i32, _comm: &[u8]) -> bool {
            false
        }
    }

    #[test]
    fn cancelled_timers_and_old_firings_are_forgotten_and_live_ones_kept() {
        let mut account = CpuAccount::new(0, &[]);
        let kinds = &mut NoKernelThreads;
        let s = 1_000_000_000u64;
        // 3,000 timers armed at t = 0.5 s for t = 1 s, never seen to fire
        // (cancelled); one armed at t = 14 s for t = 100 s, in another
        // clock (its numbers are not comparable to the others').
        for timer in 0..3_000u64 {
            let start = Event::TimerStart {
                timer,
                softexpires: s as i64,
                pid: 7,
            };
            account.feed(s / 2, 7, &start, kinds);
        }
        let long = Event::TimerStart {
            timer: 9_999,
            softexpires: 1_700_000_000 * s as i64 / 1_000,
            pid: 8,
        };
        account.feed(14 * s, 8, &long, kinds);
        // Another timer fires at t = 15 s.
        let other = Event::TimerStart {
            timer: 5_000,
            softexpires: 15 * s as i64,
            pid: 9,
        };
        account.feed(14 * s, 9, &other, kinds);
        let fire = Event::TimerExpire {
            timer: 5_000,
            now: 15 * s as i64,
        };
        account.feed(15 * s, 0, &fire, kinds);
        assert_eq!((account.timers.len(), account.fired.len()), (3_001, 1));
        account.take();
        // The ones armed over 10 s ago went, the recent one stayed; the
        // firing, as old as the latest event, can still explain a wake-up.
        assert_eq!(account.timers.len(), 1);
        assert!(account.timers.contains_key(&9_999));
        assert!(
            account.timers.capacity() < 1_000,
            "{}",
            account.timers.capacity()
        );
        assert_eq!(account.fired.len(), 1);
        // A later event (a normal task woken elsewhere): the firing can
        // explain nothing any more.
        let later = Event::Wakeup {
            comm: b"sh",
            pid: 50,
            prio: 120,
            target_cpu: 1,
        };
        account.feed(16 * s, 0, &later, kinds);
        account.take();
        assert_eq!(account.fired.len(), 0);
    }
}
