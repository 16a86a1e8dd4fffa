//! The kernel's facts: release, version, preemption model, the hash of
//! its configuration, its command line and the parameters in it that
//! decide latency.

use std::fs;
use std::io::Read;

use flate2::read::GzDecoder;
use sha2::{Digest, Sha256};

use super::{FactReader, reason, selected_word};
use crate::host::fingerprint::{Fact, Fingerprint};

/// Kernel command-line parameters that decide latency, read out of the
/// command line one by one (a flag such as `threadirqs` reads `set`).
pub const CMDLINE_PARAMETERS: &[&str] = &[
    "isolcpus",
    "nohz_full",
    "nohz",
    "rcu_nocbs",
    "rcu_nocb_poll",
    "irqaffinity",
    "idle",
    "processor.max_cstate",
    "intel_idle.max_cstate",
    "intel_pstate",
    "amd_pstate",
    "cpufreq.default_governor",
    "mitigations",
    "threadirqs",
    "preempt",
    "nosmt",
    "skew_tick",
    "tsc",
    "nosoftlockup",
    "nmi_watchdog",
];

impl FactReader {
    pub(super) fn kernel(&mut self, fp: &mut Fingerprint) {
        fp.insert("kernel.release", self.text("proc/sys/kernel/osrelease"));
        fp.insert("kernel.version", self.text("proc/sys/kernel/version"));
        let cmdline = self.text("proc/cmdline");
        let config = match &self.kernel_config {
            Some(config) => config.clone(),
            None => {
                let config = self.kernel_config();
                self.kernel_config = Some(config.clone());
                config
            }
        };
        fp.insert("kernel.config_sha256", config.sha256);
        let preempt = if cmdline.is_unreadable() {
            cmdline.clone()
        } else {
            self.preempt(cmdline.value(), config.default_preempt)
        };
        fp.insert("kernel.preempt", preempt);
        match cmdline.value() {
            Some(line) => {
                for name in CMDLINE_PARAMETERS {
                    let value = cmdline_parameter(line, name).unwrap_or("(not set)");
                    fp.insert(format!("kernel.cmdline.{name}"), Fact::known(value));
                }
            }
            None => {
                for name in CMDLINE_PARAMETERS {
                    fp.insert(format!("kernel.cmdline.{name}"), cmdline.clone());
                }
            }
        }
        fp.insert("kernel.cmdline", cmdline);
    }

    /// The kernel's configuration, from `/proc/config.gz` or
    /// `/boot/config-RELEASE`: read and decompressed once, since it cannot
    /// change without a reboot and is the dearest read (a quarter of a
    /// re-read's CPU time on a 2-vCPU VM when it was read every time).
    fn kernel_config(&self) -> KernelConfig {
        let hash = |bytes: &[u8]| {
            let d = Sha256::digest(bytes);
            d[..8]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        };
        let of = |bytes: &[u8]| KernelConfig {
            sha256: Fact::known(hash(bytes)),
            default_preempt: default_preempt(&String::from_utf8_lossy(bytes)),
        };
        let mut text = Vec::new();
        if let Ok(file) = fs::File::open(self.path("proc/config.gz"))
            && GzDecoder::new(file).read_to_end(&mut text).is_ok()
        {
            return of(&text);
        }
        let release = self.text("proc/sys/kernel/osrelease");
        let Some(release) = release.value() else {
            return KernelConfig::absent("no /proc/config.gz and the release is unknown");
        };
        match fs::read(self.path(&format!("boot/config-{release}"))) {
            Ok(bytes) => of(&bytes),
            Err(e) => KernelConfig::absent(format!(
                "no /proc/config.gz, /boot/config-{release}: {}",
                reason(&e)
            )),
        }
    }

