//! One observed CPU's time, from its events in order: what interfered
//! (hard IRQs, softirqs, NMIs, other threads) and how late each of its
//! real-time tasks ran after being woken.
//!
//! The rules, as rtla osnoise would count them without a thread of its
//! own on the CPU:
//! - An IRQ, softirq, system vector or NMI is interference for its whole
//!   duration, less what interrupted it (counted as its own).
//! - A thread's run is interference when it is not the CPU's real-time
//!   workload: a kernel thread (kworker, ksoftirqd, migration, threaded
//!   IRQs, ...) or a task without a real-time policy. A real-time user
//!   task interferes only while another real-time task it keeps off the
//!   CPU has been woken and waits (a higher-priority task spinning, say);
//!   before that it is the workload. Idle is never interference. Time
//!   interrupts took from a run is not counted twice.
//! - A real-time task's wake-up latency runs from its wake-up
//!   (`sched_wakeup`) — or, for a sleep that a timer ends, from the time
//!   the timer was set for, as cyclictest measures — to the
//!   `sched_switch` that runs it.
//!
//! Some kernels do not trace every switch: the one on which latencyd was
//! developed (a Firecracker guest) records no `sched_switch` out of the
//! idle task. A task whose switch-in was not seen is taken to run from
//! the first event in its context (`common_pid`: an interrupt, a timer
//! it arms) — a lower bound of its run — and a woken task seen only when
//! it leaves the CPU has no latency sample; both are counted
//! (`untraced_switches`), so the shortfall is visible.
//!
//! Pure: events in, tallies and samples out; `TaskKinds` says which tasks
//! are kernel threads, so tests need no `/proc`.

use std::collections::HashMap;
use std::sync::Arc;

mod forget;
mod switch;

use super::events::{Event, describe};
use super::tally::{Comm, Counts, CpuTally, Names, Source, TaskKinds, WakeSample, WorkloadSpike};

/// The softirq vectors' names, by number (`include/linux/interrupt.h`).
const SOFTIRQ_NAMES: &[&str] = &[
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

/// A task's kernel priority below this is a real-time one (`MAX_RT_PRIO`);
/// SCHED_DEADLINE tasks have -1.
const MAX_RT_PRIO: i32 = 100;
/// `prev_state` bits that mean the task left the CPU to wait.
const SLEEPING_STATES: i64 = 0xff;
/// Timers remembered at most (they are forgotten when they fire).
const MAX_TIMERS: usize = 4096;
/// A wake-up this long after a timer fired is not that timer's.
const TIMER_WAKEUP_GAP_NS: u64 = 1_000_000;
/// Events kept for one capture window; more are counted as omitted.
const MAX_WINDOW_EVENTS: usize = 4096;
/// The capacity an emptied event window keeps.
const WINDOW_KEPT: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Idle,
    /// A real-time user task: interference only while another waits.
    Workload,
    /// Everything else: interference for its whole run.
    Other,
}

/// The task on the CPU. Its role is decided when it leaves, from the
/// priority it leaves with (a task may change its policy while running).
#[derive(Debug, Clone)]
struct Running {
    pid: i32,
    since_ns: u64,
    /// Time interrupts took from this run so far.
    nested_ns: u64,
    /// From when (and the nested time then) it keeps a woken real-time
    /// task waiting.
    blocking: Option<(u64, u64)>,
}

#[derive(Debug, Clone)]
struct Frame {
    source: Source,
    /// IRQ number, softirq vector or system vector index: what the exit
    /// event names.
    id: i64,
    name: Arc<str>,
    start_ns: u64,
    nested_ns: u64,
}

/// A woken real-time task waiting for the CPU.
#[derive(Debug, Clone)]
struct Waiting {
    comm: Comm,
    /// From when its latency counts: the wake-up, or the timer's expiry.
    since_ns: u64,
    woken_ns: u64,
    from_timer: bool,
    /// What took the CPU while it waited (kept only when captures are on).
    causes: Vec<(Source, Arc<str>, u64)>,
}

