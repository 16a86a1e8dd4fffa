//! The daemon's hardware-noise windows in the record: a line
//! `#[latencyd hwnoise start=S end=S cpus=LIST threshold=US width=US
//! window=US outcome=ran samples=N gaps=N max=US nmis=N smis=N|-]`, or
//! `outcome=skipped reason=busy|unavailable|failed`, per window. The
//! intervals measured while a window spun a CPU carry the word `hwnoise`
//! on their comment line and are kept out of `report`'s figures.

use super::seconds::{decimal_ns, seconds};
use crate::calendar::format_rfc3339_ms;
use crate::cpulist::{format_cpu_list, parse_cpu_list};
use crate::units::NS_PER_SEC;

/// How a window went, as the record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HwnoiseOutcome {
    Ran {
        /// hwlat samples with a gap over the threshold.
        samples: u64,
        gaps: u64,
        max_us: u64,
        nmis: u64,
        /// None: SMIs could not be counted.
        smis: Option<u64>,
    },
    /// Why it did not run: `busy`, `unavailable` or `failed`.
    Skipped(String),
}

/// One window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HwnoiseLine {
    /// Nanoseconds since the epoch.
    pub start_ns: u64,
    pub end_ns: u64,
    pub cpus: Vec<usize>,
    pub threshold_us: u64,
    pub width_us: u64,
    pub window_us: u64,
    pub outcome: HwnoiseOutcome,
}

impl HwnoiseLine {
    /// Its line in the record.
    pub fn line(&self) -> String {
        let outcome = match &self.outcome {
            HwnoiseOutcome::Ran {
                samples,
                gaps,
                max_us,
                nmis,
                smis,
            } => format!(
                "outcome=ran samples={samples} gaps={gaps} max={max_us} nmis={nmis} smis={}",
                smis.map_or("-".to_string(), |n| n.to_string())
            ),
            HwnoiseOutcome::Skipped(reason) => format!("outcome=skipped reason={reason}"),
        };
        format!(
            "#[latencyd hwnoise start={} end={} cpus={} threshold={} width={} window={} \
             {outcome}]\n",
            seconds(self.start_ns),
            seconds(self.end_ns),
            format_cpu_list(&self.cpus),
            self.threshold_us,
            self.width_us,
            self.window_us
        )
    }

    pub(super) fn parse(rest: &str) -> Option<HwnoiseLine> {
        let mut words = rest.strip_suffix(']')?.split(' ');
        let mut get = |name: &str| words.next()?.strip_prefix(name);
        let start_ns = decimal_ns(get("start=")?, NS_PER_SEC)?;
        let end_ns = decimal_ns(get("end=")?, NS_PER_SEC)?;
        let cpus = parse_cpu_list(get("cpus=")?).ok()?;
        let threshold_us = get("threshold=")?.parse().ok()?;
        let width_us = get("width=")?.parse().ok()?;
        let window_us = get("window=")?.parse().ok()?;
        let outcome = match get("outcome=")? {
            "ran" => HwnoiseOutcome::Ran {
                samples: get("samples=")?.parse().ok()?,
                gaps: get("gaps=")?.parse().ok()?,
                max_us: get("max=")?.parse().ok()?,
                nmis: get("nmis=")?.parse().ok()?,
                smis: match get("smis=")? {
                    "-" => None,
                    n => Some(n.parse().ok()?),
                },
            },
            "skipped" => {
                let reason = get("reason=")?;
                if !matches!(reason, "busy" | "unavailable" | "failed") {
                    return None;
                }
                HwnoiseOutcome::Skipped(reason.to_string())
            }
            _ => return None,
        };
        (start_ns <= end_ns).then_some(HwnoiseLine {
            start_ns,
            end_ns,
            cpus,
            threshold_us,
            width_us,
            window_us,
            outcome,
        })
    }

    /// One line for people.
    pub fn describe(&self) -> String {
        let when = format!(
            "{} to {}, CPUs {}",
            format_rfc3339_ms(self.start_ns),
            format_rfc3339_ms(self.end_ns),
            format_cpu_list(&self.cpus)
        );
        match &self.outcome {
            HwnoiseOutcome::Ran {
                samples,
                max_us,
                nmis,
                smis,
                ..
            } => format!(
                "{when}: {samples} sample(s) over {} us, largest gap {max_us} us, {nmis} NMI(s), \
                 SMIs {}",
                self.threshold_us,
                smis.map_or("not counted".to_string(), |n| n.to_string())
            ),
            HwnoiseOutcome::Skipped(reason) => format!("{when}: skipped ({reason})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::format::{Line, LineParser};
    use super::*;

    #[test]
    fn a_window_reads_back_and_a_bad_one_is_corrupt() {
        let mut window = HwnoiseLine {
            start_ns: 1_795_315_538_123_000_000,
            end_ns: 1_795_316_138_123_000_000,
            cpus: vec![0, 1, 3],
            threshold_us: 10,
            width_us: 500_000,
            window_us: 1_000_000,
            outcome: HwnoiseOutcome::Ran {
                samples: 4,
                gaps: 9,
                max_us: 1694,
                nmis: 0,
                smis: None,
            },
        };
        let line = window.line();
        assert_eq!(
            line,
            "#[latencyd hwnoise start=1795315538.123 end=1795316138.123 cpus=0-1,3 threshold=10 \
             width=500000 window=1000000 outcome=ran samples=4 gaps=9 max=1694 nmis=0 smis=-]\n"
        );
        let mut parser = LineParser::default();
        match parser.line(&line) {
            Line::Hwnoise(read) => assert_eq!(*read, window),
            other => panic!("{other:?}"),
        }
        window.outcome = HwnoiseOutcome::Skipped("busy".to_string());
        match parser.line(&window.line()) {
            Line::Hwnoise(read) => assert_eq!(*read, window),
            other => panic!("{other:?}"),
        }
        assert!(window.describe().ends_with("skipped (busy)"));
        for bad in [
            "#[latencyd hwnoise start=9 end=8 cpus=0 threshold=1 width=1 window=2 \
             outcome=skipped reason=busy]",
            "#[latencyd hwnoise start=1 end=2 cpus=0 threshold=1 width=1 window=2 \
             outcome=skipped reason=bored]",
            "#[latencyd hwnoise start=1 end=2 cpus=x threshold=1 width=1 window=2 \
             outcome=skipped reason=busy]",
        ] {
            assert!(matches!(parser.line(bad), Line::Corrupt(_)), "{bad}");
        }
    }
}
