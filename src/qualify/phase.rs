//! Running one phase: latencyd's own one-shot tools, each in a child
//! process exactly as a script would run it (`measure` for the wake-up
//! phases, hwlat and timerlat; `oslat` for busy-poll), their `--json`
//! read back into the statistics per CPU. A child that fails, or
//! overruns its duration ([`super::child`]), is the phase that could not
//! measure, with the child's own words.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use serde_json::Value;

use super::child::{self, Ended};
use super::plan::{Kind, PhasePlan};
use super::profile::RunWhen;
use super::stats::Stats;
use crate::cpulist::format_cpu_list;
use crate::forensics::Capture;

/// The 1-µs histogram's reach for the wake-up phases: 10 ms.
const HISTOGRAM_US: u64 = 10_000;
/// oslat's largest bucket count.
const OSLAT_BUCKETS: u64 = 1_024;

/// What a phase found.
#[derive(Debug, Clone)]
pub enum Outcome {
    Measured(Measured),
    /// Not run, and why (`if-available` and the kernel lacks it).
    Skipped(String),
    /// Could not measure, and why.
    Failed(String),
}

#[derive(Debug, Clone, Default)]
pub struct Measured {
    pub cpus: Vec<CpuFigures>,
    /// Every thread ran real-time.
    pub realtime: bool,
    /// The tool's warnings and notes.
    pub notes: Vec<String>,
    /// Forensics' captures of the wake-ups over the maximum.
    pub captures: Vec<Capture>,
}

#[derive(Debug, Clone)]
pub struct CpuFigures {
    pub cpu: usize,
    pub stats: Stats,
    /// Samples per whole µs (the report's plot), overflows left out.
    pub histogram_us: BTreeMap<u64, u64>,
    /// timerlat: the largest latency of each context (`irq`, `thread`,
    /// `user`), µs; empty for the other phases.
    pub split_max_us: BTreeMap<String, f64>,
}

impl CpuFigures {
    fn new(cpu: usize, stats: Stats, histogram_us: BTreeMap<u64, u64>) -> CpuFigures {
        CpuFigures {
            cpu,
            stats: stats.with_shape(&histogram_us),
            histogram_us,
            split_max_us: BTreeMap::new(),
        }
    }
}

/// The tools' shared input: the binary and where the children write.
pub struct Runner {
    pub exe: PathBuf,
    pub dir: PathBuf,
    pub tracefs: PathBuf,
    /// The profile lets phases run without SCHED_FIFO (its `realtime`
    /// fact only warned about or ignored): `measure --allow-non-rt`, and
    /// oslat at the normal policy where FIFO is not ours to set.
    pub allow_non_rt: bool,
    /// The highest FIFO priority this process may set.
    pub max_rt_priority: u64,
    /// Set by the first stop signal.
    pub stop: Arc<AtomicBool>,
}

impl Runner {
    /// Runs `phase` to its end (or a stop signal, which the child gets
    /// too: it ends with what it measured).
    pub fn run(&self, phase: &PhasePlan) -> (Outcome, f64) {
        let began = Instant::now();
        let outcome = self.outcome(phase);
        (outcome, began.elapsed().as_secs_f64())
    }

