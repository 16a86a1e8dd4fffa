//! What delayed one wake-up, from the events of its CPU.
//!
//! In the spirit of rtla timerlat's auto-analysis: the time from the
//! missed deadline to the sampler's wake-up is cut at every event of that
//! CPU, and each piece goes to whatever ran then — the innermost
//! interrupt context if one was open (hard IRQ, system vector, hrtimer
//! callback, softirq), otherwise the current task. Three phases give a
//! task's time its meaning:
//!
//! 1. before the sampler's timer woke it (`sched_wakeup`
//!    of its TID): the timer interrupt itself was late. Interrupt handlers
//!    running then are named; time in plain task context is what no event
//!    accounts for — interrupts off in that task, an idle-state exit, an
//!    SMI, or the host not running this vCPU (`unaccounted`);
//! 2. woken but not yet switched in: every other task that ran held the
//!    CPU against the sampler (`task`);
//! 3. switched in: the sampler's own way back to user space (`sampler`).
//!
//! NMIs are reported by the kernel with their duration when they return;
//! that time moves from what they interrupted to `nmi`. Hypervisor steal,
//! which the kernel reports only in 10 ms ticks, is given the part of the
//! unaccounted time it can explain (`steal`). The pieces add up to the
//! whole latency, exactly.
//!
//! The attributor is fed a CPU's events in order, from the oldest the
//! ring buffer holds, so the task and the interrupt contexts open at the
//! deadline are known; it keeps only the events near the spike.

mod causes;

pub use causes::{Attribution, CAUSE_KINDS, Cause};
use causes::{Key, Ledger, timer_late_while};

use super::events::{Event, Kind, interrupt_of_thread};

/// Events kept beside the attribution: from this long before the
/// deadline to this long after the wake-up.
pub const CONTEXT_NS: u64 = 200_000;
/// At most this many events are kept in one capture (a 10 ms spike at a
/// heavy interrupt load is well under it); more are counted as omitted.
pub const MAX_EVENTS: usize = 20_000;

/// An open interrupt context.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Context {
    Irq(String),
    Vector(String),
    Hrtimer(String),
    Softirq(String),
}

impl Context {
    fn same_type(&self, other: &Context) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
    }
}

#[derive(Debug, Clone, Default)]
struct Task {
    comm: String,
    pid: i32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    Sleeping,
    Woken,
    Running,
}

/// Feeds on a CPU's events in order; `finish` gives the attribution.
pub struct Attributor {
    deadline_ns: u64,
    wakeup_ns: u64,
    sampler_tid: i32,
    current: Task,
    stack: Vec<Context>,
    phase: Phase,
    timer_woke_ns: Option<u64>,
    last_ts: Option<u64>,
    first_ts: Option<u64>,
    /// The time of each cause so far.
    ledger: Ledger,
    /// The key and length of the last piece attributed (an NMI takes its
    /// time from it).
    last_piece: Option<(Key, u64)>,
    lost_in_window: u64,
    lost_before: bool,
    /// Each task's latest kernel `prio`: a task may change its policy
    /// while it runs, and its switch out after the spike tells the
    /// priority it ran at.
    prios: Vec<(i32, i32)>,
    events: Vec<Event>,
    events_omitted: u64,
}

impl Attributor {
    pub fn new(deadline_ns: u64, wakeup_ns: u64, sampler_tid: i32) -> Attributor {
        Attributor {
            deadline_ns,
            wakeup_ns: wakeup_ns.max(deadline_ns),
            sampler_tid,
            current: Task::default(),
            stack: Vec::new(),
            phase: Phase::Sleeping,
            timer_woke_ns: None,
            last_ts: None,
            first_ts: None,
            ledger: Ledger::default(),
            last_piece: None,
            lost_in_window: 0,
            lost_before: false,
            prios: Vec::new(),
            events: Vec::new(),
            events_omitted: 0,
        }
    }

    /// True once an event past the wake-up (and its context) was fed:
    /// the caller may stop reading.
    pub fn done(&self) -> bool {
        self.last_ts
            .is_some_and(|t| t > self.wakeup_ns.saturating_add(CONTEXT_NS))
    }

    /// The ring buffer lost `count` events here.
    pub fn lost(&mut self, count: u64) {
        match self.last_ts {
            Some(t) if t + 1_000 >= self.deadline_ns && t <= self.wakeup_ns => {
                self.lost_in_window += count
            }
            _ if self.phase == Phase::Sleeping => self.lost_before = true,
            _ => {}
        }
    }

