//! Restarting a sampler whose CPU came back online, without blocking the
//! caller: a `RestartJob` does the slow part on another thread, `adopt`
//! takes its result, `poll_restarts` looks at the new sampler without
//! waiting and cancels one that is late. A cancelled sampler is joined
//! before its CPU gets another.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use super::start::explain_start_failure;
use super::{Engine, EngineSpec, Run, StartError, spawn_sampler};
use crate::handoff::Collector;
use crate::sys;
use crate::thread::{SamplerHandle, SamplerState};

/// The slow part of restarting slot `idx`'s sampler, to run off the
/// caller's thread: allocate the handoff (its buffers are touched, and
/// locked under `mlockall`) and start the thread. It does not wait for the
/// sampler to run; `Engine::poll_restarts` does that without blocking.
pub struct RestartJob {
    pub idx: usize,
    cpu: usize,
    spec: Arc<EngineSpec>,
    stop: Arc<AtomicBool>,
}

/// A restarted sampler's thread and its end of the handoff.
pub struct Candidate {
    handle: SamplerHandle,
    collector: Collector,
}

impl RestartJob {
    /// Starts the new sampler, if its CPU is listed online (`Ok(None)`
    /// if it is not yet: try again later).
    pub fn run(self) -> Result<Option<Candidate>, StartError> {
        let online = sys::online_cpus().unwrap_or_default();
        if !online.contains(&self.cpu) {
            return Ok(None);
        }
        let sampler = self.spec.sampler_spec(self.idx);
        let (handle, collector) = spawn_sampler(sampler, &self.spec.template, &self.stop)?;
        Ok(Some(Candidate { handle, collector }))
    }
}

/// What `Engine::poll_restarts` saw happen to a restarting slot.
#[derive(Debug, PartialEq, Eq)]
pub enum RestartOutcome {
    /// The new sampler runs: the CPU is sampled again.
    Resumed { cpu: usize },
    /// The new sampler failed or did not report running in time (then it
    /// was cancelled); the slot retries once its thread is joined.
    NotResumed { cpu: usize, why: String },
}

impl Engine {
    /// The restart of every offline slot that has none under way and
    /// whose CPU is in `usable` (every offline slot when that is not
    /// known), as jobs for another thread; hand each result to `adopt`.
    /// The new sampler's samples continue the slot's (the same index on
    /// the caller's side).
    pub fn restart_jobs(&mut self, usable: Option<&[usize]>) -> Vec<RestartJob> {
        let mut jobs = Vec::new();
        for (idx, slot) in self.slots.iter_mut().enumerate() {
            let wanted = usable.is_none_or(|usable| usable.contains(&slot.cpu));
            if wanted && matches!(slot.run, Run::Offline) {
                slot.run = Run::Preparing;
                jobs.push(RestartJob {
                    idx,
                    cpu: slot.cpu,
                    spec: Arc::clone(&self.spec),
                    stop: Arc::clone(&self.stop),
                });
            }
        }
        jobs
    }

    /// Takes the result of slot `idx`'s `RestartJob`: the new sampler is
    /// then waited for by `poll_restarts`. An error (or a CPU not online
    /// yet) leaves the slot offline for the next `restart_jobs`.
    pub fn adopt(
        &mut self,
        idx: usize,
        result: Result<Option<Candidate>, StartError>,
        now: Instant,
    ) -> Result<(), StartError> {
        let slot = &mut self.slots[idx];
        match result {
            Ok(Some(Candidate { handle, collector })) => {
                slot.run = Run::Starting {
                    handle,
                    collector,
                    since: now,
                };
                Ok(())
            }
            Ok(None) => {
                slot.run = Run::Offline;
                Ok(())
            }
            Err(err) => {
                slot.run = Run::Offline;
                Err(err)
            }
        }
    }

    /// Looks at every restarting sampler, without waiting: one that runs
    /// takes over its slot; one that failed, or has not reported running
    /// `start_timeout` after `adopt`, is cancelled and left to be joined;
    /// a joined one frees its slot for the next restart.
    pub fn poll_restarts(&mut self, now: Instant) -> Vec<RestartOutcome> {
        let mut outcomes = Vec::new();
        for slot in &mut self.slots {
            match std::mem::replace(&mut slot.run, Run::Offline) {
                Run::Starting {
                    handle,
                    collector,
                    since,
                } => {
                    let state = handle.shared.state();
                    let timed_out = now.saturating_duration_since(since) >= self.spec.start_timeout;
                    // Ran and already ended (its CPU went away again, as in
                    // a hotplug storm): it takes the slot all the same, and
                    // is reaped with what it recorded like any sampler
                    // that lost its CPU. Left waiting, it held the slot
                    // for good: `cancel` cannot undo a start that happened.
                    let ran = matches!(state, SamplerState::Displaced | SamplerState::Finished);
                    if state.is_running() || ran {
                        slot.realtime =
                            self.memory_locked && state == SamplerState::RunningRealtime;
                        slot.shared = Arc::clone(&handle.shared);
                        slot.collector = collector;
                        slot.run = Run::Sampler(handle);
                        outcomes.push(RestartOutcome::Resumed { cpu: slot.cpu });
                    } else if state == SamplerState::Failed {
                        let (step, err) = handle.shared.failure();
                        let why =
                            explain_start_failure(slot.cpu, slot.priority, step, &err, &self.spec);
                        slot.run = Run::Retiring(handle);
                        outcomes.push(RestartOutcome::NotResumed {
                            cpu: slot.cpu,
                            why: why.to_string(),
                        });
                    } else if timed_out && handle.shared.cancel() {
                        slot.run = Run::Retiring(handle);
                        outcomes.push(RestartOutcome::NotResumed {
                            cpu: slot.cpu,
                            why: format!(
                                "its sampler did not start within {:?} and was stopped",
                                self.spec.start_timeout
                            ),
                        });
                    } else {
                        // Still starting, or it began running just as the
                        // timeout came (`cancel` lost): seen next time.
                        slot.run = Run::Starting {
                            handle,
                            collector,
                            since,
                        };
                    }
                }
                Run::Retiring(handle) if handle.is_finished() => {
                    // Returned without sampling: nothing to hand over.
                    let _ = handle.join();
                }
                other => slot.run = other,
            }
        }
        outcomes
    }
}
