//! `[record]`: the on-disk interval log (HdrHistogram `.hlog`).
//!
//! On by default where systemd gives the service a state directory
//! (`StateDirectory=` sets `$STATE_DIRECTORY`), off elsewhere, so a
//! `latencyd run` from a shell writes nothing unless asked.

use std::path::PathBuf;

use super::{ConfigError, SectionReader, as_bool, as_duration_ns, as_integer, as_string, quoted};
use crate::units::{NS_PER_SEC, format_duration_ns};

const MIN_INTERVAL_NS: u64 = NS_PER_SEC;
const MAX_INTERVAL_NS: u64 = 3_600 * NS_PER_SEC;
const MIN_BYTES: i64 = 16 * 1024;

/// `record.enabled`: `"auto"` (the default) writes the record when systemd
/// gave the service a state directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    Auto,
    On,
    Off,
}

impl Switch {
    fn toml(self) -> String {
        match self {
            Switch::Auto => quoted("auto"),
            Switch::On => "true".to_string(),
            Switch::Off => "false".to_string(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordConfig {
    pub enabled: Switch,
    pub dir: PathBuf,
    pub interval_ns: u64,
    pub retention_ns: u64,
    pub max_bytes: u64,
}

/// The state directory systemd gave the service (the first, if several).
fn state_directory() -> Option<PathBuf> {
    let dirs = std::env::var_os("STATE_DIRECTORY")?;
    let first = dirs.to_str()?.split(':').next()?.to_string();
    (!first.is_empty()).then(|| PathBuf::from(first))
}

impl RecordConfig {
    /// Whether the record is written: `"auto"` means when the service has
    /// a state directory (`$STATE_DIRECTORY`, set by `StateDirectory=`).
    pub fn on(&self) -> bool {
        match self.enabled {
            Switch::Auto => state_directory().is_some(),
            Switch::On => true,
            Switch::Off => false,
        }
    }

    pub(super) fn read(r: &mut SectionReader<'_>) -> Result<RecordConfig, ConfigError> {
        r.only(&["enabled", "dir", "interval", "retention", "max_bytes"])?;
        let enabled = r.read(
            "enabled",
            || Switch::Auto,
            |v| match as_string(v).as_deref() {
                Ok("auto") => Ok(Switch::Auto),
                _ => match as_bool(v) {
                    Ok(true) => Ok(Switch::On),
                    Ok(false) => Ok(Switch::Off),
                    Err(_) => Err(
                        "must be true, false or \"auto\" (written when systemd gives \
                                   the service a state directory)"
                            .to_string(),
                    ),
                },
            },
            |s| s.toml(),
        )?;
        let dir = r.read(
            "dir",
            || PathBuf::from("/var/lib/latencyd/record"),
            |v| {
                let path = as_string(v)?;
                if !path.starts_with('/') {
                    return Err(
                        "must be an absolute path (the directory the record is written to)"
                            .to_string(),
                    );
                }
                Ok(PathBuf::from(path))
            },
            |p| quoted(&p.display().to_string()),
        )?;
        let interval_ns = r.read(
            "interval",
            || 300 * NS_PER_SEC,
            |v| {
                let ns = as_duration_ns(v)?;
                if !(MIN_INTERVAL_NS..=MAX_INTERVAL_NS).contains(&ns) || ns % NS_PER_SEC != 0 {
                    return Err("must be whole seconds between 1s and 1h".to_string());
                }
                Ok(ns)
            },
            |ns| quoted(&format_duration_ns(*ns)),
        )?;
        let retention_ns = r.read(
            "retention",
            || 30 * 86_400 * NS_PER_SEC,
            |v| {
                let ns = as_duration_ns(v)?;
                if ns < 3_600 * NS_PER_SEC {
                    return Err("must be at least 1h".to_string());
                }
                Ok(ns)
            },
            |ns| quoted(&format_duration_ns(*ns)),
        )?;
        let max_bytes = r.read(
            "max_bytes",
            || 1024 * 1024 * 1024,
            |v| {
                let n = as_integer(v)?;
                if n < MIN_BYTES {
                    return Err(format!(
                        "must be at least {MIN_BYTES} bytes (an interval of many CPUs takes \
                         kilobytes)"
                    ));
                }
                Ok(n as u64)
            },
            |n| n.to_string(),
        )?;
        // retention >= 1h >= interval: a file always outlives its intervals.
        Ok(RecordConfig {
            enabled,
            dir,
            interval_ns,
            retention_ns,
            max_bytes,
        })
    }
}
