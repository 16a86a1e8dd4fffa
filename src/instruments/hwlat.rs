//! The kernel's hwlat tracer run by latencyd: a thread that spins a CPU
//! with interrupts off for `width` of every `window` and records each
//! gap between two reads of the clock over `threshold` — time the
//! hardware, the firmware (SMIs) or the hypervisor took. It costs the CPU
//! it spins on, so it runs in windows: `measure --hwlat`, and the
//! daemon's `[hwnoise]` windows.
//!
//! The instance is private (`instances/latencyd-hwnoise-PID`); its
//! `tracing_cpumask` says which CPUs the spinning thread visits. The
//! settings are global: `hwlat_detector/width`, `window`, `mode` and the
//! top-level `tracing_thresh` (in µs), held by `osnoise::Guard` as
//! timerlat's are. The kernel runs one hwlat tracer at a time: latencyd
//! never takes it from another user.

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};

use super::event::{HwlatLayout, HwlatSample};
use super::osnoise::{self, Guard};
use crate::tracefs::ring::PageLayout;
use crate::tracefs::{self, Instance, Role, read_text};

/// How a hwlat run is set up, as hwlatdetect's knobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HwlatSpec {
    pub tracefs: PathBuf,
    pub cpus: Vec<usize>,
    /// Gaps over this count, µs (hwlatdetect's default 10).
    pub threshold_us: u64,
    /// Spin this long with interrupts off, µs, in every `window_us`.
    pub width_us: u64,
    pub window_us: u64,
}

/// Why hwlat did not start: the kind, for counting skipped windows by
/// reason, and the words for a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartError {
    pub kind: StartErrorKind,
    pub why: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum StartErrorKind {
    /// Another program runs hwlat: never taken from it.
    Busy,
    /// No tracefs, or a kernel without the hwlat tracer.
    Unavailable,
    /// Bad settings, or a write the kernel refused.
    Failed,
}

impl StartErrorKind {
    pub fn name(self) -> &'static str {
        match self {
            StartErrorKind::Busy => "busy",
            StartErrorKind::Unavailable => "unavailable",
            StartErrorKind::Failed => "failed",
        }
    }
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

fn failed(why: String) -> StartError {
    StartError {
        kind: StartErrorKind::Failed,
        why,
    }
}

/// A running hwlat tracer.
pub struct HwlatSession {
    layout: HwlatLayout,
    page: PageLayout,
    buf: Vec<u8>,
    readers: Vec<(usize, File)>,
    detector: Guard,
    thresh: Guard,
    /// Removed last.
    instance: Instance,
    stopped: bool,
    /// What latencyd changed in the settings, for the log.
    pub notes: Vec<String>,
}

impl HwlatSession {
    /// Starts hwlat as `spec` says; the error names what is missing or
    /// who holds the tracer.
    pub fn start(spec: &HwlatSpec) -> Result<HwlatSession, StartError> {
        if spec.width_us == 0 || spec.width_us >= spec.window_us {
            return Err(failed(format!(
                "the width ({} us) must be more than 0 and less than the window ({} us)",
                spec.width_us, spec.window_us
            )));
        }
        let unavailable = |why| StartError {
            kind: StartErrorKind::Unavailable,
            why,
        };
        let root = tracefs::locate_for(&spec.tracefs, "hwnoise").map_err(unavailable)?;
        let tracers = read_text(&root.join("available_tracers")).unwrap_or_default();
        if !tracers.split_whitespace().any(|t| t == "hwlat") {
            return Err(unavailable(format!(
                "no hwlat tracer in {}/available_tracers (a kernel built without \
                 CONFIG_HWLAT_TRACER, as Debian's generic kernels are)",
                root.display()
            )));
        }
        // A killed latencyd's instance still runs hwlat: gone first.
        let swept = tracefs::instance::sweep_role(&root, Role::Hwnoise);
        let users = tracefs::tracer_users(&root, &["hwlat"], None);
        if !users.is_empty() {
            return Err(StartError {
                kind: StartErrorKind::Busy,
                why: format!(
                    "hwlat is in use by {}: the kernel runs one at a time and latencyd does \
                     not take it",
                    super::timerlat::describe_users(&users)
                ),
            });
        }
        Self::take(spec, &root, swept).map_err(failed)
    }

