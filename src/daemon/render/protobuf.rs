//! The Prometheus protobuf exposition (`io.prometheus.client.MetricFamily`,
//! length-delimited), for scrapers that ask for it: the only format that
//! carries native histograms. Written straight from the registry's
//! families: the bytes of the messages without building them first (no
//! string copied per label, one scratch buffer per nesting level), so
//! that 512 CPUs' families encode in about the time their text does. The
//! message types (those of Prometheus' `metrics.proto`) are test support,
//! in `tests/common/protobuf.rs`, where `tests/protobuf.rs` decodes what
//! this writes and compares it with the families it came from.

/// The media type Prometheus asks for.
pub const CONTENT_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

pub use super::series::Natives;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use prometheus::proto;
use prost::encoding::{WireType, encoded_len_varint};

use super::series::Key;
use crate::daemon::state::NativeCounts;
use crate::daemon::state::native;
use crate::series::exemplars::{self, Exemplars};

/// A varint; most are one byte (tags, small counts and deltas).
#[inline]
fn encode_varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

#[inline]
fn key(tag: u32, wire: WireType, out: &mut Vec<u8>) {
    encode_varint((u64::from(tag) << 3) | wire as u64, out);
}

fn string(tag: u32, value: &str, out: &mut Vec<u8>) {
    key(tag, WireType::LengthDelimited, out);
    encode_varint(value.len() as u64, out);
    out.extend_from_slice(value.as_bytes());
}

fn double(tag: u32, value: f64, out: &mut Vec<u8>) {
    key(tag, WireType::SixtyFourBit, out);
    out.extend_from_slice(&value.to_le_bytes());
}

fn varint(tag: u32, value: u64, out: &mut Vec<u8>) {
    key(tag, WireType::Varint, out);
    encode_varint(value, out);
}

fn zigzag32(value: i32) -> u64 {
    u64::from(((value << 1) ^ (value >> 31)) as u32)
}

