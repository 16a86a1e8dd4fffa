//! What the accounting counts: interference by source and name with the
//! longest single one, a task's name as the kernel keeps it, one wake-up
//! of a real-time task, and the names threads are counted under.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::forensics::events::interrupt_of_thread;

/// Where interference came from (`source` label). SMIs and steal are
/// counted from hardware and `/proc/stat`, not from events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Source {
    Irq,
    Softirq,
    Nmi,
    Thread,
    Smi,
    Steal,
}

impl Source {
    pub const ALL: [Source; 6] = [
        Source::Irq,
        Source::Softirq,
        Source::Nmi,
        Source::Thread,
        Source::Smi,
        Source::Steal,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Source::Irq => "irq",
            Source::Softirq => "softirq",
            Source::Nmi => "nmi",
            Source::Thread => "thread",
            Source::Smi => "smi",
            Source::Steal => "steal",
        }
    }
}

/// Time and count of one source and name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub ns: u64,
    pub count: u64,
    /// The longest single one.
    pub max_ns: u64,
}

impl Tally {
    pub fn merge(&mut self, other: &Tally) {
        self.ns += other.ns;
        self.count += other.count;
        self.max_ns = self.max_ns.max(other.max_ns);
    }
}

/// What one CPU's events said over an interval.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuTally {
    pub by_name: BTreeMap<(Source, String), Tally>,
    /// The longest single interruption per source, and when it ended.
    pub longest: BTreeMap<Source, (u64, u64)>,
    /// Real-time tasks that ran without their wake-up being seen (woken
    /// from another CPU while this one was busy, or before the events
    /// started): no latency sample for them.
    pub unseen_wakeups: u64,
    /// Tasks that left the CPU without their switch-in traced (see the
    /// module's notes): their run counts from the first event in their
    /// context, and a woken one has no latency sample.
    pub untraced_switches: u64,
    /// Woken real-time tasks waiting for this CPU as the interval ended
    /// (a gauge: the latest interval's).
    pub waiting_tasks: u64,
    /// Waiting tasks let go without a sample: they ran on another CPU
    /// (migrated, the CPU went offline), or the waiting list was full.
    pub waiting_let_go: u64,
}

impl CpuTally {
    pub fn add(&mut self, source: Source, name: &str, ns: u64, end_ns: u64) {
        let tally = self.by_name.entry((source, name.to_string())).or_default();
        tally.ns += ns;
        tally.count += 1;
        tally.max_ns = tally.max_ns.max(ns);
        let longest = self.longest.entry(source).or_insert((0, end_ns));
        if ns > longest.0 {
            *longest = (ns, end_ns);
        }
    }

    /// Adds `other` (a later interval) to this one.
    pub fn merge(&mut self, other: &CpuTally) {
        for (key, t) in &other.by_name {
            self.by_name.entry(key.clone()).or_default().merge(t);
        }
        for (source, &(ns, at)) in &other.longest {
            let mine = self.longest.entry(*source).or_insert((ns, at));
            if ns > mine.0 {
                *mine = (ns, at);
            }
        }
        self.unseen_wakeups += other.unseen_wakeups;
        self.untraced_switches += other.untraced_switches;
        self.waiting_tasks = other.waiting_tasks;
        self.waiting_let_go += other.waiting_let_go;
    }
}

/// A task's name as the kernel keeps it (`comm`, at most 15 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Comm {
    bytes: [u8; 16],
    len: u8,
}

impl Comm {
    pub fn new(name: &[u8]) -> Comm {
        let len = name.len().min(16);
        let mut bytes = [0u8; 16];
        bytes[..len].copy_from_slice(&name[..len]);
        Comm {
            bytes,
            len: len as u8,
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    pub fn to_string_lossy(&self) -> String {
        String::from_utf8_lossy(self.as_bytes()).into_owned()
    }
}

/// One real-time task's wake-up, as seen on the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WakeSample {
    pub pid: i32,
    pub comm: Comm,
    pub latency_ns: u64,
    /// When it ran (`CLOCK_MONOTONIC`).
    pub at_ns: u64,
    /// Measured from a timer's expiry (else from the wake-up).
    pub from_timer: bool,
}

/// Which tasks are kernel threads (read from `/proc` by the observer,
/// scripted in tests).
pub trait TaskKinds {
    fn is_kernel_thread(&mut self, pid: i32, comm: &[u8]) -> bool;

