//! Stretches without samples, said wherever the daemon speaks. A sampler
//! whose latest wake-up is older than `measure.stall_threshold` has
//! stalled: it did not run, because a higher-priority task or the host
//! held its CPU. At every collector tick this finds stalls as they begin
//! (counted in `latencyd_sampler_stalls_total`, logged at warn with what
//! /proc says is runnable on the CPU, read on the blocking pool) and as
//! they end (logged, filed in the record as a gap); and CPUs that went
//! offline and came back (a gap too). Without it a starved sampler left
//! one huge sample and nothing else: no line, no interval in the record,
//! a plot that bridged the stretch.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::state::{MonitorState, lock};
use crate::record::{Gap, GapReason};
use crate::tasks::{Runnable, own_state, runnable_on};
use crate::units::format_duration_ns;

/// A stall found, waiting for /proc to say what holds its CPU.
struct Scan {
    cpu: usize,
    age_ns: u64,
    /// The runnable tasks (or, `Err`, what the sampler's own state says
    /// kept it from running), and whether /proc shows other users'
    /// processes.
    job: JoinHandle<(Result<Vec<Runnable>, String>, bool)>,
}

/// The stretches without samples going on now, by CPU (their start in
/// Unix ns), and the /proc reads under way.
#[derive(Default)]
pub(super) struct GapWatch {
    stalled: BTreeMap<usize, u64>,
    offline: BTreeMap<usize, u64>,
    /// Where each CPU's latest gap ended: a stall found after it (a
    /// sampler still asleep when its CPU came back) starts there, so that
    /// gaps never cover the same stretch twice.
    ended: BTreeMap<usize, u64>,
    scans: Vec<Scan>,
}

impl GapWatch {
    /// Looks at every CPU's view (after the collector updated them) at
    /// `now_mono_ns` / `now_unix_ns`; returns the gaps that ended, for the
    /// record. Never waits: /proc is read on the blocking pool and said
    /// when it is done.
    pub(super) async fn step(
        &mut self,
        state: &Mutex<MonitorState>,
        now_mono_ns: u64,
        now_unix_ns: u64,
    ) -> Vec<Gap> {
        let mut ended = Vec::new();
        {
            let mut s = lock(state);
            let threshold = s.config.measure.stall_threshold_ns;
            let started_ns = s.started_ns;
            let MonitorState { cpus, gaps, .. } = &mut *s;
            for view in cpus.iter_mut() {
                let (cpu, sampler) = (view.cpu, &mut view.sampler);
                let unix_of =
                    |mono_ns: u64| now_unix_ns.saturating_sub(now_mono_ns.saturating_sub(mono_ns));
                if !sampler.online {
                    self.offline.entry(cpu).or_insert(now_unix_ns);
                    if gaps.open_mut(cpu, GapReason::Offline).is_none() {
                        gaps.open(cpu, GapReason::Offline, now_unix_ns);
                    }
                } else if let Some(start_ns) = self.offline.remove(&cpu) {
                    gaps.close(cpu, GapReason::Offline, now_unix_ns);
                    ended.push(gap(cpu, start_ns, now_unix_ns, GapReason::Offline));
                    self.ended.insert(cpu, now_unix_ns);
                }
                let last = sampler
                    .last_sample_ns
                    .max(sampler.running_since_ns)
                    .max(started_ns);
                let age_ns = now_mono_ns.saturating_sub(last);
                let stalled = sampler.online && sampler.sampling && age_ns > threshold;
                match (stalled, self.stalled.get(&cpu).copied()) {
                    (true, None) => {
                        let after = self.ended.get(&cpu).copied().unwrap_or(0);
                        let start_ns = unix_of(last).max(after);
                        self.stalled.insert(cpu, start_ns);
                        sampler.stalls += 1;
                        gaps.open(cpu, GapReason::Stalled, start_ns);
                        let skip = sampler.tid;
                        let realtime = sampler.realtime || sampler.scheduling.changed;
                        self.scans.push(Scan {
                            cpu,
                            age_ns,
                            job: tokio::task::spawn_blocking(move || {
                                let proc = Path::new("/proc");
                                // The sampler's own state first: a stopped,
                                // frozen, demoted or moved sampler is not
                                // held by another task.
                                let cgroups = Path::new("/sys/fs/cgroup");
                                if let Some(own) = own_state(proc, cgroups, skip, cpu, realtime) {
                                    return (Err(own), true);
                                }
                                // PID 1 is another user's: hidden under
                                // systemd's ProtectProc=invisible.
                                (
                                    Ok(runnable_on(proc, cpu, skip)),
                                    proc.join("1/stat").exists(),
                                )
                            }),
                        });
                    }
                    (false, Some(start_ns)) => {
                        self.stalled.remove(&cpu);
                        // Ended by the wake-up that came, or by the CPU
                        // going offline (now).
                        let end_ns = if sampler.online && sampler.sampling {
                            unix_of(last)
                        } else {
                            now_unix_ns
                        };
                        gaps.close(cpu, GapReason::Stalled, end_ns);
                        self.ended.insert(cpu, end_ns.max(start_ns));
                        let stall = gap(cpu, start_ns, end_ns, GapReason::Stalled);
                        info!(
                            "CPU {cpu}'s sampler runs again after a stall of {}; the record \
                             files the stretch as a gap",
                            format_duration_ns(round_ms(end_ns - start_ns))
                        );
                        ended.push(stall);
                    }
                    _ => {}
                }
            }
        }
        self.say_scans(state).await;
        ended
    }

