//! What the kernel and the hardware count about time taken from a CPU
//! behind the scheduler's back: hypervisor steal (`/proc/stat`, in
//! `USER_HZ` ticks) and, on Intel, system management interrupts (MSR
//! 0x34, `MSR_SMI_COUNT`, through `/dev/cpu/N/msr`).
//!
//! Reading another CPU's MSR makes the kernel interrupt that CPU (an
//! IPI), so SMI counts are read once a second and at a capture, never
//! faster.

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::tracefs::Capability;

/// `MSR_SMI_COUNT`: SMIs since reset, in its low 32 bits.
const MSR_SMI_COUNT: u64 = 0x34;
/// Nanoseconds a `USER_HZ` tick of `/proc/stat` stands for (USER_HZ is
/// 100 on every Linux architecture latencyd runs on).
const NS_PER_TICK: u64 = 10_000_000;
/// Steal readings kept: two seconds at one every 100 ms.
const STEAL_HISTORY: usize = 20;

/// Per-CPU steal time from `/proc/stat`, nanoseconds, by CPU number.
pub fn parse_steal(stat: &str) -> Vec<(usize, u64)> {
    stat.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("cpu")?;
            if !rest.starts_with(|c: char| c.is_ascii_digit()) {
                return None;
            }
            let mut fields = rest.split_whitespace();
            let cpu: usize = fields.next()?.parse().ok()?;
            // user nice system idle iowait irq softirq steal
            let steal: u64 = fields.nth(7)?.parse().ok()?;
            Some((cpu, steal * NS_PER_TICK))
        })
        .collect()
}

/// Steal readings of the last seconds, for the time around a spike.
#[derive(Debug)]
pub struct StealHistory {
    path: PathBuf,
    /// (monotonic ns, steal ns per CPU number).
    readings: VecDeque<(u64, Vec<(usize, u64)>)>,
}

impl StealHistory {
    pub fn new(path: &Path) -> StealHistory {
        StealHistory {
            path: path.to_path_buf(),
            readings: VecDeque::with_capacity(STEAL_HISTORY),
        }
    }

    /// Whether the kernel reports steal at all (a `/proc/stat` with the
    /// column), as a capability.
    pub fn capability(&self) -> Capability {
        match std::fs::read_to_string(&self.path) {
            Ok(text) if !parse_steal(&text).is_empty() => Capability::new(
                "steal",
                true,
                "hypervisor steal from /proc/stat (10 ms ticks, read every 100 ms): a capture \
                 gives it the unaccounted time it can explain",
            ),
            _ => Capability::new(
                "steal",
                false,
                format!("{} has no per-CPU steal column", self.path.display()),
            ),
        }
    }

    pub fn sample(&mut self, now_ns: u64) {
        let Ok(text) = std::fs::read_to_string(&self.path) else {
            return;
        };
        if self.readings.len() == STEAL_HISTORY {
            self.readings.pop_front();
        }
        self.readings.push_back((now_ns, parse_steal(&text)));
    }

    /// The steal of `cpu` between the last reading at or before `from_ns`
    /// and the first at or after `to_ns`; `None` without such readings.
    pub fn between(&self, cpu: usize, from_ns: u64, to_ns: u64) -> Option<u64> {
        let of = |reading: &(u64, Vec<(usize, u64)>)| {
            reading.1.iter().find(|(c, _)| *c == cpu).map(|(_, s)| *s)
        };
        let before = self.readings.iter().rev().find(|r| r.0 <= from_ns)?;
        let after = self.readings.iter().find(|r| r.0 >= to_ns)?;
        Some(of(after)?.saturating_sub(of(before)?))
    }
}

/// Whether the CPU should have an SMI counter, by the rule cyclictest 2.x
/// applies before it starts (turbostat's): an Intel CPU of family 6 with
/// model-specific registers. Elsewhere, why not, in words.
pub fn smi_counter_expected(cpuinfo: &str) -> Result<(), &'static str> {
    let field = |name: &str| {
        cpuinfo.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == name).then(|| value.trim())
        })
    };
    if field("CPU implementer").is_some() {
        return Err(
            "SMIs are x86's: on Arm, time the firmware takes (secure monitor calls, EL3) has \
             no counter and shows as unaccounted time",
        );
    }
    if field("vendor_id") != Some("GenuineIntel") {
        return Err("not an Intel CPU: MSR 0x34 (MSR_SMI_COUNT) is Intel's");
    }
    if field("cpu family") != Some("6") {
        return Err("an Intel CPU outside family 6, which has no MSR_SMI_COUNT");
    }
    let has_msr = field("flags").is_some_and(|flags| flags.split_whitespace().any(|f| f == "msr"));
    if !has_msr {
        return Err("the CPU reports no model-specific registers (no 'msr' flag)");
    }
    Ok(())
}

/// SMI counters, where the CPU has them and they may be read.
#[derive(Debug)]
pub struct SmiCounters {
    /// An open `/dev/cpu/N/msr` per CPU, in the order of `cpus`.
    files: Vec<(usize, File)>,
}

