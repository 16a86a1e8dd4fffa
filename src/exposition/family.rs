//! A family latencyd exports, described once: its name, help text, type
//! and label names, and the builder `B` that makes its metrics from what
//! its owner holds (the daemon's scrape, or an instrument's part).

use prometheus::proto::MetricType;

/// A family's description and its builder.
#[derive(Debug, Clone, Copy)]
pub struct Family<B> {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: MetricType,
    pub labels: &'static [&'static str],
    pub build: B,
}

impl<B> Family<B> {
    /// The same description with another builder.
    pub fn with_build<C>(&self, build: C) -> Family<C> {
        Family {
            name: self.name,
            help: self.help,
            kind: self.kind,
            labels: self.labels,
            build,
        }
    }
}
