//! Looking for a newer qualification while the daemon runs: every
//! [`RESCAN_NS`] the file's identity (inode, length, modification time)
//! is read on the blocking pool, and only when it changed is the file read
//! whole there. The tick never waits for the file system: it only looks
//! at a finished job, puts what was read into the part and says it in the
//! log. The part then shows the file as a restart would read it.

use std::path::{Path, PathBuf};

use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::QualificationPart;
use crate::instruments::shape::{Boxed, Run, Step};
use crate::record::qualification::FILE;

/// How often the file is looked at.
pub(super) const RESCAN_NS: u64 = 5_000_000_000;

/// What tells one version of the file from another: `qualify --record`
/// renames a new file over the old, so the inode changes with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Identity {
    inode: u64,
    length: u64,
    modified_ns: i128,
}

/// The file's identity now; None while there is none.
pub(super) fn identity(dir: &Path) -> Option<Identity> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(dir.join(FILE)).ok()?;
    Some(Identity {
        inode: meta.ino(),
        length: meta.size(),
        modified_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
    })
}

/// A look at the file: None when it is as last read, else its identity
/// and the part read from it.
type Look = Option<(Option<Identity>, QualificationPart)>;

pub(super) struct Rescan {
    dir: PathBuf,
    seen: Option<Identity>,
    every_ns: u64,
    next_ns: u64,
    job: Option<JoinHandle<Look>>,
}

impl Rescan {
    /// After the file with identity `seen` was read at `now_ns`.
    pub(super) fn new(dir: &Path, seen: Option<Identity>, now_ns: u64, every_ns: u64) -> Rescan {
        Rescan {
            dir: dir.to_path_buf(),
            seen,
            every_ns,
            next_ns: now_ns.saturating_add(every_ns),
            job: None,
        }
    }

    fn look(dir: PathBuf, seen: Option<Identity>) -> Look {
        let now = identity(&dir);
        if now == seen {
            return None;
        }
        Some((now, QualificationPart::read(&dir)))
    }
}

impl Run for Rescan {
    fn step<'a>(&'a mut self, step: Step<'a>) -> Boxed<'a, ()> {
        Box::pin(async move {
            if let Some(job) = self.job.take_if(|job| job.is_finished()) {
                match job.await {
                    Ok(Some((seen, part))) => {
                        self.seen = seen;
                        match &part.summary {
                            Ok(s) => info!(
                                "qualification: {} read: profile {}, {}, ended {}",
                                self.dir.join(FILE).display(),
                                s.profile,
                                s.verdict,
                                s.ended
                            ),
                            Err(why) => warn!("qualification: {why}"),
                        }
                        step.update(|q: &mut QualificationPart| *q = part);
                    }
                    Ok(None) => {}
                    Err(e) => warn!("qualification: the look at its file failed: {e}"),
                }
            }
            if self.job.is_none() && step.mono_ns >= self.next_ns {
                self.next_ns = step.mono_ns.saturating_add(self.every_ns);
                let (dir, seen) = (self.dir.clone(), self.seen);
                self.job = Some(tokio::task::spawn_blocking(move || Rescan::look(dir, seen)));
            }
        })
    }

    fn stop<'a>(&'a mut self, _: Step<'a>) -> Boxed<'a, ()> {
        // A look still running only reads: it is left to end on its own.
        self.job = None;
        Box::pin(async {})
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::instruments::shape::{Part, Visit};
    use crate::record::qualification;

    fn document(profile: &str) -> String {
        format!(
            r#"{{"profile": "{profile}", "verdict": "passed", "ended": "2026-11-28T10:00:00.000Z",
            "host": {{"fingerprint": "abc"}}, "phases": []}}"#
        )
    }

    /// Steps `run` at `now_ns` until its look has ended and been taken in.
    async fn settle(run: &mut Rescan, part: &Mutex<Box<dyn Part>>, now_ns: u64) {
        let access = |_: Option<&str>, f: &mut Visit<'_>| f(part.lock().unwrap().as_mut());
        run.step(Step::new("qualification", (now_ns, 0), &access, None))
            .await;
        while run.job.is_some() {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            run.step(Step::new("qualification", (now_ns, 0), &access, None))
                .await;
        }
    }

    fn profile(part: &Mutex<Box<dyn Part>>) -> Result<String, String> {
        let part = part.lock().unwrap();
        let q = part.as_any().downcast_ref::<QualificationPart>().unwrap();
        q.summary
            .as_ref()
            .map(|s| s.profile.clone())
            .map_err(Clone::clone)
    }

    #[tokio::test]
    async fn a_qualification_written_while_running_is_read_at_the_next_look_once() {
        let dir = tempfile::tempdir().unwrap();
        let part: Mutex<Box<dyn Part>> = Mutex::new(Box::new(QualificationPart::read(dir.path())));
        let mut run = Rescan::new(dir.path(), identity(dir.path()), 0, 10);
        qualification::write(dir.path(), &document("smoke")).unwrap();
        // Not before its time.
        settle(&mut run, &part, 9).await;
        assert!(profile(&part).unwrap_err().contains("none in"));
        settle(&mut run, &part, 10).await;
        assert_eq!(profile(&part), Ok("smoke".to_string()));
        // The same file is not read again; a newer one is.
        let seen = run.seen;
        settle(&mut run, &part, 20).await;
        assert_eq!(run.seen, seen);
        qualification::write(dir.path(), &document("cnf-tests")).unwrap();
        settle(&mut run, &part, 30).await;
        assert_eq!(profile(&part), Ok("cnf-tests".to_string()));
        // A file that is not one is said, as a restart would say it; a
        // removed one leaves none.
        std::fs::write(dir.path().join(FILE), "{").unwrap();
        settle(&mut run, &part, 40).await;
        assert!(
            profile(&part)
                .unwrap_err()
                .contains("not a `latencyd qualify --json` document"),
            "{:?}",
            profile(&part)
        );
        std::fs::remove_file(dir.path().join(FILE)).unwrap();
        settle(&mut run, &part, 50).await;
        assert!(profile(&part).unwrap_err().contains("none in"));
    }
}
