//! The scheduled load windows as the daemon knows them (`[load]`): what
//! is configured, the window running, the next one, what the generators
//! achieved and how often they failed.

use std::collections::BTreeMap;

use crate::config::Config;
use crate::load::{LoadReport, Profile, Window};

#[derive(Debug, Clone, Default)]
pub struct LoadState {
    /// The configured profile; None: no windows (the default).
    pub profile: Option<Profile>,
    /// The window whose load runs now.
    pub active: Option<Window>,
    /// The next window to start.
    pub next: Option<Window>,
    /// The running load's report so far, else the last window's.
    pub report: Option<LoadReport>,
    /// Windows whose load started.
    pub windows_total: u64,
    /// Failures per generator (a start, an early exit, a stop that had to
    /// kill), and `load` for loads that could not start at all.
    pub failures: BTreeMap<String, u64>,
}

impl LoadState {
    pub fn new(config: &Config) -> LoadState {
        LoadState {
            profile: config.load.profile,
            ..LoadState::default()
        }
    }
}