    pub fn feed(&mut self, event: &Event) {
        let ts = event.ts_ns;
        match self.last_ts {
            Some(prev) => self.attribute(prev, ts.max(prev)),
            None => {
                // The oldest event the buffer still holds: what came
                // before it is not known.
                self.first_ts = Some(ts);
                let lost = ts.min(self.wakeup_ns).saturating_sub(self.deadline_ns);
                if lost > 0 {
                    self.ledger.add(
                        (
                            "unaccounted",
                            "before the oldest event the ring buffer still held".to_string(),
                            None,
                        ),
                        lost,
                    );
                }
            }
        }
        self.last_ts = Some(self.last_ts.map_or(ts, |prev| ts.max(prev)));
        if ts + CONTEXT_NS >= self.deadline_ns && ts <= self.wakeup_ns.saturating_add(CONTEXT_NS) {
            if self.events.len() < MAX_EVENTS {
                self.events.push(event.clone());
            } else {
                self.events_omitted += 1;
            }
        }
        // The task column is the task that was current when the event
        // fired (the interrupted one, inside an interrupt).
        if event.pid != self.current.pid || self.current.comm.is_empty() {
            self.current = Task {
                comm: event.task.clone(),
                pid: event.pid,
            };
        } else if event.task != self.current.comm && !event.task.starts_with('<') {
            // The same task under a new name (it exec'd); "<...>" is the
            // kernel's placeholder for a name it did not record.
            self.current.comm = event.task.clone();
        }
        // The text shows microseconds: an event stamped up to 1 µs before
        // the deadline may be after it.
        let this_period = ts + 1_000 >= self.deadline_ns;
        match event.kind() {
            Kind::Switch {
                prev_pid,
                prev_prio,
                next_comm,
                next_pid,
                next_prio,
            } => {
                self.note_prio(prev_pid, prev_prio);
                self.note_prio(next_pid, next_prio);
                self.current = Task {
                    comm: next_comm.to_string(),
                    pid: next_pid,
                };
                if next_pid == self.sampler_tid && self.phase == Phase::Woken {
                    self.phase = Phase::Running;
                }
            }
            Kind::Wakeup { pid } if pid == self.sampler_tid && this_period => {
                if self.phase == Phase::Sleeping {
                    self.phase = Phase::Woken;
                    self.timer_woke_ns = Some(ts);
                }
            }
            Kind::IrqEntry { irq, name } => {
                self.stack.push(Context::Irq(format!("irq {irq} {name}")))
            }
            Kind::VectorEntry { name } => self.stack.push(Context::Vector(name.to_string())),
            Kind::HrtimerEntry { function } => self
                .stack
                .push(Context::Hrtimer(format!("hrtimer {function}"))),
            Kind::SoftirqEntry { action } => self
                .stack
                .push(Context::Softirq(format!("softirq {action}"))),
            Kind::IrqExit => self.close(&Context::Irq(String::new())),
            Kind::VectorExit => self.close(&Context::Vector(String::new())),
            Kind::HrtimerExit => self.close(&Context::Hrtimer(String::new())),
            Kind::SoftirqExit => self.close(&Context::Softirq(String::new())),
            Kind::Nmi { handler, delta_ns } => {
                let start = ts.saturating_sub(delta_ns).max(self.deadline_ns);
                let end = ts.min(self.wakeup_ns);
                if end > start
                    && let Some((key, len)) = self.last_piece.take()
                {
                    let moved = (end - start).min(len);
                    self.ledger.take(&key, moved);
                    self.ledger
                        .add(("nmi", format!("nmi {handler}"), None), moved);
                    self.last_piece = Some((key, len - moved));
                }
            }
            Kind::Wakeup { .. } | Kind::Other => {}
        }
    }

    fn note_prio(&mut self, pid: i32, prio: i32) {
        match self.prios.iter_mut().find(|(p, _)| *p == pid) {
            Some((_, known)) => *known = prio,
            None => self.prios.push((pid, prio)),
        }
    }

    /// Closes the innermost context of `kind`'s type (and any left open
    /// inside it, whose exits the buffer lost).
    fn close(&mut self, kind: &Context) {
        if let Some(pos) = self.stack.iter().rposition(|c| c.same_type(kind)) {
            self.stack.truncate(pos);
        }
    }

    /// Gives `[from, to)`, clipped to the latency, to what ran.
    fn attribute(&mut self, from: u64, to: u64) {
        let from = from.max(self.deadline_ns);
        let to = to.min(self.wakeup_ns);
        if to <= from {
            return;
        }
        let key = self.key();
        self.ledger.add(key.clone(), to - from);
        self.last_piece = Some((key, to - from));
    }

