//! cyclictest's linear `-h` histogram, kept beside the HDR one when
//! `measure --histogram` asks for it.

/// cyclictest's `-h` histogram: one bin per display unit (µs, or ns with
/// `-N`), counts at or above `bins.len()` units are overflows, and the
/// sample numbers of the first overflows are kept (as many as there are
/// bins, as cyclictest keeps them).
#[derive(Debug, PartialEq, Eq)]
pub struct LinearHistogram {
    unit_ns: u64,
    bins: Vec<u64>,
    overflows: u64,
    /// Pre-allocated to hold `bins.len()` entries, so pushes never allocate.
    overflow_samples: Vec<u64>,
}

// Cloning by hand: a derived clone of a Vec keeps its length, not its
// capacity, and the overflow list must be able to grow without allocating.
impl Clone for LinearHistogram {
    fn clone(&self) -> LinearHistogram {
        let mut overflow_samples = spare_written(self.bins.len());
        overflow_samples.extend_from_slice(&self.overflow_samples);
        LinearHistogram {
            unit_ns: self.unit_ns,
            bins: self.bins.clone(),
            overflows: self.overflows,
            overflow_samples,
        }
    }
}

/// An empty vector with room for `n` entries, that room written once so
/// its pages are mapped (and locked, under `mlockall`) before a sampler
/// pushes into it.
fn spare_written(n: usize) -> Vec<u64> {
    let mut v = Vec::with_capacity(n);
    for slot in v.spare_capacity_mut() {
        slot.write(0);
    }
    std::hint::black_box(&mut v);
    v
}

impl LinearHistogram {
    pub fn new(n_bins: usize, unit_ns: u64) -> LinearHistogram {
        LinearHistogram {
            unit_ns,
            bins: vec![0; n_bins],
            overflows: 0,
            overflow_samples: spare_written(n_bins),
        }
    }

    #[inline]
    pub(super) fn record(&mut self, latency_ns: u64, sample_idx: u64) {
        let bin = latency_ns / self.unit_ns;
        match self.bins.get_mut(bin as usize) {
            Some(count) => *count += 1,
            None => {
                self.overflows += 1;
                // Within the pre-allocated capacity, so the push never allocates.
                if self.overflow_samples.len() < self.bins.len() {
                    self.overflow_samples.push(sample_idx);
                }
            }
        }
    }

    pub(super) fn merge(&mut self, other: &LinearHistogram) {
        for (mine, theirs) in self.bins.iter_mut().zip(&other.bins) {
            *mine += theirs;
        }
        self.overflows += other.overflows;
        let room = self.bins.len().saturating_sub(self.overflow_samples.len());
        let take = room.min(other.overflow_samples.len());
        self.overflow_samples
            .extend_from_slice(&other.overflow_samples[..take]);
    }

    pub(super) fn reset(&mut self) {
        self.bins.fill(0);
        self.overflows = 0;
        self.overflow_samples.clear();
    }

    pub fn unit_ns(&self) -> u64 {
        self.unit_ns
    }

    pub fn bins(&self) -> &[u64] {
        &self.bins
    }

    pub fn overflows(&self) -> u64 {
        self.overflows
    }

    /// Sample numbers (0-based) of the first overflows, in order.
    pub fn overflow_samples(&self) -> &[u64] {
        &self.overflow_samples
    }
}
