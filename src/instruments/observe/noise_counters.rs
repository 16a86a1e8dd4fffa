//! The observer's counters outside the ring buffers: steal time from
//! `/proc/stat` and SMI counts from MSR 0x34, each read as a delta since
//! the last read (once a second: reading another CPU's MSR interrupts it).

use std::collections::BTreeMap;
use std::io::Read;

use crate::forensics::noise::{SmiCounters, parse_steal};

/// The most of `/proc/stat` read: a line per CPU of about 100 bytes, and
/// the interrupt counts' line, which grows with the IRQs.
const MAX_PROC_STAT_BYTES: u64 = 4 << 20;

/// Steal and SMI counts of the observed CPUs, as deltas.
pub(super) struct NoiseCounters {
    cpus: Vec<usize>,
    smi: Option<SmiCounters>,
    smi_last: BTreeMap<usize, u64>,
    steal_last: BTreeMap<usize, u64>,
}

impl NoiseCounters {
    /// Counters of `cpus`, with their baselines read now: only what
    /// happens from now on is counted.
    pub(super) fn new(cpus: Vec<usize>, smi: Option<SmiCounters>) -> NoiseCounters {
        let mut counters = NoiseCounters {
            cpus,
            smi,
            smi_last: BTreeMap::new(),
            steal_last: BTreeMap::new(),
        };
        counters.steal_deltas();
        counters.smi_deltas();
        counters
    }

    /// Steal per observed CPU since the last call, ns.
    pub(super) fn steal_deltas(&mut self) -> Vec<(usize, u64)> {
        let mut stat = String::new();
        if let Ok(file) = std::fs::File::open("/proc/stat") {
            let _ = file.take(MAX_PROC_STAT_BYTES).read_to_string(&mut stat);
        }
        let mut out = Vec::new();
        for (cpu, steal) in parse_steal(&stat) {
            if !self.cpus.contains(&cpu) {
                continue;
            }
            if let Some(before) = self.steal_last.insert(cpu, steal)
                && steal > before
            {
                out.push((cpu, steal - before));
            }
        }
        out
    }

    /// SMIs per observed CPU since the last read.
    pub(super) fn smi_deltas(&mut self) -> Vec<(usize, u64)> {
        let Some(smi) = &self.smi else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (cpu, count) in smi.read() {
            let Some(count) = count else { continue };
            if let Some(before) = self.smi_last.insert(cpu, count)
                && count > before
            {
                out.push((cpu, count - before));
            }
        }
        out
    }
}
