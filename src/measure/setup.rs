//! What `measure` sets up before its samplers start and holds until the
//! run ends: the host tuned (`tuning`), the facts read under the run's
//! own conditions, the empty results every thread starts from, the
//! `--log` file and the `-F` pipe; and the engine's spec, one sampler per
//! thread as cyclictest lays them out on an aligned start grid.

use std::io::Write;
use std::path::Path;

use anyhow::Context;

use super::live::{Fifo, sample_log};
use super::log::MeasureLog;
use super::options::{Alignment, MeasureOptions};
use super::tuning::{IdleStates, before_the_run, check_resolution};
use crate::forensics::noise::SmiCounters;
use crate::host::HostInfo;
use crate::host::fingerprint::Fingerprint;
use crate::host::topology::CpuTopology;
use crate::rt::clock::Timing;
use crate::rt::engine::{DEFAULT_START_TIMEOUT, EngineSpec, ThreadSetup};
use crate::rt::sys::{self, ClockSource, CpuDmaLatencyHold};
use crate::stats::{LatencyStats, LinearHistogram};
use crate::tracefs::TraceMark;
use crate::units::NS_PER_SEC;

/// What the run sets up before its samplers start, and holds until it
/// ends (dropping a hold puts the host back).
pub(super) struct Setup {
    pub pm_qos_hold: Option<CpuDmaLatencyHold>,
    pub smi: Option<SmiCounters>,
    pub idle_states: Option<IdleStates>,
    pub fingerprint: Fingerprint,
    pub topology: Vec<CpuTopology>,
    pub tracemark: Option<TraceMark>,
    /// Every thread's empty results (`-h` bins, spike log).
    pub template: LatencyStats,
    pub log: Option<MeasureLog>,
    pub fifo: Option<Fifo>,
}

impl Setup {
    pub(super) fn before_the_samplers(
        options: &MeasureOptions,
        host: &HostInfo,
        stdout: &mut dyn Write,
    ) -> anyhow::Result<Setup> {
        let cpus = options.cpus();
        let (pm_qos_hold, smi) = before_the_run(options, host, &cpus, stdout)?;
        let idle_states = options
            .deepest_idle_state
            .map(|deepest| IdleStates::limit(Path::new("/sys/devices/system/cpu"), &cpus, deepest))
            .transpose()?;
        if let Some(states) = &idle_states {
            eprintln!(
                "latencyd measure: {} idle states deeper than {} disabled on CPUs {} until the end",
                states.count(),
                options.deepest_idle_state.unwrap_or_default(),
                crate::cpulist::format_cpu_list(&cpus)
            );
        }
        // The host's facts under the run's own conditions (its PM QoS
        // request and idle-state limits are in force from here): before
        // the samplers, so reading them costs the measurement nothing.
        let fingerprint = crate::host::FactReader::live(&cpus).read();
        let topology = crate::host::topology::read(Path::new("/"), &cpus);
        let tracemark = (options.tracemark && options.breaktrace_ns.is_some())
            .then(|| TraceMark::open("latencyd measure", "--tracemark"));
        if options.resolution_check {
            check_resolution(options.clock, options.verbose.is_some());
        }
        let linear = options
            .histogram
            .map(|h| LinearHistogram::new(h.bins, options.unit_ns()));
        let shortest_interval_ns = options
            .threads
            .iter()
            .map(|t| t.interval_ns)
            .min()
            .unwrap_or(NS_PER_SEC);
        let template = LatencyStats::new(options.spike_threshold_ns, linear)
            .with_sample_log(sample_log(options, shortest_interval_ns));
        // `--log`: created now, so a path that cannot be written stops the
        // run before it starts.
        let log = match &options.log {
            Some((path, interval_ns)) => Some(MeasureLog::create(
                path,
                *interval_ns,
                options,
                host,
                &fingerprint,
            )?),
            None => None,
        };
        let fifo = options
            .fifo
            .as_deref()
            .map(|path| {
                Fifo::start(path)
                    .with_context(|| format!("-F: cannot create the named pipe {}", path.display()))
            })
            .transpose()?;
        Ok(Setup {
            pm_qos_hold,
            smi,
            idle_states,
            fingerprint,
            topology,
            tracemark,
            template,
            log,
            fifo,
        })
    }

    /// One sampler per thread as cyclictest lays them out.
    pub(super) fn engine_spec(&self, options: &MeasureOptions, host: &HostInfo) -> EngineSpec {
        let grid = start_grid(options.alignment, options.clock);
        EngineSpec {
            threads: options
                .threads
                .iter()
                .enumerate()
                .map(|(idx, thread)| ThreadSetup {
                    cpu: thread.cpu,
                    priority: thread.priority,
                    plan: options.loop_plan(thread.interval_ns),
                    timing: Timing {
                        clock: options.clock,
                        sleep: options.sleep,
                        start_grid_ns: grid.map(|(base, step)| base + step * idx as u64),
                    },
                })
                .collect(),
            policy: options.policy,
            allow_non_rt: options.allow_non_rt,
            template: self.template.clone(),
            start_timeout: DEFAULT_START_TIMEOUT,
            limits: host.rt_limits(),
            tolerate_offline: false,
        }
    }
}

/// The time grid aligned threads share, on `clock`, and how much later
/// each thread starts than the one before: `-A` aligns them to one time
/// (now), `--secaligned` to the next full second at least 100 ms away,
/// each plus the offset as cyclictest adds it.
fn start_grid(alignment: Alignment, clock: ClockSource) -> Option<(u64, u64)> {
    let now = sys::clock_now_ns(clock);
    match alignment {
        Alignment::None => None,
        Alignment::Aligned { offset_ns } => Some((now, offset_ns)),
        Alignment::SecondAligned { offset_ns } => {
            let next_second = (now / NS_PER_SEC + 1) * NS_PER_SEC;
            let base = if next_second - now < NS_PER_SEC / 10 {
                next_second + NS_PER_SEC
            } else {
                next_second
            };
            Some((base + offset_ns, 0))
        }
    }
}
