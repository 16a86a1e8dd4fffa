//! A histogram series' numbers copied out of whatever holds them (the
//! daemon's state under its lock), to be built and encoded after the lock
//! is released; and the keys (label pairs) that name a series in the
//! native buckets and exemplars.

use std::collections::BTreeMap;

use super::{BucketCounts, NativeCounts};

/// A series' labels (name, value), as the metric has them.
pub type Key = Vec<(String, String)>;

/// A histogram family's native buckets, by series.
pub type Natives = BTreeMap<Key, NativeCounts>;

/// One histogram series' numbers (the native counts are shared, not
/// copied).
#[derive(Debug, Clone)]
pub struct SeriesCopy {
    /// The series' labels; CPUs of one key are added up.
    pub key: Key,
    pub buckets: BucketCounts,
    pub count: u64,
    pub sum_ns: u128,
    pub native: NativeCounts,
}
