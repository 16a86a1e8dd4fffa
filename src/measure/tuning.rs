//! What `measure` changes on the host for the length of a run, as
//! cyclictest does, and puts back when the run ends: the PM QoS request on
//! `/dev/cpu_dma_latency` (held at 0 unless `--default-system`,
//! `--laptop`, or `--latency N`), the measured CPUs' idle states
//! (`--deepest-idle-state`), and the main thread's CPUs (`--mainaffinity`).
//! Also the checks cyclictest makes before it starts: the clock's
//! resolution (`-R`) and the SMI counters (`--smi`).

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use super::options::{JsonTarget, MeasureOptions, PmQos};
use crate::forensics::noise::{SmiCounters, smi_counter_expected};
use crate::host::HostInfo;
use crate::rt::sys::{self, ClockSource, CpuDmaLatencyHold};

/// What cyclictest prints and checks before its run, in its order: with
/// `-v`, the CPU counts; `--smi`'s check for a counter; the PM QoS hold
/// and its line; with `-v`, each thread's setup; then `--smi`'s counters
/// opened. The lines go to stdout, or to stderr when stdout carries the
/// JSON only.
pub(super) fn before_the_run(
    options: &MeasureOptions,
    host: &HostInfo,
    cpus: &[usize],
    stdout: &mut dyn Write,
) -> anyhow::Result<(Option<CpuDmaLatencyHold>, Option<SmiCounters>)> {
    let text_to_stdout = options.json != Some(JsonTarget::Stdout);
    let mut header = Vec::new();
    let verbose = options.verbose.is_some() || options.debug;
    if verbose {
        let online = sys::online_cpus().map_or(0, |c| c.len());
        writeln!(header, "Max CPUs = {}", host.usable_cpus.len().max(online))?;
        writeln!(header, "Online CPUs = {online}")?;
    }
    // cyclictest refuses --smi on a CPU without the counter while it reads
    // its options, before it prints anything.
    if options.smi {
        check_smi_supported()?;
    }
    let pm_qos_hold = hold_pm_qos(options.pm_qos, &mut header)?;
    if verbose {
        for (idx, thread) in options.threads.iter().enumerate() {
            writeln!(
                header,
                "Thread {idx} Interval: {} CPU: {} Priority: {}",
                thread.interval_ns / 1_000,
                thread.cpu,
                thread.priority
            )?;
        }
    }
    if text_to_stdout {
        stdout.write_all(&header)?;
    } else {
        io::stderr().write_all(&header)?;
    }
    // The counters cyclictest cannot run without, opened where cyclictest
    // opens them: after it has said it holds /dev/cpu_dma_latency (the
    // hold is released on the way out).
    let smi = options.smi.then(|| smi_counters(cpus)).transpose()?;
    Ok((pm_qos_hold, smi))
}

/// `/dev/cpu_dma_latency` as cyclictest treats it: a request that cannot
/// be made is a warning, and the run goes on without it (the JSON then
/// says no value was held).
fn hold_pm_qos(pm_qos: PmQos, out: &mut dyn Write) -> io::Result<Option<CpuDmaLatencyHold>> {
    let PmQos::Hold(us) = pm_qos else {
        return Ok(None);
    };
    match CpuDmaLatencyHold::acquire(us) {
        Ok(hold) => {
            writeln!(out, "# /dev/cpu_dma_latency set to {us}us")?;
            Ok(Some(hold))
        }
        Err(err) => {
            eprintln!(
                "latencyd measure: warning: cannot hold {} at {us}us ({err}); measuring with \
                 power management as it is (it needs root or write access to the device; \
                 --default-system says this is meant)",
                sys::CPU_DMA_LATENCY_PATH
            );
            Ok(None)
        }
    }
}

/// The idle states `--deepest-idle-state` disabled, with what each was
/// before; dropping it puts them back.
pub(super) struct IdleStates {
    /// `cpuN/cpuidle/stateK/disable` and the value it had.
    changed: Vec<(PathBuf, String)>,
}

