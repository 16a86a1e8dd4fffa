//! The kernel's timerlat in captures (`[timerlat]` beside forensics): the
//! worst period of an interval over the threshold, split into the timer's
//! IRQ, the thread and its return to user space, waits a moment for the
//! sampler's capture of the same wake-up (the sampler's interval reaches
//! the recorder up to a tick later), then joins it. When no capture of
//! that CPU covers the period (the samplers were on time, their capture
//! was over the rate limits, or the CPU has no sampler), it gets a capture
//! of its own, triggered by timerlat and attributed to what ran instead of
//! timerlat's thread, which names the reason that held.

use std::path::Path;

use super::journal::{Spike, Trigger};
use super::store::{Capture, TimerlatSplit};
use super::worker::Worker;
use crate::units::NS_PER_MS;

/// How long a split waits for the sampler's capture.
pub(super) const SPLIT_WAIT_NS: u64 = 600 * NS_PER_MS;

/// Splits waiting, at most (one per CPU and 100 ms interval is the most
/// the collector hands over; more means the recorder is behind).
const MAX_WAITING: usize = 256;

impl Worker {
    /// A split over the threshold, received at `now`.
    pub(super) fn timerlat(&mut self, cpu: usize, split: TimerlatSplit, now: u64) {
        if self.splits.len() >= MAX_WAITING {
            self.count_uncaptured(cpu, "busy");
            return;
        }
        self.splits.push((now, cpu, split));
    }

    /// Places every split that has waited long enough at `now`.
    pub(super) fn settle_splits(&mut self, now: u64) {
        let (due, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.splits)
            .into_iter()
            .partition(|(at, _, _)| now.saturating_sub(*at) >= SPLIT_WAIT_NS);
        self.splits = waiting;
        for (_, cpu, split) in due {
            self.place(cpu, split);
        }
    }

    fn place(&mut self, cpu: usize, split: TimerlatSplit) {
        let period = (
            split.thread_mono_ns.saturating_sub(split.thread_ns),
            split.thread_mono_ns,
        );
        let covering = self.last_kept.get(&cpu).filter(|c| {
            let s = &c.summary;
            s.timerlat.is_none() && s.deadline_mono_ns < period.1 && period.0 < s.wakeup_mono_ns
        });
        if let Some(capture) = covering {
            let mut capture = capture.clone();
            capture.summary.timerlat = Some(split);
            self.rewrite(capture);
            return;
        }
        let spike = Spike {
            cpu,
            sampler_tid: timerlat_tid(Path::new("/proc"), cpu).unwrap_or(0),
            latency_ns: split.thread_ns,
            wakeup_ns: split.thread_mono_ns,
            trigger: Trigger::Timerlat,
        };
        self.handle_with(spike, Some(split));
    }

    /// A capture kept before, now with its split: written again under
    /// its id, and its summary in the journal replaced.
    fn rewrite(&mut self, capture: Capture) {
        let (mut journal, stored) = self.store(&capture);
        match stored {
            Err(()) => return,
            Ok(true) => {}
            Ok(false) => {
                let id = &capture.summary.id;
                if let Some(kept) = journal.in_memory.iter_mut().find(|c| &c.summary.id == id) {
                    *kept = capture.clone();
                }
            }
        }
        if let Some(summary) = (journal.recent.iter_mut()).find(|s| s.id == capture.summary.id) {
            *summary = capture.summary.clone();
        }
        drop(journal);
        self.last_kept.insert(capture.summary.cpu, capture);
    }
}

/// The thread timerlat wakes on `cpu`: latencyd's own (`timerlat-cpuN`,
/// in its workload process) or the kernel's (`timerlat/N`), by name under
/// `proc`.
pub(super) fn timerlat_tid(proc: &Path, cpu: usize) -> Option<i32> {
    let names = [format!("timerlat-cpu{cpu}"), format!("timerlat/{cpu}")];
    for process in std::fs::read_dir(proc).ok()?.flatten() {
        let Ok(tasks) = std::fs::read_dir(process.path().join("task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            if names.iter().any(|n| n == comm.trim_end()) {
                return task.file_name().to_str()?.parse().ok();
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timerlat_threads_are_found_by_name() {
        let proc = tempfile::tempdir().unwrap();
        for (pid, tid, comm) in [
            (7, 7, "latencyd"),
            (7, 9, "timerlat-cpu1"),
            (12, 12, "timerlat/2"),
        ] {
            let dir = proc.path().join(format!("{pid}/task/{tid}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("comm"), format!("{comm}\n")).unwrap();
        }
        assert_eq!(timerlat_tid(proc.path(), 1), Some(9));
        assert_eq!(timerlat_tid(proc.path(), 2), Some(12));
        assert_eq!(timerlat_tid(proc.path(), 3), None);
    }
}
