//! The events the observer's accounting reads (the scheduler's switches
//! and wake-ups, interrupts, softirqs, timers, NMIs), decoded from ring
//! buffer records by the layouts their `format` files give
//! (`tracefs::format`).

use std::collections::HashMap;

use crate::tracefs::format::{Field, Format, Record};

/// An event the accounting understands, decoded from a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event<'a> {
    Switch {
        prev_comm: &'a [u8],
        prev_pid: i32,
        prev_prio: i32,
        /// 0 when the task was preempted (still runnable).
        prev_state: i64,
        next_comm: &'a [u8],
        next_pid: i32,
        next_prio: i32,
    },
    Wakeup {
        comm: &'a [u8],
        pid: i32,
        prio: i32,
        target_cpu: i32,
    },
    IrqEntry {
        irq: i32,
        name: &'a [u8],
    },
    IrqExit {
        irq: i32,
    },
    SoftirqEntry {
        vec: u32,
    },
    SoftirqExit {
        vec: u32,
    },
    /// A system vector (x86: `local_timer`, `reschedule`, ...), by its
    /// index in `Decoder::vector_names`.
    VectorEntry {
        vector: usize,
    },
    VectorExit {
        vector: usize,
    },
    Nmi {
        delta_ns: i64,
    },
    /// `hrtimer_start`: a timer armed by the task `pid` (0 in interrupt
    /// context) for `softexpires`, in the timer's clock.
    TimerStart {
        timer: u64,
        softexpires: i64,
        pid: i32,
    },
    /// `hrtimer_expire_entry`: the timer runs; `now` in its clock.
    TimerExpire {
        timer: u64,
        now: i64,
    },
}

#[derive(Debug, Clone)]
enum Layout {
    Switch {
        prev_comm: Field,
        prev_pid: Field,
        prev_prio: Field,
        prev_state: Field,
        next_comm: Field,
        next_pid: Field,
        next_prio: Field,
    },
    Wakeup {
        comm: Field,
        pid: Field,
        prio: Field,
        target_cpu: Field,
    },
    IrqEntry {
        irq: Field,
        name: Field,
    },
    IrqExit {
        irq: Field,
    },
    Softirq {
        entry: bool,
        vec: Field,
    },
    Vector {
        entry: bool,
        vector: usize,
    },
    Nmi {
        delta_ns: Field,
    },
    TimerStart {
        timer: Field,
        softexpires: Field,
        pid: Field,
    },
    TimerExpire {
        timer: Field,
        now: Field,
    },
}

/// Decodes records by their event ID.
#[derive(Debug, Clone, Default)]
pub struct Decoder {
    layouts: HashMap<u16, Layout>,
    /// The system vectors known, by index (`local_timer`, ...).
    pub vector_names: Vec<String>,
}

impl Decoder {
    /// Learns the event `system/name` from its `format` text. Events the
    /// accounting does not use are refused with the reason.
    pub fn add(&mut self, system: &str, name: &str, format_text: &str) -> Result<(), String> {
        let event = format!("{system}:{name}");
        let format = Format::parse(format_text).map_err(|e| format!("{event}: {e}"))?;
        let f = |field: &str| format.field(&event, field);
        let common_pid = f("common_pid")?;
        let layout = match (system, name) {
            ("sched", "sched_switch") => Layout::Switch {
                prev_comm: f("prev_comm")?,
                prev_pid: f("prev_pid")?,
                prev_prio: f("prev_prio")?,
                prev_state: f("prev_state")?,
                next_comm: f("next_comm")?,
                next_pid: f("next_pid")?,
                next_prio: f("next_prio")?,
            },
            ("sched", "sched_wakeup") => Layout::Wakeup {
                comm: f("comm")?,
                pid: f("pid")?,
                prio: f("prio")?,
                target_cpu: f("target_cpu")?,
            },
            ("irq", "irq_handler_entry") => Layout::IrqEntry {
                irq: f("irq")?,
                name: f("name")?,
            },
            ("irq", "irq_handler_exit") => Layout::IrqExit { irq: f("irq")? },
            ("irq", "softirq_entry") => Layout::Softirq {
                entry: true,
                vec: f("vec")?,
            },
            ("irq", "softirq_exit") => Layout::Softirq {
                entry: false,
                vec: f("vec")?,
            },
            ("nmi", "nmi_handler") => Layout::Nmi {
                delta_ns: f("delta_ns")?,
            },
            ("timer", "hrtimer_start") => Layout::TimerStart {
                timer: f("hrtimer")?,
                softexpires: f("softexpires")?,
                pid: common_pid,
            },
            ("timer", "hrtimer_expire_entry") => Layout::TimerExpire {
                timer: f("hrtimer")?,
                now: f("now")?,
            },
            ("irq_vectors", vector) => {
                let (base, entry) = if let Some(base) = vector.strip_suffix("_entry") {
                    (base, true)
                } else if let Some(base) = vector.strip_suffix("_exit") {
                    (base, false)
                } else {
                    return Err(format!("{event} is not an entry or exit event"));
                };
                let index = match self.vector_names.iter().position(|v| v == base) {
                    Some(i) => i,
                    None => {
                        self.vector_names.push(base.to_string());
                        self.vector_names.len() - 1
                    }
                };
                Layout::Vector {
                    entry,
                    vector: index,
                }
            }
            _ => return Err(format!("{event} is not an event the accounting reads")),
        };
        self.layouts.insert(format.id, layout);
        Ok(())
    }

