//! What a load did, as plain data, and its two renderings: `#` comment
//! lines for measure's text output (cyclictest's parsers skip them) and
//! the `load` object of measure's JSON and the daemon's API.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::profile::{Generator, Profile};
use crate::cpulist::format_cpu_list;

/// One measure of what a generator achieved: `count` of `what` in
/// `seconds` of its own running time.
#[derive(Debug, Clone, PartialEq)]
pub struct Throughput {
    /// A stress-ng stressor's name, or `messages` for hackbench.
    pub what: String,
    pub count: f64,
    pub seconds: f64,
    /// `bogo-ops/s` or `messages/s`.
    pub unit: &'static str,
}

impl Throughput {
    pub fn rate(&self) -> f64 {
        if self.seconds > 0.0 {
            self.count / self.seconds
        } else {
            0.0
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct GeneratorReport {
    pub name: String,
    pub program: &'static str,
    pub command: String,
    pub cpus: Vec<usize>,
    /// Times it was started (hackbench: once per run).
    pub starts: u64,
    /// hackbench runs that finished and printed their time.
    pub completed_runs: u64,
    /// Failures to start, early exits, a stop that had to kill it.
    pub failures: u64,
    pub last_failure: Option<String>,
    pub running: bool,
    pub throughput: Vec<Throughput>,
}

impl GeneratorReport {
    pub fn new(generator: &Generator) -> GeneratorReport {
        GeneratorReport {
            name: generator.name.clone(),
            program: generator.program,
            command: generator.command_line(),
            cpus: generator.cpus.clone(),
            starts: 0,
            completed_runs: 0,
            failures: 0,
            last_failure: None,
            running: false,
            throughput: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct LoadReport {
    pub profile: Profile,
    pub cpus: Vec<usize>,
    pub started: SystemTime,
    pub ended: Option<SystemTime>,
    pub generators: Vec<GeneratorReport>,
    /// Processes of the load's group still there after the stop (none,
    /// unless something is badly wrong): their IDs.
    pub leftover: Vec<i32>,
}

impl LoadReport {
    /// Seconds from start to end (or to now while it runs).
    pub fn seconds(&self) -> f64 {
        self.ended
            .unwrap_or_else(SystemTime::now)
            .duration_since(self.started)
            .map_or(0.0, |d| d.as_secs_f64())
    }

    /// Every generator ran without a failure and nothing was left behind.
    pub fn clean(&self) -> bool {
        self.leftover.is_empty() && self.generators.iter().all(|g| g.failures == 0)
    }

    /// What went wrong, one line each (empty when `clean`).
    pub fn problems(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .generators
            .iter()
            .filter(|g| g.failures > 0)
            .map(|g| {
                format!(
                    "{} failed {} time{}{}",
                    g.name,
                    g.failures,
                    if g.failures == 1 { "" } else { "s" },
                    g.last_failure
                        .as_deref()
                        .map(|l| format!(", last: {l}"))
                        .unwrap_or_default()
                )
            })
            .collect();
        if !self.leftover.is_empty() {
            out.push(format!(
                "{} load process(es) still running after the stop: {:?}",
                self.leftover.len(),
                self.leftover
            ));
        }
        out
    }

    /// Every generator's throughput on one line (`hackbench node 0
    /// messages 732233 messages/s, stress-ng cpu 159 bogo-ops/s`), or
    /// None when none was reported.
    pub fn rates_line(&self) -> Option<String> {
        let rates: Vec<String> = self
            .generators
            .iter()
            .flat_map(|g| {
                g.throughput
                    .iter()
                    .map(move |t| format!("{} {} {:.0} {}", g.name, t.what, t.rate(), t.unit))
            })
            .collect();
        (!rates.is_empty()).then(|| rates.join(", "))
    }

    /// `#` lines for measure's text output.
    pub fn text_block(&self) -> String {
        let mut out = format!(
            "# Load: {} on CPUs {} for {:.1} s{}\n",
            self.profile,
            format_cpu_list(&self.cpus),
            self.seconds(),
            if self.clean() {
                ""
            } else {
                " (NOT AS ASKED, see below)"
            }
        );
        for g in &self.generators {
            out.push_str(&format!(
                "#   {}: {} (CPUs {})\n",
                g.name,
                g.command,
                format_cpu_list(&g.cpus)
            ));
            let rates: Vec<String> = g
                .throughput
                .iter()
                .map(|t| format!("{} {:.1} {}", t.what, t.rate(), t.unit))
                .collect();
            let runs = if g.program == "hackbench" {
                format!(
                    "{} run{} completed; ",
                    g.completed_runs,
                    if g.completed_runs == 1 { "" } else { "s" }
                )
            } else {
                String::new()
            };
            out.push_str(&format!(
                "#     {runs}{}\n",
                if rates.is_empty() {
                    "no throughput reported".to_string()
                } else {
                    rates.join(", ")
                }
            ));
        }
        for problem in self.problems() {
            out.push_str(&format!("#   problem: {problem}\n"));
        }
        out
    }

    pub fn json(&self) -> LoadJson {
        let secs = |t: SystemTime| {
            t.duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64())
        };
        LoadJson {
            profile: self.profile.name(),
            cpus: format_cpu_list(&self.cpus),
            start_time: secs(self.started),
            end_time: self.ended.map(secs),
            seconds: self.seconds(),
            clean: self.clean(),
            leftover_processes: self.leftover.clone(),
            generators: self
                .generators
                .iter()
                .map(|g| GeneratorJson {
                    name: g.name.clone(),
                    command: g.command.clone(),
                    cpus: format_cpu_list(&g.cpus),
                    starts: g.starts,
                    completed_runs: (g.program == "hackbench").then_some(g.completed_runs),
                    failures: g.failures,
                    last_failure: g.last_failure.clone(),
                    running: g.running,
                    throughput: g
                        .throughput
                        .iter()
                        .map(|t| ThroughputJson {
                            what: t.what.clone(),
                            rate: t.rate(),
                            unit: t.unit,
                            count: t.count,
                            seconds: t.seconds,
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

/// The `load` object of measure's JSON (`latencyd.load`) and the API.
#[derive(Debug, Serialize)]
pub struct LoadJson {
    pub profile: &'static str,
    pub cpus: String,
    /// Seconds since the Unix epoch.
    pub start_time: f64,
    pub end_time: Option<f64>,
    pub seconds: f64,
    /// No generator failed and no process outlived the load.
    pub clean: bool,
    pub leftover_processes: Vec<i32>,
    pub generators: Vec<GeneratorJson>,
}

#[derive(Debug, Serialize)]
pub struct GeneratorJson {
    pub name: String,
    pub command: String,
    pub cpus: String,
    pub starts: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed_runs: Option<u64>,
    pub failures: u64,
    pub last_failure: Option<String>,
    pub running: bool,
    pub throughput: Vec<ThroughputJson>,
}

#[derive(Debug, Serialize)]
pub struct ThroughputJson {
    pub what: String,
    pub rate: f64,
    pub unit: &'static str,
    pub count: f64,
    pub seconds: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::time::Duration;

    fn sample() -> LoadReport {
        let generators = Profile::Rteval.generators(&[0, 1], |_| 0, Path::new("/s"));
        let mut report = LoadReport {
            profile: Profile::Rteval,
            cpus: vec![0, 1],
            started: UNIX_EPOCH + Duration::from_secs(100),
            ended: Some(UNIX_EPOCH + Duration::from_secs(160)),
            generators: generators.iter().map(GeneratorReport::new).collect(),
            leftover: Vec::new(),
        };
        report.generators[0].completed_runs = 20;
        report.generators[0].throughput = vec![Throughput {
            what: "messages".into(),
            count: 48e6,
            seconds: 50.0,
            unit: "messages/s",
        }];
        report.generators[1].throughput = vec![Throughput {
            what: "cpu".into(),
            count: 6000.0,
            seconds: 60.0,
            unit: "bogo-ops/s",
        }];
        report
    }

    #[test]
    fn text_names_each_command_line_and_rate() {
        let text = sample().text_block();
        assert!(
            text.starts_with("# Load: rteval on CPUs 0-1 for 60.0 s\n"),
            "{text}"
        );
        assert!(text.contains("#   hackbench node 0: hackbench -P -g 6 -l 1000 -s 1000"));
        assert!(
            text.contains("20 runs completed; messages 960000.0 messages/s"),
            "{text}"
        );
        assert!(text.contains("cpu 100.0 bogo-ops/s"), "{text}");
        assert!(text.lines().all(|l| l.starts_with('#')));
    }

    #[test]
    fn the_rates_line_lists_every_generators_throughput() {
        assert_eq!(
            sample().rates_line().as_deref(),
            Some("hackbench node 0 messages 960000 messages/s, stress-ng cpu 100 bogo-ops/s")
        );
        let mut none = sample();
        none.generators
            .iter_mut()
            .for_each(|g| g.throughput.clear());
        assert_eq!(none.rates_line(), None);
    }

    #[test]
    fn failures_and_leftovers_are_problems_in_text_and_json() {
        let mut report = sample();
        assert!(report.clean());
        report.generators[1].failures = 1;
        report.generators[1].last_failure = Some("exited early".into());
        report.leftover = vec![42];
        assert!(!report.clean());
        let text = report.text_block();
        assert!(text.contains("(NOT AS ASKED"), "{text}");
        assert!(text.contains("problem: stress-ng failed 1 time, last: exited early"));
        assert!(text.contains("still running after the stop: [42]"));
        let json = serde_json::to_value(report.json()).unwrap();
        assert_eq!(json["clean"], false);
        assert_eq!(json["generators"][0]["throughput"][0]["rate"], 960000.0);
        assert_eq!(json["generators"][0]["completed_runs"], 20);
        assert!(json["generators"][1].get("completed_runs").is_none());
    }
}
