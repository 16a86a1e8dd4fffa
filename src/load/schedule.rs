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
}
