//! The kernel's timerlat in the catalogue of `/metrics` (`[timerlat]`,
//! built in `timerlat.rs`).

use prometheus::proto::MetricType;

use super::families::Build;
use super::families::Family;
use super::timerlat;

/// Served after the samplers' and the daemon's families.
pub const INSTRUMENT_FAMILIES: &[Family] = &[
    Family {
        name: "latencyd_timerlat_latency_seconds",
        help: "The kernel's timerlat tracer ([timerlat]) per CPU and context: irq, how late the timer's interrupt handler ran; thread, how late the thread it woke ran; user, how late that thread, a user-space one, came back for its next period (kernels with timerlat_fd). Buckets round up as for latencyd_wakeup_latency_seconds.",
        kind: MetricType::HISTOGRAM,
        labels: &["context", "cpu"],
        build: Build::State(timerlat::timerlat_latency_seconds),
    },
    Family {
        name: "latencyd_timerlat_latency_max_seconds",
        help: "Exact maximum timerlat latency per CPU and context since the daemon started.",
        kind: MetricType::GAUGE,
        labels: &["context", "cpu"],
        build: Build::State(timerlat::timerlat_latency_max_seconds),
    },
    Family {
        name: "latencyd_timerlat_latency_window_max_seconds",
        help: "Exact maximum timerlat latency per CPU and context in the trailing window (export.max_window), filed by when the kernel took it. Absent while the window holds none.",
        kind: MetricType::GAUGE,
        labels: &["context", "cpu"],
        build: Build::State(timerlat::timerlat_latency_window_max_seconds),
    },
    Family {
        name: "latencyd_timerlat_periods_total",
        help: "Timer periods the kernel's timerlat ran on a CPU while latencyd read it (by its period numbers): the IRQ and thread counts of latencyd_timerlat_latency_seconds should equal it; fewer means lost events.",
        kind: MetricType::COUNTER,
        labels: &["cpu"],
        build: Build::State(timerlat::timerlat_periods_total),
    },
    Family {
        name: "latencyd_timerlat_available",
        help: "1 when [timerlat] is enabled and the tracer runs, 0 when enabled but unavailable (no tracer in this kernel, no tracefs, another program running timerlat or osnoise at start; the reason is in /api/v1/timerlat); absent when disabled.",
        kind: MetricType::GAUGE,
        labels: &[],
        build: Build::State(timerlat::timerlat_available),
    },
    Family {
        name: "latencyd_timerlat_neighbour_info",
        help: "1 for each other program running timerlat or osnoise beside latencyd's timerlat, by tracefs instance (top: the top-level buffer; rtla names its instance after its tool) and tracer: they share the host-wide osnoise/ settings. Logged at warn when one appears.",
        kind: MetricType::GAUGE,
        labels: &["instance", "tracer"],
        build: Build::State(timerlat::timerlat_neighbour_info),
    },
    Family {
        name: "latencyd_timerlat_disturbances_total",
        help: "Times another program started timerlat or osnoise beside latencyd's, or changed an osnoise/ setting latencyd set; each is logged at warn and latencyd does not set it back. Absent unless timerlat runs.",
        kind: MetricType::COUNTER,
        labels: &[],
        build: Build::State(timerlat::timerlat_disturbances_total),
    },
    Family {
        name: "latencyd_timerlat_lost_pages_total",
        help: "Ring-buffer pages of timerlat that the kernel flagged with events lost before them, and reads that failed: samples missing from latencyd_timerlat_latency_seconds. Absent unless timerlat runs.",
        kind: MetricType::COUNTER,
        labels: &[],
        build: Build::State(timerlat::timerlat_lost_pages_total),
    },
];
