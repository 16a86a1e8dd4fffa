//! cyclictest's `--json` document, plus latencyd's own fields. The DTOs
//! live here only: domain types do not derive `Serialize`.

use std::collections::BTreeMap;

use serde::Serialize;

use super::report::RunReport;
use crate::calendar::format_rfc2822_utc;
use crate::host::json::{CpuJson, FactJson, RtTestsSysinfo, TrustFacts, facts_json, topology_json};
use crate::host::{CpuTopology, Fingerprint, HostInfo};
use crate::load::{LoadJson, LoadReport};
use crate::stats::REPORTED_QUANTILES;

/// The `--json` document: cyclictest's schema (including its `cmdline:`
/// and `rt_test_version:` keys, colon and all, since scripts look them up
/// by those names) plus latencyd's own fields.
#[derive(Serialize)]
struct JsonRun<'a> {
    file_version: u32,
    #[serde(rename = "cmdline:")]
    cmdline_cyclictest: &'a str,
    cmdline: &'a str,
    #[serde(rename = "rt_test_version:")]
    version_cyclictest: String,
    start_time: String,
    end_time: String,
    return_code: i32,
    sysinfo: RtTestsSysinfo<'a>,
    num_threads: usize,
    resolution_in_ns: u8,
    thread: BTreeMap<usize, JsonThread>,
    latencyd: JsonLatencyd<'a>,
}

#[derive(Serialize)]
struct JsonThread {
    histogram: BTreeMap<usize, u64>,
    cycles: u64,
    min: u64,
    max: u64,
    avg: f64,
    cpu: usize,
    node: i32,
    missed: u64,
    overflows: u64,
    spikes: u64,
    #[serde(flatten)]
    quantiles: BTreeMap<&'static str, u64>,
    tid: i32,
    priority: i32,
    interval_ns: u64,
    realtime: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    smi: Option<u64>,
}

#[derive(Serialize)]
struct JsonLatencyd<'a> {
    version: &'static str,
    realtime: bool,
    policy: &'static str,
    unit: &'static str,
    interval_ns: u64,
    spike_threshold_ns: u64,
    pm_qos_us: Option<i32>,
    host: HostJson,
    /// Options accepted but not exactly as typed, or meaning nothing here.
    notes: &'a [String],
    /// `--load`: the generators, their CPUs and throughput; null without.
    load: Option<LoadJson>,
    /// `-b`, `--forensics`: each capture whole (as `/api/v1/spikes/{id}`
    /// serves it), oldest first, for `latencyd plot --capture`; absent
    /// without a capture.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    captures: &'a [crate::forensics::Capture],
    /// `--timerlat`: the kernel's timerlat per CPU and context; absent
    /// without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    timerlat: Option<JsonTimerlat<'a>>,
}

/// `--timerlat`'s results, in nanoseconds whatever the unit of the rest.
#[derive(Serialize)]
struct JsonTimerlat<'a> {
    period_us: u64,
    /// Whether latencyd's own threads were the workload (and `user`
    /// measured).
    user_threads: bool,
    seconds: f64,
    /// By CPU, then context (`irq`, `thread`, `user`).
    cpus: BTreeMap<usize, BTreeMap<&'static str, JsonTimerlatContext>>,
    notes: &'a [String],
}

#[derive(Serialize)]
struct JsonTimerlatContext {
    count: u64,
    min_ns: u64,
    avg_ns: f64,
    max_ns: u64,
    /// The periods the kernel ran on the CPU.
    periods: u64,
    /// Samples per 1 µs bin (bins with samples only), with `-h`.
    #[serde(skip_serializing_if = "Option::is_none")]
    histogram_us: Option<BTreeMap<usize, u64>>,
}

fn timerlat_json(report: &crate::instruments::timerlat::tally::TimerlatReport) -> JsonTimerlat<'_> {
    let cpus = (report.tally.cpus.iter())
        .map(|cpu| {
            let contexts = (report.contexts().into_iter())
                .map(|c| {
                    let s = cpu.stats(c);
                    let histogram_us = s.linear().map(|l| {
                        (l.bins().iter().enumerate())
                            .filter(|(_, n)| **n > 0)
                            .map(|(i, n)| (i, *n))
                            .collect()
                    });
                    let json = JsonTimerlatContext {
                        count: s.count,
                        min_ns: if s.count == 0 { 0 } else { s.min_ns() },
                        avg_ns: s.avg_ns(),
                        max_ns: s.max_ns,
                        periods: cpu.periods(),
                        histogram_us,
                    };
                    (c.name(), json)
                })
                .collect();
            (cpu.cpu, contexts)
        })
        .collect();
    JsonTimerlat {
        period_us: report.period_us,
        user_threads: report.user,
        seconds: report.seconds,
        cpus,
        notes: &report.notes,
    }
}

