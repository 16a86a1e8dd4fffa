//! The two expositions beside the Prometheus text format, built as the
//! handler serves them (and the render benchmark times them): the
//! state's families as the text format's collector builds them (without
//! the registry's sorting, which Prometheus does not need) and the
//! process and HTTP metrics, then the latency histograms again (the
//! samplers' and each registered instrument's with native buckets) with
//! their native buckets and exemplars from one look at the state, so that
//! the counts agree with each other. Each look holds the state's lock
//! briefly: the second copies the histograms' numbers out (the native
//! counts shared, not copied), and building and encoding happen after it
//! is released.

use std::collections::BTreeMap;
use std::sync::Mutex;

use prometheus::Registry;
use prometheus::proto::{Metric, MetricFamily};

use super::catalog::families;
use super::exemplars;
use super::metric::{histogram, label};
use super::metrics::{self, Clocks, LATENCY_HISTOGRAM, Now};
use super::series::{self, Key, Natives, SeriesCopy};
use super::{openmetrics, protobuf};
use crate::daemon::state::{self, MonitorState, NativeCounts};
use crate::instruments::registry::INSTRUMENTS;
use crate::instruments::shape::Native;
use crate::series::exemplars::Exemplars;

/// The three expositions of `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposition {
    /// The Prometheus text format 0.0.4: no exemplar, no native bucket.
    Text,
    /// OpenMetrics 1.0 text: exemplars.
    OpenMetrics,
    /// Prometheus' protobuf format: native buckets and exemplars.
    Protobuf,
}

/// Which exposition an `Accept` header asks for: protobuf (delimited
/// `io.prometheus.client.MetricFamily`) or OpenMetrics text when listed
/// with a q-value above zero and at least that of every text format
/// (`text/plain`, `*/*`, and OpenMetrics for protobuf), protobuf first;
/// the Prometheus text format otherwise, also without a header.
pub fn chosen(accept: Option<&str>) -> Exposition {
    let (mut proto_q, mut open_q, mut text_q) = (0.0f64, 0.0f64, 0.0f64);
    for item in accept.unwrap_or("").split(',') {
        let mut parts = item.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        let (mut q, mut family, mut delimited) = (1.0, false, false);
        for param in parts {
            let (key, value) = param.split_once('=').unwrap_or((param, ""));
            let value = value.trim();
            match key.trim().to_ascii_lowercase().as_str() {
                "q" => q = value.parse().unwrap_or(0.0),
                "proto" => family = value == "io.prometheus.client.MetricFamily",
                "encoding" => delimited = value == "delimited",
                _ => {}
            }
        }
        match media.as_str() {
            "application/vnd.google.protobuf" if family && delimited => proto_q = proto_q.max(q),
            "application/openmetrics-text" => open_q = open_q.max(q),
            "text/plain" | "*/*" => text_q = text_q.max(q),
            _ => {}
        }
    }
    if proto_q > 0.0 && proto_q >= text_q.max(open_q) {
        Exposition::Protobuf
    } else if open_q > 0.0 && open_q >= text_q {
        Exposition::OpenMetrics
    } else {
        Exposition::Text
    }
}

/// Every latency histogram's exemplars, by family: the samplers' and
/// each registered instrument's that lists its own, from one look at
/// what forensics captured.
pub fn exemplars_of(s: &MonitorState, now: Now) -> BTreeMap<&'static str, Exemplars> {
    let captures = exemplars::captures(s, now);
    let mut all = BTreeMap::from([(LATENCY_HISTOGRAM, exemplars::latency(s, &captures))]);
    for entry in INSTRUMENTS {
        if let Some(Native {
            name,
            exemplars: Some(of),
            ..
        }) = entry.native
            && let Some(part) = s.parts.get(entry.name)
        {
            all.insert(name, of(part, &captures));
        }
    }
    all
}

/// Every latency histogram with native buckets, its series copied out of
/// the state (the samplers', then each registered instrument's in
/// registry order), and their exemplars: what the protobuf exposition
/// takes under the lock.
pub fn histogram_copies(s: &MonitorState, now: Now) -> (Copies, BTreeMap<&'static str, Exemplars>) {
    let mut copies = vec![(LATENCY_HISTOGRAM, series::latency_series(s))];
    for entry in INSTRUMENTS {
        if let Some(native) = entry.native {
            let part = s.parts.get(entry.name);
            copies.push((native.name, part.map_or_else(Vec::new, native.series)));
        }
    }
    (copies, exemplars_of(s, now))
}