fn zigzag64(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

/// A nested message: its tag, its length, its bytes.
fn message(tag: u32, body: &[u8], out: &mut Vec<u8>) {
    key(tag, WireType::LengthDelimited, out);
    encode_varint(body.len() as u64, out);
    out.extend_from_slice(body);
}

/// A `LabelPair` (its length is known without writing it first).
fn label(tag: u32, name: &str, value: &str, out: &mut Vec<u8>) {
    let len = 2
        + encoded_len_varint(name.len() as u64)
        + name.len()
        + encoded_len_varint(value.len() as u64)
        + value.len();
    key(tag, WireType::LengthDelimited, out);
    encode_varint(len as u64, out);
    string(1, name, out);
    string(2, value, out);
}

/// A message of one double (`Gauge`, `Counter`, `Untyped`).
fn value_message(tag: u32, value: f64, out: &mut Vec<u8>) {
    key(tag, WireType::LengthDelimited, out);
    encode_varint(9, out);
    double(1, value, out);
}

fn exemplar(tag: u32, e: &exemplars::Exemplar, scratch: &mut Vec<u8>, out: &mut Vec<u8>) {
    scratch.clear();
    for (name, value) in &e.labels {
        label(1, name, value, scratch);
    }
    double(2, e.value, scratch);
    let (seconds, nanos) = (e.unix_ns / 1_000_000_000, e.unix_ns % 1_000_000_000);
    let time_len = 2 + encoded_len_varint(seconds) + encoded_len_varint(nanos);
    key(3, WireType::LengthDelimited, scratch);
    encode_varint(time_len as u64, scratch);
    varint(1, seconds, scratch);
    varint(2, nanos, scratch);
    message(tag, scratch, out);
}

/// Scratch buffers, one per nesting level, reused across metrics.
#[derive(Default)]
struct Scratch {
    family: Vec<u8>,
    metric: Vec<u8>,
    inner: Vec<u8>,
    bucket: Vec<u8>,
    exemplar: Vec<u8>,
    spans: Vec<(i32, u32)>,
    deltas: Vec<u8>,
}

fn histogram(
    m: &proto::Metric,
    native: Option<&NativeCounts>,
    list: Option<&Vec<exemplars::Exemplar>>,
    s: &mut Scratch,
) {
    let h = m.get_histogram();
    s.inner.clear();
    varint(1, h.get_sample_count(), &mut s.inner);
    double(2, h.get_sample_sum(), &mut s.inner);
    let chosen = list.map(|l| {
        exemplars::for_buckets(
            l,
            h.get_bucket().iter().map(|b| b.upper_bound()),
            native.is_some(),
        )
    });
    let chosen = |i: usize| chosen.as_ref().and_then(|c| c.get(i).copied().flatten());
    for (i, b) in h.get_bucket().iter().enumerate() {
        s.bucket.clear();
        varint(1, b.cumulative_count(), &mut s.bucket);
        double(2, b.upper_bound(), &mut s.bucket);
        if let Some(e) = chosen(i) {
            exemplar(3, e, &mut s.exemplar, &mut s.bucket);
        }
        message(3, &s.bucket, &mut s.inner);
    }
    // One above the last bound gets a +Inf bucket to carry it.
    if let Some(e) = chosen(h.get_bucket().len()) {
        s.bucket.clear();
        varint(1, h.get_sample_count(), &mut s.bucket);
        double(2, f64::INFINITY, &mut s.bucket);
        exemplar(3, e, &mut s.exemplar, &mut s.bucket);
        message(3, &s.bucket, &mut s.inner);
    }
    if let Some(n) = native {
        varint(5, zigzag32(native::SCHEMA), &mut s.inner);
        double(6, native::ZERO_THRESHOLD, &mut s.inner);
        varint(7, 0, &mut s.inner);
        // One pass over the counts: the spans, and the deltas written as
        // the packed field's bytes.
        s.spans.clear();
        s.deltas.clear();
        let (narrow, wide) = n.slices();
        let mut previous = None;
        let next = spans_and_deltas(
            n.offset(),
            narrow,
            &mut previous,
            &mut s.spans,
            &mut s.deltas,
        );
        spans_and_deltas(next, wide, &mut previous, &mut s.spans, &mut s.deltas);
        // An empty native histogram still says it is one.
        if s.spans.is_empty() {
            s.spans.push((0, 0));
        }
        for &(offset, length) in &s.spans {
            let offset = zigzag32(offset);
            let len = 2 + encoded_len_varint(offset) + encoded_len_varint(u64::from(length));
            key(12, WireType::LengthDelimited, &mut s.inner);
            encode_varint(len as u64, &mut s.inner);
            varint(1, offset, &mut s.inner);
            varint(2, u64::from(length), &mut s.inner);
        }
        if !s.deltas.is_empty() {
            message(13, &s.deltas, &mut s.inner);
        }
        for e in list.into_iter().flatten() {
            exemplar(16, e, &mut s.exemplar, &mut s.inner);
        }
    }
    message(7, &s.inner, &mut s.metric);
}

/// The native spans and the packed deltas' bytes of `counts`, buckets
/// `first..`, after those of `previous`; returns the next bucket index.
fn spans_and_deltas<T: Copy + Into<u64>>(
    first: i32,
    counts: &[T],
    previous: &mut Option<(i32, u64)>,
    spans: &mut Vec<(i32, u32)>,
    deltas: &mut Vec<u8>,
) -> i32 {
    let mut index = first;
    for &count in counts {
        let count: u64 = count.into();
        if count != 0 {
            match *previous {
                Some((p, _)) if index == p + 1 => {
                    spans.last_mut().expect("a span is open").1 += 1;
                }
                Some((p, _)) => spans.push((index - p - 1, 1)),
                None => spans.push((index, 1)),
            }
            let delta = count as i64 - previous.map_or(0, |(_, c)| c as i64);
            encode_varint(zigzag64(delta), deltas);
            *previous = Some((index, count));
        }
        index += 1;
    }
    index
}

fn summary(m: &proto::Metric, s: &mut Scratch) {
    let summary = m.get_summary();
    s.inner.clear();
    varint(1, summary.sample_count(), &mut s.inner);
    double(2, summary.sample_sum(), &mut s.inner);
    for q in summary.get_quantile() {
        key(3, WireType::LengthDelimited, &mut s.inner);
        encode_varint(18, &mut s.inner);
        double(1, q.quantile(), &mut s.inner);
        double(2, q.value(), &mut s.inner);
    }
    message(4, &s.inner, &mut s.metric);
}

fn metric_key(m: &proto::Metric) -> Key {
    m.get_label()
        .iter()
        .map(|l| (l.name().to_string(), l.value().to_string()))
        .collect()
}

/// Encodes `families` length-delimited; a family named in `natives` gets
/// its metrics' native buckets from there, one named in `examples` its
/// exemplars.
pub fn encode(
    families: &[proto::MetricFamily],
    natives: &BTreeMap<&str, Natives>,
    examples: &BTreeMap<&str, Exemplars>,
) -> Vec<u8> {
    // Sized by the previous answer (plus room to grow), so that a large
    // host's megabyte is not copied over and over as it grows.
    let hint = LAST_SIZE.load(Ordering::Relaxed);
    let mut out = Vec::with_capacity((hint + hint / 8).max(64 * 1024));
    let mut s = Scratch::default();
    for family in families {
        let kind = family.get_field_type();
        let natives = natives.get(family.name());
        let examples = examples.get(family.name());
        s.family.clear();
        string(1, family.name(), &mut s.family);
        string(2, family.help(), &mut s.family);
        #[allow(deprecated)]
        let type_number = match kind {
            proto::MetricType::COUNTER => 0,
            proto::MetricType::GAUGE => 1,
            proto::MetricType::SUMMARY => 2,
            proto::MetricType::UNTYPED => 3,
            proto::MetricType::HISTOGRAM => 4,
        };
        varint(3, type_number, &mut s.family);
        for m in family.get_metric() {
            s.metric.clear();
            for l in m.get_label() {
                label(1, l.name(), l.value(), &mut s.metric);
            }
            #[allow(deprecated)]
            match kind {
                proto::MetricType::COUNTER => {
                    value_message(3, m.get_counter().get_value(), &mut s.metric)
                }
                proto::MetricType::GAUGE => {
                    value_message(2, m.get_gauge().get_value(), &mut s.metric)
                }
                proto::MetricType::UNTYPED => {
                    value_message(5, m.get_untyped().get_value(), &mut s.metric)
                }
                proto::MetricType::SUMMARY => summary(m, &mut s),
                proto::MetricType::HISTOGRAM => {
                    let (native, list) = if natives.is_some() || examples.is_some() {
                        let k = metric_key(m);
                        (
                            natives.and_then(|n| n.get(&k)),
                            examples.and_then(|e| e.get(&k)),
                        )
                    } else {
                        (None, None)
                    };
                    histogram(m, native, list, &mut s);
                }
            }
            if m.timestamp_ms() != 0 {
                varint(6, m.timestamp_ms() as u64, &mut s.metric);
            }
            message(4, &s.metric, &mut s.family);
        }
        encode_varint(s.family.len() as u64, &mut out);
        out.extend_from_slice(&s.family);
    }
    LAST_SIZE.store(out.len(), Ordering::Relaxed);
    out
}

/// The size of the latest answer.
static LAST_SIZE: AtomicUsize = AtomicUsize::new(0);
