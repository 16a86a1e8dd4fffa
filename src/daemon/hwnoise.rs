//! The hardware-noise windows (`[hwnoise]`) for the daemon: the windows
//! thread started with what the configuration resolves to, and at each
//! collector tick which CPUs it spins (their samplers' wake-ups are kept
//! apart) and the windows that ended, for the record.

use std::collections::BTreeSet;
use std::sync::Mutex;

use tracing::info;

use super::state::{HwnoiseState, MonitorState, lock};
use crate::config::Config;
use crate::cpulist::format_cpu_list;
use crate::host::HostInfo;
use crate::instruments::hwlat::HwlatSpec;
use crate::instruments::hwnoise::{Outcome, WindowReport, Windows};
use crate::record::{HwnoiseLine, HwnoiseOutcome};

/// Starts the windows' thread when the configuration asks for it.
pub(super) fn start(config: &Config, host: &HostInfo) -> Windows {
    let h = &config.hwnoise;
    if !h.enabled {
        return Windows::disabled();
    }
    let cpus = match h.cpus.resolve(host) {
        Ok(cpus) => cpus,
        Err(err) => return Windows::not_running(err),
    };
    let spec = HwlatSpec {
        tracefs: config.forensics.tracefs.clone(),
        cpus,
        threshold_us: h.threshold_us,
        width_us: h.width_us,
        window_us: h.window_us,
    };
    info!(
        "hwnoise: hwlat windows on CPUs {} every {} for {} (width {} us of every {} us, \
         threshold {} us)",
        format_cpu_list(&spec.cpus),
        crate::units::format_duration_ns(u64::try_from(h.schedule.every.as_nanos()).unwrap_or(0)),
        crate::units::format_duration_ns(
            u64::try_from(h.schedule.duration.as_nanos()).unwrap_or(0)
        ),
        h.width_us,
        h.window_us,
        h.threshold_us
    );
    Windows::start(spec, h.schedule)
}

/// At a tick (`now_mono_ns`): the CPUs spun now, put in the state, and
/// the windows that ended since the last tick, as the record files them.
pub(super) fn step(
    state: &Mutex<MonitorState>,
    now_mono_ns: u64,
) -> (BTreeSet<usize>, Vec<HwnoiseLine>) {
    let mut s = lock(state);
    let (spun, finished) = {
        let mut status = s.hwnoise.status.lock().unwrap_or_else(|e| e.into_inner());
        let finished = std::mem::take(&mut status.finished);
        (HwnoiseState::spun_at(&status, now_mono_ns), finished)
    };
    s.hwnoise.spun = spun.clone();
    let h = &s.config.hwnoise;
    let lines = finished
        .into_iter()
        .map(|w| line(&w, h.threshold_us, h.width_us, h.window_us))
        .collect();
    (spun, lines)
}

fn line(w: &WindowReport, threshold_us: u64, width_us: u64, window_us: u64) -> HwnoiseLine {
    HwnoiseLine {
        start_ns: w.start_unix_ns,
        end_ns: w.end_unix_ns,
        cpus: w.cpus.clone(),
        threshold_us,
        width_us,
        window_us,
        outcome: match &w.outcome {
            Outcome::Ran => HwnoiseOutcome::Ran {
                samples: w.samples(),
                gaps: w.noise.values().map(|n| n.gaps).sum(),
                max_us: w.max_us(),
                nmis: w.nmis(),
                smis: w.smis,
            },
            Outcome::Skipped(kind, _) => HwnoiseOutcome::Skipped(kind.name().to_string()),
        },
    }
}
