//! The flight recorder's private tracefs instance.
//!
//! `instances/latencyd` has its own per-CPU ring buffers, events, clock
//! and options, so the global buffer and every other tracing user are
//! left alone. The instance records, in overwrite mode, the events that
//! explain a late wake-up on the measured CPUs only (`tracing_cpumask`),
//! stamped with the `mono` clock (`CLOCK_MONOTONIC`, the samplers' clock).
//!
//! A capture must read a CPU's history whole. A non-consuming read of a
//! live, full, overwriting buffer races the writer: the writer overwrites
//! the oldest page, which is where the read starts, and the kernel's
//! iterator then skips ahead (`CPU:N [LOST EVENTS]`) — past the very
//! wake-up the capture is about when the read is slow (seen on Debian's
//! 6.1 PREEMPT_RT kernel under emulation: 114 of 21,207 events read). So
//! recording pauses while a capture reads (`options/pause-on-trace`, the
//! kernel's default, left on), and events in that time are not kept.
//! Swapping one CPU's buffer with a snapshot buffer would avoid the pause,
//! but needs RING_BUFFER_ALLOW_SWAP, which none of the kernel matrix's
//! kernels has (docs/platforms.md). The instance is removed when the
//! recorder stops; one left by a crash is removed at the next start.

use std::fs;
use std::io::{BufReader, ErrorKind};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::events::VECTORS;

/// The instance's name under `instances/`.
pub const INSTANCE_NAME: &str = "latencyd";

/// Where tracefs is mounted when it is not where it was configured to be
/// and that was the default (older systems mount it under debugfs).
const DEBUGFS_TRACING: &str = "/sys/kernel/debug/tracing";
pub const DEFAULT_TRACEFS: &str = "/sys/kernel/tracing";

/// Events without which no attribution can be made.
///
/// Every event on the path from a sampler's timer to its wake-up adds to
/// the latency it measures (about 0.1–0.4 µs each on the 2-CPU VM of
/// `benches/forensics_storm.sh`), so that path carries only what the
/// attribution needs: `hrtimer_expire_entry/exit` (the timer fired),
/// `sched_wakeup` (runnable) and `sched_switch` (running).
/// `sched_waking` adds nothing `sched_wakeup` does not say.
pub const REQUIRED_EVENTS: &[&str] = &[
    "sched/sched_switch",
    "sched/sched_wakeup",
    "irq/irq_handler_entry",
    "irq/irq_handler_exit",
    "irq/softirq_entry",
    "irq/softirq_exit",
    "timer/hrtimer_expire_entry",
    "timer/hrtimer_expire_exit",
];

/// Events used where the kernel has them. The `local_timer` vector is
/// left out: it brackets every wake-up of every sampler, and the work it
/// does is in the `hrtimer_expire` callbacks, which are recorded.
fn optional_events() -> Vec<String> {
    let mut events = vec![
        "nmi/nmi_handler".to_string(),
        "ipi/ipi_send_cpu".to_string(),
        "ipi/ipi_send_cpumask".to_string(),
    ];
    for vector in VECTORS.iter().filter(|v| **v != "local_timer") {
        events.push(format!("irq_vectors/{vector}_entry"));
        events.push(format!("irq_vectors/{vector}_exit"));
    }
    events
}

/// One thing the kernel or hardware may or may not offer, and what
/// latencyd makes of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Capability {
    pub name: String,
    pub available: bool,
    pub detail: String,
}

impl Capability {
    pub fn new(name: &str, available: bool, detail: impl Into<String>) -> Capability {
        Capability {
            name: name.to_string(),
            available,
            detail: detail.into(),
        }
    }
}

/// The instance, removed when dropped.
#[derive(Debug)]
pub struct Instance {
    dir: PathBuf,
}

/// An instance set up and recording, and what was found on the way.
#[derive(Debug)]
pub struct Opened {
    pub instance: Instance,
    /// Things worth a log line (a leftover instance removed, ...).
    pub notes: Vec<String>,
    pub capabilities: Vec<Capability>,
}

/// Finds tracefs: `configured`, or for the default, the debugfs mount.
pub fn locate(configured: &Path) -> Result<PathBuf, String> {
    locate_for(configured, "forensics")
}