/// One CPU's accounting.
#[derive(Debug)]
pub struct CpuAccount {
    cpu: i32,
    vector_names: Vec<String>,
    running: Option<Running>,
    frames: Vec<Frame>,
    waiting: HashMap<i32, Waiting>,
    /// Real-time tasks preempted while runnable (pid → when): their
    /// return is not a wake-up.
    preempted: HashMap<i32, u64>,
    /// Sleep timers armed by a task: timer → (time it was set for in the
    /// timer's clock, pid, when it was armed).
    timers: HashMap<u64, (i64, i32, u64)>,
    /// Timers that fired: pid → (when, how late in the timer's clock).
    fired: HashMap<i32, (u64, u64)>,
    counts: Counts,
    names: Names,
    samples: Vec<WakeSample>,
    /// A wake-up at least this late is handed over with what ran.
    capture_ns: Option<u64>,
    /// The events while a task waits (only when captures are on).
    window: Vec<(u64, i32, &'static str, Arc<str>)>,
    window_omitted: u64,
    spikes: Vec<WorkloadSpike>,
    /// Tasks switched in on this CPU since the observer last looked, with
    /// when: a task waiting on another CPU that ran here is let go there.
    switched_in: HashMap<i32, u64>,
    /// The latest event's time: what `forget_stale` judges the tables by.
    last_ts: u64,
}

/// Woken tasks one CPU keeps waiting at most: a real-time task waits for
/// one CPU at a time, and more than this many at once is a storm whose
/// oldest wake-ups are let go (counted) rather than kept for ever.
pub const MAX_WAITING: usize = 512;

impl CpuAccount {
    pub fn new(cpu: usize, vector_names: &[String]) -> CpuAccount {
        CpuAccount {
            cpu: cpu as i32,
            vector_names: vector_names.to_vec(),
            running: None,
            frames: Vec::new(),
            waiting: HashMap::new(),
            preempted: HashMap::new(),
            timers: HashMap::new(),
            fired: HashMap::new(),
            counts: Counts::default(),
            names: Names::default(),
            samples: Vec::new(),
            capture_ns: None,
            window: Vec::new(),
            window_omitted: 0,
            spikes: Vec::new(),
            switched_in: HashMap::new(),
            last_ts: 0,
        }
    }

    /// Wake-ups at least `threshold_ns` late are handed over as
    /// `WorkloadSpike`s with what ran while the task waited.
    pub fn capturing(mut self, threshold_ns: Option<u64>) -> CpuAccount {
        self.capture_ns = threshold_ns;
        self
    }

    /// The tallies and samples since the last call.
    pub fn take(&mut self) -> (CpuTally, Vec<WakeSample>) {
        self.forget_stale();
        let mut tally = self.counts.take();
        tally.waiting_tasks = self.waiting.len() as u64;
        (tally, std::mem::take(&mut self.samples))
    }

    /// Lets go of the tasks that have waited here since before `now_ns -
    /// older_than_ns` and that `last_cpu` says are on another CPU now, or
    /// gone: woken here, then moved to a CPU the observer does not trace
    /// (or exited there), they would otherwise wait here for ever. A task
    /// still queued here waits on, however long: that is a starvation
    /// worth its sample.
    pub fn let_go_of_stale(
        &mut self,
        now_ns: u64,
        older_than_ns: u64,
        last_cpu: impl Fn(i32) -> Option<usize>,
    ) {
        let cpu = self.cpu as usize;
        let before = self.waiting.len();
        self.waiting.retain(|&pid, w| {
            now_ns.saturating_sub(w.woken_ns) < older_than_ns || last_cpu(pid) == Some(cpu)
        });
        self.counts.waiting_let_go += (before - self.waiting.len()) as u64;
    }

    /// The tasks switched in here since the last call, with when.
    pub fn take_switched_in(&mut self) -> HashMap<i32, u64> {
        std::mem::take(&mut self.switched_in)
    }

    /// Lets go of the tasks waiting here that ran on another CPU after
    /// they were woken (`ran_elsewhere`: pid → when it was switched in
    /// there): a migration, a push or pull, a CPU going offline. Without
    /// this a task woken here that ran elsewhere stayed waiting for ever,
    /// and every later event was added to its causes.
    pub fn let_go_of(&mut self, ran_elsewhere: impl Fn(i32) -> Option<u64>) {
        let before = self.waiting.len();
        self.waiting
            .retain(|&pid, w| ran_elsewhere(pid).is_none_or(|at| at < w.woken_ns));
        self.counts.waiting_let_go += (before - self.waiting.len()) as u64;
        if self.waiting.is_empty() {
            self.window = Vec::new();
            self.window_omitted = 0;
        }
    }

    /// The late wake-ups since the last call.
    pub fn take_spikes(&mut self) -> Vec<WorkloadSpike> {
        std::mem::take(&mut self.spikes)
    }

