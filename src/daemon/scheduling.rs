//! Each sampler's scheduling read again at every collector tick: a tuned
//! profile, tuna, `chrt`, `taskset` or a cgroup move can change a running
//! thread's policy, priority or CPUs, and a sampler that was demoted must
//! not go on being called real-time.
//!
//! What a sampler should run is what it set for itself at start: the
//! configured policy and priority on its CPU alone, or, where the kernel
//! refused the policy (`realtime.required = false`), what it ran as then.
//! A change from that is counted (`latencyd_sampler_scheduling_changes_total`),
//! logged once with what it became, shown in `/api/v1/status` and the
//! page, and turns `latencyd_sampler_realtime` to 0 while it lasts. With
//! `realtime.restore = true` (the default) the collector sets the sampler
//! back at once, and says so; with `false` it is left as the operator (or
//! the tool) made it.
//!
//! Why restore by default: the configured policy is what the measurement
//! means, and a quietly demoted sampler measures something else; a tool
//! that keeps demoting it is then a fight seen in the counter and in
//! `LatencydSamplerSchedulingChanged`, which the operator ends either in
//! the tool or with `realtime.restore = false`. The warn line is said at
//! most once a minute per CPU in such a fight, with how many changes it
//! did not say.
//!
//! Memory locking is not re-read: `mlockall` is a property of the address
//! space that only latencyd itself can undo (`munlockall` acts on the
//! caller's own process), so nothing outside can change it behind its back.

use std::collections::BTreeMap;

use std::sync::Mutex;

use super::state::{MonitorState, SchedulingSeen, lock};
use crate::rt::engine::{Engine, Slot};
use crate::rt::sys::{self, Policy, ThreadScheduling};
use crate::rt::thread::FailedStep;

/// What the configuration asks of every sampler.
#[derive(Debug, Clone, Copy)]
struct Wanted {
    pub policy: Policy,
    /// Set a changed sampler back (`realtime.restore`).
    pub restore: bool,
}

/// One sampler as last read.
#[derive(Debug)]
struct Watched {
    tid: i32,
    /// What it set for itself at start.
    expected: ThreadScheduling,
    /// What it was found running instead, until it runs as expected again.
    changed_to: Option<ThreadScheduling>,
    /// When a change was last said (`CLOCK_MONOTONIC`), and the changes
    /// found since that were not.
    said_at_ns: Option<u64>,
    unsaid: u64,
}

/// A fight (a tool that demotes the sampler again and again) is said at
/// most this often per CPU.
const SAY_EVERY_NS: u64 = 60 * crate::units::NS_PER_SEC;

/// The samplers' scheduling by CPU, compared tick by tick.
#[derive(Debug, Default)]
pub(super) struct SchedulingWatch {
    by_cpu: BTreeMap<usize, Watched>,
}

/// A change found at a step: the CPU, and the line to log (`None` while
/// a fight on the CPU is said at most once a minute).
struct Change {
    pub cpu: usize,
    pub said: Option<String>,
}

impl SchedulingWatch {
    /// Reads every sampler's scheduling again (off the state's lock) and
    /// files what it found: a changed sampler is not real-time while it
    /// lasts, and each change is counted and said.
    pub(super) fn check(&mut self, engine: &Engine, state: &Mutex<MonitorState>) {
        let wanted = {
            let s = lock(state);
            Wanted {
                policy: s.config.measure.policy,
                restore: s.config.realtime.restore,
            }
        };
        let (mut seen, changes) = self.step(engine, wanted);
        let mut s = lock(state);
        for view in &mut s.cpus {
            let now = seen.remove(&view.cpu).unwrap_or_default();
            view.sampler.realtime &= !now.changed;
            if changes.iter().any(|c| c.cpu == view.cpu) {
                view.sampler.scheduling_changes += 1;
            }
            view.sampler.scheduling = now;
        }
        drop(s);
        for said in changes.into_iter().filter_map(|c| c.said) {
            tracing::warn!("{said}");
        }
    }