impl SmiCounters {
    /// Opens the MSR devices of `cpus` under `dev_cpu` (`/dev/cpu`);
    /// `cpuinfo` is `/proc/cpuinfo`'s text.
    pub fn open(
        dev_cpu: &Path,
        cpuinfo: &str,
        cpus: &[usize],
    ) -> (Option<SmiCounters>, Capability) {
        if let Err(why) = smi_counter_expected(cpuinfo) {
            return (None, Capability::new("smi_count", false, why));
        }
        let mut files = Vec::new();
        for &cpu in cpus {
            let path = dev_cpu.join(cpu.to_string()).join("msr");
            let file = match File::open(&path) {
                Ok(file) => file,
                Err(err) => {
                    return (
                        None,
                        Capability::new(
                            "smi_count",
                            false,
                            format!(
                                "cannot open {} ({err}): load the msr module and grant read \
                                 access (CAP_SYS_RAWIO; see deploy/systemd/latencyd-forensics.conf)",
                                path.display()
                            ),
                        ),
                    );
                }
            };
            let mut buf = [0u8; 8];
            if let Err(err) = file.read_exact_at(&mut buf, MSR_SMI_COUNT) {
                return (
                    None,
                    Capability::new(
                        "smi_count",
                        false,
                        format!("cannot read MSR 0x34 through {}: {err}", path.display()),
                    ),
                );
            }
            files.push((cpu, file));
        }
        (
            Some(SmiCounters { files }),
            Capability::new(
                "smi_count",
                true,
                "SMI counts from MSR 0x34, read every second and at each capture",
            ),
        )
    }

    /// The SMI count of every CPU (`None` where a read failed).
    pub fn read(&self) -> Vec<(usize, Option<u64>)> {
        self.files
            .iter()
            .map(|(cpu, file)| {
                let mut buf = [0u8; 8];
                let count = file
                    .read_exact_at(&mut buf, MSR_SMI_COUNT)
                    .ok()
                    .map(|_| u64::from_le_bytes(buf) & 0xffff_ffff);
                (*cpu, count)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  539035 285 112617 5479346 5744 0 1261 490 0 0\n\
                        cpu0 278802 129 57196 2731112 3736 0 843 256 0 0\n\
                        cpu1 260233 156 55421 2748234 2007 0 418 234 0 0\n\
                        intr 1 2 3\n";

    #[test]
    fn steal_is_read_per_cpu_in_nanoseconds() {
        assert_eq!(
            parse_steal(STAT),
            vec![(0, 256 * NS_PER_TICK), (1, 234 * NS_PER_TICK)]
        );
        assert!(parse_steal("cpu0 1 2 3\n").is_empty());
    }

    #[test]
    fn steal_around_a_spike_comes_from_the_readings_that_bracket_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stat");
        let mut history = StealHistory::new(&path);
        assert!(!history.capability().available);
        for (t, steal) in [(100, 10), (200, 10), (300, 12), (400, 15)] {
            std::fs::write(&path, format!("cpu1 0 0 0 0 0 0 0 {steal} 0 0\n")).unwrap();
            history.sample(t);
        }
        assert!(history.capability().available);
        assert_eq!(history.between(1, 250, 260), Some(2 * NS_PER_TICK));
        assert_eq!(history.between(1, 200, 400), Some(5 * NS_PER_TICK));
        assert_eq!(history.between(1, 50, 260), None, "no reading before");
        assert_eq!(history.between(1, 250, 500), None, "no reading after yet");
        assert_eq!(history.between(7, 250, 260), None, "no such CPU");
    }

    #[test]
    fn smi_counts_come_from_msr_0x34_of_intel_cpus_only() {
        let dir = tempfile::tempdir().unwrap();
        let (none, cap) = SmiCounters::open(dir.path(), "vendor_id\t: AuthenticAMD\n", &[0]);
        assert!(none.is_none() && !cap.available);
        assert!(cap.detail.contains("not an Intel CPU"), "{}", cap.detail);
        // On Arm the fact that cannot exist is said as such.
        let arm = include_str!("../../tests/data/kernels/6.1-rt-arm64/cpuinfo");
        let (none, cap) = SmiCounters::open(dir.path(), arm, &[0]);
        assert!(none.is_none() && !cap.available);
        assert!(cap.detail.starts_with("SMIs are x86's"), "{}", cap.detail);
        let intel = "vendor_id\t: GenuineIntel\ncpu family\t: 6\nflags\t\t: fpu msr tsc\n";
        let (none, cap) = SmiCounters::open(dir.path(), intel, &[0]);
        assert!(
            none.is_none() && cap.detail.contains("cannot open"),
            "{}",
            cap.detail
        );
        // A file standing for the device: the count at offset 0x34.
        std::fs::create_dir(dir.path().join("0")).unwrap();
        let mut msr = vec![0u8; 0x40];
        msr[0x34..0x3c].copy_from_slice(&0x1_0000_0007u64.to_le_bytes());
        std::fs::write(dir.path().join("0/msr"), &msr).unwrap();
        let (smi, cap) = SmiCounters::open(dir.path(), intel, &[0]);
        assert!(cap.available, "{}", cap.detail);
        assert_eq!(smi.unwrap().read(), vec![(0, Some(7))]);
    }

    #[test]
    fn an_smi_counter_is_expected_as_cyclictest_expects_it() {
        let intel = |family: &str, flags: &str| {
            format!("vendor_id\t: GenuineIntel\ncpu family\t: {family}\nflags\t\t: {flags}\n")
        };
        assert_eq!(smi_counter_expected(&intel("6", "fpu msr tsc")), Ok(()));
        let no_msr = smi_counter_expected(&intel("6", "fpu tsc msr_other")).unwrap_err();
        assert!(no_msr.contains("no 'msr' flag"), "{no_msr}");
        let family = smi_counter_expected(&intel("15", "fpu msr")).unwrap_err();
        assert!(family.contains("family 6"), "{family}");
        let amd = "vendor_id\t: AuthenticAMD\ncpu family\t: 25\nflags\t\t: fpu msr\n";
        assert!(
            smi_counter_expected(amd)
                .unwrap_err()
                .contains("not an Intel CPU")
        );
        let arm = include_str!("../../tests/data/kernels/6.1-rt-arm64/cpuinfo");
        assert!(
            smi_counter_expected(arm)
                .unwrap_err()
                .starts_with("SMIs are x86's")
        );
    }
}
