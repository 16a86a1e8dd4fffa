//! The daemon's timerlat source (`[timerlat]`): an ordinary thread that
//! owns the `Session`, reads the CPUs' buffers every 100 ms into an
//! interval and hands it to the collector through a bounded queue (a full
//! queue makes it keep merging into the interval it holds: nothing is
//! lost, nothing waits), and once a second looks at its neighbours. Never
//! the exporter's runtime, never a sampler.

use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use tracing::{info, warn};

use super::tally::Tally;
use super::tracer::{Session, Spec, capabilities, describe_users};
use crate::tracefs::Capability;

const TICK: Duration = Duration::from_millis(100);
/// Every how many ticks the neighbours are looked at: 1 s.
const CHECK_TICKS: u64 = 10;
const QUEUE: usize = 16;

/// What the source is doing, for the status, the API and the metrics.
#[derive(Debug, Clone, Default)]
pub struct Status {
    pub enabled: bool,
    pub available: bool,
    /// Why it is not available.
    pub reason: Option<String>,
    pub cpus: Vec<usize>,
    pub period_us: u64,
    /// latencyd's own threads are the workload (the `user` context).
    pub user_threads: bool,
    pub instance: Option<String>,
    pub capabilities: Vec<Capability>,
    /// Others running timerlat or osnoise now: (instance or `top`, tracer).
    pub neighbours: Vec<(String, String)>,
    /// `osnoise/` settings someone changed under latencyd, said.
    pub retuned: Vec<String>,
    /// Times a neighbour appeared or a setting changed under latencyd.
    pub disturbances: u64,
    /// What latencyd changed in `osnoise/` (set back at stop).
    pub changed: Vec<String>,
    /// Pages the kernel flagged with events lost before them.
    pub lost_pages: u64,
    pub read_errors: u64,
    pub last_error: Option<String>,
}

/// The running source (or why there is none).
pub struct Source {
    status: Arc<Mutex<Status>>,
    intervals: Option<Receiver<Tally>>,
    stop: Option<SyncSender<()>>,
    thread: Option<JoinHandle<()>>,
}

fn lock(status: &Mutex<Status>) -> MutexGuard<'_, Status> {
    status.lock().unwrap_or_else(|e| e.into_inner())
}

impl Source {
    /// `timerlat.enabled = false`.
    pub fn disabled() -> Source {
        Source::unavailable(Status {
            reason: Some("off (timerlat.enabled = false, the default)".to_string()),
            ..Status::default()
        })
    }

    fn unavailable(status: Status) -> Source {
        Source {
            status: Arc::new(Mutex::new(status)),
            intervals: None,
            stop: None,
            thread: None,
        }
    }

    /// Starts timerlat as `spec` says; anything missing leaves the source
    /// unavailable with the reason in its status, never fails the caller.
    pub fn start(spec: Spec, spike_threshold_ns: u64) -> Source {
        let mut status = Status {
            enabled: true,
            cpus: spec.cpus.clone(),
            period_us: spec.period_us,
            ..Status::default()
        };
        if let Ok(root) = crate::tracefs::locate_for(&spec.tracefs, "timerlat") {
            status.capabilities = capabilities(&root);
        }
        if spec.cpus.is_empty() {
            status.reason = Some("no CPU to run timerlat on".to_string());
            return Source::unavailable(status);
        }
        let session = match Session::start(&spec) {
            Ok(session) => session,
            Err(reason) => {
                status.reason = Some(reason);
                return Source::unavailable(status);
            }
        };
        status.available = true;
        status.user_threads = session.user;
        status.instance = Some(session.instance_name());
        status.changed = session.notes.clone();
        let status = Arc::new(Mutex::new(status));
        let (sender, receiver) = sync_channel(QUEUE);
        let (stop_tx, stop_rx) = sync_channel(1);
        let shared = Arc::clone(&status);
        let cpus = spec.cpus.clone();
        let thread = std::thread::Builder::new()
            .name("timerlat-reader".to_string())
            .spawn(move || {
                run(
                    session,
                    &cpus,
                    spike_threshold_ns,
                    &shared,
                    &sender,
                    &stop_rx,
                )
            });
        match thread {
            Ok(thread) => Source {
                status,
                intervals: Some(receiver),
                stop: Some(stop_tx),
                thread: Some(thread),
            },
            Err(err) => {
                let mut s = lock(&status).clone();
                s.available = false;
                s.reason = Some(format!("cannot start the timerlat thread: {err}"));
                Source::unavailable(s)
            }
        }
    }