    fn outcome(&self, phase: &PhasePlan) -> Outcome {
        if phase.when == RunWhen::IfAvailable
            && let Some(tracer) = tracer_of(&phase.kind)
            && let Err(why) = self.has_tracer(tracer)
        {
            return Outcome::Skipped(why);
        }
        let json = self.dir.join(format!("{}.json", phase.name));
        let mut args = arguments(phase, &json);
        let mut notes = Vec::new();
        if self.allow_non_rt {
            if args[0] == "measure" {
                args.push("--allow-non-rt".into());
            } else if phase.priority as u64 > self.max_rt_priority
                && let Some(at) = args.iter().position(|a| a == "-f")
            {
                args.drain(at..at + 2);
                notes.push(format!(
                    "warning: polled at the normal policy: SCHED_FIFO {} is not ours to set",
                    phase.priority
                ));
            }
        }
        let log = self.dir.join(format!("{}.log", phase.name));
        let allowance = child::allowance(phase.runtime_s);
        let status = match child::run(
            &self.exe,
            &args,
            &log,
            (allowance, child::KILL_AFTER),
            &self.stop,
        ) {
            Ok(Ended::Exited(status)) => status,
            Ok(Ended::Overran { killed }) => {
                let what = format!("latencyd {}", args.join(" "));
                return Outcome::Failed(format!(
                    "{} ({})",
                    child::overran(&what, allowance, killed),
                    log.display()
                ));
            }
            Err(e) => return Outcome::Failed(format!("cannot run {}: {e}", self.exe.display())),
        };
        let words = std::fs::read_to_string(&log).unwrap_or_default();
        // oslat ends 1 when its -T stops it; qualify gives none.
        if !status.success() {
            return Outcome::Failed(format!(
                "latencyd {} ended with {status}: {}",
                args.join(" "),
                tail(&words)
            ));
        }
        let text = match std::fs::read_to_string(&json) {
            Ok(text) => text,
            Err(e) => return Outcome::Failed(format!("{} was not written: {e}", json.display())),
        };
        let doc: Value = match serde_json::from_str(&text) {
            Ok(doc) => doc,
            Err(e) => return Outcome::Failed(format!("{}: not JSON: {e}", json.display())),
        };
        let mut measured = match &phase.kind {
            Kind::Hwlat => hwlat(&doc, &phase.cpus),
            Kind::Idle | Kind::Loaded(_) => wakeups(&doc),
            Kind::Timerlat => timerlat(&doc),
            Kind::Busypoll => busypoll(&doc),
        };
        measured.notes.extend(notes);
        measured.notes.extend(warnings(&words));
        if measured.cpus.is_empty() {
            return Outcome::Failed(format!("{}: no CPU's figures in it", json.display()));
        }
        Outcome::Measured(measured)
    }

    /// Whether the kernel has `tracer`, or why it cannot be used.
    fn has_tracer(&self, tracer: &str) -> Result<(), String> {
        let list = self.tracefs.join("available_tracers");
        match std::fs::read_to_string(&list) {
            Ok(t) if t.split_whitespace().any(|w| w == tracer) => Ok(()),
            Ok(_) => Err(format!(
                "the kernel has no {tracer} tracer ({} does not list it)",
                list.display()
            )),
            Err(e) => Err(format!(
                "cannot tell whether the kernel has the {tracer} tracer: {}: {e} (it needs \
                 root, or access to tracefs)",
                list.display()
            )),
        }
    }
}

fn tracer_of(kind: &Kind) -> Option<&'static str> {
    match kind {
        Kind::Hwlat => Some("hwlat"),
        Kind::Timerlat => Some("timerlat"),
        _ => None,
    }
}

/// The child's command line (after `latencyd`).
pub fn arguments(phase: &PhasePlan, json: &Path) -> Vec<String> {
    let cpus = format_cpu_list(&phase.cpus);
    let runtime = phase.runtime_s.to_string();
    let json = json.display().to_string();
    let mut args: Vec<String> = Vec::new();
    let mut push = |words: &[&str]| args.extend(words.iter().map(|w| w.to_string()));
    match &phase.kind {
        Kind::Hwlat => {
            // Gaps over the maximum must be seen; 10 µs is hwlat's own.
            let threshold = phase.maximum.as_ref().map_or(10, |m| m.us.clamp(1, 10));
            push(&["measure", "--hwlat", "-a", &cpus, "-D", &runtime]);
            push(&[
                &format!("--hwlat-threshold={threshold}us"),
                &format!("--json={json}"),
            ]);
        }
        Kind::Busypoll => {
            push(&["oslat", "-c", &cpus, "-D", &runtime, "-q"]);
            push(&["-b", &OSLAT_BUCKETS.to_string(), "--json", &json]);
            if let Some(main) = phase.main_cpu {
                push(&["-C", &main.to_string()]);
            }
            if phase.priority > 0 {
                push(&["-f", &phase.priority.to_string()]);
            }
        }
        kind => {
            push(&[
                "measure",
                "-m",
                "-q",
                "-a",
                &cpus,
                &format!("-t{}", phase.cpus.len()),
            ]);
            push(&[
                "-p",
                &phase.priority.to_string(),
                "-i",
                &phase.interval_us.to_string(),
            ]);
            push(&[
                "-D",
                &runtime,
                "-h",
                &HISTOGRAM_US.to_string(),
                &format!("--json={json}"),
            ]);
            if let Some(max) = &phase.maximum {
                // Forensics needs a lateness above 0.
                let capture_at = max.us.max(1);
                push(&[
                    "--forensics",
                    &format!("--forensics-threshold={capture_at}us"),
                ]);
                push(&[&format!("--spike-threshold={}us", max.us)]);
            }
            match kind {
                Kind::Loaded(load) => push(&[&format!("--load={load}")]),
                Kind::Timerlat => push(&["--timerlat"]),
                _ => {}
            }
        }
    }
    args
}

