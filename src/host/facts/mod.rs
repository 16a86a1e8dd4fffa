//! Reading the fingerprint's facts from procfs and sysfs: cheap reads of
//! small files, done off the samplers (the daemon runs it on tokio's
//! blocking pool; `measure` before its samplers start). What cannot be
//! read is `Fact::Absent` with the reason; nothing is inferred from a
//! missing file but its absence.
//!
//! Every path is taken under a root (`/` on a live host), so tests read
//! a synthetic tree.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::fingerprint::{Fact, Fingerprint};
use crate::cpulist::format_cpu_list;

pub(crate) mod arm;
mod irq;
pub(crate) mod kernel;

pub use kernel::{CMDLINE_PARAMETERS, cmdline_parameter};

/// The PM QoS value that means "no constraint" (`PM_QOS_DEFAULT_VALUE`).
const PM_QOS_NONE: i32 = 2_000_000_000;

/// Reads the facts of one host for a set of CPUs (those measured: per-CPU
/// facts and IRQs are read for them only).
#[derive(Debug)]
pub struct FactReader {
    root: PathBuf,
    cpus: Vec<usize>,
    /// The kernel configuration's hash and preemption model: it cannot
    /// change without a reboot, and decompressing it is the dearest read,
    /// so once.
    kernel_config: Option<kernel::KernelConfig>,
}

impl FactReader {
    pub fn new(root: impl Into<PathBuf>, cpus: &[usize]) -> FactReader {
        FactReader {
            root: root.into(),
            cpus: cpus.to_vec(),
            kernel_config: None,
        }
    }

