//! The daemon's record writer: a thread of its own, so no file system
//! call ever runs on the exporter's runtime thread.
//!
//! The collector hands each finished interval over a bounded queue and
//! never waits. Intervals that cannot be written yet (disk full, the
//! directory unwritable) wait in a backlog of `BACKLOG` intervals, tried
//! again with every new interval and every `RETRY`; beyond it the oldest
//! are dropped and counted. `Status` says what happened, for
//! `/api/v1/status` and the metrics.

use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::format::Context;
use super::writer::{Batch, LogWriter, Settings, Target, list};

/// Intervals kept in memory while they cannot be written.
pub const BACKLOG: usize = 64;
/// How often a failing write is tried again without a new interval.
const RETRY: Duration = Duration::from_secs(10);

/// What the record is doing, read by the HTTP surface.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    pub enabled: bool,
    pub dir: String,
    pub interval_ns: u64,
    /// Why the latest write failed, while it does.
    pub error: Option<String>,
    pub intervals_written: u64,
    pub write_errors: u64,
    /// Intervals given up (backlog full, or the queue to the thread full).
    pub intervals_dropped: u64,
    /// Intervals waiting to be written.
    pub backlog: usize,
    pub files: usize,
    pub bytes: u64,
    /// The oldest file's start, ns since the epoch.
    pub oldest_ns: Option<u64>,
    /// The latest interval written: its end, ns since the epoch.
    pub last_written_ns: Option<u64>,
}

/// The writer thread, or nothing when the record is off.
pub struct Keeper {
    sender: Option<SyncSender<Batch>>,
    status: Arc<Mutex<Status>>,
    thread: Option<JoinHandle<()>>,
    settings: Option<Settings>,
}

impl Keeper {
    pub fn disabled() -> Keeper {
        Keeper {
            sender: None,
            status: Arc::new(Mutex::new(Status::default())),
            thread: None,
            settings: None,
        }
    }

    /// Starts the thread; `clock` gives wall time in ns (for retention).
    pub fn start(
        settings: Settings,
        context: Context,
        clock: fn() -> u64,
    ) -> std::io::Result<Keeper> {
        let status = Arc::new(Mutex::new(Status {
            enabled: true,
            dir: settings.dir.display().to_string(),
            interval_ns: settings.interval_ns,
            ..Status::default()
        }));
        refresh_files(&settings, &status);
        let (sender, receiver) = sync_channel(4);
        let thread_status = Arc::clone(&status);
        let thread_settings = settings.clone();
        let thread = std::thread::Builder::new()
            .name("latencyd-record".to_string())
            .spawn(move || run(thread_settings, context, receiver, &thread_status, clock))?;
        Ok(Keeper {
            sender: Some(sender),
            status,
            thread: Some(thread),
            settings: Some(settings),
        })
    }

    pub fn status(&self) -> Arc<Mutex<Status>> {
        Arc::clone(&self.status)
    }

    pub fn settings(&self) -> Option<&Settings> {
        self.settings.as_ref()
    }

    /// Hands over an interval; never waits. A full queue (the thread
    /// stuck in a slow write) drops it, counted.
    pub fn submit(&self, batch: Batch) {
        let Some(sender) = &self.sender else {
            return;
        };
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = sender.try_send(batch) {
            lock(&self.status).intervals_dropped += 1;
        }
    }

    /// Writes what is queued and stops the thread (blocking: not on the
    /// runtime's thread).
    pub fn stop(&mut self) {
        self.sender = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn lock(status: &Mutex<Status>) -> std::sync::MutexGuard<'_, Status> {
    status
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn refresh_files(settings: &Settings, status: &Mutex<Status>) {
    let files = list(&settings.dir).unwrap_or_default();
    let mut s = lock(status);
    s.files = files.len();
    s.bytes = files.iter().map(|f| f.2).sum();
    s.oldest_ns = files.first().map(|f| f.1);
}

fn run(
    settings: Settings,
    context: Context,
    receiver: Receiver<Batch>,
    status: &Mutex<Status>,
    clock: fn() -> u64,
) {
    let mut writer = LogWriter::new(Target::Dir(settings.clone())).with_context(context);
    let mut backlog: VecDeque<Batch> = VecDeque::new();
    let mut open = true;
    while open || !backlog.is_empty() {
        match receiver.recv_timeout(RETRY) {
            Ok(batch) => {
                backlog.push_back(batch);
                if backlog.len() > BACKLOG {
                    backlog.pop_front();
                    lock(status).intervals_dropped += 1;
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => open = false,
        }
        let mut failed = false;
        while let Some(batch) = backlog.front() {
            match writer.write(batch, clock()) {
                Ok(_) => {
                    let end = batch.entries.first().map(|e| e.end_ns());
                    backlog.pop_front();
                    let mut s = lock(status);
                    s.intervals_written += 1;
                    s.last_written_ns = end;
                    if s.error.take().is_some() {
                        tracing::info!("record: writing to {} again", settings.dir.display());
                    }
                }
                Err(err) => {
                    let mut s = lock(status);
                    s.write_errors += 1;
                    if s.error.as_deref() != Some(err.as_str()) {
                        tracing::warn!(
                            "record: {err}; measuring goes on, {} interval(s) kept in memory \
                             and written when it can be (at most {BACKLOG})",
                            backlog.len()
                        );
                    }
                    s.error = Some(err);
                    failed = true;
                    break;
                }
            }
        }
        lock(status).backlog = backlog.len();
        refresh_files(&settings, status);
        if failed && !open {
            // Stopping with intervals that cannot be written: say so.
            let mut s = lock(status);
            s.intervals_dropped += backlog.len() as u64;
            tracing::error!(
                "record: {} interval(s) could not be written before exit",
                backlog.len()
            );
            backlog.clear();
        }
    }
}
