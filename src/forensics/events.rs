//! Lines of a tracefs `trace` file as events.
//!
//! The flight recorder reads `per_cpu/cpuN/trace` of its own instance: the
//! kernel's text rendering, one event a line,
//!
//! ```text
//!   <comm>-<pid>  [<cpu>] <flags> <seconds>.<fraction>: <event>: <fields>
//! ```
//!
//! with `trace_clock` set to `mono`, so the timestamps are
//! `CLOCK_MONOTONIC`, the samplers' clock. Comment lines start with `#`;
//! a gap the ring buffer overwrote while it was read shows as
//! `CPU:N [LOST M EVENTS]`. Only the events the attribution needs are
//! decoded (`Event::kind`); every other line is kept as text.

use serde::{Deserialize, Serialize};

/// One traced event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// `CLOCK_MONOTONIC` in nanoseconds (the text shows microseconds).
    pub ts_ns: u64,
    /// The task that was current on the CPU when the event fired.
    pub task: String,
    pub pid: i32,
    pub cpu: usize,
    /// The event's name, e.g. `sched_switch`.
    pub event: String,
    /// Its fields as the kernel printed them.
    pub fields: String,
}

/// What one line of a `trace` file is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    Event(Event),
    /// The ring buffer overwrote this many events while it was read.
    Lost(u64),
    /// A comment, a header or an empty line.
    Other,
}

/// The events the attribution understands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind<'a> {
    /// `sched_switch`: the task switched from (its priority as it
    /// leaves) and the task switched to.
    Switch {
        prev_pid: i32,
        prev_prio: i32,
        next_comm: &'a str,
        next_pid: i32,
        next_prio: i32,
    },
    /// `sched_waking` or `sched_wakeup` of a task.
    Wakeup {
        pid: i32,
    },
    /// `irq_handler_entry`.
    IrqEntry {
        irq: u32,
        name: &'a str,
    },
    IrqExit,
    /// `softirq_entry`, with its vector's action (`TIMER`, `NET_RX`, ...).
    SoftirqEntry {
        action: &'a str,
    },
    SoftirqExit,
    /// An x86 system vector (`local_timer_entry`, `reschedule_entry`,
    /// `call_function_single_entry`, ...): its name without `_entry`.
    VectorEntry {
        name: &'a str,
    },
    VectorExit,
    /// `hrtimer_expire_entry`: the callback about to run.
    HrtimerEntry {
        function: &'a str,
    },
    HrtimerExit,
    /// `nmi_handler`: printed when an NMI handler returns, with its time.
    Nmi {
        handler: &'a str,
        delta_ns: u64,
    },
    Other,
}

/// The x86 system vectors whose `_entry`/`_exit` events bracket an
/// interrupt.
pub const VECTORS: &[&str] = &[
    "local_timer",
    "reschedule",
    "call_function",
    "call_function_single",
    "irq_work",
    "x86_platform_ipi",
    "thermal_apic",
    "error_apic",
    "spurious_apic",
];

impl Event {
    pub fn kind(&self) -> Kind<'_> {
        let f = self.fields.as_str();
        match self.event.as_str() {
            "sched_switch" => {
                let Some((prev, next)) = f.split_once(" ==> ") else {
                    return Kind::Other;
                };
                let prev_pid =
                    between(prev, " prev_pid=", " prev_prio=").and_then(|p| p.parse().ok());
                let prev_prio =
                    between(prev, " prev_prio=", " prev_state=").and_then(|p| p.parse().ok());
                let comm = between(next, "next_comm=", " next_pid=");
                let pid = between(next, " next_pid=", " next_prio=").and_then(|p| p.parse().ok());
                let prio = after(next, " next_prio=").and_then(|p| p.parse().ok());
                match (prev_pid, prev_prio, comm, pid, prio) {
                    (
                        Some(prev_pid),
                        Some(prev_prio),
                        Some(next_comm),
                        Some(next_pid),
                        Some(next_prio),
                    ) => Kind::Switch {
                        prev_pid,
                        prev_prio,
                        next_comm,
                        next_pid,
                        next_prio,
                    },
                    _ => Kind::Other,
                }
            }
            "sched_waking" | "sched_wakeup" => {
                match after(f, " pid=").and_then(|p| p.parse().ok()) {
                    Some(pid) => Kind::Wakeup { pid },
                    None => Kind::Other,
                }
            }
            "irq_handler_entry" => {
                let irq = between(f, "irq=", " name=").and_then(|n| n.parse().ok());
                match (irq, f.split_once(" name=")) {
                    (Some(irq), Some((_, name))) => Kind::IrqEntry { irq, name },
                    _ => Kind::Other,
                }
            }
            "irq_handler_exit" => Kind::IrqExit,
            "softirq_entry" => Kind::SoftirqEntry {
                action: between(f, "[action=", "]").unwrap_or(f),
            },
            "softirq_exit" => Kind::SoftirqExit,
            "hrtimer_expire_entry" => Kind::HrtimerEntry {
                function: after(f, " function=").unwrap_or("?"),
            },
            "hrtimer_expire_exit" => Kind::HrtimerExit,
            "nmi_handler" => {
                let handler = between(f, "handler=", " ").unwrap_or("?");
                let handler = handler.split('+').next().unwrap_or(handler);
                match after(f, " delta_ns=").and_then(|d| d.parse().ok()) {
                    Some(delta_ns) => Kind::Nmi { handler, delta_ns },
                    None => Kind::Other,
                }
            }
            name => {
                if let Some(vector) = name.strip_suffix("_entry")
                    && VECTORS.contains(&vector)
                {
                    return Kind::VectorEntry { name: vector };
                }
                if let Some(vector) = name.strip_suffix("_exit")
                    && VECTORS.contains(&vector)
                {
                    return Kind::VectorExit;
                }
                Kind::Other
            }
        }
    }
}

