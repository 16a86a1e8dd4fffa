//! Captures on disk: one JSON file per capture in a bounded directory.
//!
//! A capture is written to a hidden temporary file, flushed to disk and
//! renamed into place, so a file named `<id>.json` is always whole; a
//! temporary file left by a crash is removed at the next start. After
//! each write the oldest captures are deleted until at most
//! `max_captures` files and `max_bytes` bytes remain; a capture larger
//! than `max_bytes` on its own is not written. Ids sort by time
//! (`<unix milliseconds, 13 digits>-cpu<N>`), so "oldest" is "first".

use std::fs;
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::attribution::Cause;
use super::events::Event;
use crate::files::{self, Links};
use crate::rt::sys;

/// One spike's capture, as stored and served.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capture {
    #[serde(flatten)]
    pub summary: Summary,
    pub events: Vec<Event>,
}

/// The real-time task of an observed CPU whose wake-up was late, for a
/// capture the observer made (`[observe]`); `None` for a sampler's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRef {
    pub name: String,
    pub pid: i32,
    /// Its container or service (`tasks::container_of`), or "".
    pub container: String,
}

/// A capture without its events: what `/api/v1/spikes` lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub id: String,
    pub cpu: usize,
    /// The task whose wake-up was late when it is a workload's, not a
    /// sampler's (captures written before there were any have none).
    #[serde(default)]
    pub task: Option<TaskRef>,
    /// `threshold` (at least `forensics.threshold` late) or `new_max` (a
    /// new maximum of its CPU's window, `forensics.capture_new_max`).
    #[serde(default = "threshold_trigger")]
    pub trigger: String,
    /// The wake-up's wall-clock time, RFC 3339.
    pub at: String,
    pub latency_ns: u64,
    /// The missed deadline and the wake-up, `CLOCK_MONOTONIC`.
    pub deadline_mono_ns: u64,
    pub wakeup_mono_ns: u64,
    pub sampler_tid: i32,
    pub verdict: String,
    pub causes: Vec<Cause>,
    /// How late the timer interrupt woke the sampler; the rest of the
    /// latency is the way from that wake-up to running.
    pub timer_late_ns: Option<u64>,
    /// Whether the trace covered the whole latency; `gaps` says what it
    /// lacked otherwise.
    pub complete: bool,
    pub gaps: Vec<String>,
    /// Hypervisor steal reported for this CPU around the spike.
    pub steal_ns: Option<u64>,
    /// SMIs on this CPU since the last reading before the spike.
    pub smi_count: Option<u64>,
    pub events_omitted: u64,
    /// The kernel's timerlat on the CPU, where it ran (`[timerlat]`): its
    /// latest period around the spike, split into the timer's IRQ, the
    /// thread and its return to user space.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timerlat: Option<TimerlatSplit>,
    /// A capture timerlat triggered: why no sampler's capture covers its
    /// wake-up ([`NoSamplerCapture`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_sampler_capture: Option<NoSamplerCapture>,
}

/// Why a wake-up timerlat found late has no sampler's capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoSamplerCapture {
    /// No sampler measures the CPU.
    NoSampler,
    /// The sampler's capture of a wake-up in the same period was refused
    /// by the rate limits.
    RateLimited,
    /// No wake-up of the sampler in that period was at least the
    /// threshold late.
    OnTime,
}

impl NoSamplerCapture {
    /// Why the wake-up timerlat found late in `period` (its thread's
    /// missed deadline and wake-up) has no sampler's capture: no sampler
    /// on the CPU (`sampled` false), a sampler's wake-up in that period
    /// `refused` by the rate limits, or none late enough.
    pub(super) fn of(sampled: bool, refused: Option<(u64, u64)>, period: (u64, u64)) -> Self {
        if !sampled {
            return NoSamplerCapture::NoSampler;
        }
        match refused {
            Some((deadline, wakeup)) if deadline < period.1 && period.0 < wakeup => {
                NoSamplerCapture::RateLimited
            }
            _ => NoSamplerCapture::OnTime,
        }
    }

