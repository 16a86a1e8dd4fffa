//! The hardware-noise windows (`[hwnoise]`) for the daemon: the windows
//! thread started with what the configuration resolves to, and at each
//! collector tick which CPUs it spins (what else measures them is kept
//! apart) and the windows that ended, for the record.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use tracing::{error, info};

use super::{HwnoisePart, Outcome, Status, WindowReport, Windows};
use crate::config::Config;
use crate::cpulist::format_cpu_list;
use crate::host::HostInfo;
use crate::instruments::hwlat::HwlatSpec;
use crate::instruments::shape::{Boxed, Run, Started, Step};
use crate::record::{HwnoiseLine, HwnoiseOutcome};

/// The windows' thread, and what the record files of each window.
struct HwnoiseRun {
    windows: Windows,
    status: Arc<Mutex<Status>>,
    threshold_us: u64,
    width_us: u64,
    window_us: u64,
}

/// Starts the windows' thread when the configuration asks for it; its
/// part says why none runs when it cannot.
pub(super) fn start(config: &Config, host: &HostInfo) -> Started {
    let windows = start_windows(config, host);
    let status = windows.status();
    let h = config.section::<super::HwnoiseConfig>();
    let run = h.enabled.then(|| {
        Box::new(HwnoiseRun {
            windows,
            status: Arc::clone(&status),
            threshold_us: h.threshold_us,
            width_us: h.width_us,
            window_us: h.window_us,
        }) as Box<dyn Run>
    });
    Started {
        part: Box::new(HwnoisePart::new(status)),
        run,
    }
}

fn start_windows(config: &Config, host: &HostInfo) -> Windows {
    let h = config.section::<super::HwnoiseConfig>();
    if !h.enabled {
        return Windows::disabled();
    }
    let cpus = match h.cpus.resolve(host) {
        Ok(cpus) => cpus,
        Err(err) => return Windows::not_running(err),
    };
    let spec = HwlatSpec {
        tracefs: config
            .section::<crate::instruments::forensics::ForensicsConfig>()
            .tracefs
            .clone(),
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

impl HwnoiseRun {
    /// At `now_mono_ns`: the CPUs spun now, put in the part, and the
    /// windows that ended since the last look, into the record.
    fn look(&self, step: Step<'_>) -> BTreeSet<usize> {
        let (spun, finished) = {
            let mut status = self.status.lock().unwrap_or_else(|e| e.into_inner());
            let finished = std::mem::take(&mut status.finished);
            (HwnoisePart::spun_at(&status, step.mono_ns), finished)
        };
        step.update(|h: &mut HwnoisePart| h.spun = spun.clone());
        if let Some((accumulator, _)) = step.record {
            for w in finished {
                accumulator.add_hwnoise(line(&w, self.threshold_us, self.width_us, self.window_us));
            }
        }
        spun
    }
}

impl Run for HwnoiseRun {
    fn claim(&mut self, step: Step<'_>) -> BTreeSet<usize> {
        self.look(step)
    }

    fn step<'a>(&'a mut self, _: Step<'a>) -> Boxed<'a, ()> {
        Box::pin(async {})
    }

    /// A running window ends, its settings set back; the windows it
    /// finished go into the record's last interval.
    fn stop<'a>(&'a mut self, step: Step<'a>) -> Boxed<'a, ()> {
        Box::pin(async move {
            let mut windows = std::mem::replace(&mut self.windows, Windows::disabled());
            if tokio::task::spawn_blocking(move || windows.stop())
                .await
                .is_err()
            {
                error!("the hwnoise thread could not be stopped cleanly");
            }
            self.look(step);
        })
    }
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
