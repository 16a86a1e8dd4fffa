//! The record split by the host's configuration: `report
//! --by-fingerprint` cuts it into epochs (runs of intervals measured under
//! one fingerprint) and says, per epoch, which facts differ from the
//! epoch before and how the latency was; `report --compare A B` puts two
//! time ranges side by side (A/B across a kernel upgrade), with the facts
//! that differ between them.
//!
//! The numbers are all selected CPUs together (the worst CPU named):
//! min, avg, max and counts exact, quantiles within 1/128.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;

use crate::calendar::format_rfc3339_ms;
use crate::cpulist::format_cpu_list;
use crate::host::json::{FactJson, facts_json};
use crate::host::{Fact, FactChange, Fingerprint};
use crate::record::reader::{self, Range};
use crate::record::{Entry, ReadReport, Summary};
use crate::stats::{LatencyStats, P50, P99, P999, P9999, for_each_bin_us};
use crate::units::NS_PER_US;

/// What an interval without an identifier (a record written before
/// latencyd recorded the host's facts) is filed under.
pub const UNKNOWN: &str = "unknown";

/// A run of intervals measured under one fingerprint, or one range.
pub struct Part {
    pub fingerprint: String,
    pub summary: Summary,
    /// The facts, where the record has them.
    pub facts: Option<Fingerprint>,
}

impl Part {
    fn new(fingerprint: &str) -> Part {
        Part {
            fingerprint: fingerprint.to_string(),
            summary: Summary::default(),
            facts: None,
        }
    }

    /// A range's summary, filed under the fingerprint of its last
    /// interval, with those facts where the record has them.
    fn of(summary: Summary, report: &ReadReport) -> Part {
        let fingerprint = summary.fingerprint.clone().unwrap_or(UNKNOWN.to_string());
        Part {
            facts: report.host(&fingerprint).map(|h| h.fingerprint.clone()),
            fingerprint,
            summary,
        }
    }

    /// All CPUs together, and the CPU with the worst wake-up.
    fn combined(&self) -> (LatencyStats, Option<usize>) {
        let worst = self
            .summary
            .cpus
            .iter()
            .max_by_key(|(_, s)| s.max_ns)
            .map(|(cpu, _)| *cpu);
        (self.summary.combined(), worst)
    }
}

/// The record's intervals in `range`, cut where the fingerprint changes.
pub fn by_fingerprint(
    files: &[PathBuf],
    range: Range,
    cpus: Option<&[usize]>,
) -> Result<(Vec<Part>, ReadReport), String> {
    let mut parts: Vec<Part> = Vec::new();
    let report = reader::read(files, range, |entry: Entry| {
        if cpus.is_some_and(|c| !c.contains(&entry.cpu)) {
            return;
        }
        let id = entry.fingerprint.as_deref().unwrap_or(UNKNOWN);
        if parts.last().is_none_or(|p| p.fingerprint != id) {
            parts.push(Part::new(id));
        }
        parts.last_mut().expect("pushed above").summary.add(&entry);
    })?;
    for part in &mut parts {
        part.facts = report
            .host(&part.fingerprint)
            .map(|h| h.fingerprint.clone());
    }
    Ok((parts, report))
}

/// The record's intervals in `range` in two parts, measured with no load
/// running and under a load, each filed under the fingerprint of its last
/// interval; with the load profiles seen (`+`-joined).
pub fn by_load(
    files: &[PathBuf],
    range: Range,
    cpus: Option<&[usize]>,
) -> Result<(Part, Part, String, ReadReport), String> {
    let (idle, loaded, profiles, report) =
        crate::record::summary::summarize_by_load(files, range, cpus)?;
    let (idle, loaded) = (Part::of(idle, &report), Part::of(loaded, &report));
    Ok((idle, loaded, profiles.join("+"), report))
}

/// One range of the record, whatever its fingerprints (the last one's
/// facts kept).
pub fn range_part(
    files: &[PathBuf],
    range: Range,
    cpus: Option<&[usize]>,
) -> Result<(Part, ReadReport), String> {
    let (summary, report) = crate::record::summarize(files, range, cpus)?;
    Ok((Part::of(summary, &report), report))
}

