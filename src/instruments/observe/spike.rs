//! A workload task's late wake-up as a forensics capture: the same
//! record a sampler's spike gets (`forensics::Capture`), so it is kept,
//! listed and served alike (`/api/v1/spikes`, the status page), with the
//! task named (`task`) and what ran while it waited as the causes.

use super::TaskKey;
use super::tally::{Source, WorkloadSpike};
use crate::calendar::format_rfc3339_ms;
use crate::forensics::attribution::Cause;
use crate::forensics::events::Event;
use crate::forensics::store::make_id;
use crate::forensics::verdict::verdict_of;
use crate::forensics::{Capture, Summary, TaskRef};

/// What the observer saw during the latency as causes, with the timer's
/// own lateness and whatever no event accounts for (the scheduler's way to
/// the task; an idle exit the kernel did not trace).
fn causes_of(spike: &WorkloadSpike, timer_late_ns: Option<u64>) -> Vec<Cause> {
    let cause = |kind: &str, name: String, duration_ns: u64| Cause {
        kind: kind.to_string(),
        name,
        pid: None,
        policy: None,
        priority: None,
        duration_ns,
    };
    let mut causes: Vec<Cause> = (spike.causes.iter())
        .map(|(source, name, ns)| {
            let kind = match source {
                Source::Thread => "task",
                Source::Irq => "irq",
                Source::Softirq => "softirq",
                Source::Nmi => "nmi",
                Source::Steal => "steal",
                Source::Smi => "unaccounted",
            };
            cause(kind, name.clone(), *ns)
        })
        .collect();
    let accounted: u64 =
        causes.iter().map(|c| c.duration_ns).sum::<u64>() + timer_late_ns.unwrap_or(0);
    let rest = spike.latency_ns.saturating_sub(accounted);
    if let Some(late) = timer_late_ns.filter(|&late| late > 0) {
        let why = "the timer interrupt came late (idle exit, masked interrupts, SMI or the host)";
        causes.push(cause("unaccounted", why.to_string(), late));
    }
    if rest > 0 {
        let why = "from the wake-up to the switch, no event accounts for it";
        causes.push(cause("unaccounted", why.to_string(), rest));
    }
    causes
}

/// The capture of `spike` of the task series `key`; `now` is
/// (`CLOCK_MONOTONIC`, wall clock) read together, to date it.
pub fn capture(key: &TaskKey, spike: &WorkloadSpike, now: (u64, u64)) -> Capture {
    let at_unix = now.1.saturating_sub(now.0.saturating_sub(spike.ran_ns));
    let timer_late_ns = spike
        .from_timer
        .then(|| spike.woken_ns.saturating_sub(spike.since_ns));
    let mut causes = causes_of(spike, timer_late_ns);
    causes.sort_by(|a, b| b.duration_ns.cmp(&a.duration_ns).then(a.name.cmp(&b.name)));
    let container = if key.container.is_empty() {
        String::new()
    } else {
        format!(", {}", key.container)
    };
    let who = format!(
        "CPU {}: task {} (pid {}{container})",
        key.cpu,
        spike.comm.to_string_lossy(),
        spike.pid
    );
    Capture {
        summary: Summary {
            id: make_id(at_unix, key.cpu),
            cpu: key.cpu,
            task: Some(TaskRef {
                name: spike.comm.to_string_lossy(),
                pid: spike.pid,
                container: key.container.clone(),
            }),
            trigger: "threshold".to_string(),
            at: format_rfc3339_ms(at_unix),
            latency_ns: spike.latency_ns,
            deadline_mono_ns: spike.since_ns,
            wakeup_mono_ns: spike.ran_ns,
            sampler_tid: spike.pid,
            verdict: verdict_of(&who, "it", spike.latency_ns, &causes),
            causes,
            timer_late_ns,
            complete: true,
            gaps: vec![],
            steal_ns: None,
            smi_count: None,
            events_omitted: spike.events_omitted,
            timerlat: None,
            no_sampler_capture: None,
        },
        events: spike
            .events
            .iter()
            .map(|(ts, pid, event, fields)| Event {
                ts_ns: *ts,
                task: String::new(),
                pid: *pid,
                cpu: key.cpu,
                event: event.to_string(),
                fields: fields.to_string(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instruments::observe::tally::Comm;

    #[test]
    fn a_workload_spike_becomes_a_capture_naming_the_task_and_what_ran() {
        let spike = WorkloadSpike {
            pid: 42,
            comm: Comm::new(b"rtapp"),
            latency_ns: 20_000_000,
            since_ns: 1_000_000,
            woken_ns: 1_000_300,
            ran_ns: 21_000_000,
            from_timer: true,
            causes: vec![
                (Source::Thread, "spinner".to_string(), 19_500_000),
                (Source::Irq, "local_timer".to_string(), 100_000),
            ],
            events: vec![(21_000_000, 7, "sched_switch", "prev_comm=spinner".into())],
            events_omitted: 0,
        };
        let key = TaskKey {
            cpu: 3,
            task: "rtapp".to_string(),
            container: "rtapp.service".to_string(),
        };
        let c = capture(&key, &spike, (31_000_000, 1_795_315_538_123_000_000));
        let s = &c.summary;
        assert_eq!(s.id, "1795315538113-cpu3");
        assert_eq!(s.task.as_ref().unwrap().container, "rtapp.service");
        assert_eq!(
            s.verdict,
            "CPU 3: task rtapp (pid 42, rtapp.service) woke 20.00ms late: task spinner ran \
             19.50ms (98%) while it waited"
        );
        // The causes add up to the latency: what ran, the timer's 300 ns,
        // and the rest.
        assert_eq!(
            s.causes.iter().map(|c| c.duration_ns).sum::<u64>(),
            20_000_000
        );
        assert_eq!(s.timer_late_ns, Some(300));
        assert_eq!(c.events[0].pid, 7);
    }
}
