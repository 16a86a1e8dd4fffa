//! The daemon's load windows: every `every` (a day, as OSADL's farm loads
//! its boards at fixed hours, or shorter on a lab host), starting `at`
//! into the period counted from the Unix epoch (so `every = "1d"`,
//! `at = "02:00"` is 02:00 UTC daily), lasting `duration`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::units::format_duration_ns;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    pub every: Duration,
    pub at: Duration,
    pub duration: Duration,
}

/// One window: from `start` to `end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start: SystemTime,
    pub end: SystemTime,
}

impl Schedule {
    /// Checks the three values of `[load]` together.
    pub fn new(every: Duration, at: Duration, duration: Duration) -> Result<Schedule, String> {
        Schedule::of_section("load", every, at, duration)
    }

    /// Checks the three values together; each error names the setting
    /// (in `[section]`) and says what would be accepted.
    pub fn of_section(
        section: &str,
        every: Duration,
        at: Duration,
        duration: Duration,
    ) -> Result<Schedule, String> {
        if every < Duration::from_secs(2) {
            return Err(format!(
                "{section}.every = {}: choose at least 2s (a day is \"1d\")",
                show(every)
            ));
        }
        if duration.is_zero() {
            return Err(format!(
                "{section}.duration must be more than 0 (for example \"1h\")"
            ));
        }
        if duration >= every {
            return Err(format!(
                "{section}.duration = {} is not shorter than {section}.every = {}: a window \
                 must end before the next one starts; shorten the window or lengthen the period",
                show(duration),
                show(every)
            ));
        }
        if at >= every {
            return Err(format!(
                "{section}.at = {} is not within the period {section}.every = {}; choose an \
                 offset below it (\"02:00\" into a day)",
                show(at),
                show(every)
            ));
        }
        Ok(Schedule {
            every,
            at,
            duration,
        })
    }

    /// Whether a window of this schedule ever meets one of `other`'s.
    /// Windows start at `at + k·every` from the epoch, so two starts can
    /// differ by any multiple of g = gcd of the periods, shifted by the
    /// difference of the offsets: they meet when that shift, taken modulo
    /// g, is shorter than the earlier window.
    pub fn meets(&self, other: &Schedule) -> bool {
        let ns = |d: Duration| d.as_nanos();
        let g = gcd(ns(self.every), ns(other.every));
        let shift = (ns(other.at) + g - ns(self.at) % g) % g;
        shift < ns(self.duration) || g - shift < ns(other.duration)
    }

    /// The window that contains `now`, if one does.
    pub fn window_at(&self, now: SystemTime) -> Option<Window> {
        let last = self.last_start(now)?;
        let end = last + self.duration;
        (now < end).then_some(Window { start: last, end })
    }

    /// The first window that starts after `now`.
    pub fn next_window(&self, now: SystemTime) -> Window {
        let start = match self.last_start(now) {
            Some(last) => last + self.every,
            None => UNIX_EPOCH + self.at,
        };
        Window {
            start,
            end: start + self.duration,
        }
    }

    /// The latest window start at or before `now`.
    fn last_start(&self, now: SystemTime) -> Option<SystemTime> {
        let since = now.duration_since(UNIX_EPOCH).ok()?;
        let since_ns = since.as_nanos();
        let at_ns = self.at.as_nanos();
        if since_ns < at_ns {
            return None;
        }
        let every_ns = self.every.as_nanos();
        let periods = (since_ns - at_ns) / every_ns;
        let start_ns = at_ns + periods * every_ns;
        Some(UNIX_EPOCH + Duration::from_nanos(u64::try_from(start_ns).ok()?))
    }
}

fn show(d: Duration) -> String {
    format_duration_ns(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn gcd(a: u128, b: u128) -> u128 {
    if b == 0 { a } else { gcd(b, a % b) }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 86_400;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn a_daily_window_at_two_runs_from_two_to_three_utc() {
        let s = Schedule::new(
            Duration::from_secs(DAY),
            Duration::from_secs(2 * 3600),
            Duration::from_secs(3600),
        )
        .unwrap();
        let day = 20_000 * DAY;
        assert_eq!(s.window_at(at(day + 3600)), None);
        assert_eq!(
            s.window_at(at(day + 2 * 3600 + 10)),
            Some(Window {
                start: at(day + 2 * 3600),
                end: at(day + 3 * 3600)
            })
        );
        assert_eq!(
            s.window_at(at(day + 3 * 3600)),
            None,
            "the end is exclusive"
        );
        assert_eq!(s.next_window(at(day + 3600)).start, at(day + 2 * 3600));
        assert_eq!(
            s.next_window(at(day + 2 * 3600 + 1)).start,
            at(day + DAY + 2 * 3600)
        );
    }

    #[test]
    fn windows_longer_than_their_period_or_starting_past_it_are_refused() {
        let err = Schedule::new(
            Duration::from_secs(3600),
            Duration::ZERO,
            Duration::from_secs(7200),
        )
        .unwrap_err();
        assert!(err.contains("is not shorter than load.every"), "{err}");
        let err = Schedule::new(
            Duration::from_secs(60),
            Duration::from_secs(60),
            Duration::from_secs(10),
        )
        .unwrap_err();
        assert!(err.contains("load.at"), "{err}");
        assert!(Schedule::new(Duration::from_secs(60), Duration::ZERO, Duration::ZERO).is_err());
        assert!(
            Schedule::new(
                Duration::from_secs(1),
                Duration::ZERO,
                Duration::from_millis(5)
            )
            .is_err()
        );
    }

    #[test]
    fn schedules_meet_when_some_pair_of_their_windows_overlaps() {
        let at = |every: u64, at: u64, duration: u64| {
            Schedule::new(
                Duration::from_secs(every),
                Duration::from_secs(at),
                Duration::from_secs(duration),
            )
            .unwrap()
        };
        let hourly_at_half = at(3600, 1800, 60);
        // Daily at 03:00 for 10 min: hour 3, minutes 0-10; the half-hour
        // windows never reach it.
        assert!(!hourly_at_half.meets(&at(86_400, 3 * 3600, 600)));
        assert!(!at(86_400, 3 * 3600, 600).meets(&hourly_at_half));
        // Daily at 03:25 for 10 min: 03:30 falls inside.
        assert!(hourly_at_half.meets(&at(86_400, 3 * 3600 + 1500, 600)));
        // Starting as the other ends: they touch, they do not meet.
        assert!(!at(8, 0, 4).meets(&at(8, 4, 3)));
        assert!(at(8, 0, 4).meets(&at(8, 3, 3)));
        // Periods of 10 s and 4 s share 2 s: their starts differ by an odd
        // number of seconds, so a 2 s window meets a 1 s one, a 1 s does not.
        assert!(at(10, 0, 2).meets(&at(4, 1, 1)));
        assert!(!at(10, 0, 1).meets(&at(4, 1, 1)));
    }
}
