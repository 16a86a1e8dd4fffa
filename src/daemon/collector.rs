//! The collector: every tick it drains the samplers' handoffs into the
//! state, copies their heartbeats and conditions, reaps the samplers whose
//! CPU went offline, and drives the restart of those whose CPU came back.
//!
//! The state's lock is held only while intervals are merged and views
//! updated: plain memory work. A restart's slow part (allocating the
//! handoff, starting the thread, reading which CPUs are online) runs on
//! the blocking pool; the tick only looks at the result when it is ready,
//! and the engine checks the new sampler without waiting for it.

use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::Instant;

use tokio::task::JoinHandle;

use super::cpu_watch::CpuWatch;
use super::gaps::GapWatch;
use super::runs::{self, Claims, Runs};
use super::scheduling::SchedulingWatch;
use super::state::{CpuView, MonitorState, SamplerView, lock};
use crate::instruments::shape::{Capturer, Spike};
use crate::record::{Accumulator, Keeper};
use crate::rt::engine::{Candidate, Engine, RestartOutcome, StartError};
use crate::rt::thread::{FailedStep, SamplerState};
use crate::stats::LatencyStats;
use crate::units::NS_PER_MS;

/// Samplers hand over their interval at every multiple of 200 ms of
/// `CLOCK_MONOTONIC`. With the collector ticking just after those
/// boundaries (and once more, 100 ms later, when a sampler had not handed
/// over yet) a wake-up reaches `/metrics` about 0 to 210 ms after it
/// happened (`benches/lag.rs` measured p99 205 ms; ARCHITECTURE.md, "From
/// a wake-up to an alert"), and 200 ms divides a second, so no interval
/// straddles the windows' seconds.
pub(super) const PUBLISH_PERIOD_NS: u64 = 200 * NS_PER_MS;

/// What a collector tick found.
#[derive(Debug, Default)]
pub(super) struct Collected {
    /// CPUs whose sampler has newly died, and why.
    pub dead: Vec<(usize, String)>,
    /// CPUs whose sampler stopped because the CPU went offline.
    pub offline: Vec<usize>,
    /// CPUs back online whose new sampler runs.
    pub resumed: Vec<usize>,
    /// CPUs back online whose sampler could not be started yet, and why.
    pub not_resumed: Vec<(usize, String)>,
    /// CPUs that came online after the start and were given a sampler.
    pub added: Vec<usize>,
    /// A running sampler handed nothing over since the previous tick: its
    /// interval is late (its wake-up after the boundary was), and the
    /// event loop looks again before the next period.
    pub awaited: bool,
}

/// A restart job on the blocking pool: its slot, and what it returns.
type RestartTask = (usize, JoinHandle<Result<Option<Candidate>, StartError>>);

/// The restarts under way on the blocking pool, what captures late
/// wake-ups (it hears of every interval over its threshold), the
/// registered instruments' runs, and the record's interval in progress
/// with the thread that writes finished ones.
pub(super) struct Collector {
    restarts: Vec<RestartTask>,
    capturer: Capturer,
    pub(super) record: Option<(Accumulator, Keeper)>,
    /// The registered instruments' runs (those their sections turn on),
    /// by name, in registry order.
    pub(super) runs: Runs,
    /// The host's CPUs as sysfs and the cpuset say, read once a second.
    cpus: CpuWatch,
    /// Stalls and offline stretches going on.
    gaps: GapWatch,
    /// Each sampler's policy, priority and CPUs, read again every tick.
    scheduling: SchedulingWatch,
    /// Wall time, ns since the epoch (the record's intervals are in it).
    unix_ns: fn() -> u64,
}

impl Collector {
    /// Over the registered instruments' `runs`, offering each what the one
    /// that captures late wake-ups runs (`Run::capturer`).
    pub(super) fn new(
        runs: Runs,
        record: Option<(Accumulator, Keeper)>,
        cpus: CpuWatch,
        unix_ns: fn() -> u64,
    ) -> Collector {
        let capturer =
            (runs.iter().find_map(|(_, run)| run.capturer())).unwrap_or_else(Capturer::none);
        Collector {
            restarts: Vec::new(),
            capturer,
            record,
            runs,
            cpus,
            gaps: GapWatch::default(),
            scheduling: SchedulingWatch::default(),
            unix_ns,
        }
    }