    /// The preemption model in force: `rt` on a PREEMPT_RT kernel (with
    /// the dynamic model beside it where debugfs shows one: 6.12's RT
    /// kernels choose between `full` and `lazy`), else the scheduler's own
    /// word where debugfs shows it, else what the kernel is built and
    /// booted with.
    fn preempt(&self, cmdline: Option<&str>, default_preempt: Option<&'static str>) -> Fact {
        let debugfs = self.text("sys/kernel/debug/sched/preempt");
        let version = self.text("proc/sys/kernel/version");
        let realtime = self.text("sys/kernel/realtime");
        // Derived from three reads: one that failed for want of a file
        // descriptor (say) leaves the model unknown, not another model.
        if let Some(unread) = [&debugfs, &version, &realtime]
            .into_iter()
            .find(|f| f.is_unreadable())
        {
            return unread.clone();
        }
        let dynamic = debugfs.value().and_then(selected_word);
        let version = version.value().unwrap_or("");
        let rt = realtime.value() == Some("1") || version.contains("PREEMPT_RT");
        match (rt, dynamic) {
            (true, Some(mode)) => return Fact::known(format!("rt ({mode})")),
            (true, None) => return Fact::known("rt"),
            (false, Some(mode)) => return Fact::known(mode),
            (false, None) => {}
        }
        if !version.contains("PREEMPT_DYNAMIC") {
            // Built with one model: the version string names full
            // preemption only; the configuration tells none from voluntary.
            if version.contains("PREEMPT ") {
                return Fact::known("full");
            }
            return match default_preempt {
                Some(mode) => Fact::known(mode),
                None => Fact::absent(
                    "not PREEMPT or PREEMPT_RT, and no readable configuration says none or \
                     voluntary",
                ),
            };
        }
        if let Some(mode) = cmdline.and_then(|c| cmdline_parameter(c, "preempt")) {
            return Fact::known(format!("{mode} (dynamic, from preempt=)"));
        }
        match default_preempt {
            Some(mode) => Fact::known(format!("{mode} (dynamic, the build's default)")),
            None => Fact::absent(
                "PREEMPT_DYNAMIC, and neither debugfs sched/preempt nor the kernel configuration \
                 is readable",
            ),
        }
    }
}

/// The kernel configuration, as far as the fingerprint uses it.
#[derive(Debug, Clone)]
pub(super) struct KernelConfig {
    /// 16 hex digits of its SHA-256, or why it could not be read.
    sha256: Fact,
    /// The preemption model it selects (a PREEMPT_DYNAMIC build's default).
    default_preempt: Option<&'static str>,
}

impl KernelConfig {
    fn absent(why: impl Into<String>) -> KernelConfig {
        KernelConfig {
            sha256: Fact::absent(why),
            default_preempt: None,
        }
    }
}

/// The preemption model a kernel configuration selects.
fn default_preempt(config: &str) -> Option<&'static str> {
    [
        ("CONFIG_PREEMPT_RT=y", "rt"),
        ("CONFIG_PREEMPT_LAZY=y", "lazy"),
        ("CONFIG_PREEMPT=y", "full"),
        ("CONFIG_PREEMPT_VOLUNTARY=y", "voluntary"),
        ("CONFIG_PREEMPT_NONE=y", "none"),
    ]
    .into_iter()
    .find(|(line, _)| config.lines().any(|l| l == *line))
    .map(|(_, mode)| mode)
}

