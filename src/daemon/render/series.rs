//! The samplers' latency histograms as the protobuf exposition needs
//! them, copied out of the state under its lock
//! to be built and encoded after it is released (`crate::series`'s
//! `SeriesCopy`).

use crate::daemon::state::MonitorState;
pub use crate::series::{Key, Natives, SeriesCopy};

/// The series of `latency_histograms` as copies: per CPU, keyed by
/// `cpu`, or with no label for the sum over CPUs.
pub fn latency_series(state: &MonitorState) -> Vec<SeriesCopy> {
    let per_cpu = state.config.export.per_cpu_histograms;
    state
        .cpus
        .iter()
        .map(|v| SeriesCopy {
            key: if per_cpu {
                vec![("cpu".to_string(), v.cpu.to_string())]
            } else {
                vec![]
            },
            buckets: v.buckets.clone(),
            count: v.lifetime.count,
            sum_ns: v.lifetime.sum_ns,
            native: v.native.clone(),
        })
        .collect()
}