    pub(super) async fn tick(
        &mut self,
        engine: &mut Engine,
        state: &Mutex<MonitorState>,
    ) -> Result<Collected, Box<dyn std::error::Error>> {
        let claims = self.claims(state);
        let (offline, handed_over) = absorb(
            engine,
            state,
            &self.capturer,
            self.record.as_mut().map(|r| &mut r.0),
            &claims,
        )?;
        let mut found = Collected {
            offline,
            awaited: engine
                .slots
                .iter()
                .zip(&handed_over)
                .any(|(slot, &handed)| !handed && is_running(slot)),
            ..Collected::default()
        };
        let now = (crate::rt::sys::monotonic_now_ns(), (self.unix_ns)());
        let tick = runs::Tick {
            at: (now.0, (self.unix_ns)()),
            claims: &claims,
            capturer: &self.capturer,
        };
        runs::take_in(&mut self.runs, state, &mut self.record, &tick);
        // What the interval is filed under was set by the runs' take-in.
        if let Some((accumulator, keeper)) = &mut self.record
            && let Some(batch) = accumulator.take((self.unix_ns)(), false)
        {
            keeper.submit(batch);
        }
        runs::step(&mut self.runs, state, &mut self.record, &tick).await;
        if self.cpus.step(now.0).await {
            self.add_new_cpus(engine, state, &mut found);
        }
        for (cpu, why) in self.adopt_finished(engine, true).await {
            found.not_resumed.push((cpu, why));
        }
        for outcome in engine.poll_restarts(Instant::now()) {
            match outcome {
                RestartOutcome::Resumed { cpu } => found.resumed.push(cpu),
                RestartOutcome::NotResumed { cpu, why } => found.not_resumed.push((cpu, why)),
            }
        }
        for job in engine.restart_jobs(self.cpus.usable()) {
            let idx = job.idx;
            tracing::debug!("starting a sampler on CPU {}", engine.slots[idx].cpu);
            self.restarts
                .push((idx, tokio::task::spawn_blocking(move || job.run())));
        }
        update_views(engine, state, &self.cpus, &mut found);
        self.scheduling.check(engine, state);
        let (mono_ns, unix_ns) = (crate::rt::sys::monotonic_now_ns(), (self.unix_ns)());
        for gap in self.gaps.step(state, mono_ns, unix_ns).await {
            if let Some((accumulator, _)) = &mut self.record {
                accumulator.add_gap(gap);
            }
        }
        Ok(found)
    }

    /// The CPUs each instrument claims now (`runs::claims`).
    fn claims(&mut self, state: &Mutex<MonitorState>) -> Claims {
        let at = (crate::rt::sys::monotonic_now_ns(), (self.unix_ns)());
        runs::claims(&mut self.runs, state, &mut self.record, at)
    }

    /// At shutdown: the stalls and offline stretches still going on end
    /// now, in the record's last interval.
    pub(super) fn close_gaps(&mut self) {
        for gap in self.gaps.close_all((self.unix_ns)()) {
            if let Some((accumulator, _)) = &mut self.record {
                accumulator.add_gap(gap);
            }
        }
    }

    /// Gives a sampler slot to every CPU that came online and may be
    /// sampled (`measure.cpus = "all"`): its view joins the state, the
    /// capturer records it, and the restart machinery starts it.
    fn add_new_cpus(
        &mut self,
        engine: &mut Engine,
        state: &Mutex<MonitorState>,
        found: &mut Collected,
    ) {
        let missing = self.cpus.missing(engine);
        if missing.is_empty() {
            return;
        }
        let mut s = lock(state);
        for cpu in missing {
            engine.add_slot(cpu);
            let sampler = SamplerView {
                tid: 0,
                policy: s.config.measure.policy,
                priority: s.config.measure.priority,
                realtime: false,
                last_sample_ns: 0,
                alive: true,
                online: true,
                sampling: false,
                unsampled_since_ns: None,
                running_since_ns: 0,
                stalls: 0,
                scheduling: Default::default(),
                scheduling_changes: 0,
            };
            let view = CpuView::new(cpu, &s.config, sampler);
            s.cpus.push(view);
            s.unmeasured.retain(|(c, _)| *c != cpu);
            found.added.push(cpu);
        }
        drop(s);
        let cpus: Vec<usize> = engine.slots.iter().map(|slot| slot.cpu).collect();
        self.capturer.set_cpus(cpus);
    }

    /// At shutdown: waits for the restarts under way (starting a thread
    /// takes moments) and gives their samplers to the engine, which stops
    /// and joins them with the others.
    pub(super) async fn settle(&mut self, engine: &mut Engine) {
        self.adopt_finished(engine, false).await;
    }

    /// Hands the finished restart jobs' results to the engine (all of them,
    /// waiting for each, unless `only_ready`); returns the failures.
    async fn adopt_finished(
        &mut self,
        engine: &mut Engine,
        only_ready: bool,
    ) -> Vec<(usize, String)> {
        let mut failures = Vec::new();
        let mut pending = Vec::new();
        for (idx, job) in self.restarts.drain(..) {
            if only_ready && !job.is_finished() {
                pending.push((idx, job));
                continue;
            }
            // A finished task's result is ready: this await does not wait.
            let result = job.await.unwrap_or_else(|err| {
                // The job does not panic by design; if it did, the slot
                // goes back to waiting for a restart.
                Err(StartError::Failed(format!("the restart failed: {err}")))
            });
            let cpu = engine.slots[idx].cpu;
            if let Err(err) = engine.adopt(idx, result, Instant::now()) {
                failures.push((cpu, err.to_string()));
            }
        }
        self.restarts = pending;
        failures
    }
}

