//! The flight recorder's private tracefs instance.
//!
//! `instances/latencyd-forensics-PID` (owned as `crate::tracefs`
//! describes) has its own per-CPU ring buffers, events, clock
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
//! recorder stops; one left by a process that died is removed by the next
//! latencyd that starts forensics.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::Path;

use super::attribution::Attributor;
use super::events::{Line, VECTORS, parse_line};
use super::journal::Journal;
pub use crate::tracefs::{Capability, DEFAULT_TRACEFS, Instance, cpumask};
use crate::tracefs::{Check, Role, locate_for};

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

/// An instance set up and recording, and what was found on the way.
#[derive(Debug)]
pub struct Opened {
    pub instance: Instance,
    /// Things worth a log line (a leftover instance removed, ...).
    pub notes: Vec<String>,
    pub capabilities: Vec<Capability>,
}

/// Finds tracefs: `configured`, or for the default, the debugfs mount.
pub fn locate(configured: &Path) -> Result<std::path::PathBuf, String> {
    locate_for(configured, "forensics")
}

/// Creates and starts the instance on `root` (a tracefs mount).
pub fn open(root: &Path, buffer_size_kb: u64, cpus: &[usize]) -> Result<Opened, String> {
    let (instance, notes) = Instance::create(root, Role::Forensics)?;
    let capabilities = configure(&instance, root, buffer_size_kb, cpus)?;
    Ok(Opened {
        instance,
        notes,
        capabilities,
    })
}

/// Sets the flight recorder up in `instance` and starts it: what to
/// record, on which CPUs, with which clock; what the kernel offers.
fn configure(
    instance: &Instance,
    root: &Path,
    buffer_size_kb: u64,
    cpus: &[usize],
) -> Result<Vec<Capability>, String> {
    let dir = instance.dir();
    let mut caps = Vec::new();
    instance.write("tracing_on", "0")?;
    instance.write("trace_clock", "mono")?;
    instance.write("buffer_size_kb", &buffer_size_kb.to_string())?;
    instance.write("tracing_cpumask", &cpumask(cpus))?;
    let paused_read = !dir.join("options/pause-on-trace").exists()
        || instance.write("options/pause-on-trace", "1").is_ok();
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
        let enable = dir.join("events").join(event).join("enable");
        if !enable.exists() {
            return Err(format!(
                "the kernel has no {event} trace event, which forensics needs"
            ));
        }
        instance.write(&format!("events/{event}/enable"), "1")?;
    }
    let mut missing = Vec::new();
    for event in optional_events() {
        let enable = dir.join("events").join(&event).join("enable");
        if !enable.exists()
            || instance
                .write(&format!("events/{event}/enable"), "1")
                .is_err()
        {
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
        } else if !dir.join("events/irq_vectors").exists() {
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
    let osnoise_on = dir.join("events/osnoise/enable").exists()
        && instance.write("events/osnoise/enable", "1").is_ok();
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
    caps.push(timerlat_capability(root));
    instance.write("tracing_on", "1")?;
    Ok(caps)
}

/// Whether the kernel has the timerlat tracer (which latencyd does not
/// start), as a capability.
fn timerlat_capability(root: &Path) -> Capability {
    let tracers = fs::read_to_string(root.join("available_tracers")).unwrap_or_default();
    let timerlat = tracers.split_whitespace().any(|t| t == "timerlat");
    Capability::new(
        "timerlat",
        timerlat,
        if timerlat {
            "the timerlat tracer exists; forensics does not start it (it adds a timer \
                 thread on every CPU: [timerlat] runs it) and derives the same IRQ-vs-thread \
                 split from the hrtimer and wake-up events"
        } else {
            "this kernel has no timerlat tracer (CONFIG_TIMERLAT_TRACER); the \
                 IRQ-vs-thread split comes from the hrtimer and wake-up events"
        },
    )
}

/// Reads `instance` back: a change behind latencyd's back is set back and
/// said (a notice in `journal`); an instance that cannot be set back is
/// replaced by a new one made with `(root, buffer_size_kb, cpus)`, or
/// forensics is unavailable (`instance` None, said once) until one can be.
pub fn keep_up(
    instance: &mut Option<Instance>,
    (root, buffer_size_kb, cpus): (&Path, u64, &[usize]),
    journal: &Journal,
) {
    let why = match instance.as_ref().map(Instance::check) {
        Some(Check::Intact) => return,
        Some(Check::Repaired(what)) => {
            let mut journal = journal.lock();
            journal.repairs += 1;
            journal.notice(what);
            return;
        }
        Some(Check::Paused(what)) => {
            journal.lock().notice(what);
            return;
        }
        Some(Check::Broken(why)) => why,
        None => String::new(),
    };
    // Removed first: a broken instance still holds its name.
    let was = instance.take().map(|old| old.name());
    let opened = open(root, buffer_size_kb, cpus);
    let mut journal = journal.lock();
    match opened {
        Ok(opened) => {
            journal.repairs += 1;
            let name = opened.instance.name();
            journal.notice(format!(
                "{why}; forensics set up again in the tracefs instance {name}"
            ));
            journal.instance = Some(name);
            journal.available = true;
            journal.reason = None;
            *instance = Some(opened.instance);
        }
        Err(err) => {
            let reason = if why.is_empty() {
                format!("the tracefs instance cannot be set up again: {err}")
            } else {
                format!("{why}; it cannot be set up again: {err}")
            };
            if was.is_some() || journal.available {
                journal.notice(reason.clone());
            }
            journal.available = false;
            journal.reason = Some(reason);
        }
    }
}

/// Feeds `cpu`'s ring buffer in `instance` to `attributor`, oldest event
/// first, until it has what it needs. Recording pauses while the buffer
/// is open (see the module's documentation).
pub fn read_into(
    instance: &Instance,
    cpu: usize,
    attributor: &mut Attributor,
) -> Result<(), String> {
    let mut reader =
        read_cpu(instance, cpu).map_err(|err| format!("cannot read CPU {cpu}'s trace: {err}"))?;
    let mut line = Vec::with_capacity(256);
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(err) => return Err(format!("reading CPU {cpu}'s trace failed: {err}")),
        }
        match parse_line(&String::from_utf8_lossy(&line)) {
            Line::Event(event) => attributor.feed(&event),
            Line::Lost(count) => attributor.lost(count),
            Line::Other => {}
        }
        if attributor.done() {
            break;
        }
    }
    // Closing the file (dropping the reader) lets recording go on.
    Ok(())
}

/// The text of one CPU's ring buffer in `instance`, oldest event first.
/// Recording pauses while it is open (see the module's documentation).
pub fn read_cpu(instance: &Instance, cpu: usize) -> std::io::Result<BufReader<fs::File>> {
    let file = fs::File::open(instance.dir().join(format!("per_cpu/cpu{cpu}/trace")))?;
    Ok(BufReader::with_capacity(64 * 1024, file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_that_is_not_tracefs_is_refused_and_left_clean() {
        // Looks like tracefs (an instances directory) but the kernel is
        // not behind it: the instance's files are not there.
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("instances")).unwrap();
        let root = locate(dir.path()).unwrap();
        let err = open(&root, 1024, &[0]).unwrap_err();
        assert!(err.contains("not a tracefs instance"), "{err}");
        let left: Vec<_> = fs::read_dir(dir.path().join("instances"))
            .unwrap()
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}
