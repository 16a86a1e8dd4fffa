//! The host's fingerprint as the daemon tracks it: the facts in force,
//! since when, and every change seen (which facts, from what to what,
//! when), bounded. Fed by the run's re-reads; read by the part's
//! families, `/api/v1/host`, the status page and the record.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use crate::cpulist::parse_cpu_list;
use crate::host::fingerprint::family;
use crate::host::{CpuTopology, FactChange, Fingerprint};

/// Changes kept for `/api/v1/host` (the oldest go first).
pub const MAX_HISTORY: usize = 64;

/// How long the same CPUs must have been online (and in at least two
/// reads in a row) before the facts that follow them are compared again:
/// a CPU taken offline for maintenance and brought back within this is
/// no change of the host; one that stays away longer is one change.
pub const ONLINE_SETTLE_NS: u64 = 300 * 1_000_000_000;

/// The CPUs online while the facts that follow them are held: since when
/// this set has been read, and in how many reads in a row (`online` is
/// `None` for a read that straddled a CPU coming or going).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnlineSettling {
    pub online: Option<Vec<usize>>,
    pub since_unix_ns: u64,
    pub reads: u32,
}

/// How a change was seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeSeen {
    /// Between two reads of this process.
    Running,
    /// At start, against the last fingerprint the record holds (written
    /// at that wall time, ns): what changed while latencyd was stopped,
    /// such as a new kernel.
    SinceRecord { recorded_unix_ns: u64 },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostChange {
    /// When it was seen (wall time, ns since the epoch).
    pub at_unix_ns: u64,
    pub from_id: String,
    pub to_id: String,
    pub facts: Vec<FactChange>,
    pub seen: ChangeSeen,
}

#[derive(Debug, Clone)]
pub struct HostTrack {
    pub current: Arc<Fingerprint>,
    /// The facts in force before the latest change seen while running:
    /// what an interval that ended before that change is filed under.
    pub previous: Option<Arc<Fingerprint>>,
    pub id: String,
    /// When the facts in force were first read (wall time, ns).
    pub since_unix_ns: u64,
    /// When they were last read, and how long that took.
    pub read_unix_ns: u64,
    pub read_duration_ns: u64,
    pub changes_total: u64,
    pub last_change_unix_ns: Option<u64>,
    pub history: VecDeque<HostChange>,
    /// Per fact family, when it last changed (a bounded label set: the
    /// families, not the CPUs or IRQs).
    pub family_changed_unix_ns: BTreeMap<String, u64>,
    /// Every online CPU's place in the machine.
    pub topology: Vec<CpuTopology>,
    /// The facts the latest read could not read, and why (they keep their
    /// last known value; `/api/v1/host` lists them).
    pub unreadable: Vec<(String, String)>,
    /// Set while the online CPUs differ from the fingerprint's, or have
    /// not yet stayed the same for [`ONLINE_SETTLE_NS`].
    pub settling: Option<OnlineSettling>,
}

impl HostTrack {
    /// The facts read at start (`read_ns` taken to read them).
    pub fn new(
        mut first: Fingerprint,
        topology: Vec<CpuTopology>,
        now_unix_ns: u64,
        read_ns: u64,
    ) -> HostTrack {
        let unreadable = first.carry_over(&Fingerprint::default());
        HostTrack {
            id: first.id(),
            unreadable,
            current: Arc::new(first),
            previous: None,
            since_unix_ns: now_unix_ns,
            read_unix_ns: now_unix_ns,
            read_duration_ns: read_ns,
            changes_total: 0,
            last_change_unix_ns: None,
            history: VecDeque::new(),
            family_changed_unix_ns: BTreeMap::new(),
            topology,
            settling: None,
        }
    }