    /// What is running now, as a cause.
    fn key(&self) -> Key {
        if let Some(ctx) = self.stack.last() {
            return match ctx {
                Context::Irq(name) | Context::Vector(name) | Context::Hrtimer(name) => {
                    ("irq", name.clone(), None)
                }
                Context::Softirq(name) => ("softirq", name.clone(), None),
            };
        }
        let task = &self.current;
        if task.pid == self.sampler_tid {
            return (
                "sampler",
                "the sampler's return to user space".to_string(),
                None,
            );
        }
        match (self.phase, task.pid) {
            (Phase::Sleeping, 0) => (
                "unaccounted",
                "timer interrupt late with the CPU idle (idle-state exit, SMI or the host)"
                    .to_string(),
                None,
            ),
            (Phase::Sleeping, pid) => ("unaccounted", timer_late_while(&task.comm), Some(pid)),
            (_, 0) => (
                "sampler",
                "wake-up: the scheduler leaving idle".to_string(),
                None,
            ),
            (_, pid) => match interrupt_of_thread(&task.comm) {
                // An interrupt's thread (PREEMPT_RT): the interrupt it
                // serves, named as its hard part is.
                Some((irq, action)) => ("irq", format!("irq {irq} {action} (thread)"), Some(pid)),
                None => ("task", task.comm.clone(), Some(pid)),
            },
        }
    }

    /// What the trace could not show, each said.
    fn gaps(&self) -> Vec<String> {
        let mut gaps = Vec::new();
        match self.last_ts {
            None => gaps.push("no event of this CPU was in the trace".to_string()),
            Some(_) if self.first_ts.is_some_and(|f| f > self.deadline_ns) => gaps.push(
                "the ring buffer no longer held the deadline: raise forensics.buffer_size_kb"
                    .to_string(),
            ),
            Some(_) if self.lost_before => {
                gaps.push("events before the deadline were lost".to_string());
            }
            Some(_) => {}
        }
        if self.lost_in_window > 0 {
            gaps.push(format!(
                "{} events between the deadline and the wake-up were lost",
                self.lost_in_window
            ));
        }
        if self.last_ts.is_some() && self.phase == Phase::Sleeping {
            gaps.push("the sampler's wake-up is not in the trace".to_string());
        }
        gaps
    }

