//! `/metrics` in the text format: the catalogue's families (`catalog.rs`),
//! each built by its own function from the daemon's state at scrape time
//! by a custom `prometheus::core::Collector`, next to the crate's process
//! collector. All latencies in seconds.

use std::sync::{Arc, Mutex};

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{Encoder, Registry, TextEncoder};

use super::catalog;
pub use super::clock::{Clock, Clocks, Now, SYSTEM_CLOCKS};
use super::families::{Build, Scrape};
pub use super::families::{LATENCY_HISTOGRAM, REVISION, latency_histograms};
use crate::daemon::state::MonitorState;
use crate::instruments::shape::Part;

/// Builds the metric families from the state, at the time `clocks` say.
pub struct StateCollector {
    state: Arc<Mutex<MonitorState>>,
    clocks: Clocks,
    descs: Vec<Desc>,
}

impl StateCollector {
    pub fn new(state: Arc<Mutex<MonitorState>>, clocks: Clocks) -> StateCollector {
        let descs = catalog::families()
            .map(|family| {
                Desc::new(
                    family.name.to_string(),
                    family.help.to_string(),
                    family.labels.iter().map(|l| l.to_string()).collect(),
                    Default::default(),
                )
                .expect("the metric descriptions are valid")
            })
            .collect();
        StateCollector {
            state,
            clocks,
            descs,
        }
    }
}

impl Collector for StateCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        // A poisoned lock means a panic elsewhere; the data is still the
        // latest state, so serve it rather than nothing.
        let now = self.clocks.read();
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        families(&state, now)
    }
}

/// The metric families for `state` at `now`.
pub fn families(state: &MonitorState, now: Now) -> Vec<MetricFamily> {
    families_but(state, now, &[])
}

/// The same without the families named in `skip` (which the protobuf
/// exposition builds itself, outside the lock).
pub fn families_but(state: &MonitorState, now: Now, skip: &[&str]) -> Vec<MetricFamily> {
    let record = state
        .record
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let scrape = Scrape {
        state,
        now,
        record: &record,
    };
    let mut out = Vec::new();
    // Each part's one look, taken at its first family (`Part::one_look`).
    let mut looks: Vec<(&str, Option<Box<dyn Part>>)> = Vec::new();
    for family in catalog::families().filter(|f| !skip.contains(&f.name)) {
        let metrics = match family.build {
            Build::State(build) => build(&scrape),
            Build::Part(name, build) => match scrape.state.parts.get(name) {
                Some(part) => {
                    let look = match looks.iter().position(|(n, _)| *n == name) {
                        Some(at) => &looks[at].1,
                        None => {
                            looks.push((name, part.one_look()));
                            &looks[looks.len() - 1].1
                        }
                    };
                    build(look.as_deref().unwrap_or(part), scrape.now)
                }
                None => Vec::new(),
            },
        };
        if metrics.is_empty() {
            continue;
        }
        let mut built = MetricFamily::default();
        built.set_name(family.name.to_string());
        built.set_help(family.help.to_string());
        built.set_field_type(family.kind);
        built.set_metric(metrics);
        out.push(built);
    }
    out
}

/// The registry `/metrics` serves: latencyd's collector and the process
/// collector (CPU time, memory, file descriptors of this process).
pub fn registry(
    state: Arc<Mutex<MonitorState>>,
    with_process_metrics: bool,
    clocks: Clocks,
) -> Registry {
    let registry = process_registry(with_process_metrics);
    registry
        .register(Box::new(StateCollector::new(state, clocks)))
        .expect("latencyd's collector registers once");
    registry
}

/// A registry of the process collector alone (or nothing): what the
/// protobuf and OpenMetrics expositions gather beside `families`, which
/// they build from the state themselves.
pub fn process_registry(with_process_metrics: bool) -> Registry {
    let registry = Registry::new();
    if with_process_metrics {
        registry
            .register(Box::new(ProcessMetrics::default()))
            .expect("the process collector registers once");
    }
    registry
}

/// The crate's process collector, with `process_cpu_seconds_total` to the
/// nanosecond: the crate keeps it in an integer counter (whole seconds,
/// so a dashboard's `rate()` of it steps), where client_golang and
/// node_exporter give fractions.
struct ProcessMetrics {
    inner: prometheus::process_collector::ProcessCollector,
}

impl Default for ProcessMetrics {
    fn default() -> Self {
        Self {
            inner: prometheus::process_collector::ProcessCollector::for_self(),
        }
    }
}

impl Collector for ProcessMetrics {
    fn desc(&self) -> Vec<&Desc> {
        self.inner.desc()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let mut families = self.inner.collect();
        if let Some(ns) = crate::rt::sys::process_cpu_ns() {
            for family in &mut families {
                if family.name() == "process_cpu_seconds_total" {
                    for metric in family.mut_metric() {
                        let mut counter = prometheus::proto::Counter::default();
                        counter.set_value(ns as f64 / 1e9);
                        metric.set_counter(counter);
                    }
                }
            }
        }
        families
    }
}

/// Text exposition format 0.0.4 of everything in `registry`.
pub fn render(registry: &Registry) -> Result<String, prometheus::Error> {
    render_families(&registry.gather())
}

/// Renders `families` in the text exposition format 0.0.4.
pub fn render_families(families: &[MetricFamily]) -> Result<String, prometheus::Error> {
    let mut buffer = Vec::with_capacity(16 * 1024);
    TextEncoder::new().encode(families, &mut buffer)?;
    // The encoder writes only UTF-8: names, label values taken from Rust
    // strings, and numbers.
    String::from_utf8(buffer).map_err(|e| prometheus::Error::Msg(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_cpu_seconds_are_fractional() {
        // Spend a quarter of a second of CPU: the crate's own collector
        // would still say 0 (or a whole number).
        let started = crate::rt::sys::process_cpu_ns().unwrap();
        while crate::rt::sys::process_cpu_ns().unwrap() - started < 250_000_000 {
            std::hint::black_box((0..1000u64).sum::<u64>());
        }
        let text = render(&process_registry(true)).unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with("process_cpu_seconds_total "))
            .unwrap_or_else(|| panic!("no process_cpu_seconds_total in {text}"));
        let value: f64 = line.split(' ').nth(1).unwrap().parse().unwrap();
        assert!(value >= 0.25, "{line}");
        assert!(value.fract() != 0.0, "{line}: whole seconds");
    }
}
