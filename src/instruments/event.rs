//! The records the kernel's instruments write into a ring buffer:
//! `timerlat` (one per period and context on each CPU) and `hwlat` (one
//! per gap over the threshold), laid out as the running kernel's
//! `events/ftrace/{timerlat,hwlat}/format` says. The offsets are read,
//! never assumed: PREEMPT_RT kernels of 6.1 put `common_preempt_lazy_count`
//! in the common header and move every field by 4 or 8 bytes.

use crate::tracefs::format::{Field, Format};

/// Where in a wake-up the kernel took the time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Context {
    /// The timer's interrupt handler ran: how late the hardware and the
    /// kernel with interrupts off let it run.
    Irq,
    /// The thread the timer woke ran: the interrupt's lateness plus what
    /// held the thread off (a higher-priority task, a section that cannot
    /// be preempted).
    Thread,
    /// The thread, a user-space one blocked on `timerlat_fd`, came back to
    /// the kernel for its next period: its whole trip through user space.
    User,
}

impl Context {
    pub const ALL: [Context; 3] = [Context::Irq, Context::Thread, Context::User];

    /// The kernel's `context` value: 0 IRQ, 1 thread, 2 return from user.
    pub fn from_kernel(value: i64) -> Option<Context> {
        match value {
            0 => Some(Context::Irq),
            1 => Some(Context::Thread),
            2 => Some(Context::User),
            _ => None,
        }
    }

    /// Its name in metrics, JSON and text: `irq`, `thread`, `user`.
    pub fn name(self) -> &'static str {
        match self {
            Context::Irq => "irq",
            Context::Thread => "thread",
            Context::User => "user",
        }
    }

    /// The context named `name` (`irq`, `thread`, `user`).
    pub fn from_name(name: &str) -> Option<Context> {
        Context::ALL.into_iter().find(|c| c.name() == name)
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// One `timerlat` record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerlatSample {
    /// The period's number on its CPU, from 1; the IRQ and the thread of
    /// one period share it.
    pub seqnum: u32,
    pub context: Context,
    pub latency_ns: u64,
}

/// The `timerlat` event's ID and fields on this kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimerlatLayout {
    pub id: u16,
    seqnum: Field,
    context: Field,
    latency: Field,
}

fn field(format: &Format, name: &str, event: &str) -> Result<Field, String> {
    format
        .fields
        .get(name)
        .copied()
        .ok_or_else(|| format!("the {event} event's format has no field {name:?}"))
}

/// The event's ID from the first two bytes of a record.
pub fn record_id(record: &[u8]) -> Option<u16> {
    Some(u16::from_ne_bytes(record.get(..2)?.try_into().ok()?))
}

impl TimerlatLayout {
    /// From `events/ftrace/timerlat/format`.
    pub fn parse(text: &str) -> Result<TimerlatLayout, String> {
        let format = Format::parse(text)?;
        Ok(TimerlatLayout {
            id: format.id,
            seqnum: field(&format, "seqnum", "timerlat")?,
            context: field(&format, "context", "timerlat")?,
            latency: field(&format, "timer_latency", "timerlat")?,
        })
    }

    /// The sample in `record`, if it is a `timerlat` record whose fields
    /// fit it and whose context is one the kernel defines.
    pub fn decode(&self, record: &[u8]) -> Option<TimerlatSample> {
        if record_id(record)? != self.id {
            return None;
        }
        Some(TimerlatSample {
            seqnum: self.seqnum.int(record)? as u32,
            context: Context::from_kernel(self.context.int(record)?)?,
            latency_ns: self.latency.int(record)? as u64,
        })
    }
}

/// One `hwlat` record: a gap the spinning CPU saw with interrupts off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HwlatSample {
    /// The largest gap between two reads of the clock inside the loop, µs.
    pub inner_us: u64,
    /// The largest gap between two turns of the loop, µs.
    pub outer_us: u64,
    /// Time spent in NMIs during the sample, µs, and how many there were.
    pub nmi_total_us: u64,
    pub nmi_count: u32,
    pub seqnum: u32,
    /// Gaps over the threshold in the sample's window.
    pub count: u32,
    /// Wall-clock time of the sample.
    pub wall_sec: i64,
    pub wall_nsec: i64,
}

impl HwlatSample {
    /// The larger of the two gaps: what the CPU lost.
    pub fn gap_us(&self) -> u64 {
        self.inner_us.max(self.outer_us)
    }
}

/// The `hwlat` event's ID and fields on this kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HwlatLayout {
    pub id: u16,
    duration: Field,
    outer: Field,
    nmi_total: Field,
    nmi_count: Field,
    seqnum: Field,
    count: Option<Field>,
    tv_sec: Field,
    tv_nsec: Field,
}

impl HwlatLayout {
    /// From `events/ftrace/hwlat/format` (`count` is absent before 5.x).
    pub fn parse(text: &str) -> Result<HwlatLayout, String> {
        let format = Format::parse(text)?;
        let get = |name: &str| field(&format, name, "hwlat");
        Ok(HwlatLayout {
            id: format.id,
            duration: get("duration")?,
            outer: get("outer_duration")?,
            nmi_total: get("nmi_total_ts")?,
            nmi_count: get("nmi_count")?,
            seqnum: get("seqnum")?,
            count: format.fields.get("count").copied(),
            tv_sec: get("tv_sec")?,
            tv_nsec: get("tv_nsec")?,
        })
    }

