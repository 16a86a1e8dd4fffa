//! The observer's tracefs instance (`instances/latencyd-observe-PID`,
//! owned as `crate::tracefs` describes): the
//! observed CPUs only (`tracing_cpumask`), `mono` clock, the events the
//! accounting reads with filters in the kernel so that what is not needed
//! never reaches the ring buffer, read as binary pages from each CPU's
//! `trace_pipe_raw` (a consuming read, no text formatting in the kernel).

use std::fs::{self, File};
use std::io::{ErrorKind, Read};
use std::path::Path;

use super::events::Decoder;
use crate::tracefs::read_text as read;
use crate::tracefs::ring::PageLayout;
use crate::tracefs::{self, Capability, Check, Instance, Role};

/// Events the accounting cannot do without.
const REQUIRED: &[(&str, &str)] = &[
    ("sched", "sched_switch"),
    ("sched", "sched_wakeup"),
    ("irq", "irq_handler_entry"),
    ("irq", "irq_handler_exit"),
    ("irq", "softirq_entry"),
    ("irq", "softirq_exit"),
];

/// Only real-time tasks' wake-ups are measured.
const WAKEUP_FILTER: &str = "prio < 100";
/// Only sleep timers (`hrtimer_wakeup`: clock_nanosleep, nanosleep,
/// futex and poll timeouts) tell a task's intended wake-up time; others
/// (the tick, timerfd) would be mistaken for it. Linux 6.2 and later
/// resolve the function's name in a filter.
const SLEEP_TIMER_FILTER: &str = "function.function == hrtimer_wakeup";
/// The sleep timers' function, whose address older kernels compare with.
const SLEEP_TIMER_FUNCTION: &str = "hrtimer_wakeup";
const KALLSYMS: &str = "/proc/kallsyms";

/// `function == 0x…`, the filter a kernel before 6.2 takes for sleep
/// timers: the address of `hrtimer_wakeup` from `/proc/kallsyms`. None
/// when the symbol is missing or its address hidden (all zeroes under
/// `kptr_restrict`, or to a reader without CAP_SYSLOG).
/// [`sleep_timer_filter_by_address`] over `/proc/kallsyms`, read a line at
/// a time (it holds tens of MiB on a distribution's kernel with modules;
/// a line is at most a symbol's length, and the whole read stops at
/// [`MAX_KALLSYMS_BYTES`]).
fn sleep_timer_filter_from_kallsyms() -> Option<String> {
    use std::io::{BufRead, Read};
    let file = fs::File::open(KALLSYMS).ok()?;
    std::io::BufReader::new(file.take(MAX_KALLSYMS_BYTES))
        .split(b'\n')
        .map_while(Result::ok)
        .find_map(|line| sleep_timer_filter_by_address(std::str::from_utf8(&line).ok()?))
}

/// The most of `/proc/kallsyms` read looking for the sleep timer.
const MAX_KALLSYMS_BYTES: u64 = 256 << 20;

pub(crate) fn sleep_timer_filter_by_address(kallsyms: &str) -> Option<String> {
    kallsyms.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        let (address, _kind, name) = (words.next()?, words.next()?, words.next()?);
        if name != SLEEP_TIMER_FUNCTION || words.next().is_some() {
            return None;
        }
        let address = u64::from_str_radix(address, 16).ok()?;
        (address != 0).then(|| format!("function == 0x{address:x}"))
    })
}

/// The instance, recording, with a reader per observed CPU.
pub struct Tracer {
    /// Removed on drop, after the readers are closed (an instance with an
    /// open file cannot be removed).
    instance: Instance,
    pub decoder: Decoder,
    pub layout: PageLayout,
    pub page_size: usize,
    pub readers: Vec<(usize, File)>,
    pub capabilities: Vec<Capability>,
    pub notes: Vec<String>,
    stats_dir: std::path::PathBuf,
    /// Checks made, to sweep leftovers every `SWEEP_CHECKS`.
    checks: std::cell::Cell<u64>,
}

/// Every how many checks (one per 200 ms) the observer instances left by
/// latencyd processes that died since are removed: 10 s.
const SWEEP_CHECKS: u64 = 50;

impl Tracer {
    /// Sets the instance up under `tracefs` for `cpus` and starts it.
    pub fn open(tracefs_dir: &Path, buffer_size_kb: u64, cpus: &[usize]) -> Result<Tracer, String> {
        let root = tracefs::locate_for(tracefs_dir, "observe")?;
        let (instance, notes) = Instance::create(&root, Role::Observe)?;
        Tracer::configure(instance, notes, &root, buffer_size_kb, cpus)
    }

