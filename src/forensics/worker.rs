//! The recorder's thread: its loop (the steal and SMI counters, the
//! instance read back, notices), each capture within the rate limits
//! (the CPU's trace read and attributed, the noise added), and keeping
//! it (the store, the journal).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::attribution::Attributor;
use super::journal::{Journal, Settings, Spike, Trigger};
use super::limits::{Admission, RateLimits};
use super::noise::{SmiCounters, StealHistory};
use super::store::{Capture, Store, Summary, TimerlatSplit, make_id, make_new_max_id, next_id};
use super::tracefs::{self, Instance};
use super::verdict::verdict;
use crate::calendar::format_rfc3339_ms;
use crate::rt::sys;
use crate::units::NS_PER_SEC;

/// What the recorder's handle tells its thread.
pub(super) enum Message {
    Spike(Spike),
    /// The CPUs measured from now on (one came online and was added).
    SetCpus(Vec<usize>),
    /// A capture made elsewhere (the observer's, of a workload task),
    /// built only once the same limits admit it.
    Offered(Offer),
    /// A timerlat period over the threshold, split (`forensics/timerlat.rs`).
    Timerlat(usize, TimerlatSplit),
    /// Answered once every message before it is handled.
    Flush(SyncSender<()>),
    Stop,
}

/// A capture another part of latencyd can make, offered with what the
/// limits judge it by: its CPU, when the task ran (`CLOCK_MONOTONIC`) and
/// how late. `build` runs only if the limits admit it, so a burst of late
/// wake-ups costs a capture's making only for the ones kept.
pub struct Offer {
    pub cpu: usize,
    pub wakeup_mono_ns: u64,
    pub latency_ns: u64,
    pub build: Box<dyn FnOnce() -> Capture + Send>,
}

/// How often the steal counters are read.
const TICK: Duration = Duration::from_millis(100);
/// How often the instance's settings are read back: the collector's tick,
/// so that a change behind latencyd's back is found within one.
const CHECK_EVERY_NS: u64 = 200 * crate::units::NS_PER_MS;
/// How often instances left by latencyd processes that died since are
/// removed.
const SWEEP_EVERY_NS: u64 = 10 * NS_PER_SEC;

pub(super) struct Worker {
    pub(super) settings: Settings,
    /// The tracefs mount and the CPUs, to set the instance up again.
    pub(super) root: std::path::PathBuf,
    pub(super) cpus: Vec<usize>,
    /// None while it is broken and could not be made again.
    pub(super) instance: Option<Instance>,
    pub(super) store: Option<Store>,
    pub(super) steal: StealHistory,
    pub(super) smi: Option<SmiCounters>,
    /// Each CPU's last SMI reading: (monotonic ns, count).
    pub(super) smi_last: BTreeMap<usize, (u64, u64)>,
    pub(super) journal: Arc<Journal>,
    pub(super) limits: RateLimits,
    /// timerlat's splits waiting for the sampler's capture: (received,
    /// CPU, split).
    pub(super) splits: Vec<(u64, usize, TimerlatSplit)>,
    /// Each CPU's last capture kept, which a split may join.
    pub(super) last_kept: BTreeMap<usize, Capture>,
    /// Each CPU's last sampler wake-up the rate limits refused: (missed
    /// deadline, wake-up), `CLOCK_MONOTONIC`, which a split's own capture
    /// names as the reason it has no sampler's.
    pub(super) refused: BTreeMap<usize, (u64, u64)>,
}

