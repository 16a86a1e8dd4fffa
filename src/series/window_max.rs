//! `WindowMax`: the exact maximum over a trailing window, one slot a
//! second, filed by when the samples were taken.

use crate::units::NS_PER_SEC;

/// The exact maximum over a trailing window of `W` whole seconds, kept
/// as the maximum of each second (of `CLOCK_MONOTONIC`) in a ring.
///
/// A maximum is filed in the second *it was sampled in*, whenever it
/// arrives, and a second counts while any part of it lies within the
/// window `(now − W, now]`. So a wake-up is reported for at least `W` and
/// less than `W + 1 s` after it happened, however late the collector took
/// it in: the rule for `export.max_window` in ARCHITECTURE.md rests on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowMax {
    window_seconds: u64,
    /// (second, maximum sampled in that second, when it was sampled),
    /// `W + 1` of them: the seconds that overlap the window.
    slots: Vec<(u64, u64, u64)>,
}

/// A slot that holds no second.
const EMPTY: (u64, u64, u64) = (u64::MAX, 0, 0);

impl WindowMax {
    pub fn new(window_ns: u64) -> WindowMax {
        let window_seconds = (window_ns / NS_PER_SEC).max(1);
        WindowMax {
            window_seconds,
            slots: vec![EMPTY; window_seconds as usize + 1],
        }
    }

    pub fn window_ns(&self) -> u64 {
        self.window_seconds * NS_PER_SEC
    }

    /// Files `max_ns`, sampled at `sampled_at_ns`. A maximum older than
    /// the second its slot has moved on to is out of the window already
    /// and is dropped.
    pub fn record(&mut self, sampled_at_ns: u64, max_ns: u64) {
        let second = sampled_at_ns / NS_PER_SEC;
        let n = self.slots.len() as u64;
        let slot = &mut self.slots[(second % n) as usize];
        if slot.0 == second {
            if max_ns > slot.1 {
                (slot.1, slot.2) = (max_ns, sampled_at_ns);
            }
        } else if slot.0 == u64::MAX || slot.0 < second {
            *slot = (second, max_ns, sampled_at_ns);
        }
    }

    /// The maximum sampled within the window, or `None` if nothing was.
    pub fn max(&self, now_ns: u64) -> Option<u64> {
        self.max_within(now_ns, self.window_ns())
    }

    /// The maximum within the window and when it was sampled
    /// (`CLOCK_MONOTONIC`; the earliest of equal maxima).
    pub fn max_and_time(&self, now_ns: u64) -> Option<(u64, u64)> {
        let second = now_ns / NS_PER_SEC;
        self.slots
            .iter()
            .filter(|(s, ..)| *s != u64::MAX && *s <= second && second - *s <= self.window_seconds)
            .map(|&(_, max, at)| (max, at))
            .min_by_key(|&(max, at)| (std::cmp::Reverse(max), at))
    }

    /// The maximum sampled in the seconds that overlap the last
    /// `window_ns` (whole seconds, at most this ring's own window).
    pub fn max_within(&self, now_ns: u64, window_ns: u64) -> Option<u64> {
        let second = now_ns / NS_PER_SEC;
        let n = (window_ns / NS_PER_SEC).clamp(1, self.window_seconds);
        self.slots
            .iter()
            .filter(|(s, ..)| *s != u64::MAX && *s <= second && second - *s <= n)
            .map(|(_, max, _)| *max)
            .max()
    }

    /// The same maxima in a window of another length (a live reload).
    pub fn resized(&self, window_ns: u64, now_ns: u64) -> WindowMax {
        let mut resized = WindowMax::new(window_ns);
        let second = now_ns / NS_PER_SEC;
        for &(s, max, at) in &self.slots {
            if s != u64::MAX && s <= second && second - s <= resized.window_seconds {
                resized.record(at, max);
            }
        }
        resized
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = NS_PER_SEC;

    #[test]
    fn window_max_forgets_what_left_the_window() {
        let mut w = WindowMax::new(3 * S);
        assert_eq!(w.max(0), None);
        w.record(10 * S, 500);
        w.record(10 * S + 1, 700);
        w.record(11 * S, 300);
        assert_eq!(w.max(11 * S), Some(700));
        assert_eq!(w.max_and_time(11 * S), Some((700, 10 * S + 1)));
        assert_eq!(
            w.max(13 * S + 1),
            Some(700),
            "a 3 s window from 10.000000001 s reaches back into second 10"
        );
        assert_eq!(w.max(14 * S), Some(300), "second 10 has left");
        assert_eq!(w.max_and_time(14 * S), Some((300, 11 * S)));
        assert_eq!(w.max(15 * S), None);
        // A slot reused for a later second starts afresh.
        w.record(14 * S, 100);
        assert_eq!(w.max(14 * S), Some(300));
        w.record(18 * S, 50);
        assert_eq!(w.max(18 * S), Some(50));
    }

    #[test]
    fn a_maximum_stays_for_the_whole_window_after_its_sample() {
        // Whatever the phase of the sample within its second, and however
        // late it is collected, it is reported from collection until at
        // least W after it was sampled.
        for window_s in [1, 2, 15, 60] {
            for phase_ns in [0, 1, S / 2, S - 1] {
                let sampled_at = 1_000 * S + phase_ns;
                let mut w = WindowMax::new(window_s * S);
                // Collected 1.2 s after it was sampled.
                w.record(sampled_at, 9_000);
                let last_visible = sampled_at + window_s * S;
                let mut t = sampled_at + 1_200_000_000;
                while t <= last_visible {
                    assert_eq!(
                        w.max(t),
                        Some(9_000),
                        "W={window_s}s phase={phase_ns} t={t}"
                    );
                    t += S / 10;
                }
                assert_eq!(w.max(last_visible), Some(9_000));
                assert_ne!(w.max(sampled_at + (window_s + 1) * S), Some(9_000));
            }
        }
    }

    #[test]
    fn a_late_maximum_does_not_overwrite_a_newer_second() {
        let mut w = WindowMax::new(2 * S);
        w.record(13 * S, 40);
        // Second 10 shares the slot of second 13 and is long gone.
        w.record(10 * S, 9_000);
        assert_eq!(w.max(13 * S), Some(40));
    }

    #[test]
    fn window_resizing_keeps_what_still_fits() {
        let mut w = WindowMax::new(10 * S);
        w.record(100 * S, 900);
        w.record(108 * S, 200);
        let shorter = w.resized(3 * S, 109 * S);
        assert_eq!(shorter.window_ns(), 3 * S);
        assert_eq!(shorter.max(109 * S), Some(200));
        let longer = shorter.resized(60 * S, 109 * S);
        assert_eq!(longer.max(109 * S), Some(200));
    }
}
