//! The recorder thread: takes spike notices, captures within the rate
//! limits, keeps the journal that the daemon serves and `measure` prints.
//!
//! It is an ordinary thread (not the exporter's runtime, not a sampler):
//! reading a CPU's ring buffer takes tens of milliseconds of system time,
//! writing a capture waits for the disk. Every 100 ms it reads the steal
//! counters, every second the SMI counters; otherwise it sleeps on its
//! queue. Notices come through a bounded queue that never blocks the
//! sender: a full queue counts the spike as uncaptured (`busy`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::attribution::Attributor;
use super::journal::{Journal, JournalData, Settings, Spike, Trigger};
use super::limits::{Admission, RateLimits};
use super::noise::{SmiCounters, StealHistory};
use super::store::{Capture, Store, Summary, make_id, make_new_max_id, next_id};
use super::tracefs::{self, Capability, Instance};
use super::verdict::verdict;
use crate::calendar::format_rfc3339_ms;
use crate::rt::sys;
use crate::units::NS_PER_SEC;

enum Message {
    Spike(Spike),
    /// The CPUs measured from now on (one came online and was added).
    SetCpus(Vec<usize>),
    /// A capture made elsewhere (the observer's, of a workload task),
    /// kept within the same limits.
    Made(Box<Capture>),
    /// Answered once every message before it is handled.
    Flush(SyncSender<()>),
    Stop,
}

/// The running recorder (or the reason there is none).
pub struct Recorder {
    sender: Option<SyncSender<Message>>,
    journal: Arc<Journal>,
    thread: Option<JoinHandle<()>>,
}

/// How many notices may wait for the recorder.
const QUEUE: usize = 64;
/// How often the steal counters are read.
const TICK: Duration = Duration::from_millis(100);
/// How often the instance's settings are read back: the collector's tick,
/// so that a change behind latencyd's back is found within one.
const CHECK_EVERY_NS: u64 = 200 * crate::units::NS_PER_MS;

impl Recorder {
    /// Forensics off: the journal says so.
    pub fn disabled() -> Recorder {
        let journal = JournalData {
            reason: Some("disabled in the configuration (forensics.enabled = false)".to_string()),
            ..JournalData::default()
        };
        Recorder {
            sender: None,
            journal: Arc::new(Journal(Mutex::new(journal))),
            thread: None,
        }
    }

    /// Sets up the instance and the capture directory for `cpus` and
    /// starts the thread. Anything missing leaves forensics unavailable,
    /// with the reason in the journal; nothing here fails the caller.
    pub fn start(settings: Settings, cpus: &[usize]) -> Recorder {
        let mut data = JournalData {
            enabled: true,
            threshold_ns: settings.threshold_ns,
            ..JournalData::default()
        };
        let unavailable = |mut data: JournalData, reason: String| {
            data.reason = Some(reason);
            Recorder {
                sender: None,
                journal: Arc::new(Journal(Mutex::new(data))),
                thread: None,
            }
        };
        let store = match &settings.dir {
            None => None,
            Some(dir) => match Store::open(dir, settings.max_captures, settings.max_bytes) {
                Ok((store, old, warnings)) => {
                    data.recent = old.into();
                    data.disk_bytes = store.bytes();
                    data.dir = Some(dir.clone());
                    data.max_bytes = settings.max_bytes;
                    for warning in warnings {
                        data.notice(warning);
                    }
                    Some(store)
                }
                Err(reason) => return unavailable(data, reason),
            },
        };
        let root = match tracefs::locate(&settings.tracefs) {
            Ok(root) => root,
            Err(reason) => return unavailable(data, reason),
        };
        let opened = match tracefs::open(&root, settings.buffer_size_kb, cpus) {
            Ok(opened) => opened,
            Err(reason) => return unavailable(data, reason),
        };
        data.instance = Some(opened.instance.name());
        let steal = StealHistory::new(Path::new("/proc/stat"));
        data.capabilities = opened.capabilities;
        data.capabilities.push(steal.capability());
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let (smi, smi_capability) = SmiCounters::open(Path::new("/dev/cpu"), &cpuinfo, cpus);
        data.capabilities.push(smi_capability);
        data.available = true;
        let notes = opened.notes;
        let journal = Arc::new(Journal(Mutex::new(data)));
        let (sender, receiver) = sync_channel(QUEUE);
        let limits = RateLimits::new(settings.per_cpu_gap_ns, settings.max_per_minute);
        let mut worker = Worker {
            limits,
            settings,
            root,
            cpus: cpus.to_vec(),
            instance: Some(opened.instance),
            store,
            steal,
            smi,
            smi_last: BTreeMap::new(),
            journal: Arc::clone(&journal),
        };
        let thread = std::thread::Builder::new()
            .name("latencyd-forensics".to_string())
            .spawn(move || worker.run(receiver));
        match thread {
            Ok(thread) => {
                let recorder = Recorder {
                    sender: Some(sender),
                    journal,
                    thread: Some(thread),
                };
                for note in notes {
                    recorder
                        .journal
                        .lock()
                        .capabilities
                        .push(Capability::new("cleanup", true, note));
                }
                recorder
            }
            Err(err) => {
                let data = std::mem::take(&mut *journal.lock());
                unavailable(data, format!("cannot start the forensics thread: {err}"))
            }
        }
    }

