//! Stretches without samples in the record: a line
//! `#[latencyd gap cpuN start=S end=S reason=stalled|offline]` says that
//! CPU N had none between the two times, and why, instead of leaving
//! nothing there.

use super::seconds::{decimal_ns, seconds};
use crate::calendar::format_rfc3339_ms;
use crate::units::NS_PER_SEC;

/// Why a CPU has no samples for a stretch.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum GapReason {
    /// Its sampler did not run (a higher-priority task or the host held
    /// the CPU) for longer than `measure.stall_threshold`.
    Stalled = 0,
    /// The CPU was offline.
    Offline = 1,
}

impl GapReason {
    pub fn name(self) -> &'static str {
        match self {
            GapReason::Stalled => "stalled",
            GapReason::Offline => "offline",
        }
    }

    fn parse(word: &str) -> Option<GapReason> {
        match word {
            "stalled" => Some(GapReason::Stalled),
            "offline" => Some(GapReason::Offline),
            _ => None,
        }
    }
}

/// A stretch without samples on one CPU, and why: the record says so
/// (`#[latencyd gap cpuN start=… end=… reason=…]`) rather than leaving
/// nothing, and plots and reports show it as a gap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    pub cpu: usize,
    /// Nanoseconds since the epoch.
    pub start_ns: u64,
    pub end_ns: u64,
    pub reason: GapReason,
}

impl Gap {
    /// Its line in the record.
    pub fn line(&self) -> String {
        format!(
            "#[latencyd gap cpu{} start={} end={} reason={}]\n",
            self.cpu,
            seconds(self.start_ns),
            seconds(self.end_ns),
            self.reason.name()
        )
    }

    pub(super) fn parse(rest: &str) -> Option<Gap> {
        let mut words = rest.strip_suffix(']')?.split(' ');
        let cpu = words.next()?.parse().ok()?;
        let mut get = |name: &str| words.next()?.strip_prefix(name);
        let start_ns = decimal_ns(get("start=")?, NS_PER_SEC)?;
        let end_ns = decimal_ns(get("end=")?, NS_PER_SEC)?;
        let reason = GapReason::parse(get("reason=")?)?;
        (start_ns <= end_ns).then_some(Gap {
            cpu,
            start_ns,
            end_ns,
            reason,
        })
    }

    /// How long it lasted, for people.
    pub fn describe(&self) -> String {
        format!(
            "CPU {}: no samples from {} to {} ({}, {})",
            self.cpu,
            format_rfc3339_ms(self.start_ns),
            format_rfc3339_ms(self.end_ns),
            self.reason.name(),
            seconds_for_people(self.end_ns - self.start_ns)
        )
    }
}

/// A duration as people read it: `604.2 s`, `2 min 3 s`, `3 h 12 min`.
pub fn seconds_for_people(ns: u64) -> String {
    let s = ns / NS_PER_SEC;
    match s {
        0..120 => format!("{:.1} s", ns as f64 / NS_PER_SEC as f64),
        120..7200 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::super::format::{Line, LineParser};
    use super::*;

    #[test]
    fn a_gap_reads_back_and_a_bad_one_is_corrupt() {
        let gap = Gap {
            cpu: 1,
            start_ns: 1_795_315_538_123_000_000,
            end_ns: 1_795_316_142_000_000_000,
            reason: GapReason::Stalled,
        };
        let line = gap.line();
        assert_eq!(
            line,
            "#[latencyd gap cpu1 start=1795315538.123 end=1795316142.000 reason=stalled]\n"
        );
        let mut parser = LineParser::default();
        match parser.line(&line) {
            Line::Gap(read) => assert_eq!(read, gap),
            other => panic!("{other:?}"),
        }
        assert!(
            gap.describe().contains("stalled, 10 min 3 s"),
            "{}",
            gap.describe()
        );
        for bad in [
            "#[latencyd gap cpu1 start=9 end=8 reason=stalled]",
            "#[latencyd gap cpu1 start=1 end=2 reason=bored]",
            "#[latencyd gap cpux start=1 end=2 reason=offline]",
        ] {
            assert!(matches!(parser.line(bad), Line::Corrupt(_)), "{bad}");
        }
    }
}