/// What a failed child said: its error lines, else its last three.
fn tail(words: &str) -> String {
    let errors: Vec<&str> = words.lines().filter(|l| l.contains("error")).collect();
    if !errors.is_empty() {
        return errors.join(" / ");
    }
    let lines: Vec<&str> = words.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(3)..].join(" / ")
}

/// The child's warnings, as it printed them.
fn warnings(words: &str) -> Vec<String> {
    words
        .lines()
        .filter(|l| l.contains("warning:") || l.contains("note:"))
        .map(|l| l.trim().to_string())
        .collect()
}

fn u(v: &Value) -> Option<u64> {
    v.as_u64()
}

fn f(v: &Value) -> Option<f64> {
    v.as_f64()
}

/// A histogram of whole microseconds from a JSON object of counts.
fn buckets(v: &Value) -> BTreeMap<u64, u64> {
    v.as_object()
        .map(|o| {
            o.iter()
                .filter_map(|(k, n)| Some((k.parse().ok()?, n.as_u64()?)))
                .filter(|(_, n)| *n > 0)
                .collect()
        })
        .unwrap_or_default()
}

/// `measure`'s document: cyclictest's threads and latencyd's quantiles.
fn wakeups(doc: &Value) -> Measured {
    let mut cpus: Vec<CpuFigures> = doc["thread"]
        .as_object()
        .into_iter()
        .flat_map(|o| o.values())
        .filter_map(|t| {
            let stats = Stats {
                samples: u(&t["cycles"])?,
                min: f(&t["min"]),
                max: f(&t["max"])?,
                mean: f(&t["avg"]),
                p99: f(&t["p99"]),
                p99_9: f(&t["p999"]),
                p99_99: f(&t["p9999"]),
                missed: u(&t["missed"]),
                overflows: u(&t["overflows"]).unwrap_or(0),
                ..Stats::default()
            };
            Some(CpuFigures::new(
                u(&t["cpu"])? as usize,
                stats,
                buckets(&t["histogram"]),
            ))
        })
        .collect();
    cpus.sort_by_key(|c| c.cpu);
    let captures = serde_json::from_value(doc["latencyd"]["captures"].clone()).unwrap_or_default();
    Measured {
        cpus,
        realtime: doc["latencyd"]["realtime"].as_bool().unwrap_or(false),
        notes: Vec::new(),
        captures,
    }
}