    /// Interference: into the interval's counts and, when captures are
    /// on, into each waiting task's causes.
    fn count(&mut self, source: Source, name: &Arc<str>, ns: u64, end_ns: u64) {
        self.counts.add(source, name, ns, end_ns);
        if self.capture_ns.is_none() || ns == 0 {
            return;
        }
        for w in self.waiting.values_mut() {
            if end_ns <= w.woken_ns {
                continue;
            }
            match w.causes.iter_mut().find(|c| c.0 == source && c.1 == *name) {
                Some(cause) => cause.2 += ns,
                None => w.causes.push((source, Arc::clone(name), ns)),
            }
        }
    }

    /// Interrupt time ending at `ns` goes to whatever it interrupted.
    fn nest(&mut self, ns: u64) {
        if let Some(frame) = self.frames.last_mut() {
            frame.nested_ns += ns;
        } else if let Some(running) = &mut self.running {
            running.nested_ns += ns;
        }
    }

    fn enter(&mut self, ts: u64, source: Source, id: i64, name: Arc<str>) {
        self.frames.push(Frame {
            source,
            id,
            name,
            start_ns: ts,
            nested_ns: 0,
        });
    }

    fn exit(&mut self, ts: u64, source: Source, id: i64) {
        // An exit without its entry (the events started inside the
        // handler) counts nothing; frames whose exit was lost are dropped.
        let Some(at) = self
            .frames
            .iter()
            .rposition(|f| f.source == source && f.id == id)
        else {
            return;
        };
        self.frames.truncate(at + 1);
        let frame = self.frames.pop().expect("found above");
        let whole = ts.saturating_sub(frame.start_ns);
        self.count(
            source,
            &frame.name,
            whole.saturating_sub(frame.nested_ns),
            ts,
        );
        self.nest(whole);
    }

    /// The run of the task leaving the CPU at `ts`, if it interfered.
    /// `false` when its switch-in was not seen and nothing ran in its
    /// context since (no run to count).
    fn close_run(
        &mut self,
        ts: u64,
        pid: i32,
        prio: i32,
        comm: &[u8],
        kinds: &mut impl TaskKinds,
    ) -> bool {
        let run = match self.running.take() {
            Some(run) if run.pid == pid => run,
            Some(_) => return pid == 0,
            // The first switch seen: nothing was known before it.
            None => return true,
        };
        let taken = match (Self::role(pid, prio, comm, kinds), run.blocking) {
            (Role::Idle, _) | (Role::Workload, None) => 0,
            (Role::Other, _) => ts
                .saturating_sub(run.since_ns)
                .saturating_sub(run.nested_ns),
            (Role::Workload, Some((from, nested_then))) => ts
                .saturating_sub(from)
                .saturating_sub(run.nested_ns - nested_then),
        };
        if taken > 0 {
            let (source, name) = self.names.thread(comm, kinds);
            self.count(source, &name, taken, ts);
        }
        true
    }

    fn role(pid: i32, prio: i32, comm: &[u8], kinds: &mut impl TaskKinds) -> Role {
        if pid == 0 {
            Role::Idle
        } else if prio < MAX_RT_PRIO && !kinds.is_kernel_thread(pid, comm) {
            Role::Workload
        } else {
            Role::Other
        }
    }

    /// An event in the context of `pid` while another task (or none) was
    /// thought to run: its switch-in was not traced; it runs from now.
    fn infer_running(&mut self, ts: u64, pid: i32) {
        if pid == 0 || self.running.as_ref().is_some_and(|r| r.pid == pid) {
            return;
        }
        let blocking = (!self.waiting.is_empty()).then_some((ts, 0));
        self.running = Some(Running {
            pid,
            since_ns: ts,
            nested_ns: 0,
            blocking,
        });
    }

    /// A late wake-up handed over with what ran while the task waited and
    /// the events from its wake-up to `ts`, when it runs (`event`).
    fn spike(&mut self, ts: u64, pid: i32, w: Waiting, event: &Event<'_>) {
        let mut causes: Vec<(Source, String, u64)> = w
            .causes
            .iter()
            .map(|(source, name, ns)| (*source, name.to_string(), *ns))
            .collect();
        causes.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.1.cmp(&b.1)));
        let mut events: Vec<(u64, i32, &'static str, Arc<str>)> = self
            .window
            .iter()
            .filter(|e| e.0 >= w.woken_ns)
            .cloned()
            .collect();
        let (name, fields) = describe(event, &self.vector_names);
        let context = match event {
            Event::Switch { prev_pid, .. } => *prev_pid,
            _ => pid,
        };
        events.push((ts, context, name, Arc::from(fields)));
        self.spikes.push(WorkloadSpike {
            pid,
            comm: w.comm,
            latency_ns: ts.saturating_sub(w.since_ns),
            since_ns: w.since_ns,
            woken_ns: w.woken_ns,
            ran_ns: ts,
            from_timer: w.from_timer,
            causes,
            events,
            events_omitted: self.window_omitted,
        });
    }

