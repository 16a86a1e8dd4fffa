//! The daemon's exemplars: what forensics captured in this run and is
//! about to, read from its journal once per scrape ([`captures`]), and
//! the samplers' series' exemplars from them. A registered instrument
//! lists its own series' from the same captures
//! (`instruments::shape::Native::exemplars`); what an exemplar is and
//! how a series chooses them is `crate::series::exemplars`.

use std::collections::BTreeMap;

use super::metrics::Now;
use crate::calendar::parse_rfc3339_ns;
use crate::daemon::state::MonitorState;
use crate::forensics::Summary;
use crate::series::exemplars::{CAPTURE_LABEL, Captured, Captures, Pending, finish};
use crate::series::exemplars::{Exemplar, Exemplars};

fn capture_exemplar(s: &Summary, unix_ns: u64) -> Exemplar {
    let labels = vec![(CAPTURE_LABEL, s.id.clone()), ("cpu", s.cpu.to_string())];
    Exemplar::new(labels, s.latency_ns, unix_ns)
}

/// Which window maxima forensics is about to capture: those at least
/// its threshold late (or every new maximum, with
/// `forensics.capture_new_max`), while it runs.
fn pending_of(state: &MonitorState) -> Pending {
    let journal = state.forensics.lock();
    Pending {
        capturing: journal.enabled && journal.available,
        threshold_ns: journal.threshold_ns,
        new_max: state.config.forensics.capture_new_max,
    }
}

/// The captures of this run, newest first as the journal keeps them, and
/// those forensics is about to make, at `now`.
pub fn captures(state: &MonitorState, now: Now) -> Captures {
    let mut captures = Captures {
        list: Vec::new(),
        pending: pending_of(state),
        monotonic_ns: now.monotonic_ns,
        unix_ns: now.unix_ns,
    };
    let started = captures.unix_ns_of(state.started_ns);
    captures.list = (state.forensics.lock().recent.iter())
        .filter_map(|s| {
            let at = parse_rfc3339_ns(&s.at).ok().filter(|&at| at >= started)?;
            Some(Captured {
                cpu: s.cpu,
                task: (s.task.as_ref()).map(|t| (t.name.clone(), t.container.clone())),
                exemplar: capture_exemplar(s, at),
            })
        })
        .collect();
    captures
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
