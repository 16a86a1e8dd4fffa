//! `latencyd qualify`: one command that decides whether a host may join
//! a real-time fleet, in the phases fleets glue together by script
//! today: the host's facts, hardware noise (hwlatdetect's), wake-up
//! latency idle and under each load (cyclictest's), timerlat's split
//! where the kernel has it, and busy-polling (oslat's), each for its
//! length against its maximum.
//!
//! - `plan`: the profile, the options and cnf-tests' variables, read
//!   into phases with their CPUs, lengths and maxima.
//! - `facts`: what disqualifies a host before anything runs.
//! - `phase`: one phase, run as latencyd's own one-shot tool in a child
//!   process, its JSON read back; `stats` rteval's figures per CPU.
//! - `verdict`: the cases; `junit`, `json` and `html` render them;
//!   `outputs` writes them.
//!
//! Exit status: 0 passed; 1 a maximum, a disqualifying fact or the
//! baseline failed (whether or not something else could not be
//! measured: the host is known not to qualify); 2 something could not be
//! measured or the command line, profile or environment is wrong, and
//! what. A stop signal ends the phase running with its figures and runs
//! no other (`crate::signals`: a second exits at once with 130).

mod child;
mod facts;
mod html;
mod json;
mod junit;
mod outputs;
mod phase;
mod plan;
mod profile;
mod stats;
mod verdict;

pub use plan::{Env, HostCpus, Kind, Plan};
pub use profile::{PROFILES, Profile};
pub use stats::{Shape, Stats};

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::calendar::format_rfc3339_ms;
use crate::cli::QualifyArgs;
use crate::cpulist::format_cpu_list;
use crate::host::{FactReader, HostInfo};
use crate::tracefs::DEFAULT_TRACEFS;
use outputs::Outputs;
use phase::Runner;
use verdict::{PhaseRun, Status, Verdict};

const WHO: &str = "latencyd qualify";

/// The baseline's factor unless `--regression-factor` says otherwise.
pub const DEFAULT_REGRESSION_FACTOR: f64 = 1.5;

pub fn main(args: &QualifyArgs) -> ExitCode {
    match run(args) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("{WHO}: {err}");
            ExitCode::from(2)
        }
    }
}

fn regression_factor(args: &QualifyArgs) -> Result<f64, String> {
    let Some(text) = &args.regression_factor else {
        return Ok(DEFAULT_REGRESSION_FACTOR);
    };
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|f| f.is_finite() && *f >= 1.0)
        .ok_or_else(|| {
            format!("--regression-factor {text:?}: give a factor of at least 1 (e.g. 1.5)")
        })
}

fn run(args: &QualifyArgs) -> Result<u8, String> {
    let host = HostInfo::detect();
    let env = |name: &str| std::env::var(name).ok();
    let cpus = HostCpus {
        usable: &host.usable_cpus,
        isolated: &host.isolated_cpus,
    };
    let plan = Plan::resolve(args, &env, &cpus)?;
    if args.dry_run {
        print!("{}", describe(&plan));
        return Ok(0);
    }
    let factor = regression_factor(args)?;
    let baseline = (args.baseline.as_deref())
        .map(json::Baseline::read)
        .transpose()?;
    let outputs = Outputs::open(args)?;
    // The first stops the phase running (its child gets the signal too
    // and ends with what it measured) and leaves the rest unrun; a
    // second exits at once.
    let stop = crate::signals::stop_flag()
        .map_err(|e| format!("cannot install the signal handlers: {e}"))?;
    let started = now();
    eprint!("{}", describe(&plan));
    let fingerprint = FactReader::live(&plan.cpus).read();
    let topology = crate::host::topology::read(Path::new("/"), &plan.cpus);
    let checks = facts::check(&fingerprint, &topology, &plan.cpus, &plan.levels);
    let mut verdict = Verdict::default();
    verdict.facts(&checks);
    let base = baseline.as_ref().map(|b| (b, factor));
    let runs = measure(&plan, &host, &stop, &mut verdict, base)?;
    let facts_now = crate::host::json::facts_json(&fingerprint);
    let context = json::Context {
        plan: &plan,
        checks: &checks,
        runs: &runs,
        verdict: &verdict,
        fingerprint: &fingerprint,
        hostname: host.uname.nodename.clone(),
        kernel: host.uname.release.clone(),
        started,
        ended: now(),
        baseline: (baseline.as_ref().zip(args.baseline.as_ref())).map(|(b, file)| {
            json::BaselineJson {
                file: file.display().to_string(),
                factor,
                fingerprint: b.fingerprint.clone(),
                differences: b.differences(&facts_now),
            }
        }),
    };
    outputs.write(&context)?;
    print!("{}", summary(&verdict));
    Ok(verdict.exit_code())
}

