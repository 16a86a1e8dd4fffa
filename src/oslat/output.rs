//! oslat's output, as rt-tests 2.x prints it: the header (unless `-q`),
//! the summary table with one column per CPU, and the `--json` document
//! (its `cmdline:` and `rt_test_version:` keys colon and all, since
//! scripts look them up by those names), plus latencyd's own section with
//! what oslat's buckets cannot say: the exact maximum in ns and the
//! percentiles of every gap.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::SystemTime;

use serde::Serialize;

use super::options::OslatOptions;
use crate::calendar::format_rfc2822_utc;
use crate::host::json::RtTestsSysinfo;
use crate::rt::poll::Tally;
use crate::stats::REPORTED_QUANTILES;

/// The oslat release whose output this follows.
pub const OSLAT_VERSION: &str = "2.40";

/// The first line, printed before anything else.
pub fn version_line() -> String {
    format!(
        "oslat V {OSLAT_VERSION} (latencyd {})",
        env!("CARGO_PKG_VERSION")
    )
}

/// The settings block printed before the run (not with `-q`).
pub fn header(o: &OslatOptions, preheat_cpus: usize) -> String {
    let priority = o
        .rtprio
        .map_or_else(|| "default".to_string(), |p| format!("SCHED_FIFO:{p}"));
    format!(
        "Total runtime: \t\t{} seconds\nThread priority: \t{priority}\nCPU list: \t\t{}\n\
         CPU for main thread: \t{}\nWorkload: \t\t{}\nWorkload mem: \t\t{} (KiB)\n\
         Preheat cores: \t\t{preheat_cpus}\n\n",
        o.duration_secs,
        o.cpu_list_text,
        o.main_cpu,
        o.workload,
        o.workload_bytes / 1_024,
    )
}

/// One row: the label right-aligned in 12 columns, a tab, each CPU's
/// value after a space, then `end`.
fn row(out: &mut String, label: &str, values: impl Iterator<Item = String>, end: &str) {
    let _ = write!(out, "{label:>12}:\t");
    for value in values {
        let _ = write!(out, " {value}");
    }
    let _ = writeln!(out, "{end}");
}

/// A value in units as µs with the run's precision.
fn us(o: &OslatOptions, units: u64) -> String {
    format!("{:.*}", o.precision, units as f64 / o.per_us() as f64)
}

/// oslat's average in µs.
pub fn average_us(o: &OslatOptions, t: &Tally) -> f64 {
    t.bucket_average() / o.per_us() as f64
}

/// The summary table of a finished run.
pub fn summary(o: &OslatOptions, tallies: &[Tally]) -> String {
    let mut out = String::new();
    row(
        &mut out,
        "Core",
        tallies.iter().map(|t| t.cpu.to_string()),
        "",
    );
    row(
        &mut out,
        "Counter Freq",
        tallies.iter().map(|t| t.mhz.to_string()),
        " (Mhz)",
    );
    // The layout the pollers filed with: the options' plus the bias.
    let layout = tallies.first().map_or(o.layout, |t| t.layout);
    let count = layout.count;
    let mut omitted = false;
    for j in 0..count {
        if j + 1 < count && o.zero_omit && tallies.iter().all(|t| t.buckets[j] == 0) {
            omitted = true;
            continue;
        }
        if omitted {
            out.push_str("    ...\n");
            omitted = false;
        }
        let label = format!(
            "{:03.*} (us)",
            o.precision,
            layout.upper(j) as f64 / o.per_us() as f64
        );
        let end = if j + 1 == count {
            " (including overflows)"
        } else {
            ""
        };
        row(
            &mut out,
            &label,
            tallies.iter().map(|t| t.buckets[j].to_string()),
            end,
        );
    }
    row(
        &mut out,
        "Minimum",
        tallies.iter().map(|t| us(o, t.min)),
        " (us)",
    );
    row(
        &mut out,
        "Average",
        tallies.iter().map(|t| format!("{:.3}", average_us(o, t))),
        " (us)",
    );
    row(
        &mut out,
        "Maximum",
        tallies.iter().map(|t| us(o, t.max)),
        " (us)",
    );
    row(
        &mut out,
        "Max-Min",
        tallies.iter().map(|t| us(o, t.max.saturating_sub(t.min))),
        " (us)",
    );
    row(
        &mut out,
        "Duration",
        tallies.iter().map(|t| format!("{:.3}", t.duration_secs())),
        " (sec)",
    );
    out.push('\n');
    out
}

