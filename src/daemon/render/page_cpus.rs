//! The status page's table of CPUs: per sampler its state, its
//! scheduling, its figures and the wake-ups over the budget.

use std::fmt::Write as _;

use crate::daemon::state::SamplerView;
use crate::markup::micros;

/// One CPU's row of the status table; times in ns.
#[derive(Debug, Clone)]
pub struct CpuRow {
    pub cpu: usize,
    pub sampler: SamplerView,
    pub stale: bool,
    pub count: u64,
    pub min_ns: u64,
    pub avg_ns: f64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub window_max_ns: Option<u64>,
    pub missed: u64,
    /// Wake-ups over the budget in the window and since start.
    pub over_window: u64,
    pub over_total: u64,
}

/// The table of CPUs: each sampler, its state and its figures.
pub(super) fn render_cpus(html: &mut String, rows: &[CpuRow]) {
    html.push_str(
        "<table id=\"cpus\"><thead><tr><th>CPU</th><th class=\"l\">Sampler</th>\
         <th class=\"l\">State</th><th>Samples</th><th>Min µs</th><th>Avg µs</th>\
         <th>P99 µs</th><th>Max µs</th><th>Window max µs</th><th>Over budget: window / total</th>\
         <th>Missed</th></tr></thead>\
         <tbody>\n",
    );
    for row in rows {
        let sampler = &row.sampler;
        let state = if !sampler.alive {
            "dead"
        } else if !sampler.online {
            "CPU offline"
        } else if !sampler.sampling {
            "CPU online, no sampler (restarting)"
        } else if row.stale {
            "stalled"
        } else if row.count == 0 {
            "starting"
        } else {
            "sampling"
        };
        let problem = !sampler.alive
            || !sampler.online
            || !sampler.sampling
            || row.stale
            || !sampler.realtime;
        let _ = writeln!(
            html,
            "<tr id=\"cpu-{cpu}\" class=\"cpu{}\"><td>{cpu}</td>\
             <td class=\"l\">tid {} · {} {} · {}</td><td class=\"l\">{state}</td>\
             <td>{}</td><td>{}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td{}>{} / {}</td><td>{}</td></tr>",
            if problem { " problem" } else { "" },
            sampler.tid,
            sampler.policy.name(),
            sampler.priority,
            match (&sampler.scheduling.running, sampler.realtime) {
                (Some(running), _) if sampler.scheduling.changed => format!(
                    "NOT real-time: runs {} (changed behind latencyd's back)",
                    running
                ),
                (_, true) => "real-time".to_string(),
                (_, false) => "NOT real-time".to_string(),
            },
            row.count,
            if row.count == 0 {
                "-".to_string()
            } else {
                micros(row.min_ns)
            },
            row.avg_ns / 1_000.0,
            if row.count == 0 {
                "-".to_string()
            } else {
                micros(row.p99_ns)
            },
            if row.count == 0 {
                "-".to_string()
            } else {
                micros(row.max_ns)
            },
            row.window_max_ns.map_or_else(|| "-".to_string(), micros),
            if row.over_window > 0 {
                " class=\"bad\""
            } else {
                ""
            },
            row.over_window,
            row.over_total,
            row.missed,
            cpu = row.cpu,
        );
    }
    html.push_str("</tbody></table>\n");
}
