//! SIGHUP: read the configuration again. Keys that can change while
//! running are applied; the others are logged as needing a restart. The
//! web configuration file is read again too (renewed certificates, changed
//! users), and applies to new connections. An invalid configuration is
//! refused and counted, with every mistake in it logged (as at start);
//! the running one stays.
//!
//! Reading the files (and the bcrypt work a web configuration brings) runs
//! on the blocking pool, without the state's lock; the lock is then taken
//! only to apply what changed, and the log is written after it is
//! released.

use std::sync::{Arc, Mutex};

use tracing::{error, info, warn};

use super::http::SharedSecurity;
use super::http::webconfig::Security;
use super::logging;
use super::notify;
use super::render::status_line;
use super::state::{MonitorState, lock};
use crate::config::{Config, ConfigError, Sources};
use crate::rt::sys;

/// What a reload needs besides the state.
pub(super) struct Reload {
    pub sources: Sources,
    pub log_level: logging::LevelHandle,
    pub security: SharedSecurity,
}

/// The log lines of a refused reload: one a mistake, so that one edit
/// can fix them all.
fn refusal(errors: &[ConfigError]) -> Vec<Line> {
    let count = errors.len();
    errors
        .iter()
        .enumerate()
        .map(|(n, err)| {
            let which = if count > 1 {
                format!(" (mistake {} of {count})", n + 1)
            } else {
                String::new()
            };
            Line::Error(format!(
                "configuration reload refused{which}, still running on the previous \
                 configuration: {err}"
            ))
        })
        .collect()
}

/// A log line to write once the lock is released.
enum Line {
    Info(String),
    Warn(String),
    Error(String),
}

impl Reload {
    pub(super) async fn run(&self, state: &Mutex<MonitorState>) {
        notify::reloading();
        let host = lock(state).host.clone();
        let sources = self.sources.clone();
        let loaded = tokio::task::spawn_blocking(move || -> Result<_, Vec<ConfigError>> {
            let new = Config::load_reporting_all(&sources)?;
            let web = super::check::check_whole(&new, &host).map_err(|e| vec![e])?;
            Ok((new, web))
        })
        .await;
        let lines = match loaded {
            Ok(loaded) => self.apply(state, loaded),
            Err(err) => {
                // The load itself failed inside latencyd: refused, counted.
                lock(state).reload.refused();
                vec![Line::Error(format!(
                    "configuration reload refused, still running on the previous \
                     configuration: reading it failed inside latencyd ({err})"
                ))]
            }
        };
        for line in lines {
            match line {
                Line::Info(text) => info!("{text}"),
                Line::Warn(text) => warn!("{text}"),
                Line::Error(text) => error!("{text}"),
            }
        }
        let line = status_line(&lock(state));
        notify::ready(&line);
    }

    /// Applies a loaded configuration under the lock; returns what to log.
    fn apply(
        &self,
        state: &Mutex<MonitorState>,
        loaded: Result<(Config, Security), Vec<ConfigError>>,
    ) -> Vec<Line> {
        let mut lines = Vec::new();
        let mut s = lock(state);
        let (new, web) = match loaded {
            Err(errors) => {
                s.reload.refused();
                return refusal(&errors);
            }
            Ok(loaded) => loaded,
        };
        // Switching between TLS and plain HTTP changes what clients must
        // do, so it waits for a restart; anything else applies to the next
        // connection.
        let was_tls = self
            .security
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .tls
            .is_some();
        let web_applies = web.tls.is_some() == was_tls;
        if web_applies {
            lines.push(Line::Info(format!(
                "reload: web configuration: {}",
                web.describe()
            )));
            *self.security.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(web);
        } else {
            lines.push(Line::Warn(format!(
                "reload: the new web configuration {} TLS; restart latencyd to switch between \
                 TLS and plain HTTP (the previous one stays in force)",
                if was_tls { "drops" } else { "adds" }
            )));
        }
        let now = sys::monotonic_now_ns();
        for key in s.config.changed_keys(&new) {
            let applied = match key.as_str() {
                "log.level" => {
                    let applied = self
                        .log_level
                        .modify(|f| *f = logging::level_filter(new.log.level))
                        .is_ok();
                    if applied {
                        s.config.log.level = new.log.level;
                    }
                    applied
                }
                "export.max_window" => {
                    s.config.export.max_window_ns = new.export.max_window_ns;
                    for view in &mut s.cpus {
                        view.window = view.window.resized(new.export.max_window_ns, now);
                        view.recent = view.recent.resized(new.export.max_window_ns, now);
                    }
                    s.timerlat.resize_windows(new.export.max_window_ns, now);
                    true
                }
                "measure.stall_threshold" => {
                    s.config.measure.stall_threshold_ns = new.measure.stall_threshold_ns;
                    s.config.measure.stall_threshold_auto = new.measure.stall_threshold_auto;
                    true
                }
                "export.per_cpu_histograms" => {
                    s.config.export.per_cpu_histograms = new.export.per_cpu_histograms;
                    true
                }
                // Applied above unless TLS would be switched.
                "export.web_config_file" => {
                    if web_applies {
                        s.config.export.web_config_file = new.export.web_config_file.clone();
                    }
                    web_applies
                }
                _ => false,
            };
            if applied {
                if let Some(e) = new.effective.get(&key) {
                    s.config.effective.insert(key.clone(), e.clone());
                }
                lines.push(Line::Info(format!(
                    "reload: applied {key} = {}",
                    new.effective[&key].toml_value
                )));
            } else {
                lines.push(Line::Warn(format!(
                    "reload: {key} changed to {}; restart latencyd to apply it",
                    new.effective[&key].toml_value
                )));
            }
        }
        // The file was valid: the reload succeeded, even if some of its
        // changes wait for a restart (those are logged above).
        s.reload.applied(now);
        lines
    }
}
