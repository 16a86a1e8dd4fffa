//! The Prometheus protobuf exposition (`io.prometheus.client.MetricFamily`,
//! length-delimited), for scrapers that ask for it: the only format that
//! carries native histograms. Its media type, and the encoder, which
//! `wire` writes straight from the registry's families. The message types
//! (those of Prometheus' `metrics.proto`) are test support, in
//! `tests/common/protobuf.rs`, where `tests/protobuf.rs` decodes what
//! `wire` writes and compares it with messages built one by one.

/// The media type Prometheus asks for.
pub const CONTENT_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

pub use super::series::Natives;
pub use super::wire::encode;
