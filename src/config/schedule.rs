//! A section's windows (`every`, `at`, `duration`), read and shown the
//! same way by every section that schedules windows (`[load]`,
//! `[hwnoise]`, `[busypoll]`).

use std::time::Duration;

use super::{ConfigError, SectionReader, as_duration_ns, as_string, quoted};
use crate::load::Schedule;
use crate::units::format_duration_ns;

/// `load.at`: `"HH:MM"`, `"HH:MM:SS"` (into a day) or a duration.
fn as_offset(value: &config::Value) -> Result<Duration, String> {
    let text = as_string(value)?;
    let parts: Vec<&str> = text.trim().split(':').collect();
    if parts.len() == 2 || parts.len() == 3 {
        let numbers: Vec<Option<u64>> = parts.iter().map(|p| p.parse::<u64>().ok()).collect();
        let limits = [24, 60, 60];
        if numbers
            .iter()
            .zip(limits)
            .all(|(n, max)| n.is_some_and(|n| n < max))
        {
            let secs = numbers
                .iter()
                .zip([3600, 60, 1])
                .map(|(n, unit)| n.unwrap_or(0) * unit)
                .sum();
            return Ok(Duration::from_secs(secs));
        }
        return Err(
            "must be a time of day \"HH:MM\" or \"HH:MM:SS\" (UTC), or an offset \
                    into the period such as \"90s\""
                .to_string(),
        );
    }
    as_duration_ns(value).map(Duration::from_nanos)
}

/// An offset as it is usually written: "HH:MM" for a whole minute of the
/// day, else a duration.
fn show_offset(d: Duration) -> String {
    let secs = d.as_secs();
    if d.subsec_nanos() == 0 && secs.is_multiple_of(60) && secs < 24 * 3600 {
        format!("{:02}:{:02}", secs / 3600, secs / 60 % 60)
    } else {
        show(d)
    }
}

/// A section's windows (`every`, `at`, `duration`; defaults in that
/// order), checked together.
pub(crate) fn read_schedule(
    r: &mut SectionReader<'_>,
    section: &str,
    [every, at, duration]: [Duration; 3],
) -> Result<Schedule, ConfigError> {
    let duration_of = |v: &config::Value| as_duration_ns(v).map(Duration::from_nanos);
    let show_quoted = |d: &Duration| quoted(&show(*d));
    let every = r.read("every", || every, duration_of, show_quoted)?;
    let at = r.read("at", || at, as_offset, |d| quoted(&show_offset(*d)))?;
    let duration = r.read("duration", || duration, duration_of, show_quoted)?;
    Schedule::of_section(section, every, at, duration).map_err(|reason| ConfigError {
        source: "the configuration".to_string(),
        key: section.to_string(),
        value: None,
        reason,
    })
}

pub(crate) fn show(d: Duration) -> String {
    format_duration_ns(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