/// The facts that differ from `before` to `after`; `None` when either
/// side's facts are not in the record.
fn changed(before: &Part, after: &Part) -> Option<Vec<FactChange>> {
    Some(after.facts.as_ref()?.changes_since(before.facts.as_ref()?))
}

fn us(ns: u64) -> String {
    if ns.is_multiple_of(NS_PER_US) {
        (ns / NS_PER_US).to_string()
    } else {
        format!("{:.1}", ns as f64 / NS_PER_US as f64)
    }
}

fn span(part: &Part) -> (u64, u64) {
    part.summary.span_ns.unwrap_or((0, 0))
}

/// The epochs as text: one block each.
pub fn epochs_text(parts: &[Part], report: &ReadReport) -> String {
    let mut out = String::new();
    let (from, to) = (span(&parts[0]).0, span(&parts[parts.len() - 1]).1);
    let _ = writeln!(
        out,
        "# latencyd record by host fingerprint: {} epoch(s), {} to {}, {} interval(s) from {} \
         file(s)",
        parts.len(),
        format_rfc3339_ms(from),
        format_rfc3339_ms(to),
        report.entries,
        report.files
    );
    for (i, part) in parts.iter().enumerate() {
        let (from, to) = span(part);
        let cpus: Vec<usize> = part.summary.cpus.keys().copied().collect();
        let _ = writeln!(
            out,
            "\nepoch {}: fingerprint {}, {} to {}, CPUs {}",
            i + 1,
            part.fingerprint,
            format_rfc3339_ms(from),
            format_rfc3339_ms(to),
            format_cpu_list(&cpus)
        );
        if i == 0 {
            match &part.facts {
                Some(facts) => {
                    for name in ["kernel.release", "kernel.preempt", "kernel.cmdline"] {
                        if let Some(fact) = facts.get(name) {
                            let _ = writeln!(out, "  {name}: {}", fact.describe());
                        }
                    }
                }
                None => out.push_str("  (the record has no facts for it)\n"),
            }
        } else {
            match changed(&parts[i - 1], part) {
                Some(changes) if changes.is_empty() => {
                    out.push_str("  changed: nothing the record can tell\n");
                }
                Some(changes) => {
                    for change in changes {
                        let _ = writeln!(out, "  changed: {}", change.describe());
                    }
                }
                None => out.push_str("  changed: unknown (the record has no facts for it)\n"),
            }
        }
        let (all, worst) = part.combined();
        let _ = writeln!(
            out,
            "  samples {}  min {} us  avg {:.2} us  p99 {} us  p99.99 {} us  max {} us{}",
            all.count,
            us(all.min_ns()),
            all.avg_ns() / NS_PER_US as f64,
            us(all.quantile_ns(P99)),
            us(all.quantile_ns(P9999)),
            us(all.max_ns),
            worst.map_or(String::new(), |c| format!(" (CPU {c})")),
        );
    }
    if let Some(warning) = report.warning() {
        let _ = writeln!(out, "\n# Skipped: {warning}");
    }
    out
}

/// One epoch or range, as JSON.
#[derive(Serialize)]
struct JsonPart {
    fingerprint: String,
    from: String,
    to: String,
    cpus: String,
    samples: u64,
    min_ns: u64,
    avg_ns: f64,
    p50_ns: u64,
    p99_ns: u64,
    p999_ns: u64,
    p9999_ns: u64,
    max_ns: u64,
    max_cpu: Option<usize>,
    missed: u64,
    /// The facts of this part, where the record has them
    /// (`{"value": …}` or `{"absent": why}`).
    facts: Option<BTreeMap<String, FactJson>>,
    /// Facts that differ from the part before (epochs) or from A
    /// (`--compare`'s B); `null` when either side's facts are unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    changed: Option<Option<BTreeMap<String, JsonChange>>>,
    /// 1 µs bins of all the CPUs together (`--compare` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    histogram_us: Option<BTreeMap<u64, u64>>,
}

#[derive(Serialize)]
struct JsonChange {
    from: Option<String>,
    to: Option<String>,
}

