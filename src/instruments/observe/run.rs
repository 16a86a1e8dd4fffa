//! The observer's run in the daemon: started as `[observe]` says (saying
//! in the log which CPUs it watches, what the kernel lets it see, or why
//! it cannot run), its intervals taken in at each collector tick, and
//! stopped at shutdown.

use tracing::{error, info, warn};

use super::{ObservePart, Observer, Settings};
use crate::config::Config;
use crate::cpulist::format_cpu_list;
use crate::host::HostInfo;
use crate::instruments::shape::{Boxed, Run, Start, Started, Step};

/// What the observer is told, from the configuration: the CPUs its
/// section names (`measured`: those the samplers measure), the tracefs
/// forensics uses, and a workload spike captured like a sampler's when
/// forensics runs.
pub fn settings(config: &Config, host: &HostInfo, measured: &[usize]) -> Settings {
    let o = config.section::<super::ObserveConfig>();
    Settings {
        cpus: o.cpu_list(host, measured),
        tracefs: config
            .section::<crate::instruments::forensics::ForensicsConfig>()
            .tracefs
            .clone(),
        buffer_size_kb: o.buffer_size_kb,
        max_tasks: o.max_tasks,
        max_names: o.max_names,
        spike_threshold_ns: config.measure.spike_threshold_ns,
        capture_threshold_ns: (config
            .section::<crate::instruments::forensics::ForensicsConfig>()
            .enabled)
            .then_some(
                config
                    .section::<crate::instruments::forensics::ForensicsConfig>()
                    .threshold_ns,
            ),
    }
}

/// The observer's part, and its run when the section turns it on (one
/// the kernel does not let trace keeps its reason in the part's status
/// and reads nothing).
pub(super) fn start(start: &Start<'_>) -> Started {
    let config = start.config;
    if !config.section::<super::ObserveConfig>().enabled {
        return Started {
            part: Box::new(ObservePart::off(config)),
            run: None,
        };
    }
    let settings = settings(config, start.host, start.measured);
    let cpus = settings.cpus.clone();
    let observer = Observer::start(settings);
    let status = observer.status();
    let said = status.lock().unwrap_or_else(|e| e.into_inner());
    if said.available {
        info!(
            "observe: interference and real-time tasks' wake-ups on CPUs {} ({} KiB ring buffer \
             per CPU, at most {} task series)",
            format_cpu_list(&cpus),
            config.section::<super::ObserveConfig>().buffer_size_kb,
            config.section::<super::ObserveConfig>().max_tasks
        );
        for cap in &said.capabilities {
            let how = if cap.available { "yes" } else { "no" };
            info!("observe: {}: {how}: {}", cap.name, cap.detail);
        }
    } else {
        warn!(
            "observe is enabled but unavailable: {}; latencyd measures without it",
            said.reason.as_deref().unwrap_or("unknown reason")
        );
    }
    drop(said);
    Started {
        part: Box::new(ObservePart::new(status, config)),
        run: Some(Box::new(Observing { observer })),
    }
}

/// A started observer.
struct Observing {
    observer: Observer,
}

impl Run for Observing {
    /// The observer's intervals: plain memory work under the lock; its
    /// workload spikes go to forensics (never waiting). Where it watches
    /// a CPU latencyd measures it sees latencyd's own threads too: it
    /// leaves out those of latencyd's processes (samplers, pollers,
    /// timerlat's workload), and an instrument says which of the kernel's
    /// threads work for it (timerlat's). Their late wake-ups are their
    /// instruments' to capture; offered here, one would take the CPU's
    /// rate-limit slot.
    fn take_in(&mut self, step: Step<'_>) {
        let now = (step.mono_ns, step.unix_ns);
        self.observer.drain(|mut interval| {
            let mut spikes = std::mem::take(&mut interval.spikes);
            spikes.retain(|(_, spike)| !step.owned_kernel_thread(spike.comm.as_bytes()));
            step.update(|part: &mut ObservePart| part.absorb(interval));
            let Some(recorder) = step.capturer else {
                return;
            };
            for (key, spike) in spikes {
                recorder.offer(crate::forensics::Offer {
                    cpu: key.cpu,
                    wakeup_mono_ns: spike.ran_ns,
                    latency_ns: spike.latency_ns,
                    build: Box::new(move || super::spike::capture(&key, &spike, now)),
                });
            }
        });
    }

    /// Nothing: the observer reads on its own thread, and what it handed
    /// over was taken in.
    fn step<'a>(&'a mut self, _step: Step<'a>) -> Boxed<'a, ()> {
        Box::pin(async {})
    }

    /// Tells the observer's thread to stop and joins it, which removes
    /// its tracefs instance (on the blocking pool: it waits).
    fn stop<'a>(&'a mut self, _step: Step<'a>) -> Boxed<'a, ()> {
        let mut observer = std::mem::replace(&mut self.observer, Observer::disabled());
        Box::pin(async move {
            let stopped = tokio::task::spawn_blocking(move || observer.stop()).await;
            if !matches!(stopped, Ok(true)) {
                error!("the observer thread could not be stopped cleanly");
            }
        })
    }
}
