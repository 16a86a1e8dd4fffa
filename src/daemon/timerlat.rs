//! Starting the kernel's timerlat (`[timerlat]`) for the daemon, and
//! saying in the log on which CPUs it runs, what the kernel offers and
//! what it changed, or why it cannot run.

use tracing::{info, warn};

use crate::config::Config;
use crate::cpulist::format_cpu_list;
use crate::instruments::source::Source;
use crate::instruments::timerlat::Spec;

/// Starts timerlat when the configuration asks for it.
pub(super) fn start(config: &Config, measured: &[usize]) -> Source {
    let t = &config.timerlat;
    if !t.enabled {
        return Source::disabled();
    }
    let mut spec = Spec::new(&config.forensics.tracefs, t.cpu_list(measured));
    spec.period_us = t.period_us;
    spec.priority = t.priority;
    spec.user_threads = t.user_threads;
    spec.buffer_size_kb = t.buffer_size_kb;
    let source = Source::start(spec, config.measure.spike_threshold_ns);
    let status = source
        .status()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    if status.available {
        info!(
            "timerlat: the kernel's IRQ, thread{} latency on CPUs {}, every {} us ({} threads)",
            if status.user_threads {
                " and return-to-user"
            } else {
                ""
            },
            format_cpu_list(&status.cpus),
            status.period_us,
            if status.user_threads {
                "latencyd's"
            } else {
                "the kernel's"
            }
        );
        for change in &status.changed {
            info!("timerlat: {change} (set back at stop)");
        }
    } else {
        warn!(
            "timerlat is enabled but unavailable: {}; latencyd measures without it",
            status.reason.as_deref().unwrap_or("unknown reason")
        );
    }
    for cap in &status.capabilities {
        let how = if cap.available { "yes" } else { "no" };
        info!("timerlat: {}: {how}: {}", cap.name, cap.detail);
    }
    source
}
