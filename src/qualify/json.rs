//! The verdict as JSON: the profile and thresholds, the host's facts and
//! fingerprint, each phase's statistics per CPU in rteval's terms, the
//! captures whole; and the reading of an earlier one as a baseline. The
//! DTOs live here only.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::facts::Check;
use super::phase::Outcome;
use super::plan::Plan;
use super::profile::Level;
use super::stats::Stats;
use super::verdict::{PhaseRun, Status, Verdict};
use crate::cpulist::format_cpu_list;
use crate::forensics::Capture;
use crate::host::Fingerprint;
use crate::host::json::{FactJson, facts_json};

/// This document's layout; a reader refuses a newer one by name.
pub const FILE_VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
pub struct Document {
    pub file_version: u32,
    pub latencyd_version: String,
    pub profile: String,
    pub description: String,
    pub started: String,
    pub ended: String,
    /// passed, failed or could-not-measure.
    pub verdict: String,
    pub exit_code: u8,
    pub host: Host,
    pub cpus: String,
    pub cpus_from: String,
    pub checks: Vec<CheckJson>,
    pub phases: Vec<PhaseJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineJson>,
    pub notes: Vec<String>,
}

#[derive(Serialize, Deserialize)]
pub struct Host {
    pub hostname: String,
    pub kernel: String,
    pub fingerprint: String,
    pub facts: BTreeMap<String, FactJson>,
}

#[derive(Serialize, Deserialize)]
pub struct CheckJson {
    pub name: String,
    pub level: String,
    pub passed: bool,
    pub detail: String,
}

#[derive(Serialize, Deserialize)]
pub struct PhaseJson {
    pub name: String,
    pub tool: String,
    pub runtime_s: u64,
    pub seconds: f64,
    pub maximum_us: Option<u64>,
    pub maximum_from: Option<String>,
    /// measured, skipped or could-not-measure.
    pub status: String,
    pub reason: Option<String>,
    pub realtime: Option<bool>,
    pub notes: Vec<String>,
    pub cpus: Vec<CpuJson>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub captures: Vec<Capture>,
}

#[derive(Serialize, Deserialize)]
pub struct CpuJson {
    pub cpu: usize,
    /// passed or failed, and why it failed.
    pub verdict: String,
    pub reason: Option<String>,
    pub stats: Stats,
    /// Samples per whole µs, overflows left out (hwlat has none).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub histogram_us: BTreeMap<u64, u64>,
    /// timerlat: each context's largest latency (`irq`, `thread`, `user`
    /// where the kernel has timerlat_fd), µs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub timerlat_max_us: BTreeMap<String, f64>,
    /// The ids of the captures of this CPU's wake-ups over the maximum.
    pub captures: Vec<String>,
}

#[derive(Serialize, Deserialize)]
pub struct BaselineJson {
    pub file: String,
    pub factor: f64,
    pub fingerprint: String,
    /// The host's facts that differ from the baseline's.
    pub differences: Vec<String>,
}

pub struct Context<'a> {
    pub plan: &'a Plan,
    pub checks: &'a [Check],
    pub runs: &'a [PhaseRun],
    pub verdict: &'a Verdict,
    pub fingerprint: &'a Fingerprint,
    pub hostname: String,
    pub kernel: String,
    pub started: String,
    pub ended: String,
    pub baseline: Option<BaselineJson>,
}

fn level(level: Level) -> &'static str {
    match level {
        Level::Fail => "fail",
        Level::Warn => "warn",
        Level::Ignore => "ignore",
    }
}

pub fn document(c: &Context) -> Document {
    let phases = c
        .runs
        .iter()
        .map(|run| phase_json(run, c.verdict))
        .collect();
    Document {
        file_version: FILE_VERSION,
        latencyd_version: env!("CARGO_PKG_VERSION").into(),
        profile: c.plan.profile.clone(),
        description: c.plan.description.clone(),
        started: c.started.clone(),
        ended: c.ended.clone(),
        verdict: c.verdict.word().into(),
        exit_code: c.verdict.exit_code(),
        host: Host {
            hostname: c.hostname.clone(),
            kernel: c.kernel.clone(),
            fingerprint: c.fingerprint.id(),
            facts: facts_json(c.fingerprint),
        },
        cpus: format_cpu_list(&c.plan.cpus),
        cpus_from: c.plan.cpus_from.clone(),
        checks: c
            .checks
            .iter()
            .map(|k| CheckJson {
                name: k.name.into(),
                level: level(k.level).into(),
                passed: k.passed,
                detail: k.detail.clone(),
            })
            .collect(),
        phases,
        baseline: c.baseline.as_ref().map(|b| BaselineJson {
            file: b.file.clone(),
            factor: b.factor,
            fingerprint: b.fingerprint.clone(),
            differences: b.differences.clone(),
        }),
        notes: c.plan.notes.clone(),
    }
}