/// The value of `name=` on a kernel command line (`set` for a bare
/// flag), the last one winning as in the kernel; arguments after `--`
/// are init's.
pub fn cmdline_parameter<'a>(cmdline: &'a str, name: &str) -> Option<&'a str> {
    let mut found = None;
    for word in cmdline.split_whitespace() {
        if word == "--" {
            break;
        }
        match word.split_once('=') {
            Some((key, value)) if key == name => found = Some(value.trim_matches('"')),
            None if word == name => found = Some("set"),
            _ => {}
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_parameters_are_read_as_the_kernel_reads_them() {
        let line = "BOOT_IMAGE=/vmlinuz isolcpus=2-3 threadirqs isolcpus=managed_irq,2-3 \
                    mitigations=off -- isolcpus=9 nosmt";
        assert_eq!(cmdline_parameter(line, "isolcpus"), Some("managed_irq,2-3"));
        assert_eq!(cmdline_parameter(line, "threadirqs"), Some("set"));
        assert_eq!(cmdline_parameter(line, "mitigations"), Some("off"));
        assert_eq!(cmdline_parameter(line, "nosmt"), None, "init's argument");
        assert_eq!(cmdline_parameter(line, "nohz_full"), None);
    }

    #[test]
    fn a_preempt_rt_kernel_is_rt_whatever_its_dynamic_model() {
        // Debian's 6.12 PREEMPT_RT kernel (kernel matrix): debugfs offers
        // a dynamic model beside RT, and its selected word is not "rt".
        let host = super::super::SyntheticRoot::new("rt-dynamic");
        let (root, put) = (&host.0, |rel: &str, text: &str| host.put(rel, text));
        put("proc/sys/kernel/osrelease", "6.12.117+deb13-rt-amd64\n");
        put(
            "proc/sys/kernel/version",
            "#1 SMP PREEMPT_RT Debian 6.12.117-1\n",
        );
        put("sys/kernel/realtime", "1\n");
        put(
            "sys/kernel/debug/sched/preempt",
            include_str!("../../../tests/data/kernels/6.12-rt-amd64/sched-preempt"),
        );
        let fp = FactReader::new(root, &[0]).read();
        let preempt = fp.value("kernel.preempt").unwrap();
        assert!(preempt.starts_with("rt ("), "{preempt}");
        // The same debugfs file on a kernel that is not RT: its word.
        put("sys/kernel/realtime", "0\n");
        put("proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC\n");
        let fp = FactReader::new(root, &[0]).read();
        assert_eq!(
            Some(preempt.trim_start_matches("rt (").trim_end_matches(')')),
            fp.value("kernel.preempt")
        );
    }

    #[test]
    fn a_dynamic_kernels_default_model_comes_from_its_configuration_read_once() {
        let host = super::super::SyntheticRoot::new("kernel");
        let (root, put) = (&host.0, |rel: &str, text: &str| host.put(rel, text));
        put("proc/sys/kernel/osrelease", "6.18.0\n");
        put("proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC Tue\n");
        put("proc/cmdline", "quiet\n");
        put(
            "boot/config-6.18.0",
            "CONFIG_PREEMPT_BUILD=y\nCONFIG_PREEMPT_VOLUNTARY=y\nCONFIG_PREEMPT_DYNAMIC=y\n",
        );
        let mut reader = FactReader::new(root, &[0]);
        let first = reader.read();
        assert_eq!(
            first.value("kernel.preempt"),
            Some("voluntary (dynamic, the build's default)")
        );
        // The configuration cannot change without a reboot: a re-read
        // neither decompresses nor even opens it again.
        fs::remove_file(root.join("boot/config-6.18.0")).unwrap();
        put("proc/cmdline", "quiet preempt=full\n");
        let second = reader.read();
        assert_eq!(
            second.value("kernel.config_sha256"),
            first.value("kernel.config_sha256")
        );
        assert_eq!(
            second.value("kernel.preempt"),
            Some("full (dynamic, from preempt=)")
        );
        put("proc/cmdline", "quiet\n");
        assert_eq!(
            reader.read().value("kernel.preempt"),
            Some("voluntary (dynamic, the build's default)")
        );
        // A new reader (a restart) that finds no configuration says so.
        let fresh = FactReader::new(root, &[0]).read();
        assert!(matches!(fresh.get("kernel.preempt"), Some(Fact::Absent(_))));
        assert!(matches!(
            fresh.get("kernel.config_sha256"),
            Some(Fact::Absent(_))
        ));
        fs::remove_dir_all(root).unwrap();
    }
}
