//! The observer thread: every 100 ms it reads each observed CPU's new
//! ring-buffer pages, accounts them, and hands the interval to the
//! collector through a bounded queue; once a second it also reads steal
//! (`/proc/stat`), SMI counts (MSR 0x34), the ring buffers' lost-event
//! counters and its own CPU time (each a file to open and format: read
//! every tick they cost more than the events of an idle CPU). An ordinary
//! thread, never the exporter's runtime or a sampler; a full queue makes
//! it keep merging into the interval it holds, so nothing is lost and
//! nothing waits.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tracing::{info, warn};

use super::account::CpuAccount;
use super::noise_counters::NoiseCounters;
use super::tally::{Comm, CpuTally, Source, WakeSample};
use super::tasks::ProcTasks;
use super::tracer::Tracer;
use super::{Interval, OTHER, ReadHealth, Settings, Status, TaskKey};
use crate::forensics::noise::SmiCounters;
use crate::stats::LatencyStats;
use crate::tracefs::Check;
use crate::tracefs::format::common_pid;

/// How often the ring buffers are read.
const TICK: Duration = Duration::from_millis(100);
/// Every how many ticks the counters outside the ring buffers are read.
const HOUSEKEEPING_TICKS: u64 = 10;
/// A woken task waiting longer than this is looked up in `/proc` once a
/// second: let go when it is on another CPU (one not traced) or gone.
const STALE_WAIT_NS: u64 = 1_000_000_000;
/// Every how many ticks the instance's settings are read back: the
/// collector's tick (200 ms), so that a change behind latencyd's back is
/// found within one.
const CHECK_TICKS: u64 = 2;

/// What one tick's reads of the ring buffers came to.
#[derive(Debug, Default)]
struct RingRead {
    pages: u64,
    events: u64,
    /// CPUs whose read failed in part, and the last failure said.
    failed: u64,
    error: Option<String>,
}

pub(super) fn lock(status: &Mutex<Status>) -> MutexGuard<'_, Status> {
    status.lock().unwrap_or_else(|e| e.into_inner())
}

pub(super) struct Worker {
    settings: Settings,
    tracer: Tracer,
    accounts: Vec<CpuAccount>,
    tasks: ProcTasks,
    noise: NoiseCounters,
    lost_last: BTreeMap<usize, u64>,
    /// Task series given their own labels so far.
    series: BTreeSet<TaskKey>,
    /// Interference names given their own labels so far, per CPU.
    names: BTreeMap<usize, BTreeSet<(Source, String)>>,
    samples_seen: u64,
    ticks: u64,
    status: Arc<Mutex<Status>>,
    sender: SyncSender<Interval>,
    /// An interval the collector has not taken yet.
    pending: Option<Interval>,
}

impl Worker {
    pub(super) fn new(
        settings: Settings,
        tracer: Tracer,
        smi: Option<SmiCounters>,
        status: Arc<Mutex<Status>>,
        sender: SyncSender<Interval>,
    ) -> Worker {
        let accounts = accounts_for(&tracer, &settings);
        let noise = NoiseCounters::new(settings.cpus.to_vec(), smi);
        let mut worker = Worker {
            settings,
            tracer,
            accounts,
            tasks: ProcTasks::new(Path::new("/proc")),
            noise,
            lost_last: BTreeMap::new(),
            series: BTreeSet::new(),
            names: BTreeMap::new(),
            samples_seen: 0,
            ticks: 0,
            status,
            sender,
            pending: None,
        };
        // Baselines: only what happens from now on is counted.
        for cpu in worker.settings.cpus.clone() {
            worker.lost_last.insert(cpu, worker.tracer.lost(cpu));
        }
        worker
    }

    pub(super) fn run(&mut self, stop: &Receiver<()>) {
        let mut page = vec![0u8; self.tracer.page_size];
        loop {
            self.tick(&mut page);
            match stop.recv_timeout(TICK) {
                Err(RecvTimeoutError::Timeout) => {}
                // Stopped (or the observer dropped): one last read.
                _ => {
                    self.tick(&mut page);
                    return;
                }
            }
        }
    }