    /// The full name of interrupt `irq`'s action whose name starts with
    /// `prefix` (an interrupt thread's `comm` cuts it at 15 bytes).
    fn irq_action(&mut self, _irq: u32, _prefix: &str) -> Option<String> {
        None
    }
}

/// The name interference by a thread is counted under: per-CPU kernel
/// threads by their family (`kworker/1:2H-kblockd` is `kworker`,
/// `ksoftirqd/3` is `ksoftirqd`), everything else by its own name.
pub fn thread_name(comm: &[u8]) -> String {
    let name = String::from_utf8_lossy(comm);
    if let Some((family, rest)) = name.split_once('/')
        && family != "irq"
        && rest.starts_with(|c: char| c.is_ascii_digit())
    {
        return family.to_string();
    }
    name.into_owned()
}

/// One CPU's interval as it accumulates: per (source, interned name) a
/// tally, no allocation per event (names are `Names`' shared strings);
/// turned into a `CpuTally` once an interval.
#[derive(Debug, Default)]
pub struct Counts {
    by_name: HashMap<(Source, Arc<str>), Tally>,
    longest: [Option<(u64, u64)>; 6],
    pub unseen_wakeups: u64,
    pub untraced_switches: u64,
    pub waiting_let_go: u64,
}

impl Counts {
    pub fn add(&mut self, source: Source, name: &Arc<str>, ns: u64, end_ns: u64) {
        let tally = self.by_name.entry((source, Arc::clone(name))).or_default();
        tally.ns += ns;
        tally.count += 1;
        tally.max_ns = tally.max_ns.max(ns);
        let longest = &mut self.longest[source as usize];
        if longest.is_none_or(|(max, _)| ns > max) {
            *longest = Some((ns, end_ns));
        }
    }

    /// The interval so far, and a fresh start.
    pub fn take(&mut self) -> CpuTally {
        let tally = CpuTally {
            by_name: self
                .by_name
                .drain()
                .map(|((source, name), t)| ((source, name.to_string()), t))
                .collect(),
            longest: Source::ALL
                .iter()
                .filter_map(|&s| Some((s, self.longest[s as usize]?)))
                .collect(),
            unseen_wakeups: self.unseen_wakeups,
            untraced_switches: self.untraced_switches,
            waiting_tasks: 0,
            waiting_let_go: self.waiting_let_go,
        };
        *self = Counts::default();
        tally
    }
}

/// Task names remembered per CPU at most. Raw names churn on a host
/// (`kworker/u8:37`, short-lived jobs): the table starts afresh when full,
/// which costs one allocation per name it meets again.
const MAX_THREAD_NAMES: usize = 1024;

/// Interference names, made once and shared: by source and number (an
/// IRQ, a softirq vector, a system vector) and by task name.
#[derive(Debug, Default)]
pub struct Names {
    by_id: HashMap<(Source, i64), Arc<str>>,
    threads: HashMap<Comm, (Source, Arc<str>)>,
}

impl Names {
    pub fn of(&mut self, source: Source, id: i64, make: impl FnOnce() -> String) -> Arc<str> {
        Arc::clone(
            self.by_id
                .entry((source, id))
                .or_insert_with(|| Arc::from(make())),
        )
    }

