//! One metric in Prometheus' data model (`prometheus::proto`): a label, a
//! gauge, a counter, a histogram from cumulative bucket counts. Latencies
//! in seconds.

use prometheus::proto::{Bucket, Counter, Gauge, Histogram, LabelPair, Metric};

use crate::units::NS_PER_SEC;

const NS: f64 = NS_PER_SEC as f64;

pub fn label(name: &str, value: &str) -> LabelPair {
    let mut pair = LabelPair::default();
    pair.set_name(name.to_string());
    pair.set_value(value.to_string());
    pair
}

pub fn gauge(labels: Vec<LabelPair>, value: f64) -> Metric {
    let mut g = Gauge::default();
    g.set_value(value);
    let mut m = Metric::default();
    m.set_label(labels);
    m.set_gauge(g);
    m
}

/// A part's `_available` gauge: 1 running, 0 enabled but unavailable,
/// absent when disabled.
pub fn availability(enabled: bool, available: bool) -> Vec<Metric> {
    if !enabled {
        return vec![];
    }
    vec![gauge(vec![], f64::from(u8::from(available)))]
}

pub fn counter(labels: Vec<LabelPair>, value: f64) -> Metric {
    let mut c = Counter::default();
    c.set_value(value);
    let mut m = Metric::default();
    m.set_label(labels);
    m.set_counter(c);
    m
}

/// A histogram of `count` samples summing to `sum_ns`, whose cumulative
/// counts at the upper bounds `bounds_ns` are `cumulative`.
pub fn histogram(
    labels: Vec<LabelPair>,
    bounds_ns: &[u64],
    cumulative: impl Iterator<Item = u64>,
    count: u64,
    sum_ns: u128,
) -> Metric {
    let mut h = Histogram::default();
    h.set_sample_count(count);
    h.set_sample_sum(sum_ns as f64 / NS);
    h.set_bucket(
        bounds_ns
            .iter()
            .zip(cumulative)
            .map(|(&bound, cumulative)| {
                let mut b = Bucket::default();
                b.set_upper_bound(bound as f64 / NS);
                b.set_cumulative_count(cumulative);
                b
            })
            .collect(),
    );
    let mut m = Metric::default();
    m.set_label(labels);
    m.set_histogram(h);
    m
}
