//! A finished run as plain data: what the renderers (`text`, `json`)
//! take. The formats copy cyclictest 2.x closely enough that scripts
//! written for cyclictest's output parse ours unchanged; where we add
//! information it goes into new JSON fields or `#` comment lines.

use std::time::SystemTime;

use crate::host::{CpuTopology, Fingerprint, HostInfo};
use crate::load::LoadReport;
use crate::rt::sys::Policy;
use crate::stats::LatencyStats;
use crate::units::NS_PER_US;

/// One sampler's results.
#[derive(Debug, Clone)]
pub struct ThreadReport {
    pub cpu: usize,
    pub numa_node: i32,
    pub tid: i32,
    pub priority: i32,
    pub interval_ns: u64,
    pub realtime: bool,
    pub stats: LatencyStats,
    /// SMIs on its CPU during the run (`--smi`).
    pub smi_count: Option<u64>,
}

/// A whole run's results and what the JSON file says about the host.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub cmdline: String,
    pub start_time: SystemTime,
    pub end_time: SystemTime,
    pub return_code: i32,
    pub host: HostInfo,
    /// The host's facts as the run began (after its own PM QoS request
    /// and idle-state limits, which are part of what was measured).
    pub fingerprint: Fingerprint,
    /// The measured CPUs' places in the machine.
    pub topology: Vec<CpuTopology>,
    /// The value `/dev/cpu_dma_latency` was held at, if it was.
    pub pm_qos_us: Option<i32>,
    pub policy: Policy,
    /// Report in nanoseconds (cyclictest's `-N`) instead of microseconds.
    pub nsecs: bool,
    /// Add the all-threads column to the `-h` block (cyclictest's `-H`).
    pub histofall: bool,
    pub threads: Vec<ThreadReport>,
    /// Options accepted but not exactly as typed, or meaning nothing here
    /// (`options::Note`, as printed on stderr).
    pub notes: Vec<String>,
    /// `--load`: what ran beside the samplers and what it achieved.
    pub load: Option<LoadReport>,
    /// `-b`, `--forensics`: the captures whole, oldest first.
    pub captures: Vec<crate::forensics::Capture>,
    /// `--timerlat`: what the kernel's timerlat measured meanwhile.
    pub timerlat: Option<crate::instruments::timerlat::tally::TimerlatReport>,
}

impl RunReport {
    pub(super) fn unit_ns(&self) -> u64 {
        if self.nsecs { 1 } else { NS_PER_US }
    }

    /// Every sampler ran with its real-time policy.
    pub fn realtime(&self) -> bool {
        self.threads.iter().all(|t| t.realtime)
    }
}
