//! Renderers: pure functions from the daemon's state to what is served.
//! They read `state` and know nothing of HTTP (`tests/tidy.rs` checks).
//!
//! - `metrics`: the Prometheus families of `/metrics`; `catalog`: their
//!   names, help, types and labels; `metric`: building one metric;
//!   `protobuf`, `openmetrics`: the expositions beside the text format,
//!   with the state's native buckets and `exemplars`, built in
//!   `exposition` from the `series` copied out of the state.
//! - `status`: `/api/v1/status`; `json`: the JSON API's other bodies;
//! - `page`: the status page `/` and the plot's data (`page_parts`: its
//!   sections that need none of its snapshot).
//! - the registered instruments' families, objects, lines and plots are
//!   built from their parts by their own folders (`instruments::shape`);
//!   these walk them.
//! - `status_line`: the line `systemctl status` shows.
//! - `runbooks`: docs/runbooks.md as the page `/runbooks`.
//! - `clock`: the monotonic and wall clocks every answer reads, injected.

pub mod catalog;
pub mod clock;
pub mod exemplars;
pub mod exposition;
pub mod families;
pub mod json;
pub mod metric;
pub mod metrics;
pub mod openmetrics;
pub mod page;
mod page_cpus;
mod page_parts;
pub mod plots;
pub mod protobuf;
pub mod runbooks;
pub mod series;
pub mod status;
mod status_line;

pub use status_line::status_line;
