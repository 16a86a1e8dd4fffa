//! A capture's CPU over time: which source ran from each traced event to
//! the next, as lanes (one per interrupt, softirq, task, the idle task
//! and the late thread), for the picture of `/spikes/{id}` and
//! `latencyd plot --capture`.
//!
//! The replay follows the attribution's reading of the events (the
//! innermost open interrupt context, otherwise the current task) over the
//! whole span the capture kept, not only the latency; what ran before
//! the oldest kept event is not known and is not drawn.

use super::events::{Event, Kind};
use super::store::Capture;

/// What a lane shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LaneKind {
    /// The thread whose wake-up was late: the sampler, or the observed
    /// task of an observer's capture.
    Late,
    Irq,
    Softirq,
    Task,
    Idle,
}

impl LaneKind {
    pub fn name(self) -> &'static str {
        match self {
            LaneKind::Late => "late",
            LaneKind::Irq => "irq",
            LaneKind::Softirq => "softirq",
            LaneKind::Task => "task",
            LaneKind::Idle => "idle",
        }
    }
}

/// One source and when it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lane {
    pub kind: LaneKind,
    /// As the trace names it: `irq 24 virtio0`, `softirq TIMER`,
    /// `spin (pid 4242)`, ...
    pub name: String,
    /// `[start, end)` in `CLOCK_MONOTONIC` ns, in time order.
    pub spans: Vec<(u64, u64)>,
    /// How long it ran between the deadline and the wake-up.
    pub in_latency_ns: u64,
}

/// The capture's CPU from its first kept event to its last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeline {
    pub from_ns: u64,
    pub to_ns: u64,
    pub deadline_ns: u64,
    pub wakeup_ns: u64,
    /// When the late thread was woken (`sched_waking`), if traced.
    pub woken_ns: Option<u64>,
    /// The late thread's lane first, then by time within the latency,
    /// largest first, then by name.
    pub lanes: Vec<Lane>,
}

/// Where time is going: an interrupt context or a task.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    Context(LaneKind, String),
    Task(String, i32),
}

/// The lanes of `capture`'s events.
pub fn of(capture: &Capture) -> Timeline {
    let s = &capture.summary;
    let late_tid = s.sampler_tid;
    let late_name = match &s.task {
        Some(task) => format!("{} (pid {}, the late task)", task.name, task.pid),
        None => format!("sampler (tid {late_tid})"),
    };
    let wakeup_ns = s.wakeup_mono_ns.max(s.deadline_mono_ns);
    let mut timeline = Timeline {
        from_ns: s.deadline_mono_ns,
        to_ns: wakeup_ns,
        deadline_ns: s.deadline_mono_ns,
        wakeup_ns,
        woken_ns: None,
        lanes: Vec::new(),
    };
    let mut events: Vec<&Event> = capture.events.iter().collect();
    events.sort_by_key(|e| e.ts_ns);
    let (Some(first), Some(last)) = (events.first(), events.last()) else {
        return timeline;
    };
    timeline.from_ns = first.ts_ns.min(timeline.deadline_ns);
    timeline.to_ns = last.ts_ns.max(timeline.wakeup_ns);
    let mut stack: Vec<(LaneKind, String)> = Vec::new();
    let mut task = (first.task.clone(), first.pid);
    let mut previous: Option<(u64, Source)> = None;
    for event in events {
        if let Some((from, ran)) = previous.take() {
            add(&mut timeline, &ran, from, event.ts_ns, late_tid, &late_name);
        }
        if event.pid != task.1 {
            task = (event.task.clone(), event.pid);
        }
        match event.kind() {
            Kind::Switch {
                next_comm,
                next_pid,
                ..
            } => task = (next_comm.to_string(), next_pid),
            Kind::Wakeup { pid }
                if pid == late_tid
                    && event.ts_ns + 1_000 >= timeline.deadline_ns
                    && timeline.woken_ns.is_none() =>
            {
                timeline.woken_ns = Some(event.ts_ns)
            }
            Kind::IrqEntry { irq, name } => {
                stack.push((LaneKind::Irq, format!("irq {irq} {name}")))
            }
            Kind::VectorEntry { name } => stack.push((LaneKind::Irq, name.to_string())),
            Kind::HrtimerEntry { function } => {
                stack.push((LaneKind::Irq, format!("hrtimer {function}")))
            }
            Kind::SoftirqEntry { action } => {
                stack.push((LaneKind::Softirq, format!("softirq {action}")))
            }
            Kind::IrqExit => close(&mut stack, LaneKind::Irq, "irq "),
            Kind::VectorExit => close_vector(&mut stack),
            Kind::HrtimerExit => close(&mut stack, LaneKind::Irq, "hrtimer "),
            Kind::SoftirqExit => close(&mut stack, LaneKind::Softirq, "softirq "),
            Kind::Wakeup { .. } | Kind::Nmi { .. } | Kind::Other => {}
        }
        let now = match stack.last() {
            Some((kind, name)) => Source::Context(*kind, name.clone()),
            None => Source::Task(task.0.clone(), task.1),
        };
        previous = Some((event.ts_ns, now));
    }
    if let Some((from, ran)) = previous {
        // The last event's source runs on to the wake-up, if it is later.
        let end = timeline.wakeup_ns;
        add(&mut timeline, &ran, from, end, late_tid, &late_name);
    }
    timeline.lanes.sort_by(|a, b| {
        (a.kind != LaneKind::Late)
            .cmp(&(b.kind != LaneKind::Late))
            .then(b.in_latency_ns.cmp(&a.in_latency_ns))
            .then(a.kind.cmp(&b.kind))
            .then(a.name.cmp(&b.name))
    });
    timeline
}

