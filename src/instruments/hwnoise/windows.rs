//! The daemon's hardware-noise windows (`[hwnoise]`): an ordinary thread
//! that sleeps until each scheduled window (the `[load]` schedule's
//! rules), runs the kernel's hwlat tracer through it (`hwlat`), and
//! publishes what it found as it goes: the largest gap and the counts per
//! CPU, NMIs, SMIs where the MSR can be read. A window whose tracer is in
//! use by another program, or that the kernel cannot run, is skipped and
//! counted by its reason; it is never retried inside the same window.
//!
//! While a window runs, its CPUs spin with interrupts off for `width` of
//! every `window`: the status says which CPUs and since when, so that the
//! daemon keeps the samplers' (and timerlat's) wake-ups of those CPUs out
//! of their latency figures and files them apart.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tracing::{info, warn};

use crate::cpulist::format_cpu_list;
use crate::forensics::noise::SmiCounters;
use crate::instruments::event::HwlatSample;
use crate::instruments::hwlat::{HwlatSession, HwlatSpec, StartErrorKind};
use crate::load::{Schedule, Window};

/// How often a running window's buffers are read.
const DRAIN_EVERY: Duration = Duration::from_millis(200);
/// Finished windows kept for the collector at most (it takes them every
/// 200 ms; more waiting means it is stuck, and the oldest go).
const MAX_FINISHED: usize = 16;

/// One CPU's gaps in a window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuNoise {
    /// hwlat samples: windows of the tracer with a gap over the threshold.
    pub samples: u64,
    /// Gaps over the threshold inside those samples.
    pub gaps: u64,
    /// The largest gap, µs.
    pub max_us: u64,
    pub nmis: u64,
}

impl CpuNoise {
    fn add(&mut self, s: &HwlatSample) {
        self.samples += 1;
        self.gaps += u64::from(s.count.max(1));
        self.max_us = self.max_us.max(s.gap_us());
        self.nmis += u64::from(s.nmi_count);
    }
}

/// How a window went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The tracer ran (to the window's end, or until latencyd stopped).
    Ran,
    /// It did not run, and why.
    Skipped(StartErrorKind, String),
}

/// A finished window, for the log and the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowReport {
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    pub cpus: Vec<usize>,
    pub outcome: Outcome,
    /// By CPU (those with a gap over the threshold).
    pub noise: BTreeMap<usize, CpuNoise>,
    /// SMIs on the window's CPUs, where MSR 0x34 can be read.
    pub smis: Option<u64>,
    /// What went wrong on the way, and settings changed behind latencyd.
    pub notes: Vec<String>,
}

impl WindowReport {
    /// The largest gap of the window, µs.
    pub fn max_us(&self) -> u64 {
        self.noise.values().map(|n| n.max_us).max().unwrap_or(0)
    }

    pub fn samples(&self) -> u64 {
        self.noise.values().map(|n| n.samples).sum()
    }

    pub fn nmis(&self) -> u64 {
        self.noise.values().map(|n| n.nmis).sum()
    }
}

/// The window running now: which CPUs spin, from when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Active {
    pub cpus: Vec<usize>,
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    /// CLOCK_MONOTONIC just before the tracer started.
    pub since_mono_ns: u64,
}

/// Per CPU since the daemon started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTotals {
    pub samples: u64,
    pub gaps: u64,
    pub nmis: u64,
    /// The largest gap of the running window, else of the last one that ran.
    pub window_max_us: u64,
    pub max_us: u64,
}

/// What the windows are doing, for the status, the API and the metrics.
#[derive(Debug, Clone, Default)]
pub struct Status {
    pub enabled: bool,
    pub cpus: Vec<usize>,
    pub threshold_us: u64,
    pub width_us: u64,
    pub window_us: u64,
    pub active: Option<Active>,
    /// CLOCK_MONOTONIC when the last window's tracer had stopped.
    pub ended_mono_ns: Option<u64>,
    pub next_start_unix_ns: Option<u64>,
    /// Windows whose tracer ran.
    pub windows_total: u64,
    /// Windows skipped, by reason (`busy`, `unavailable`, `failed`).
    pub skipped: BTreeMap<&'static str, u64>,
    pub last_skip: Option<String>,
    pub per_cpu: BTreeMap<usize, CpuTotals>,
    /// SMIs in windows, where MSR 0x34 can be read.
    pub smis_total: Option<u64>,
    /// Why SMIs are not counted.
    pub smis_unread: Option<String>,
    pub last_window: Option<WindowReport>,
    /// Finished windows not yet taken by the collector.
    pub finished: Vec<WindowReport>,
    /// Why no window runs at all though `[hwnoise]` is enabled (its CPUs
    /// could not be resolved, its thread could not start).
    pub stopped: Option<String>,
}

