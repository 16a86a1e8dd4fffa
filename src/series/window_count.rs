//! `WindowCount`: how many wake-ups went over the budget in a trailing
//! window, one slot a second, filed by when the samples were taken.

use crate::units::NS_PER_SEC;

/// A count over a trailing window of `W` whole seconds, kept per second
/// of `CLOCK_MONOTONIC` in a ring of `W + 1` slots, with the same rule as
/// [`super::WindowMax`]: a second counts while any part of it lies within
/// `(now − W, now]`, so a count stays visible for at least `W`.
///
/// An interval's count is filed in the second of its maximum: the
/// samplers publish every 200 ms or so, so every sample it counts lies
/// within that much of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowCount {
    window_seconds: u64,
    /// (second, count in that second).
    slots: Vec<(u64, u64)>,
}

/// A slot that holds no second.
const EMPTY: (u64, u64) = (u64::MAX, 0);

impl WindowCount {
    pub fn new(window_ns: u64) -> WindowCount {
        let window_seconds = (window_ns / NS_PER_SEC).max(1);
        WindowCount {
            window_seconds,
            slots: vec![EMPTY; window_seconds as usize + 1],
        }
    }

    /// Adds `count` in the second of `at_ns`; a second the ring has moved
    /// past is out of the window already and is dropped.
    pub fn add(&mut self, at_ns: u64, count: u64) {
        if count == 0 {
            return;
        }
        let second = at_ns / NS_PER_SEC;
        let n = self.slots.len() as u64;
        let slot = &mut self.slots[(second % n) as usize];
        if slot.0 == second {
            slot.1 = slot.1.saturating_add(count);
        } else if slot.0 == u64::MAX || slot.0 < second {
            *slot = (second, count);
        }
    }

    /// The count within the window.
    pub fn sum(&self, now_ns: u64) -> u64 {
        let second = now_ns / NS_PER_SEC;
        self.slots
            .iter()
            .filter(|(s, _)| *s != u64::MAX && *s <= second && second - *s <= self.window_seconds)
            .map(|(_, count)| *count)
            .fold(0, u64::saturating_add)
    }

    /// The same counts in a window of another length (a live reload).
    pub fn resized(&self, window_ns: u64, now_ns: u64) -> WindowCount {
        let mut resized = WindowCount::new(window_ns);
        let second = now_ns / NS_PER_SEC;
        for &(s, count) in &self.slots {
            if s != u64::MAX && s <= second && second - s <= resized.window_seconds {
                resized.add(s * NS_PER_SEC, count);
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
    fn a_count_is_seen_for_the_window_and_then_forgotten() {
        let mut w = WindowCount::new(3 * S);
        assert_eq!(w.sum(0), 0);
        w.add(10 * S, 2);
        w.add(10 * S + 5, 1);
        w.add(11 * S, 4);
        w.add(11 * S, 0);
        assert_eq!(w.sum(11 * S), 7);
        assert_eq!(w.sum(13 * S + 1), 7, "second 10 still overlaps the window");
        assert_eq!(w.sum(14 * S), 4, "second 10 has left");
        assert_eq!(w.sum(15 * S), 0);
        // A slot reused for a later second starts afresh; an older second
        // arriving late is dropped.
        w.add(18 * S, 1);
        w.add(14 * S, 9);
        assert_eq!(w.sum(18 * S), 1);
    }

    #[test]
    fn resizing_keeps_what_the_shorter_window_still_covers() {
        let mut w = WindowCount::new(60 * S);
        for second in 100..160 {
            w.add(second * S, 1);
        }
        assert_eq!(w.sum(159 * S), 60);
        assert_eq!(w.resized(10 * S, 159 * S).sum(159 * S), 11);
        assert_eq!(w.resized(3600 * S, 159 * S).sum(159 * S), 60);
    }
}
