//! `[load]`: scheduled background load windows, for lab and canary hosts
//! (off by default: a production host never loads itself unless told to).

use std::collections::BTreeMap;
use std::time::Duration;

use super::{
    ConfigError, Effective, SectionReader, as_cpu_selection, as_duration_ns, as_string, key_error,
    quoted,
};
use crate::host::HostInfo;
use crate::load::{Profile, Schedule, check_installed};
use crate::sampling::CpuSelection;
use crate::units::format_duration_ns;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadConfig {
    /// None: no windows (`profile = "none"`, the default).
    pub profile: Option<Profile>,
    pub cpus: CpuSelection,
    pub schedule: Schedule,
}

/// `load.at`: `"HH:MM"`, `"HH:MM:SS"` (into a day) or a duration.
pub(super) fn as_offset(value: &config::Value) -> Result<Duration, String> {
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
pub(super) fn show_offset(d: Duration) -> String {
    let secs = d.as_secs();
    if d.subsec_nanos() == 0 && secs.is_multiple_of(60) && secs < 24 * 3600 {
        format!("{:02}:{:02}", secs / 3600, secs / 60 % 60)
    } else {
        show(d)
    }
}

impl LoadConfig {
    pub(super) fn read(r: &mut SectionReader<'_>) -> Result<LoadConfig, ConfigError> {
        r.only(&["profile", "cpus", "every", "at", "duration"])?;
        let profile = r.read(
            "profile",
            || None,
            |v| {
                let text = as_string(v)?;
                if text.trim() == "none" {
                    return Ok(None);
                }
                Profile::parse(&text)
                    .map(Some)
                    .map_err(|e| format!("{e}, or \"none\" for no load windows"))
            },
            |p| quoted(p.map_or("none", Profile::name)),
        )?;
        let cpus = r.read(
            "cpus",
            || CpuSelection::All,
            as_cpu_selection,
            |c| quoted(&c.to_string()),
        )?;
        let schedule = read_schedule(r, "load", [86_400, 2 * 3600, 3600].map(Duration::from_secs))?;
        Ok(LoadConfig {
            profile,
            cpus,
            schedule,
        })
    }

    /// The CPUs exist and may be used, and the generators are installed.
    pub(super) fn check_against(
        &self,
        host: &HostInfo,
        effective: &BTreeMap<String, Effective>,
    ) -> Result<(), ConfigError> {
        let Some(profile) = self.profile else {
            return Ok(());
        };
        self.cpus
            .resolve(host)
            .map_err(|e| key_error(effective, "load.cpus", e))?;
        check_installed(profile).map_err(|e| key_error(effective, "load.profile", e))
    }
}

/// A section's windows (`every`, `at`, `duration`; defaults in that
/// order), checked together; shared by `[load]` and `[hwnoise]`.
pub(super) fn read_schedule(
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

pub(super) fn show(d: Duration) -> String {
    format_duration_ns(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