    /// As the capture page says it.
    pub fn says(self) -> &'static str {
        match self {
            NoSamplerCapture::NoSampler => "no sampler runs on this CPU",
            NoSamplerCapture::RateLimited => {
                "the sampler's capture of the same period was over the rate limits"
            }
            NoSamplerCapture::OnTime => "the sampler woke on time: under the forensics threshold",
        }
    }
}

/// One timerlat period split into its parts, ns: what made a wake-up late
/// below the scheduler (a late IRQ) or above it (a late thread with an
/// on-time IRQ).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimerlatSplit {
    /// null: the IRQ's sample was not read with the thread's.
    pub irq_ns: Option<u64>,
    pub thread_ns: u64,
    /// Where latencyd's threads are the workload (`timerlat_fd`).
    pub user_ns: Option<u64>,
    /// When timerlat's thread ran, `CLOCK_MONOTONIC`.
    pub thread_mono_ns: u64,
}

fn threshold_trigger() -> String {
    "threshold".to_string()
}

/// The suffix of a new maximum's capture id: the store evicts those first.
const NEW_MAX_SUFFIX: &str = "-max";

/// Whether `id` is shaped like a capture's id (and so safe in a path).
pub fn valid_id(id: &str) -> bool {
    let id = id.strip_suffix(NEW_MAX_SUFFIX).unwrap_or(id);
    let Some((ms, cpu)) = id.split_once("-cpu") else {
        return false;
    };
    ms.len() == 13
        && ms.bytes().all(|b| b.is_ascii_digit())
        && !cpu.is_empty()
        && cpu.len() <= 5
        && cpu.bytes().all(|b| b.is_ascii_digit())
}

pub fn make_id(unix_ns: u64, cpu: usize) -> String {
    format!("{:013}-cpu{cpu}", unix_ns / 1_000_000)
}

/// The id one millisecond after `id` (same CPU and kind), for a capture
/// whose id another capture of the same CPU and millisecond already has
/// (the observer's view of a wake-up beside the recorder's own).
pub fn next_id(id: &str) -> Option<String> {
    if !valid_id(id) {
        return None;
    }
    let (ms, rest) = id.split_at(13);
    let ms: u64 = ms.parse().ok()?;
    let next = format!("{:013}{rest}", ms.checked_add(1)?);
    valid_id(&next).then_some(next)
}

/// A new maximum's capture id: `make_id`'s, with `-max` after it.
pub fn make_new_max_id(unix_ns: u64, cpu: usize) -> String {
    format!("{}{NEW_MAX_SUFFIX}", make_id(unix_ns, cpu))
}

/// The capture directory and its bounds.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    max_captures: usize,
    max_bytes: u64,
}

/// What a write did.
#[derive(Debug, PartialEq, Eq)]
pub struct Written {
    pub bytes: u64,
    /// Ids deleted to stay within the bounds, oldest first.
    pub removed: Vec<String>,
}

