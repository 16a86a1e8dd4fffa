//! Single samples kept in order, for what cyclictest prints sample by
//! sample: `-v` (every wake-up as `thread:cycle:latency`) and `--spike`
//! (every wake-up over a trigger). Only `measure` keeps one; the daemon's
//! samplers have none.
//!
//! Like the linear histogram, its room is allocated and written before a
//! sampler records into it, and a push never allocates: past its room a
//! sample is counted in `dropped` instead (cyclictest's verbose ring
//! overwrites unread values the same way when its reader falls behind).

/// One wake-up: its number in the thread's run, its latency and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoggedSample {
    pub sample_idx: u64,
    pub latency_ns: u64,
    pub at_ns: u64,
}

#[derive(Debug, PartialEq, Eq)]
pub struct SampleLog {
    /// Samples at or above this are kept (0: all).
    from_ns: u64,
    entries: Vec<LoggedSample>,
    dropped: u64,
}

// By hand, as `LinearHistogram`'s: a clone must keep the room, not only
// the entries.
impl Clone for SampleLog {
    fn clone(&self) -> SampleLog {
        let mut log = SampleLog::new(self.entries.capacity(), self.from_ns);
        log.entries.extend_from_slice(&self.entries);
        log.dropped = self.dropped;
        log
    }
}

impl SampleLog {
    /// Room for `room` samples of at least `from_ns`.
    pub fn new(room: usize, from_ns: u64) -> SampleLog {
        let mut entries = Vec::with_capacity(room);
        for slot in entries.spare_capacity_mut() {
            slot.write(LoggedSample::default());
        }
        std::hint::black_box(&mut entries);
        SampleLog {
            from_ns,
            entries,
            dropped: 0,
        }
    }

    #[inline]
    pub(super) fn record(&mut self, sample_idx: u64, latency_ns: u64, at_ns: u64) {
        if latency_ns < self.from_ns {
            return;
        }
        // Within the room written at construction: the push never allocates.
        if self.entries.len() < self.entries.capacity() {
            self.entries.push(LoggedSample {
                sample_idx,
                latency_ns,
                at_ns,
            });
        } else {
            self.dropped += 1;
        }
    }

    pub(super) fn reset(&mut self) {
        self.entries.clear();
        self.dropped = 0;
    }

    /// The samples kept, oldest first.
    pub fn entries(&self) -> &[LoggedSample] {
        &self.entries
    }

    /// Samples that qualified but found no room.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_samples_from_its_threshold_in_order_and_counts_what_has_no_room() {
        let mut log = SampleLog::new(2, 10);
        log.record(0, 5, 100);
        log.record(1, 10, 200);
        log.record(2, 30, 300);
        log.record(3, 40, 400);
        let kept: Vec<u64> = log.entries().iter().map(|s| s.sample_idx).collect();
        assert_eq!(kept, [1, 2]);
        assert_eq!(log.dropped(), 1);
        let copy = log.clone();
        assert_eq!(copy, log);
        log.reset();
        assert!(log.entries().is_empty());
        assert_eq!(log.dropped(), 0);
        assert_eq!(log.entries.capacity(), 2, "the room survives a reset");
    }
}