/// Serializes pairs as a JSON object in their order (bucket labels as
/// text sort wrongly).
struct Ordered(Vec<(String, u64)>);

impl Serialize for Ordered {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

#[derive(Serialize)]
struct Document<'a> {
    file_version: u32,
    #[serde(rename = "cmdline:")]
    cmdline: &'a str,
    #[serde(rename = "rt_test_version:")]
    version: &'static str,
    start_time: String,
    end_time: String,
    return_code: i32,
    sysinfo: RtTestsSysinfo<'a>,
    num_threads: usize,
    thread: BTreeMap<usize, Thread>,
    latencyd: Ours,
}

#[derive(Serialize)]
struct Thread {
    cpu: usize,
    freq: u64,
    min: u64,
    avg: f64,
    max: u64,
    duration: f64,
    histogram: Ordered,
}

#[derive(Serialize)]
struct Ours {
    version: &'static str,
    counter: &'static str,
    /// Every gap counted, per CPU (thread number as in `thread`).
    threads: BTreeMap<usize, OurThread>,
    /// The gap that stopped the run (`-T`), if one did.
    tripped: Option<TrippedJson>,
}

#[derive(Serialize)]
struct OurThread {
    samples: u64,
    max_ns: u64,
    /// The poller ended off its CPU (offline, or moved): its figures are
    /// partly another CPU's.
    moved: bool,
    #[serde(flatten)]
    quantiles_ns: BTreeMap<String, u64>,
}

#[derive(Serialize)]
pub struct TrippedJson {
    pub cpu: usize,
    pub us: f64,
}

/// What the JSON document needs besides the tallies.
pub struct RunFacts<'a> {
    pub cmdline: &'a str,
    pub start: SystemTime,
    pub end: SystemTime,
    pub return_code: i32,
    pub host: &'a crate::host::HostInfo,
    pub counter: &'static str,
    pub tripped: Option<TrippedJson>,
}

/// Rounds to `digits` decimals, as oslat's printf does.
fn rounded(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}

/// The `--json` document.
pub fn json(o: &OslatOptions, tallies: &[Tally], facts: RunFacts<'_>) -> String {
    let thread = tallies
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let histogram = (0..t.layout.count)
                .filter(|&j| t.buckets[j] > 0)
                .map(|j| (us(o, t.layout.upper(j)), t.buckets[j]))
                .collect();
            let entry = Thread {
                cpu: t.cpu,
                freq: t.mhz,
                min: if t.samples == 0 { 0 } else { t.min },
                avg: rounded(average_us(o, t), 6),
                max: t.max,
                duration: rounded(t.duration_secs(), 3),
                histogram: Ordered(histogram),
            };
            (i, entry)
        })
        .collect();
    let threads = tallies
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let quantiles_ns = REPORTED_QUANTILES
                .iter()
                .map(|&(ppm, name)| {
                    let q = f64::from(ppm) / 1e6;
                    let value = if t.samples == 0 {
                        0
                    } else {
                        t.histogram.value_at_quantile(q)
                    };
                    (format!("{name}_ns"), value)
                })
                .collect();
            let ours = OurThread {
                samples: t.samples,
                max_ns: t.max_ns,
                moved: t.moved,
                quantiles_ns,
            };
            (i, ours)
        })
        .collect();
    let document = Document {
        file_version: 1,
        cmdline: facts.cmdline,
        version: OSLAT_VERSION,
        start_time: format_rfc2822_utc(facts.start),
        end_time: format_rfc2822_utc(facts.end),
        return_code: facts.return_code,
        sysinfo: RtTestsSysinfo::of(facts.host),
        num_threads: tallies.len(),
        thread,
        latencyd: Ours {
            version: env!("CARGO_PKG_VERSION"),
            counter: facts.counter,
            threads,
            tripped: facts.tripped,
        },
    };
    let mut text = serde_json::to_string_pretty(&document).unwrap_or_default();
    text.push('\n');
    text
}
