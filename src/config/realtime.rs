//! `[realtime]`: what to do when real-time scheduling is not available.

use super::{ConfigError, SectionReader, as_bool};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RealtimeConfig {
    /// Refuse to start without SCHED_FIFO/RR and locked memory. With
    /// `false` the daemon runs degraded and says so in its metrics
    /// (`latencyd_sampler_realtime 0`).
    pub required: bool,
}

impl RealtimeConfig {
    pub(super) fn read(r: &mut SectionReader<'_>) -> Result<RealtimeConfig, ConfigError> {
        r.only(&["required"])?;
        let required = r.read("required", || true, as_bool, |b| b.to_string())?;
        Ok(RealtimeConfig { required })
    }
}