impl Store {
    /// Creates the directory if needed, removes temporary files left by a
    /// crash, and returns the summaries of the captures there, newest
    /// first (within the bounds: older ones are deleted).
    pub fn open(
        dir: &Path,
        max_captures: usize,
        max_bytes: u64,
    ) -> Result<(Store, Vec<Summary>, Vec<String>), String> {
        // Not for others to write in (files.rs says why).
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o750)
            .create(dir)
            .map_err(|err| {
                format!(
                    "cannot create the capture directory {}: {err}",
                    dir.display()
                )
            })?;
        let store = Store {
            dir: dir.to_path_buf(),
            max_captures,
            max_bytes,
        };
        let entries = fs::read_dir(dir)
            .map_err(|err| format!("cannot read the capture directory {}: {err}", dir.display()))?;
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with(".tmp-") {
                let _ = fs::remove_file(entry.path());
            }
        }
        // A probe write: a directory that cannot take a file is found now.
        let probe = dir.join(format!(".tmp-probe-{:016x}", sys::random_u64()));
        files::create_new(&probe).map_err(|err| {
            format!(
                "cannot write in the capture directory {}: {err}",
                dir.display()
            )
        })?;
        let _ = fs::remove_file(probe);
        store.prune(None);
        let mut summaries = Vec::new();
        let mut warnings: Vec<String> = files::loose_permissions(dir).into_iter().collect();
        for (id, _) in store.listing().into_iter().rev() {
            match files::read_text_bounded(&store.path_of(&id), Links::Refuse, max_bytes) {
                Ok(text) => {
                    if let Ok(capture) = serde_json::from_str::<Capture>(&text) {
                        summaries.push(capture.summary);
                    }
                }
                Err(why) => warnings.push(format!("a capture file is not read: {why}")),
            }
        }
        Ok((store, summaries, warnings))
    }

    fn path_of(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// The captures on disk, oldest first: (id, bytes).
    fn listing(&self) -> Vec<(String, u64)> {
        let mut files: Vec<(String, u64)> = fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                let id = name.strip_suffix(".json")?.to_string();
                // Not followed: a link is not a capture, whatever its name.
                let meta = entry.metadata().ok()?;
                (valid_id(&id) && meta.is_file()).then_some((id, meta.len()))
            })
            .collect();
        files.sort();
        files
    }

    /// Bytes the captures take now.
    pub fn bytes(&self) -> u64 {
        self.listing().iter().map(|(_, b)| b).sum()
    }

    /// Writes `capture` whole or not at all, then deletes the oldest
    /// captures beyond the bounds.
    pub fn write(&self, capture: &Capture) -> Result<Written, String> {
        let json = serde_json::to_vec(capture)
            .map_err(|err| format!("cannot encode the capture: {err}"))?;
        let bytes = json.len() as u64;
        if bytes > self.max_bytes {
            return Err(format!(
                "the capture takes {bytes} bytes, more than forensics.max_bytes ({}) allows",
                self.max_bytes
            ));
        }
        let id = &capture.summary.id;
        // Unpredictable and made new: nobody can have put a link there.
        let tmp = self
            .dir
            .join(format!(".tmp-{id}-{:016x}", sys::random_u64()));
        let result = (|| -> std::io::Result<()> {
            let mut file = files::create_new(&tmp)?;
            file.write_all(&json)?;
            file.sync_all()?;
            fs::rename(&tmp, self.path_of(id))?;
            // The rename itself is durable once the directory is synced.
            fs::File::open(&self.dir)?.sync_all()
        })();
        if let Err(err) = result {
            let _ = fs::remove_file(&tmp);
            return Err(format!(
                "cannot write the capture to {}: {err}",
                self.dir.display()
            ));
        }
        Ok(Written {
            bytes,
            removed: self.prune(Some(id)),
        })
    }

    /// Deletes captures until the bounds hold: new maxima first, then
    /// threshold captures, oldest first each; never `keep` (the capture
    /// just written).
    fn prune(&self, keep: Option<&str>) -> Vec<String> {
        let mut files = self.listing();
        files.retain(|(id, _)| Some(id.as_str()) != keep);
        files.sort_by_key(|(id, _)| (!id.ends_with(NEW_MAX_SUFFIX), id.clone()));
        let kept_bytes = keep
            .and_then(|id| fs::metadata(self.path_of(id)).ok())
            .map_or(0, |m| m.len());
        let kept = usize::from(keep.is_some());
        let mut total: u64 = files.iter().map(|(_, b)| b).sum::<u64>() + kept_bytes;
        let mut removed = Vec::new();
        while !files.is_empty()
            && (files.len() + kept > self.max_captures || total > self.max_bytes)
        {
            let (id, bytes) = files.remove(0);
            if fs::remove_file(self.path_of(&id)).is_ok() {
                total -= bytes;
                removed.push(id);
            } else {
                break;
            }
        }
        removed
    }

    /// Whether a capture with this id is on disk.
    pub fn has(&self, id: &str) -> bool {
        self.path_of(id).exists()
    }

    /// The stored JSON of capture `id`, read as from a stranger: a
    /// regular file, not a link, at most `max_bytes`. Anything else under
    /// its name (a link, a FIFO, a directory) is not a capture: never
    /// opened, and said what it is. The error is a file that cannot be
    /// read.
    pub fn read(dir: &Path, id: &str, max_bytes: u64) -> Result<Lookup, String> {
        if !valid_id(id) {
            return Ok(Lookup::Missing);
        }
        let path = dir.join(format!("{id}.json"));
        let Ok(meta) = fs::symlink_metadata(&path) else {
            return Ok(Lookup::Missing);
        };
        if meta.file_type().is_symlink() {
            return Ok(Lookup::NotACapture(format!(
                "{} is a symbolic link, which latencyd does not follow in its directories: \
                 not a capture latencyd wrote",
                path.display()
            )));
        }
        if !meta.is_file() {
            return Ok(Lookup::NotACapture(format!(
                "{} is not a regular file: not a capture latencyd wrote",
                path.display()
            )));
        }
        files::read_text_bounded(&path, Links::Refuse, max_bytes).map(Lookup::Found)
    }
}