    pub fn status(&self) -> Arc<Mutex<Status>> {
        Arc::clone(&self.status)
    }

    /// The intervals waiting for the collector.
    pub fn drain(&self) -> Vec<Tally> {
        self.intervals
            .as_ref()
            .map(|r| r.try_iter().collect())
            .unwrap_or_default()
    }

    /// Stops the thread, which stops the tracer and sets the `osnoise/`
    /// settings back.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.try_send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.intervals = None;
    }
}

impl Drop for Source {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The thread: read, hand over, look around, until told to stop.
fn run(
    mut session: Session,
    cpus: &[usize],
    threshold_ns: u64,
    status: &Mutex<Status>,
    sender: &SyncSender<Tally>,
    stop: &Receiver<()>,
) {
    let empty = || Tally::new(cpus, 0, threshold_ns);
    let mut held = empty();
    let mut ticks = 0u64;
    while let Err(RecvTimeoutError::Timeout) = stop.recv_timeout(TICK) {
        let drained = session.drain(|cpu, sample, at| held.record(cpu, sample, at));
        if drained.missed || !drained.errors.is_empty() {
            let mut s = lock(status);
            s.lost_pages += u64::from(drained.missed);
            s.read_errors += drained.errors.len() as u64;
            if let Some(last) = drained.errors.last() {
                s.last_error = Some(last.clone());
            }
        }
        if held
            .cpus
            .iter()
            .any(|c| c.contexts.iter().any(|s| s.count > 0))
        {
            let next = held.next(0, threshold_ns);
            match sender.try_send(std::mem::replace(&mut held, next)) {
                Ok(()) => {}
                Err(TrySendError::Full(back)) => held = back,
                Err(TrySendError::Disconnected(_)) => break,
            }
        }
        ticks += 1;
        if ticks.is_multiple_of(CHECK_TICKS) {
            look_around(&mut session, status);
        }
    }
    let mut last = empty();
    for note in session.stop(|cpu, sample, at| last.record(cpu, sample, at)) {
        warn!("timerlat: {note}");
    }
    // The last samples, if the collector still takes them.
    let _ = sender.try_send(last);
    info!("timerlat: stopped; osnoise/ settings set back");
}

/// Says a neighbour or a retuned setting once, when it appears.
fn look_around(session: &mut Session, status: &Mutex<Status>) {
    let found = session.check();
    let mut s = lock(status);
    for line in found.instance.iter().chain(&found.workload) {
        if line.ends_with("started again") {
            info!("timerlat: {line}");
        } else {
            warn!("timerlat: {line}");
            s.last_error = Some(line.clone());
        }
    }
    let new_users: Vec<_> = (found.users.iter())
        .filter(|u| !s.neighbours.contains(u))
        .cloned()
        .collect();
    if !new_users.is_empty() {
        warn!(
            "timerlat: {} started beside latencyd's timerlat and shares its host-wide settings; \
             latencyd neither retunes it nor stops",
            describe_users(&new_users)
        );
        s.disturbances += 1;
    }
    let new_changes: Vec<&String> = (found.retuned.iter())
        .filter(|r| !s.retuned.contains(r))
        .collect();
    for change in &new_changes {
        warn!("timerlat: retuned by another program: {change}");
    }
    s.disturbances += new_changes.len() as u64;
    s.neighbours = found.users;
    s.retuned = found.retuned;
}