    /// The instance made and the settings written, once nothing stands
    /// in the way.
    fn take(spec: &HwlatSpec, root: &Path, swept: Vec<String>) -> Result<HwlatSession, String> {
        let layout = HwlatLayout::parse(&read_text(&root.join("events/ftrace/hwlat/format"))?)?;
        let page = PageLayout::parse(&read_text(&root.join("events/header_page"))?)?;
        let (instance, mut notes) = Instance::create(root, Role::Hwnoise)?;
        notes.splice(0..0, swept.into_iter().filter(|n| n.starts_with("removed")));
        let mut detector = Guard::take_files(
            &root.join("hwlat_detector"),
            &["width", "window"],
            "hwlat_detector/",
        );
        let mut thresh = Guard::take_files(root, &["tracing_thresh"], "");
        // The kernel keeps width below window at every write.
        let window_now = detector
            .before
            .get("window")
            .and_then(|w| w.parse::<u64>().ok());
        let (width, window) = (spec.width_us.to_string(), spec.window_us.to_string());
        if window_now.is_some_and(|w| spec.width_us >= w) {
            detector.set("window", &window, osnoise::same_number)?;
            detector.set("width", &width, osnoise::same_number)?;
        } else {
            detector.set("width", &width, osnoise::same_number)?;
            detector.set("window", &window, osnoise::same_number)?;
        }
        thresh.set(
            "tracing_thresh",
            &spec.threshold_us.to_string(),
            osnoise::same_number,
        )?;
        notes.extend(detector.changes());
        notes.extend(thresh.changes());
        instance.write("tracing_on", "0")?;
        instance.write("tracing_cpumask", &tracefs::cpumask(&spec.cpus))?;
        instance.write("current_tracer", "hwlat")?;
        let dir = instance.dir().to_path_buf();
        let readers = tracefs::raw_readers(&dir, &spec.cpus)?;
        instance.write("tracing_on", "1")?;
        Ok(HwlatSession {
            layout,
            page,
            buf: vec![0u8; tracefs::page_size(&dir)],
            readers,
            detector,
            thresh,
            instance,
            stopped: false,
            notes,
        })
    }

    /// Hands every sample the buffers hold now to `each` with the CPU
    /// it was taken on; says what could not be read.
    pub fn drain(&mut self, mut each: impl FnMut(usize, HwlatSample)) -> Vec<String> {
        let mut errors = Vec::new();
        for (cpu, file) in &mut self.readers {
            loop {
                match file.read(&mut self.buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        let (layout, cpu) = (&self.layout, *cpu);
                        let read = self.page.records(&self.buf[..n], |_, record| {
                            if let Some(sample) = layout.decode(record) {
                                each(cpu, sample);
                            }
                        });
                        if let Err(err) = read {
                            errors.push(format!("CPU {cpu}: {err}"));
                        }
                    }
                    Err(err) if err.kind() == ErrorKind::WouldBlock => break,
                    Err(err) if err.kind() == ErrorKind::Interrupted => {}
                    Err(err) => {
                        errors.push(format!("CPU {cpu}: cannot read its buffer: {err}"));
                        break;
                    }
                }
            }
        }
        errors
    }

    /// Settings another program changed under latencyd.
    pub fn changed_behind(&self) -> Vec<String> {
        let mut changed = self.detector.changed_behind();
        changed.extend(self.thresh.changed_behind());
        changed
    }

    /// Stops recording, hands the rest to `each`, stops the tracer and
    /// sets the settings back; says what could not be done.
    pub fn stop(&mut self, each: impl FnMut(usize, HwlatSample)) -> Vec<String> {
        if self.stopped {
            return Vec::new();
        }
        self.stopped = true;
        let mut notes = Vec::new();
        if let Err(err) = self.instance.write("tracing_on", "0") {
            notes.push(err);
        }
        notes.extend(self.drain(each));
        self.readers.clear();
        if let Err(err) = self.instance.write("current_tracer", "nop") {
            notes.push(err);
        }
        notes.extend(self.thresh.restore());
        notes.extend(self.detector.restore());
        notes
    }
}