    /// The live host.
    pub fn live(cpus: &[usize]) -> FactReader {
        FactReader::new("/", cpus)
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// A file's text, trimmed, or absent with the reason (unknown when
    /// the read failed for a reason that is not the file's).
    fn text(&self, rel: &str) -> Fact {
        match read_text(&self.path(rel)) {
            Ok(s) => Fact::known(s.trim()),
            Err(e) => failed(format!("/{rel}"), &e),
        }
    }

    /// Every fact, read now.
    pub fn read(&mut self) -> Fingerprint {
        let mut fp = Fingerprint::default();
        self.kernel(&mut fp);
        self.cpu(&mut fp);
        self.dmi(&mut fp);
        self.idle(&mut fp);
        self.frequency(&mut fp);
        self.pm_qos(&mut fp);
        self.scheduler(&mut fp);
        self.irqs(&mut fp);
        self.platform(&mut fp);
        fp
    }

    fn cpu(&self, fp: &mut Fingerprint) {
        match read_text(&self.path("proc/cpuinfo")) {
            Ok(info) => {
                let field = |name: &str| -> Vec<String> {
                    info.lines()
                        .filter_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            (k.trim() == name).then(|| v.trim().to_string())
                        })
                        .collect()
                };
                let models = field("model name");
                let arm_cores = arm::core_names(&info);
                fp.insert(
                    "cpu.model",
                    match (models.first(), &arm_cores) {
                        // 32-bit Arm's model name is the architecture's
                        // (`ARMv7 Processor rev 0 (v7l)`): the core says more.
                        (Some(model), Some(cores)) if model.starts_with("ARMv") => {
                            Fact::known(cores.clone())
                        }
                        (Some(model), _) => Fact::known(model.clone()),
                        (None, Some(cores)) => Fact::known(cores.clone()),
                        (None, None) => Fact::absent("/proc/cpuinfo has no model name"),
                    },
                );
                let microcode = field("microcode");
                let mut distinct = microcode.clone();
                distinct.sort();
                distinct.dedup();
                fp.insert(
                    "cpu.microcode",
                    match distinct.len() {
                        // Arm cores have no loadable microcode: their
                        // revision is part of cpu.model (rNpN).
                        0 if arm_cores.is_some() => {
                            Fact::known("none (Arm cores have no loadable microcode)")
                        }
                        0 => Fact::absent("/proc/cpuinfo has no microcode line"),
                        1 => Fact::known(distinct[0].clone()),
                        // Mixed revisions (a late load that did not reach
                        // every CPU): each CPU's.
                        _ => Fact::known(
                            microcode
                                .iter()
                                .enumerate()
                                .map(|(i, m)| format!("cpu{i} {m}"))
                                .collect::<Vec<_>>()
                                .join(", "),
                        ),
                    },
                );
                let flags = field("flags");
                let hypervisor = flags
                    .first()
                    .is_some_and(|f| f.split(' ').any(|w| w == "hypervisor"));
                fp.insert("virt.hypervisor", self.hypervisor(hypervisor));
            }
            Err(e) => {
                for name in ["cpu.model", "cpu.microcode", "virt.hypervisor"] {
                    fp.insert(name, failed("/proc/cpuinfo".to_string(), &e));
                }
            }
        }
        fp.insert("cpu.smt", self.text("sys/devices/system/cpu/smt/control"));
        fp.insert("cpus.online", self.text("sys/devices/system/cpu/online"));
        fp.insert(
            "cpus.isolated",
            self.text("sys/devices/system/cpu/isolated"),
        );
        fp.insert(
            "cpus.nohz_full",
            self.text("sys/devices/system/cpu/nohz_full"),
        );
        fp.insert("cpus.measured", Fact::known(format_cpu_list(&self.cpus)));
    }

    fn hypervisor(&self, flag: bool) -> Fact {
        if !flag {
            return Fact::known("none (no hypervisor flag in /proc/cpuinfo)");
        }
        if let Some(kind) = self.text("sys/hypervisor/type").value() {
            return Fact::known(kind.to_string());
        }
        let vendor = self.text("sys/class/dmi/id/sys_vendor");
        let product = self.text("sys/class/dmi/id/product_name");
        match (vendor.value(), product.value()) {
            (Some(v), Some(p)) => Fact::known(format!("{v} {p}")),
            (Some(v), None) => Fact::known(v.to_string()),
            _ => Fact::known("present (its vendor is not readable: no DMI, no /sys/hypervisor)"),
        }
    }

    fn dmi(&self, fp: &mut Fingerprint) {
        for (name, file) in [
            ("dmi.bios_vendor", "bios_vendor"),
            ("dmi.bios_version", "bios_version"),
            ("dmi.bios_date", "bios_date"),
            ("dmi.system", "product_name"),
        ] {
            fp.insert(name, self.text(&format!("sys/class/dmi/id/{file}")));
        }
        // Boards without DMI (most arm64 ones) name themselves in the
        // device tree.
        if fp.value("dmi.system").is_none()
            && let Ok(model) = fs::read(self.path("proc/device-tree/model"))
            && let Some(board) = arm::board_model(&model)
        {
            fp.insert("dmi.system", Fact::known(board));
        }
    }

    fn idle(&self, fp: &mut Fingerprint) {
        fp.insert(
            "cpuidle.driver",
            self.text("sys/devices/system/cpu/cpuidle/current_driver"),
        );
        let governor = match self.text("sys/devices/system/cpu/cpuidle/current_governor") {
            Fact::Absent(_) => self.text("sys/devices/system/cpu/cpuidle/current_governor_ro"),
            known => known,
        };
        fp.insert("cpuidle.governor", governor);
        for &cpu in &self.cpus {
            fp.insert(format!("cpuidle.states[cpu{cpu}]"), self.idle_states(cpu));
            fp.insert(
                format!("pm_qos.resume_latency_us[cpu{cpu}]"),
                self.text(&format!(
                    "sys/devices/system/cpu/cpu{cpu}/power/pm_qos_resume_latency_us"
                )),
            );
        }
    }

    /// `NAME LATENCYus` of each enabled idle state, shallowest first.
    fn idle_states(&self, cpu: usize) -> Fact {
        let dir = format!("sys/devices/system/cpu/cpu{cpu}/cpuidle");
        let mut states: Vec<(usize, String)> = match fs::read_dir(self.path(&dir)) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .filter_map(|e| {
                    let name = e.file_name().to_str()?.to_string();
                    let index = name.strip_prefix("state")?.parse().ok()?;
                    Some((index, name))
                })
                .collect(),
            Err(e) => return failed(format!("/{dir}"), &e),
        };
        states.sort();
        let enabled: Vec<String> = states
            .iter()
            .filter(|(_, s)| self.text(&format!("{dir}/{s}/disable")).value() != Some("1"))
            .map(|(_, s)| {
                let name = self.text(&format!("{dir}/{s}/name"));
                let latency = self.text(&format!("{dir}/{s}/latency"));
                format!("{} {}us", name.or_unknown(), latency.or_unknown())
            })
            .collect();
        Fact::known(if enabled.is_empty() {
            "none enabled".to_string()
        } else {
            enabled.join(", ")
        })
    }

    fn frequency(&self, fp: &mut Fingerprint) {
        let Some(&first) = self.cpus.first() else {
            return;
        };
        let base = |cpu: usize| format!("sys/devices/system/cpu/cpu{cpu}/cpufreq");
        if !self.path(&base(first)).exists() {
            let why = format!("no cpufreq driver (no /{})", base(first));
            fp.insert("cpufreq.driver", Fact::absent(why.clone()));
            for &cpu in &self.cpus {
                fp.insert(
                    format!("cpufreq.policy[cpu{cpu}]"),
                    Fact::absent(why.clone()),
                );
            }
            return;
        }
        fp.insert(
            "cpufreq.driver",
            self.text(&format!("{}/scaling_driver", base(first))),
        );
        for &cpu in &self.cpus {
            let dir = base(cpu);
            let governor = self.text(&format!("{dir}/scaling_governor"));
            let min = self.text(&format!("{dir}/scaling_min_freq"));
            let max = self.text(&format!("{dir}/scaling_max_freq"));
            let fact = match (governor.value(), min.value(), max.value()) {
                (Some(g), Some(lo), Some(hi)) => Fact::known(format!("{g} {lo}-{hi} kHz")),
                _ => governor,
            };
            fp.insert(format!("cpufreq.policy[cpu{cpu}]"), fact);
        }
    }

    /// The CPU latency constraint in force (reading the device gives the
    /// aggregate of all holders) and, when there is one, who holds it.
    fn pm_qos(&self, fp: &mut Fingerprint) {
        let mut value = [0u8; 4];
        let read = fs::File::open(self.path("dev/cpu_dma_latency"))
            .and_then(|mut f| f.read_exact(&mut value));
        let constraint = match read {
            Ok(()) => Some(i32::from_ne_bytes(value)),
            Err(e) => {
                fp.insert(
                    "pm_qos.cpu_dma_latency_us",
                    failed("/dev/cpu_dma_latency".to_string(), &e),
                );
                None
            }
        };
        if let Some(v) = constraint {
            fp.insert(
                "pm_qos.cpu_dma_latency_us",
                Fact::known(if v >= PM_QOS_NONE {
                    "none".to_string()
                } else {
                    v.to_string()
                }),
            );
        }
        // Scanning every process's descriptors costs a read per open
        // file of the host: only when there is a constraint to explain.
        if constraint.is_some_and(|v| v < PM_QOS_NONE) {
            fp.insert("pm_qos.holders", self.pm_qos_holders());
        }
    }

    fn pm_qos_holders(&self) -> Fact {
        let proc_dir = self.path("proc");
        let Ok(pids) = fs::read_dir(&proc_dir) else {
            return Fact::absent("/proc is not readable");
        };
        let mut holders = Vec::new();
        let mut unreadable = 0;
        for pid in pids.filter_map(Result::ok) {
            let Some(pid) = pid.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(fds) = fs::read_dir(proc_dir.join(format!("{pid}/fd"))) else {
                unreadable += 1;
                continue;
            };
            let holds = fds.filter_map(Result::ok).any(|fd| {
                fs::read_link(fd.path())
                    .is_ok_and(|target| target == Path::new("/dev/cpu_dma_latency"))
            });
            if holds {
                let comm = fs::read_to_string(proc_dir.join(format!("{pid}/comm")))
                    .map(|s| s.trim().to_string())
                    .unwrap_or_else(|_| "?".to_string());
                holders.push((pid, comm));
            }
        }
        holders.sort();
        let mut text: Vec<String> = holders.iter().map(|(p, c)| format!("{c}({p})")).collect();
        if unreadable > 0 {
            text.push(format!("{unreadable} process(es) not readable"));
        }
        Fact::known(if text.is_empty() {
            "none found".to_string()
        } else {
            text.join(", ")
        })
    }

    fn scheduler(&self, fp: &mut Fingerprint) {
        for (name, file) in [
            ("sched.rt_runtime_us", "proc/sys/kernel/sched_rt_runtime_us"),
            ("sched.rt_period_us", "proc/sys/kernel/sched_rt_period_us"),
            ("kernel.timer_migration", "proc/sys/kernel/timer_migration"),
            ("kernel.nmi_watchdog", "proc/sys/kernel/nmi_watchdog"),
            ("workqueue.cpumask", "sys/devices/virtual/workqueue/cpumask"),
        ] {
            fp.insert(name, self.text(file));
        }
        let thp = self.text("sys/kernel/mm/transparent_hugepage/enabled");
        let thp = match thp.value().map(selected_word) {
            Some(Some(mode)) => Fact::known(mode),
            Some(None) => Fact::absent("transparent_hugepage/enabled names no mode in brackets"),
            None => thp,
        };
        fp.insert("mm.transparent_hugepage", thp);
    }

    fn platform(&self, fp: &mut Fingerprint) {
        fp.insert(
            "tuned.profile",
            match read_text(&self.path("etc/tuned/active_profile")) {
                Ok(p) => Fact::known(p.trim()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    Fact::absent("tuned is not installed (no /etc/tuned/active_profile)")
                }
                Err(e) => failed("/etc/tuned/active_profile".to_string(), &e),
            },
        );
        let steal = read_text(&self.path("proc/stat")).ok().and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("cpu "))?;
            line.split_whitespace().nth(8)?.parse::<u64>().ok()
        });
        fp.insert(
            "virt.steal",
            match steal {
                Some(0) => Fact::known("zero since boot"),
                Some(_) => Fact::known("reported"),
                None => Fact::absent("/proc/stat has no steal column"),
            },
        );
    }
}

