//! The exposition room's builders, and a histogram from the state's
//! bucket counts.

use prometheus::proto::{LabelPair, Metric};

use crate::daemon::state::BucketCounts;
pub use crate::exposition::metric::{availability, counter, gauge, label};

/// A histogram of `count` samples summing to `sum_ns` in `buckets`.
pub fn histogram(
    labels: Vec<LabelPair>,
    buckets: &BucketCounts,
    count: u64,
    sum_ns: u128,
) -> Metric {
    crate::exposition::metric::histogram(
        labels,
        buckets.bounds_ns(),
        buckets.cumulative().into_iter(),
        count,
        sum_ns,
    )
}