/// `locate`, with the errors naming `who` needs tracefs (`forensics`,
/// `observe`).
pub fn locate_for(configured: &Path, who: &str) -> Result<PathBuf, String> {
    match fs::metadata(configured.join("instances")) {
        Ok(meta) if meta.is_dir() => return Ok(configured.to_path_buf()),
        Err(err) if err.kind() == ErrorKind::PermissionDenied => {
            return Err(format!(
                "cannot access tracefs at {} (permission denied): {who} needs root, or \
                 access to tracefs (see deploy/systemd/latencyd-{who}.conf)",
                configured.display()
            ));
        }
        _ => {}
    }
    let fallback = Path::new(DEBUGFS_TRACING);
    if configured == Path::new(DEFAULT_TRACEFS) && fallback.join("instances").is_dir() {
        return Ok(fallback.to_path_buf());
    }
    Err(format!(
        "tracefs is not mounted at {} (mount it with `mount -t tracefs nodev {}`, or set \
         forensics.tracefs to where it is)",
        configured.display(),
        configured.display()
    ))
}

/// Creates and starts the instance on `root` (a tracefs mount).
pub fn open(root: &Path, buffer_size_kb: u64, cpus: &[usize]) -> Result<Opened, String> {
    let (instance, notes) = Instance::create(root, INSTANCE_NAME, "forensics")?;
    let capabilities = instance.configure(root, buffer_size_kb, cpus)?;
    Ok(Opened {
        instance,
        notes,
        capabilities,
    })
}

impl Instance {
    /// Creates `instances/NAME` under `root`, removing one left by a
    /// crash first (said in the notes). Errors name what `who` needs.
    pub fn create(root: &Path, name: &str, who: &str) -> Result<(Instance, Vec<String>), String> {
        let dir = root.join("instances").join(name);
        let mut notes = Vec::new();
        if dir.exists() {
            let _ = fs::write(dir.join("tracing_on"), "0");
            fs::remove_dir(&dir).map_err(|err| {
                format!(
                    "the tracefs instance {} is left from an earlier run and cannot be removed \
                 ({err}); if no other latencyd uses it, remove it with `rmdir {}`",
                    dir.display(),
                    dir.display()
                )
            })?;
            notes.push(format!(
                "removed the tracefs instance {} left by an earlier run",
                dir.display()
            ));
        }
        fs::create_dir(&dir).map_err(|err| {
            let hint = if matches!(
                err.kind(),
                ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem
            ) {
                format!(
                    " ({who} needs root, or write access to tracefs: see \
                 deploy/systemd/latencyd-{who}.conf)"
                )
            } else {
                String::new()
            };
            format!(
                "cannot create the tracefs instance {}: {err}{hint}",
                dir.display()
            )
        })?;
        // From here on, dropping the instance removes the directory again.
        Ok((Instance { dir }, notes))
    }

    /// Writes `value` to one of the instance's files.
    pub fn write(&self, file: &str, value: &str) -> Result<(), String> {
        fs::write(self.dir.join(file), value).map_err(|err| {
            format!(
                "cannot write {value:?} to {}: {err}",
                self.dir.join(file).display()
            )
        })
    }

