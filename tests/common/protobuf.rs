//! The messages of Prometheus' `metrics.proto` (the fields latencyd
//! uses), written with prost's derive: what a scraper decodes from the
//! protobuf exposition.

use prost::Message;

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

/// `google.protobuf.Timestamp`.
#[derive(Clone, PartialEq, Message)]
pub struct Timestamp {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

#[derive(Clone, PartialEq, Message)]
pub struct Exemplar {
    #[prost(message, repeated, tag = "1")]
    pub label: Vec<LabelPair>,
    #[prost(double, optional, tag = "2")]
    pub value: Option<f64>,
    #[prost(message, optional, tag = "3")]
    pub timestamp: Option<Timestamp>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Bucket {
    #[prost(uint64, optional, tag = "1")]
    pub cumulative_count: Option<u64>,
    #[prost(double, optional, tag = "2")]
    pub upper_bound: Option<f64>,
    #[prost(message, optional, tag = "3")]
    pub exemplar: Option<Exemplar>,
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
    /// A native histogram's exemplars (each with its timestamp).
    #[prost(message, repeated, tag = "16")]
    pub exemplars: Vec<Exemplar>,
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