    /// What a thread's interference counts under: an interrupt's thread
    /// (`irq/24-virtio0`: every handler on PREEMPT_RT, `threadirqs`, or one
    /// that asked for a thread) as the interrupt it serves (`irq`, the
    /// series of its hard part), so an interrupt's time compares between
    /// a PREEMPT_RT kernel and one that runs the whole handler in hard IRQ
    /// context; every other thread as `thread_name`. The thread's `comm`
    /// is cut at 15 bytes (`irq/16-rtc-pl03` serves `16:rtc-pl031`), so
    /// the interrupt's name comes from its action (`kinds`), else from the
    /// hard part if it was seen, else from the `comm`.
    pub fn thread(&mut self, comm: &[u8], kinds: &mut impl TaskKinds) -> (Source, Arc<str>) {
        if self.threads.len() > MAX_THREAD_NAMES {
            // A new table, not clear(): that would keep the full one's
            // capacity for good.
            self.threads = HashMap::new();
        }
        if let Some((source, name)) = self.threads.get(&Comm::new(comm)) {
            return (*source, Arc::clone(name));
        }
        let text = String::from_utf8_lossy(comm);
        let (source, name) = match interrupt_of_thread(&text) {
            Some((irq, prefix)) => {
                let full = kinds
                    .irq_action(irq, prefix)
                    .map(|action| format!("{irq}:{action}"));
                let name = match full {
                    Some(full) => {
                        let name: Arc<str> = Arc::from(full);
                        self.by_id
                            .insert((Source::Irq, i64::from(irq)), Arc::clone(&name));
                        name
                    }
                    None => self.of(Source::Irq, i64::from(irq), || format!("{irq}:{prefix}")),
                };
                (Source::Irq, name)
            }
            None => (Source::Thread, Arc::from(thread_name(comm))),
        };
        self.threads
            .insert(Comm::new(comm), (source, Arc::clone(&name)));
        (source, name)
    }
}

/// A real-time task's wake-up at least the capture threshold late, with
/// what ran while it waited: what the observer turns into a capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadSpike {
    pub pid: i32,
    pub comm: Comm,
    pub latency_ns: u64,
    /// From when its latency counts (the time it asked for, or its
    /// wake-up), when it was woken, and when it ran (`CLOCK_MONOTONIC`).
    pub since_ns: u64,
    pub woken_ns: u64,
    pub ran_ns: u64,
    pub from_timer: bool,
    /// What took the CPU while it waited: source, name, time.
    pub causes: Vec<(Source, String, u64)>,
    /// The events from its wake-up to its run: time, pid, event, fields.
    /// The fields are shared with the CPU's event window: a late task's
    /// events are pointers into it, not copies of its text.
    pub events: Vec<(u64, i32, &'static str, Arc<str>)>,
    pub events_omitted: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_names_group_per_cpu_kernel_threads() {
        assert_eq!(thread_name(b"kworker/1:2H-kblockd"), "kworker");
        assert_eq!(thread_name(b"ksoftirqd/3"), "ksoftirqd");
        assert_eq!(thread_name(b"migration/12"), "migration");
        assert_eq!(thread_name(b"stress-ng-cpu"), "stress-ng-cpu");
        assert_eq!(thread_name(b"rcu_preempt"), "rcu_preempt");
    }

    #[test]
    fn interrupt_threads_count_as_the_interrupt_they_serve() {
        // Kernel threads of Debian's 6.1 PREEMPT_RT kernel, as the kernel
        // matrix listed them (`ps -o pid,comm` in the guest): each
        // `irq/N-name` is the interrupt whose hard part is `N:name`.
        struct NoActions;
        impl TaskKinds for NoActions {
            fn is_kernel_thread(&mut self, _pid: i32, _comm: &[u8]) -> bool {
                true
            }
        }
        let mut names = Names::default();
        let mut source = |comm: &[u8]| {
            let (source, name) = names.thread(comm, &mut NoActions);
            (source, name.to_string())
        };
        let ps = include_str!("../../../tests/data/kernels/6.1-rt-amd64/ps");
        let threaded: Vec<(Source, String)> = ps
            .lines()
            .filter_map(|line| line.split_whitespace().nth(1))
            .filter(|comm| comm.starts_with("irq/"))
            .map(|comm| source(comm.as_bytes()))
            .collect();
        assert!(
            threaded.contains(&(Source::Irq, "4:ttyS0".to_string())),
            "{threaded:?}"
        );
        assert!(threaded.iter().all(|(source, _)| *source == Source::Irq));
        assert_eq!(
            source(b"irq/24-virtio0"),
            (Source::Irq, "24:virtio0".to_string())
        );
        // Not an interrupt's thread: counted as a thread.
        assert_eq!(
            source(b"irq/worker"),
            (Source::Thread, "irq/worker".to_string())
        );
        assert_eq!(
            source(b"ksoftirqd/1"),
            (Source::Thread, "ksoftirqd".to_string())
        );
    }

    #[test]
    fn tallies_merge_and_keep_the_longest() {
        let mut a = CpuTally::default();
        a.add(Source::Irq, "x", 10, 1);
        let mut b = CpuTally::default();
        b.add(Source::Irq, "x", 30, 2);
        b.add(Source::Irq, "y", 5, 3);
        b.unseen_wakeups = 2;
        a.merge(&b);
        assert_eq!(
            a.by_name[&(Source::Irq, "x".to_string())],
            Tally {
                ns: 40,
                count: 2,
                max_ns: 30
            }
        );
        assert_eq!(a.longest[&Source::Irq], (30, 2));
        assert_eq!(a.unseen_wakeups, 2);
    }
}