    /// Sets `instance` up for `cpus` and starts it.
    fn configure(
        instance: Instance,
        notes: Vec<String>,
        root: &Path,
        buffer_size_kb: u64,
        cpus: &[usize],
    ) -> Result<Tracer, String> {
        let dir = instance.dir().to_path_buf();
        instance.write("tracing_on", "0")?;
        instance.write("trace_clock", "mono")?;
        instance.write("buffer_size_kb", &buffer_size_kb.to_string())?;
        instance.write("tracing_cpumask", &tracefs::cpumask(cpus))?;
        let mut events = Events {
            instance: &instance,
            dir: &dir,
            decoder: Decoder::default(),
            capabilities: Vec::new(),
        };
        for (system, name) in REQUIRED {
            events.required(system, name)?;
        }
        events.wakeup_filter();
        events.sleep_timers();
        events.nmi();
        events.irq_vectors();
        let Events {
            decoder,
            capabilities,
            ..
        } = events;
        let layout = PageLayout::parse(&read(&root.join("events/header_page"))?)?;
        let page_size = tracefs::page_size(&dir);
        let readers = tracefs::raw_readers(&dir, cpus)?;
        instance.write("tracing_on", "1")?;
        Ok(Tracer {
            stats_dir: dir.join("per_cpu"),
            instance,
            decoder,
            layout,
            page_size,
            readers,
            capabilities,
            notes,
            checks: std::cell::Cell::new(0),
        })
    }

    /// Reads every page `reader` has now into `page` and hands each to
    /// `each`; returns the pages read. Stops at the first empty read.
    pub fn drain(
        file: &mut File,
        page: &mut [u8],
        mut each: impl FnMut(&[u8]),
    ) -> std::io::Result<u64> {
        let mut pages = 0;
        loop {
            match file.read(page) {
                Ok(0) => return Ok(pages),
                Ok(n) => {
                    pages += 1;
                    each(&page[..n]);
                }
                Err(err) if err.kind() == ErrorKind::WouldBlock => return Ok(pages),
                Err(err) if err.kind() == ErrorKind::Interrupted => continue,
                Err(err) => return Err(err),
            }
        }
    }

    /// Reads the instance's settings back and sets back what another
    /// program changed.
    /// Every `SWEEP_CHECKS`, also removes the observer instances left by
    /// latencyd processes gone since, and says so.
    pub fn check(&self) -> Check {
        let checks = self.checks.get() + 1;
        self.checks.set(checks);
        if checks.is_multiple_of(SWEEP_CHECKS) {
            for note in self.instance.sweep_leftovers() {
                tracing::warn!("observe: {note}");
            }
        }
        self.instance.check()
    }

    /// The instance's name under `instances/`.
    pub fn instance_name(&self) -> String {
        self.instance.name()
    }

    /// Events the ring buffer of `cpu` lost so far (overwritten before
    /// they were read, or dropped), from `per_cpu/cpuN/stats`.
    pub fn lost(&self, cpu: usize) -> u64 {
        let text = crate::tracefs::read_text(&self.stats_dir.join(format!("cpu{cpu}/stats")))
            .unwrap_or_default();
        text.lines()
            .filter_map(|line| {
                let (key, value) = line.split_once(':')?;
                matches!(key.trim(), "overrun" | "dropped events")
                    .then(|| value.trim().parse::<u64>().ok())?
            })
            .sum()
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        // The readers hold the instance: closed first, it can be removed.
        self.readers.clear();
    }
}

/// The events of the observer's instance as they are enabled: the
/// decoder learns each one's format, and what the kernel offers beyond the
/// required ones is said as a capability.
struct Events<'a> {
    instance: &'a Instance,
    dir: &'a Path,
    decoder: Decoder,
    capabilities: Vec<Capability>,
}

