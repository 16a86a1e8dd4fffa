//! SIGHUP: read the configuration again. Keys that can change while
//! running are applied; the others are logged as needing a restart. The
//! web configuration file is read again too (renewed certificates, changed
//! users), and applies to new connections. An invalid configuration is
//! refused and counted, with every mistake in it logged (as at start);
//! the running one stays.
//!
//! Reading the files (and the bcrypt work a web configuration brings) runs
//! on the blocking pool, beside the event loop and without the state's
//! lock: the collector, the probes, the watchdog and SIGTERM go on while
//! it runs, and one that does not end within `RELOAD_DEADLINE` is refused,
//! counted and logged with what it was doing. The lock is then taken only
//! to apply what changed, and the log is written after it is released.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
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

/// How long a reload may take to read and check the new configuration
/// (its files, the web configuration's certificates and bcrypt hashes)
/// before it is refused. A valid configuration takes milliseconds; the
/// slowest honest part is hashing a dummy password at the web
/// configuration's highest cost (at most 14: under a second here).
pub(super) const RELOAD_DEADLINE: Duration = Duration::from_secs(10);

/// What a configuration load off the event loop returns.
type Loaded = Result<(Config, Security), Vec<ConfigError>>;

/// A reload under way on the blocking pool: the event loop goes on
/// (collector, probes, watchdog, SIGTERM) and looks at it when it ends or
/// when its deadline passes.
pub(super) struct Pending {
    task: JoinHandle<Loaded>,
    deadline: Instant,
    /// What the load is doing now, for the refusal of one that overran.
    doing: Arc<Mutex<&'static str>>,
    /// Another SIGHUP came meanwhile: reload again once this one ends.
    pub again: bool,
}

/// How a pending reload ended.
pub(super) enum Ended {
    Loaded(Box<Result<Loaded, tokio::task::JoinError>>),
    /// Past the deadline, while doing this.
    Overran(&'static str),
}

impl Pending {
    /// Waits for the load or its deadline, whichever comes first.
    pub(super) async fn end(&mut self) -> Ended {
        tokio::select! {
            loaded = &mut self.task => Ended::Loaded(Box::new(loaded)),
            _ = tokio::time::sleep_until(self.deadline.into()) => {
                Ended::Overran(*self.doing.lock().unwrap_or_else(|e| e.into_inner()))
            }
        }
    }
}

impl Reload {
    /// Starts reading and checking the configuration on the blocking pool;
    /// `finish` applies or refuses what it found.
    pub(super) fn start(&self, state: &Mutex<MonitorState>) -> Pending {
        notify::reloading();
        let host = lock(state).host.clone();
        let sources = self.sources.clone();
        let doing = Arc::new(Mutex::new("reading the configuration file"));
        let step = Arc::clone(&doing);
        let task = tokio::task::spawn_blocking(move || -> Loaded {
            let new = crate::instruments::registry::load_config(&sources)?;
            *step.lock().unwrap_or_else(|e| e.into_inner()) = "checking it against the host and reading the web configuration \
                 (its certificates, keys and bcrypt hashes)";
            let web = super::check::check_whole(&new, &host).map_err(|e| vec![e])?;
            Ok((new, web))
        });
        Pending {
            task,
            deadline: Instant::now() + RELOAD_DEADLINE,
            doing,
            again: false,
        }
    }

    /// Applies what a reload found, or refuses it, and says so.
    pub(super) fn finish(&self, state: &Mutex<MonitorState>, ended: Ended) {
        let lines = match ended {
            Ended::Loaded(loaded) => match *loaded {
                Ok(loaded) => self.apply(state, loaded),
                Err(err) => {
                    // The load itself failed inside latencyd: refused, counted.
                    lock(state).reload.refused();
                    vec![Line::Error(format!(
                        "configuration reload refused, still running on the previous \
                     configuration: reading it failed inside latencyd ({err})"
                    ))]
                }
            },
            Ended::Overran(doing) => {
                // The blocking thread is left to end on its own: nothing it
                // returns is looked at.
                lock(state).reload.refused();
                vec![Line::Error(format!(
                    "configuration reload refused, still running on the previous \
                     configuration: it did not finish within {} s; it was {doing}",
                    RELOAD_DEADLINE.as_secs()
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
    fn apply(&self, state: &Mutex<MonitorState>, loaded: Loaded) -> Vec<Line> {
        let mut s = lock(state);
        let (new, web) = match loaded {
            Err(errors) => {
                s.reload.refused();
                return refusal(&errors);
            }
            Ok(loaded) => loaded,
        };
        let (web_applies, web_line) = self.swap_web(web);
        let mut lines = vec![web_line];
        let now = sys::monotonic_now_ns();
        for key in s.config.changed_keys(&new) {
            let applied = self.apply_key(&mut s, &key, &new, web_applies, now);
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

    /// Puts the new web configuration in force for the next connection,
    /// unless it would switch between TLS and plain HTTP, which changes
    /// what clients must do and so waits for a restart. Whether it did,
    /// and what to log.
    fn swap_web(&self, web: Security) -> (bool, Line) {
        let was_tls = self
            .security
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .tls
            .is_some();
        if web.tls.is_some() != was_tls {
            let line = Line::Warn(format!(
                "reload: the new web configuration {} TLS; restart latencyd to switch between \
                 TLS and plain HTTP (the previous one stays in force)",
                if was_tls { "drops" } else { "adds" }
            ));
            return (false, line);
        }
        let line = Line::Info(format!("reload: web configuration: {}", web.describe()));
        *self.security.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(web);
        (true, line)
    }

    /// One changed key of the daemon's own sections applied to the state,
    /// or handed to the registered instrument it belongs to: true when
    /// applied, false when it waits for a restart.
    fn apply_key(
        &self,
        s: &mut MonitorState,
        key: &str,
        new: &Config,
        web_applies: bool,
        now: u64,
    ) -> bool {
        match key {
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
                    view.over_budget = view.over_budget.resized(new.export.max_window_ns, now);
                    view.recent = view.recent.resized(new.export.max_window_ns, now);
                }
                for (_, part) in s.parts.iter_mut() {
                    part.resize_window(new.export.max_window_ns, now);
                }
                true
            }
            "measure.stall_threshold" => {
                s.config.measure.stall_threshold_ns = new.measure.stall_threshold_ns;
                s.config.measure.stall_threshold_auto = new.measure.stall_threshold_auto;
                true
            }
            // Read by the scheduling watch at every tick.
            "realtime.restore" => {
                s.config.realtime.restore = new.realtime.restore;
                true
            }
            "export.per_cpu_histograms" => {
                s.config.export.per_cpu_histograms = new.export.per_cpu_histograms;
                true
            }
            // Put in force by `swap_web` unless TLS would be switched.
            "export.web_config_file" => {
                if web_applies {
                    s.config.export.web_config_file = new.export.web_config_file.clone();
                }
                web_applies
            }
            // A registered instrument's key: its part applies it or says
            // it waits for a restart.
            _ => s.parts.apply(key, new),
        }
    }
}
