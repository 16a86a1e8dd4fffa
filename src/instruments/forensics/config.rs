//! `[forensics]`: capturing what delayed a late wake-up (off by default).

use std::path::PathBuf;

use crate::config::{
    ConfigError, Section, SectionReader, SectionSpec, as_bool, as_duration_ns, as_integer,
    as_ring_buffer_kb, as_string, count_up_to, quoted,
};
use crate::forensics::Settings;
use crate::tracefs::DEFAULT_TRACEFS;
use crate::units::{NS_PER_SEC, NS_PER_US, format_duration_ns};

const MAX_CAPTURES_LIMIT: i64 = 10_000;
const MIN_BYTES: i64 = 64 * 1024;
const MAX_PER_MINUTE_LIMIT: i64 = 600;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForensicsConfig {
    pub enabled: bool,
    pub threshold_ns: u64,
    pub dir: PathBuf,
    pub max_captures: usize,
    pub max_bytes: u64,
    pub buffer_size_kb: u64,
    pub tracefs: PathBuf,
    pub per_cpu_interval_ns: u64,
    pub max_per_minute: usize,
    /// Also capture each new maximum of a CPU's window under the threshold.
    pub capture_new_max: bool,
}

impl ForensicsConfig {
    fn read(r: &mut SectionReader<'_>) -> Result<ForensicsConfig, ConfigError> {
        r.only(&[
            "enabled",
            "threshold",
            "dir",
            "max_captures",
            "max_bytes",
            "buffer_size_kb",
            "tracefs",
            "per_cpu_interval",
            "max_per_minute",
            "capture_new_max",
        ])?;
        let enabled = r.read("enabled", || false, as_bool, |b| b.to_string())?;
        let threshold_ns = r.read(
            "threshold",
            || 500 * NS_PER_US,
            as_threshold,
            |ns| quoted(&format_duration_ns(*ns)),
        )?;
        let path = |what: &'static str| {
            move |v: &config::Value| {
                let path = as_string(v)?;
                if !path.starts_with('/') {
                    return Err(format!("must be an absolute path ({what})"));
                }
                Ok(PathBuf::from(path))
            }
        };
        let show_path = |p: &PathBuf| quoted(&p.display().to_string());
        let dir = r.read(
            "dir",
            || PathBuf::from("/var/lib/latencyd/spikes"),
            path("the directory captures are written to"),
            show_path,
        )?;
        let max_captures = r.read(
            "max_captures",
            || 100,
            count_up_to(MAX_CAPTURES_LIMIT),
            |n| n.to_string(),
        )?;
        let max_bytes = r.read(
            "max_bytes",
            || 64 * 1024 * 1024,
            as_max_bytes,
            |n| n.to_string(),
        )?;
        let buffer_size_kb = r.read(
            "buffer_size_kb",
            || 1024,
            as_ring_buffer_kb,
            |n| n.to_string(),
        )?;
        let tracefs = r.read(
            "tracefs",
            || PathBuf::from(DEFAULT_TRACEFS),
            path("where tracefs is mounted"),
            show_path,
        )?;
        let per_cpu_interval_ns = r.read(
            "per_cpu_interval",
            || 10 * NS_PER_SEC,
            as_per_cpu_interval,
            |ns| quoted(&format_duration_ns(*ns)),
        )?;
        let max_per_minute = r.read(
            "max_per_minute",
            || 12,
            count_up_to(MAX_PER_MINUTE_LIMIT),
            |n| n.to_string(),
        )?;
        let capture_new_max = r.read("capture_new_max", || false, as_bool, |b| b.to_string())?;
        Ok(ForensicsConfig {
            enabled,
            threshold_ns,
            dir,
            max_captures,
            max_bytes,
            buffer_size_kb,
            tracefs,
            per_cpu_interval_ns,
            max_per_minute,
            capture_new_max,
        })
    }
}

/// `threshold`: 1 µs to 10 s.
fn as_threshold(v: &config::Value) -> Result<u64, String> {
    let ns = as_duration_ns(v)?;
    if !(NS_PER_US..=10 * NS_PER_SEC).contains(&ns) {
        return Err("must be between 1us and 10s".to_string());
    }
    Ok(ns)
}

fn as_max_bytes(v: &config::Value) -> Result<u64, String> {
    let n = as_integer(v)?;
    if n < MIN_BYTES {
        return Err(format!(
            "must be at least {MIN_BYTES} bytes (a capture of a long spike can take tens of \
             kilobytes)"
        ));
    }
    Ok(n as u64)
}

/// `per_cpu_interval`: at most 1 h; 0 for no limit per CPU.
fn as_per_cpu_interval(v: &config::Value) -> Result<u64, String> {
    let ns = as_duration_ns(v)?;
    if ns > 3_600 * NS_PER_SEC {
        return Err("must be at most 1h (0s: no limit per CPU)".to_string());
    }
    Ok(ns)
}

impl ForensicsConfig {
    /// What the section asks of the daemon's recorder, captures kept in
    /// its `dir`.
    pub fn settings(&self) -> Settings {
        Settings {
            threshold_ns: self.threshold_ns,
            dir: Some(self.dir.clone()),
            max_captures: self.max_captures,
            max_bytes: self.max_bytes,
            buffer_size_kb: self.buffer_size_kb,
            tracefs: self.tracefs.clone(),
            per_cpu_gap_ns: self.per_cpu_interval_ns,
            max_per_minute: self.max_per_minute,
            capture_new_max: self.capture_new_max,
        }
    }
}

/// `[forensics]` as the registry lists it.
pub(super) static SECTION: SectionSpec = SectionSpec {
    name: "forensics",
    read: |r| Ok(Box::new(ForensicsConfig::read(r)?)),
};

impl Section for ForensicsConfig {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instruments::registry::load_for_tests as load;

    #[test]
    fn forensics_values_are_checked_and_named() {
        for (toml, key, says) in [
            (
                "threshold = \"0us\"",
                "forensics.threshold",
                "between 1us and 10s",
            ),
            ("threshold = 500", "forensics.threshold", "with a unit"),
            (
                "max_captures = 0",
                "forensics.max_captures",
                "between 1 and 10000",
            ),
            ("max_bytes = 1000", "forensics.max_bytes", "at least 65536"),
            (
                "buffer_size_kb = 8",
                "forensics.buffer_size_kb",
                "between 64 and",
            ),
            ("dir = \"spikes\"", "forensics.dir", "absolute path"),
            (
                "per_cpu_interval = \"2h\"",
                "forensics.per_cpu_interval",
                "at most 1h",
            ),
            (
                "max_per_minute = 0",
                "forensics.max_per_minute",
                "between 1 and 600",
            ),
            ("enabled = \"yes\"", "forensics.enabled", "true or false"),
            ("snapshot = true", "forensics.snapshot", "unknown key"),
        ] {
            let (config, _file) = load(Some(&format!("[forensics]\n{toml}\n")), &[], &[]);
            let err = config.unwrap_err();
            assert_eq!(err.key, key, "{toml}: {err}");
            assert!(err.reason.contains(says), "{toml}: {err}");
        }
        // The environment too, named.
        let (config, _) = load(None, &[("LATENCYD_FORENSICS__MAX_CAPTURES", "0")], &[]);
        let err = config.unwrap_err();
        assert_eq!(
            err.source,
            "environment variable LATENCYD_FORENSICS__MAX_CAPTURES"
        );
        let (config, _) = load(None, &[("LATENCYD_FORENSICS__ENABLED", "true")], &[]);
        assert!(config.unwrap().section::<ForensicsConfig>().enabled);
    }
}