impl Drop for HwlatSession {
    fn drop(&mut self) {
        let _ = self.stop(|_, _| {});
    }
}

/// What a hwlat run found, as hwlatdetect reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HwlatTally {
    /// Samples over the threshold (one per window with a gap over it).
    pub samples: u64,
    /// Gaps over the threshold counted inside those samples.
    pub over_threshold: u64,
    pub max_us: u64,
    pub nmis: u64,
    /// Each sample: CPU, wall-clock seconds and nanoseconds, inner and
    /// outer gap (µs).
    pub report: Vec<(usize, i64, i64, u64, u64)>,
}

/// Samples kept for the report at most (all are counted).
pub const MAX_REPORTED: usize = 1024;

impl HwlatTally {
    pub fn record(&mut self, cpu: usize, s: HwlatSample) {
        self.samples += 1;
        self.over_threshold += u64::from(s.count.max(1));
        self.max_us = self.max_us.max(s.gap_us());
        self.nmis += u64::from(s.nmi_count);
        if self.report.len() < MAX_REPORTED {
            self.report
                .push((cpu, s.wall_sec, s.wall_nsec, s.inner_us, s.outer_us));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn spec(root: &Path) -> HwlatSpec {
        HwlatSpec {
            tracefs: root.to_path_buf(),
            cpus: vec![0],
            threshold_us: 10,
            width_us: 500_000,
            window_us: 1_000_000,
        }
    }

    #[test]
    fn a_width_not_below_the_window_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut bad = spec(dir.path());
        bad.width_us = bad.window_us;
        let err = HwlatSession::start(&bad).err().unwrap();
        assert_eq!(err.kind, StartErrorKind::Failed);
        assert!(err.why.contains("less than the window"), "{err}");
    }

    #[test]
    fn without_the_tracer_or_beside_another_user_it_says_why() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("instances/other")).unwrap();
        std::fs::write(dir.path().join("available_tracers"), "function nop\n").unwrap();
        let err = HwlatSession::start(&spec(dir.path())).err().unwrap();
        assert_eq!(err.kind, StartErrorKind::Unavailable);
        assert!(err.why.contains("no hwlat tracer"), "{err}");
        std::fs::write(dir.path().join("available_tracers"), "hwlat nop\n").unwrap();
        std::fs::write(dir.path().join("instances/other/current_tracer"), "hwlat\n").unwrap();
        let err = HwlatSession::start(&spec(dir.path())).err().unwrap();
        assert_eq!(err.kind, StartErrorKind::Busy);
        assert!(
            err.why.contains("in use by instance other (hwlat)"),
            "{err}"
        );
    }

    #[test]
    fn samples_are_counted_with_their_largest_gap_and_nmis() {
        let mut tally = HwlatTally::default();
        let sample = |inner_us, outer_us, count, nmi_count| HwlatSample {
            inner_us,
            outer_us,
            nmi_total_us: 0,
            nmi_count,
            seqnum: 1,
            count,
            wall_sec: 1_795_742_624,
            wall_nsec: 781_547_991,
        };
        tally.record(1, sample(4130, 529, 240, 0));
        tally.record(0, sample(402, 112, 196, 2));
        assert_eq!(
            (
                tally.samples,
                tally.over_threshold,
                tally.max_us,
                tally.nmis
            ),
            (2, 436, 4130, 2)
        );
        assert_eq!(tally.report[0], (1, 1_795_742_624, 781_547_991, 4130, 529));
    }
}
