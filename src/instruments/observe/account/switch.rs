//! One CPU's account at the moments tasks change: a wake-up (a real-time
//! task woken onto the CPU starts waiting, from its sleep timer's expiry
//! when one woke it) and a context switch (the run that ends is closed;
//! a workload task that arrives after its wake-up is a latency sample,
//! and a capture when late enough).

use super::{
    CpuAccount, MAX_RT_PRIO, MAX_TIMERS, MAX_WAITING, Role, Running, SLEEPING_STATES,
    TIMER_WAKEUP_GAP_NS, Waiting,
};
use crate::instruments::observe::events::Event;
use crate::instruments::observe::tally::{Comm, TaskKinds, WakeSample};

impl CpuAccount {
    /// A task woken: a real-time one woken onto this CPU waits from its
    /// timer's expiry (when a sleep timer woke it) or from now; the task
    /// running meanwhile starts blocking it.
    pub(super) fn wakeup(&mut self, ts: u64, comm: &[u8], pid: i32, prio: i32, target_cpu: i32) {
        let fired = self.fired.remove(&pid);
        if target_cpu != self.cpu || prio >= MAX_RT_PRIO {
            return;
        }
        let (since_ns, from_timer) = match fired {
            Some((at, late)) if ts.saturating_sub(at) <= TIMER_WAKEUP_GAP_NS => {
                (at.saturating_sub(late), true)
            }
            _ => (ts, false),
        };
        if self.waiting.len() >= MAX_WAITING
            && !self.waiting.contains_key(&pid)
            && let Some(oldest) = self
                .waiting
                .iter()
                .min_by_key(|(_, w)| w.woken_ns)
                .map(|(&p, _)| p)
        {
            self.waiting.remove(&oldest);
            self.counts.waiting_let_go += 1;
        }
        self.waiting.insert(
            pid,
            Waiting {
                comm: Comm::new(comm),
                since_ns,
                woken_ns: ts,
                from_timer,
                causes: Vec::new(),
            },
        );
        if let Some(running) = &mut self.running
            && running.pid != pid
            && running.pid != 0
            && running.blocking.is_none()
        {
            running.blocking = Some((ts, running.nested_ns));
        }
    }

    /// A context switch: the task leaving closes its run (remembered as
    /// preempted while still runnable); a workload task arriving after its
    /// wake-up is a latency sample (and a capture when late enough).
    pub(super) fn switch(&mut self, ts: u64, event: &Event<'_>, kinds: &mut impl TaskKinds) {
        let Event::Switch {
            prev_comm,
            prev_pid,
            prev_prio,
            prev_state,
            next_comm,
            next_pid,
            next_prio,
        } = *event
        else {
            return;
        };
        if !self.close_run(ts, prev_pid, prev_prio, prev_comm, kinds) {
            self.counts.untraced_switches += 1;
        }
        if prev_pid != 0 {
            if prev_state & SLEEPING_STATES == 0 && prev_prio < MAX_RT_PRIO {
                self.preempted.insert(prev_pid, ts);
            } else {
                self.preempted.remove(&prev_pid);
            }
            // Woken but seen only leaving: no sample.
            self.waiting.remove(&prev_pid);
        }
        if next_pid != 0 {
            self.switched_in.insert(next_pid, ts);
        }
        let role = Self::role(next_pid, next_prio, next_comm, kinds);
        match self.waiting.remove(&next_pid) {
            Some(w) if role == Role::Workload => {
                let latency_ns = ts.saturating_sub(w.since_ns);
                self.samples.push(WakeSample {
                    pid: next_pid,
                    comm: w.comm,
                    latency_ns,
                    at_ns: ts,
                    from_timer: w.from_timer,
                });
                self.preempted.remove(&next_pid);
                if self
                    .capture_ns
                    .is_some_and(|at_least| latency_ns >= at_least)
                {
                    self.spike(ts, next_pid, w, event);
                }
            }
            // A kernel thread's wake-up is not the workload's.
            Some(_) => {}
            None => {
                if self.preempted.remove(&next_pid).is_none() && role == Role::Workload {
                    self.counts.unseen_wakeups += 1;
                }
            }
        }
        let blocking = (next_pid != 0 && !self.waiting.is_empty()).then_some((ts, 0));
        self.running = Some(Running {
            pid: next_pid,
            since_ns: ts,
            nested_ns: 0,
            blocking,
        });
        if self.preempted.len() >= MAX_TIMERS {
            self.preempted = Default::default();
        }
    }
}