    /// Takes in a new read; returns the change it makes, if any. Volatile
    /// facts (`fingerprint::VOLATILE`) are updated without being a change.
    pub fn take_read(
        &mut self,
        mut read: Fingerprint,
        topology: Vec<CpuTopology>,
        now_unix_ns: u64,
        read_ns: u64,
        seen: ChangeSeen,
    ) -> Option<HostChange> {
        self.read_unix_ns = now_unix_ns;
        self.read_duration_ns = read_ns;
        self.topology = topology;
        // What could not be read keeps its value: never a change.
        self.unreadable = read.carry_over(&self.current);
        // Nor is a CPU coming or going, until it has stayed so.
        // (Where the online list cannot be read at all, nothing is held.)
        let online = online_of(&read, &self.topology);
        if let Some(online) = online
            && self.hold_while_settling(online, now_unix_ns)
        {
            read.hold_online_facts(&self.current);
        }
        let facts = read.changes_since(&self.current);
        let id = read.id();
        let before = std::mem::replace(&mut self.current, Arc::new(read));
        if facts.is_empty() {
            return None;
        }
        self.previous = Some(before);
        let change = HostChange {
            at_unix_ns: now_unix_ns,
            from_id: std::mem::replace(&mut self.id, id.clone()),
            to_id: id,
            facts,
            seen,
        };
        self.record(change.clone());
        Some(change)
    }

    /// Whether this read's facts that follow the online CPUs are to be
    /// held at their values in force: while the CPUs online differ from
    /// the fingerprint's or from the previous read's, until the same ones
    /// have been read twice in a row over at least [`ONLINE_SETTLE_NS`]
    /// (none at all when they are back as the fingerprint has them).
    fn hold_while_settling(&mut self, online: Option<Vec<usize>>, now_unix_ns: u64) -> bool {
        let reference = self.current.value("cpus.online").map(parse_online);
        let steady = online.is_some() && online == reference;
        if steady && self.settling.is_none() {
            return false;
        }
        let settling = match self.settling.take() {
            Some(mut s) if s.online.is_some() && s.online == online => {
                s.reads += 1;
                s
            }
            _ => OnlineSettling {
                online,
                since_unix_ns: now_unix_ns,
                reads: 1,
            },
        };
        let settled = settling.online.is_some()
            && settling.reads >= 2
            && (steady || now_unix_ns.saturating_sub(settling.since_unix_ns) >= ONLINE_SETTLE_NS);
        if settled {
            return false;
        }
        self.settling = Some(settling);
        true
    }

    /// The facts in force at the wall time `unix_ns` (ns): the current
    /// ones, or those before the latest change for a time before it was
    /// seen. One change back is enough for the record, which asks within a
    /// collector tick of an interval's end, while the facts are re-read at
    /// most once a second.
    pub fn in_force_at(&self, unix_ns: u64) -> &Arc<Fingerprint> {
        match &self.previous {
            Some(previous) if unix_ns < self.since_unix_ns => previous,
            _ => &self.current,
        }
    }

    /// Adds a change found at start against the record's last fingerprint.
    pub fn changed_since_record(
        &mut self,
        recorded: &Fingerprint,
        recorded_unix_ns: u64,
    ) -> Option<HostChange> {
        let facts = self.current.changes_since(recorded);
        if facts.is_empty() {
            return None;
        }
        let change = HostChange {
            at_unix_ns: self.since_unix_ns,
            from_id: recorded.id(),
            to_id: self.id.clone(),
            facts,
            seen: ChangeSeen::SinceRecord { recorded_unix_ns },
        };
        self.record(change.clone());
        Some(change)
    }

    fn record(&mut self, change: HostChange) {
        self.changes_total += 1;
        self.last_change_unix_ns = Some(change.at_unix_ns);
        self.since_unix_ns = change.at_unix_ns;
        for fact in &change.facts {
            self.family_changed_unix_ns
                .insert(family(&fact.name).to_string(), change.at_unix_ns);
        }
        if self.history.len() == MAX_HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(change);
    }
}

/// A CPU list as the kernel writes it; an unreadable one as no CPU.
fn parse_online(text: &str) -> Vec<usize> {
    parse_cpu_list(text).unwrap_or_default()
}