impl Events<'_> {
    fn format(&self, system: &str, name: &str) -> Result<String, String> {
        read(&self.dir.join(format!("events/{system}/{name}/format")))
    }

    /// An event the observer cannot do without.
    fn required(&mut self, system: &str, name: &str) -> Result<(), String> {
        let text = self.format(system, name).map_err(|_| {
            format!("the kernel has no {system}:{name} trace event, which observe needs")
        })?;
        self.decoder.add(system, name, &text)?;
        self.instance
            .write(&format!("events/{system}/{name}/enable"), "1")
    }

    /// An event enabled if the kernel has it, with `filter` when given.
    fn optional(&mut self, system: &str, name: &str, filter: Option<&str>) -> bool {
        self.format(system, name).is_ok_and(|text| {
            filter.is_none_or(|f| {
                self.instance
                    .write(&format!("events/{system}/{name}/filter"), f)
                    .is_ok()
            }) && self.decoder.add(system, name, &text).is_ok()
                && self
                    .instance
                    .write(&format!("events/{system}/{name}/enable"), "1")
                    .is_ok()
        })
    }

    fn wakeup_filter(&mut self) {
        let filtered = self
            .instance
            .write("events/sched/sched_wakeup/filter", WAKEUP_FILTER)
            .is_ok();
        self.capabilities.push(Capability::new(
            "wakeup_filter",
            filtered,
            if filtered {
                "only real-time tasks' wake-ups are recorded (filtered in the kernel)"
            } else {
                "the kernel refused the wake-up filter: every wake-up is recorded and the \
                 others are dropped here (more events per second)"
            },
        ));
    }

    /// Sleep timers, for latency from the time a task asked for: filtered
    /// by the function's name (6.2 and later) or its address.
    fn sleep_timers(&mut self) {
        let timers = [
            ("timer", "hrtimer_start"),
            ("timer", "hrtimer_expire_entry"),
        ];
        let install = |events: &mut Self, filter: &str| {
            timers
                .iter()
                .all(|(system, name)| events.optional(system, name, Some(filter)))
        };
        let by_name = install(self, SLEEP_TIMER_FILTER);
        let by_address = !by_name
            && sleep_timer_filter_from_kallsyms().is_some_and(|filter| install(self, &filter));
        let timers_ok = by_name || by_address;
        if !timers_ok {
            for (system, name) in timers {
                let _ = self
                    .instance
                    .write(&format!("events/{system}/{name}/enable"), "0");
            }
        }
        self.capabilities.push(Capability::new(
            "sleep_timers",
            timers_ok,
            if by_name {
                "a sleep that a timer ends is measured from the time the task asked for, as \
                 cyclictest does"
            } else if by_address {
                "a sleep that a timer ends is measured from the time the task asked for, as \
                 cyclictest does (timers filtered by hrtimer_wakeup's address from \
                 /proc/kallsyms: this kernel, before 6.2, filters by address only)"
            } else {
                "no sleep-timer filter could be set, by name (Linux 6.2 and later) nor by \
                 hrtimer_wakeup's address (hidden in /proc/kallsyms by kptr_restrict or without \
                 CAP_SYSLOG, or no hrtimer events): wake-up latency is measured from the \
                 wake-up, without the timer interrupt's own delay"
            },
        ));
    }

    fn nmi(&mut self) {
        let nmi = self.optional("nmi", "nmi_handler", None);
        self.capabilities.push(Capability::new(
            "nmi_events",
            nmi,
            if nmi {
                "NMIs are counted with their duration"
            } else {
                "no nmi:nmi_handler event: NMI time falls into what they interrupted"
            },
        ));
    }

    /// x86's system vectors (local timer, IPIs), each an entry and exit.
    fn irq_vectors(&mut self) {
        let mut vectors = Vec::new();
        if let Ok(entries) = fs::read_dir(self.dir.join("events/irq_vectors")) {
            let mut names: Vec<String> = entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter_map(|n| n.strip_suffix("_entry").map(str::to_string))
                .collect();
            names.sort();
            for base in names {
                let pair = [format!("{base}_entry"), format!("{base}_exit")];
                if pair
                    .iter()
                    .all(|name| self.optional("irq_vectors", name, None))
                {
                    vectors.push(base);
                }
            }
        }
        let exists = self.dir.join("events/irq_vectors").exists();
        self.capabilities.push(Capability::new(
            "irq_vectors",
            !vectors.is_empty(),
            if vectors.is_empty() && !exists {
                "no irq_vectors events (they are x86's): on this architecture the timer and \
                 IPIs are interrupts like any other, counted by number and name"
                    .to_string()
            } else if vectors.is_empty() {
                "the kernel refused the irq_vectors events: the local timer and IPIs fall into \
                 what they interrupted"
                    .to_string()
            } else {
                format!("system vectors counted as IRQs: {}", vectors.join(", "))
            },
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_without_an_event_the_accounting_needs_is_named() {
        // An instance with writable files but no events: the first
        // missing one is named.
        let dir = tempfile::tempdir().unwrap();
        let instance = Instance::unpinned(&dir.path().join("instances/x"), Role::Observe);
        let err = Tracer::configure(instance, vec![], dir.path(), 1024, &[1])
            .err()
            .unwrap();
        assert!(
            err.contains("no sched:sched_switch trace event, which observe needs"),
            "{err}"
        );
    }

    #[test]
    fn kernels_before_6_2_filter_sleep_timers_by_address_from_kallsyms() {
        // /proc/kallsyms of Debian's 6.1 PREEMPT_RT kernel (amd64), as the
        // kernel matrix captured it, and of the same kernel read without
        // CAP_SYSLOG (addresses zeroed).
        let kallsyms = include_str!("../../../tests/data/kernels/6.1-rt-amd64/kallsyms");
        assert_eq!(
            sleep_timer_filter_by_address(kallsyms).as_deref(),
            Some("function == 0xffffffff9ff58c90")
        );
        let hidden = "0000000000000000 t hrtimer_wakeup\n0000000000000000 t tick_sched_timer\n";
        assert_eq!(sleep_timer_filter_by_address(hidden), None);
        // A module's symbol of a similar name is not taken for it.
        let module = "ffffffffc0001000 t hrtimer_wakeup\t[some_module]\n";
        assert_eq!(sleep_timer_filter_by_address(module), None);
        assert_eq!(sleep_timer_filter_by_address(""), None);
    }

    #[test]
    fn tracefs_files_are_read_whole_in_one_large_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("header_page");
        let text = "field: u64 timestamp;".repeat(5_000);
        fs::write(&path, &text).unwrap();
        assert_eq!(read(&path).unwrap(), text);
        assert!(
            read(&dir.path().join("none"))
                .unwrap_err()
                .contains("cannot read")
        );
    }
}