fn json_part(part: &Part, before: Option<&Part>, histogram: bool) -> JsonPart {
    let (all, worst) = part.combined();
    let (from, to) = span(part);
    let cpus: Vec<usize> = part.summary.cpus.keys().copied().collect();
    JsonPart {
        fingerprint: part.fingerprint.clone(),
        from: format_rfc3339_ms(from),
        to: format_rfc3339_ms(to),
        cpus: format_cpu_list(&cpus),
        samples: all.count,
        min_ns: all.min_ns(),
        avg_ns: (all.avg_ns() * 10.0).round() / 10.0,
        p50_ns: all.quantile_ns(P50),
        p99_ns: all.quantile_ns(P99),
        p999_ns: all.quantile_ns(P999),
        p9999_ns: all.quantile_ns(P9999),
        max_ns: all.max_ns,
        max_cpu: worst,
        missed: all.missed,
        facts: part.facts.as_ref().map(facts_json),
        changed: before.map(|b| {
            changed(b, part).map(|changes| {
                changes
                    .into_iter()
                    .map(|c| {
                        let side = |f: Option<Fact>| f.and_then(|f| f.value().map(String::from));
                        (
                            c.name,
                            JsonChange {
                                from: side(c.from),
                                to: side(c.to),
                            },
                        )
                    })
                    .collect()
            })
        }),
        histogram_us: histogram.then(|| {
            let mut bins = BTreeMap::new();
            for_each_bin_us(&all, |us, count| *bins.entry(us).or_insert(0) += count);
            bins
        }),
    }
}

#[derive(Serialize)]
struct JsonEpochs {
    intervals: u64,
    files: usize,
    warning: Option<String>,
    epochs: Vec<JsonPart>,
}

pub fn epochs_json(parts: &[Part], report: &ReadReport) -> String {
    let doc = JsonEpochs {
        intervals: report.entries,
        files: report.files,
        warning: report.warning(),
        epochs: parts
            .iter()
            .enumerate()
            .map(|(i, p)| json_part(p, i.checked_sub(1).map(|j| &parts[j]), false))
            .collect(),
    };
    serde_json::to_string_pretty(&doc).expect("the JSON DTOs always serialize") + "\n"
}

/// Upper edges of the distribution table, in µs: a 1-2-5 series.
const TABLE_EDGES_US: [u64; 13] = [
    2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000,
];

/// Two ranges side by side, as text: the statistics with B/A, the share
/// of samples in each band of a 1-2-5 series, the facts that differ.
pub fn compare_text(a: &Part, b: &Part, labels: [&str; 2]) -> String {
    let mut out = String::new();
    let (sa, _) = a.combined();
    let (sb, _) = b.combined();
    for (name, part, label) in [("A", a, labels[0]), ("B", b, labels[1])] {
        let (from, to) = span(part);
        let _ = writeln!(
            out,
            "# {name} ({label}): {} to {}, fingerprint {}, CPUs {}",
            format_rfc3339_ms(from),
            format_rfc3339_ms(to),
            part.fingerprint,
            format_cpu_list(&part.summary.cpus.keys().copied().collect::<Vec<_>>())
        );
    }
    let _ = writeln!(out, "{:<10} {:>14} {:>14} {:>8}", "", "A", "B", "B/A");
    let row = |out: &mut String, name: &str, x: f64, y: f64, unit: &str| {
        let ratio = if x > 0.0 {
            format!("{:.2}", y / x)
        } else {
            "-".to_string()
        };
        let _ = writeln!(
            out,
            "{name:<10} {:>11.1} {unit} {:>11.1} {unit} {ratio:>8}",
            x, y
        );
    };
    let _ = writeln!(out, "{:<10} {:>14} {:>14}", "samples", sa.count, sb.count);
    let q = |s: &LatencyStats, ppm| s.quantile_ns(ppm) as f64 / NS_PER_US as f64;
    row(
        &mut out,
        "min",
        sa.min_ns() as f64 / 1e3,
        sb.min_ns() as f64 / 1e3,
        "us",
    );
    row(&mut out, "avg", sa.avg_ns() / 1e3, sb.avg_ns() / 1e3, "us");
    row(&mut out, "p50", q(&sa, P50), q(&sb, P50), "us");
    row(&mut out, "p99", q(&sa, P99), q(&sb, P99), "us");
    row(&mut out, "p99.9", q(&sa, P999), q(&sb, P999), "us");
    row(&mut out, "p99.99", q(&sa, P9999), q(&sb, P9999), "us");
    row(
        &mut out,
        "max",
        sa.max_ns as f64 / 1e3,
        sb.max_ns as f64 / 1e3,
        "us",
    );
    bands_text(&mut out, &sa, &sb);
    facts_text(&mut out, a, b);
    out
}

