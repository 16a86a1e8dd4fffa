//! `[host]`: how often the host's fingerprint (the facts that decide its
//! latency) is read again to notice a change.

use crate::config::{ConfigError, Section, SectionReader, SectionSpec, as_duration_ns, quoted};
use crate::units::{NS_PER_SEC, format_duration_ns};

const MAX_REREAD_NS: u64 = 3_600 * NS_PER_SEC;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostConfig {
    /// Time between two reads of the facts; 0: read once, at start.
    pub reread_interval_ns: u64,
}

impl HostConfig {
    fn read(r: &mut SectionReader<'_>) -> Result<HostConfig, ConfigError> {
        r.only(&["reread_interval"])?;
        let reread_interval_ns = r.read(
            "reread_interval",
            || 30 * NS_PER_SEC,
            |v| {
                let ns = as_duration_ns(v)?;
                if ns != 0 && (!(NS_PER_SEC..=MAX_REREAD_NS).contains(&ns) || ns % NS_PER_SEC != 0)
                {
                    return Err(
                        "must be whole seconds between 1s and 1h, or \"0s\" to read the facts \
                         once at start"
                            .to_string(),
                    );
                }
                Ok(ns)
            },
            |ns| quoted(&format_duration_ns(*ns)),
        )?;
        Ok(HostConfig { reread_interval_ns })
    }
}

/// `[host]` as the registry lists it.
pub(super) static SECTION: SectionSpec = SectionSpec {
    name: "host",
    read: |r| Ok(Box::new(HostConfig::read(r)?)),
};

impl Section for HostConfig {}