    /// Takes one event of this CPU at `ts` (`CLOCK_MONOTONIC`), recorded
    /// in the context of `pid` (its `common_pid`: the task current then).
    pub fn feed(&mut self, ts: u64, pid: i32, event: &Event<'_>, kinds: &mut impl TaskKinds) {
        self.last_ts = ts;
        if !matches!(event, Event::Switch { .. }) {
            self.infer_running(ts, pid);
        }
        let recording = self.capture_ns.is_some() && !self.waiting.is_empty();
        self.handle(ts, event, kinds);
        if recording || (self.capture_ns.is_some() && !self.waiting.is_empty()) {
            if self.window.len() < MAX_WINDOW_EVENTS {
                let (name, fields) = describe(event, &self.vector_names);
                self.window.push((ts, pid, name, Arc::from(fields)));
            } else {
                self.window_omitted += 1;
            }
        }
        if self.waiting.is_empty() && !self.window.is_empty() {
            self.window.clear();
            // A burst's window gives its memory back: the next one rarely
            // needs more than a few hundred events.
            self.window.shrink_to(WINDOW_KEPT);
            self.window_omitted = 0;
        }
    }

    fn handle(&mut self, ts: u64, event: &Event<'_>, kinds: &mut impl TaskKinds) {
        match *event {
            Event::IrqEntry { irq, name } => {
                let name = self.names.of(Source::Irq, i64::from(irq), || {
                    format!("{irq}:{}", String::from_utf8_lossy(name))
                });
                self.enter(ts, Source::Irq, i64::from(irq), name);
            }
            Event::IrqExit { irq } => self.exit(ts, Source::Irq, i64::from(irq)),
            Event::SoftirqEntry { vec } => {
                let name = self.names.of(Source::Softirq, i64::from(vec), || {
                    SOFTIRQ_NAMES
                        .get(vec as usize)
                        .map_or_else(|| format!("vec{vec}"), |n| n.to_string())
                });
                self.enter(ts, Source::Softirq, i64::from(vec), name);
            }
            Event::SoftirqExit { vec } => self.exit(ts, Source::Softirq, i64::from(vec)),
            Event::VectorEntry { vector } => {
                // Vectors count as hard IRQs; their ids stay apart from
                // IRQ numbers.
                let id = -1 - vector as i64;
                let names = &self.vector_names;
                let name = self.names.of(Source::Irq, id, || {
                    names
                        .get(vector)
                        .cloned()
                        .unwrap_or_else(|| format!("vector{vector}"))
                });
                self.enter(ts, Source::Irq, id, name);
            }
            Event::VectorExit { vector } => self.exit(ts, Source::Irq, -1 - vector as i64),
            Event::Nmi { delta_ns } => {
                let ns = delta_ns.max(0) as u64;
                let name = self.names.of(Source::Nmi, 0, || "nmi".to_string());
                self.count(Source::Nmi, &name, ns, ts);
                self.nest(ns);
            }
            Event::TimerStart {
                timer,
                softexpires,
                pid,
            } => {
                if pid > 0 {
                    if self.timers.len() >= MAX_TIMERS {
                        // New tables, not clear(): that keeps the capacity.
                        self.timers = Default::default();
                    }
                    self.timers.insert(timer, (softexpires, pid, ts));
                }
            }
            Event::TimerExpire { timer, now } => {
                if let Some((set_for, pid, _)) = self.timers.remove(&timer) {
                    let late = now.saturating_sub(set_for).max(0) as u64;
                    if self.fired.len() >= MAX_TIMERS {
                        self.fired = Default::default();
                    }
                    self.fired.insert(pid, (ts, late));
                }
            }
            Event::Wakeup {
                comm,
                pid,
                prio,
                target_cpu,
            } => self.wakeup(ts, comm, pid, prio, target_cpu),
            Event::Switch { .. } => self.switch(ts, event, kinds),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// pids 2–99 are kernel threads.
    struct Kinds;
    impl TaskKinds for Kinds {
        fn is_kernel_thread(&mut self, pid: i32, _comm: &[u8]) -> bool {
            (2..100).contains(&pid)
        }
    }

    /// Kinds on a host whose interrupt 16 has the action rtc-pl031.
    struct WithActions;
    impl TaskKinds for WithActions {
        fn is_kernel_thread(&mut self, pid: i32, _comm: &[u8]) -> bool {
            (2..100).contains(&pid)
        }
        fn irq_action(&mut self, irq: u32, prefix: &str) -> Option<String> {
            (irq == 16 && "rtc-pl031".starts_with(prefix)).then(|| "rtc-pl031".to_string())
        }
    }

    fn switch(
        prev: (&'static str, i32, i32),
        state: i64,
        next: (&'static str, i32, i32),
    ) -> Event<'static> {
        Event::Switch {
            prev_comm: prev.0.as_bytes(),
            prev_pid: prev.1,
            prev_prio: prev.2,
            prev_state: state,
            next_comm: next.0.as_bytes(),
            next_pid: next.1,
            next_prio: next.2,
        }
    }

    fn wakeup(comm: &'static str, pid: i32, prio: i32, cpu: i32) -> Event<'static> {
        Event::Wakeup {
            comm: comm.as_bytes(),
            pid,
            prio,
            target_cpu: cpu,
        }
    }

    /// Feeds events as a kernel that traces every switch writes them: each
    /// in the context of the task the last switch ran.
    struct Feeder {
        a: CpuAccount,
        current: i32,
    }

    impl Feeder {
        fn new(vectors: &[String]) -> Feeder {
            Feeder {
                a: CpuAccount::new(1, vectors),
                current: 0,
            }
        }

        fn feed(&mut self, ts: u64, event: &Event<'_>, k: &mut impl TaskKinds) {
            self.a.feed(ts, self.current, event, k);
            if let Event::Switch { next_pid, .. } = event {
                self.current = *next_pid;
            }
        }

        fn take(&mut self) -> (CpuTally, Vec<WakeSample>) {
            self.a.take()
        }
    }

    const IDLE: (&str, i32, i32) = ("swapper/1", 0, 120);
    const APP: (&str, i32, i32) = ("rtapp", 1000, 9);
    const SPIN: (&str, i32, i32) = ("spinner", 2000, 4);
    const KWORKER: (&str, i32, i32) = ("kworker/1:2", 50, 120);

    fn ns(t: &CpuTally, source: Source, name: &str) -> u64 {
        t.by_name
            .get(&(source, name.to_string()))
            .map_or(0, |t| t.ns)
    }

    #[test]
    fn a_timer_wakeup_counts_from_the_timers_expiry_and_a_higher_priority_spinner_is_named() {
        let mut a = Feeder::new(&[]);
        let k = &mut Kinds;
        // The workload sleeps to t=10_000 on a timer.
        a.feed(0, &switch(IDLE, 0, APP), k);
        a.feed(
            100,
            &Event::TimerStart {
                timer: 0xabc,
                softexpires: 10_000,
                pid: APP.1,
            },
            k,
        );
        a.feed(200, &switch(APP, 1, IDLE), k);
        // A higher-priority thread starts spinning at 5_000.
        a.feed(5_000, &wakeup("spinner", SPIN.1, SPIN.2, 1), k);
        a.feed(5_100, &switch(IDLE, 0, SPIN), k);
        // The timer fires 300 ns late (in its own clock) at 10_300; the
        // workload is woken but waits for the spinner until 25_000.
        a.feed(
            10_300,
            &Event::TimerExpire {
                timer: 0xabc,
                now: 10_300,
            },
            k,
        );
        a.feed(10_400, &wakeup("rtapp", APP.1, APP.2, 1), k);
        // An IRQ of 1_000 ns inside the spin, while the workload waits.
        a.feed(
            20_000,
            &Event::IrqEntry {
                irq: 24,
                name: b"virtio0",
            },
            k,
        );
        a.feed(21_000, &Event::IrqExit { irq: 24 }, k);
        a.feed(25_000, &switch(SPIN, 1, APP), k);
        let (tally, samples) = a.take();
        assert_eq!(samples.len(), 2, "{samples:?}");
        let app = samples.iter().find(|s| s.pid == APP.1).unwrap();
        assert!(app.from_timer);
        assert_eq!(app.latency_ns, 25_000 - 10_000);
        assert_eq!(app.comm.as_bytes(), b"rtapp");
        // The spinner took the time from the workload's wake-up to its
        // switch, less the IRQ; before the wake-up it was workload itself.
        assert_eq!(
            ns(&tally, Source::Thread, "spinner"),
            25_000 - 10_400 - 1_000
        );
        assert_eq!(ns(&tally, Source::Irq, "24:virtio0"), 1_000);
        assert_eq!(
            tally.longest[&Source::Thread],
            (25_000 - 10_400 - 1_000, 25_000)
        );
        // Only the first run, whose wake-up came before the events.
        assert_eq!(tally.unseen_wakeups, 1);
    }

    #[test]
    fn kernel_threads_and_ordinary_tasks_interfere_for_their_whole_run_less_interrupts() {
        let mut a = Feeder::new(&["local_timer".to_string()]);
        let k = &mut Kinds;
        a.feed(0, &switch(IDLE, 0, KWORKER), k);
        a.feed(100, &Event::VectorEntry { vector: 0 }, k);
        // An NMI inside the timer interrupt.
        a.feed(150, &Event::Nmi { delta_ns: 20 }, k);
        a.feed(300, &Event::VectorExit { vector: 0 }, k);
        a.feed(400, &Event::SoftirqEntry { vec: 1 }, k);
        a.feed(450, &Event::SoftirqExit { vec: 1 }, k);
        a.feed(1_000, &switch(KWORKER, 1, ("bash", 4242, 120)), k);
        a.feed(3_000, &switch(("bash", 4242, 120), 1, IDLE), k);
        let (t, _) = a.take();
        assert_eq!(ns(&t, Source::Irq, "local_timer"), 200 - 20);
        assert_eq!(ns(&t, Source::Nmi, "nmi"), 20);
        assert_eq!(ns(&t, Source::Softirq, "TIMER"), 50);
        assert_eq!(ns(&t, Source::Thread, "kworker"), 1_000 - 200 - 50);
        assert_eq!(ns(&t, Source::Thread, "bash"), 2_000);
        // Idle took nothing.
        assert_eq!(
            t.by_name
                .keys()
                .filter(|(s, _)| *s == Source::Thread)
                .count(),
            2
        );
    }

    #[test]
    fn an_interrupts_thread_counts_as_its_interrupt() {
        // PREEMPT_RT: the hard part wakes irq/4-ttyS0, which then runs
        // the handler as a thread (kernel matrix, Debian's 6.1-rt).
        let mut a = Feeder::new(&[]);
        let k = &mut Kinds;
        let thread = ("irq/4-ttyS0", 99, 49);
        a.feed(0, &switch(IDLE, 0, thread), k);
        a.feed(500, &switch(thread, 1, IDLE), k);
        let (t, _) = a.take();
        assert_eq!(ns(&t, Source::Irq, "4:ttyS0"), 500);
        // A thread whose comm was cut at 15 bytes counts under the name
        // its hard part had.
        a.feed(
            600,
            &Event::IrqEntry {
                irq: 16,
                name: b"rtc-pl031",
            },
            k,
        );
        a.feed(610, &Event::IrqExit { irq: 16 }, k);
        // As the kernel matrix's 6.1 RT arm64 guest named it.
        let pl031 = ("irq/16-rtc-pl03", 62, 49);
        a.feed(700, &switch(IDLE, 0, pl031), k);
        a.feed(900, &switch(pl031, 1, IDLE), k);
        let (t, _) = a.take();
        assert_eq!(ns(&t, Source::Irq, "16:rtc-pl031"), 10 + 200);
        // The thread first, its hard part on another CPU: the name comes
        // from the interrupt's action.
        let mut b = Feeder::new(&[]);
        let k = &mut WithActions;
        b.feed(0, &switch(IDLE, 0, pl031), k);
        b.feed(300, &switch(pl031, 1, IDLE), k);
        let (t, _) = b.take();
        assert_eq!(ns(&t, Source::Irq, "16:rtc-pl031"), 300);
        assert!(
            !t.by_name.keys().any(|(s, _)| *s == Source::Thread),
            "{:?}",
            t.by_name
        );
    }

    #[test]
    fn a_task_woken_here_that_ran_elsewhere_is_let_go_and_the_list_is_capped() {
        let k = &mut Kinds;
        // CPU 1 sees the wake-up; the task is pulled to CPU 0 and runs
        // there. Before, it waited on CPU 1 for ever.
        let mut here = CpuAccount::new(1, &[]);
        let mut there = CpuAccount::new(0, &[]);
        here.feed(100, 0, &wakeup("rtapp", APP.1, APP.2, 1), k);
        there.feed(150, 0, &switch(IDLE, 0, APP), k);
        let ran = there.take_switched_in();
        // A switch-in elsewhere before the wake-up is an older run.
        here.let_go_of(|pid| (pid == APP.1).then_some(50));
        assert_eq!(here.take().0.waiting_tasks, 1);
        here.let_go_of(|pid| ran.get(&pid).copied());
        let (tally, samples) = here.take();
        assert_eq!((tally.waiting_tasks, tally.waiting_let_go), (0, 1));
        assert!(samples.is_empty(), "no latency sample for it");
        assert!(here.window.is_empty());
        // Woken here, moved to a CPU nobody traces: let go once it has
        // waited a second and /proc puts it elsewhere; one still queued
        // here waits on.
        here.feed(2_000, 0, &wakeup("moved", 501, 50, 1), k);
        here.feed(2_001, 0, &wakeup("starved", 502, 50, 1), k);
        here.let_go_of_stale(2_500, 1_000, |_| Some(0));
        assert_eq!(here.waiting.len(), 2, "not waiting long enough yet");
        here.let_go_of_stale(5_000, 1_000, |pid| Some(if pid == 501 { 0 } else { 1 }));
        assert!(!here.waiting.contains_key(&501) && here.waiting.contains_key(&502));
        here.let_go_of_stale(5_000, 1_000, |_| None);
        assert!(here.waiting.is_empty(), "an exited task is let go");
        assert_eq!(here.take().0.waiting_let_go, 2);
        // A storm of wake-ups that never run here: the oldest go first.
        for pid in 0..(MAX_WAITING as i32 + 10) {
            here.feed(
                1_000 + pid as u64,
                0,
                &wakeup("burst", 10_000 + pid, 50, 1),
                k,
            );
        }
        let (tally, _) = here.take();
        assert_eq!(tally.waiting_tasks, MAX_WAITING as u64);
        assert_eq!(tally.waiting_let_go, 10);
        assert!(!here.waiting.contains_key(&10_000), "the oldest went");
    }

    #[test]
    fn wakeups_for_other_cpus_preemptions_and_unseen_wakeups() {
        let mut a = Feeder::new(&[]);
        let k = &mut Kinds;
        // A wake-up aimed at CPU 0 is not this CPU's.
        a.feed(0, &wakeup("rtapp", APP.1, APP.2, 0), k);
        // The workload runs without a wake-up seen: counted as unseen.
        a.feed(10, &switch(IDLE, 0, APP), k);
        // Preempted while runnable by a woken spinner, then back: its
        // return is not a wake-up.
        a.feed(100, &wakeup("spinner", SPIN.1, SPIN.2, 1), k);
        a.feed(150, &switch(APP, 0, SPIN), k);
        a.feed(900, &switch(SPIN, 1, APP), k);
        // A normal task's wake-up is not measured.
        a.feed(1_000, &wakeup("bash", 4242, 120, 1), k);
        a.feed(1_100, &switch(APP, 1, ("bash", 4242, 120)), k);
        let (t, samples) = a.take();
        assert_eq!(t.unseen_wakeups, 1);
        assert_eq!(samples.len(), 1);
        assert_eq!(samples[0].pid, SPIN.1);
        assert_eq!(samples[0].latency_ns, 50);
        assert!(!samples[0].from_timer);
        // The workload kept the woken spinner waiting for 50 ns.
        assert_eq!(ns(&t, Source::Thread, "rtapp"), 50);
    }

    #[test]
    fn unmatched_exits_count_nothing_and_lost_exits_are_dropped() {
        let mut a = Feeder::new(&[]);
        let k = &mut Kinds;
        a.feed(0, &Event::IrqExit { irq: 3 }, k);
        a.feed(10, &Event::SoftirqEntry { vec: 3 }, k);
        a.feed(
            20,
            &Event::IrqEntry {
                irq: 5,
                name: b"eth0",
            },
            k,
        );
        // The IRQ's exit was lost: the softirq's exit closes both.
        a.feed(100, &Event::SoftirqExit { vec: 3 }, k);
        let (t, _) = a.take();
        assert_eq!(ns(&t, Source::Softirq, "NET_RX"), 90);
        assert_eq!(ns(&t, Source::Irq, "5:eth0"), 0);
    }

    #[test]
    fn a_switch_in_the_kernel_did_not_trace_is_inferred_from_the_tasks_own_events() {
        // As on a kernel that records no switch out of idle: the spinner
        // arrives unseen; the first event in its context (a timer
        // interrupt it was running under) starts its run; its policy
        // changed while it ran, so its role comes from its switch-out.
        let mut a = CpuAccount::new(1, &["local_timer".to_string()]);
        let k = &mut Kinds;
        a.feed(0, APP.1, &switch(APP, 1, IDLE), k);
        // The workload is woken while the CPU is idle, its switch-in not
        // traced either: seen only leaving, it has no sample.
        a.feed(1_000, 0, &wakeup("rtapp", APP.1, APP.2, 1), k);
        a.feed(1_050, APP.1, &switch(APP, 1, IDLE), k);
        a.feed(2_000, SPIN.1, &Event::VectorEntry { vector: 0 }, k);
        a.feed(2_010, SPIN.1, &wakeup("rtapp", APP.1, APP.2, 1), k);
        a.feed(2_100, SPIN.1, &Event::VectorExit { vector: 0 }, k);
        a.feed(9_000, SPIN.1, &switch(SPIN, 0, APP), k);
        let (t, samples) = a.take();
        assert_eq!(t.untraced_switches, 1);
        // The spinner's run from the first event in its context, while the
        // workload waited from 2_010, less the interrupt that woke it
        // (an interrupt's time is known when it ends, so all of it).
        assert_eq!(ns(&t, Source::Thread, "spinner"), 9_000 - 2_010 - 100);
        assert_eq!(samples.len(), 1);
        assert_eq!(samples[0].latency_ns, 9_000 - 2_010);
    }

    #[test]
    fn a_wake_up_over_the_capture_threshold_is_handed_over_with_what_ran() {
        let mut a = Feeder {
            a: CpuAccount::new(1, &[]).capturing(Some(5_000)),
            current: 0,
        };
        let k = &mut Kinds;
        a.feed(0, &switch(IDLE, 0, SPIN), k);
        // Under the threshold: a sample, no spike.
        a.feed(100, &wakeup("rtapp", APP.1, APP.2, 1), k);
        a.feed(1_100, &switch(SPIN, 0, APP), k);
        a.feed(1_200, &switch(APP, 1, SPIN), k);
        // Over it: the spinner and an IRQ while the workload waited.
        a.feed(2_000, &wakeup("rtapp", APP.1, APP.2, 1), k);
        a.feed(
            3_000,
            &Event::IrqEntry {
                irq: 5,
                name: b"eth0",
            },
            k,
        );
        a.feed(3_500, &Event::IrqExit { irq: 5 }, k);
        a.feed(12_000, &switch(SPIN, 0, APP), k);
        let spikes = a.a.take_spikes();
        assert_eq!(spikes.len(), 1, "{spikes:?}");
        let s = &spikes[0];
        assert_eq!(
            (s.pid, s.latency_ns, s.woken_ns, s.ran_ns),
            (APP.1, 10_000, 2_000, 12_000)
        );
        assert_eq!(
            s.causes,
            vec![
                (Source::Thread, "spinner".to_string(), 10_000 - 500),
                (Source::Irq, "5:eth0".to_string(), 500),
            ]
        );
        let names: Vec<&str> = s.events.iter().map(|e| e.2).collect();
        assert_eq!(
            names,
            [
                "sched_wakeup",
                "irq_handler_entry",
                "irq_handler_exit",
                "sched_switch"
            ]
        );
        assert_eq!(
            s.events[3].1, SPIN.1,
            "the switch runs in the spinner's context"
        );
        // The window is dropped once nobody waits.
        assert!(a.a.window.is_empty());
    }

    #[test]
    fn sched_deadline_and_rr_tasks_are_workload_too() {
        // SCHED_DEADLINE tasks have the kernel priority -1; SCHED_RR ones
        // a real-time priority like FIFO's.
        let mut a = Feeder::new(&[]);
        let k = &mut Kinds;
        a.feed(0, &wakeup("dl-task", 3000, -1, 1), k);
        a.feed(40, &switch(IDLE, 0, ("dl-task", 3000, -1)), k);
        a.feed(50, &switch(("dl-task", 3000, -1), 1, IDLE), k);
        a.feed(60, &wakeup("rr-task", 3001, 89, 1), k);
        a.feed(90, &switch(IDLE, 0, ("rr-task", 3001, 89)), k);
        let (_, samples) = a.take();
        let got: Vec<(i32, u64)> = samples.iter().map(|s| (s.pid, s.latency_ns)).collect();
        assert_eq!(got, [(3000, 40), (3001, 30)]);
    }

    #[test]
    fn a_kernel_threads_wake_up_is_not_a_workload_sample() {
        let mut a = Feeder::new(&[]);
        let k = &mut Kinds;
        a.feed(0, &wakeup("migration/1", 20, 0, 1), k);
        a.feed(10, &switch(IDLE, 0, ("migration/1", 20, 0)), k);
        a.feed(50, &switch(("migration/1", 20, 0), 1, IDLE), k);
        let (t, samples) = a.take();
        assert!(samples.is_empty(), "{samples:?}");
        assert_eq!(ns(&t, Source::Thread, "migration"), 40);
        assert_eq!(t.unseen_wakeups, 0);
    }
}
