//! The observer's metric families, in the order `/metrics` serves them.

use prometheus::proto::MetricType;

use super::render;
use crate::exposition::Family;
use crate::instruments::shape::PartBuild;

pub(super) const FAMILIES: &[Family<PartBuild>] = &[
    Family {
        name: "latencyd_task_wakeup_latency_seconds",
        help: "Wake-up latency of each real-time task on an observed CPU ([observe]): from its wake-up, or for a sleep a timer ends from the time it asked for, to when it ran. Buckets round up as for latencyd_wakeup_latency_seconds. Tasks beyond observe.max_tasks count as task=\"other\".",
        kind: MetricType::HISTOGRAM,
        labels: &["container", "cpu", "task"],
        build: render::task_wakeup_latency_seconds,
    },
    Family {
        name: "latencyd_task_wakeup_latency_max_seconds",
        help: "Exact maximum wake-up latency of an observed real-time task since the daemon started.",
        kind: MetricType::GAUGE,
        labels: &["container", "cpu", "task"],
        build: render::task_wakeup_latency_max_seconds,
    },
    Family {
        name: "latencyd_task_wakeup_latency_window_max_seconds",
        help: "Exact maximum wake-up latency of an observed real-time task in the trailing window (export.max_window), filed by when it ran. Absent while the window holds none.",
        kind: MetricType::GAUGE,
        labels: &["container", "cpu", "task"],
        build: render::task_wakeup_latency_window_max_seconds,
    },
    Family {
        name: "latencyd_cpu_interference_seconds_total",
        help: "Time taken from an observed CPU by source (irq, softirq, nmi, thread, steal) and name: interrupts for their whole duration less what interrupted them; threads that are not the CPU's real-time workload (kernel threads, tasks without a real-time policy), and real-time tasks while they keep a woken one waiting.",
        kind: MetricType::COUNTER,
        labels: &["cpu", "name", "source"],
        build: render::cpu_interference_seconds_total,
    },
    Family {
        name: "latencyd_cpu_interference_total",
        help: "How often an observed CPU was interrupted, by source (irq, softirq, nmi, thread, smi, steal) and name (steal: one-second readings that found some).",
        kind: MetricType::COUNTER,
        labels: &["cpu", "name", "source"],
        build: render::cpu_interference_total,
    },
    Family {
        name: "latencyd_cpu_interference_window_max_seconds",
        help: "Longest single interruption of an observed CPU by source in the trailing window (export.max_window), filed by when it ended; steal in one-second readings.",
        kind: MetricType::GAUGE,
        labels: &["cpu", "source"],
        build: render::cpu_interference_window_max_seconds,
    },
    Family {
        name: "latencyd_observe_available",
        help: "1 when [observe] is enabled and its tracing runs, 0 when enabled but unavailable (the reason is in /api/v1/observe); absent when disabled.",
        kind: MetricType::GAUGE,
        labels: &[],
        build: render::observe_available,
    },
    Family {
        name: "latencyd_observe_read_errors_total",
        help: "Reads of an observed CPU's ring buffer that failed (one per CPU and 100 ms read): that CPU's events of the time are missing from the interference and latencies. The latest error is in /api/v1/observe. Absent unless the observer runs.",
        kind: MetricType::COUNTER,
        labels: &[],
        build: render::observe_read_errors_total,
    },
    Family {
        name: "latencyd_observe_lost_events_total",
        help: "Events an observed CPU's ring buffer lost before the observer read them (raise observe.buffer_size_kb); the interference and latencies of that time are incomplete.",
        kind: MetricType::COUNTER,
        labels: &["cpu"],
        build: render::observe_lost_events_total,
    },
    Family {
        name: "latencyd_observe_unseen_wakeups_total",
        help: "Real-time tasks that ran on an observed CPU without their wake-up being seen (woken from another CPU while this one was busy): no latency sample for them.",
        kind: MetricType::COUNTER,
        labels: &["cpu"],
        build: render::observe_unseen_wakeups_total,
    },
    Family {
        name: "latencyd_observe_waiting_tasks",
        help: "Woken real-time tasks an observed CPU's account holds as waiting for it, at the observer's latest interval: a task leaves when it runs (here: a latency sample; on another CPU: let go).",
        kind: MetricType::GAUGE,
        labels: &["cpu"],
        build: render::observe_waiting_tasks,
    },
    Family {
        name: "latencyd_observe_waiting_let_go_total",
        help: "Woken tasks an observed CPU stopped waiting for without a latency sample: they ran on another CPU (migrated, or this CPU went offline), or more than 512 waited at once and the oldest went.",
        kind: MetricType::COUNTER,
        labels: &["cpu"],
        build: render::observe_waiting_let_go_total,
    },
];