impl Worker {
    pub(super) fn run(&mut self, receiver: Receiver<Message>) {
        let mut next_smi = 0;
        let mut next_check = 0;
        let mut next_sweep = SWEEP_EVERY_NS;
        loop {
            let now = sys::monotonic_now_ns();
            self.steal.sample(now);
            if now >= next_smi {
                self.read_smi(now);
                next_smi = now + NS_PER_SEC;
            }
            if now >= next_check {
                self.check_instance();
                next_check = now + CHECK_EVERY_NS;
            }
            if now >= next_sweep {
                self.sweep_leftovers();
                next_sweep = now + SWEEP_EVERY_NS;
            }
            self.settle_splits(now);
            match receiver.recv_timeout(TICK) {
                Ok(Message::Spike(spike)) => self.handle_with(spike, None),
                Ok(Message::Timerlat(cpu, split)) => {
                    self.timerlat(cpu, split, sys::monotonic_now_ns());
                }
                Ok(Message::Offered(offer)) => {
                    let (cpu, at, latency) = (offer.cpu, offer.wakeup_mono_ns, offer.latency_ns);
                    if self.within_limits(cpu, at, latency, Trigger::Threshold) {
                        self.keep((offer.build)());
                    }
                }
                Ok(Message::SetCpus(cpus)) => self.set_cpus(cpus),
                Ok(Message::Flush(ack)) => {
                    // Splits wait for nothing more: placed before the answer.
                    self.settle_splits(u64::MAX);
                    let _ = ack.send(());
                }
                Ok(Message::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    fn set_cpus(&mut self, cpus: Vec<usize>) {
        if let Some(instance) = &self.instance
            && let Err(err) = instance.write("tracing_cpumask", &tracefs::cpumask(&cpus))
        {
            self.journal.lock().notice(err);
        }
        let cpuinfo = crate::files::read_cpuinfo();
        self.smi = SmiCounters::open(Path::new("/dev/cpu"), &cpuinfo, &cpus).0;
        self.cpus = cpus;
    }

    fn sweep_leftovers(&mut self) {
        let Some(instance) = &self.instance else {
            return;
        };
        for note in instance.sweep_leftovers() {
            self.journal.lock().notice(note);
        }
    }

    /// Reads the instance back (see `tracefs::keep_up`).
    fn check_instance(&mut self) {
        let settings = (
            self.root.as_path(),
            self.settings.buffer_size_kb,
            &self.cpus[..],
        );
        tracefs::keep_up(&mut self.instance, settings, &self.journal);
    }

    fn read_smi(&mut self, now: u64) {
        let Some(smi) = &self.smi else {
            return;
        };
        let readings = smi.read();
        let mut journal = self.journal.lock();
        for (cpu, count) in readings {
            if let Some(count) = count {
                journal.smi.insert(cpu, count);
                self.smi_last.insert(cpu, (now, count));
            }
        }
    }

    pub(super) fn count_uncaptured(&self, cpu: usize, reason: &'static str) {
        *self
            .journal
            .lock()
            .uncaptured
            .entry((cpu, reason))
            .or_default() += 1;
    }

    /// Whether a capture is within the rate limits (or escalates past
    /// them), else counts it rate-limited.
    fn within_limits(
        &mut self,
        cpu: usize,
        wakeup_ns: u64,
        latency_ns: u64,
        trigger: Trigger,
    ) -> bool {
        match self.limits.admit(cpu, wakeup_ns, latency_ns, trigger) {
            Admission::Within => true,
            Admission::Escalated => {
                *self.journal.lock().escalated.entry(cpu).or_default() += 1;
                true
            }
            Admission::Refused => {
                self.count_uncaptured(cpu, "rate_limited");
                false
            }
        }
    }

    /// Captures `spike` within the limits, with timerlat's split of the
    /// same wake-up when there is one.
    pub(super) fn handle_with(&mut self, spike: Spike, timerlat: Option<TimerlatSplit>) {
        if self.instance.is_none() {
            self.count_uncaptured(spike.cpu, "failed");
            return;
        }
        if !self.within_limits(spike.cpu, spike.wakeup_ns, spike.latency_ns, spike.trigger) {
            if spike.trigger != Trigger::Timerlat {
                let deadline = spike.wakeup_ns.saturating_sub(spike.latency_ns);
                self.refused.insert(spike.cpu, (deadline, spike.wakeup_ns));
            }
            return;
        }
        let uncovered = (spike.trigger == Trigger::Timerlat).then(|| {
            let period = (
                spike.wakeup_ns.saturating_sub(spike.latency_ns),
                spike.wakeup_ns,
            );
            super::store::NoSamplerCapture::of(
                self.cpus.contains(&spike.cpu),
                self.refused.get(&spike.cpu).copied(),
                period,
            )
        });
        match self.capture(spike) {
            Ok(mut capture) => {
                capture.summary.timerlat = timerlat;
                capture.summary.no_sampler_capture = uncovered;
                self.keep(capture);
            }
            Err(reason) => {
                self.count_uncaptured(spike.cpu, "failed");
                self.journal.lock().reason = Some(reason);
            }
        }
    }

    fn capture(&mut self, spike: Spike) -> Result<Capture, String> {
        let deadline = spike.wakeup_ns.saturating_sub(spike.latency_ns);
        let mut attributor = Attributor::new(deadline, spike.wakeup_ns, spike.sampler_tid);
        let instance = self
            .instance
            .as_ref()
            .ok_or_else(|| "the tracefs instance is not set up".to_string())?;
        tracefs::read_into(instance, spike.cpu, &mut attributor)?;
        let now = sys::monotonic_now_ns();
        self.steal.sample(now);
        let steal_ns = self.steal.between(spike.cpu, deadline, spike.wakeup_ns);
        let smi_count = self.smi_since(spike.cpu, deadline, now);
        let mut found = attributor.finish(steal_ns);
        for cause in &mut found.causes {
            if cause.kind == "task" {
                let exact = cause.pid.and_then(sys::thread_policy_name);
                if let Some(exact) = exact.filter(|e| same_class(e, cause.policy.as_deref())) {
                    cause.policy = Some(exact.to_string());
                }
            }
        }
        let wall_now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let at_unix = wall_now.saturating_sub(now.saturating_sub(spike.wakeup_ns));
        let summary = Summary {
            id: match spike.trigger {
                Trigger::Threshold | Trigger::Timerlat => make_id(at_unix, spike.cpu),
                Trigger::NewMax => make_new_max_id(at_unix, spike.cpu),
            },
            trigger: spike.trigger.name().to_string(),
            cpu: spike.cpu,
            at: format_rfc3339_ms(at_unix),
            latency_ns: spike.latency_ns,
            deadline_mono_ns: deadline,
            wakeup_mono_ns: spike.wakeup_ns,
            sampler_tid: spike.sampler_tid,
            task: None,
            verdict: verdict(spike.cpu, spike.latency_ns, &found.causes),
            causes: found.causes,
            timer_late_ns: found.timer_late_ns,
            complete: found.gaps.is_empty(),
            gaps: found.gaps,
            steal_ns,
            smi_count,
            events_omitted: found.events_omitted,
            timerlat: None,
            no_sampler_capture: None,
        };
        Ok(Capture {
            summary,
            events: found.events,
        })
    }

    /// SMIs on `cpu` since its last reading before `deadline`, read now.
    fn smi_since(&mut self, cpu: usize, deadline: u64, now: u64) -> Option<u64> {
        let (at, before) = *self.smi_last.get(&cpu)?;
        if at > deadline {
            return None;
        }
        self.read_smi(now);
        let (_, after) = *self.smi_last.get(&cpu)?;
        Some(after.wrapping_sub(before) & 0xffff_ffff)
    }

    /// Writes `capture` to the capture directory, when there is one,
    /// before the journal is locked; then, locked, drops from its recent
    /// list the captures the store removed for room. `Ok(true)`: on
    /// disk; `Ok(false)`: no directory (kept in memory by the caller);
    /// `Err`: not written, the reason in the journal.
    pub(super) fn store(
        &self,
        capture: &Capture,
    ) -> (
        std::sync::MutexGuard<'_, super::journal::JournalData>,
        Result<bool, ()>,
    ) {
        let written = (self.store.as_ref()).map(|store| (store.write(capture), store.bytes()));
        let mut journal = self.journal.lock();
        let stored = match written {
            Some((Err(reason), _)) => {
                journal.reason = Some(reason);
                Err(())
            }
            Some((Ok(written), bytes)) => {
                journal.recent.retain(|s| !written.removed.contains(&s.id));
                journal.disk_bytes = bytes;
                Ok(true)
            }
            None => Ok(false),
        };
        (journal, stored)
    }

    fn keep(&mut self, mut capture: Capture) {
        // Two captures of one CPU in one millisecond (the observer's view
        // of a wake-up beside the recorder's own) must not share an id:
        // the later one moves to the next free millisecond.
        for _ in 0..1000 {
            let id = &capture.summary.id;
            let taken = self.store.as_ref().is_some_and(|store| store.has(id))
                || self.journal.lock().recent.iter().any(|s| &s.id == id);
            match (taken, next_id(id)) {
                (true, Some(next)) => capture.summary.id = next,
                _ => break,
            }
        }
        let (mut journal, stored) = self.store(&capture);
        match stored {
            Err(()) => {
                *journal
                    .uncaptured
                    .entry((capture.summary.cpu, "failed"))
                    .or_default() += 1;
                return;
            }
            Ok(true) => {}
            Ok(false) => {
                journal.in_memory.push_front(capture.clone());
                journal.in_memory.truncate(self.settings.max_captures);
            }
        }
        let kind = capture
            .summary
            .causes
            .first()
            .map_or("unaccounted", |c| c.kind.as_str())
            .to_string();
        *journal
            .captured
            .entry((capture.summary.cpu, kind))
            .or_default() += 1;
        journal.reason = None;
        journal.recent.push_front(capture.summary.clone());
        journal.recent.truncate(self.settings.max_captures);
        drop(journal);
        self.last_kept.insert(capture.summary.cpu, capture);
    }
}

/// Whether the policy a task has now is of the class its traced priority
/// told (`traced`: `real-time`, `normal`, `SCHED_DEADLINE`, or unknown): a
/// task that changed class since, or a pid reused, keeps what the trace
/// said.
fn same_class(now: &str, traced: Option<&str>) -> bool {
    use crate::forensics::scheduling::{NORMAL, REALTIME};
    match traced {
        None => true,
        Some(REALTIME) => matches!(now, "SCHED_FIFO" | "SCHED_RR"),
        Some(NORMAL) => matches!(now, "SCHED_OTHER" | "SCHED_BATCH" | "SCHED_IDLE"),
        Some(other) => now == other,
    }
}