/// Series copied out of the state, by histogram family.
pub type Copies = Vec<(&'static str, Vec<SeriesCopy>)>;

/// The metrics and native buckets of series copied out of the state;
/// copies of one key (every CPU, for the sum over CPUs) are added up.
fn built(copies: Vec<SeriesCopy>) -> (Vec<Metric>, Natives) {
    let mut grouped: BTreeMap<Key, Vec<SeriesCopy>> = BTreeMap::new();
    for mut copy in copies {
        grouped
            .entry(std::mem::take(&mut copy.key))
            .or_default()
            .push(copy);
    }
    let mut metrics = Vec::with_capacity(grouped.len());
    let mut natives = Natives::new();
    for (key, all) in grouped {
        let labels = key.iter().map(|(n, v)| label(n, v)).collect();
        let count = all.iter().map(|c| c.count).sum();
        let sum_ns = all.iter().map(|c| c.sum_ns).sum();
        let native = match all.as_slice() {
            [one] => {
                metrics.push(histogram(labels, &one.buckets, count, sum_ns));
                one.native.clone()
            }
            many => {
                let mut buckets = many[0].buckets.clone();
                for other in &many[1..] {
                    buckets.merge(&other.buckets);
                }
                metrics.push(histogram(labels, &buckets, count, sum_ns));
                NativeCounts::merged(many.iter().map(|c| &c.native))
            }
        };
        natives.insert(key, native);
    }
    (metrics, natives)
}

/// The state's families but those named in `skip` (one look, as the
/// text format's collector takes it), then `others`' (the process and
/// HTTP metrics).
fn all_families(
    others: &Registry,
    state: &Mutex<MonitorState>,
    now: Now,
    skip: &[&str],
) -> Vec<MetricFamily> {
    let mut families = metrics::families_but(&state::lock(state), now, skip);
    families.extend(others.gather());
    families
}

/// A histogram family of the catalog with `metrics`, or none without.
fn family(name: &str, metrics: Vec<Metric>) -> Option<MetricFamily> {
    let described = families().find(|f| f.name == name)?;
    (!metrics.is_empty()).then(|| {
        let mut family = MetricFamily::default();
        family.set_name(name.to_string());
        family.set_help(described.help.to_string());
        family.set_field_type(described.kind);
        family.set_metric(metrics);
        family
    })
}

/// The protobuf exposition: native buckets and exemplars.
pub fn protobuf(others: &Registry, state: &Mutex<MonitorState>, clocks: Clocks) -> Vec<u8> {
    let now = clocks.read();
    let mut skip = vec![LATENCY_HISTOGRAM];
    skip.extend(
        INSTRUMENTS
            .iter()
            .filter_map(|entry| Some(entry.native?.name)),
    );
    let mut families = all_families(others, state, now, &skip);
    let (copies, examples) = histogram_copies(&state::lock(state), now);
    let mut natives = BTreeMap::new();
    for (name, copies) in copies {
        let (histograms, native) = built(copies);
        families.extend(family(name, histograms));
        natives.insert(name, native);
    }
    protobuf::encode(&families, &natives, &examples)
}

/// The OpenMetrics text exposition: exemplars, no native buckets.
pub fn openmetrics(others: &Registry, state: &Mutex<MonitorState>, clocks: Clocks) -> String {
    let now = clocks.read();
    let families = all_families(others, state, now, &[]);
    let examples = exemplars_of(&state::lock(state), now);
    openmetrics::encode(&families, &examples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers_choose_the_exposition() {
        use Exposition::*;
        // Prometheus with native histograms on, and by default.
        let native = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;\
                      encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        let default = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
                       version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        for (accept, exposition) in [
            (Some(native), Protobuf),
            (Some(default), OpenMetrics),
            (None, Text),
            (Some("*/*"), Text),
            (Some("text/plain;version=0.0.4"), Text),
            (
                Some(
                    "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text",
                ),
                Text,
            ),
            (
                Some(
                    "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0",
                ),
                Text,
            ),
            (Some("application/openmetrics-text;q=0"), Text),
            (
                Some("application/openmetrics-text;q=0.2,text/plain;q=0.5"),
                Text,
            ),
            (Some("text/plain, application/openmetrics-text;q=0.5"), Text),
        ] {
            assert_eq!(chosen(accept), exposition, "{accept:?}");
        }
    }
}