/// The share of each range's samples in each band of `TABLE_EDGES_US`,
/// bands that neither has left out.
fn bands_text(out: &mut String, sa: &LatencyStats, sb: &LatencyStats) {
    out.push_str("# share of samples by latency (us)\n");
    let bands = |s: &LatencyStats| {
        let mut counts = vec![0u64; TABLE_EDGES_US.len() + 1];
        for_each_bin_us(s, |us, n| {
            let band = TABLE_EDGES_US
                .iter()
                .position(|&e| us < e)
                .unwrap_or(TABLE_EDGES_US.len());
            counts[band] += n;
        });
        counts
    };
    let (ba, bb) = (bands(sa), bands(sb));
    let share = |n: u64, total: u64| {
        if total == 0 {
            0.0
        } else {
            100.0 * n as f64 / total as f64
        }
    };
    let mut low = 0;
    for (i, (&na, &nb)) in ba.iter().zip(&bb).enumerate() {
        if na == 0 && nb == 0 {
            low = TABLE_EDGES_US.get(i).copied().unwrap_or(low);
            continue;
        }
        let band = match TABLE_EDGES_US.get(i) {
            Some(high) => format!("{low}-{high}"),
            None => format!(">= {low}"),
        };
        let _ = writeln!(
            out,
            "{band:<10} {:>13.4}% {:>13.4}%",
            share(na, sa.count),
            share(nb, sb.count)
        );
        low = TABLE_EDGES_US.get(i).copied().unwrap_or(low);
    }
}

/// The host's facts that differ from A to B, or that the record cannot
/// tell.
fn facts_text(out: &mut String, a: &Part, b: &Part) {
    match changed(a, b) {
        Some(changes) if changes.is_empty() => {
            out.push_str("# the host's facts are the same in A and B\n");
        }
        Some(changes) => {
            out.push_str("# facts that differ from A to B\n");
            for change in changes {
                let _ = writeln!(out, "changed: {}", change.describe());
            }
        }
        None => {
            out.push_str("# the record has no host facts for A or B: what differs is unknown\n")
        }
    }
}

#[derive(Serialize)]
struct JsonCompare<'a> {
    a_range: &'a str,
    b_range: &'a str,
    a: JsonPart,
    b: JsonPart,
}

pub fn compare_json(a: &Part, b: &Part, labels: [&str; 2]) -> String {
    let doc = JsonCompare {
        a_range: labels[0],
        b_range: labels[1],
        a: json_part(a, None, true),
        b: json_part(b, Some(a), true),
    };
    serde_json::to_string_pretty(&doc).expect("the JSON DTOs always serialize") + "\n"
}

