//! The JSON API's bodies (DTOs) and the pure functions that build them
//! from a `MonitorState`: the shapes of `/healthz` and
//! `/api/v1/latency[/{cpu}]` belong here, not to the state's types
//! (`/api/v1/status` has its own file, `status.rs`). The
//! HTTP layer takes the lock, calls these, and serializes.

use serde::Serialize;

use crate::calendar::format_rfc3339_ms;
use crate::daemon::state::{CpuView, Health, MonitorState};
use crate::record::{Range, ReadReport, Summary as RecordSummary};
use crate::stats::{LatencyStats, P50, P90, P99, P999, P9999};

#[derive(Serialize)]
pub struct HealthBody {
    status: &'static str,
    stale: Vec<StaleSampler>,
}

#[derive(Serialize)]
pub struct StaleSampler {
    cpu: usize,
    last_sample_age_ns: u64,
}

/// `/healthz`'s body.
pub fn health(health: Health) -> HealthBody {
    HealthBody {
        status: if health.healthy { "ok" } else { "unhealthy" },
        stale: health
            .stale
            .into_iter()
            .map(|(cpu, age)| StaleSampler {
                cpu,
                last_sample_age_ns: age,
            })
            .collect(),
    }
}

/// One CPU's latency summary; all times in nanoseconds.
#[derive(Serialize)]
pub struct LatencyBody {
    cpu: usize,
    count: u64,
    min_ns: u64,
    avg_ns: f64,
    max_ns: u64,
    /// `null` while the window holds no sample.
    window_max_ns: Option<u64>,
    p50_ns: u64,
    p90_ns: u64,
    p99_ns: u64,
    p999_ns: u64,
    p9999_ns: u64,
    missed: u64,
    overflows: u64,
    spikes: u64,
}

pub fn latency_body(view: &CpuView, now_ns: u64) -> LatencyBody {
    stats_body(view.cpu, &view.lifetime, view.window.max(now_ns))
}

fn stats_body(cpu: usize, stats: &LatencyStats, window_max_ns: Option<u64>) -> LatencyBody {
    LatencyBody {
        cpu,
        count: stats.count,
        min_ns: stats.min_ns(),
        avg_ns: stats.avg_ns(),
        max_ns: stats.max_ns,
        window_max_ns,
        p50_ns: stats.quantile_ns(P50),
        p90_ns: stats.quantile_ns(P90),
        p99_ns: stats.quantile_ns(P99),
        p999_ns: stats.quantile_ns(P999),
        p9999_ns: stats.quantile_ns(P9999),
        missed: stats.missed,
        overflows: stats.hdr_overflows,
        spikes: stats.spikes,
    }
}

#[derive(Serialize)]
pub struct LatencyAllBody {
    window_ns: u64,
    cpus: Vec<LatencyBody>,
}

/// `/api/v1/latency` of a state at `now_ns`.
pub fn latency_all(s: &MonitorState, now_ns: u64) -> LatencyAllBody {
    let now = now_ns;
    LatencyAllBody {
        window_ns: s.config.export.max_window_ns,
        cpus: s.cpus.iter().map(|v| latency_body(v, now)).collect(),
    }
}

/// `/api/v1/latency?from=&to=`: the record over a range, in the shape of
/// `/api/v1/latency` (no window maximum: `window_max_ns` is null).
#[derive(Serialize)]
pub struct LatencyRangeBody {
    window_ns: u64,
    from: String,
    to: String,
    /// Intervals read (one per CPU and interval).
    intervals: u64,
    /// Lines of the record that could not be read and were skipped.
    skipped_lines: u64,
    /// Files whose unfinished last line was skipped.
    torn_files: usize,
    /// What was skipped, for a person; null when nothing was.
    warning: Option<String>,
    cpus: Vec<LatencyBody>,
}

pub fn latency_range(
    window_ns: u64,
    range: Range,
    summary: &RecordSummary,
    report: &ReadReport,
) -> LatencyRangeBody {
    LatencyRangeBody {
        window_ns,
        from: format_rfc3339_ms(range.from_ns),
        to: format_rfc3339_ms(range.to_ns),
        intervals: report.entries,
        skipped_lines: report.corrupt,
        torn_files: report.torn.len(),
        warning: report.warning(),
        cpus: summary
            .cpus
            .iter()
            .map(|(cpu, stats)| stats_body(*cpu, stats, None))
            .collect(),
    }
}

#[derive(Serialize)]
pub struct LatencyOneBody {
    window_ns: u64,
    #[serde(flatten)]
    latency: LatencyBody,
    /// The non-empty HDR buckets: samples from `lowest_ns` to `highest_ns`.
    buckets: Vec<HdrBucket>,
    /// The HDR histogram, base64 of HdrHistogram's V2 format compressed
    /// with DEFLATE (what HdrHistogram's Java and JS tools decode).
    hdr_histogram: String,
}

#[derive(Serialize)]
pub struct HdrBucket {
    lowest_ns: u64,
    highest_ns: u64,
    count: u64,
}

/// `/api/v1/latency/{cpu}` of one CPU's view, without the encoded
/// histogram: the caller compresses a copy of `view.lifetime.hdr()` off
/// the state's lock and adds it with `with_hdr_histogram`.
pub fn latency_one(view: &CpuView, window_ns: u64, now_ns: u64) -> LatencyOneBody {
    let hdr = view.lifetime.hdr();
    LatencyOneBody {
        window_ns,
        latency: latency_body(view, now_ns),
        buckets: hdr
            .buckets()
            .map(|b| HdrBucket {
                lowest_ns: b.lowest_ns(),
                highest_ns: b.highest_ns(),
                count: b.count,
            })
            .collect(),
        hdr_histogram: String::new(),
    }
}

impl LatencyOneBody {
    /// The HDR histogram, base64 of V2+DEFLATE.
    pub fn with_hdr_histogram(self, encoded: String) -> LatencyOneBody {
        LatencyOneBody {
            hdr_histogram: encoded,
            ..self
        }
    }
}