/// The interrupt a kernel thread serves, from its name: `irq/24-virtio0`
/// (an interrupt's thread: every handler on PREEMPT_RT, or under
/// `threadirqs`) is interrupt 24, action `virtio0`. The name is the
/// thread's `comm`, cut at 15 bytes, so a long action name is cut too.
pub fn interrupt_of_thread(comm: &str) -> Option<(u32, &str)> {
    let (irq, action) = comm.strip_prefix("irq/")?.split_once('-')?;
    if irq.is_empty() || !irq.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((irq.parse().ok()?, action))
}

/// The text between `start` and the next `end` after it.
fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = text.find(start)? + start.len();
    let len = text[from..].find(end)?;
    Some(&text[from..from + len])
}

/// The word after `start` (up to a space or the end).
fn after<'a>(text: &'a str, start: &str) -> Option<&'a str> {
    let from = text.find(start)? + start.len();
    Some(text[from..].split(' ').next().unwrap_or(""))
}

/// Reads one line of a `trace` file.
pub fn parse_line(line: &str) -> Line {
    let trimmed = line.trim_start();
    if trimmed.is_empty() || trimmed.starts_with('#') {
        return Line::Other;
    }
    if let Some(rest) = trimmed.strip_prefix("CPU:")
        && let Some(lost) = between(rest, "[LOST ", " EVENTS]")
    {
        return Line::Lost(lost.parse().unwrap_or(1));
    }
    parse_event(trimmed).map_or(Line::Other, Line::Event)
}

fn parse_event(line: &str) -> Option<Event> {
    // The task's name may hold spaces, dashes and brackets: the CPU column
    // is the first " [digits] " preceded by "-pid".
    let mut search = 0;
    let (task_pid, cpu, rest) = loop {
        let open = search + line[search..].find(" [")?;
        let after_open = &line[open + 2..];
        let close = after_open.find(']')?;
        let digits = &after_open[..close];
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            let task_pid = line[..open].trim_end();
            if let Some((_, pid)) = task_pid.rsplit_once('-')
                && pid.parse::<i32>().is_ok()
            {
                break (task_pid, digits.parse().ok()?, &after_open[close + 1..]);
            }
        }
        search = open + 2;
    };
    let (task, pid) = task_pid.rsplit_once('-')?;
    // "<flags> <timestamp>: <event>: <fields>"
    let mut words = rest.trim_start().splitn(2, ' ');
    let first = words.next()?;
    let (stamp, after_stamp) = if first.ends_with(':') {
        // No flags column (the irq-info option off).
        (first, words.next().unwrap_or(""))
    } else {
        let rest = words.next()?.trim_start();
        let (stamp, tail) = rest.split_once(' ').unwrap_or((rest, ""));
        (stamp, tail)
    };
    let ts_ns = parse_timestamp(stamp.strip_suffix(':')?)?;
    let (event, fields) = after_stamp
        .split_once(": ")
        .unwrap_or((after_stamp.trim_end_matches(':'), ""));
    Some(Event {
        ts_ns,
        task: task.to_string(),
        pid: pid.parse().ok()?,
        cpu,
        event: event.trim().to_string(),
        fields: fields.trim_end().to_string(),
    })
}

