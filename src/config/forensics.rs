//! `[forensics]`: capturing what delayed a late wake-up (off by default).

use std::path::PathBuf;

use super::{
    ConfigError, SectionReader, as_bool, as_duration_ns, as_integer, as_ring_buffer_kb, as_string,
    count_up_to, quoted,
};
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
    pub(super) fn read(r: &mut SectionReader<'_>) -> Result<ForensicsConfig, ConfigError> {
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