/// The word in brackets: `always [madvise] never` → `madvise`;
/// `none voluntary (full)` → `full`.
fn selected_word(text: &str) -> Option<String> {
    text.split_whitespace().find_map(|w| {
        w.strip_prefix('[')
            .and_then(|w| w.strip_suffix(']'))
            .or_else(|| w.strip_prefix('(').and_then(|w| w.strip_suffix(')')))
            .map(str::to_string)
    })
}

/// The most of one procfs or sysfs file a fact is read from: `/proc/cpuinfo`
/// of a 256-CPU machine is about 400 KB, `/proc/interrupts` less.
const MAX_FACT_FILE_BYTES: u64 = 4 << 20;

/// A procfs or sysfs file's text, read up to `MAX_FACT_FILE_BYTES`.
fn read_text(path: &Path) -> std::io::Result<String> {
    let mut text = String::new();
    fs::File::open(path)?
        .take(MAX_FACT_FILE_BYTES)
        .read_to_string(&mut text)?;
    Ok(text)
}

/// The fact of a failed read of `what`: unknown when the failure is the
/// process's or a passing one (too many open files, say), else absent.
fn failed(what: String, e: &std::io::Error) -> Fact {
    if crate::rt::sys::is_passing_error(e) {
        Fact::unreadable(format!("{what}: {e}"))
    } else {
        Fact::absent(format!("{what}: {}", reason(e)))
    }
}

