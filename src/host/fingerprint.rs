//! The host's fingerprint: the facts that decide its latency, by name,
//! each known or absent with the reason, and one short identifier over
//! them. Two reads of an unchanged host give the same identifier; the
//! difference between two fingerprints is a list of facts with their old
//! and new values.
//!
//! Fact names are dotted (`kernel.release`, `cpuidle.governor`); a fact
//! that exists once per CPU or per IRQ carries the instance in brackets
//! (`cpuidle.states[cpu1]`, `irq[24]`). The part before the bracket is the
//! fact's family, which metrics use as a bounded label.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

/// One fact: its value, or why it could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fact {
    Known(String),
    Absent(String),
    /// Could not be read this time, for a reason that says nothing of the
    /// host (too many open files, no memory, an I/O error): unknown, not
    /// absent. It never counts as a change and never enters the
    /// identifier; the daemon keeps the fact's last known value
    /// (`Fingerprint::carry_over`) and says which could not be read.
    Unreadable(String),
}

impl Fact {
    pub fn known(value: impl Into<String>) -> Fact {
        Fact::Known(value.into())
    }

    pub fn absent(reason: impl Into<String>) -> Fact {
        Fact::Absent(reason.into())
    }

    pub fn unreadable(reason: impl Into<String>) -> Fact {
        Fact::Unreadable(reason.into())
    }

    pub fn value(&self) -> Option<&str> {
        match self {
            Fact::Known(v) => Some(v),
            Fact::Absent(_) | Fact::Unreadable(_) => None,
        }
    }

    pub fn is_unreadable(&self) -> bool {
        matches!(self, Fact::Unreadable(_))
    }

    /// The value, or `unknown`, for a label or a log line.
    pub fn or_unknown(&self) -> &str {
        self.value().unwrap_or("unknown")
    }

    /// For people: the value, or `absent (reason)`.
    pub fn describe(&self) -> String {
        match self {
            Fact::Known(v) if v.is_empty() => "\"\"".to_string(),
            Fact::Known(v) => v.clone(),
            Fact::Absent(why) => format!("absent ({why})"),
            Fact::Unreadable(why) => format!("unknown (could not be read: {why})"),
        }
    }
}

/// The name that stands for every fact of a family that could not be
/// listed at all (`irq[*]`: `/proc/irq` or `/proc/interrupts` unreadable).
pub fn whole_family(family: &str) -> String {
    format!("{family}[*]")
}

/// Facts that are true but change without the configuration changing:
/// shown with the others, left out of the identifier and of the changes.
/// The PM QoS holders are process ids (a holder that restarts is a new
/// pid, its constraint the same, and that is `pm_qos.cpu_dma_latency_us`);
/// steal time turns from zero to non-zero once, under any configuration.
pub const VOLATILE: &[&str] = &["pm_qos.holders", "virt.steal"];

/// Whether a fact's value follows which CPUs are online rather than how
/// the host is configured: the online list itself, a CPU's own facts
/// (`…[cpuN]`, absent while it is offline) and the IRQs' delivery lists
/// (the kernel moves them off a CPU that leaves).
pub fn follows_online(name: &str) -> bool {
    name == "cpus.online" || family(name) == "irq" || name.ends_with(']') && name.contains("[cpu")
}

/// The family of a fact: its name without the `[instance]`.
pub fn family(name: &str) -> &str {
    name.split_once('[').map_or(name, |(family, _)| family)
}

fn is_volatile(name: &str) -> bool {
    VOLATILE.contains(&family(name))
}

/// Every fact read at one time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fingerprint {
    pub facts: BTreeMap<String, Fact>,
}

/// One fact that differs between two fingerprints (`None`: not there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactChange {
    pub name: String,
    pub from: Option<Fact>,
    pub to: Option<Fact>,
}

impl FactChange {
    /// `name: old → new`, for logs and reports.
    pub fn describe(&self) -> String {
        let side = |f: &Option<Fact>| f.as_ref().map_or("(none)".to_string(), Fact::describe);
        format!("{}: {} → {}", self.name, side(&self.from), side(&self.to))
    }
}

impl Fingerprint {
    pub fn insert(&mut self, name: impl Into<String>, fact: Fact) {
        self.facts.insert(name.into(), fact);
    }

    pub fn get(&self, name: &str) -> Option<&Fact> {
        self.facts.get(name)
    }

