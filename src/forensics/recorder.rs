//! The recorder: its handle, which starts the thread (its loop in
//! `worker.rs`), hands it spike notices without waiting, and holds the
//! journal the daemon serves and `measure` prints.
//!
//! It is an ordinary thread (not the exporter's runtime, not a sampler):
//! reading a CPU's ring buffer takes tens of milliseconds of system time,
//! writing a capture waits for the disk. Every 100 ms it reads the steal
//! counters, every second the SMI counters; otherwise it sleeps on its
//! queue. Notices come through a bounded queue that never blocks the
//! sender: a full queue counts the spike as uncaptured (`busy`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::journal::{Journal, JournalData, Settings, Spike};
use super::limits::RateLimits;
use super::noise::{SmiCounters, StealHistory};
use super::store::Store;
use super::tracefs::{self, Capability};
use super::worker::{Message, Offer, Worker};

/// The running recorder (or the reason there is none).
pub struct Recorder {
    sender: Option<SyncSender<Message>>,
    journal: Arc<Journal>,
    thread: Option<JoinHandle<()>>,
}

/// How many notices may wait for the recorder.
const QUEUE: usize = 64;
impl Recorder {
    /// Forensics off: the journal says so.
    pub fn disabled() -> Recorder {
        let journal = JournalData {
            reason: Some("off (forensics.enabled = false, the default)".to_string()),
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
        let cpuinfo = crate::files::read_cpuinfo();
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
            splits: Vec::new(),
            last_kept: BTreeMap::new(),
            refused: BTreeMap::new(),
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

    /// Hands timerlat's split of a period over the threshold on `cpu` to
    /// the recorder without waiting: it joins the sampler's capture of the
    /// same wake-up, or gets its own.
    pub fn notice_timerlat(&self, cpu: usize, split: super::store::TimerlatSplit) {
        let Some(sender) = &self.sender else {
            return;
        };
        if sender.try_send(Message::Timerlat(cpu, split)).is_err() {
            *self
                .journal
                .lock()
                .uncaptured
                .entry((cpu, "busy"))
                .or_default() += 1;
        }
    }

    /// Offers a capture made elsewhere (a workload task's, by the
    /// observer) to the recorder without waiting; it is made and kept only
    /// within the same rate limits and bounds as the recorder's own.
    pub fn offer(&self, offer: Offer) {
        let Some(sender) = &self.sender else {
            return;
        };
        let cpu = offer.cpu;
        if sender.try_send(Message::Offered(offer)).is_err() {
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
