//! What spike forensics is told and what it can tell: the settings from
//! the configuration, a spike as the consumer hands it over, and the
//! journal the recorder keeps and the daemon's HTTP side and `measure`
//! read (availability, the recent captures, the counters).

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use serde::Serialize;

use super::store::{Capture, Lookup, Store, Summary};
use crate::tracefs::Capability;

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
    /// A new maximum of a CPU's window is captured too, however small.
    pub capture_new_max: bool,
}

/// Why a wake-up is captured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Trigger {
    /// At least `forensics.threshold` late.
    Threshold,
    /// A new maximum of its CPU's window (`forensics.capture_new_max`),
    /// under the threshold: its own rate limits, and the first evicted.
    NewMax,
    /// A timerlat thread at least `forensics.threshold` late, with no
    /// sampler's capture of the same wake-up (`[timerlat]`).
    Timerlat,
}

impl Trigger {
    /// The capture's `trigger` field.
    pub fn name(self) -> &'static str {
        match self {
            Trigger::Threshold => "threshold",
            Trigger::NewMax => "new_max",
            Trigger::Timerlat => "timerlat",
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
    /// Captures made past the rate limits because the wake-up was the
    /// worst of its CPU (`limits::ESCALATION`), by CPU.
    #[serde(skip)]
    pub escalated: BTreeMap<usize, u64>,
    /// SMIs per CPU since boot, where readable.
    #[serde(skip)]
    pub smi: BTreeMap<usize, u64>,
    /// Bytes the capture directory holds.
    pub disk_bytes: u64,
    /// The tracefs instance's name, while one is set up.
    pub instance: Option<String>,
    /// How often the instance was found changed or broken behind
    /// latencyd's back and was set back or made again.
    pub repairs: u64,
    /// What happened to the instance that a person should hear of (it was
    /// changed, made again, or cannot be): taken by the front end, which
    /// logs it. At most `MAX_NOTICES`, oldest dropped first.
    #[serde(skip)]
    pub notices: VecDeque<String>,
    /// The directory captures are read from for `/api/v1/spikes/{id}`.
    #[serde(skip)]
    pub dir: Option<PathBuf>,
    /// The largest capture file read back (`forensics.max_bytes`).
    #[serde(skip)]
    pub max_bytes: u64,
}

/// Notices kept for the front end to take.
pub const MAX_NOTICES: usize = 16;

impl JournalData {
    /// Keeps a notice for the front end to say.
    pub fn notice(&mut self, text: String) {
        if self.notices.len() == MAX_NOTICES {
            self.notices.pop_front();
        }
        self.notices.push_back(text);
    }

    /// Per CPU, the capture of its largest latency among those of the
    /// last `horizon_ns` before `now_unix_ns` (by when they happened), or
    /// its newest capture when it has none that recent; by CPU.
    pub fn worst_by_cpu(&self, now_unix_ns: u64, horizon_ns: u64) -> Vec<&Summary> {
        let since = now_unix_ns.saturating_sub(horizon_ns);
        let mut worst: BTreeMap<usize, (&Summary, bool)> = BTreeMap::new();
        // Newest first: the first seen of a CPU is its newest.
        for summary in &self.recent {
            let recent = crate::calendar::parse_rfc3339_ns(&summary.at).is_ok_and(|at| at >= since);
            match worst.get_mut(&summary.cpu) {
                None => {
                    worst.insert(summary.cpu, (summary, recent));
                }
                Some((best, best_recent)) => {
                    if recent && (!*best_recent || summary.latency_ns > best.latency_ns) {
                        *best = summary;
                        *best_recent = true;
                    }
                }
            }
        }
        worst.into_values().map(|(summary, _)| summary).collect()
    }

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

    /// A copy taken under one lock, for a reader that reads it several
    /// times and must see one moment (a scrape's families); without the
    /// full captures kept in memory and the notices, which no such reader
    /// needs.
    pub fn one_look(&self) -> Journal {
        let mut data = self.lock();
        let in_memory = std::mem::take(&mut data.in_memory);
        let notices = std::mem::take(&mut data.notices);
        let copy = data.clone();
        data.in_memory = in_memory;
        data.notices = notices;
        Journal(Mutex::new(copy))
    }

    /// The full capture `id` as JSON text (from the directory, or
    /// memory), or why there is none; an error when its file cannot be
    /// read.
    pub fn capture_json(&self, id: &str) -> Result<Lookup, String> {
        let (dir, kept, max_bytes) = {
            let data = self.lock();
            let kept = data
                .in_memory
                .iter()
                .find(|c| c.summary.id == id)
                .and_then(|c| serde_json::to_string(c).ok());
            (data.dir.clone(), kept, data.max_bytes)
        };
        match (kept, dir) {
            (Some(kept), _) => Ok(Lookup::Found(kept)),
            (None, Some(dir)) => Store::read(&dir, id, max_bytes),
            (None, None) => Ok(Lookup::Missing),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(cpu: usize, at: &str, latency_ns: u64) -> Summary {
        Summary {
            id: format!("{at}-{cpu}"),
            cpu,
            at: at.to_string(),
            latency_ns,
            deadline_mono_ns: 0,
            wakeup_mono_ns: latency_ns,
            sampler_tid: 1,
            task: None,
            trigger: "threshold".into(),
            verdict: String::new(),
            causes: vec![],
            timer_late_ns: None,
            complete: true,
            gaps: vec![],
            steal_ns: None,
            smi_count: None,
            events_omitted: 0,
            timerlat: None,
            no_sampler_capture: None,
        }
    }

    #[test]
    fn the_worst_recent_capture_of_each_cpu_is_named_else_its_newest() {
        // Newest first, as the recorder keeps them.
        let recent = [
            summary(1, "2026-11-22T00:10:00.000Z", 2_000_000),
            summary(1, "2026-11-22T00:09:00.000Z", 8_000_000),
            summary(1, "2026-11-22T00:00:00.000Z", 30_000_000),
            summary(0, "2026-11-22T00:01:00.000Z", 5_000_000),
        ];
        let data = JournalData {
            recent: recent.into(),
            ..JournalData::default()
        };
        let now = crate::calendar::parse_rfc3339_ns("2026-11-22T00:11:00.000Z").unwrap();
        let fifteen_minutes = 15 * 60 * crate::units::NS_PER_SEC;
        let worst: Vec<(usize, u64)> = data
            .worst_by_cpu(now, fifteen_minutes)
            .iter()
            .map(|s| (s.cpu, s.latency_ns))
            .collect();
        assert_eq!(worst, vec![(0, 5_000_000), (1, 30_000_000)]);
        // Five minutes: the 30 ms one is too old; the 8 ms one is the
        // worst left. CPU 0 has none that recent: its newest.
        let five_minutes = 5 * 60 * crate::units::NS_PER_SEC;
        let worst: Vec<(usize, u64)> = data
            .worst_by_cpu(now, five_minutes)
            .iter()
            .map(|s| (s.cpu, s.latency_ns))
            .collect();
        assert_eq!(worst, vec![(0, 5_000_000), (1, 8_000_000)]);
        assert_eq!(data.latest_by_cpu()[1].latency_ns, 2_000_000);
    }
}
