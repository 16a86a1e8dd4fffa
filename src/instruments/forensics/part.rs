//! Forensics' part of the daemon's state: the recorder's journal (which
//! its thread writes under the journal's own lock; each answer reads it
//! once) and the section as it started (a change waits for a restart).

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::value::RawValue;

use crate::config::Config;
use crate::forensics::Journal;
use crate::instruments::shape::Part;
use crate::series::exemplars::Captures;
use crate::units::Now;

pub struct ForensicsPart {
    /// What the recorder captured, what it failed to and why it cannot
    /// run, shared with its thread.
    pub journal: Arc<Journal>,
    /// `forensics.enabled`, `threshold`, `dir` and `capture_new_max`.
    pub enabled: bool,
    pub threshold_ns: u64,
    pub dir: PathBuf,
    pub capture_new_max: bool,
}

impl ForensicsPart {
    /// The section as configured, over `journal`.
    pub fn new(config: &Config, journal: Arc<Journal>) -> ForensicsPart {
        let f = &config.forensics;
        ForensicsPart {
            journal,
            enabled: f.enabled,
            threshold_ns: f.threshold_ns,
            dir: f.dir.clone(),
            capture_new_max: f.capture_new_max,
        }
    }
}

impl Part for ForensicsPart {
    fn status(&self) -> Option<Box<RawValue>> {
        Some(super::render::status(self))
    }

    fn page_section(&self, _now: Now) -> Option<String> {
        Some(super::render::page_section(self))
    }

    fn captures(&self, now: Now, started_unix_ns: u64) -> Option<Captures> {
        Some(super::render::captures(self, now, started_unix_ns))
    }

    fn tracefs_repairs(&self) -> Option<u64> {
        let journal = self.journal.lock();
        journal.enabled.then_some(journal.repairs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forensics::JournalData;

    #[test]
    fn off_it_says_so_on_the_page_and_owns_no_instance() {
        let part = ForensicsPart::new(&Config::builtin(), Arc::default());
        assert!(!part.enabled, "off by default");
        assert_eq!(part.tracefs_repairs(), None);
        let section = part.page_section(Now::default()).unwrap();
        assert!(section.contains("Forensics is off."), "{section}");
        let captures = part.captures(Now::default(), 0).unwrap();
        assert!(captures.list.is_empty() && !captures.pending.capturing);
    }

    #[test]
    fn running_it_counts_its_repairs_and_says_why_it_stopped_capturing() {
        let mut config = Config::builtin();
        config.forensics.enabled = true;
        let journal = Journal::default();
        *journal.lock() = JournalData {
            enabled: true,
            available: false,
            reason: Some("the <instance> went away".to_string()),
            repairs: 3,
            ..JournalData::default()
        };
        let part = ForensicsPart::new(&config, Arc::new(journal));
        assert_eq!(part.tracefs_repairs(), Some(3));
        let section = part.page_section(Now::default()).unwrap();
        assert!(
            section.contains("Forensics: the &lt;instance&gt; went away."),
            "{section}"
        );
        let status: serde_json::Value = serde_json::from_str(part.status().unwrap().get()).unwrap();
        assert_eq!(status["instance_repairs"], 3);
        assert_eq!(status["enabled"], true);
        assert_eq!(status["available"], false);
    }
}
