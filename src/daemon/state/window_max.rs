//! `WindowMax`: the exact maximum over a trailing window, one slot a
//! second.

use crate::units::NS_PER_SEC;

/// The exact maximum over a trailing window, kept as the maximum of each
/// whole second (of `CLOCK_MONOTONIC`) in a ring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowMax {
    /// (second, maximum in that second); a slot is current when its second
    /// is within the window.
    slots: Vec<(u64, u64)>,
}

impl WindowMax {
    pub fn new(window_ns: u64) -> WindowMax {
        let n = (window_ns / NS_PER_SEC).max(1) as usize;
        WindowMax {
            slots: vec![(u64::MAX, 0); n],
        }
    }

    pub fn window_ns(&self) -> u64 {
        self.slots.len() as u64 * NS_PER_SEC
    }

    pub fn record(&mut self, now_ns: u64, max_ns: u64) {
        let second = now_ns / NS_PER_SEC;
        let n = self.slots.len() as u64;
        let slot = &mut self.slots[(second % n) as usize];
        if slot.0 == second {
            slot.1 = slot.1.max(max_ns);
        } else {
            *slot = (second, max_ns);
        }
    }

    /// The maximum recorded in the last `window` seconds (the current one
    /// included), or `None` if nothing was.
    pub fn max(&self, now_ns: u64) -> Option<u64> {
        self.max_within(now_ns, self.window_ns())
    }

    /// The maximum recorded in the last `window_ns` (whole seconds, the
    /// current one included; at most this ring's own window).
    pub fn max_within(&self, now_ns: u64, window_ns: u64) -> Option<u64> {
        let second = now_ns / NS_PER_SEC;
        let n = (window_ns / NS_PER_SEC).clamp(1, self.slots.len() as u64);
        self.slots
            .iter()
            .filter(|(s, _)| *s != u64::MAX && *s <= second && second - *s < n)
            .map(|(_, max)| *max)
            .max()
    }

    /// The same maxima in a window of another length (a live reload).
    pub fn resized(&self, window_ns: u64, now_ns: u64) -> WindowMax {
        let mut resized = WindowMax::new(window_ns);
        let second = now_ns / NS_PER_SEC;
        for &(s, max) in &self.slots {
            if s != u64::MAX && s <= second && second - s < resized.slots.len() as u64 {
                resized.record(s * NS_PER_SEC, max);
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
        assert_eq!(
            w.max(12 * S + 999),
            Some(700),
            "second 10 is still in a 3 s window"
        );
        assert_eq!(w.max(13 * S), Some(300), "second 10 has left");
        assert_eq!(w.max(14 * S), None);
        // A slot reused for a later second starts afresh.
        w.record(13 * S, 100);
        assert_eq!(w.max(13 * S), Some(300));
        w.record(16 * S, 50);
        assert_eq!(w.max(16 * S), Some(50));
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