    /// Logs each stall whose /proc read is done, with what held the CPU.
    async fn say_scans(&mut self, state: &Mutex<MonitorState>) {
        let (done, waiting): (Vec<Scan>, Vec<Scan>) =
            self.scans.drain(..).partition(|s| s.job.is_finished());
        self.scans = waiting;
        for scan in done {
            // A finished task's result is ready: this await does not wait.
            let (found, sees_others) = scan.job.await.unwrap_or((Ok(Vec::new()), false));
            let (held_by, own) = match found {
                Ok(runnable) => (runnable.first().map(Runnable::describe), None),
                Err(own) => (None, Some(own)),
            };
            let threshold = lock(state).config.measure.stall_threshold_ns;
            if let Some(held_by) = held_by.as_ref().or(own.as_ref())
                && let Some(open) = lock(state).gaps.open_mut(scan.cpu, GapReason::Stalled)
            {
                open.held_by = Some(held_by.clone());
            }
            warn!(
                cpu = scan.cpu,
                "CPU {}'s sampler has not run for {} (measure.stall_threshold {}): {}; \
                 latencyd_sampler_stalls_total counts it",
                scan.cpu,
                format_duration_ns(round_ms(scan.age_ns)),
                format_duration_ns(threshold),
                match (held_by, own) {
                    (_, Some(own)) => own,
                    (Some(task), None) => format!("held by {task}"),
                    (None, None) if sees_others => {
                        "no other runnable task found on it (the host may not run this CPU)"
                            .to_string()
                    }
                    (None, None) =>
                        "what held it is unknown: /proc shows no other user's processes \
                             here (systemd's ProtectProc=invisible; the observer's drop-in \
                             lifts it)"
                            .to_string(),
                }
            );
        }
    }

    /// At shutdown: the stretches still going on, ended now.
    pub(super) fn close_all(&mut self, now_unix_ns: u64) -> Vec<Gap> {
        let stalled = std::mem::take(&mut self.stalled)
            .into_iter()
            .map(|(cpu, start)| gap(cpu, start, now_unix_ns, GapReason::Stalled));
        let offline = std::mem::take(&mut self.offline)
            .into_iter()
            .map(|(cpu, start)| gap(cpu, start, now_unix_ns, GapReason::Offline));
        stalled.chain(offline).collect()
    }
}

fn gap(cpu: usize, start_ns: u64, end_ns: u64, reason: GapReason) -> Gap {
    Gap {
        cpu,
        start_ns,
        end_ns: end_ns.max(start_ns),
        reason,
    }
}

/// A duration to whole milliseconds, for a log line.
fn round_ms(ns: u64) -> u64 {
    ns / 1_000_000 * 1_000_000
}
