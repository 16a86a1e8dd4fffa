//! The scheduled load windows as the daemon knows them (`[load]`): what
//! is configured, the window running, the next one, what the generators
//! achieved and how often they failed.

use std::collections::BTreeMap;

use serde_json::value::RawValue;

use super::LoadConfig;
use crate::config::Config;
use crate::instruments::shape::{PageLine, Part};
use crate::load::{LoadReport, Profile, Window};

#[derive(Debug, Clone)]
pub struct LoadPart {
    /// The section as the daemon started with it (`[load]` changes wait
    /// for a restart).
    pub config: LoadConfig,
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

impl LoadPart {
    pub fn new(config: &Config) -> LoadPart {
        LoadPart {
            config: config.section::<super::LoadConfig>().clone(),
            profile: config.section::<super::LoadConfig>().profile,
            active: None,
            next: None,
            report: None,
            windows_total: 0,
            failures: BTreeMap::new(),
        }
    }
}

impl Part for LoadPart {
    fn status(&self) -> Option<Box<RawValue>> {
        Some(super::render::status(self))
    }

    fn page_line(&self) -> Option<PageLine> {
        super::render::page_line(self)
    }
}