    /// The journal, for readers.
    pub fn journal(&self) -> Arc<Journal> {
        Arc::clone(&self.journal)
    }

    /// What happened to the tracefs instance that a person should hear of
    /// since the last call (the front end says it: a log line, stderr).
    pub fn take_notices(&self) -> Vec<String> {
        self.journal.lock().notices.drain(..).collect()
    }

    /// The capture threshold while the recorder runs.
    pub fn threshold_ns(&self) -> Option<u64> {
        self.sender
            .as_ref()
            .map(|_| self.journal.lock().threshold_ns)
    }

    /// Hands a spike to the recorder without waiting.
    pub fn notice(&self, spike: Spike) {
        let Some(sender) = &self.sender else {
            return;
        };
        match sender.try_send(Message::Spike(spike)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                *self
                    .journal
                    .lock()
                    .uncaptured
                    .entry((spike.cpu, "busy"))
                    .or_default() += 1;
            }
        }
    }

    /// Hands a capture made elsewhere (a workload task's, by the
    /// observer) to the recorder without waiting; it is kept within the
    /// same rate limits and bounds as the recorder's own.
    pub fn file(&self, capture: Capture) {
        let Some(sender) = &self.sender else {
            return;
        };
        let cpu = capture.summary.cpu;
        if sender.try_send(Message::Made(Box::new(capture))).is_err() {
            *self
                .journal
                .lock()
                .uncaptured
                .entry((cpu, "busy"))
                .or_default() += 1;
        }
    }

    /// The CPUs measured from now on: the instance records them (its
    /// `tracing_cpumask`) and their SMI counters are read. Never waits; a
    /// full queue leaves it for the next call.
    pub fn set_cpus(&self, cpus: Vec<usize>) -> bool {
        let Some(sender) = &self.sender else {
            return true;
        };
        sender.try_send(Message::SetCpus(cpus)).is_ok()
    }

    /// Waits until every spike noticed so far is captured or counted.
    pub fn flush(&self) {
        let Some(sender) = &self.sender else {
            return;
        };
        let (ack, done) = sync_channel(1);
        if sender.send(Message::Flush(ack)).is_ok() {
            let _ = done.recv();
        }
    }

    /// Stops the thread and removes the tracefs instance.
    pub fn stop(&mut self) {
        if let Some(sender) = self.sender.take() {
            let _ = sender.send(Message::Stop);
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let mut data = self.journal.lock();
        if data.available {
            data.available = false;
            data.reason = Some("stopped".to_string());
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.stop();
    }
}

struct Worker {
    settings: Settings,
    /// The tracefs mount and the CPUs, to set the instance up again.
    root: std::path::PathBuf,
    cpus: Vec<usize>,
    /// None while it is broken and could not be made again.
    instance: Option<Instance>,
    store: Option<Store>,
    steal: StealHistory,
    smi: Option<SmiCounters>,
    /// Each CPU's last SMI reading: (monotonic ns, count).
    smi_last: BTreeMap<usize, (u64, u64)>,
    journal: Arc<Journal>,
    limits: RateLimits,
}

impl Worker {
    fn run(&mut self, receiver: Receiver<Message>) {
        let mut next_smi = 0;
        let mut next_check = 0;
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
            match receiver.recv_timeout(TICK) {
                Ok(Message::Spike(spike)) => self.handle(spike),
                Ok(Message::Made(capture)) => {
                    let summary = &capture.summary;
                    let (cpu, at, latency) =
                        (summary.cpu, summary.wakeup_mono_ns, summary.latency_ns);
                    if self.within_limits(cpu, at, latency, Trigger::Threshold) {
                        self.keep(*capture);
                    }
                }
                Ok(Message::SetCpus(cpus)) => self.set_cpus(cpus),
                Ok(Message::Flush(ack)) => {
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
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        self.smi = SmiCounters::open(Path::new("/dev/cpu"), &cpuinfo, &cpus).0;
        self.cpus = cpus;
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

    fn count_uncaptured(&self, cpu: usize, reason: &'static str) {
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

    fn handle(&mut self, spike: Spike) {
        if self.instance.is_none() {
            self.count_uncaptured(spike.cpu, "failed");
            return;
        }
        if !self.within_limits(spike.cpu, spike.wakeup_ns, spike.latency_ns, spike.trigger) {
            return;
        }
        match self.capture(spike) {
            Ok(capture) => self.keep(capture),
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
                cause.policy = cause
                    .pid
                    .and_then(sys::thread_policy_name)
                    .map(str::to_string);
            }
        }
        let wall_now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let at_unix = wall_now.saturating_sub(now.saturating_sub(spike.wakeup_ns));
        let summary = Summary {
            id: match spike.trigger {
                Trigger::Threshold => make_id(at_unix, spike.cpu),
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
        let written = self
            .store
            .as_ref()
            .map(|store| (store.write(&capture), store.bytes()));
        let mut journal = self.journal.lock();
        match written {
            Some((Err(reason), _)) => {
                *journal
                    .uncaptured
                    .entry((capture.summary.cpu, "failed"))
                    .or_default() += 1;
                journal.reason = Some(reason);
                return;
            }
            Some((Ok(written), bytes)) => {
                journal.recent.retain(|s| !written.removed.contains(&s.id));
                journal.disk_bytes = bytes;
            }
            None => {
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
        journal.recent.push_front(capture.summary);
        journal.recent.truncate(self.settings.max_captures);
    }
}