    fn tick(&mut self, page: &mut [u8]) {
        let read = self.read_rings(page);
        self.let_go_of_migrated();
        self.ticks += 1;
        if self.ticks.is_multiple_of(CHECK_TICKS) {
            self.check_instance();
        }
        let housekeeping = self.ticks.is_multiple_of(HOUSEKEEPING_TICKS);
        let mut interval = Interval::default();
        for idx in 0..self.accounts.len() {
            let cpu = self.tracer.readers[idx].0;
            let (tally, samples) = self.accounts[idx].take();
            self.add_samples(&mut interval, cpu, &samples);
            for spike in self.accounts[idx].take_spikes() {
                // latencyd's own measuring threads (samplers, pollers,
                // timerlat's workload) are not the workload: their late
                // wake-ups are their instruments' to capture, and one
                // offered here would take the CPU's rate-limit slot.
                if self.tasks.is_own(spike.pid, spike.comm.as_bytes()) {
                    continue;
                }
                let key = self.key_of(cpu, spike.pid, &spike.comm);
                interval.spikes.push((key, spike));
            }
            if housekeeping {
                let tasks = &self.tasks;
                self.accounts[idx].let_go_of_stale(
                    crate::rt::sys::monotonic_now_ns(),
                    STALE_WAIT_NS,
                    |pid| tasks.last_cpu(pid),
                );
                let lost = self.tracer.lost(cpu);
                let before = self.lost_last.insert(cpu, lost).unwrap_or(lost);
                if lost > before {
                    interval.lost_events.insert(cpu, lost - before);
                }
            }
            self.add_tally(&mut interval, cpu, tally);
        }
        if housekeeping {
            self.add_noise(&mut interval);
        }
        self.note_health(read, housekeeping);
        self.send(interval);
    }

    /// Reads every observed CPU's new ring-buffer pages into its account.
    fn read_rings(&mut self, page: &mut [u8]) -> RingRead {
        let mut read = RingRead::default();
        for (idx, (cpu, file)) in self.tracer.readers.iter_mut().enumerate() {
            let account = &mut self.accounts[idx];
            let decoder = &self.tracer.decoder;
            let layout = self.tracer.layout;
            let tasks = &mut self.tasks;
            let mut cpu_error = None;
            let drained = Tracer::drain(file, page, |bytes| {
                let info = layout.records(bytes, |ts, record| {
                    if let Some(event) = decoder.decode(record) {
                        account.feed(ts, common_pid(record), &event, tasks);
                    }
                });
                match info {
                    Ok(info) => read.events += info.records,
                    Err(err) => cpu_error = Some(format!("CPU {cpu}: a ring-buffer page: {err}")),
                }
            });
            match drained {
                Ok(n) => read.pages += n,
                Err(err) => cpu_error = Some(format!("CPU {cpu}: reading trace_pipe_raw: {err}")),
            }
            // Some of this CPU's events of the tick are missing: one
            // failed read, whatever failed in it.
            if cpu_error.is_some() {
                read.failed += 1;
                read.error = cpu_error;
            }
        }
        read
    }

    /// Once a second: steal time and SMIs since the last reading, per CPU.
    fn add_noise(&mut self, interval: &mut Interval) {
        for (cpu, ns) in self.noise.steal_deltas() {
            let tally = interval.cpus.entry(cpu).or_default();
            tally.add(
                Source::Steal,
                "steal",
                ns,
                crate::rt::sys::monotonic_now_ns(),
            );
        }
        for (cpu, n) in self.noise.smi_deltas() {
            let tally = interval.cpus.entry(cpu).or_default();
            let entry = tally
                .by_name
                .entry((Source::Smi, "smi".to_string()))
                .or_default();
            entry.count += n;
        }
    }

    /// The tick's reads into the status (with the thread's CPU time once a
    /// second), and a log line when reads start or stop failing.
    fn note_health(&mut self, read: RingRead, housekeeping: bool) {
        let health = {
            let mut status = lock(&self.status);
            if housekeeping {
                status.thread_cpu_ns =
                    crate::rt::sys::thread_cpu_ns().unwrap_or(status.thread_cpu_ns);
            }
            status.note_tick(read.pages, read.events, read.failed, read.error)
        };
        match health {
            ReadHealth::Unchanged => {}
            ReadHealth::Failing(error) => warn!(
                "observe: {error}; that CPU's events are missing while reads fail \
                 (latencyd_observe_read_errors_total counts them)"
            ),
            ReadHealth::Recovered { failed } => {
                info!("observe: the ring buffers are read again, after {failed} failed reads")
            }
        }
    }

