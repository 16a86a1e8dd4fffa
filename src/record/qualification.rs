//! The host's last qualification in the record: `latencyd qualify
//! --record DIR` writes its `--json` document here as
//! `qualification.json`, and the daemon reads what it needs of it (the
//! profile, the verdict, when, and each phase's maximum per CPU) so that
//! its metrics, status and regression alert start from the figures the
//! host qualified with.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::files::{self, Links};

/// The file in the record's directory.
pub const FILE: &str = "qualification.json";

/// Larger than any document qualify writes (its histograms included).
const MAX_BYTES: u64 = 64 << 20;

/// What the daemon keeps of a qualification.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Summary {
    pub profile: String,
    pub verdict: String,
    /// RFC 3339, when the last phase ended.
    pub ended: String,
    pub host: SummaryHost,
    pub phases: Vec<SummaryPhase>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SummaryHost {
    pub fingerprint: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SummaryPhase {
    pub name: String,
    pub tool: String,
    pub maximum_us: Option<u64>,
    pub status: String,
    pub cpus: Vec<SummaryCpu>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SummaryCpu {
    pub cpu: usize,
    pub stats: SummaryStats,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SummaryStats {
    /// µs.
    pub max: f64,
}

/// Writes `document` as the record's qualification, whole or not at all
/// (a temporary file renamed over the last).
pub fn write(dir: &Path, document: &str) -> Result<PathBuf, String> {
    let path = dir.join(FILE);
    let temporary = dir.join(format!(".{FILE}.{}", std::process::id()));
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&temporary, document))
        .and_then(|()| std::fs::File::open(&temporary)?.sync_all())
        .and_then(|()| std::fs::rename(&temporary, &path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&temporary);
            format!(
                "{}: cannot write the qualification there: {e}",
                path.display()
            )
        })?;
    Ok(path)
}

/// The record's qualification: `Ok(None)` when there is none, an error
/// naming the file when it cannot be read or is not one.
pub fn read(dir: &Path) -> Result<Option<Summary>, String> {
    let path = dir.join(FILE);
    if !path.exists() {
        return Ok(None);
    }
    let text = files::read_text_bounded(&path, Links::Refuse, MAX_BYTES)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map(Some).map_err(|e| {
        format!(
            "{}: not a `latencyd qualify --json` document ({e})",
            path.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOCUMENT: &str = r#"{"file_version": 1, "profile": "smoke", "verdict": "passed",
        "ended": "2026-11-28T00:00:00.000Z", "host": {"fingerprint": "abc", "facts": {}},
        "phases": [{"name": "idle", "tool": "cyclictest", "maximum_us": 100,
        "status": "measured", "cpus": [{"cpu": 2, "verdict": "passed",
        "stats": {"samples": 10, "max": 41.0}, "histogram_us": {"40": 10}}]}]}"#;

    #[test]
    fn a_written_qualification_reads_back_and_none_is_not_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()), Ok(None));
        let path = write(&dir.path().join("record"), DOCUMENT).unwrap();
        assert!(path.ends_with("record/qualification.json"));
        let summary = read(&dir.path().join("record")).unwrap().unwrap();
        assert_eq!(
            (summary.profile.as_str(), summary.verdict.as_str()),
            ("smoke", "passed")
        );
        assert_eq!(summary.phases[0].cpus[0].stats.max, 41.0);
        assert_eq!(
            std::fs::read_dir(dir.path().join("record"))
                .unwrap()
                .count(),
            1
        );
        std::fs::write(&path, "{}").unwrap();
        let err = read(&dir.path().join("record")).unwrap_err();
        assert!(
            err.contains("qualification.json: not a `latencyd qualify --json` document"),
            "{err}"
        );
    }
}
