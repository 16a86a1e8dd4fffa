//! The verdict: every phase and CPU (and every judged fact) as one case
//! that passed, failed its maximum or the baseline, could not be
//! measured, or was skipped. The JUnit file, the JSON and the summary
//! printed at the end are renderings of these cases.

use super::facts::Check;
use super::phase::{CpuFigures, Measured, Outcome};
use super::plan::{Kind, PhasePlan};
use super::profile::Level;
use crate::forensics::Capture;

/// What became of one case.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    Passed,
    /// Over its maximum, a disqualifying fact, or a regression.
    Failed(String),
    /// Could not be measured.
    Error(String),
    Skipped(String),
}

#[derive(Debug, Clone)]
pub struct Case {
    /// `facts`, or the phase's name.
    pub phase: String,
    /// The CPU (`cpu3`), the fact, or the phase when it is one case.
    pub name: String,
    pub status: Status,
    pub seconds: f64,
    /// What a reader should know beside the status (warnings, notes, no
    /// maximum set).
    pub notes: Vec<String>,
    /// The captures behind a failure.
    pub captures: Vec<Capture>,
}

/// A finished phase.
#[derive(Debug, Clone)]
pub struct PhaseRun {
    pub plan: PhasePlan,
    pub outcome: Outcome,
    pub seconds: f64,
}

/// The baseline's maximum of a phase's CPU, and the factor allowed.
pub type BaselineMax<'a> = &'a dyn Fn(&str, usize) -> Option<f64>;

/// The whole verdict, in the order things ran.
#[derive(Debug, Clone, Default)]
pub struct Verdict {
    pub cases: Vec<Case>,
}

impl Verdict {
    pub fn facts(&mut self, checks: &[Check]) {
        for check in checks {
            let (status, notes) = match (check.passed, check.level) {
                (true, _) => (Status::Passed, vec![check.detail.clone()]),
                (false, Level::Fail) => (Status::Failed(check.detail.clone()), Vec::new()),
                (false, _) => (Status::Passed, vec![format!("warning: {}", check.detail)]),
            };
            self.cases.push(Case {
                phase: "facts".into(),
                name: check.name.into(),
                status,
                seconds: 0.0,
                notes,
                captures: Vec::new(),
            });
        }
    }

    pub fn phase(&mut self, run: &PhaseRun, realtime: Level, baseline: Option<(BaselineMax, f64)>) {
        let one = |status| Case {
            phase: run.plan.name.clone(),
            name: run.plan.name.clone(),
            status,
            seconds: run.seconds,
            notes: Vec::new(),
            captures: Vec::new(),
        };
        let measured = match &run.outcome {
            Outcome::Skipped(why) => return self.cases.push(one(Status::Skipped(why.clone()))),
            Outcome::Failed(why) => return self.cases.push(one(Status::Error(why.clone()))),
            Outcome::Measured(m) => m,
        };
        let mut notes = measured.notes.clone();
        if !measured.realtime && !matches!(run.plan.kind, Kind::Busypoll | Kind::Hwlat) {
            let why =
                "the samplers did not run SCHED_FIFO: this is not real-time latency".to_string();
            match realtime {
                Level::Fail => return self.cases.push(one(Status::Error(why))),
                Level::Warn => notes.push(format!("warning: {why}")),
                Level::Ignore => {}
            }
        }
        let share = run.seconds / measured.cpus.len().max(1) as f64;
        for figures in &measured.cpus {
            let mut case = self.cpu_case(run, measured, figures, baseline);
            case.seconds = share;
            case.notes.splice(0..0, notes.iter().cloned());
            self.cases.push(case);
        }
    }

    fn cpu_case(
        &self,
        run: &PhaseRun,
        measured: &Measured,
        figures: &CpuFigures,
        baseline: Option<(BaselineMax, f64)>,
    ) -> Case {
        let max = figures.stats.max;
        let mut failures = Vec::new();
        let mut notes = Vec::new();
        match &run.plan.maximum {
            Some(m) if max > m.us as f64 => failures.push(format!(
                "{} maximum {} µs over the maximum of {} µs ({})",
                run.plan.kind.tool(),
                us(max),
                m.us,
                m.from
            )),
            Some(_) => {}
            None => notes.push("no maximum set: measured and reported only".to_string()),
        }
        if let Some((of, factor)) = baseline {
            match of(&run.plan.name, figures.cpu) {
                Some(before) if max > before * factor => failures.push(format!(
                    "regression: maximum {} µs is {:.2} times the baseline's {} µs (over {factor})",
                    us(max),
                    max / before.max(f64::MIN_POSITIVE),
                    us(before)
                )),
                Some(_) => {}
                None => notes.push("the baseline has no figures for this phase and CPU".into()),
            }
        }
        let captures: Vec<Capture> = measured
            .captures
            .iter()
            .filter(|c| c.summary.cpu == figures.cpu)
            .cloned()
            .collect();
        Case {
            phase: run.plan.name.clone(),
            name: format!("cpu{}", figures.cpu),
            status: if failures.is_empty() {
                Status::Passed
            } else {
                Status::Failed(failures.join("; "))
            },
            seconds: 0.0,
            notes,
            captures: if failures.is_empty() {
                Vec::new()
            } else {
                captures
            },
        }
    }

    /// 0 passed; 1 a case failed (a maximum, a fact, the baseline): the
    /// host is known not to qualify; else 2 when a case could not be
    /// measured.
    pub fn exit_code(&self) -> u8 {
        if self
            .cases
            .iter()
            .any(|c| matches!(c.status, Status::Failed(_)))
        {
            1
        } else if self
            .cases
            .iter()
            .any(|c| matches!(c.status, Status::Error(_)))
        {
            2
        } else {
            0
        }
    }

    pub fn word(&self) -> &'static str {
        match self.exit_code() {
            0 => "passed",
            1 => "failed",
            _ => "could-not-measure",
        }
    }
}

/// A latency in µs as printed: whole, or to the ns.
pub fn us(value: f64) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.3}")
    }
}
