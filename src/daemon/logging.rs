//! Logging through `tracing` to standard error: text lines, or JSON with
//! `log.format = "json"`. Under systemd's journal (`JOURNAL_STREAM` set)
//! text lines carry no timestamp, since the journal adds its own. The
//! level can be changed at run time (SIGHUP reload).

use std::io::IsTerminal;

use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, Registry, fmt, reload};

use crate::config::{LogConfig, LogFormat, LogLevel};

pub type LevelHandle = reload::Handle<LevelFilter, Registry>;

pub fn level_filter(level: LogLevel) -> LevelFilter {
    match level {
        LogLevel::Error => LevelFilter::ERROR,
        LogLevel::Warn => LevelFilter::WARN,
        LogLevel::Info => LevelFilter::INFO,
        LogLevel::Debug => LevelFilter::DEBUG,
        LogLevel::Trace => LevelFilter::TRACE,
    }
}

/// Installs the global subscriber; returns the handle that changes its
/// level. Fails only if a subscriber was already installed.
pub fn init(config: &LogConfig) -> Result<LevelHandle, String> {
    let (filter, handle) = reload::Layer::new(level_filter(config.level));
    let under_journal = std::env::var_os("JOURNAL_STREAM").is_some();
    let ansi = std::io::stderr().is_terminal();
    let output = match config.format {
        LogFormat::Json => fmt::layer()
            .json()
            .with_current_span(false)
            .with_writer(std::io::stderr)
            .boxed(),
        LogFormat::Text if under_journal => fmt::layer()
            .without_time()
            .with_target(false)
            .with_ansi(false)
            .with_writer(std::io::stderr)
            .boxed(),
        LogFormat::Text => fmt::layer()
            .with_target(false)
            .with_ansi(ansi)
            .with_writer(std::io::stderr)
            .boxed(),
    };
    tracing_subscriber::registry()
        .with(filter)
        .with(output)
        .try_init()
        .map_err(|e| e.to_string())?;
    Ok(handle)
}