fn phase_json(run: &PhaseRun, verdict: &Verdict) -> PhaseJson {
    let plan = &run.plan;
    let cases: Vec<_> = verdict
        .cases
        .iter()
        .filter(|c| c.phase == plan.name)
        .collect();
    let (status, reason, measured) = match &run.outcome {
        Outcome::Measured(m) => {
            let error = cases.iter().find_map(|c| match &c.status {
                Status::Error(why) => Some(why.clone()),
                _ => None,
            });
            match error {
                Some(why) => ("could-not-measure", Some(why), Some(m)),
                None => ("measured", None, Some(m)),
            }
        }
        Outcome::Skipped(why) => ("skipped", Some(why.clone()), None),
        Outcome::Failed(why) => ("could-not-measure", Some(why.clone()), None),
    };
    let cpus = measured
        .map(|m| {
            m.cpus
                .iter()
                .map(|f| {
                    let case = cases.iter().find(|c| c.name == format!("cpu{}", f.cpu));
                    let failed = case.and_then(|c| match &c.status {
                        Status::Failed(why) => Some(why.clone()),
                        _ => None,
                    });
                    CpuJson {
                        cpu: f.cpu,
                        verdict: if failed.is_some() { "failed" } else { "passed" }.into(),
                        reason: failed,
                        stats: f.stats.clone(),
                        histogram_us: f.histogram_us.clone(),
                        timerlat_max_us: f.split_max_us.clone(),
                        captures: case
                            .map(|c| c.captures.iter().map(|k| k.summary.id.clone()).collect())
                            .unwrap_or_default(),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    PhaseJson {
        name: plan.name.clone(),
        tool: plan.kind.tool().into(),
        runtime_s: plan.runtime_s,
        seconds: run.seconds,
        maximum_us: plan.maximum.as_ref().map(|m| m.us),
        maximum_from: plan.maximum.as_ref().map(|m| m.from.clone()),
        status: status.into(),
        reason,
        realtime: measured.map(|m| m.realtime),
        notes: measured.map(|m| m.notes.clone()).unwrap_or_default(),
        cpus,
        captures: measured.map(|m| m.captures.clone()).unwrap_or_default(),
    }
}

/// An earlier qualification's maxima by phase and CPU, and its host.
pub struct Baseline {
    pub fingerprint: String,
    pub facts: BTreeMap<String, FactJson>,
    pub maxima: BTreeMap<(String, usize), f64>,
}

impl Baseline {
    pub fn read(path: &std::path::Path) -> Result<Baseline, String> {
        let what = format!("--baseline {}", path.display());
        let text = crate::files::read_text_bounded(path, crate::files::Links::Follow, 64 << 20)
            .map_err(|e| format!("{what}: {e}"))?;
        let doc: Document = serde_json::from_str(&text)
            .map_err(|e| format!("{what}: not a `latencyd qualify --json` document ({e})"))?;
        if doc.file_version > FILE_VERSION {
            return Err(format!(
                "{what}: written by a newer latencyd (file_version {}; this one reads {FILE_VERSION})",
                doc.file_version
            ));
        }
        let maxima = doc
            .phases
            .iter()
            .flat_map(|p| {
                p.cpus
                    .iter()
                    .map(|c| ((p.name.clone(), c.cpu), c.stats.max))
            })
            .collect();
        Ok(Baseline {
            fingerprint: doc.host.fingerprint,
            facts: doc.host.facts,
            maxima,
        })
    }

    /// The facts whose values differ from the host's now.
    pub fn differences(&self, now: &BTreeMap<String, FactJson>) -> Vec<String> {
        let mut names: Vec<&String> = self.facts.keys().chain(now.keys()).collect();
        names.sort();
        names.dedup();
        names
            .into_iter()
            .filter(|n| {
                !crate::host::fingerprint::VOLATILE.contains(&crate::host::fingerprint::family(n))
            })
            .filter(|n| self.facts.get(*n) != now.get(*n))
            .map(|n| n.to_string())
            .collect()
    }
}
