//! The protobuf exposition decoded as a scraper decodes it: what `wire`
//! writes straight from the registry's families must be, in meaning, the
//! messages built one by one from the same families.

mod common;

use common::protobuf::*;
use latencyd::daemon::render::protobuf::{Natives, encode};
use latencyd::daemon::state::{NativeCounts, native};
use latencyd::series::exemplars::{self, Exemplars};
use prometheus::proto;
use prost::Message;
use std::collections::BTreeMap;

// The messages built one by one, as the exposition was first written
// with prost: what `protobuf::encode` must match byte for byte in meaning.
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

fn exemplar(e: &exemplars::Exemplar) -> Exemplar {
    Exemplar {
        label: e
            .labels
            .iter()
            .map(|(name, value)| LabelPair {
                name: Some(name.to_string()),
                value: Some(value.clone()),
            })
            .collect(),
        value: Some(e.value),
        timestamp: Some(Timestamp {
            seconds: (e.unix_ns / 1_000_000_000) as i64,
            nanos: (e.unix_ns % 1_000_000_000) as i32,
        }),
    }
}

/// Each classic bucket gets the newest exemplar of its range; one above
/// the last bound gets a `+Inf` bucket to carry it.
fn attach(histogram: &mut Histogram, list: &[exemplars::Exemplar], native: bool) {
    let bounds: Vec<f64> = histogram
        .bucket
        .iter()
        .map(|b| b.upper_bound.unwrap())
        .collect();
    let chosen = exemplars::for_buckets(list, bounds.into_iter(), native);
    for (bucket, e) in histogram.bucket.iter_mut().zip(&chosen) {
        bucket.exemplar = e.map(exemplar);
    }
    if let Some(Some(e)) = chosen.get(histogram.bucket.len()) {
        histogram.bucket.push(Bucket {
            cumulative_count: histogram.sample_count,
            upper_bound: Some(f64::INFINITY),
            exemplar: Some(exemplar(e)),
        });
    }
}

fn convert(
    family: &proto::MetricFamily,
    native: Option<&Natives>,
    examples: Option<&Exemplars>,
) -> MetricFamily {
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
                                exemplar: None,
                            })
                            .collect(),
                        ..Histogram::default()
                    };
                    let key: Vec<(String, String)> = m
                        .get_label()
                        .iter()
                        .map(|l| (l.name().to_string(), l.value().to_string()))
                        .collect();
                    let list = examples.and_then(|e| e.get(&key));
                    if let Some(list) = list {
                        let native = native.is_some_and(|n| n.contains_key(&key));
                        attach(&mut histogram, list, native);
                    }
                    if let Some(n) = native.and_then(|natives| natives.get(&key)) {
                        let n = n.native();
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
                        histogram.exemplars = list.into_iter().flatten().map(exemplar).collect();
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

fn reference(
    families: &[proto::MetricFamily],
    natives: &BTreeMap<&str, Natives>,
    examples: &BTreeMap<&str, Exemplars>,
) -> Vec<MetricFamily> {
    families
        .iter()
        .map(|f| convert(f, natives.get(f.name()), examples.get(f.name())))
        .collect()
}

fn decode_all(mut bytes: &[u8]) -> Vec<MetricFamily> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        out.push(MetricFamily::decode_length_delimited(&mut bytes).unwrap());
    }
    out
}

#[test]
fn the_wire_encoding_decodes_to_the_reference_messages() {
    use latencyd::daemon::render::metric::{counter, gauge, histogram, label};
    use latencyd::daemon::state::BucketCounts;
    use latencyd::stats::LatencyStats;
    let mut stats = LatencyStats::new(u64::MAX, None);
    for (i, v) in [2_000u64, 2_001, 9_000, 40_000, 7_000_000]
        .iter()
        .enumerate()
    {
        stats.record(*v, i as u64);
    }
    let mut buckets = BucketCounts::new(&[5_000, 10_000, 1_000_000]);
    buckets.add(&stats);
    let mut counts = NativeCounts::default();
    counts.add(&stats);
    assert_eq!(counts.native(), native::of(&stats));
    let family = |name: &str, kind, metrics| {
        let mut f = proto::MetricFamily::default();
        f.set_name(name.to_string());
        f.set_help(format!("{name} help"));
        f.set_field_type(kind);
        f.set_metric(metrics);
        f
    };
    let mut timed = gauge(vec![], -1.5);
    timed.set_timestamp_ms(1_700_000_000_123);
    let families = vec![
        family(
            "h",
            proto::MetricType::HISTOGRAM,
            vec![
                histogram(vec![label("cpu", "0")], &buckets, stats.count, stats.sum_ns),
                histogram(vec![label("cpu", "1")], &buckets, stats.count, stats.sum_ns),
            ],
        ),
        family(
            "c_total",
            proto::MetricType::COUNTER,
            vec![counter(vec![label("a", "é\"")], 3.0)],
        ),
        family("g", proto::MetricType::GAUGE, vec![timed]),
    ];
    let key = |cpu: &str| vec![("cpu".to_string(), cpu.to_string())];
    let natives: BTreeMap<&str, Natives> = [(
        "h",
        [(key("0"), counts), (key("1"), NativeCounts::default())]
            .into_iter()
            .collect(),
    )]
    .into_iter()
    .collect();
    let example = |value: f64, unix_ns: u64, id: &str| exemplars::Exemplar {
        labels: vec![("capture", id.to_string()), ("cpu", "0".to_string())],
        value,
        unix_ns,
        counted_at: value,
    };
    let examples: BTreeMap<&str, Exemplars> = [(
        "h",
        [(
            key("0"),
            vec![
                example(0.000009, 1_700_000_000_000_000_001, "1700000000000-cpu0"),
                example(0.007, 1_700_000_001_000_000_000, "1700000001000-cpu0"),
            ],
        )]
        .into_iter()
        .collect(),
    )]
    .into_iter()
    .collect();
    let decoded = decode_all(&encode(&families, &natives, &examples));
    assert_eq!(decoded, reference(&families, &natives, &examples));
    // The exemplar above every bound rides on a +Inf bucket; the
    // native histogram carries both.
    let h = decoded[0].metric[0].histogram.as_ref().unwrap();
    let last = h.bucket.last().unwrap();
    assert_eq!(last.upper_bound, Some(f64::INFINITY));
    assert_eq!(last.cumulative_count, Some(5));
    assert_eq!(h.exemplars.len(), 2);
    assert_eq!(last.exemplar.as_ref().unwrap().value, Some(0.007));
    assert!(
        h.bucket[1].exemplar.is_none(),
        "with native buckets, no bucket below holds an older exemplar"
    );
    let empty = decoded[0].metric[1].histogram.as_ref().unwrap();
    assert_eq!(
        empty.positive_span.len(),
        1,
        "an empty native histogram says it is one"
    );
    assert!(empty.exemplars.is_empty());
}
