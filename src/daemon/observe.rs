//! Starting the observer (`[observe]`) for the daemon, and saying in the
//! log which CPUs it watches, what the kernel lets it see, or why it
//! cannot run.

use tracing::{info, warn};

use crate::config::Config;
use crate::cpulist::format_cpu_list;
use crate::host::HostInfo;
use crate::observe::{Observer, Settings};

/// Interference names kept per CPU before the rest count as `other`.
pub(super) fn settings(config: &Config, host: &HostInfo, measured: &[usize]) -> Settings {
    let o = &config.observe;
    Settings {
        cpus: o.cpu_list(host, measured),
        tracefs: config.forensics.tracefs.clone(),
        buffer_size_kb: o.buffer_size_kb,
        max_tasks: o.max_tasks,
        max_names: o.max_names,
        spike_threshold_ns: config.measure.spike_threshold_ns,
        // Captured like a sampler's spike, when forensics runs.
        capture_threshold_ns: config
            .forensics
            .enabled
            .then_some(config.forensics.threshold_ns),
    }
}

/// Starts the observer when the configuration asks for it.
pub(super) fn start(config: &Config, host: &HostInfo, measured: &[usize]) -> Observer {
    if !config.observe.enabled {
        return Observer::disabled();
    }
    let settings = settings(config, host, measured);
    let cpus = settings.cpus.clone();
    let observer = Observer::start(settings);
    let status = observer.status();
    let status = status.lock().unwrap_or_else(|e| e.into_inner());
    if status.available {
        info!(
            "observe: interference and real-time tasks' wake-ups on CPUs {} ({} KiB ring buffer \
             per CPU, at most {} task series)",
            format_cpu_list(&cpus),
            config.observe.buffer_size_kb,
            config.observe.max_tasks
        );
        for cap in &status.capabilities {
            let how = if cap.available { "yes" } else { "no" };
            info!("observe: {}: {how}: {}", cap.name, cap.detail);
        }
    } else {
        warn!(
            "observe is enabled but unavailable: {}; latencyd measures without it",
            status.reason.as_deref().unwrap_or("unknown reason")
        );
    }
    drop(status);
    observer
}