    /// The event in `record` (a ring-buffer payload), if it is one the
    /// decoder knows and its fields fit the record.
    pub fn decode<'a>(&self, record: &'a [u8]) -> Option<Event<'a>> {
        let id = u16::from_ne_bytes(record.get(..2)?.try_into().ok()?);
        let r = Record(record);
        Some(match self.layouts.get(&id)? {
            Layout::Switch {
                prev_comm,
                prev_pid,
                prev_prio,
                prev_state,
                next_comm,
                next_pid,
                next_prio,
            } => Event::Switch {
                prev_comm: r.comm(prev_comm)?,
                prev_pid: r.int(prev_pid)? as i32,
                prev_prio: r.int(prev_prio)? as i32,
                prev_state: r.int(prev_state)?,
                next_comm: r.comm(next_comm)?,
                next_pid: r.int(next_pid)? as i32,
                next_prio: r.int(next_prio)? as i32,
            },
            Layout::Wakeup {
                comm,
                pid,
                prio,
                target_cpu,
            } => Event::Wakeup {
                comm: r.comm(comm)?,
                pid: r.int(pid)? as i32,
                prio: r.int(prio)? as i32,
                target_cpu: r.int(target_cpu)? as i32,
            },
            Layout::IrqEntry { irq, name } => Event::IrqEntry {
                irq: r.int(irq)? as i32,
                name: r.string(name)?,
            },
            Layout::IrqExit { irq } => Event::IrqExit {
                irq: r.int(irq)? as i32,
            },
            Layout::Softirq { entry, vec } => {
                let vec = r.int(vec)? as u32;
                if *entry {
                    Event::SoftirqEntry { vec }
                } else {
                    Event::SoftirqExit { vec }
                }
            }
            Layout::Vector { entry, vector } => {
                if *entry {
                    Event::VectorEntry { vector: *vector }
                } else {
                    Event::VectorExit { vector: *vector }
                }
            }
            Layout::Nmi { delta_ns } => Event::Nmi {
                delta_ns: r.int(delta_ns)?,
            },
            Layout::TimerStart {
                timer,
                softexpires,
                pid,
            } => Event::TimerStart {
                timer: r.int(timer)? as u64,
                softexpires: r.int(softexpires)?,
                pid: r.int(pid)? as i32,
            },
            Layout::TimerExpire { timer, now } => Event::TimerExpire {
                timer: r.int(timer)? as u64,
                now: r.int(now)?,
            },
        })
    }
}

