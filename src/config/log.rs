//! `[log]`: how much to log and in which format.

use super::{ConfigError, SectionReader, as_string, quoted};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

impl LogLevel {
    pub fn name(self) -> &'static str {
        match self {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Trace => "trace",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines (without timestamps under systemd's journal,
    /// which adds its own).
    Text,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogConfig {
    pub level: LogLevel,
    pub format: LogFormat,
}

impl LogConfig {
    pub(super) fn read(r: &mut SectionReader<'_>) -> Result<LogConfig, ConfigError> {
        r.only(&["level", "format"])?;
        let level = r.read(
            "level",
            || LogLevel::Info,
            |v| match as_string(v)?.as_str() {
                "error" => Ok(LogLevel::Error),
                "warn" => Ok(LogLevel::Warn),
                "info" => Ok(LogLevel::Info),
                "debug" => Ok(LogLevel::Debug),
                "trace" => Ok(LogLevel::Trace),
                _ => Err(
                    "expected \"error\", \"warn\", \"info\", \"debug\" or \"trace\"".to_string(),
                ),
            },
            |l| quoted(l.name()),
        )?;
        let format = r.read(
            "format",
            || LogFormat::Text,
            |v| match as_string(v)?.as_str() {
                "text" => Ok(LogFormat::Text),
                "json" => Ok(LogFormat::Json),
                _ => Err("expected \"text\" or \"json\"".to_string()),
            },
            |f| {
                quoted(if *f == LogFormat::Text {
                    "text"
                } else {
                    "json"
                })
            },
        )?;
        Ok(LogConfig { level, format })
    }
}
