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
        let f = config.section::<super::ForensicsConfig>();
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

    /// The journal under one lock: its eight families agree.
    fn one_look(&self) -> Option<Box<dyn Part>> {
        Some(Box::new(ForensicsPart {
            journal: Arc::new(self.journal.one_look()),
            dir: self.dir.clone(),
            ..*self
        }))
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
        let part = ForensicsPart::new(
            &crate::instruments::registry::builtin_config(),
            Arc::default(),
        );
        assert!(!part.enabled, "off by default");
        assert_eq!(part.tracefs_repairs(), None);
        let section = part.page_section(Now::default()).unwrap();
        assert!(section.contains("Forensics is off."), "{section}");
        let captures = part.captures(Now::default(), 0).unwrap();
        assert!(captures.list.is_empty() && !captures.pending.capturing);
    }

    #[test]
    fn running_it_counts_its_repairs_and_says_why_it_stopped_capturing() {
        let mut config = crate::instruments::registry::builtin_config();
        config
            .section_mut::<super::super::ForensicsConfig>()
            .enabled = true;
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

    #[test]
    fn a_scrape_reads_one_look_of_the_journal_that_the_recorder_does_not_change() {
        let journal = Arc::new(Journal::default());
        journal.lock().captured.insert((1, "irq".to_string()), 2);
        journal.lock().notice("kept for the log".to_string());
        let part = ForensicsPart::new(
            &crate::instruments::registry::builtin_config(),
            Arc::clone(&journal),
        );
        let look = part.one_look().unwrap();
        // What the recorder files after the look is not in it.
        journal.lock().captured.insert((1, "irq".to_string()), 3);
        let family = |part: &dyn Part| {
            let built = super::super::families::FAMILIES
                .iter()
                .find(|f| f.name == "latencyd_forensics_captures_total")
                .map(|f| (f.build)(part, Now::default()))
                .unwrap();
            built
                .iter()
                .map(|m| m.get_counter().get_value())
                .collect::<Vec<f64>>()
        };
        assert_eq!(family(look.as_ref()), [2.0]);
        assert_eq!(family(&part), [3.0]);
        // The journal keeps what the look leaves out.
        assert_eq!(journal.lock().notices.len(), 1);
    }
}
