//! `-b` and `--forensics`: the flight recorder that explains late
//! wake-ups, and cyclictest's break lines (`--tracemark`'s mark is
//! `tracefs::TraceMark`).

use std::path::PathBuf;

use super::options::MeasureOptions;
use crate::forensics::verdict::human;
use crate::forensics::{Recorder, Settings};
use crate::tracefs::DEFAULT_TRACEFS;
use crate::units::NS_PER_MS;

/// Starts the flight recorder for `-b` or `--forensics` (a disabled one
/// otherwise); says on stderr why it cannot run.
pub(super) fn start_forensics(options: &MeasureOptions) -> Recorder {
    let threshold_ns = match [options.breaktrace_ns, options.forensics_ns]
        .into_iter()
        .flatten()
        .min()
    {
        Some(ns) => ns,
        None => return Recorder::disabled(),
    };
    let recorder = Recorder::start(
        Settings {
            threshold_ns,
            dir: None,
            max_captures: MEASURE_MAX_CAPTURES,
            max_bytes: u64::MAX,
            buffer_size_kb: MEASURE_BUFFER_KB,
            tracefs: PathBuf::from(DEFAULT_TRACEFS),
            per_cpu_gap_ns: MEASURE_PER_CPU_GAP_NS,
            max_per_minute: 60,
            capture_new_max: false,
        },
        &options.cpus(),
    );
    let journal = recorder.journal();
    let data = journal.lock();
    if !data.available {
        eprintln!(
            "latencyd measure: warning: no spike forensics: {}",
            data.reason.as_deref().unwrap_or("unknown reason")
        );
    }
    drop(data);
    recorder
}

/// Causes printed per capture, largest first.
const MEASURE_CAUSES_SHOWN: usize = 8;
/// Captures `measure` keeps (in memory; oldest dropped).
const MEASURE_MAX_CAPTURES: usize = 100;
/// The captures whole, oldest first, for `--json`: the ones in flight
/// are finished first.
pub(super) fn finished_captures(recorder: &Recorder) -> Vec<crate::forensics::Capture> {
    recorder.flush();
    let journal = recorder.journal();
    let data = journal.lock();
    data.in_memory.iter().rev().cloned().collect()
}

/// At most one capture per CPU within this long in `measure`.
const MEASURE_PER_CPU_GAP_NS: u64 = 200 * NS_PER_MS;
/// Each CPU's ring buffer for `measure`, KiB.
const MEASURE_BUFFER_KB: u64 = 1024;

/// `-b`'s lines as cyclictest prints them (the threads' ids, then which
/// thread broke and how late), then each capture: its verdict
/// and causes, oldest first.
pub(super) fn forensics_block(
    options: &MeasureOptions,
    recorder: &Recorder,
    tids: &[i32],
    break_hit: Option<(i32, u64)>,
) -> String {
    let mut out = String::new();
    if options.breaktrace_ns.is_some() {
        out.push_str("# Thread Ids:");
        for tid in tids {
            out.push_str(&format!(" {tid:05}"));
        }
        out.push('\n');
    }
    if let Some((tid, latency_ns)) = break_hit {
        let value = if options.nsecs {
            latency_ns
        } else {
            latency_ns / 1_000
        };
        out.push_str(&format!("# Break thread: {tid}\n# Break value: {value}\n"));
    }
    let journal = recorder.journal();
    let data = journal.lock();
    if !data.available && data.in_memory.is_empty() {
        // With plain -b the warning at the start said it; cyclictest's
        // lines stay alone on stdout.
        if let (Some(reason), Some(_)) = (&data.reason, options.forensics_ns) {
            out.push_str(&format!("# No spike forensics: {reason}\n"));
        }
        return out;
    }
    for capture in data.in_memory.iter().rev() {
        let s = &capture.summary;
        out.push_str(&format!("# Spike at {}: {}\n", s.at, s.verdict));
        for cause in s.causes.iter().take(MEASURE_CAUSES_SHOWN) {
            let who = match (cause.pid, &cause.policy, cause.priority) {
                (Some(pid), Some(policy), Some(prio)) => format!(" (pid {pid}, {policy} {prio})"),
                (Some(pid), None, Some(prio)) => format!(" (pid {pid}, priority {prio})"),
                (Some(pid), _, None) => format!(" (pid {pid})"),
                (None, ..) => String::new(),
            };
            out.push_str(&format!(
                "#   {:>9}  {:<11} {}{who}\n",
                human(cause.duration_ns),
                cause.kind,
                cause.name
            ));
        }
        if s.causes.len() > MEASURE_CAUSES_SHOWN {
            let rest = &s.causes[MEASURE_CAUSES_SHOWN..];
            let ns: u64 = rest.iter().map(|c| c.duration_ns).sum();
            out.push_str(&format!(
                "#   {:>9}  ({} more causes)\n",
                human(ns),
                rest.len()
            ));
        }
        if !s.complete {
            out.push_str(&format!("#   incomplete trace: {}\n", s.gaps.join("; ")));
        }
    }
    let skipped: u64 = data.uncaptured.values().sum();
    if skipped > 0 {
        out.push_str(&format!(
            "# {skipped} more spikes not captured (at most one per CPU in 200 ms, 60 a minute)\n"
        ));
    }
    out
}