/// `12345.678901` (seconds and a fraction of any length) in nanoseconds.
fn parse_timestamp(stamp: &str) -> Option<u64> {
    let (secs, frac) = stamp.split_once('.').unwrap_or((stamp, ""));
    if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs: u64 = secs.parse().ok()?;
    let mut frac_ns: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    for _ in frac.len()..9 {
        frac_ns *= 10;
    }
    secs.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(line: &str) -> Event {
        match parse_line(line) {
            Line::Event(e) => e,
            other => panic!("not an event: {other:?} from {line:?}"),
        }
    }

    #[test]
    fn lines_of_a_real_trace_are_read() {
        let e = event(
            "          <idle>-0       [001] d..2. 30784.462480: sched_switch: prev_comm=swapper/1 \
             prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=bash next_pid=9502 next_prio=120",
        );
        assert_eq!(e.ts_ns, 30_784_462_480_000);
        assert_eq!((e.task.as_str(), e.pid, e.cpu), ("<idle>", 0, 1));
        assert_eq!(e.event, "sched_switch");
        assert_eq!(
            e.kind(),
            Kind::Switch {
                prev_pid: 0,
                prev_prio: 120,
                next_comm: "bash",
                next_pid: 9502,
                next_prio: 120
            }
        );
        let e = event(
            "  kworker/u8:1-mm 31-77 [000] d.h1. 30784.462933: irq_handler_entry: irq=36 name=virtio1-req.0",
        );
        assert_eq!((e.task.as_str(), e.pid), ("kworker/u8:1-mm 31", 77));
        assert_eq!(
            e.kind(),
            Kind::IrqEntry {
                irq: 36,
                name: "virtio1-req.0"
            }
        );
        let e = event(
            "cyclictest-9529    [001] d..4. 30811.206065: sched_wakeup: comm=tail pid=9536 prio=120 target_cpu=001",
        );
        assert_eq!(e.kind(), Kind::Wakeup { pid: 9536 });
        let e = event("<idle>-0 [000] ..s1. 30784.460039: softirq_entry: vec=7 [action=SCHED]");
        assert_eq!(e.kind(), Kind::SoftirqEntry { action: "SCHED" });
        let e = event("<idle>-0 [001] d.h1. 1.000001: local_timer_entry: vector=236");
        assert_eq!(
            e.kind(),
            Kind::VectorEntry {
                name: "local_timer"
            }
        );
        let e = event("<idle>-0 [001] d.h1. 1.000002: local_timer_exit: vector=236");
        assert_eq!(e.kind(), Kind::VectorExit);
        let e = event(
            "<idle>-0 [001] d.h2. 1.000003: hrtimer_expire_entry: hrtimer=00000000c69774a5 now=1000003000 function=hrtimer_wakeup",
        );
        assert_eq!(
            e.kind(),
            Kind::HrtimerEntry {
                function: "hrtimer_wakeup"
            }
        );
        let e = event(
            "bash-1 [001] d.Z1. 2.5: nmi_handler: handler=perf_event_nmi_handler+0x0/0x30 delta_ns=2345 handled=1",
        );
        assert_eq!(e.ts_ns, 2_500_000_000);
        assert_eq!(
            e.kind(),
            Kind::Nmi {
                handler: "perf_event_nmi_handler",
                delta_ns: 2345
            }
        );
    }

    #[test]
    fn comments_gaps_and_garbage_are_told_apart() {
        assert_eq!(parse_line("# tracer: nop"), Line::Other);
        assert_eq!(parse_line(""), Line::Other);
        assert_eq!(parse_line("CPU:1 [LOST 123 EVENTS]"), Line::Lost(123));
        assert_eq!(parse_line("##### CPU 1 buffer started ####"), Line::Other);
        assert_eq!(parse_line("no brackets here"), Line::Other);
        assert_eq!(parse_line("a-1 [0] d..1. 12.x: e: f"), Line::Other);
        assert_eq!(parse_line("a-1 [0] d..1. 12.1234567890: e: f"), Line::Other);
        // An event of no interest keeps its text.
        let e = event("a-1 [0] d..1. 12.5: ipi_send_cpu: cpu=1 callsite=x");
        assert_eq!(e.kind(), Kind::Other);
        assert_eq!(e.fields, "cpu=1 callsite=x");
    }

    #[test]
    fn malformed_fields_decode_as_other() {
        for (name, fields) in [
            ("sched_switch", "prev_comm=a prev_pid=1"),
            ("sched_switch", "x ==> next_comm=b next_pid=z next_prio=1"),
            ("sched_wakeup", "comm=a"),
            ("irq_handler_entry", "irq=x name=y"),
            ("nmi_handler", "handler=x"),
        ] {
            let e = Event {
                ts_ns: 0,
                task: "t".into(),
                pid: 1,
                cpu: 0,
                event: name.into(),
                fields: fields.into(),
            };
            assert_eq!(e.kind(), Kind::Other, "{name}: {fields}");
        }
    }
}
