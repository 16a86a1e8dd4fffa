//! The host facts' part of the daemon's state: the tracker of the
//! fingerprint and how often the facts are read again (which a reload
//! changes in place).

use serde_json::value::RawValue;

use super::track::HostTrack;
use crate::config::Config;
use crate::host::Fingerprint;
use crate::instruments::shape::Part;
use crate::units::Now;

pub struct HostFactsPart {
    /// The facts in force, since when, and the changes seen.
    pub track: HostTrack,
    /// `host.reread_interval` (0: read once, at start).
    pub reread_interval_ns: u64,
}

impl HostFactsPart {
    /// A tracker over `track`, read again as the section says.
    pub fn new(config: &Config, track: HostTrack) -> HostFactsPart {
        HostFactsPart {
            track,
            reread_interval_ns: config.section::<super::HostConfig>().reread_interval_ns,
        }
    }

    /// A part with no fact read (synthetic states).
    pub fn unread(config: &Config) -> HostFactsPart {
        HostFactsPart::new(
            config,
            HostTrack::new(Fingerprint::default(), Vec::new(), 0, 0),
        )
    }
}

impl Part for HostFactsPart {
    fn status(&self) -> Option<Box<RawValue>> {
        None
    }

    fn status_fields(&self) -> Vec<(&'static str, Box<RawValue>)> {
        super::render::status_fields(&self.track)
    }

    fn page_section_after_record(&self, _now: Now) -> Option<String> {
        Some(super::render::page_section(&self.track))
    }

    /// `host.reread_interval` is put in force at the next collector tick:
    /// the run reads it from here.
    fn apply(&mut self, key: &str, new: &Config) -> bool {
        if key != "host.reread_interval" {
            return false;
        }
        self.reread_interval_ns = new.section::<super::HostConfig>().reread_interval_ns;
        true
    }
}