/// Every phase of the plan in turn, each judged as it ends.
fn measure(
    plan: &Plan,
    host: &HostInfo,
    stop: &Arc<AtomicBool>,
    verdict: &mut Verdict,
    baseline: Option<(&json::Baseline, f64)>,
) -> Result<Vec<PhaseRun>, String> {
    let dir = work_dir()?;
    let runner = Runner {
        exe: std::env::current_exe()
            .map_err(|e| format!("cannot find latencyd's own binary: {e}"))?,
        dir: dir.clone(),
        tracefs: PathBuf::from(DEFAULT_TRACEFS),
        allow_non_rt: plan.levels.realtime != profile::Level::Fail,
        max_rt_priority: host.max_rt_priority(),
        stop: Arc::clone(stop),
    };
    let baseline_max = |phase: &str, cpu: usize| {
        baseline.and_then(|(b, _)| b.maxima.get(&(phase.to_string(), cpu)).copied())
    };
    let mut runs = Vec::new();
    for phase in &plan.phases {
        let (outcome, seconds) = if stop.load(Ordering::Relaxed) {
            let why = "stopped by a signal before it ran".to_string();
            (phase::Outcome::Failed(why), 0.0)
        } else {
            eprintln!(
                "{WHO}: {} for {} s on CPUs {} ...",
                phase.name,
                phase.runtime_s,
                format_cpu_list(&phase.cpus)
            );
            runner.run(phase)
        };
        let run = PhaseRun {
            plan: phase.clone(),
            outcome,
            seconds,
        };
        let base = baseline.map(|(_, factor)| (&baseline_max as verdict::BaselineMax, factor));
        verdict.phase(&run, plan.levels.realtime, base);
        runs.push(run);
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(runs)
}

/// The children's JSON and logs: a new directory only this user may
/// enter, never one found there (a link planted in /tmp is refused).
fn work_dir() -> Result<PathBuf, String> {
    use std::os::unix::fs::DirBuilderExt;
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = std::env::temp_dir().join(format!("latencyd-qualify-{}-{nanos}", std::process::id()));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("{}: cannot create it: {e}", dir.display()))?;
    Ok(dir)
}

fn now() -> String {
    let ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    format_rfc3339_ms(ns)
}

/// The plan as printed before measuring (and by `--dry-run`).
pub fn describe(plan: &Plan) -> String {
    let mut out = format!(
        "{WHO}: profile {} ({}) on CPUs {} ({})\n",
        plan.profile,
        plan.description,
        format_cpu_list(&plan.cpus),
        plan.cpus_from
    );
    for note in &plan.notes {
        out.push_str(&format!("{WHO}: note: {note}\n"));
    }
    for p in &plan.phases {
        let maximum = p.maximum.as_ref().map_or_else(
            || "no maximum".to_string(),
            |m| format!("maximum {} µs from {}", m.us, m.from),
        );
        let when = if p.when == profile::RunWhen::IfAvailable {
            ", where the kernel has it"
        } else {
            ""
        };
        out.push_str(&format!(
            "  {:<14} {:<11} {:>6} s  CPUs {:<8} {maximum}{when}\n",
            p.name,
            p.kind.tool(),
            p.runtime_s,
            format_cpu_list(&p.cpus)
        ));
    }
    out
}

/// One line per case, then the verdict.
fn summary(verdict: &Verdict) -> String {
    let mut out = String::new();
    for case in &verdict.cases {
        let (word, why) = match &case.status {
            Status::Passed => (
                "PASS",
                case.notes
                    .iter()
                    .find(|n| n.starts_with("warning"))
                    .cloned()
                    .unwrap_or_default(),
            ),
            Status::Failed(why) => ("FAIL", why.clone()),
            Status::Error(why) => ("ERROR", why.clone()),
            Status::Skipped(why) => ("SKIP", why.clone()),
        };
        out.push_str(&format!(
            "{word:<5} {:<14} {:<12} {why}\n",
            case.phase, case.name
        ));
    }
    out.push_str(&format!(
        "verdict: {} (exit {})\n",
        verdict.word(),
        verdict.exit_code()
    ));
    out
}
