//! What one latency series keeps between scrapes, whoever measures it
//! (the samplers, timerlat, an observed task): its Prometheus bucket
//! counts and native buckets, and its trailing-window maximum, count and
//! histograms. Plain data over the statistics, no clock of its own: each
//! record says when its samples were taken.
//!
//! Choose `BucketCounts` and `NativeCounts` for what a scrape exports
//! since start (they only grow), the `Window*` types for "the last
//! minute" (filed by when the samples were taken, not when they arrived):
//!
//! ```
//! use latencyd::series::{BucketCounts, WindowMax};
//! use latencyd::stats::LatencyStats;
//!
//! const S: u64 = 1_000_000_000;
//! let mut interval = LatencyStats::new(100_000, None);
//! interval.record_at(3_000, 0, 10 * S); // 3 µs, sampled at 10 s
//! interval.record_at(250_000, 1, 10 * S); // 250 µs
//!
//! let mut buckets = BucketCounts::new(&[5_000, 100_000, 1_000_000]);
//! buckets.add(&interval);
//! assert_eq!(buckets.cumulative(), [1, 1, 2]);
//!
//! let mut window = WindowMax::new(60 * S);
//! window.record(10 * S, interval.max_ns);
//! assert_eq!(window.max(30 * S), Some(250_000)); // still in the minute
//! assert_eq!(window.max(75 * S), None); // a minute after, gone
//! ```

mod buckets;
mod copy;
pub mod exemplars;
pub mod native;
mod window_count;
mod window_histogram;
mod window_max;

pub use buckets::BucketCounts;
pub use copy::{Key, Natives, SeriesCopy};
pub use native::NativeCounts;
pub use window_count::WindowCount;
pub use window_histogram::{MAX_HISTOGRAM_SLOTS, WindowHistogram};
pub use window_max::WindowMax;
