//! The observer as the collector holds it: tracing set up for the
//! observed CPUs and its thread started (`worker`), or the reason there
//! is none in its status; the intervals the thread queued, taken without
//! waiting; the thread stopped and the instance removed at the end.

use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::tracer::Tracer;
use super::worker::{Worker, lock};
use super::{Interval, Settings, Status};
use crate::forensics::noise::SmiCounters;

/// Intervals that may wait for the collector.
const QUEUE: usize = 16;
/// The running observer (or the reason there is none).
pub struct Observer {
    status: Arc<Mutex<Status>>,
    intervals: Option<Receiver<Interval>>,
    stop: Option<SyncSender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Observer {
    /// Observation off: the status says so.
    pub fn disabled() -> Observer {
        Observer {
            status: Arc::new(Mutex::new(Status {
                reason: Some("off (observe.enabled = false, the default)".to_string()),
                ..Status::default()
            })),
            intervals: None,
            stop: None,
            thread: None,
        }
    }

    /// Sets up tracing for `settings.cpus` and starts the thread. Anything
    /// missing leaves the observer unavailable with the reason in its
    /// status; nothing here fails the caller.
    pub fn start(settings: Settings) -> Observer {
        let mut status = Status {
            enabled: true,
            cpus: settings.cpus.clone(),
            ..Status::default()
        };
        let unavailable = |mut status: Status, reason: String| {
            status.reason = Some(reason);
            Observer {
                status: Arc::new(Mutex::new(status)),
                intervals: None,
                stop: None,
                thread: None,
            }
        };
        if settings.cpus.is_empty() {
            return unavailable(
                status,
                "no CPU to observe: every online CPU has a sampler (observe.cpus = \
                 \"unmeasured\"); set observe.cpus to \"all\" or a list to observe CPUs \
                 that have one"
                    .to_string(),
            );
        }
        let tracer = match Tracer::open(&settings.tracefs, settings.buffer_size_kb, &settings.cpus)
        {
            Ok(tracer) => tracer,
            Err(reason) => return unavailable(status, reason),
        };
        let cpuinfo = crate::files::read_cpuinfo();
        let (smi, smi_capability) =
            SmiCounters::open(Path::new("/dev/cpu"), &cpuinfo, &settings.cpus);
        status.capabilities = tracer.capabilities.clone();
        status.capabilities.push(smi_capability);
        status.instance = Some(tracer.instance_name());
        for note in &tracer.notes {
            status.capabilities.push(crate::forensics::Capability::new(
                "cleanup",
                true,
                note.clone(),
            ));
        }
        status.available = true;
        let status = Arc::new(Mutex::new(status));
        let (sender, receiver) = sync_channel(QUEUE);
        let (stop_tx, stop_rx) = sync_channel(1);
        let mut worker = Worker::new(settings, tracer, smi, Arc::clone(&status), sender);
        let thread = std::thread::Builder::new()
            .name("latencyd-observe".to_string())
            .spawn(move || worker.run(&stop_rx));
        match thread {
            Ok(thread) => Observer {
                status,
                intervals: Some(receiver),
                stop: Some(stop_tx),
                thread: Some(thread),
            },
            Err(err) => {
                let data = std::mem::take(&mut *lock(&status));
                unavailable(data, format!("cannot start the observer thread: {err}"))
            }
        }
    }

    pub fn status(&self) -> Arc<Mutex<Status>> {
        Arc::clone(&self.status)
    }

    /// The intervals waiting, oldest first; never waits.
    pub fn drain(&self, mut each: impl FnMut(Interval)) {
        if let Some(intervals) = &self.intervals {
            while let Ok(interval) = intervals.try_recv() {
                each(interval);
            }
        }
    }

    /// Stops the thread and removes the instance; false if the thread
    /// panicked.
    pub fn stop(&mut self) -> bool {
        if let Some(stop) = self.stop.take() {
            let _ = stop.try_send(());
        }
        match self.thread.take() {
            Some(thread) => thread.join().is_ok(),
            None => true,
        }
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.stop();
    }
}