    /// Reads the instance back: a change behind latencyd's back is set
    /// back and said; an instance that cannot be set back is replaced by a
    /// new one, or the observer is unavailable (said once) until one can
    /// be made.
    fn check_instance(&mut self) {
        let why = match self.tracer.check() {
            Check::Intact => {
                let mut status = lock(&self.status);
                if !status.available && status.instance.is_some() {
                    status.available = true;
                    status.reason = None;
                }
                return;
            }
            // Paused needs pause-on-trace, which the observer does not set.
            Check::Repaired(what) | Check::Paused(what) => {
                lock(&self.status).repairs += 1;
                warn!("observe: {what}");
                return;
            }
            Check::Broken(why) => why,
        };
        let s = &self.settings;
        match Tracer::open(&s.tracefs, s.buffer_size_kb, &s.cpus) {
            Ok(tracer) => {
                let name = tracer.instance_name();
                self.accounts = accounts_for(&tracer, s);
                self.tracer = tracer;
                let mut status = lock(&self.status);
                status.repairs += 1;
                status.available = true;
                status.reason = None;
                status.instance = Some(name.clone());
                warn!("observe: {why}; observing again in the tracefs instance {name}");
            }
            Err(err) => {
                let reason = format!("{why}; it cannot be set up again: {err}");
                let mut status = lock(&self.status);
                if status.available {
                    warn!("observe: {reason}; latencyd_observe_available is 0 until it can be");
                }
                status.available = false;
                status.reason = Some(reason);
            }
        }
    }

    /// A task's series, `other` beyond `max_tasks`.
    fn key_of(&mut self, cpu: usize, pid: i32, comm: &Comm) -> TaskKey {
        let key = TaskKey {
            cpu,
            task: comm.to_string_lossy(),
            container: self.tasks.container(pid, comm.as_bytes()),
        };
        if self.series.contains(&key) {
            return key;
        }
        if self.series.len() < self.settings.max_tasks {
            self.series.insert(key.clone());
            return key;
        }
        TaskKey {
            cpu,
            task: OTHER.to_string(),
            container: String::new(),
        }
    }

    /// The samples as task series.
    fn add_samples(&mut self, interval: &mut Interval, cpu: usize, samples: &[WakeSample]) {
        for s in samples {
            let key = self.key_of(cpu, s.pid, &s.comm);
            let threshold = self.settings.spike_threshold_ns;
            let stats = interval
                .tasks
                .entry(key)
                .or_insert_with(|| LatencyStats::new(threshold, None));
            stats.record_at(s.latency_ns, self.samples_seen, s.at_ns);
            self.samples_seen += 1;
        }
    }

    /// A task woken onto one CPU that ran on another is waiting no more:
    /// each CPU lets go of those the others switched in since.
    fn let_go_of_migrated(&mut self) {
        let ran: Vec<_> = self
            .accounts
            .iter_mut()
            .map(|a| a.take_switched_in())
            .collect();
        for (idx, account) in self.accounts.iter_mut().enumerate() {
            account.let_go_of(|pid| {
                ran.iter()
                    .enumerate()
                    .filter(|&(other, _)| other != idx)
                    .filter_map(|(_, switched)| switched.get(&pid).copied())
                    .max()
            });
        }
    }

    /// The tally with names beyond `max_names` for the CPU as `other`.
    fn add_tally(&mut self, interval: &mut Interval, cpu: usize, tally: CpuTally) {
        let known = self.names.entry(cpu).or_default();
        let mut bounded = CpuTally {
            longest: tally.longest,
            unseen_wakeups: tally.unseen_wakeups,
            untraced_switches: tally.untraced_switches,
            waiting_tasks: tally.waiting_tasks,
            waiting_let_go: tally.waiting_let_go,
            ..CpuTally::default()
        };
        for ((source, name), t) in tally.by_name {
            let mut key = (source, name);
            if !known.contains(&key) {
                if known.len() < self.settings.max_names {
                    known.insert(key.clone());
                } else {
                    key.1 = OTHER.to_string();
                }
            }
            bounded.by_name.entry(key).or_default().merge(&t);
        }
        interval.cpus.entry(cpu).or_default().merge(&bounded);
    }

    fn send(&mut self, interval: Interval) {
        let interval = match self.pending.take() {
            Some(mut pending) => {
                pending.merge(interval);
                pending
            }
            None => interval,
        };
        if interval.is_empty() {
            return;
        }
        match self.sender.try_send(interval) {
            Ok(()) => {}
            Err(TrySendError::Full(interval)) => {
                lock(&self.status).intervals_merged += 1;
                self.pending = Some(interval);
            }
            // The collector is gone: the daemon is stopping.
            Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

/// One account per CPU the tracer reads.
fn accounts_for(tracer: &Tracer, settings: &Settings) -> Vec<CpuAccount> {
    let vectors = &tracer.decoder.vector_names;
    tracer
        .readers
        .iter()
        .map(|(cpu, _)| CpuAccount::new(*cpu, vectors).capturing(settings.capture_threshold_ns))
        .collect()
}