fn lock(status: &Mutex<Status>) -> MutexGuard<'_, Status> {
    status.lock().unwrap_or_else(|e| e.into_inner())
}

/// The windows' thread, or nothing when `[hwnoise]` is off.
pub struct Windows {
    status: Arc<Mutex<Status>>,
    stop: Option<SyncSender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Windows {
    pub fn disabled() -> Windows {
        Windows {
            status: Arc::new(Mutex::new(Status::default())),
            stop: None,
            thread: None,
        }
    }

    /// Enabled, but no window will run, for `why` (said in the status).
    pub fn not_running(why: String) -> Windows {
        warn!("hwnoise: {why}; no windows run");
        Windows {
            status: Arc::new(Mutex::new(Status {
                enabled: true,
                stopped: Some(why),
                ..Status::default()
            })),
            stop: None,
            thread: None,
        }
    }

    /// Starts the thread; it runs hwlat as `spec` says in every window
    /// of `schedule`.
    pub fn start(spec: HwlatSpec, schedule: Schedule) -> Windows {
        let status = Arc::new(Mutex::new(Status {
            enabled: true,
            cpus: spec.cpus.clone(),
            threshold_us: spec.threshold_us,
            width_us: spec.width_us,
            window_us: spec.window_us,
            next_start_unix_ns: Some(unix_ns(schedule.next_window(SystemTime::now()).start)),
            ..Status::default()
        }));
        let (stop, stopped) = sync_channel(1);
        let shared = Arc::clone(&status);
        let thread = std::thread::Builder::new()
            .name("latencyd-hwnoise".to_string())
            .spawn(move || run(&spec, schedule, &shared, &stopped));
        let thread = match thread {
            Ok(thread) => Some(thread),
            Err(err) => {
                let why = format!("its thread cannot start ({err})");
                warn!("hwnoise: {why}; no windows run");
                let mut st = lock(&status);
                st.stopped = Some(why);
                st.next_start_unix_ns = None;
                None
            }
        };
        Windows {
            status,
            stop: Some(stop),
            thread,
        }
    }

    pub fn status(&self) -> Arc<Mutex<Status>> {
        Arc::clone(&self.status)
    }

    /// Ends a running window (its settings set back) and the thread.
    pub fn stop(&mut self) {
        self.stop.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Windows {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Waits until `until` (wall time, looked at again every second so that a
/// clock step is followed); true when told to stop.
fn wait_until(stopped: &Receiver<()>, until: SystemTime) -> bool {
    loop {
        let left = until
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO);
        if left.is_zero() {
            return false;
        }
        match stopped.recv_timeout(left.min(Duration::from_secs(1))) {
            Err(RecvTimeoutError::Timeout) => {}
            _ => return true,
        }
    }
}

fn run(spec: &HwlatSpec, schedule: Schedule, status: &Mutex<Status>, stopped: &Receiver<()>) {
    loop {
        let now = SystemTime::now();
        lock(status).next_start_unix_ns = Some(unix_ns(schedule.next_window(now).start));
        let Some(window) = schedule.window_at(now) else {
            if wait_until(stopped, schedule.next_window(now).start) {
                return;
            }
            continue;
        };
        let (report, was_stopped) = run_window(spec, window, status, stopped);
        say(&report);
        let skipped = matches!(report.outcome, Outcome::Skipped(..));
        publish(status, report);
        // A skipped window is not tried again before its end.
        if was_stopped || (skipped && wait_until(stopped, window.end)) {
            return;
        }
    }
}

/// Runs one window; says whether latencyd was stopping.
fn run_window(
    spec: &HwlatSpec,
    window: Window,
    status: &Mutex<Status>,
    stopped: &Receiver<()>,
) -> (WindowReport, bool) {
    let mut report = WindowReport {
        start_unix_ns: unix_ns(SystemTime::now()),
        end_unix_ns: unix_ns(window.end),
        cpus: spec.cpus.clone(),
        outcome: Outcome::Ran,
        noise: BTreeMap::new(),
        smis: None,
        notes: Vec::new(),
    };
    let cpuinfo = crate::files::read_cpuinfo();
    let (smi, smi_cap) = SmiCounters::open(Path::new("/dev/cpu"), &cpuinfo, &spec.cpus);
    let smi_before = smi.as_ref().map(SmiCounters::read);
    let since_mono_ns = crate::rt::sys::monotonic_now_ns();
    let mut session = match HwlatSession::start(spec) {
        Ok(session) => session,
        Err(err) => {
            report.end_unix_ns = report.start_unix_ns;
            report.outcome = Outcome::Skipped(err.kind, err.why);
            return (report, false);
        }
    };
    // What latencyd changed, said as the window starts.
    for note in std::mem::take(&mut session.notes) {
        info!("hwnoise window: {note} (set back at its end)");
    }
    {
        let mut s = lock(status);
        s.active = Some(Active {
            cpus: spec.cpus.clone(),
            start_unix_ns: report.start_unix_ns,
            end_unix_ns: report.end_unix_ns,
            since_mono_ns,
        });
        for cpu in &spec.cpus {
            s.per_cpu.entry(*cpu).or_default().window_max_us = 0;
        }
    }
    info!(
        "hwnoise window: hwlat spins CPUs {} for {} us of every {} us until {}; their \
         samplers' wake-ups are kept apart meanwhile",
        format_cpu_list(&spec.cpus),
        spec.width_us,
        spec.window_us,
        crate::calendar::format_rfc3339_ms(report.end_unix_ns)
    );
    let was_stopped = loop {
        let next = (SystemTime::now() + DRAIN_EVERY).min(window.end);
        let was_stopped = wait_until(stopped, next);
        let errors = session.drain(|cpu, sample| add(status, &mut report, cpu, &sample));
        report.notes.extend(errors);
        if was_stopped || SystemTime::now() >= window.end {
            break was_stopped;
        }
    };
    report.notes.extend(
        session
            .changed_behind()
            .into_iter()
            .map(|c| format!("changed by another program while the window ran: {c}")),
    );
    let mut rest = Vec::new();
    report
        .notes
        .extend(session.stop(|cpu, sample| rest.push((cpu, sample))));
    drop(session);
    for (cpu, sample) in rest {
        add(status, &mut report, cpu, &sample);
    }
    report.end_unix_ns = report.end_unix_ns.min(unix_ns(SystemTime::now()));
    report.smis = match (smi_before, smi.as_ref().map(SmiCounters::read)) {
        (Some(before), Some(after)) => Some(
            before
                .iter()
                .zip(&after)
                .filter_map(|((_, b), (_, a))| Some(a.as_ref()?.wrapping_sub(*b.as_ref()?)))
                .map(|d| d & 0xffff_ffff)
                .sum(),
        ),
        _ => {
            lock(status).smis_unread = Some(smi_cap.detail);
            None
        }
    };
    let mut s = lock(status);
    s.active = None;
    s.ended_mono_ns = Some(crate::rt::sys::monotonic_now_ns());
    (report, was_stopped)
}

/// One hwlat sample, in the window's report and in the live totals.
fn add(status: &Mutex<Status>, report: &mut WindowReport, cpu: usize, sample: &HwlatSample) {
    report.noise.entry(cpu).or_default().add(sample);
    let mut s = lock(status);
    let t = s.per_cpu.entry(cpu).or_default();
    t.samples += 1;
    t.gaps += u64::from(sample.count.max(1));
    t.nmis += u64::from(sample.nmi_count);
    t.window_max_us = t.window_max_us.max(sample.gap_us());
    t.max_us = t.max_us.max(sample.gap_us());
}

fn publish(status: &Mutex<Status>, report: WindowReport) {
    let mut s = lock(status);
    match &report.outcome {
        Outcome::Ran => {
            s.windows_total += 1;
            if let Some(smis) = report.smis {
                s.smis_total = Some(s.smis_total.unwrap_or(0) + smis);
            }
        }
        Outcome::Skipped(kind, why) => {
            *s.skipped.entry(kind.name()).or_default() += 1;
            s.last_skip = Some(why.clone());
        }
    }
    if s.finished.len() >= MAX_FINISHED {
        s.finished.remove(0);
    }
    s.finished.push(report.clone());
    s.last_window = Some(report);
}

fn say(report: &WindowReport) {
    match &report.outcome {
        Outcome::Ran => {
            info!(
                "hwnoise window ended: CPUs {}, {} sample(s) over the threshold, largest gap \
                 {} us, {} NMI(s){}",
                format_cpu_list(&report.cpus),
                report.samples(),
                report.max_us(),
                report.nmis(),
                report
                    .smis
                    .map_or(String::new(), |n| format!(", {n} SMI(s)"))
            );
            for note in &report.notes {
                info!("hwnoise window: {note}");
            }
        }
        Outcome::Skipped(kind, why) => warn!(
            "hwnoise window skipped ({}): {why}; sampling goes on",
            kind.name()
        ),
    }
}

fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(root: &Path) -> HwlatSpec {
        HwlatSpec {
            tracefs: root.to_path_buf(),
            cpus: vec![0, 1],
            threshold_us: 10,
            width_us: 500_000,
            window_us: 1_000_000,
        }
    }

    fn every_two_seconds() -> Schedule {
        Schedule::new(
            Duration::from_secs(2),
            Duration::ZERO,
            Duration::from_secs(1),
        )
        .unwrap()
    }

    #[test]
    fn a_window_beside_another_hwlat_user_is_skipped_and_counted_as_busy() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("instances/rtla")).unwrap();
        std::fs::write(dir.path().join("available_tracers"), "hwlat nop\n").unwrap();
        std::fs::write(dir.path().join("instances/rtla/current_tracer"), "hwlat\n").unwrap();
        let mut windows = Windows::start(spec(dir.path()), every_two_seconds());
        let status = windows.status();
        let began = std::time::Instant::now();
        while lock(&status).finished.is_empty() && began.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
        windows.stop();
        let s = lock(&status);
        assert_eq!(s.skipped.get("busy"), Some(&1), "{:?}", s.skipped);
        assert_eq!(s.windows_total, 0);
        assert!(s.active.is_none());
        let report = &s.finished[0];
        match &report.outcome {
            Outcome::Skipped(kind, why) => {
                assert_eq!(*kind, StartErrorKind::Busy);
                assert!(why.contains("instance rtla (hwlat)"), "{why}");
            }
            Outcome::Ran => panic!("ran beside another user"),
        }
        assert!(
            !dir.path().join("instances/latencyd-hwnoise").exists()
                && std::fs::read_dir(dir.path().join("instances"))
                    .unwrap()
                    .count()
                    == 1,
            "no instance made"
        );
    }

    #[test]
    fn without_the_tracer_each_window_is_skipped_as_unavailable_and_stop_is_prompt() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("instances")).unwrap();
        std::fs::write(dir.path().join("available_tracers"), "nop\n").unwrap();
        let mut windows = Windows::start(spec(dir.path()), every_two_seconds());
        let status = windows.status();
        let began = std::time::Instant::now();
        while lock(&status).finished.is_empty() && began.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let asked = std::time::Instant::now();
        windows.stop();
        assert!(
            asked.elapsed() < Duration::from_secs(3),
            "stopping waited {:?}",
            asked.elapsed()
        );
        let s = lock(&status);
        assert_eq!(s.skipped.get("unavailable"), Some(&1), "{:?}", s.skipped);
        assert!(s.last_skip.as_deref().unwrap().contains("no hwlat tracer"));
        assert!(s.next_start_unix_ns.is_some());
    }

    #[test]
    fn a_window_report_sums_its_cpus() {
        let sample = |inner_us, count, nmi_count| HwlatSample {
            inner_us,
            outer_us: 0,
            nmi_total_us: 0,
            nmi_count,
            seqnum: 1,
            count,
            wall_sec: 0,
            wall_nsec: 0,
        };
        let mut report = WindowReport {
            start_unix_ns: 0,
            end_unix_ns: 1,
            cpus: vec![0, 1],
            outcome: Outcome::Ran,
            noise: BTreeMap::new(),
            smis: None,
            notes: Vec::new(),
        };
        let status = Mutex::new(Status::default());
        add(&status, &mut report, 0, &sample(40, 3, 1));
        add(&status, &mut report, 1, &sample(12, 0, 0));
        add(&status, &mut report, 1, &sample(90, 1, 0));
        assert_eq!(
            (report.samples(), report.max_us(), report.nmis()),
            (3, 90, 1)
        );
        assert_eq!(report.noise[&1].gaps, 2, "a count of 0 is one gap");
        let s = lock(&status);
        assert_eq!(s.per_cpu[&1].window_max_us, 90);
        assert_eq!(s.per_cpu[&0].gaps, 3);
    }
}