    pub fn decode(&self, record: &[u8]) -> Option<HwlatSample> {
        if record_id(record)? != self.id {
            return None;
        }
        Some(HwlatSample {
            inner_us: self.duration.int(record)? as u64,
            outer_us: self.outer.int(record)? as u64,
            nmi_total_us: self.nmi_total.int(record)? as u64,
            nmi_count: self.nmi_count.int(record)? as u32,
            seqnum: self.seqnum.int(record)? as u32,
            count: match &self.count {
                Some(f) => f.int(record)? as u32,
                None => 1,
            },
            wall_sec: self.tv_sec.int(record)?,
            wall_nsec: self.tv_nsec.int(record)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracefs::ring::PageLayout;

    fn kernel_file(kernel: &str, path: &str) -> String {
        let at = format!(
            "{}/tests/data/kernels/{kernel}/{path}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(&at).unwrap_or_else(|err| panic!("{at}: {err}"))
    }

    const RT_KERNELS: [&str; 4] = [
        "6.1-rt-amd64",
        "6.1-rt-arm64",
        "6.12-rt-amd64",
        "6.12-rt-arm64",
    ];

    #[test]
    fn every_rt_kernels_formats_are_read() {
        for kernel in RT_KERNELS {
            let timerlat = TimerlatLayout::parse(&kernel_file(
                kernel,
                "tracefs/events/ftrace/timerlat/format",
            ))
            .unwrap_or_else(|e| panic!("{kernel}: {e}"));
            let hwlat =
                HwlatLayout::parse(&kernel_file(kernel, "tracefs/events/ftrace/hwlat/format"))
                    .unwrap_or_else(|e| panic!("{kernel}: {e}"));
            assert_ne!(timerlat.id, hwlat.id, "{kernel}");
            assert!(hwlat.count.is_some(), "{kernel}");
        }
        // 6.1's PREEMPT_RT header is 4 bytes longer, and u64s align to 8.
        let old = TimerlatLayout::parse(&kernel_file(
            "6.1-rt-amd64",
            "tracefs/events/ftrace/timerlat/format",
        ))
        .unwrap();
        let new = TimerlatLayout::parse(&kernel_file(
            "6.12-rt-amd64",
            "tracefs/events/ftrace/timerlat/format",
        ))
        .unwrap();
        assert_eq!((old.latency.offset, new.latency.offset), (24, 16));
    }

    #[test]
    fn a_captured_ring_buffer_page_decodes_into_irq_and_thread_periods() {
        // Two pages of CPU 0's `trace_pipe_raw` under timerlat, 6.12-rt.
        let dir = format!(
            "{}/tests/data/kernels/6.12-rt-amd64",
            env!("CARGO_MANIFEST_DIR")
        );
        let raw = std::fs::read(format!("{dir}/timerlat.raw")).unwrap();
        let page =
            PageLayout::parse(&kernel_file("6.12-rt-amd64", "tracefs/events/header_page")).unwrap();
        let layout = TimerlatLayout::parse(&kernel_file(
            "6.12-rt-amd64",
            "tracefs/events/ftrace/timerlat/format",
        ))
        .unwrap();
        let mut seen = Vec::new();
        let mut others = 0;
        for chunk in raw.chunks(4096) {
            page.records(chunk, |_, record| match layout.decode(record) {
                Some(sample) => seen.push(sample),
                None => others += 1,
            })
            .unwrap();
        }
        assert!(seen.len() > 100, "{} samples", seen.len());
        let irq = seen.iter().filter(|s| s.context == Context::Irq).count();
        let thread = seen.iter().filter(|s| s.context == Context::Thread).count();
        assert!(irq.abs_diff(thread) <= 1, "irq {irq}, thread {thread}");
        // Each thread sample follows its period's IRQ sample.
        for pair in seen.windows(2) {
            if pair[1].context == Context::Thread {
                assert_eq!(
                    pair[0],
                    TimerlatSample {
                        context: Context::Irq,
                        ..pair[0]
                    }
                );
                assert_eq!(pair[0].seqnum, pair[1].seqnum);
            }
        }
        assert!(
            seen.iter()
                .all(|s| s.latency_ns > 0 && s.latency_ns < 1_000_000_000)
        );
        assert_eq!(others, 0);
    }

    #[test]
    fn a_record_of_another_event_or_a_short_one_is_not_a_sample() {
        let layout = TimerlatLayout::parse(&kernel_file(
            "6.12-rt-amd64",
            "tracefs/events/ftrace/timerlat/format",
        ))
        .unwrap();
        let mut record = vec![0u8; 24];
        record[..2].copy_from_slice(&layout.id.to_ne_bytes());
        record[12..16].copy_from_slice(&1i32.to_ne_bytes());
        record[16..24].copy_from_slice(&5000u64.to_ne_bytes());
        assert_eq!(
            layout.decode(&record).map(|s| (s.context, s.latency_ns)),
            Some((Context::Thread, 5000))
        );
        record[12..16].copy_from_slice(&7i32.to_ne_bytes());
        assert_eq!(layout.decode(&record), None, "an unknown context");
        assert_eq!(layout.decode(&record[..20]), None, "a short record");
        record[..2].copy_from_slice(&(layout.id + 1).to_ne_bytes());
        assert_eq!(layout.decode(&record), None, "another event");
    }
}
