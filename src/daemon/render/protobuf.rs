//! The Prometheus protobuf exposition (`io.prometheus.client.MetricFamily`,
//! length-delimited), for scrapers that ask for it: the only format that
//! carries native histograms.
//!
//! The messages are those of Prometheus' `metrics.proto` (the fields
//! latencyd uses), written with prost's derive so no code generator is
//! needed. Every family the text exposition has is encoded the same; the
//! histogram `latencyd_wakeup_latency_seconds` gets its native buckets
//! beside the classic ones.

use std::collections::BTreeMap;

use prometheus::proto;
use prost::Message;

use super::native::{self, Native};

#[derive(Clone, PartialEq, Message)]
pub struct LabelPair {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub value: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Gauge {
    #[prost(double, optional, tag = "1")]
    pub value: Option<f64>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Counter {
    #[prost(double, optional, tag = "1")]
    pub value: Option<f64>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Quantile {
    #[prost(double, optional, tag = "1")]
    pub quantile: Option<f64>,
    #[prost(double, optional, tag = "2")]
    pub value: Option<f64>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Summary {
    #[prost(uint64, optional, tag = "1")]
    pub sample_count: Option<u64>,
    #[prost(double, optional, tag = "2")]
    pub sample_sum: Option<f64>,
    #[prost(message, repeated, tag = "3")]
    pub quantile: Vec<Quantile>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Untyped {
    #[prost(double, optional, tag = "1")]
    pub value: Option<f64>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Bucket {
    #[prost(uint64, optional, tag = "1")]
    pub cumulative_count: Option<u64>,
    #[prost(double, optional, tag = "2")]
    pub upper_bound: Option<f64>,
}

#[derive(Clone, PartialEq, Message)]
pub struct BucketSpan {
    #[prost(sint32, optional, tag = "1")]
    pub offset: Option<i32>,
    #[prost(uint32, optional, tag = "2")]
    pub length: Option<u32>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Histogram {
    #[prost(uint64, optional, tag = "1")]
    pub sample_count: Option<u64>,
    #[prost(double, optional, tag = "2")]
    pub sample_sum: Option<f64>,
    #[prost(message, repeated, tag = "3")]
    pub bucket: Vec<Bucket>,
    #[prost(sint32, optional, tag = "5")]
    pub schema: Option<i32>,
    #[prost(double, optional, tag = "6")]
    pub zero_threshold: Option<f64>,
    #[prost(uint64, optional, tag = "7")]
    pub zero_count: Option<u64>,
    #[prost(message, repeated, tag = "12")]
    pub positive_span: Vec<BucketSpan>,
    #[prost(sint64, repeated, tag = "13")]
    pub positive_delta: Vec<i64>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Metric {
    #[prost(message, repeated, tag = "1")]
    pub label: Vec<LabelPair>,
    #[prost(message, optional, tag = "2")]
    pub gauge: Option<Gauge>,
    #[prost(message, optional, tag = "3")]
    pub counter: Option<Counter>,
    #[prost(message, optional, tag = "4")]
    pub summary: Option<Summary>,
    #[prost(message, optional, tag = "5")]
    pub untyped: Option<Untyped>,
    #[prost(int64, optional, tag = "6")]
    pub timestamp_ms: Option<i64>,
    #[prost(message, optional, tag = "7")]
    pub histogram: Option<Histogram>,
}

#[derive(Clone, PartialEq, Message)]
pub struct MetricFamily {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub help: Option<String>,
    /// COUNTER 0, GAUGE 1, SUMMARY 2, UNTYPED 3, HISTOGRAM 4.
    #[prost(int32, optional, tag = "3")]
    pub r#type: Option<i32>,
    #[prost(message, repeated, tag = "4")]
    pub metric: Vec<Metric>,
}

/// The media type Prometheus asks for.
pub const CONTENT_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

/// Whether an `Accept` header asks for the protobuf exposition (listed
/// with a q-value above zero and at least that of the text format).
pub fn wanted(accept: Option<&str>) -> bool {
    let Some(accept) = accept else {
        return false;
    };
    let (mut proto_q, mut text_q) = (0.0f64, 0.0f64);
    for item in accept.split(',') {
        let mut parts = item.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        let mut q = 1.0;
        let mut family = false;
        let mut delimited = false;
        for param in parts {
            let (key, value) = param.split_once('=').unwrap_or((param, ""));
            match key.trim().to_ascii_lowercase().as_str() {
                "q" => q = value.trim().parse().unwrap_or(0.0),
                "proto" => family = value.trim() == "io.prometheus.client.MetricFamily",
                "encoding" => delimited = value.trim() == "delimited",
                _ => {}
            }
        }
        match media.as_str() {
            "application/vnd.google.protobuf" if family && delimited => proto_q = proto_q.max(q),
            "text/plain" | "application/openmetrics-text" | "*/*" => text_q = text_q.max(q),
            _ => {}
        }
    }
    proto_q > 0.0 && proto_q >= text_q
}

fn labels(metric: &proto::Metric) -> Vec<LabelPair> {
    metric
        .get_label()
        .iter()
        .map(|l| LabelPair {
            name: Some(l.name().to_string()),
            value: Some(l.value().to_string()),
        })
        .collect()
}

fn convert(family: &proto::MetricFamily, native: Option<&Natives>) -> MetricFamily {
    let kind = family.get_field_type();
    let metric = family
        .get_metric()
        .iter()
        .map(|m| {
            let mut out = Metric {
                label: labels(m),
                timestamp_ms: (m.timestamp_ms() != 0).then_some(m.timestamp_ms()),
                ..Metric::default()
            };
            match kind {
                proto::MetricType::COUNTER => {
                    out.counter = Some(Counter {
                        value: Some(m.get_counter().get_value()),
                    })
                }
                proto::MetricType::GAUGE => {
                    out.gauge = Some(Gauge {
                        value: Some(m.get_gauge().get_value()),
                    })
                }
                // latencyd has none; kept so every family round-trips.
                #[allow(deprecated)]
                proto::MetricType::UNTYPED => {
                    out.untyped = Some(Untyped {
                        value: Some(m.get_untyped().get_value()),
                    })
                }
                proto::MetricType::SUMMARY => {
                    let s = m.get_summary();
                    out.summary = Some(Summary {
                        sample_count: Some(s.sample_count()),
                        sample_sum: Some(s.sample_sum()),
                        quantile: s
                            .get_quantile()
                            .iter()
                            .map(|q| Quantile {
                                quantile: Some(q.quantile()),
                                value: Some(q.value()),
                            })
                            .collect(),
                    })
                }
                proto::MetricType::HISTOGRAM => {
                    let h = m.get_histogram();
                    let mut histogram = Histogram {
                        sample_count: Some(h.get_sample_count()),
                        sample_sum: Some(h.get_sample_sum()),
                        bucket: h
                            .get_bucket()
                            .iter()
                            .map(|b| Bucket {
                                cumulative_count: Some(b.cumulative_count()),
                                upper_bound: Some(b.upper_bound()),
                            })
                            .collect(),
                        ..Histogram::default()
                    };
                    let key: Vec<(String, String)> = m
                        .get_label()
                        .iter()
                        .map(|l| (l.name().to_string(), l.value().to_string()))
                        .collect();
                    if let Some(n) = native.and_then(|natives| natives.get(&key)) {
                        histogram.schema = Some(native::SCHEMA);
                        histogram.zero_threshold = Some(native::ZERO_THRESHOLD);
                        histogram.zero_count = Some(0);
                        histogram.positive_span = n
                            .spans
                            .iter()
                            .map(|&(offset, length)| BucketSpan {
                                offset: Some(offset),
                                length: Some(length),
                            })
                            .collect();
                        // An empty native histogram still says it is one.
                        if histogram.positive_span.is_empty() {
                            histogram.positive_span.push(BucketSpan {
                                offset: Some(0),
                                length: Some(0),
                            });
                        }
                        histogram.positive_delta = n.deltas.clone();
                    }
                    out.histogram = Some(histogram);
                }
            }
            out
        })
        .collect();
    MetricFamily {
        name: Some(family.name().to_string()),
        help: Some(family.help().to_string()),
        r#type: Some(match kind {
            proto::MetricType::COUNTER => 0,
            proto::MetricType::GAUGE => 1,
            proto::MetricType::SUMMARY => 2,
            proto::MetricType::UNTYPED => 3,
            proto::MetricType::HISTOGRAM => 4,
        }),
        metric,
    }
}

/// A histogram family's native buckets, keyed by each metric's labels
/// (name, value) in the order the metric has them.
pub type Natives = BTreeMap<Vec<(String, String)>, Native>;

/// Encodes `families` length-delimited; a family named in `natives` gets
/// its metrics' native buckets from there.
pub fn encode(families: &[proto::MetricFamily], natives: &BTreeMap<&str, Natives>) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 * 1024);
    for family in families {
        let natives = natives.get(family.name());
        convert(family, natives)
            .encode_length_delimited(&mut out)
            .expect("a Vec grows as needed");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_accept_headers_are_recognized() {
        let prometheus_native = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        let prometheus_text = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert!(wanted(Some(prometheus_native)));
        assert!(!wanted(Some(prometheus_text)));
        assert!(!wanted(None));
        assert!(!wanted(Some("*/*")));
        assert!(!wanted(Some(
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text"
        )));
        assert!(!wanted(Some(
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0"
        )));
    }
}
