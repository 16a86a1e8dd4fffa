//! The daemon's exemplars: what was captured in this run and is about to
//! be, read once per scrape from the registered instrument that captures
//! ([`captures`]), and the samplers' series' exemplars from them. A registered instrument
//! lists its own series' from the same captures
//! (`instruments::shape::Native::exemplars`); what an exemplar is and
//! how a series chooses them is `crate::series::exemplars`.

use std::collections::BTreeMap;

use super::metrics::Now;
use crate::daemon::state::MonitorState;
use crate::series::exemplars::{Captures, finish};
use crate::series::exemplars::{Exemplar, Exemplars};

/// What was captured in this run and is about to be, at `now`: from
/// the registered instrument that captures (`Part::captures`), else none.
pub fn captures(state: &MonitorState, now: Now) -> Captures {
    let none = Captures {
        monotonic_ns: now.monotonic_ns,
        unix_ns: now.unix_ns,
        ..Captures::default()
    };
    let started_unix_ns = none.unix_ns_of(state.started_ns);
    (state.parts.iter())
        .find_map(|(_, part)| part.captures(now, started_unix_ns))
        .unwrap_or(none)
}

/// Exemplars of `latencyd_wakeup_latency_seconds`, keyed as
/// `metrics::latency_histograms` labels its series.
pub fn latency(state: &MonitorState, captures: &Captures) -> Exemplars {
    let mut by_cpu: BTreeMap<usize, Vec<Exemplar>> = BTreeMap::new();
    for c in &captures.list {
        if c.task.is_none() {
            by_cpu.entry(c.cpu).or_default().push(c.exemplar.clone());
        }
    }
    let per_cpu = state.config.export.per_cpu_histograms;
    let mut out = Exemplars::new();
    for view in &state.cpus {
        let mut list = by_cpu.remove(&view.cpu).unwrap_or_default();
        list.extend(captures.window_exemplar(&view.window, view.cpu, &list));
        let key = if per_cpu {
            vec![("cpu".to_string(), view.cpu.to_string())]
        } else {
            vec![]
        };
        out.entry(key).or_default().extend(list);
    }
    out.into_iter().map(|(k, v)| (k, finish(v))).collect()
}