/// Merges every published interval into the state and reaps the samplers
/// of CPUs gone offline (their last intervals included); returns those
/// CPUs, and per slot whether it handed anything over. An interval whose
/// maximum the capturer takes ([`Capturer::trigger`]: over its threshold,
/// or a new maximum of its CPU's window) is handed to it (after the lock
/// is released; it never waits). Every interval also goes into the record's interval in
/// progress. The intervals of CPUs an instrument claimed (`claims`: a
/// hwnoise window spins them) go to the record only: counted apart by
/// that instrument, never in the CPU's figures, never a capture
/// (latencyd's own spinner delayed them).
fn absorb(
    engine: &mut Engine,
    state: &Mutex<MonitorState>,
    capturer: &Capturer,
    mut record: Option<&mut Accumulator>,
    claims: &Claims,
) -> Result<(Vec<usize>, Vec<bool>), Box<dyn std::error::Error>> {
    let mut handed_over = vec![false; engine.slots.len()];
    let cpus: Vec<usize> = engine.slots.iter().map(|slot| slot.cpu).collect();
    let mut spikes = Vec::new();
    let now_ns = crate::rt::sys::monotonic_now_ns();
    let mut take = |s: &mut MonitorState, idx: usize, interval: &LatencyStats| {
        handed_over[idx] = true;
        if let Some(accumulator) = record.as_deref_mut() {
            accumulator.add(cpus[idx], interval);
        }
        if let Some(part) = (claims.get(&cpus[idx])).and_then(|name| s.parts.get_mut(name)) {
            let max_ns = (interval.count > 0).then_some(interval.max_ns);
            part.keep_apart(cpus[idx], "sampler", interval.count, max_ns);
            return Ok(());
        }
        if let Some(at) = interval.max_at_ns()
            && interval.count > 0
        {
            let window_max = s.cpus[idx].window.max(now_ns).unwrap_or(0);
            if let Some(trigger) = capturer.trigger(interval.max_ns, window_max) {
                spikes.push((idx, interval.max_ns, at, trigger));
            }
        }
        s.cpus[idx].absorb(interval)
    };
    let offline = {
        let mut s = lock(state);
        engine.drain(|idx, interval| take(&mut s, idx, interval))?;
        engine.reap_offline(|idx, interval| take(&mut s, idx, interval))?
    };
    for (idx, latency_ns, wakeup_ns, trigger) in spikes {
        let slot = &engine.slots[idx];
        capturer.notice(Spike {
            cpu: slot.cpu,
            sampler_tid: slot.shared().tid(),
            latency_ns,
            wakeup_ns,
            trigger,
        });
    }
    Ok((offline, handed_over))
}

/// The slot's sampler is sampling: it hands an interval over every period.
fn is_running(slot: &crate::rt::engine::Slot) -> bool {
    !slot.is_offline()
        && matches!(
            slot.shared().state(),
            SamplerState::RunningRealtime | SamplerState::RunningNonRealtime
        )
}

/// Copies each sampler's heartbeat and condition into its view, and notes
/// the samplers newly found dead. A CPU counts as online by the latest
/// reading of sysfs when there is one (a sampler that did not start on
/// an online CPU is then a CPU online without a sampler, which health
/// sees), else by its slot.
fn update_views(
    engine: &Engine,
    state: &Mutex<MonitorState>,
    cpus: &CpuWatch,
    found: &mut Collected,
) {
    let now_ns = crate::rt::sys::monotonic_now_ns();
    let mut s = lock(state);
    for (slot, view) in engine.slots.iter().zip(s.cpus.iter_mut()) {
        let shared = slot.shared();
        // Relaxed: the heartbeat is a liveness hint ordering nothing else.
        view.sampler.last_sample_ns = shared.heartbeat_ns.load(Ordering::Relaxed);
        let sampling = is_running(slot);
        if sampling && !view.sampler.sampling {
            view.sampler.running_since_ns = now_ns;
        }
        view.sampler.sampling = sampling;
        view.sampler.online = cpus.online(slot.cpu).unwrap_or(!slot.is_offline());
        view.sampler.unsampled_since_ns = (view.sampler.online && !view.sampler.sampling)
            .then(|| view.sampler.unsampled_since_ns.unwrap_or(now_ns));
        view.sampler.tid = shared.tid();
        view.sampler.realtime = slot.realtime;
        let died =
            (slot.is_finished() && !slot.is_offline()) || shared.state() == SamplerState::Failed;
        if died && view.sampler.alive {
            view.sampler.alive = false;
            let why = match shared.failure() {
                (FailedStep::Sleep, err) => format!("clock_nanosleep failed: {err}"),
                (FailedStep::Affinity, err) => format!("pinning it failed: {err}"),
                (FailedStep::Policy, err) => format!("its scheduling policy was refused: {err}"),
                (FailedStep::None, _) => "its thread ended".to_string(),
            };
            found.dead.push((slot.cpu, why));
        }
    }
}
