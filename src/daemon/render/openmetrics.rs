//! The OpenMetrics 1.0 text exposition, for scrapers that ask for it
//! (`Accept: application/openmetrics-text`, what Prometheus asks for
//! first by default): the text format that carries exemplars. The same
//! families as the Prometheus text format, with OpenMetrics' rules:
//! a counter's family is named without `_total` and its sample with it,
//! every histogram has its `+Inf` bucket, the exposition ends in
//! `# EOF`. A scraper that does not ask for it gets the Prometheus text
//! format, unchanged.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use prometheus::proto::{LabelPair, Metric, MetricFamily, MetricType};

use super::series::Key;
use crate::series::exemplars::{self, Exemplars};

/// The media type served.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// `text` with OpenMetrics' escapes (backslash, double quote, newline).
fn escaped(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn number(value: f64, out: &mut String) {
    if value.is_nan() {
        out.push_str("NaN");
    } else if value == f64::INFINITY {
        out.push_str("+Inf");
    } else if value == f64::NEG_INFINITY {
        out.push_str("-Inf");
    } else {
        let _ = write!(out, "{value}");
    }
}

/// `{a="1",b="2"}` of `labels` and `extra`, or nothing when both are
/// empty.
fn label_set(labels: &[LabelPair], extra: Option<(&str, &str)>, out: &mut String) {
    if labels.is_empty() && extra.is_none() {
        return;
    }
    out.push('{');
    let mut first = true;
    let pairs = labels.iter().map(|l| (l.name(), l.value())).chain(extra);
    for (name, value) in pairs {
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(name);
        out.push_str("=\"");
        escaped(value, out);
        out.push('"');
    }
    out.push('}');
}

fn sample(
    name: &str,
    suffix: &str,
    m: &Metric,
    extra: Option<(&str, &str)>,
    value: f64,
    out: &mut String,
) {
    out.push_str(name);
    out.push_str(suffix);
    label_set(m.get_label(), extra, out);
    out.push(' ');
    number(value, out);
}

fn end(m: &Metric, out: &mut String) {
    if m.timestamp_ms() != 0 {
        let ms = m.timestamp_ms();
        let _ = write!(out, " {}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000));
    }
    out.push('\n');
}

fn exemplar(e: &exemplars::Exemplar, out: &mut String) {
    out.push_str(" # {");
    for (i, (name, value)) in e.labels.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(name);
        out.push_str("=\"");
        escaped(value, out);
        out.push('"');
    }
    out.push_str("} ");
    number(e.value, out);
    let _ = write!(
        out,
        " {}.{:09}",
        e.unix_ns / 1_000_000_000,
        e.unix_ns % 1_000_000_000
    );
}

fn key(m: &Metric) -> Key {
    m.get_label()
        .iter()
        .map(|l| (l.name().to_string(), l.value().to_string()))
        .collect()
}

fn histogram(name: &str, m: &Metric, examples: Option<&Exemplars>, out: &mut String) {
    let h = m.get_histogram();
    let list = examples.and_then(|e| e.get(&key(m)));
    let mut bound_text = String::new();
    let mut buckets: Vec<(f64, u64)> = h
        .get_bucket()
        .iter()
        .map(|b| (b.upper_bound(), b.cumulative_count()))
        .collect();
    if buckets.last().is_none_or(|b| b.0 != f64::INFINITY) {
        buckets.push((f64::INFINITY, h.get_sample_count()));
    }
    let chosen = list.map(|l| exemplars::for_buckets(l, buckets.iter().map(|b| b.0), false));
    for (i, (upper, count)) in buckets.into_iter().enumerate() {
        bound_text.clear();
        number(upper, &mut bound_text);
        sample(
            name,
            "_bucket",
            m,
            Some(("le", &bound_text)),
            count as f64,
            out,
        );
        if let Some(e) = chosen.as_ref().and_then(|c| c.get(i).copied().flatten()) {
            exemplar(e, out);
        }
        end(m, out);
    }
    sample(name, "_count", m, None, h.get_sample_count() as f64, out);
    end(m, out);
    sample(name, "_sum", m, None, h.get_sample_sum(), out);
    end(m, out);
}

/// Renders `families`; a histogram family named in `examples` gets its
/// series' exemplars from there.
pub fn encode(families: &[MetricFamily], examples: &BTreeMap<&str, Exemplars>) -> String {
    let mut out = String::with_capacity(64 * 1024);
    for family in families {
        let kind = family.get_field_type();
        let full = family.name();
        let name = match kind {
            MetricType::COUNTER => full.strip_suffix("_total").unwrap_or(full),
            _ => full,
        };
        out.push_str("# HELP ");
        out.push_str(name);
        out.push(' ');
        escaped(family.help(), &mut out);
        out.push_str("\n# TYPE ");
        out.push_str(name);
        #[allow(deprecated)]
        out.push_str(match kind {
            MetricType::COUNTER => " counter\n",
            MetricType::GAUGE => " gauge\n",
            MetricType::SUMMARY => " summary\n",
            MetricType::HISTOGRAM => " histogram\n",
            MetricType::UNTYPED => " unknown\n",
        });
        for m in family.get_metric() {
            #[allow(deprecated)]
            match kind {
                MetricType::COUNTER => {
                    sample(
                        name,
                        "_total",
                        m,
                        None,
                        m.get_counter().get_value(),
                        &mut out,
                    );
                    end(m, &mut out);
                }
                MetricType::GAUGE => {
                    sample(name, "", m, None, m.get_gauge().get_value(), &mut out);
                    end(m, &mut out);
                }
                MetricType::UNTYPED => {
                    sample(name, "", m, None, m.get_untyped().get_value(), &mut out);
                    end(m, &mut out);
                }
                MetricType::SUMMARY => {
                    let s = m.get_summary();
                    let mut q = String::new();
                    for quantile in s.get_quantile() {
                        q.clear();
                        number(quantile.quantile(), &mut q);
                        sample(
                            name,
                            "",
                            m,
                            Some(("quantile", &q)),
                            quantile.value(),
                            &mut out,
                        );
                        end(m, &mut out);
                    }
                    sample(name, "_count", m, None, s.sample_count() as f64, &mut out);
                    end(m, &mut out);
                    sample(name, "_sum", m, None, s.sample_sum(), &mut out);
                    end(m, &mut out);
                }
                MetricType::HISTOGRAM => histogram(name, m, examples.get(full), &mut out),
            }
        }
    }
    out.push_str("# EOF\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::render::metric::{counter, gauge, label};

    #[test]
    fn counters_lose_total_in_the_family_name_and_escapes_are_openmetrics() {
        let mut c = MetricFamily::default();
        c.set_name("latencyd_spikes_total".to_string());
        c.set_help("Say \"hi\"\\\nbye".to_string());
        c.set_field_type(MetricType::COUNTER);
        c.set_metric(vec![counter(vec![label("cpu", "a\"b\\c\nd")], 3.0)]);
        let mut g = MetricFamily::default();
        g.set_name("latencyd_up".to_string());
        g.set_help("Up.".to_string());
        g.set_field_type(MetricType::GAUGE);
        g.set_metric(vec![gauge(vec![], f64::INFINITY)]);
        let text = encode(&[c, g], &BTreeMap::new());
        assert_eq!(
            text,
            "# HELP latencyd_spikes Say \\\"hi\\\"\\\\\\nbye\n\
             # TYPE latencyd_spikes counter\n\
             latencyd_spikes_total{cpu=\"a\\\"b\\\\c\\nd\"} 3\n\
             # HELP latencyd_up Up.\n# TYPE latencyd_up gauge\nlatencyd_up +Inf\n# EOF\n"
        );
    }
}
