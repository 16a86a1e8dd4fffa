//! What one latency series keeps between scrapes, whoever measures it
//! (the samplers, timerlat, an observed task): its Prometheus bucket
//! counts and native buckets, and its trailing-window maximum, count and
//! histograms. Plain data over the statistics, no clock of its own: each
//! record says when its samples were taken.

mod buckets;
pub mod native;
mod window_count;
mod window_histogram;
mod window_max;

pub use buckets::BucketCounts;
pub use native::NativeCounts;
pub use window_count::WindowCount;
pub use window_histogram::{MAX_HISTOGRAM_SLOTS, WindowHistogram};
pub use window_max::WindowMax;
