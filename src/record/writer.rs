//! Writing the record: files in a directory, rotated and pruned, or one
//! file for a one-shot run.
//!
//! Each interval (every CPU's entry) is one `write` on a file opened for
//! appending, then `fdatasync`: a `kill -9` cannot leave half of it, and a
//! write that fails part-way (disk full) is cut back to where it began, so
//! a file only ever holds whole intervals (a power loss can still tear the
//! last line; readers skip it). Files are named by the time they start,
//! `latencyd-20261123T101500.123Z.hlog`, so their names sort in time; a
//! new one starts at each UTC day, at each start of the process, and when
//! the current one reaches an eighth of `max_bytes`. Whole files go, the
//! oldest first, once they are older than the retention or the directory
//! holds more than `max_bytes`; the file just written never goes.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::format::{Context, Entry, Gap, encode_entry, header, host_line};
use crate::calendar::format_rfc3339_ms;
use crate::host::Fingerprint;
use crate::units::NS_PER_SEC;

/// Where and how long the daemon keeps its record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub dir: PathBuf,
    pub interval_ns: u64,
    pub retention_ns: u64,
    pub max_bytes: u64,
}

impl Settings {
    /// What `[record]` asks of the daemon's record.
    pub fn of(config: &crate::config::RecordConfig) -> Settings {
        Settings {
            dir: config.dir.clone(),
            interval_ns: config.interval_ns,
            retention_ns: config.retention_ns,
            max_bytes: config.max_bytes,
        }
    }
}

/// One interval of every CPU.
#[derive(Debug, Clone)]
pub struct Batch {
    pub entries: Vec<Entry>,
    /// Stretches without samples that ended in the interval.
    pub gaps: Vec<Gap>,
    /// `[hwnoise]` windows that ended in the interval.
    pub hwnoise: Vec<super::HwnoiseLine>,
    /// The host's facts the interval was measured under: written whole at
    /// the top of each file and whenever they differ from the last ones
    /// written.
    pub fingerprint: Option<Arc<Fingerprint>>,
}

impl Batch {
    pub fn start_ns(&self) -> u64 {
        self.entries
            .first()
            .map(|e| e.start_ns)
            .or_else(|| self.gaps.first().map(|g| g.end_ns))
            .or_else(|| self.hwnoise.first().map(|h| h.end_ns))
            .unwrap_or(0)
    }
}

/// The name of a record file starting at `unix_ns`: its RFC 3339 time
/// without the separators a file name does not need.
pub fn file_name(unix_ns: u64) -> String {
    format!(
        "latencyd-{}.hlog",
        format_rfc3339_ms(unix_ns).replace(['-', ':'], "")
    )
}

/// The start time in a record file's name, if it is one of ours.
pub fn start_from_name(name: &str) -> Option<u64> {
    let stamp = name.strip_prefix("latencyd-")?.strip_suffix("Z.hlog")?;
    let b = stamp.as_bytes();
    if b.len() != 19 || b[8] != b'T' || b[15] != b'.' {
        return None;
    }
    let rfc = format!(
        "{}-{}-{}T{}:{}:{}.{}Z",
        &stamp[0..4],
        &stamp[4..6],
        &stamp[6..8],
        &stamp[9..11],
        &stamp[11..13],
        &stamp[13..15],
        &stamp[16..19]
    );
    crate::calendar::parse_rfc3339_ns(&rfc).ok()
}

/// The record files in `dir`, oldest first, with their sizes.
pub fn list(dir: &Path) -> std::io::Result<Vec<(PathBuf, u64, u64)>> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(start) = name.to_str().and_then(start_from_name) else {
            continue;
        };
        // Not followed: a link or anything but a regular file is not a
        // record file, whatever its name.
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        files.push((entry.path(), start, meta.len()));
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(files)
}

struct Open {
    path: PathBuf,
    file: File,
    bytes: u64,
    day: u64,
    /// The identifier of the host facts last written to this file.
    host_id: Option<String>,
}

/// Where a writer puts its intervals.
#[derive(Debug, Clone)]
pub enum Target {
    /// The daemon's directory: rotated and pruned.
    Dir(Settings),
    /// One file, as `measure --log` asks (created or truncated).
    File(PathBuf),
}

/// Writes intervals; keeps no state a failure could leave half-done.
pub struct LogWriter {
    target: Target,
    context: Option<Context>,
    current: Option<Open>,
}

/// What one write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Written {
    pub bytes: u64,
    /// Files removed by retention.
    pub removed: usize,
}

