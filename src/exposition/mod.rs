//! Metrics in Prometheus' data model (`prometheus::proto`), built one by
//! one: the room every part that exports a family builds it with, the
//! daemon's own renderers and each instrument alike. It knows no state:
//! a family is described here and built by whoever owns its numbers.

mod family;
pub mod metric;

pub use family::Family;