/// Closes the innermost context of `kind` whose name starts with
/// `prefix` (and any left open inside it, whose exits were lost).
fn close(stack: &mut Vec<(LaneKind, String)>, kind: LaneKind, prefix: &str) {
    if let Some(pos) = stack
        .iter()
        .rposition(|(k, n)| *k == kind && n.starts_with(prefix))
    {
        stack.truncate(pos);
    }
}

/// Closes the innermost system vector (named without a prefix).
fn close_vector(stack: &mut Vec<(LaneKind, String)>) {
    if let Some(pos) = stack.iter().rposition(|(k, n)| {
        *k == LaneKind::Irq && !n.starts_with("irq ") && !n.starts_with("hrtimer ")
    }) {
        stack.truncate(pos);
    }
}

/// Gives `[from, to)` to `source`'s lane.
fn add(timeline: &mut Timeline, source: &Source, from: u64, to: u64, late_tid: i32, late: &str) {
    if to <= from {
        return;
    }
    let (kind, name) = match source {
        Source::Context(kind, name) => (*kind, name.clone()),
        Source::Task(_, 0) => (LaneKind::Idle, "idle".to_string()),
        Source::Task(_, pid) if *pid == late_tid => (LaneKind::Late, late.to_string()),
        Source::Task(comm, pid) => (LaneKind::Task, format!("{comm} (pid {pid})")),
    };
    let overlap = to
        .min(timeline.wakeup_ns)
        .saturating_sub(from.max(timeline.deadline_ns));
    let lane = match timeline
        .lanes
        .iter()
        .position(|l| l.kind == kind && l.name == name)
    {
        Some(i) => &mut timeline.lanes[i],
        None => {
            timeline.lanes.push(Lane {
                kind,
                name,
                spans: Vec::new(),
                in_latency_ns: 0,
            });
            timeline.lanes.last_mut().expect("just pushed")
        }
    };
    lane.in_latency_ns += overlap;
    match lane.spans.last_mut() {
        Some(last) if last.1 == from => last.1 = to,
        _ => lane.spans.push((from, to)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forensics::store::{Summary, TaskRef};

    fn event(ts_us: u64, task: &str, pid: i32, name: &str, fields: &str) -> Event {
        Event {
            ts_ns: ts_us * 1_000,
            task: task.to_string(),
            pid,
            cpu: 1,
            event: name.to_string(),
            fields: fields.to_string(),
        }
    }

    fn capture(events: Vec<Event>, task: Option<TaskRef>) -> Capture {
        Capture {
            summary: Summary {
                id: "1795315538123-cpu1".to_string(),
                cpu: 1,
                task,
                trigger: "threshold".to_string(),
                at: "2026-11-26T06:00:00.000Z".to_string(),
                latency_ns: 300_000,
                deadline_mono_ns: 1_000_000,
                wakeup_mono_ns: 1_300_000,
                sampler_tid: 77,
                verdict: "spin".to_string(),
                causes: vec![],
                timer_late_ns: Some(0),
                complete: true,
                gaps: vec![],
                steal_ns: None,
                smi_count: None,
                events_omitted: 0,
                timerlat: None,
                no_sampler_capture: None,
            },
            events,
        }
    }

    /// A spinning task holds the CPU from before the deadline; the timer
    /// interrupt wakes the sampler at the deadline; the spinner runs on
    /// until it yields; the sampler runs.
    fn spin_events() -> Vec<Event> {
        let switch = |from: &str, from_pid: i32, to: &str, to_pid: i32| {
            format!(
                "prev_comm={from} prev_pid={from_pid} prev_prio=120 prev_state=R ==> \
                 next_comm={to} next_pid={to_pid} next_prio=120"
            )
        };
        vec![
            event(
                900,
                "<idle>",
                0,
                "sched_switch",
                &switch("swapper/1", 0, "spin", 4242),
            ),
            event(1000, "spin", 4242, "local_timer_entry", "vector=236"),
            event(
                1001,
                "spin",
                4242,
                "hrtimer_expire_entry",
                "hrtimer=x function=hrtimer_wakeup now=1",
            ),
            event(
                1002,
                "spin",
                4242,
                "sched_waking",
                "comm=latencyd-s1 pid=77 prio=19 target_cpu=001",
            ),
            event(1003, "spin", 4242, "hrtimer_expire_exit", "hrtimer=x"),
            event(1004, "spin", 4242, "local_timer_exit", "vector=236"),
            event(
                1100,
                "spin",
                4242,
                "irq_handler_entry",
                "irq=24 name=virtio0",
            ),
            event(1110, "spin", 4242, "irq_handler_exit", "irq=24 ret=handled"),
            event(
                1290,
                "spin",
                4242,
                "sched_switch",
                &switch("spin", 4242, "latencyd-s1", 77),
            ),
            event(1300, "latencyd-s1", 77, "sys_exit", "NR 230 = 0"),
        ]
    }

    #[test]
    fn lanes_follow_the_cpu_through_the_spike() {
        let t = of(&capture(spin_events(), None));
        assert_eq!((t.from_ns, t.to_ns), (900_000, 1_300_000));
        assert_eq!(t.woken_ns, Some(1_002_000));
        let lane = |name: &str| t.lanes.iter().find(|l| l.name == name).unwrap();
        assert_eq!(t.lanes[0].kind, LaneKind::Late, "{:?}", t.lanes);
        assert_eq!(t.lanes[0].name, "sampler (tid 77)");
        // The spinner: 900-1000, 1004-1100, 1110-1290 µs; of which inside
        // the latency (1000-1300): 96 + 180 µs.
        let spin = lane("spin (pid 4242)");
        assert_eq!(spin.kind, LaneKind::Task);
        assert_eq!(
            spin.spans,
            vec![
                (900_000, 1_000_000),
                (1_004_000, 1_100_000),
                (1_110_000, 1_290_000)
            ]
        );
        assert_eq!(spin.in_latency_ns, 276_000);
        assert_eq!(t.lanes[1].name, "spin (pid 4242)", "the main cause next");
        assert_eq!(lane("irq 24 virtio0").spans, vec![(1_100_000, 1_110_000)]);
        assert_eq!(lane("hrtimer hrtimer_wakeup").in_latency_ns, 2_000);
        assert_eq!(lane("local_timer").in_latency_ns, 2_000);
        assert_eq!(lane("sampler (tid 77)").spans, vec![(1_290_000, 1_300_000)]);
        // The lanes cover the latency exactly once.
        let total: u64 = t.lanes.iter().map(|l| l.in_latency_ns).sum();
        assert_eq!(total, 300_000);
    }

    #[test]
    fn an_observed_task_is_the_late_lane_and_no_events_draw_nothing() {
        let task = TaskRef {
            name: "<b>ctl</b>".to_string(),
            pid: 77,
            container: String::new(),
        };
        let t = of(&capture(spin_events(), Some(task.clone())));
        assert_eq!(t.lanes[0].name, "<b>ctl</b> (pid 77, the late task)");
        let mut empty = capture(vec![], Some(task));
        let t = of(&empty);
        assert!(t.lanes.is_empty());
        assert_eq!((t.from_ns, t.to_ns), (1_000_000, 1_300_000));
        // A file whose wake-up is before its deadline: an empty latency.
        empty.summary.wakeup_mono_ns = 0;
        let t = of(&empty);
        assert_eq!(
            (t.from_ns, t.to_ns, t.wakeup_ns),
            (1_000_000, 1_000_000, 1_000_000)
        );
    }
}