/// `measure --timerlat`'s document: the kernel's thread latency per CPU
/// (what is judged), and each context's largest (the split).
fn timerlat(doc: &Value) -> Measured {
    let mut measured = wakeups(doc);
    let per_cpu = doc["latencyd"]["timerlat"]["cpus"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    measured.cpus = per_cpu
        .iter()
        .filter_map(|(cpu, contexts)| {
            let t = &contexts["thread"];
            let ns = |v: &Value| f(v).map(|n| n / 1_000.0);
            let count = u(&t["count"])?;
            let stats = Stats {
                samples: count,
                min: (count > 0).then(|| ns(&t["min_ns"])).flatten(),
                max: ns(&t["max_ns"])?,
                mean: ns(&t["avg_ns"]),
                ..Stats::default()
            };
            let mut figures =
                CpuFigures::new(cpu.parse().ok()?, stats, buckets(&t["histogram_us"]));
            figures.split_max_us = (contexts.as_object()?.iter())
                .filter(|(_, c)| u(&c["count"]).unwrap_or(0) > 0)
                .filter_map(|(name, c)| Some((name.clone(), ns(&c["max_ns"])?)))
                .collect();
            Some(figures)
        })
        .collect();
    measured.cpus.sort_by_key(|c| c.cpu);
    measured
}

/// `measure --hwlat`'s document: the largest gap per CPU of the samples
/// over its threshold.
fn hwlat(doc: &Value, cpus: &[usize]) -> Measured {
    let run = &doc["hwlat"];
    let mut by_cpu: BTreeMap<usize, Stats> = cpus.iter().map(|&c| (c, Stats::default())).collect();
    for sample in run["report"].as_array().into_iter().flatten() {
        let (Some(cpu), Some(inner), Some(outer)) = (
            u(&sample["cpu"]),
            u(&sample["inner_us"]),
            u(&sample["outer_us"]),
        ) else {
            continue;
        };
        let stats = by_cpu.entry(cpu as usize).or_default();
        stats.samples += 1;
        stats.max = stats.max.max(inner.max(outer) as f64);
    }
    let notes = run["notes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n.as_str().map(str::to_string))
        .collect();
    Measured {
        cpus: by_cpu
            .into_iter()
            .map(|(cpu, stats)| CpuFigures {
                cpu,
                stats,
                histogram_us: BTreeMap::new(),
                split_max_us: BTreeMap::new(),
            })
            .collect(),
        // The tracer's own kernel thread spins; nothing of ours to demote.
        realtime: true,
        notes,
        captures: Vec::new(),
    }
}

/// `oslat`'s document: its buckets, and latencyd's exact maximum and
/// percentiles beside them.
fn busypoll(doc: &Value) -> Measured {
    let exact = &doc["latencyd"]["threads"];
    let mut cpus: Vec<CpuFigures> = doc["thread"]
        .as_object()
        .into_iter()
        .flat_map(|o| o.iter())
        .filter_map(|(index, t)| {
            let ours = &exact[index.as_str()];
            let us = |v: &Value| f(v).map(|n| n / 1_000.0);
            let mut histogram = buckets(&t["histogram"]);
            // oslat's buckets are named by their upper end in µs; the
            // last holds every longer gap too.
            let overflows = histogram.remove(&OSLAT_BUCKETS).unwrap_or(0);
            let stats = Stats {
                samples: u(&ours["samples"])?,
                min: f(&t["min"]),
                max: us(&ours["max_ns"]).or_else(|| f(&t["max"]))?,
                mean: f(&t["avg"]),
                p99: us(&ours["p99_ns"]),
                p99_9: us(&ours["p999_ns"]),
                p99_99: us(&ours["p9999_ns"]),
                overflows,
                ..Stats::default()
            };
            Some(CpuFigures::new(u(&t["cpu"])? as usize, stats, histogram))
        })
        .collect();
    cpus.sort_by_key(|c| c.cpu);
    let notes = doc["thread"]
        .as_object()
        .into_iter()
        .flat_map(|o| o.iter())
        .filter(|(index, _)| exact[index.as_str()]["moved"].as_bool() == Some(true))
        .map(|(_, t)| {
            format!(
                "warning: CPU {}: the poller ended off its CPU; its figures are partly another CPU's",
                t["cpu"]
            )
        })
        .collect();
    Measured {
        cpus,
        realtime: true,
        notes,
        captures: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timerlat_is_judged_on_its_thread_latency_and_keeps_its_split() {
        let doc: Value = serde_json::from_str(
            r#"{"thread": {}, "latencyd": {"realtime": true, "timerlat": {"cpus": {
                "10": {"irq": {"count": 5, "min_ns": 900, "avg_ns": 1000.0, "max_ns": 3000},
                       "thread": {"count": 5, "min_ns": 2000, "avg_ns": 2500.0, "max_ns": 41000,
                                  "histogram_us": {"2": 4, "41": 1}},
                       "user": {"count": 0, "min_ns": 0, "avg_ns": 0.0, "max_ns": 0}},
                "2": {"thread": {"count": 1, "min_ns": 7000, "avg_ns": 7000.0, "max_ns": 7000}}}}}}"#,
        )
        .unwrap();
        let measured = timerlat(&doc);
        let cpus: Vec<usize> = measured.cpus.iter().map(|c| c.cpu).collect();
        assert_eq!(cpus, [2, 10]);
        let ten = &measured.cpus[1];
        assert_eq!(
            (ten.stats.max, ten.stats.median, ten.stats.samples),
            (41.0, Some(2.0), 5)
        );
        let split: Vec<(&str, f64)> = ten
            .split_max_us
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect();
        assert_eq!(split, [("irq", 3.0), ("thread", 41.0)]);
    }
}