    /// Reads every running sampler's scheduling (three non-blocking system
    /// calls each), compares it with what the sampler set for itself, sets
    /// it back where `wanted.restore` says so, and returns what each CPU
    /// runs now and the changes newly found.
    fn step(
        &mut self,
        engine: &Engine,
        wanted: Wanted,
    ) -> (BTreeMap<usize, SchedulingSeen>, Vec<Change>) {
        let mut seen = BTreeMap::new();
        let mut changes = Vec::new();
        for slot in &engine.slots {
            let shared = slot.shared();
            let tid = shared.tid();
            if !shared.state().is_running() || slot.is_offline() || tid <= 0 {
                self.by_cpu.remove(&slot.cpu);
                continue;
            }
            let Ok(running) = sys::thread_scheduling(tid) else {
                // The thread ended between the state's read and this one:
                // the collector finds it dead at the same tick.
                self.by_cpu.remove(&slot.cpu);
                continue;
            };
            // A CPU going offline makes the kernel move the threads bound
            // to it and widen their CPUs: the hotplug machinery reaps and
            // restarts that sampler, and it is not a change to report.
            if !running.cpus.contains(&slot.cpu) && !cpu_online(slot.cpu) {
                self.by_cpu.remove(&slot.cpu);
                continue;
            }
            let refused = shared.failure().0 == FailedStep::Policy;
            let watched = self.by_cpu.entry(slot.cpu).or_insert_with(|| Watched {
                tid,
                expected: expected(wanted.policy, slot.priority, slot.cpu, refused, &running),
                changed_to: None,
                said_at_ns: None,
                unsaid: 0,
            });
            if watched.tid != tid {
                // A new sampler on the CPU (restarted after hotplug).
                *watched = Watched {
                    tid,
                    expected: expected(wanted.policy, slot.priority, slot.cpu, refused, &running),
                    changed_to: None,
                    said_at_ns: None,
                    unsaid: 0,
                };
            }
            let (now, change) = watched.compare(slot, running, wanted);
            seen.insert(slot.cpu, now);
            changes.extend(change);
        }
        (seen, changes)
    }
}

/// Whether `cpu` is online now (read only when a sampler was found off its
/// CPU, which is rare; unknown counts as online).
fn cpu_online(cpu: usize) -> bool {
    sys::online_cpus().is_none_or(|online| online.contains(&cpu))
}

/// What a sampler set for itself: the configured scheduling, or what it
/// ran as when the kernel refused that.
fn expected(
    policy: Policy,
    priority: i32,
    cpu: usize,
    refused: bool,
    running: &ThreadScheduling,
) -> ThreadScheduling {
    if refused {
        running.clone()
    } else {
        ThreadScheduling::of(policy, priority, cpu)
    }
}

impl Watched {
    fn compare(
        &mut self,
        slot: &Slot,
        running: ThreadScheduling,
        wanted: Wanted,
    ) -> (SchedulingSeen, Option<Change>) {
        let cpu = slot.cpu;
        if running == self.expected {
            self.changed_to = None;
            return (
                SchedulingSeen {
                    running: Some(running),
                    changed: false,
                },
                None,
            );
        }
        if self.changed_to.as_ref() == Some(&running) {
            // Already said and, where it could be, already set back.
            return (
                SchedulingSeen {
                    running: Some(running),
                    changed: true,
                },
                None,
            );
        }
        let was = &self.expected;
        let now = &running;
        let said = if wanted.restore {
            match sys::set_thread_scheduling(self.tid, &self.expected) {
                Ok(()) => {
                    // Set back: the next tick reads it as expected.
                    format!(
                        "CPU {cpu}: the sampler's scheduling was changed behind latencyd's \
                         back from {was} to {now}; set back (realtime.restore = true)"
                    )
                }
                Err(err) => format!(
                    "CPU {cpu}: the sampler's scheduling was changed behind latencyd's back \
                     from {was} to {now}, and setting it back failed: {err}; its latencies \
                     are not representative until it runs {was} again"
                ),
            }
        } else {
            format!(
                "CPU {cpu}: the sampler's scheduling was changed behind latencyd's back from \
                 {was} to {now}; left so (realtime.restore = false): its latencies are not \
                 representative and latencyd_sampler_realtime is 0 until it runs {was} again"
            )
        };
        self.changed_to = Some(running.clone());
        let seen = SchedulingSeen {
            running: Some(running),
            changed: true,
        };
        let now_ns = sys::monotonic_now_ns();
        if self
            .said_at_ns
            .is_some_and(|at| now_ns.saturating_sub(at) < SAY_EVERY_NS)
        {
            self.unsaid += 1;
            return (seen, Some(Change { cpu, said: None }));
        }
        let said = match std::mem::take(&mut self.unsaid) {
            0 => said,
            n => format!("{said} ({n} more changes in the last minute were not said)"),
        };
        self.said_at_ns = Some(now_ns);
        (
            seen,
            Some(Change {
                cpu,
                said: Some(said),
            }),
        )
    }
}