/// An event as the kernel's text output names and prints it, for a
/// capture: (event name, fields).
pub fn describe(event: &Event<'_>, vector_names: &[String]) -> (&'static str, String) {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let vector = |v: usize| vector_names.get(v).cloned().unwrap_or_default();
    match *event {
        Event::Switch {
            prev_comm,
            prev_pid,
            prev_prio,
            prev_state,
            next_comm,
            next_pid,
            next_prio,
        } => (
            "sched_switch",
            format!(
                "prev_comm={} prev_pid={prev_pid} prev_prio={prev_prio} prev_state={prev_state:#x} \
                 ==> next_comm={} next_pid={next_pid} next_prio={next_prio}",
                text(prev_comm),
                text(next_comm)
            ),
        ),
        Event::Wakeup {
            comm,
            pid,
            prio,
            target_cpu,
        } => (
            "sched_wakeup",
            format!(
                "comm={} pid={pid} prio={prio} target_cpu={target_cpu:03}",
                text(comm)
            ),
        ),
        Event::IrqEntry { irq, name } => (
            "irq_handler_entry",
            format!("irq={irq} name={}", text(name)),
        ),
        Event::IrqExit { irq } => ("irq_handler_exit", format!("irq={irq}")),
        Event::SoftirqEntry { vec } => ("softirq_entry", format!("vec={vec}")),
        Event::SoftirqExit { vec } => ("softirq_exit", format!("vec={vec}")),
        Event::VectorEntry { vector: v } => ("vector_entry", vector(v)),
        Event::VectorExit { vector: v } => ("vector_exit", vector(v)),
        Event::Nmi { delta_ns } => ("nmi_handler", format!("delta_ns: {delta_ns}")),
        Event::TimerStart {
            timer, softexpires, ..
        } => (
            "hrtimer_start",
            format!("hrtimer={timer:#x} softexpires={softexpires}"),
        ),
        Event::TimerExpire { timer, now } => (
            "hrtimer_expire_entry",
            format!("hrtimer={timer:#x} now={now}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracefs::format::build::*;
    use crate::tracefs::format::samples;

    fn decoder() -> Decoder {
        let mut d = Decoder::default();
        d.add("sched", "sched_switch", &samples::sched_switch())
            .unwrap();
        d.add("sched", "sched_wakeup", &samples::sched_wakeup())
            .unwrap();
        d.add("irq", "irq_handler_entry", &samples::irq_handler_entry())
            .unwrap();
        d.add("irq", "irq_handler_exit", &samples::irq_handler_exit())
            .unwrap();
        d.add("irq", "softirq_entry", &samples::softirq(227))
            .unwrap();
        d.add("irq", "softirq_exit", &samples::softirq(228))
            .unwrap();
        d.add("timer", "hrtimer_start", &samples::hrtimer_start())
            .unwrap();
        d.add(
            "timer",
            "hrtimer_expire_entry",
            &samples::hrtimer_expire_entry(),
        )
        .unwrap();
        d.add("nmi", "nmi_handler", &samples::nmi_handler())
            .unwrap();
        d.add("irq_vectors", "local_timer_entry", &samples::vector(500))
            .unwrap();
        d.add("irq_vectors", "local_timer_exit", &samples::vector(501))
            .unwrap();
        d
    }

    #[test]
    fn a_missing_field_or_an_unknown_event_is_refused_with_its_name() {
        let mut d = Decoder::default();
        let err = d
            .add("sched", "sched_switch", &samples::format(1, ""))
            .unwrap_err();
        assert!(
            err.contains("sched:sched_switch event has no field prev_comm"),
            "{err}"
        );
        let err = d
            .add("sched", "sched_stat_runtime", &samples::format(2, ""))
            .unwrap_err();
        assert!(err.contains("not an event the accounting reads"), "{err}");
    }

    #[test]
    fn records_decode_to_events() {
        let d = decoder();
        let mut r = common(372, 7, 64);
        comm(&mut r, 8, "kworker/1:1");
        put(&mut r, 24, &7i32.to_ne_bytes());
        put(&mut r, 28, &120i32.to_ne_bytes());
        put(&mut r, 32, &1i64.to_ne_bytes());
        comm(&mut r, 40, "rtapp");
        put(&mut r, 56, &99i32.to_ne_bytes());
        put(&mut r, 60, &9i32.to_ne_bytes());
        assert_eq!(
            d.decode(&r),
            Some(Event::Switch {
                prev_comm: b"kworker/1:1",
                prev_pid: 7,
                prev_prio: 120,
                prev_state: 1,
                next_comm: b"rtapp",
                next_pid: 99,
                next_prio: 9,
            })
        );
        let mut r = common(225, 0, 32);
        put(&mut r, 8, &24i32.to_ne_bytes());
        put(&mut r, 12, &((7u32 << 16) | 16).to_ne_bytes());
        comm(&mut r, 16, "virtio0");
        assert_eq!(
            d.decode(&r),
            Some(Event::IrqEntry {
                irq: 24,
                name: b"virtio0"
            })
        );
        let mut r = common(170, 0, 32);
        put(&mut r, 16, &(-5i64).to_ne_bytes());
        assert_eq!(d.decode(&r), Some(Event::Nmi { delta_ns: -5 }));
        assert_eq!(
            d.decode(&common(501, 0, 12)),
            Some(Event::VectorExit { vector: 0 })
        );
        assert_eq!(d.vector_names, vec!["local_timer"]);
        let mut r = common(228, 0, 12);
        put(&mut r, 8, &9u32.to_ne_bytes());
        assert_eq!(d.decode(&r), Some(Event::SoftirqExit { vec: 9 }));
        let mut r = common(226, 0, 16);
        put(&mut r, 8, &24i32.to_ne_bytes());
        assert_eq!(d.decode(&r), Some(Event::IrqExit { irq: 24 }));
        let mut r = common(460, 1234, 48);
        put(&mut r, 8, &0xffff_8880_0000_1000u64.to_ne_bytes());
        put(&mut r, 32, &5_000_000i64.to_ne_bytes());
        assert_eq!(
            d.decode(&r),
            Some(Event::TimerStart {
                timer: 0xffff_8880_0000_1000,
                softexpires: 5_000_000,
                pid: 1234
            })
        );
        let mut r = common(459, 0, 32);
        put(&mut r, 8, &0xffff_8880_0000_1000u64.to_ne_bytes());
        put(&mut r, 16, &5_000_300i64.to_ne_bytes());
        assert_eq!(
            d.decode(&r),
            Some(Event::TimerExpire {
                timer: 0xffff_8880_0000_1000,
                now: 5_000_300
            })
        );
        // Unknown IDs and records too short for their fields.
        assert_eq!(d.decode(&common(999, 0, 64)), None);
        assert_eq!(d.decode(&common(372, 0, 30)), None);
        assert_eq!(d.decode(&[1]), None);
        // A data_loc pointing outside the record.
        let mut r = common(225, 0, 20);
        put(&mut r, 12, &((40u32 << 16) | 16).to_ne_bytes());
        assert_eq!(d.decode(&r), None);
    }
}
