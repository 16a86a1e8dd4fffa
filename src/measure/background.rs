//! `--load`: a measurement's background load — checked before anything
//! starts, started once the samplers run, its events said on stderr as
//! they come, stopped at the end, and what went wrong kept for the exit
//! status.

use super::options::MeasureOptions;
use crate::load::{LoadReport, LoadSpec, RunningLoad, check_installed};

#[derive(Default)]
pub(super) struct Background {
    load: Option<RunningLoad>,
    profile: Option<&'static str>,
    problems: Vec<String>,
}

impl Background {
    /// The load's programs are installed (said before anything starts).
    pub(super) fn check(options: &MeasureOptions) -> anyhow::Result<()> {
        if let Some((profile, _)) = &options.load {
            check_installed(*profile).map_err(|e| anyhow::anyhow!("--load: {e}"))?;
        }
        Ok(())
    }

    /// Starts `--load`, if asked; a load that cannot start is said and
    /// the run goes on without it (and ends with status 1).
    pub(super) fn start(options: &MeasureOptions) -> Background {
        let Some((profile, cpus)) = &options.load else {
            return Background::default();
        };
        match RunningLoad::start(LoadSpec::new(*profile, cpus.clone())) {
            Ok(load) => Background {
                load: Some(load),
                profile: Some(profile.name()),
                problems: Vec::new(),
            },
            Err(err) => {
                let line = format!("--load {profile}: cannot start the load: {err}");
                eprintln!("latencyd measure: error: {line}; measuring without it");
                Background {
                    problems: vec![line],
                    ..Background::default()
                }
            }
        }
    }

    /// The profile running, for `--log`.
    pub(super) fn running(&self) -> Option<&'static str> {
        self.profile
    }

    /// Says on stderr what happened to the generators since last asked.
    pub(super) fn say_events(&self) {
        if let Some(load) = &self.load {
            for event in load.take_events() {
                eprintln!("latencyd measure: warning: {event}");
            }
        }
    }

    /// Stops the load and returns its report.
    pub(super) fn stop(&mut self) -> Option<LoadReport> {
        let report = self.load.take()?.stop();
        for problem in report.problems() {
            eprintln!("latencyd measure: warning: load: {problem}");
        }
        self.problems.extend(report.problems());
        Some(report)
    }

    /// What went wrong: empty when the load ran as asked (or none was).
    pub(super) fn problems(&self) -> &[String] {
        &self.problems
    }

    /// The run's error when the load did not run as asked.
    pub(super) fn failure(&self) -> Option<String> {
        (!self.problems.is_empty()).then(|| {
            format!(
                "the load did not run as asked: {}",
                self.problems.join("; ")
            )
        })
    }
}
