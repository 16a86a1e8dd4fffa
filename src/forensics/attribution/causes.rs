//! The time of a spike by cause: the ledger the attributor fills as it
//! walks the trace (time added to what ran, taken back for an NMI, the
//! unaccounted part given to steal) and the causes it becomes, one per
//! task, largest first, each with the scheduling its task ran at.

use serde::{Deserialize, Serialize};

use crate::forensics::events::Event;
use crate::forensics::scheduling::{policy_class, user_priority};

/// The kinds of cause, a bounded set (they label a counter).
pub const CAUSE_KINDS: &[&str] = &[
    "task",
    "irq",
    "softirq",
    "nmi",
    "steal",
    "sampler",
    "unaccounted",
];

/// One cause: what ran, and for how long within the latency.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cause {
    pub kind: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pid: Option<i32>,
    /// A task's policy: `SCHED_FIFO`, `SCHED_OTHER`, ... read when the
    /// capture is made; for a task gone by then (or whose class changed),
    /// the class its traced priority tells: `real-time`, `normal` or
    /// `SCHED_DEADLINE`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub policy: Option<String>,
    /// The real-time priority (1..99) of a real-time task, or the nice
    /// value of another, from the kernel's `prio` in `sched_switch`; none
    /// for `SCHED_DEADLINE`. `verdict::scheduling` writes the two as one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub priority: Option<i32>,
    pub duration_ns: u64,
}

/// The result for one spike.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribution {
    /// Largest first; the durations add up to the latency.
    pub causes: Vec<Cause>,
    /// How late the timer interrupt woke the sampler (timerlat's "IRQ
    /// latency"), when the wake-up was traced.
    pub timer_late_ns: Option<u64>,
    /// What the trace lacks, if anything (empty: complete).
    pub gaps: Vec<String>,
    /// The events from `CONTEXT_NS` before the deadline to as long after
    /// the wake-up.
    pub events: Vec<Event>,
    pub events_omitted: u64,
}

/// Cause identity: (kind, name, pid).
pub(super) type Key = (&'static str, String, Option<i32>);

/// Time per cause, in the order causes first ran.
#[derive(Debug, Default)]
pub(super) struct Ledger {
    totals: Vec<(Key, u64)>,
}

impl Ledger {
    pub(super) fn add(&mut self, key: Key, ns: u64) {
        match self.totals.iter_mut().find(|(k, _)| *k == key) {
            Some((_, total)) => *total += ns,
            None => self.totals.push((key, ns)),
        }
    }

    /// Takes `ns` back from a cause (an NMI's time from what it
    /// interrupted).
    pub(super) fn take(&mut self, key: &Key, ns: u64) {
        if let Some((_, total)) = self.totals.iter_mut().find(|(k, _)| k == key) {
            *total = total.saturating_sub(ns);
        }
    }

    /// Hypervisor steal explains what no event does: up to `steal` of the
    /// unaccounted time becomes steal.
    pub(super) fn steal_from_unaccounted(&mut self, steal: u64) {
        let mut left = steal;
        self.totals.sort_by_key(|t| std::cmp::Reverse(t.1));
        let mut moved = 0;
        for (key, total) in &mut self.totals {
            if key.0 == "unaccounted" && left > 0 {
                let take = (*total).min(left);
                *total -= take;
                left -= take;
                moved += take;
            }
        }
        if moved > 0 {
            self.add(
                (
                    "steal",
                    "hypervisor steal (the host ran something else)".to_string(),
                    None,
                ),
                moved,
            );
        }
    }

    /// The causes, largest first: one per task (under the name it had
    /// longest), each task's with the class and priority of `prios`
    /// (pid, kernel prio).
    pub(super) fn into_causes(mut self, prios: &[(i32, i32)]) -> Vec<Cause> {
        let mut causes: Vec<Cause> = Vec::new();
        self.totals.sort_by_key(|t| std::cmp::Reverse(t.1));
        for ((kind, name, pid), duration_ns) in self.totals {
            if duration_ns == 0 {
                continue;
            }
            let prio = match (kind, pid) {
                ("task", Some(pid)) => prios.iter().find(|(p, _)| *p == pid).map(|(_, prio)| *prio),
                _ => None,
            };
            // One task is one cause, under the name it had longest (a
            // task that exec'd ran under two).
            if kind == "task"
                && let Some(same) = causes.iter_mut().find(|c| c.kind == "task" && c.pid == pid)
            {
                same.duration_ns += duration_ns;
                continue;
            }
            causes.push(Cause {
                kind: kind.to_string(),
                name,
                pid,
                // The class the kernel's priority tells; the worker puts
                // the exact policy in its place while the task exists.
                policy: prio.map(|p| policy_class(p).to_string()),
                priority: prio.and_then(user_priority),
                duration_ns,
            });
        }
        name_tasks_once(&mut causes);
        causes.sort_by(|a, b| b.duration_ns.cmp(&a.duration_ns).then(a.name.cmp(&b.name)));
        causes
    }
}

pub(super) fn timer_late_while(comm: &str) -> String {
    format!("timer interrupt late while {comm} ran (interrupts off in it, SMI or the host)")
}

/// A task that exec'd ran under two names (`taskset`, then the program it
/// started); every cause of that pid takes the name its task cause has.
fn name_tasks_once(causes: &mut [Cause]) {
    let names: Vec<(i32, String)> = causes
        .iter()
        .filter(|c| c.kind == "task")
        .filter_map(|c| Some((c.pid?, c.name.clone())))
        .collect();
    for cause in causes.iter_mut().filter(|c| c.kind == "unaccounted") {
        if let Some((_, name)) = names.iter().find(|(pid, _)| Some(*pid) == cause.pid) {
            cause.name = timer_late_while(name);
        }
    }
}