fn reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "not present".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => e.to_string(),
    }
}

/// A host's procfs and sysfs files under a temporary directory, removed
/// when dropped, for the readers' tests.
#[cfg(test)]
pub(super) struct SyntheticRoot(pub PathBuf);

#[cfg(test)]
impl SyntheticRoot {
    pub(super) fn new(name: &str) -> SyntheticRoot {
        let root = std::env::temp_dir().join(format!("latencyd-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        SyntheticRoot(root)
    }

    /// Writes `text` to `rel` under the root, making its directories.
    pub(super) fn put(&self, rel: &str, text: &str) {
        let path = self.0.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
}

#[cfg(test)]
impl Drop for SyntheticRoot {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bracketed_choices_are_read() {
        assert_eq!(
            selected_word("always [madvise] never").as_deref(),
            Some("madvise")
        );
        assert_eq!(
            selected_word("none voluntary (full) lazy").as_deref(),
            Some("full")
        );
        assert_eq!(selected_word("never"), None);
    }

    #[test]
    fn an_arm64_host_names_its_cores_and_board_and_says_it_has_no_microcode() {
        // /proc/cpuinfo of Debian's 6.1 arm64 kernel on QEMU's Cortex-A72
        // (kernel matrix), and QEMU virt's device-tree model.
        let host = SyntheticRoot::new("arm64");
        host.put(
            "proc/cpuinfo",
            include_str!("../../../tests/data/kernels/6.1-rt-arm64/cpuinfo"),
        );
        host.put("proc/device-tree/model", "linux,dummy-virt\0");
        let fp = FactReader::new(&host.0, &[0]).read();
        assert_eq!(
            fp.value("cpu.model"),
            Some("Arm Cortex-A72 r0p3 (0x41/0xd08)")
        );
        assert_eq!(
            fp.value("cpu.microcode"),
            Some("none (Arm cores have no loadable microcode)")
        );
        assert_eq!(fp.value("dmi.system"), Some("linux,dummy-virt"));
    }

    #[test]
    fn a_32_bit_arm_host_names_its_core_not_the_architecture() {
        // /proc/cpuinfo of Debian's 6.1 armmp PREEMPT_RT kernel on QEMU's
        // Cortex-A15 (kernel matrix): "model name" is ARMv7's.
        let host = SyntheticRoot::new("armhf");
        host.put(
            "proc/cpuinfo",
            include_str!("../../../tests/data/kernels/6.1-rt-armmp/cpuinfo"),
        );
        let fp = FactReader::new(&host.0, &[0]).read();
        assert_eq!(
            fp.value("cpu.model"),
            Some("Arm Cortex-A15 r4p0 (0x41/0xc0f)")
        );
    }

    #[test]
    fn a_synthetic_host_reads_as_written_and_absent_facts_say_why() {
        let host = SyntheticRoot::new("facts");
        let (root, put) = (&host.0, |rel: &str, text: &str| host.put(rel, text));
        put("proc/sys/kernel/osrelease", "6.12.0-rt7\n");
        put("proc/sys/kernel/version", "#1 SMP PREEMPT_RT Tue\n");
        put("proc/cmdline", "quiet isolcpus=1 processor.max_cstate=1\n");
        put(
            "proc/cpuinfo",
            "processor\t: 0\nmodel name\t: Test CPU\nmicrocode\t: 0xa\nflags\t\t: fpu\n\n\
             processor\t: 1\nmodel name\t: Test CPU\nmicrocode\t: 0xb\nflags\t\t: fpu\n",
        );
        put("boot/config-6.12.0-rt7", "CONFIG_PREEMPT_RT=y\n");
        let idle = "sys/devices/system/cpu/cpu1/cpuidle";
        put(&format!("{idle}/state0/name"), "POLL\n");
        put(&format!("{idle}/state0/latency"), "0\n");
        put(&format!("{idle}/state0/disable"), "0\n");
        put(&format!("{idle}/state1/name"), "C1\n");
        put(&format!("{idle}/state1/latency"), "2\n");
        put(&format!("{idle}/state1/disable"), "0\n");
        put(
            "sys/kernel/mm/transparent_hugepage/enabled",
            "[always] madvise never\n",
        );
        put(
            "proc/interrupts",
            "  CPU0 CPU1\n 24: 1 2 PCI-MSI 1-edge virtio0\n 25: 1 2 PCI-MSI 2-edge eth0\n",
        );
        put("proc/irq/24/smp_affinity_list", "0-1\n");
        put("proc/irq/24/effective_affinity_list", "1\n");
        put("proc/irq/25/smp_affinity_list", "0\n");
        put("dev/cpu_dma_latency", "");
        fs::write(
            root.join("dev/cpu_dma_latency"),
            2_000_000_000i32.to_ne_bytes(),
        )
        .unwrap();

        let mut reader = FactReader::new(root, &[1]);
        let fp = reader.read();
        assert_eq!(fp.value("kernel.release"), Some("6.12.0-rt7"));
        assert_eq!(fp.value("kernel.preempt"), Some("rt"));
        assert_eq!(fp.value("kernel.cmdline.isolcpus"), Some("1"));
        assert_eq!(fp.value("kernel.cmdline.processor.max_cstate"), Some("1"));
        assert_eq!(fp.value("kernel.cmdline.nohz_full"), Some("(not set)"));
        assert_eq!(fp.value("kernel.config_sha256").map(str::len), Some(16));
        assert_eq!(fp.value("cpu.microcode"), Some("cpu0 0xa, cpu1 0xb"));
        assert_eq!(
            fp.value("virt.hypervisor"),
            Some("none (no hypervisor flag in /proc/cpuinfo)")
        );
        assert_eq!(fp.value("cpuidle.states[cpu1]"), Some("POLL 0us, C1 2us"));
        assert_eq!(fp.value("mm.transparent_hugepage"), Some("always"));
        assert_eq!(fp.value("pm_qos.cpu_dma_latency_us"), Some("none"));
        assert_eq!(fp.get("pm_qos.holders"), None, "no constraint, no scan");
        assert_eq!(fp.value("irq[24]"), Some("virtio0 on 1 (allowed 0-1)"));
        assert_eq!(fp.get("irq[25]"), None, "IRQ 25 does not reach CPU 1");
        assert_eq!(
            fp.get("dmi.bios_version"),
            Some(&Fact::absent("/sys/class/dmi/id/bios_version: not present"))
        );
        assert!(matches!(fp.get("cpufreq.driver"), Some(Fact::Absent(_))));
        let before = fp.id();

        // A state disabled at runtime is a change of that CPU's fact.
        put(&format!("{idle}/state1/disable"), "1\n");
        put("proc/irq/24/effective_affinity_list", "0\n");
        let after = reader.read();
        assert_ne!(after.id(), before);
        let changed: Vec<String> = after
            .changes_since(&fp)
            .iter()
            .map(|c| c.name.clone())
            .collect();
        assert_eq!(changed, ["cpuidle.states[cpu1]", "irq[24]"]);
    }

    #[test]
    fn this_host_reads_without_failing() {
        let fp = FactReader::live(&[0]).read();
        assert!(fp.value("kernel.release").is_some());
        assert!(fp.get("cpuidle.states[cpu0]").is_some());
        assert!(fp.get("pm_qos.cpu_dma_latency_us").is_some());
    }
}
