//! `[realtime]`: what to do when real-time scheduling is not available.

use super::{ConfigError, SectionReader, as_bool};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RealtimeConfig {
    /// Refuse to start without SCHED_FIFO/RR and locked memory. With
    /// `false` the daemon runs degraded and says so in its metrics
    /// (`latencyd_sampler_realtime 0`).
    pub required: bool,
    /// Set a sampler whose policy, priority or CPUs were changed behind
    /// latencyd's back (`chrt`, tuna, a tuned profile) back to what the
    /// configuration says; `false` leaves it and reports it
    /// (`latencyd_sampler_realtime 0`, `LatencydSamplerNotRealtime`).
    pub restore: bool,
}

impl RealtimeConfig {
    pub(super) fn read(r: &mut SectionReader<'_>) -> Result<RealtimeConfig, ConfigError> {
        r.only(&["required", "restore"])?;
        let required = r.read("required", || true, as_bool, |b| b.to_string())?;
        let restore = r.read("restore", || true, as_bool, |b| b.to_string())?;
        Ok(RealtimeConfig { required, restore })
    }
}