    /// The value of a known fact.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.facts.get(name).and_then(Fact::value)
    }

    /// The identifier: the first 12 hex digits of SHA-256 over
    /// `name=value` lines of the non-volatile facts in name order (an
    /// absent fact counts as `name=(absent)`, whatever its reason, so a
    /// reworded error does not make a new configuration).
    pub fn id(&self) -> String {
        let mut hash = Sha256::new();
        for (name, fact) in &self.facts {
            if is_volatile(name) || fact.is_unreadable() {
                continue;
            }
            hash.update(name.as_bytes());
            hash.update(b"=");
            hash.update(fact.value().unwrap_or("(absent)").as_bytes());
            hash.update(b"\n");
        }
        let digest = hash.finalize();
        digest[..6].iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The non-volatile facts that differ from `before`, in name order.
    /// An absent fact whose reason changed has not changed; a fact that
    /// could not be read on either side (or whose whole family could not)
    /// is not a change.
    pub fn changes_since(&self, before: &Fingerprint) -> Vec<FactChange> {
        let mut names: Vec<&String> = self.facts.keys().chain(before.facts.keys()).collect();
        names.sort();
        names.dedup();
        let unknown = |fp: &Fingerprint, name: &str| {
            fp.facts.get(name).is_some_and(Fact::is_unreadable)
                || fp
                    .facts
                    .get(&whole_family(family(name)))
                    .is_some_and(Fact::is_unreadable)
        };
        names
            .into_iter()
            .filter(|name| !is_volatile(name))
            .filter(|name| !unknown(self, name) && !unknown(before, name))
            .filter_map(|name| {
                let from = before.facts.get(name);
                let to = self.facts.get(name);
                let same = match (from, to) {
                    (Some(a), Some(b)) => a.value() == b.value(),
                    (None, None) => true,
                    _ => false,
                };
                (!same).then(|| FactChange {
                    name: name.clone(),
                    from: from.cloned(),
                    to: to.cloned(),
                })
            })
            .collect()
    }

    /// Gives every fact that could not be read its value in `previous`
    /// (a family that could not be listed, all of its facts there), so
    /// that a read cut short by the process's limits is not taken for a
    /// change of the host. Returns what could not be read and why; those
    /// without a previous value stay unknown.
    pub fn carry_over(&mut self, previous: &Fingerprint) -> Vec<(String, String)> {
        let unread: Vec<(String, String)> = self
            .facts
            .iter()
            .filter_map(|(name, fact)| match fact {
                Fact::Unreadable(why) => Some((name.clone(), why.clone())),
                _ => None,
            })
            .collect();
        for (name, _) in &unread {
            if let Some(whole) = name.strip_suffix("[*]") {
                self.facts
                    .retain(|n, _| family(n) != whole || n.as_str() == name.as_str());
                for (n, fact) in &previous.facts {
                    if family(n) == whole && !fact.is_unreadable() && !n.ends_with("[*]") {
                        self.facts.insert(n.clone(), fact.clone());
                    }
                }
                if previous.facts.keys().any(|n| family(n) == whole) {
                    self.facts.remove(name);
                }
            } else if let Some(fact) = previous.facts.get(name).filter(|f| !f.is_unreadable()) {
                self.facts.insert(name.clone(), fact.clone());
            }
        }
        unread
    }

    /// Gives every fact that follows which CPUs are online
    /// ([`follows_online`]) its value in `previous`, dropping those that
    /// `previous` does not have: what a read made while a CPU comes or
    /// goes is compared without them.
    pub fn hold_online_facts(&mut self, previous: &Fingerprint) {
        self.facts.retain(|name, _| !follows_online(name));
        for (name, fact) in &previous.facts {
            if follows_online(name) {
                self.facts.insert(name.clone(), fact.clone());
            }
        }
    }

    /// The facts as one line of JSON-free text for a record's comment:
    /// `name=value` words separated by tabs, values with tabs and
    /// newlines replaced, absent facts as `name!=reason`.
    pub fn to_line(&self) -> String {
        let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
        self.facts
            .iter()
            .filter_map(|(name, fact)| match fact {
                Fact::Known(v) => Some(format!("{name}={}", clean(v))),
                Fact::Absent(why) => Some(format!("{name}!={}", clean(why))),
                // Not a fact about the host: the record keeps what was read.
                Fact::Unreadable(_) => None,
            })
            .collect::<Vec<_>>()
            .join("\t")
    }

    /// Reads `to_line`'s text back. Words that do not parse are skipped
    /// (a record written by a later version may have more).
    pub fn from_line(line: &str) -> Fingerprint {
        let mut fp = Fingerprint::default();
        for word in line.split('\t') {
            if let Some((name, why)) = word.split_once("!=")
                && !name.contains('=')
            {
                fp.insert(name, Fact::absent(why));
            } else if let Some((name, value)) = word.split_once('=') {
                fp.insert(name, Fact::known(value));
            }
        }
        fp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Fingerprint {
        let mut fp = Fingerprint::default();
        fp.insert("kernel.release", Fact::known("6.12.0-rt"));
        fp.insert("cpuidle.states[cpu1]", Fact::known("POLL 0us, C1 2us"));
        fp.insert("dmi.bios_version", Fact::absent("no /sys/class/dmi/id"));
        fp.insert("pm_qos.holders", Fact::known("tuned(812)"));
        fp
    }

    #[test]
    fn the_identifier_is_stable_and_ignores_volatile_facts_and_reasons() {
        let a = sample();
        assert_eq!(a.id().len(), 12);
        assert_eq!(a.id(), sample().id());
        let mut b = sample();
        b.insert("pm_qos.holders", Fact::known("tuned(9999)"));
        b.insert("dmi.bios_version", Fact::absent("permission denied"));
        assert_eq!(a.id(), b.id());
        assert!(b.changes_since(&a).is_empty());
        b.insert("cpuidle.states[cpu1]", Fact::known("POLL 0us"));
        assert_ne!(a.id(), b.id());
        let changes = b.changes_since(&a);
        assert_eq!(changes.len(), 1);
        assert_eq!(
            changes[0].describe(),
            "cpuidle.states[cpu1]: POLL 0us, C1 2us → POLL 0us"
        );
        assert_eq!(family(&changes[0].name), "cpuidle.states");
    }

    #[test]
    fn facts_that_appear_or_go_are_changes() {
        let a = sample();
        let mut b = sample();
        b.insert("irq[24]", Fact::known("virtio0 on 1"));
        b.facts.remove("kernel.release");
        let changes = b.changes_since(&a);
        let names: Vec<&str> = changes.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["irq[24]", "kernel.release"]);
        assert_eq!(changes[0].from, None);
        assert_eq!(changes[1].to, None);
        assert_eq!(changes[1].describe(), "kernel.release: 6.12.0-rt → (none)");
    }

    #[test]
    fn the_line_form_reads_back_whole() {
        let mut a = sample();
        a.insert("kernel.cmdline", Fact::known("quiet isolcpus=2-3\tx=a=b"));
        let back = Fingerprint::from_line(&a.to_line());
        assert_eq!(
            back.value("kernel.cmdline"),
            Some("quiet isolcpus=2-3 x=a=b")
        );
        assert_eq!(back.get("dmi.bios_version"), a.get("dmi.bios_version"));
        assert_eq!(back.facts.len(), a.facts.len());
        let mut tabless = a.clone();
        tabless.insert("kernel.cmdline", Fact::known("quiet isolcpus=2-3 x=a=b"));
        assert_eq!(back.id(), tabless.id());
    }

    #[test]
    fn a_fact_that_could_not_be_read_keeps_its_value_and_is_no_change() {
        let mut before = sample();
        before.insert("irq[24]", Fact::known("ACPI:Ged on 0"));
        before.insert("irq[25]", Fact::known("virtio0 on 1"));
        let mut read = sample();
        read.insert(
            "kernel.release",
            Fact::unreadable("/proc/sys/kernel/osrelease: Too many open files"),
        );
        read.insert(
            whole_family("irq"),
            Fact::unreadable("/proc/interrupts: EMFILE"),
        );
        // Not a change even before it is carried over.
        assert_eq!(read.changes_since(&before), vec![]);
        let unread = read.carry_over(&before);
        assert_eq!(
            unread.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            ["irq[*]", "kernel.release"]
        );
        assert_eq!(read, before, "every value carried over");
        assert_eq!(read.id(), before.id());
        // With nothing to carry it from, it stays unknown: out of the
        // identifier, out of the changes, out of the record's line.
        let mut first = sample();
        first.insert("kernel.release", Fact::unreadable("EMFILE"));
        let unread = first.carry_over(&Fingerprint::default());
        assert_eq!(unread.len(), 1);
        assert!(first.get("kernel.release").unwrap().is_unreadable());
        assert!(!first.to_line().contains("kernel.release"));
        let mut without = sample();
        without.facts.remove("kernel.release");
        assert_eq!(first.id(), without.id());
        assert_eq!(sample().changes_since(&first), vec![]);
    }
}