    fn configure(
        &self,
        root: &Path,
        buffer_size_kb: u64,
        cpus: &[usize],
    ) -> Result<Vec<Capability>, String> {
        let mut caps = Vec::new();
        self.write("tracing_on", "0")?;
        self.write("trace_clock", "mono")?;
        self.write("buffer_size_kb", &buffer_size_kb.to_string())?;
        self.write("tracing_cpumask", &cpumask(cpus))?;
        let pause = self.dir.join("options/pause-on-trace");
        let paused_read = !pause.exists() || fs::write(&pause, "1").is_ok();
        caps.push(Capability::new(
            "paused_read",
            paused_read,
            if paused_read {
                "a capture pauses recording while it reads a CPU's buffer, so that the read \
                 cannot race the writer: events in that time are not kept"
            } else {
                "options/pause-on-trace cannot be set: a capture reads the buffer while it \
                 records, and a full buffer may lose the spike to the writer"
            },
        ));
        for event in REQUIRED_EVENTS {
            let enable = self.dir.join("events").join(event).join("enable");
            if !enable.exists() {
                return Err(format!(
                    "the kernel has no {event} trace event, which forensics needs"
                ));
            }
            self.write(&format!("events/{event}/enable"), "1")?;
        }
        let mut missing = Vec::new();
        for event in optional_events() {
            let enable = self.dir.join("events").join(&event).join("enable");
            if !enable.exists() || fs::write(&enable, "1").is_err() {
                missing.push(event);
            }
        }
        let nmi = !missing.iter().any(|e| e == "nmi/nmi_handler");
        caps.push(Capability::new(
            "nmi_events",
            nmi,
            if nmi {
                "NMIs are traced with their duration"
            } else {
                "no nmi:nmi_handler event in this kernel: NMIs fall into the unaccounted time"
            },
        ));
        let vectors = !missing.iter().any(|e| e.starts_with("irq_vectors/"));
        caps.push(Capability::new(
            "irq_vectors",
            vectors,
            if vectors {
                "system vectors (local timer, IPIs, irq_work) are traced".to_string()
            } else if !self.dir.join("events/irq_vectors").exists() {
                "no irq_vectors events (they are x86's): on this architecture the timer and \
                 IPIs are interrupts like any other, traced by irq_handler_entry"
                    .to_string()
            } else {
                format!(
                    "not traced here ({}): their time goes to the interrupted context",
                    missing.join(", ")
                )
            },
        ));
        let osnoise = self.dir.join("events/osnoise/enable");
        let osnoise_on = osnoise.exists() && fs::write(&osnoise, "1").is_ok();
        caps.push(Capability::new(
            "osnoise_events",
            osnoise_on,
            if osnoise_on {
                "osnoise events are recorded (the kernel emits them while an osnoise or \
                 timerlat tracer runs)"
            } else {
                "this kernel has no osnoise events (CONFIG_OSNOISE_TRACER)"
            },
        ));
        let tracers = fs::read_to_string(root.join("available_tracers")).unwrap_or_default();
        let timerlat = tracers.split_whitespace().any(|t| t == "timerlat");
        caps.push(Capability::new(
            "timerlat",
            timerlat,
            if timerlat {
                "the timerlat tracer exists; latencyd does not start it (it adds a timer \
                 thread on every CPU) and derives the same IRQ-vs-thread split from the \
                 hrtimer and wake-up events"
            } else {
                "this kernel has no timerlat tracer (CONFIG_TIMERLAT_TRACER); the \
                 IRQ-vs-thread split comes from the hrtimer and wake-up events"
            },
        ));
        self.write("tracing_on", "1")?;
        Ok(caps)
    }

    /// The text of one CPU's ring buffer, oldest event first. Recording
    /// pauses while it is open (see the module's documentation).
    pub fn read_cpu(&self, cpu: usize) -> std::io::Result<BufReader<fs::File>> {
        let file = fs::File::open(self.dir.join(format!("per_cpu/cpu{cpu}/trace")))?;
        Ok(BufReader::with_capacity(64 * 1024, file))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = fs::write(self.dir.join("tracing_on"), "0");
        let _ = fs::remove_dir(&self.dir);
    }
}

/// `tracing_cpumask` for `cpus`: hexadecimal, 32 bits a group, groups
/// separated by commas, most significant first.
pub fn cpumask(cpus: &[usize]) -> String {
    let groups = cpus.iter().max().map_or(1, |&m| m / 32 + 1);
    let mut words = vec![0u32; groups];
    for &cpu in cpus {
        words[cpu / 32] |= 1 << (cpu % 32);
    }
    words
        .iter()
        .rev()
        .enumerate()
        .map(|(i, w)| {
            if i == 0 {
                format!("{w:x}")
            } else {
                format!("{w:08x}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpumasks_are_written_as_the_kernel_reads_them() {
        assert_eq!(cpumask(&[0, 1]), "3");
        assert_eq!(cpumask(&[1]), "2");
        assert_eq!(cpumask(&[0, 33]), "2,00000001");
        assert_eq!(cpumask(&[63, 64]), "1,80000000,00000000");
    }

    #[test]
    fn a_missing_tracefs_is_named_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let err = locate(dir.path()).unwrap_err();
        assert!(err.contains("not mounted"), "{err}");
        assert!(err.contains("forensics.tracefs"), "{err}");
    }

    #[test]
    fn a_directory_that_is_not_tracefs_is_refused_and_left_clean() {
        // Looks like tracefs (an instances directory) but the kernel is
        // not behind it: the instance's files are not there.
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("instances")).unwrap();
        let root = locate(dir.path()).unwrap();
        let err = open(&root, 1024, &[0]).unwrap_err();
        assert!(
            err.contains("tracing_on") || err.contains("trace event"),
            "{err}"
        );
        // The half-made instance was removed (a plain directory with
        // files in it cannot be; then the next start says so).
        let left = dir.path().join("instances").join(INSTANCE_NAME);
        if left.exists() {
            let again = open(&root, 1024, &[0]).unwrap_err();
            assert!(again.contains("left from an earlier run"), "{again}");
        }
    }
}