impl IdleStates {
    /// Disables every idle state deeper than `deepest` (all of them with -1)
    /// on `cpus`, under `cpu_root` (`/sys/devices/system/cpu`).
    pub(super) fn limit(
        cpu_root: &Path,
        cpus: &[usize],
        deepest: i32,
    ) -> anyhow::Result<IdleStates> {
        let mut states = IdleStates {
            changed: Vec::new(),
        };
        for &cpu in cpus {
            let dir = cpu_root.join(format!("cpu{cpu}/cpuidle"));
            let entries = fs::read_dir(&dir).with_context(|| {
                format!(
                    "--deepest-idle-state: cannot read {} (no cpuidle driver on this CPU?)",
                    dir.display()
                )
            })?;
            let mut numbered: Vec<(i32, PathBuf)> = entries
                .filter_map(Result::ok)
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    let n = name.strip_prefix("state")?.parse().ok()?;
                    Some((n, e.path().join("disable")))
                })
                .collect();
            numbered.sort();
            for (n, path) in numbered.into_iter().filter(|(n, _)| *n > deepest) {
                let before = fs::read_to_string(&path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                if before.trim() == "1" {
                    continue;
                }
                fs::write(&path, "1").with_context(|| {
                    format!(
                        "--deepest-idle-state: cannot disable idle state {n} of CPU {cpu} \
                         through {} (it needs root)",
                        path.display()
                    )
                })?;
                states.changed.push((path, before.trim().to_string()));
            }
        }
        Ok(states)
    }

    /// How many idle states were disabled.
    pub(super) fn count(&self) -> usize {
        self.changed.len()
    }
}

impl Drop for IdleStates {
    fn drop(&mut self) {
        for (path, before) in &self.changed {
            if let Err(err) = fs::write(path, before) {
                eprintln!(
                    "latencyd measure: warning: cannot restore {} to {before} ({err})",
                    path.display()
                );
            }
        }
    }
}

/// `-R`: how fine the clock really is, from the smallest step between
/// successive reads, against what `clock_getres` claims; said on stderr
/// when it is coarser (or always with `-v`), as cyclictest says it.
pub(super) fn check_resolution(clock: ClockSource, verbose: bool) {
    let reported = sys::reported_resolution_ns(clock).ok();
    let mut previous = sys::clock_now_ns(clock);
    let mut smallest = u64::MAX;
    for _ in 0..100_000 {
        let now = sys::clock_now_ns(clock);
        let step = now.saturating_sub(previous);
        if step > 0 {
            smallest = smallest.min(step);
        }
        previous = now;
    }
    let coarser = reported.is_some_and(|r| smallest != u64::MAX && smallest > r);
    if verbose || coarser {
        match reported {
            Some(ns) => eprintln!("WARN: reported clock resolution: {ns} nsec"),
            None => eprintln!("WARN: clock_getres failed"),
        }
        if smallest != u64::MAX {
            eprintln!("WARN: measured clock resolution approximately: {smallest} nsec");
        }
    }
}

/// `--smi`, first half: whether this CPU has an SMI counter at all,
/// checked where cyclictest checks it (with its options, before it says
/// anything about `/dev/cpu_dma_latency`), with cyclictest's words.
fn check_smi_supported() -> anyhow::Result<()> {
    let cpuinfo = crate::files::read_cpuinfo();
    smi_counter_expected(&cpuinfo).map_err(|why| {
        anyhow::anyhow!("--smi: SMI counter is not supported on this processor ({why})")
    })
}

/// `--smi`, second half: the counters of `cpus`, opened where cyclictest
/// opens them (after the PM QoS line); a device that cannot be read stops
/// the run, as it stops cyclictest.
fn smi_counters(cpus: &[usize]) -> anyhow::Result<SmiCounters> {
    let cpuinfo = crate::files::read_cpuinfo();
    match SmiCounters::open(Path::new("/dev/cpu"), &cpuinfo, cpus) {
        (Some(counters), _) => Ok(counters),
        (None, capability) => bail!("--smi: cannot read the SMI counters: {}", capability.detail),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deeper_idle_states_are_disabled_and_put_back() {
        let root = tempfile::tempdir().unwrap();
        for state in 0..3 {
            let dir = root.path().join(format!("cpu1/cpuidle/state{state}"));
            fs::create_dir_all(&dir).unwrap();
            fs::write(dir.join("disable"), "0\n").unwrap();
        }
        let read = |state: usize| {
            fs::read_to_string(
                root.path()
                    .join(format!("cpu1/cpuidle/state{state}/disable")),
            )
            .unwrap()
        };
        let states = IdleStates::limit(root.path(), &[1], 0).unwrap();
        assert_eq!(states.count(), 2);
        assert_eq!(
            (read(0).trim(), read(1).trim(), read(2).trim()),
            ("0", "1", "1")
        );
        drop(states);
        assert_eq!(
            (read(0).trim(), read(1).trim(), read(2).trim()),
            ("0", "0", "0")
        );
        let err = IdleStates::limit(root.path(), &[7], 0).err().unwrap();
        assert!(format!("{err:#}").contains("cpu7"), "{err:#}");
    }
}