impl LogWriter {
    pub fn new(target: Target) -> LogWriter {
        LogWriter {
            target,
            context: None,
            current: None,
        }
    }

    /// Each file will name what was measured.
    pub fn with_context(mut self, context: Context) -> LogWriter {
        self.context = Some(context);
        self
    }

    /// Appends one interval whole, or nothing; then prunes by `now_ns`
    /// (wall time). The error names the file and the system's reason.
    pub fn write(&mut self, batch: &Batch, now_ns: u64) -> Result<Written, String> {
        let start = batch.start_ns();
        let day = start / NS_PER_SEC / 86_400;
        let rotate_at = match &self.target {
            Target::Dir(s) => (s.max_bytes / 8).max(1),
            Target::File(_) => u64::MAX,
        };
        let stale = match &self.current {
            None => true,
            Some(open) => {
                matches!(self.target, Target::Dir(_))
                    && (open.day != day || open.bytes >= rotate_at)
            }
        };
        if stale {
            self.current = Some(self.open_new(start, day)?);
        }
        let open = self.current.as_mut().expect("opened above");
        let mut text = String::new();
        let host_id = batch.fingerprint.as_ref().map(|f| f.id());
        if let Some(fingerprint) = &batch.fingerprint
            && open.host_id != host_id
        {
            text.push_str(&host_line(fingerprint, start));
        }
        for gap in &batch.gaps {
            text.push_str(&gap.line());
        }
        for window in &batch.hwnoise {
            text.push_str(&window.line());
        }
        for entry in &batch.entries {
            encode_entry(entry, &mut text);
        }
        let written = open
            .file
            .write_all(text.as_bytes())
            .map_err(|e| ("write", e))
            .and_then(|()| open.file.sync_data().map_err(|e| ("sync", e)));
        if let Err((what, err)) = written {
            // Cut the interval back off (it is tried again whole, and must
            // not be there twice); if even that fails, start a new file
            // next time rather than append after a torn line.
            let cut = open.file.set_len(open.bytes);
            let path = open.path.display().to_string();
            if cut.is_err() {
                self.current = None;
            }
            return Err(format!("cannot {what} {path}: {err}"));
        }
        open.bytes += text.len() as u64;
        if host_id.is_some() {
            open.host_id = host_id;
        }
        let removed = self.prune(now_ns);
        Ok(Written {
            bytes: text.len() as u64,
            removed,
        })
    }