/// The two ranges' distributions, all CPUs together, overlaid.
pub fn compare_plot(a: &Part, b: &Part, labels: [&str; 2]) -> crate::plot::PlotData {
    let (sa, _) = a.combined();
    let (sb, _) = b.combined();
    crate::plot::PlotData {
        title: "Latency: A against B".to_string(),
        subtitle: format!(
            "A {} ({}), B {} ({})",
            labels[0], a.fingerprint, labels[1], b.fingerprint
        ),
        series: vec![
            crate::plot::series_from_stats(format!("A {}", labels[0]), &sa),
            crate::plot::series_from_stats(format!("B {}", labels[1]), &sb),
        ],
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::record::writer::{Batch, LogWriter, Settings, Target};
    use crate::units::NS_PER_SEC;

    fn facts(states: &str) -> Arc<Fingerprint> {
        let mut fp = Fingerprint::default();
        fp.insert("kernel.release", Fact::known("6.12.0"));
        fp.insert("cpuidle.states[cpu1]", Fact::known(states));
        Arc::new(fp)
    }

    /// Ten 1 s intervals of CPUs 0 and 1: 2-3 under one configuration,
    /// 4-7 under another (with a 500 µs wake-up), 8-11 back.
    fn record(dir: &std::path::Path) -> Vec<PathBuf> {
        let mut writer = LogWriter::new(Target::Dir(Settings {
            dir: dir.to_path_buf(),
            interval_ns: NS_PER_SEC,
            retention_ns: 1 << 62,
            max_bytes: 1 << 30,
        }));
        let (deep, shallow) = (facts("POLL 0us, C1 2us, C6 100us"), facts("POLL 0us"));
        for s in 2..12u64 {
            let fp = if (4..8).contains(&s) { &shallow } else { &deep };
            let entries = (0..2)
                .map(|cpu| {
                    let mut stats = LatencyStats::new(100_000, None);
                    for i in 0..100 {
                        stats.record(10_000 + i * 10, i);
                    }
                    if s == 5 && cpu == 1 {
                        stats.record(500_000, 100);
                    }
                    Entry {
                        cpu,
                        start_ns: s * NS_PER_SEC,
                        length_ns: NS_PER_SEC,
                        stats,
                        fingerprint: Some(fp.id()),
                        load: None,
                        hwnoise: false,
                        timerlat: None,
                    }
                })
                .collect();
            let batch = Batch {
                gaps: Vec::new(),
                hwnoise: Vec::new(),
                entries,
                fingerprint: Some(Arc::clone(fp)),
            };
            writer.write(&batch, s * NS_PER_SEC).unwrap();
        }
        reader::expand_inputs(&[dir.to_path_buf()]).unwrap()
    }

    #[test]
    fn epochs_follow_the_fingerprint_and_name_what_changed() {
        let dir = tempfile::tempdir().unwrap();
        let files = record(dir.path());
        let (parts, report) = by_fingerprint(&files, Range::ALL, None).unwrap();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[0].fingerprint, parts[2].fingerprint);
        assert_eq!(span(&parts[1]), (4 * NS_PER_SEC, 8 * NS_PER_SEC));
        let text = epochs_text(&parts, &report);
        assert!(
            text.contains("changed: cpuidle.states[cpu1]: POLL 0us, C1 2us, C6 100us → POLL 0us\n"),
            "{text}"
        );
        assert!(text.contains("max 500 us (CPU 1)"), "{text}");
        let json: serde_json::Value = serde_json::from_str(&epochs_json(&parts, &report)).unwrap();
        assert_eq!(json["epochs"][1]["max_ns"], 500_000);
        assert_eq!(
            json["epochs"][2]["changed"]["cpuidle.states[cpu1]"]["from"],
            "POLL 0us"
        );
        assert!(json["epochs"][0].get("changed").is_none());
        // Only CPU 0: the spike is gone.
        let (parts, _) = by_fingerprint(&files, Range::ALL, Some(&[0])).unwrap();
        assert_eq!(parts[1].combined().0.max_ns, 10_990);
    }

    #[test]
    fn two_ranges_side_by_side() {
        let dir = tempfile::tempdir().unwrap();
        let files = record(dir.path());
        let range = |a: u64, b: u64| Range {
            from_ns: a * NS_PER_SEC,
            to_ns: b * NS_PER_SEC,
        };
        let (a, _) = range_part(&files, range(2, 4), None).unwrap();
        let (b, _) = range_part(&files, range(4, 8), None).unwrap();
        let text = compare_text(&a, &b, ["2..4", "4..8"]);
        assert!(text.contains("changed: cpuidle.states[cpu1]"), "{text}");
        assert!(
            text.contains("max               11.0 us       500.0 us    45.50"),
            "{text}"
        );
        assert!(
            text.contains("500-1000          0.0000%        0.1248%"),
            "{text}"
        );
        let json: serde_json::Value =
            serde_json::from_str(&compare_json(&a, &b, ["2..4", "4..8"])).unwrap();
        assert_eq!(json["b"]["histogram_us"]["500"], 1);
        assert_eq!(json["a"]["samples"], 400);
        assert!(json["b"]["changed"]["cpuidle.states[cpu1]"].is_object());
        let plot = compare_plot(&a, &b, ["2..4", "4..8"]);
        assert_eq!(plot.series.len(), 2);
        // The same configuration on both sides.
        let (c, _) = range_part(&files, range(8, 12), None).unwrap();
        assert!(compare_text(&a, &c, ["x", "y"]).contains("the host's facts are the same"));
    }
}
