//! The latency histograms' series as the protobuf exposition needs them,
//! copied out of the state under its lock to be built and encoded after
//! it is released; and the keys (label pairs) that name a series in the
//! native buckets and exemplars.

use std::collections::BTreeMap;

use crate::daemon::state::{BucketCounts, MonitorState, NativeCounts};

/// A series' labels (name, value), as the metric has them.
pub type Key = Vec<(String, String)>;

/// A histogram family's native buckets, by series.
pub type Natives = BTreeMap<Key, NativeCounts>;

/// One histogram series' numbers, copied out of the state to be built
/// and encoded after the lock is released (the native counts are shared,
/// not copied).
#[derive(Debug, Clone)]
pub struct SeriesCopy {
    /// The series' labels; CPUs of one key are added up.
    pub key: Key,
    pub buckets: BucketCounts,
    pub count: u64,
    pub sum_ns: u128,
    pub native: NativeCounts,
}

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

/// The series of `task_histograms` as copies, to be built and encoded
/// after the lock is released.
pub fn task_series(state: &MonitorState) -> Vec<SeriesCopy> {
    state
        .observe
        .tasks
        .iter()
        .map(|(key, v)| SeriesCopy {
            key: vec![
                ("container".to_string(), key.container.clone()),
                ("cpu".to_string(), key.cpu.to_string()),
                ("task".to_string(), key.task.clone()),
            ],
            buckets: v.buckets.clone(),
            count: v.lifetime.count,
            sum_ns: v.lifetime.sum_ns,
            native: v.native.clone(),
        })
        .collect()
}