/// The host as `measure --json` writes it: the daemon's fingerprint,
/// facts and topology, then the facts that decide whether the numbers can
/// be trusted (`host::json::TrustFacts`, as in `/api/v1/status`).
#[derive(Serialize)]
struct HostJson {
    /// The identifier of the facts below (`latencyd run`'s fingerprint).
    fingerprint: String,
    /// Every fact the daemon's `/api/v1/host` lists: `{"value": …}` or
    /// `{"absent": why}`.
    facts: BTreeMap<String, FactJson>,
    /// The measured CPUs' package, core, NUMA node and SMT siblings.
    cpus: Vec<CpuJson>,
    #[serde(flatten)]
    trust: TrustFacts,
}

impl HostJson {
    fn of(host: &HostInfo, fingerprint: &Fingerprint, topology: &[CpuTopology]) -> HostJson {
        HostJson {
            fingerprint: fingerprint.id(),
            facts: facts_json(fingerprint),
            cpus: topology_json(topology),
            trust: TrustFacts::of(host),
        }
    }
}

/// The `--json` file's text (pretty-printed, ending in a newline). Always
/// valid JSON: a thread without samples reports zeroes where cyclictest
/// would write `-nan`.
pub fn json_document(report: &RunReport) -> String {
    let unit = report.unit_ns();
    let threads = report
        .threads
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let s = &t.stats;
            let (histogram, overflows) = match s.linear() {
                Some(linear) => (
                    linear
                        .bins()
                        .iter()
                        .enumerate()
                        .filter(|(_, count)| **count > 0)
                        .map(|(bin, count)| (bin, *count))
                        .collect(),
                    linear.overflows(),
                ),
                None => (BTreeMap::new(), s.hdr_overflows),
            };
            let quantiles = REPORTED_QUANTILES
                .iter()
                .map(|&(ppm, name)| (name, s.quantile_ns(ppm) / unit))
                .collect();
            let avg = (s.avg_ns() / unit as f64 * 100.0).round() / 100.0;
            let thread = JsonThread {
                histogram,
                cycles: s.count,
                min: s.min_ns() / unit,
                max: s.max_ns / unit,
                avg,
                cpu: t.cpu,
                node: t.numa_node,
                missed: s.missed,
                overflows,
                spikes: s.spikes,
                quantiles,
                tid: t.tid,
                priority: t.priority,
                interval_ns: t.interval_ns,
                realtime: t.realtime,
                smi: t.smi_count,
            };
            (i, thread)
        })
        .collect();
    let first = report.threads.first();
    let host = &report.host;
    let doc = JsonRun {
        file_version: 1,
        cmdline_cyclictest: &report.cmdline,
        cmdline: &report.cmdline,
        version_cyclictest: format!("latencyd {}", env!("CARGO_PKG_VERSION")),
        start_time: format_rfc2822_utc(report.start_time),
        end_time: format_rfc2822_utc(report.end_time),
        return_code: report.return_code,
        sysinfo: RtTestsSysinfo::of(host),
        num_threads: report.threads.len(),
        resolution_in_ns: u8::from(report.nsecs),
        thread: threads,
        latencyd: JsonLatencyd {
            version: env!("CARGO_PKG_VERSION"),
            realtime: report.realtime(),
            policy: report.policy.name(),
            unit: if report.nsecs { "ns" } else { "us" },
            interval_ns: first.map_or(0, |t| t.interval_ns),
            spike_threshold_ns: first.map_or(0, |t| t.stats.spike_threshold_ns()),
            pm_qos_us: report.pm_qos_us,
            host: HostJson::of(host, &report.fingerprint, &report.topology),
            notes: &report.notes,
            load: report.load.as_ref().map(LoadReport::json),
            captures: &report.captures,
            timerlat: report.timerlat.as_ref().map(timerlat_json),
        },
    };
    let mut text = serde_json::to_string_pretty(&doc).expect("the JSON DTOs always serialize");
    text.push('\n');
    text
}