    fn open_new(&self, start_ns: u64, day: u64) -> Result<Open, String> {
        let path = match &self.target {
            Target::Dir(s) => {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o750)
                    .create(&s.dir)
                    .map_err(|e| format!("cannot create {}: {e}", s.dir.display()))?;
                let mut path = s.dir.join(file_name(start_ns));
                // Two starts in one millisecond: the later one waits its turn.
                let mut stamp = start_ns;
                while path.exists() {
                    stamp += 1_000_000;
                    path = s.dir.join(file_name(stamp));
                }
                path
            }
            Target::File(path) => path.clone(),
        };
        // The daemon's files are created new, never through a link; the
        // one file a person named for `measure --log` is theirs to name.
        let opened = match self.target {
            Target::Dir(_) => crate::files::create_new(&path),
            Target::File(_) => OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path),
        };
        let mut file = opened.map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        let head = header(start_ns, self.context.as_ref());
        if let Err(err) = file
            .write_all(head.as_bytes())
            .and_then(|()| file.sync_data())
        {
            drop(file);
            let _ = fs::remove_file(&path);
            return Err(format!("cannot write {}: {err}", path.display()));
        }
        Ok(Open {
            path,
            file,
            bytes: head.len() as u64,
            day,
            host_id: None,
        })
    }

    /// Removes whole files, oldest first, past the retention or beyond
    /// `max_bytes`; never the current one. Returns how many went.
    fn prune(&self, now_ns: u64) -> usize {
        let Target::Dir(s) = &self.target else {
            return 0;
        };
        let Ok(files) = list(&s.dir) else {
            return 0;
        };
        let current = self.current.as_ref().map(|o| o.path.clone());
        let mut total: u64 = files.iter().map(|f| f.2).sum();
        let cutoff = now_ns.saturating_sub(s.retention_ns);
        let mut removed = 0;
        for (i, (path, _, len)) in files.iter().enumerate() {
            if Some(path) == current.as_ref() {
                break;
            }
            // A file's entries end where the next file starts.
            let ends = files.get(i + 1).map_or(u64::MAX, |next| next.1);
            if ends > cutoff && total <= s.max_bytes {
                break;
            }
            if fs::remove_file(path).is_ok() {
                total -= len;
                removed += 1;
            }
        }
        removed
    }

    /// The file written now, if any.
    pub fn current_path(&self) -> Option<&Path> {
        self.current.as_ref().map(|o| o.path.as_path())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::LatencyStats;

    fn batch(start_s: u64, cpus: usize) -> Batch {
        Batch {
            gaps: Vec::new(),
            hwnoise: Vec::new(),
            entries: (0..cpus)
                .map(|cpu| {
                    let mut stats = LatencyStats::new(100_000, None);
                    for i in 0..1000 {
                        stats.record(10_000 + (i * 37 + start_s) % 5_000, i);
                    }
                    Entry {
                        cpu,
                        start_ns: start_s * NS_PER_SEC,
                        length_ns: NS_PER_SEC,
                        stats,
                        fingerprint: None,
                        load: None,
                        hwnoise: false,
                        timerlat: None,
                    }
                })
                .collect(),
            fingerprint: None,
        }
    }

    #[test]
    fn names_sort_in_time_and_read_back() {
        let t = 1_795_315_538_123_000_000;
        assert_eq!(file_name(t), "latencyd-20261122T024538.123Z.hlog");
        assert_eq!(start_from_name(&file_name(t)), Some(t));
        assert!(file_name(t) < file_name(t + 86_400 * NS_PER_SEC));
        assert_eq!(start_from_name("latencyd-x.hlog"), None);
    }

    #[test]
    fn a_tiny_budget_drops_the_oldest_files_and_keeps_the_newest_interval() {
        let dir = tempfile::tempdir().unwrap();
        let settings = Settings {
            dir: dir.path().to_path_buf(),
            interval_ns: NS_PER_SEC,
            retention_ns: 365 * 86_400 * NS_PER_SEC,
            max_bytes: 16 * 1024,
        };
        let mut writer = LogWriter::new(Target::Dir(settings));
        let t0 = 1_795_315_538;
        let mut removed = 0;
        for i in 0..60 {
            removed += writer
                .write(&batch(t0 + i, 2), (t0 + i) * NS_PER_SEC)
                .unwrap()
                .removed;
        }
        assert!(removed > 0, "nothing was pruned");
        let files = list(dir.path()).unwrap();
        let total: u64 = files.iter().map(|f| f.2).sum();
        assert!(total <= 16 * 1024, "{total} bytes kept");
        // The newest file holds the newest interval.
        let newest = std::fs::read_to_string(&files.last().unwrap().0).unwrap();
        assert!(
            newest.contains(&format!("Tag=cpu1,{}.000,", t0 + 59)),
            "{newest}"
        );
        // What is kept is the newest: every start is later than every removed one.
        assert!(files[0].1 > t0 * NS_PER_SEC);
    }

    #[test]
    fn retention_by_age_removes_old_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let settings = Settings {
            dir: dir.path().to_path_buf(),
            interval_ns: NS_PER_SEC,
            retention_ns: 2 * 86_400 * NS_PER_SEC,
            max_bytes: 1 << 30,
        };
        let mut writer = LogWriter::new(Target::Dir(settings));
        let day = 86_400;
        let t0 = 1_795_305_600; // midnight UTC
        for d in 0..5 {
            writer
                .write(&batch(t0 + d * day, 1), (t0 + d * day) * NS_PER_SEC)
                .unwrap();
        }
        let starts: Vec<u64> = list(dir.path())
            .unwrap()
            .iter()
            .map(|f| f.1 / NS_PER_SEC)
            .collect();
        // Two days back from day 4 is the start of day 2: day 1's file
        // ends there (when day 2's starts) and goes; day 2's is kept.
        assert_eq!(starts, vec![t0 + 2 * day, t0 + 3 * day, t0 + 4 * day]);
    }

    #[test]
    fn an_unwritable_directory_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "").unwrap();
        let settings = Settings {
            dir: blocker.join("record"),
            interval_ns: NS_PER_SEC,
            retention_ns: NS_PER_SEC,
            max_bytes: 1 << 20,
        };
        let err = LogWriter::new(Target::Dir(settings))
            .write(&batch(1, 1), NS_PER_SEC)
            .unwrap_err();
        assert!(
            err.contains("cannot create") && err.contains("file/record"),
            "{err}"
        );
    }
}