/// The CPUs online during a read: its `cpus.online`, unless the CPUs whose
/// topology was read after it (every online one) differ, which means a
/// CPU came or went while it read (`Some(None)`); `None` when the read has
/// no online list.
fn online_of(read: &Fingerprint, topology: &[CpuTopology]) -> Option<Option<Vec<usize>>> {
    let online = parse_online(read.value("cpus.online")?);
    if topology.is_empty() {
        return Some(Some(online));
    }
    let after: Vec<usize> = topology.iter().map(|t| t.cpu).collect();
    Some((after == online).then_some(online))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::Fact;

    fn fp(states: &str, holders: &str) -> Fingerprint {
        let mut f = Fingerprint::default();
        f.insert("kernel.release", Fact::known("6.12"));
        f.insert("cpuidle.states[cpu1]", Fact::known(states));
        f.insert("pm_qos.holders", Fact::known(holders));
        f
    }

    fn online(list: &str, idle_cpu1: Option<&str>, irq: &str) -> Fingerprint {
        let mut f = Fingerprint::default();
        f.insert("kernel.release", Fact::known("6.12"));
        f.insert("cpus.online", Fact::known(list));
        match idle_cpu1 {
            Some(states) => f.insert("cpuidle.states[cpu1]", Fact::known(states)),
            None => f.insert("cpuidle.states[cpu1]", Fact::absent("not present")),
        }
        f.insert("irq[24]", Fact::known(irq));
        f
    }

    fn topology(cpus: &[usize]) -> Vec<CpuTopology> {
        cpus.iter()
            .map(|&cpu| CpuTopology {
                cpu,
                package: Some(0),
                core: Some(cpu as i64),
                node: Some(0),
                smt_siblings: None,
            })
            .collect()
    }

    const MIN: u64 = 60 * 1_000_000_000;

    #[test]
    fn a_cpu_that_leaves_and_comes_back_within_the_settling_time_is_no_change() {
        let both = || online("0-1", Some("POLL 0us"), "ens3 on 1");
        let mut track = HostTrack::new(both(), topology(&[0, 1]), 0, 0);
        let id = track.id.clone();
        // A read that straddled the CPU going: its IRQ moved, the online
        // list read before it did not change yet, the CPUs read after did.
        let straddled = online("0-1", Some("POLL 0us"), "ens3 on 0");
        let seen = ChangeSeen::Running;
        assert_eq!(
            track.take_read(straddled, topology(&[0]), MIN, 0, seen.clone()),
            None
        );
        let gone = || online("0", None, "ens3 on 0");
        for minute in 2..5 {
            let read = track.take_read(gone(), topology(&[0]), minute * MIN, 0, seen.clone());
            assert_eq!(read, None, "minute {minute}");
        }
        // Back, and its IRQ not yet: held until a second read agrees.
        let back_early = online("0-1", Some("POLL 0us"), "ens3 on 0");
        let read = track.take_read(back_early, topology(&[0, 1]), 5 * MIN, 0, seen.clone());
        assert_eq!(read, None);
        let read = track.take_read(both(), topology(&[0, 1]), 6 * MIN, 0, seen.clone());
        assert_eq!(read, None);
        assert_eq!((track.changes_total, &track.id), (0, &id));
        assert_eq!(track.settling, None);
        // Settled: an IRQ moved by someone is a change again.
        let moved = online("0-1", Some("POLL 0us"), "ens3 on 0");
        let change = track.take_read(moved, topology(&[0, 1]), 7 * MIN, 0, seen);
        assert_eq!(change.unwrap().facts[0].name, "irq[24]");
    }

    #[test]
    fn a_cpu_that_stays_away_is_one_change_once_settled() {
        let first = online("0-1", Some("POLL 0us"), "ens3 on 1");
        let mut track = HostTrack::new(first, Vec::new(), 0, 0);
        let gone = |kernel: &str| {
            let mut read = online("0", None, "ens3 on 0");
            read.insert("kernel.release", Fact::known(kernel));
            read
        };
        let seen = ChangeSeen::Running;
        let mut changes = Vec::new();
        for minute in 1..=10 {
            // Meanwhile the facts that do not follow the CPUs are compared
            // as ever.
            let kernel = if minute < 3 { "6.12" } else { "6.13" };
            let read = gone(kernel);
            changes.extend(track.take_read(read, Vec::new(), minute * MIN, 0, seen.clone()));
        }
        assert_eq!(changes.len(), 2, "{changes:?}");
        assert_eq!(changes[0].at_unix_ns, 3 * MIN);
        assert_eq!(changes[0].facts.len(), 1);
        assert_eq!(changes[0].facts[0].name, "kernel.release");
        let names: Vec<&str> = changes[1].facts.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["cpuidle.states[cpu1]", "cpus.online", "irq[24]"]);
        assert_eq!(
            changes[1].at_unix_ns,
            6 * MIN,
            "five minutes after first read"
        );
        assert_eq!(track.settling, None);
        assert_eq!(
            track.take_read(gone("6.13"), Vec::new(), 11 * MIN, 0, seen),
            None
        );
    }

    #[test]
    fn the_facts_in_force_at_a_time_before_the_latest_change_are_those_before_it() {
        let mut track = HostTrack::new(fp("POLL 0us, C1 2us", "a(1)"), Vec::new(), 100, 5);
        let first_id = track.id.clone();
        assert_eq!(track.in_force_at(50).id(), first_id, "nothing older known");
        track.take_read(
            fp("POLL 0us", "a(1)"),
            Vec::new(),
            1_000,
            5,
            ChangeSeen::Running,
        );
        let second_id = track.id.clone();
        assert_ne!(first_id, second_id);
        // An interval that ended at 900 was under the first facts, even if
        // the record asks after the change was seen.
        assert_eq!(track.in_force_at(900).id(), first_id);
        assert_eq!(track.in_force_at(1_000).id(), second_id);
        assert_eq!(track.in_force_at(1_100).id(), second_id);
        // A re-read with only volatile facts changed is no change: the
        // time of the latest change, and what was before it, stay.
        track.take_read(
            fp("POLL 0us", "a(2)"),
            Vec::new(),
            2_000,
            5,
            ChangeSeen::Running,
        );
        assert_eq!(track.in_force_at(900).id(), first_id);
        assert_eq!(track.in_force_at(1_500).id(), second_id);
    }

    #[test]
    fn a_change_is_counted_dated_and_kept_and_volatile_facts_are_not_changes() {
        let mut track = HostTrack::new(fp("POLL 0us, C1 2us", "a(1)"), Vec::new(), 100, 5);
        let first_id = track.id.clone();
        assert!(
            track
                .take_read(
                    fp("POLL 0us, C1 2us", "a(2)"),
                    Vec::new(),
                    200,
                    5,
                    ChangeSeen::Running
                )
                .is_none()
        );
        assert_eq!(track.current.value("pm_qos.holders"), Some("a(2)"));
        let change = track
            .take_read(
                fp("POLL 0us", "a(2)"),
                Vec::new(),
                300,
                5,
                ChangeSeen::Running,
            )
            .unwrap();
        assert_eq!(change.from_id, first_id);
        assert_eq!(change.to_id, track.id);
        assert_eq!(change.facts.len(), 1);
        assert_eq!(track.changes_total, 1);
        assert_eq!(track.last_change_unix_ns, Some(300));
        assert_eq!(track.since_unix_ns, 300);
        assert_eq!(track.family_changed_unix_ns["cpuidle.states"], 300);
        // Reverted: a second change, back to the first identifier.
        let back = track
            .take_read(
                fp("POLL 0us, C1 2us", "a(2)"),
                Vec::new(),
                400,
                5,
                ChangeSeen::Running,
            )
            .unwrap();
        assert_eq!(back.to_id, first_id);
        assert_eq!(track.history.len(), 2);
    }

    #[test]
    fn history_is_bounded_and_changes_since_the_record_are_kept() {
        let mut track = HostTrack::new(fp("A", ""), Vec::new(), 0, 0);
        let mut old = fp("A", "");
        old.insert("kernel.release", Fact::known("6.6"));
        let change = track.changed_since_record(&old, 50).unwrap();
        assert_eq!(
            change.seen,
            ChangeSeen::SinceRecord {
                recorded_unix_ns: 50
            }
        );
        assert_eq!(change.facts[0].name, "kernel.release");
        assert!(track.changed_since_record(&fp("A", "x"), 60).is_none());
        for i in 0..(MAX_HISTORY as u64 + 5) {
            let states = if i % 2 == 0 { "B" } else { "A" };
            track.take_read(fp(states, ""), Vec::new(), 100 + i, 0, ChangeSeen::Running);
        }
        assert_eq!(track.history.len(), MAX_HISTORY);
        assert_eq!(track.changes_total, MAX_HISTORY as u64 + 6);
    }
}