/// A capture looked up by its id.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Its JSON text.
    Found(String),
    /// None of that id (never made, or dropped).
    Missing,
    /// Something under its name latencyd did not write, and why it is not
    /// a capture; answered as a capture that is not there.
    NotACapture(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_without_a_samplers_capture_says_which_reason_held() {
        let period = (1_000, 2_000);
        assert_eq!(
            NoSamplerCapture::of(false, Some((1_500, 1_900)), period),
            NoSamplerCapture::NoSampler
        );
        // A refused wake-up that overlaps the period, at either end.
        for refused in [(1_500, 1_900), (500, 1_001), (1_999, 3_000)] {
            assert_eq!(
                NoSamplerCapture::of(true, Some(refused), period),
                NoSamplerCapture::RateLimited,
                "{refused:?}"
            );
        }
        // None, or one outside it.
        for refused in [None, Some((100, 1_000)), Some((2_000, 2_500))] {
            assert_eq!(
                NoSamplerCapture::of(true, refused, period),
                NoSamplerCapture::OnTime,
                "{refused:?}"
            );
        }
    }

    #[test]
    fn the_next_id_is_one_millisecond_later_of_the_same_cpu_and_kind() {
        assert_eq!(
            next_id("1795315538123-cpu1").as_deref(),
            Some("1795315538124-cpu1")
        );
        assert_eq!(
            next_id("1795315538999-cpu12-max").as_deref(),
            Some("1795315539000-cpu12-max")
        );
        assert_eq!(next_id("9999999999999-cpu1"), None, "would need 14 digits");
        assert_eq!(next_id("../x"), None);
    }

    fn capture(ms: u64, cpu: usize, events: usize) -> Capture {
        Capture {
            summary: Summary {
                id: make_id(ms * 1_000_000, cpu),
                cpu,
                at: "2026-11-22T00:00:00.000Z".into(),
                latency_ns: 1_000_000,
                deadline_mono_ns: 1,
                wakeup_mono_ns: 1_000_001,
                sampler_tid: 5,
                task: None,
                trigger: "threshold".into(),
                verdict: "v".into(),
                causes: vec![],
                timer_late_ns: None,
                complete: true,
                gaps: vec![],
                steal_ns: None,
                smi_count: None,
                events_omitted: 0,
                timerlat: None,
                no_sampler_capture: None,
            },
            events: (0..events)
                .map(|i| Event {
                    ts_ns: i as u64,
                    task: "t".into(),
                    pid: 1,
                    cpu,
                    event: "e".into(),
                    fields: "f".repeat(100),
                })
                .collect(),
        }
    }

    #[test]
    fn ids_sort_by_time_and_nothing_else_passes() {
        assert_eq!(make_id(1_795_315_538_123_456_789, 3), "1795315538123-cpu3");
        assert!(valid_id("1795315538123-cpu3"));
        assert_eq!(
            make_new_max_id(1_795_315_538_123_456_789, 3),
            "1795315538123-cpu3-max"
        );
        assert!(valid_id("1795315538123-cpu3-max"));
        assert!(!valid_id("1795315538123-cpu3-max-max"));
        assert!(!valid_id("1795315538123-max"));
        for bad in [
            "",
            "x",
            "1795315538123-cpu",
            "179531553812-cpu1",
            "1795315538123-cpu1/../x",
            "../../etc/passwd",
        ] {
            assert!(!valid_id(bad), "{bad}");
        }
    }

    #[test]
    fn a_link_or_a_forged_file_in_the_directory_is_not_served() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "root:$6$...").unwrap();
        let captures = dir.path().join("spikes");
        let (store, _, warnings) = Store::open(&captures, 10, 1 << 20).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        std::os::unix::fs::symlink(&secret, captures.join("1795315538123-cpu1.json")).unwrap();
        let Ok(Lookup::NotACapture(why)) = Store::read(&captures, "1795315538123-cpu1", 1 << 20)
        else {
            panic!("a link read as a capture");
        };
        assert!(why.contains("is a symbolic link"), "{why}");
        // A FIFO is not opened (which could hang), and said what it is.
        let fifo = captures.join("1795315538126-cpu1.json");
        crate::rt::sys::make_fifo(&fifo).unwrap();
        let Ok(Lookup::NotACapture(why)) = Store::read(&captures, "1795315538126-cpu1", 1 << 20)
        else {
            panic!("a FIFO read as a capture");
        };
        assert!(why.contains("not a regular file"), "{why}");
        fs::remove_file(&fifo).unwrap();
        assert!(
            store.listing().is_empty(),
            "a link is not listed as a capture"
        );
        // A file too large to be a capture is refused by its size.
        std::fs::write(captures.join("1795315538124-cpu1.json"), vec![b' '; 2048]).unwrap();
        let err = Store::read(&captures, "1795315538124-cpu1", 1024).unwrap_err();
        assert!(err.contains("more than the 1024"), "{err}");
        // Opened again: the open directory is said; the link is not read
        // (nor is the oversized file, pruned by the byte budget).
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&captures, std::fs::Permissions::from_mode(0o777)).unwrap();
        let (_, summaries, warnings) = Store::open(&captures, 10, 1024).unwrap();
        assert!(summaries.is_empty());
        assert!(
            warnings.iter().any(|w| w.contains("writable by everyone")),
            "{warnings:?}"
        );
        // Temporary files are made new under an unpredictable name: a
        // link planted at the old fixed name is left alone.
        let planted = captures.join(".tmp-1795315538125-cpu1");
        std::os::unix::fs::symlink(&secret, &planted).unwrap();
        let (store, _, _) = Store::open(&captures, 10, 1 << 20).unwrap();
        store.write(&capture(1_795_315_538_125, 1, 1)).unwrap();
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "root:$6$...");
    }

    #[test]
    fn the_oldest_go_first_by_count_and_by_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let (store, old, _) = Store::open(dir.path(), 3, 1_000_000).unwrap();
        assert!(old.is_empty());
        for ms in 1..=5 {
            store.write(&capture(1_700_000_000_000 + ms, 0, 1)).unwrap();
        }
        let ids: Vec<String> = store.listing().into_iter().map(|(id, _)| id).collect();
        assert_eq!(
            ids,
            [
                "1700000000003-cpu0",
                "1700000000004-cpu0",
                "1700000000005-cpu0"
            ]
        );
        // Reopened: the summaries, newest first.
        let (_, summaries, _) = Store::open(dir.path(), 3, 1_000_000).unwrap();
        assert_eq!(summaries[0].id, "1700000000005-cpu0");
        assert_eq!(summaries.len(), 3);
        // A byte budget for two captures of ~1.3 KB keeps the newest two.
        let one = serde_json::to_vec(&capture(0, 0, 10)).unwrap().len() as u64;
        let (store, _, _) = Store::open(dir.path(), 100, 2 * one + 10).unwrap();
        for ms in 10..14 {
            let written = store
                .write(&capture(1_700_000_000_000 + ms, 1, 10))
                .unwrap();
            assert!(
                !written
                    .removed
                    .contains(&make_id((1_700_000_000_000 + ms) * 1_000_000, 1))
            );
        }
        assert!(store.bytes() <= 2 * one + 10);
        let ids: Vec<String> = store.listing().into_iter().map(|(id, _)| id).collect();
        assert_eq!(
            ids.last().unwrap(),
            "1700000000013-cpu1",
            "the newest is kept"
        );
        // Larger than the whole budget: refused, nothing half-written.
        let err = store
            .write(&capture(1_700_000_000_100, 1, 100))
            .unwrap_err();
        assert!(err.contains("forensics.max_bytes"), "{err}");
        assert_eq!(
            Store::read(dir.path(), "1700000000100-cpu1", 1 << 20),
            Ok(Lookup::Missing)
        );
    }

    #[test]
    fn new_maxima_are_evicted_before_threshold_captures_but_never_the_one_just_written() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _, _) = Store::open(dir.path(), 3, 1_000_000).unwrap();
        let new_max = |ms: u64| {
            let mut c = capture(1_700_000_000_000 + ms, 0, 1);
            c.summary.id = make_new_max_id((1_700_000_000_000 + ms) * 1_000_000, 0);
            c.summary.trigger = "new_max".into();
            c
        };
        store.write(&capture(1_700_000_000_001, 0, 1)).unwrap();
        store.write(&new_max(2)).unwrap();
        store.write(&capture(1_700_000_000_003, 0, 1)).unwrap();
        // Full: a threshold capture evicts the new maximum, not the older
        // threshold capture.
        let written = store.write(&capture(1_700_000_000_004, 0, 1)).unwrap();
        assert_eq!(written.removed, ["1700000000002-cpu0-max"]);
        // A new maximum on a store full of threshold captures is kept (it
        // is the evidence of the worst so far); the oldest threshold one
        // goes instead.
        let written = store.write(&new_max(5)).unwrap();
        assert_eq!(written.removed, ["1700000000001-cpu0"]);
        let ids: Vec<String> = store.listing().into_iter().map(|(id, _)| id).collect();
        assert_eq!(
            ids,
            [
                "1700000000003-cpu0",
                "1700000000004-cpu0",
                "1700000000005-cpu0-max"
            ]
        );
        // A later new maximum replaces the earlier one first.
        let written = store.write(&new_max(6)).unwrap();
        assert_eq!(written.removed, ["1700000000005-cpu0-max"]);
        // Old captures without a trigger read back as threshold ones.
        let text = serde_json::to_string(&capture(1, 0, 0))
            .unwrap()
            .replace(",\"trigger\":\"threshold\"", "");
        assert!(!text.contains("trigger"));
        let back: Capture = serde_json::from_str(&text).unwrap();
        assert_eq!(back.summary.trigger, "threshold");
    }

    #[test]
    fn a_crash_leaves_no_half_capture_behind() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(".tmp-1700000000001-cpu0"), b"{\"id\": \"17").unwrap();
        // Not ours: left alone and not listed.
        fs::write(dir.path().join("notes.txt"), b"x").unwrap();
        let (store, summaries, _) = Store::open(dir.path(), 10, 1_000_000).unwrap();
        assert!(summaries.is_empty());
        assert!(!dir.path().join(".tmp-1700000000001-cpu0").exists());
        assert!(dir.path().join("notes.txt").exists());
        store.write(&capture(1_700_000_000_002, 0, 2)).unwrap();
        let Ok(Lookup::Found(text)) = Store::read(dir.path(), "1700000000002-cpu0", 1 << 20) else {
            panic!("the capture just written is not found");
        };
        let back: Capture = serde_json::from_str(&text).unwrap();
        assert_eq!(back, capture(1_700_000_000_002, 0, 2));
        assert_eq!(
            Store::read(dir.path(), "../notes", 1 << 20),
            Ok(Lookup::Missing)
        );
    }

    #[test]
    fn an_unwritable_directory_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain-file");
        fs::write(&file, b"").unwrap();
        let err = Store::open(&file.join("spikes"), 10, 1000).unwrap_err();
        assert!(err.contains("cannot create the capture directory"), "{err}");
    }
}
