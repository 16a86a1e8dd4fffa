//! The IRQs that reach the measured CPUs: the default affinity, and each
//! IRQ's name and the CPUs it is delivered to.

use std::fs;

use super::FactReader;
use crate::cpulist::{format_cpu_list, parse_cpu_list};
use crate::host::fingerprint::{Fact, Fingerprint};

impl FactReader {
    /// The default IRQ affinity, and each IRQ whose affinity reaches a
    /// measured CPU: its name, the CPUs it is delivered to and those it
    /// may be.
    pub(super) fn irqs(&self, fp: &mut Fingerprint) {
        fp.insert(
            "irq.default_affinity",
            self.text("proc/irq/default_smp_affinity"),
        );
        let names = fs::read_to_string(self.path("proc/interrupts"))
            .map(|t| irq_names(&t))
            .unwrap_or_default();
        let Ok(dirs) = fs::read_dir(self.path("proc/irq")) else {
            return;
        };
        for dir in dirs.filter_map(Result::ok) {
            let Some(irq) = dir.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let list = |file: &str| {
                fs::read_to_string(dir.path().join(file))
                    .ok()
                    .and_then(|s| parse_cpu_list(&s).ok())
            };
            let allowed = list("smp_affinity_list");
            let effective = list("effective_affinity_list").filter(|l| !l.is_empty());
            let Some(reach) = effective.as_ref().or(allowed.as_ref()) else {
                continue;
            };
            if !reach.iter().any(|cpu| self.cpus.contains(cpu)) {
                continue;
            }
            let name = names
                .iter()
                .find(|(n, _)| *n == irq)
                .map(|(_, s)| s.as_str());
            let mut value = format!(
                "{} on {}",
                name.unwrap_or("(no action)"),
                format_cpu_list(reach)
            );
            if let (Some(_), Some(allowed)) = (&effective, &allowed) {
                value.push_str(&format!(" (allowed {})", format_cpu_list(allowed)));
            }
            fp.insert(format!("irq[{irq}]"), Fact::known(value));
        }
    }
}

/// IRQ numbers and their action names from `/proc/interrupts`: the text
/// after the trigger type (`…-edge`, `…-level`, `…-fasteoi`), else the
/// last word.
fn irq_names(text: &str) -> Vec<(u32, String)> {
    text.lines()
        .filter_map(|line| {
            let (number, rest) = line.trim_start().split_once(':')?;
            let irq = number.parse().ok()?;
            let words: Vec<&str> = rest
                .split_whitespace()
                .skip_while(|w| w.bytes().all(|b| b.is_ascii_digit()))
                .collect();
            let after_type = words
                .iter()
                .position(|w| w.contains("-edge") || w.contains("-level") || w.contains("-fasteoi"))
                .map(|i| words[i + 1..].join(" "))
                .filter(|s| !s.is_empty());
            let name = after_type.or_else(|| words.last().map(|w| w.to_string()))?;
            Some((irq, name))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn irq_names_are_the_actions_after_the_trigger_type() {
        let interrupts = "           CPU0       CPU1\n  \
            0:         10          0   IO-APIC   2-edge      timer\n \
            24:          0        331   PCI-MSI 49152-edge      virtio0-config\n \
            25:          5          6   PCI-MSI 49153-edge      i8042, ehci_hcd:usb1\n\
            NMI:          0          0   Non-maskable interrupts\n";
        assert_eq!(
            irq_names(interrupts),
            vec![
                (0, "timer".to_string()),
                (24, "virtio0-config".to_string()),
                (25, "i8042, ehci_hcd:usb1".to_string())
            ]
        );
    }
}
