//! Where a qualification's verdict goes: `--json`, `--junit`, `--html`,
//! the record (`--record`), and each capture behind a failure as a file
//! of its own beside them. The files are opened (the record's directory
//! tried) before anything is measured, so that a wrong path fails in a
//! second rather than after a day.

use std::path::{Path, PathBuf};

use super::phase::Outcome;
use super::{WHO, html, json, junit};
use crate::cli::QualifyArgs;

/// The output files, open.
pub(super) struct Outputs {
    junit: Option<(PathBuf, std::fs::File)>,
    json: Option<(PathBuf, std::fs::File)>,
    html: Option<(PathBuf, std::fs::File)>,
    /// The record's directory, found writable.
    record: Option<PathBuf>,
}

impl Outputs {
    pub(super) fn open(args: &QualifyArgs) -> Result<Outputs, String> {
        let open = |path: &Option<PathBuf>, flag: &str| {
            path.as_ref()
                .map(|p| {
                    std::fs::File::create(p)
                        .map(|f| (p.clone(), f))
                        .map_err(|e| format!("{flag} {}: cannot write it: {e}", p.display()))
                })
                .transpose()
        };
        Ok(Outputs {
            junit: open(&args.junit, "--junit")?,
            json: open(&args.json, "--json")?,
            html: open(&args.html, "--html")?,
            record: args.record.as_ref().map(|dir| writable(dir)).transpose()?,
        })
    }

    /// Beside the first output: `NAME.captures/`.
    fn captures_dir(&self) -> Option<PathBuf> {
        let (first, _) = (self.json.as_ref())
            .or(self.junit.as_ref())
            .or(self.html.as_ref())?;
        let mut name = first.file_name()?.to_os_string();
        name.push(".captures");
        Some(first.with_file_name(name))
    }

    /// Writes every output asked for.
    pub(super) fn write(&self, c: &json::Context) -> Result<(), String> {
        let capture_files = self.write_captures(c);
        let doc = json::document(c);
        if let Some((path, file)) = &self.json {
            let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
            write_to(file, path, "--json", &text)?;
        }
        if let Some(dir) = &self.record {
            let text = serde_json::to_string(&doc).map_err(|e| e.to_string())?;
            let path = crate::record::qualification::write(dir, &text)
                .map_err(|e| format!("--record: {e}"))?;
            eprintln!(
                "{WHO}: the daemon will read this qualification from {}",
                path.display()
            );
        }
        if let Some((path, file)) = &self.html {
            write_to(file, path, "--html", &html::render(&doc))?;
        }
        if let Some((path, file)) = &self.junit {
            let lookup = |id: &str| {
                (capture_files.iter())
                    .find(|(i, _)| i == id)
                    .map(|(_, f)| f.clone())
            };
            let header = junit::Header {
                profile: &c.plan.profile,
                hostname: &c.hostname,
                timestamp: &c.started,
                fingerprint: &c.fingerprint.id(),
                capture_file: &lookup,
            };
            write_to(file, path, "--junit", &junit::render(c.verdict, &header))?;
        }
        Ok(())
    }

    /// Each capture behind a failure as its own file (what `latencyd
    /// plot --capture` draws), by id.
    fn write_captures(&self, c: &json::Context) -> Vec<(String, String)> {
        let Some(dir) = self.captures_dir() else {
            return Vec::new();
        };
        let mut written = Vec::new();
        for run in c.runs {
            let Outcome::Measured(m) = &run.outcome else {
                continue;
            };
            for capture in &m.captures {
                let path = dir.join(format!("{}.json", capture.summary.id));
                let text = serde_json::to_string_pretty(capture).unwrap_or_default();
                match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, text)) {
                    Ok(()) => {
                        written.push((capture.summary.id.clone(), path.display().to_string()))
                    }
                    Err(e) => eprintln!(
                        "{WHO}: warning: {}: cannot write the capture: {e}",
                        path.display()
                    ),
                }
            }
        }
        written
    }
}

fn write_to(mut file: &std::fs::File, path: &Path, flag: &str, text: &str) -> Result<(), String> {
    use std::io::Write;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| format!("{flag} {}: cannot write it: {e}", path.display()))
}

/// `dir`, created if need be, once a file could be made in it.
fn writable(dir: &Path) -> Result<PathBuf, String> {
    let probe = dir.join(format!(".qualify-probe.{}", std::process::id()));
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::File::create(&probe))
        .and_then(|_| std::fs::remove_file(&probe))
        .map_err(|e| format!("--record {}: cannot write there: {e}", dir.display()))?;
    Ok(dir.to_path_buf())
}
