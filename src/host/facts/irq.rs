//! The IRQs that reach the measured CPUs: the default affinity, and each
//! IRQ's name and the CPUs it is delivered to.

use std::fs;

use super::FactReader;
use crate::cpulist::{format_cpu_list, parse_cpu_list};
use crate::host::fingerprint::{Fact, Fingerprint, whole_family};
use crate::rt::sys::is_passing_error;

impl FactReader {
    /// The default IRQ affinity, and each IRQ whose affinity reaches a
    /// measured CPU: its name, the CPUs it is delivered to and those it
    /// may be.
    pub(super) fn irqs(&self, fp: &mut Fingerprint) {
        fp.insert(
            "irq.default_affinity",
            self.text("proc/irq/default_smp_affinity"),
        );
        // The IRQs' values name their actions: without /proc/interrupts, or
        // without the list of IRQs, none can be said, and none has gone.
        let whole = whole_family("irq");
        let names = match super::read_text(&self.path("proc/interrupts")) {
            Ok(text) => irq_names(&text),
            Err(e) if is_passing_error(&e) => {
                fp.insert(whole, super::failed("/proc/interrupts".to_string(), &e));
                return;
            }
            Err(_) => Vec::new(),
        };
        let dirs = match fs::read_dir(self.path("proc/irq")) {
            Ok(dirs) => dirs,
            Err(e) => {
                if is_passing_error(&e) {
                    fp.insert(whole, super::failed("/proc/irq".to_string(), &e));
                }
                return;
            }
        };
        for dir in dirs.filter_map(Result::ok) {
            let Some(irq) = dir.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let mut unreadable = None;
            let mut list = |file: &str| match super::read_text(&dir.path().join(file)) {
                Ok(text) => parse_cpu_list(&text).ok(),
                Err(e) => {
                    if is_passing_error(&e) {
                        unreadable = Some(e);
                    }
                    None
                }
            };
            let allowed = list("smp_affinity_list");
            let effective = list("effective_affinity_list").filter(|l| !l.is_empty());
            if let Some(e) = unreadable {
                let path = format!("/proc/irq/{irq}");
                fp.insert(format!("irq[{irq}]"), super::failed(path, &e));
                continue;
            }
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
