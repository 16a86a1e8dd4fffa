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

use super::journal::{Journal, JournalData, Settings, Spike, Trigger};
use super::limits::RateLimits;
use super::noise::{SmiCounters, StealHistory};
use super::store::Store;
use super::tracefs::{self, Capability};
use super::worker::{Message, Offer, Worker};

/// The running recorder (or the reason there is none): its thread, and
/// the [`Capturer`] that hands it spikes (a `Recorder` is used as one).
pub struct Recorder {
    capturer: Capturer,
    thread: Option<JoinHandle<()>>,
}

/// What hands spikes to the recorder without waiting, and reads its
/// journal: a handle, cloned for whoever offers spikes (the daemon's
/// collector, its instruments' runs). Once the recorder is stopped, what
/// it is handed is dropped.
#[derive(Clone)]
pub struct Capturer {
    sender: Option<SyncSender<Message>>,
    journal: Arc<Journal>,
    /// `forensics.capture_new_max`: a new maximum of a CPU's window is
    /// captured too.
    new_max: bool,
}

impl std::ops::Deref for Recorder {
    type Target = Capturer;

    fn deref(&self) -> &Capturer {
        &self.capturer
    }
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
            capturer: Capturer::off(Arc::new(Journal(Mutex::new(journal)))),
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
                capturer: Capturer::off(Arc::new(Journal(Mutex::new(data)))),
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
        let new_max = settings.capture_new_max;
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
                    capturer: Capturer {
                        sender: Some(sender),
                        journal,
                        new_max,
                    },
                    thread: Some(thread),
                };
                for note in notes {
                    recorder
                        .capturer
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

    /// Waits until every spike noticed so far is captured or counted.
    pub fn flush(&self) {
        let Some(sender) = &self.capturer.sender else {
            return;
        };
        let (ack, done) = sync_channel(1);
        if sender.send(Message::Flush(ack)).is_ok() {
            let _ = done.recv();
        }
    }

    /// Stops the thread and removes the tracefs instance.
    pub fn stop(&mut self) {
        if let Some(sender) = self.capturer.sender.take() {
            let _ = sender.send(Message::Stop);
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let mut data = self.capturer.journal.lock();
        if data.available {
            data.available = false;
            data.reason = Some("stopped".to_string());
        }
    }
}

impl Capturer {
    /// One that captures nothing (no recorder runs).
    pub fn none() -> Capturer {
        Capturer::off(Arc::default())
    }

    /// Nothing captured: the journal says why.
    fn off(journal: Arc<Journal>) -> Capturer {
        Capturer {
            sender: None,
            journal,
            new_max: false,
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
        let cpu = spike.cpu;
        self.send(sender, Message::Spike(spike), cpu);
    }

    /// Hands timerlat's split of a period over the threshold on `cpu` to
    /// the recorder without waiting: it joins the sampler's capture of the
    /// same wake-up, or gets its own.
    pub fn notice_timerlat(&self, cpu: usize, split: super::store::TimerlatSplit) {
        let Some(sender) = &self.sender else {
            return;
        };
        self.send(sender, Message::Timerlat(cpu, split), cpu);
    }

    /// Offers a capture made elsewhere (a workload task's, by the
    /// observer) to the recorder without waiting; it is made and kept only
    /// within the same rate limits and bounds as the recorder's own.
    pub fn offer(&self, offer: Offer) {
        let Some(sender) = &self.sender else {
            return;
        };
        let cpu = offer.cpu;
        self.send(sender, Message::Offered(offer), cpu);
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

    /// Why a consumer's interval whose largest wake-up was `max_ns` late
    /// (its CPU's window maximum before it `window_max_ns`) is captured,
    /// if it is, while the recorder runs: at least the threshold late, or
    /// (`forensics.capture_new_max`) a new maximum of the window.
    pub fn trigger(&self, max_ns: u64, window_max_ns: u64) -> Option<Trigger> {
        let threshold = self.threshold_ns()?;
        if max_ns >= threshold {
            Some(Trigger::Threshold)
        } else if self.new_max && max_ns > window_max_ns {
            Some(Trigger::NewMax)
        } else {
            None
        }
    }

    /// Hands `message` over without waiting; a full queue counts the
    /// spike on `cpu` as uncaptured (`busy`), as does a recorder whose
    /// thread is gone while it was said available.
    fn send(&self, sender: &SyncSender<Message>, message: Message, cpu: usize) {
        let busy = match sender.try_send(message) {
            Ok(()) => false,
            Err(TrySendError::Full(_)) => true,
            Err(TrySendError::Disconnected(_)) => self.journal.lock().available,
        };
        if busy {
            *self
                .journal
                .lock()
                .uncaptured
                .entry((cpu, "busy"))
                .or_default() += 1;
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A capturer over a queue of `room` whose receiving end the test
    /// holds, with `threshold_ns` and `new_max`.
    fn capturer(room: usize, new_max: bool) -> (Capturer, std::sync::mpsc::Receiver<Message>) {
        let (sender, receiver) = sync_channel(room);
        let data = JournalData {
            enabled: true,
            available: true,
            threshold_ns: 1_000,
            ..JournalData::default()
        };
        let journal = Arc::new(Journal(Mutex::new(data)));
        let capturer = Capturer {
            sender: Some(sender),
            journal,
            new_max,
        };
        (capturer, receiver)
    }

    #[test]
    fn a_maximum_is_taken_over_the_threshold_and_as_a_new_window_maximum_when_asked() {
        let (plain, _rx) = capturer(1, false);
        assert_eq!(plain.trigger(1_000, 5_000), Some(Trigger::Threshold));
        assert_eq!(plain.trigger(999, 0), None);
        let (new_max, _rx) = capturer(1, true);
        assert_eq!(new_max.trigger(999, 500), Some(Trigger::NewMax));
        assert_eq!(new_max.trigger(500, 500), None, "not above the window's");
        assert_eq!(Capturer::none().trigger(u64::MAX, 0), None);
        assert_eq!(Capturer::none().threshold_ns(), None);
    }

    fn spike(cpu: usize) -> Spike {
        Spike {
            cpu,
            sampler_tid: 1,
            latency_ns: 2_000,
            wakeup_ns: 10,
            trigger: Trigger::Threshold,
        }
    }

    #[test]
    fn a_full_queue_counts_busy_and_a_stopped_recorder_drops_quietly() {
        let (capturer, receiver) = capturer(1, false);
        let clone = capturer.clone();
        capturer.notice(spike(0));
        clone.notice(spike(1));
        let busy = |c: &Capturer| c.journal.lock().uncaptured.clone();
        assert_eq!(busy(&capturer), BTreeMap::from([((1, "busy"), 1)]));
        // The thread is gone while still said available: lost, counted.
        drop(receiver);
        capturer.notice(spike(0));
        assert_eq!(busy(&capturer)[&(0, "busy")], 1);
        // Stopped (no longer available): dropped without a count.
        capturer.journal.lock().available = false;
        clone.notice(spike(0));
        assert_eq!(busy(&capturer)[&(0, "busy")], 1);
    }
}