    /// The attribution; `steal_ns` is the hypervisor steal the kernel
    /// reported for this CPU around the spike, when it reports any.
    pub fn finish(mut self, steal_ns: Option<u64>) -> Attribution {
        if let Some(last) = self.last_ts {
            self.attribute(last, self.wakeup_ns);
        }
        let gaps = self.gaps();
        let latency = self.wakeup_ns - self.deadline_ns;
        if self.last_ts.is_none() {
            let key = (
                "unaccounted",
                "no trace events of this CPU".to_string(),
                None,
            );
            self.ledger.add(key, latency);
        }
        if let Some(steal) = steal_ns.filter(|&s| s > 0) {
            self.ledger.steal_from_unaccounted(steal);
        }
        let causes = self.ledger.into_causes(&self.prios);
        Attribution {
            causes,
            timer_late_ns: self
                .timer_woke_ns
                .map(|t| t.saturating_sub(self.deadline_ns)),
            gaps,
            events: self.events,
            events_omitted: self.events_omitted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forensics::scheduling::{NORMAL, REALTIME, policy_class, user_priority};
    use crate::forensics::verdict::verdict;

    const US: u64 = 1_000;
    const TID: i32 = 500;

    fn ev(ts_us: u64, task: &str, pid: i32, event: &str, fields: &str) -> Event {
        Event {
            ts_ns: ts_us * US,
            task: task.into(),
            pid,
            cpu: 1,
            event: event.into(),
            fields: fields.into(),
        }
    }

    fn switch(ts_us: u64, from: (&str, i32), to: (&str, i32, i32)) -> Event {
        switch_at(ts_us, from, 120, to)
    }

    /// A switch from a task whose kernel priority is `prev_prio`.
    fn switch_at(ts_us: u64, from: (&str, i32), prev_prio: i32, to: (&str, i32, i32)) -> Event {
        ev(
            ts_us,
            from.0,
            from.1,
            "sched_switch",
            &format!(
                "prev_comm={} prev_pid={} prev_prio={prev_prio} prev_state=R ==> next_comm={} next_pid={} next_prio={}",
                from.0, from.1, to.0, to.1, to.2
            ),
        )
    }

    fn wakeup(ts_us: u64, task: (&str, i32)) -> Event {
        ev(
            ts_us,
            task.0,
            task.1,
            "sched_wakeup",
            &format!("comm=latencyd-cpu1 pid={TID} prio=19 target_cpu=001"),
        )
    }

    fn attribute(
        events: &[Event],
        deadline_us: u64,
        wakeup_us: u64,
        steal: Option<u64>,
    ) -> Attribution {
        let mut a = Attributor::new(deadline_us * US, wakeup_us * US, TID);
        for e in events {
            a.feed(e);
        }
        a.finish(steal)
    }

    fn total(a: &Attribution) -> u64 {
        a.causes.iter().map(|c| c.duration_ns).sum()
    }

    #[test]
    fn a_higher_priority_task_is_named_with_its_time() {
        // A task takes the CPU at 100 µs and makes itself FIFO 95 (kernel
        // prio 4, seen when it switches out); the sampler's
        // timer fires at 1000 on time, it waits until the task sleeps at
        // 3990, runs at 3995 and reads the time at 4000.
        let hog = ("culprit", 77);
        let events = [
            switch(100, ("swapper/1", 0), ("culprit", 77, 120)),
            ev(1000, hog.0, hog.1, "local_timer_entry", "vector=236"),
            ev(
                1001,
                hog.0,
                hog.1,
                "hrtimer_expire_entry",
                "hrtimer=0 now=1 function=hrtimer_wakeup",
            ),
            wakeup(1002, hog),
            ev(1003, hog.0, hog.1, "hrtimer_expire_exit", "hrtimer=0"),
            ev(1004, hog.0, hog.1, "local_timer_exit", "vector=236"),
            switch_at(3995, hog, 4, ("latencyd-cpu1", TID, 19)),
        ];
        let a = attribute(&events, 1000, 4000, None);
        assert_eq!(total(&a), 3000 * US, "{:?}", a.causes);
        let main = &a.causes[0];
        assert_eq!(
            (main.kind.as_str(), main.name.as_str()),
            ("task", "culprit")
        );
        assert_eq!((main.pid, main.priority), (Some(77), Some(95)));
        assert_eq!(main.duration_ns, 2991 * US);
        assert_eq!(a.timer_late_ns, Some(2 * US));
        assert!(a.gaps.is_empty(), "{:?}", a.gaps);
        let sampler: u64 = a
            .causes
            .iter()
            .filter(|c| c.kind == "sampler")
            .map(|c| c.duration_ns)
            .sum();
        assert_eq!(sampler, 5 * US);
        let v = verdict(1, 3000 * US, &a.causes);
        assert!(
            v.contains("task culprit (pid 77, real-time 95) ran 2.99ms (100%)"),
            "{v}"
        );
    }

    #[test]
    fn a_task_that_execd_is_named_one_way_with_its_class() {
        // `taskset` (pid 77) holds the CPU with the timer interrupt late,
        // then execs into `lat-culprit`, which runs on as FIFO 90 (kernel
        // prio 9) until it sleeps; it is gone before its policy is read.
        let before = ("taskset", 77);
        let after = ("lat-culprit", 77);
        let events = [
            switch(100, ("swapper/1", 0), ("taskset", 77, 120)),
            ev(1010, before.0, before.1, "local_timer_entry", "vector=236"),
            ev(
                1011,
                before.0,
                before.1,
                "hrtimer_expire_entry",
                "hrtimer=0 now=1 function=hrtimer_wakeup",
            ),
            wakeup(1012, before),
            ev(1013, before.0, before.1, "hrtimer_expire_exit", "hrtimer=0"),
            ev(1014, before.0, before.1, "local_timer_exit", "vector=236"),
            ev(
                1500,
                after.0,
                after.1,
                "sched_waking",
                "comm=x pid=5 prio=120 target_cpu=000",
            ),
            switch_at(3995, after, 9, ("latencyd-cpu1", TID, 19)),
        ];
        let a = attribute(&events, 1000, 4000, None);
        assert_eq!(total(&a), 3000 * US, "{:?}", a.causes);
        let names: Vec<&str> = a.causes.iter().map(|c| c.name.as_str()).collect();
        assert!(
            names.iter().all(|n| !n.contains("taskset")),
            "one name for pid 77: {names:?}"
        );
        assert!(
            names.contains(&"timer interrupt late while lat-culprit ran (interrupts off in it, SMI or the host)"),
            "{names:?}"
        );
        let main = &a.causes[0];
        assert_eq!(
            (main.name.as_str(), main.policy.as_deref(), main.priority),
            ("lat-culprit", Some(REALTIME), Some(90))
        );
        let v = verdict(1, 3000 * US, &a.causes);
        assert!(v.contains("task lat-culprit (pid 77, real-time 90)"), "{v}");
    }

    #[test]
    fn a_preempt_rt_kernels_trace_names_the_spinner() {
        // CPU 0's trace on Debian's 6.1 PREEMPT_RT kernel (seven flag
        // columns, interrupts threaded), from the kernel matrix: a
        // SCHED_FIFO 90 spinner held the sampler (tid 160) off for 300 ms.
        let text = include_str!("../../../tests/data/kernels/6.1-rt-amd64/forensics-trace");
        let mut attributor = Attributor::new(14_623_210_490, 14_929_398_280, 160);
        for line in text.lines() {
            match super::super::events::parse_line(line) {
                super::super::events::Line::Event(event) => attributor.feed(&event),
                super::super::events::Line::Lost(count) => attributor.lost(count),
                super::super::events::Line::Other => {}
            }
        }
        let a = attributor.finish(None);
        assert!(a.gaps.is_empty(), "{:?}", a.gaps);
        let main = &a.causes[0];
        assert_eq!(
            (main.kind.as_str(), main.name.as_str(), main.pid),
            ("task", "matrix-fx", Some(177))
        );
        assert!(main.duration_ns * 100 / 306_187_790 >= 95, "{:?}", a.causes);
        assert_eq!(total(&a), 306_187_790, "{:?}", a.causes);
    }

    #[test]
    fn an_interrupts_thread_is_the_interrupt_it_serves() {
        let t = ("irq/4-ttyS0", 99);
        let events = [
            switch(10, ("swapper/1", 0), (t.0, t.1, 49)),
            ev(
                1001,
                t.0,
                t.1,
                "hrtimer_expire_entry",
                "hrtimer=0 now=1 function=hrtimer_wakeup",
            ),
            wakeup(1002, t),
            ev(1003, t.0, t.1, "hrtimer_expire_exit", "hrtimer=0"),
            switch_at(3995, t, 49, ("latencyd-cpu1", TID, 19)),
        ];
        let a = attribute(&events, 1000, 4000, None);
        let main = &a.causes[0];
        assert_eq!(
            (main.kind.as_str(), main.name.as_str(), main.pid),
            ("irq", "irq 4 ttyS0 (thread)", Some(99))
        );
    }

    #[test]
    fn interrupts_and_softirqs_nest_and_an_nmi_takes_its_time() {
        let t = ("bash", 9);
        let events = [
            switch(10, ("swapper/1", 0), ("bash", 9, 120)),
            ev(
                100,
                t.0,
                t.1,
                "irq_handler_entry",
                "irq=36 name=virtio1-req.0",
            ),
            // The deadline (200) falls inside the handler.
            ev(400, t.0, t.1, "irq_handler_exit", "irq=36 ret=handled"),
            ev(400, t.0, t.1, "softirq_entry", "vec=3 [action=NET_RX]"),
            ev(
                700,
                t.0,
                t.1,
                "nmi_handler",
                "handler=perf_event_nmi_handler+0x0/0x30 delta_ns=100000 handled=1",
            ),
            ev(900, t.0, t.1, "softirq_exit", "vec=3 [action=NET_RX]"),
            ev(900, t.0, t.1, "local_timer_entry", "vector=236"),
            wakeup(905, t),
            ev(910, t.0, t.1, "local_timer_exit", "vector=236"),
            switch(950, t, ("latencyd-cpu1", TID, 19)),
        ];
        let a = attribute(&events, 200, 960, None);
        assert_eq!(total(&a), 760 * US, "{:?}", a.causes);
        let get = |name: &str| {
            a.causes
                .iter()
                .find(|c| c.name == name)
                .map_or(0, |c| c.duration_ns / US)
        };
        assert_eq!(get("softirq NET_RX"), 400);
        assert_eq!(get("irq 36 virtio1-req.0"), 200);
        assert_eq!(get("nmi perf_event_nmi_handler"), 100);
        assert_eq!(get("local_timer"), 10);
        assert_eq!(get("bash"), 40);
        assert_eq!(get("the sampler's return to user space"), 10);
        assert_eq!(a.causes[0].kind, "softirq");
        // The softirq ran before the timer fired: the timer was 705 µs late.
        assert_eq!(a.timer_late_ns, Some(705 * US));
    }

    #[test]
    fn a_silent_gap_is_unaccounted_and_steal_explains_what_it_can() {
        let hog = ("spinner", 33);
        let events = [
            switch(10, ("swapper/1", 0), ("spinner", 33, 120)),
            // Nothing from 1000 (deadline) until the timer at 3000: the
            // timer interrupt was held off.
            ev(3000, hog.0, hog.1, "local_timer_entry", "vector=236"),
            wakeup(3001, hog),
            ev(3002, hog.0, hog.1, "local_timer_exit", "vector=236"),
            switch(3003, hog, ("latencyd-cpu1", TID, 19)),
        ];
        let a = attribute(&events, 1000, 3005, None);
        assert_eq!(total(&a), 2005 * US);
        assert_eq!(a.causes[0].kind, "unaccounted");
        assert!(
            a.causes[0].name.contains("while spinner ran"),
            "{}",
            a.causes[0].name
        );
        assert_eq!(a.causes[0].duration_ns, 2000 * US);
        let v = verdict(1, 2005 * US, &a.causes);
        assert!(v.contains("no event accounts for"), "{v}");
        // 1.5 ms of steal moves from the unaccounted time, no more.
        let a = attribute(&events, 1000, 3005, Some(1500 * US));
        assert_eq!(total(&a), 2005 * US);
        assert_eq!(
            (a.causes[0].kind.as_str(), a.causes[0].duration_ns),
            ("steal", 1500 * US)
        );
        let a = attribute(&events, 1000, 3005, Some(10_000 * US));
        assert_eq!(total(&a), 2005 * US);
        assert_eq!(
            (a.causes[0].kind.as_str(), a.causes[0].duration_ns),
            ("steal", 2000 * US)
        );
    }

    #[test]
    fn a_trace_that_misses_the_spike_says_so() {
        let a = attribute(&[], 1000, 2000, None);
        assert_eq!(total(&a), 1000 * US);
        assert_eq!(a.causes[0].kind, "unaccounted");
        assert!(!a.gaps.is_empty());
        // The buffer starts after the deadline: overwritten.
        let t = ("bash", 9);
        let events = [wakeup(1500, t), switch(1600, t, ("latencyd-cpu1", TID, 19))];
        let a = attribute(&events, 1000, 1700, None);
        assert!(
            a.gaps.iter().any(|g| g.contains("buffer_size_kb")),
            "{:?}",
            a.gaps
        );
        assert_eq!(total(&a), 700 * US);
        // Events lost inside the window.
        let mut at = Attributor::new(1000 * US, 2000 * US, TID);
        at.feed(&switch(900, ("swapper/1", 0), ("bash", 9, 120)));
        at.feed(&ev(1200, "bash", 9, "irq_handler_entry", "irq=1 name=x"));
        at.lost(5);
        at.feed(&wakeup(1900, t));
        let a = at.finish(None);
        assert!(
            a.gaps.iter().any(|g| g.contains("5 events")),
            "{:?}",
            a.gaps
        );
    }

    #[test]
    fn only_events_near_the_spike_are_kept() {
        let t = ("bash", 9);
        let mut events = vec![switch(10, ("swapper/1", 0), ("bash", 9, 120))];
        events.extend((0..100).map(|i| {
            ev(
                20 + i * 10,
                t.0,
                t.1,
                "sched_waking",
                "comm=x pid=1 prio=1 target_cpu=001",
            )
        }));
        events.push(wakeup(5000, t));
        events.push(switch(5001, t, ("latencyd-cpu1", TID, 19)));
        events.push(ev(
            9000,
            t.0,
            t.1,
            "sched_waking",
            "comm=x pid=1 prio=1 target_cpu=001",
        ));
        let a = attribute(&events, 4900, 5002, None);
        assert!(a.events.iter().all(|e| e.ts_ns + CONTEXT_NS >= 4900 * US));
        assert!(a.events.iter().all(|e| e.ts_ns <= 5002 * US + CONTEXT_NS));
        assert_eq!(a.events.len(), 2);
        assert_eq!(user_priority(4), Some(95));
        assert_eq!(user_priority(120), Some(0));
        assert_eq!(user_priority(-1), None);
        assert_eq!(
            [policy_class(4), policy_class(120), policy_class(-1)],
            [REALTIME, NORMAL, "SCHED_DEADLINE"]
        );
    }
}
