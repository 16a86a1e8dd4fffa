//! What spike forensics is told and what it can tell: the settings from
//! the configuration, a spike as the consumer hands it over, and the
//! journal the recorder keeps and the daemon's HTTP side and `measure`
//! read (availability, the recent captures, the counters).

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use serde::Serialize;

use super::store::{Capture, Store, Summary};
use super::tracefs::Capability;

/// What the recorder is told to do, from the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// A wake-up at least this late is captured.
    pub threshold_ns: u64,
    /// Where captures are written; `None` keeps them in memory only
    /// (`measure`).
    pub dir: Option<PathBuf>,
    pub max_captures: usize,
    pub max_bytes: u64,
    /// Each measured CPU's ring buffer, in KiB.
    pub buffer_size_kb: u64,
    /// Where tracefs is mounted.
    pub tracefs: PathBuf,
    /// At most one capture per CPU within this long.
    pub per_cpu_gap_ns: u64,
    /// At most this many captures in any minute, all CPUs together.
    pub max_per_minute: usize,
}

/// Why a wake-up is captured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Trigger {
    /// At least `forensics.threshold` late.
    Threshold,
    /// A new maximum of its CPU's window (`forensics.capture_new_max`),
    /// under the threshold: its own rate limits, and the first evicted.
    NewMax,
}

impl Trigger {
    /// The capture's `trigger` field.
    pub fn name(self) -> &'static str {
        match self {
            Trigger::Threshold => "threshold",
            Trigger::NewMax => "new_max",
        }
    }
}

/// A wake-up to capture, as the consumer saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spike {
    pub cpu: usize,
    pub sampler_tid: i32,
    pub latency_ns: u64,
    /// When the sampler read the time on waking, `CLOCK_MONOTONIC`.
    pub wakeup_ns: u64,
    pub trigger: Trigger,
}

/// Why a spike was not captured (a bounded set: they label a counter).
pub const UNCAPTURED_REASONS: &[&str] = &["rate_limited", "busy", "failed"];

/// What forensics can tell, shared with the HTTP side and `measure`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct JournalData {
    pub enabled: bool,
    pub available: bool,
    /// Why forensics is unavailable, or the last capture failed.
    pub reason: Option<String>,
    pub threshold_ns: u64,
    pub capabilities: Vec<Capability>,
    /// Newest first, at most `max_captures`.
    pub recent: VecDeque<Summary>,
    /// The full captures, when they are kept in memory (no directory).
    #[serde(skip)]
    pub in_memory: VecDeque<Capture>,
    /// Captures by CPU and main cause.
    #[serde(skip)]
    pub captured: BTreeMap<(usize, String), u64>,
    /// Spikes not captured, by CPU and reason.
    #[serde(skip)]
    pub uncaptured: BTreeMap<(usize, &'static str), u64>,
    /// SMIs per CPU since boot, where readable.
    #[serde(skip)]
    pub smi: BTreeMap<usize, u64>,
    /// Bytes the capture directory holds.
    pub disk_bytes: u64,
    /// The directory captures are read from for `/api/v1/spikes/{id}`.
    #[serde(skip)]
    pub dir: Option<PathBuf>,
}

impl JournalData {
    /// The newest capture kept of each CPU, by CPU.
    pub fn latest_by_cpu(&self) -> Vec<&Summary> {
        let mut latest: BTreeMap<usize, &Summary> = BTreeMap::new();
        for summary in &self.recent {
            latest.entry(summary.cpu).or_insert(summary);
        }
        latest.into_values().collect()
    }
}

/// The journal, locked briefly by the recorder and by readers.
#[derive(Debug, Default)]
pub struct Journal(pub(super) Mutex<JournalData>);

impl Journal {
    pub fn lock(&self) -> MutexGuard<'_, JournalData> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The full capture `id` as JSON text (from the directory, or memory).
    pub fn capture_json(&self, id: &str) -> Option<String> {
        let (dir, kept) = {
            let data = self.lock();
            let kept = data
                .in_memory
                .iter()
                .find(|c| c.summary.id == id)
                .and_then(|c| serde_json::to_string(c).ok());
            (data.dir.clone(), kept)
        };
        kept.or_else(|| dir.and_then(|dir| Store::read(&dir, id)))
    }
}
