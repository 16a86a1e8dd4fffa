//! `measure --hwlat`: the kernel's hwlat tracer instead of the samplers,
//! for the run's length, reported as rt-tests' hwlatdetect reports it
//! (the same labels, so that a person or a script that reads its report
//! reads this one), with the NMIs the kernel counted and the SMIs where
//! the MSR is readable; `--json` writes the same as a document.

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;

use super::options::{HwlatOption, JsonTarget, MeasureOptions};
use crate::cpulist::format_cpu_list;
use crate::forensics::noise::SmiCounters;
use crate::instruments::hwlat::{HwlatSession, HwlatSpec, HwlatTally};
use crate::tracefs::DEFAULT_TRACEFS;

const DRAIN_EVERY: Duration = Duration::from_millis(100);

/// A finished hwlat run.
#[derive(Debug, Clone)]
pub struct HwlatRun {
    pub cpus: Vec<usize>,
    pub knobs: HwlatOption,
    pub seconds: f64,
    pub tally: HwlatTally,
    /// SMIs counted on the CPUs during the run, or why they could not be.
    pub smis: Result<u64, String>,
    pub notes: Vec<String>,
}

/// Runs hwlat until the run's length or a stop signal, then prints.
pub(super) fn run(
    options: &MeasureOptions,
    knobs: HwlatOption,
    stop: &AtomicBool,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let cpus = options.cpus();
    let spec = HwlatSpec {
        tracefs: DEFAULT_TRACEFS.into(),
        cpus: cpus.clone(),
        threshold_us: knobs.threshold_us,
        width_us: knobs.width_us,
        window_us: knobs.window_us,
    };
    let cpuinfo = crate::files::read_cpuinfo();
    let (smi, smi_cap) = SmiCounters::open(Path::new("/dev/cpu"), &cpuinfo, &cpus);
    let smi_before = smi.as_ref().map(SmiCounters::read);
    let mut session =
        HwlatSession::start(&spec).map_err(|why| anyhow::anyhow!("--hwlat: {why}"))?;
    let mut tally = HwlatTally::default();
    let mut notes = std::mem::take(&mut session.notes);
    let began = Instant::now();
    let limit = options.duration_ns.map(Duration::from_nanos);
    while !stop.load(Ordering::Relaxed) && limit.is_none_or(|l| began.elapsed() < l) {
        std::thread::sleep(DRAIN_EVERY);
        notes.extend(session.drain(|cpu, sample| tally.record(cpu, sample)));
    }
    let seconds = began.elapsed().as_secs_f64();
    notes.extend(
        session
            .changed_behind()
            .into_iter()
            .map(|c| format!("changed by another program: {c}")),
    );
    notes.extend(session.stop(|cpu, sample| tally.record(cpu, sample)));
    let smis = match (smi_before, smi.as_ref().map(SmiCounters::read)) {
        (Some(before), Some(after)) => Ok(before
            .iter()
            .zip(&after)
            .filter_map(|((_, b), (_, a))| {
                Some(a.as_ref()?.wrapping_sub(*b.as_ref()?) & 0xffff_ffff)
            })
            .sum()),
        _ => Err(smi_cap.detail),
    };
    let report = HwlatRun {
        cpus,
        knobs,
        seconds,
        tally,
        smis,
        notes,
    };
    match &options.json {
        Some(JsonTarget::Stdout) => write!(out, "{}", json_document(&report))?,
        Some(JsonTarget::File(path)) => {
            write!(out, "{}", text(&report))?;
            std::fs::write(path, json_document(&report))
                .with_context(|| format!("cannot write the JSON results to {}", path.display()))?;
        }
        None => write!(out, "{}", text(&report))?,
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The report, laid out as hwlatdetect's.
pub fn text(r: &HwlatRun) -> String {
    let k = r.knobs;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "hwlatdetect:  test duration {} seconds",
        r.seconds.round() as u64
    );
    let _ = writeln!(out, "   detector: tracer (latencyd measure --hwlat)");
    let _ = writeln!(out, "   parameters:");
    let _ = writeln!(
        out,
        "        CPU list:          {}",
        format_cpu_list(&r.cpus)
    );
    let _ = writeln!(out, "        Latency threshold: {}us", k.threshold_us);
    let _ = writeln!(out, "        Sample window:     {}us", k.window_us);
    let _ = writeln!(out, "        Sample width:      {}us", k.width_us);
    let _ = writeln!(
        out,
        "     Non-sampling period:  {}us",
        k.window_us - k.width_us
    );
    let _ = writeln!(out, "        Output File:       None\n");
    let _ = writeln!(out, "Starting test\ntest finished");
    let t = &r.tally;
    if t.samples == 0 {
        let _ = writeln!(out, "Max Latency: Below threshold");
    } else {
        let _ = writeln!(out, "Max Latency: {}us", t.max_us);
    }
    let _ = writeln!(out, "Samples recorded: {}", t.samples);
    let _ = writeln!(out, "Samples exceeding threshold: {}", t.samples);
    match &r.smis {
        Ok(n) => {
            let _ = writeln!(out, "SMIs during run: {n}");
        }
        Err(why) => {
            let _ = writeln!(out, "SMIs during run: not counted ({why})");
        }
    }
    let _ = writeln!(out, "NMIs during run: {}", t.nmis);
    if t.samples > 0 {
        let _ = writeln!(out, "report:");
        for (cpu, sec, nsec, inner, outer) in &t.report {
            let _ = writeln!(
                out,
                "ts: {sec}.{nsec:09}, inner:{inner}, outer:{outer}, cpu:{cpu}"
            );
        }
        if t.samples > t.report.len() as u64 {
            let _ = writeln!(
                out,
                "# {} more samples not listed",
                t.samples - t.report.len() as u64
            );
        }
    }
    for note in &r.notes {
        let _ = writeln!(out, "# hwlat: {note}");
    }
    out
}

#[derive(Serialize)]
struct JsonHwlat<'a> {
    hwlat: JsonRun<'a>,
}

#[derive(Serialize)]
struct JsonRun<'a> {
    cpus: String,
    threshold_us: u64,
    width_us: u64,
    window_us: u64,
    seconds: f64,
    /// The largest gap, µs (0 when none was over the threshold).
    max_us: u64,
    /// Windows with a gap over the threshold.
    samples: u64,
    /// Gaps over the threshold inside those windows.
    gaps_over_threshold: u64,
    nmis: u64,
    /// SMIs on the CPUs during the run; null where they cannot be read
    /// (`smis_unreadable` says why).
    smis: Option<u64>,
    smis_unreadable: Option<&'a str>,
    report: Vec<JsonSample>,
    notes: &'a [String],
}

#[derive(Serialize)]
struct JsonSample {
    cpu: usize,
    ts: String,
    inner_us: u64,
    outer_us: u64,
}

/// The `--json` document of a `--hwlat` run.
pub fn json_document(r: &HwlatRun) -> String {
    let doc = JsonHwlat {
        hwlat: JsonRun {
            cpus: format_cpu_list(&r.cpus),
            threshold_us: r.knobs.threshold_us,
            width_us: r.knobs.width_us,
            window_us: r.knobs.window_us,
            seconds: r.seconds,
            max_us: r.tally.max_us,
            samples: r.tally.samples,
            gaps_over_threshold: r.tally.over_threshold,
            nmis: r.tally.nmis,
            smis: r.smis.as_ref().ok().copied(),
            smis_unreadable: r.smis.as_ref().err().map(String::as_str),
            report: (r.tally.report.iter())
                .map(|&(cpu, sec, nsec, inner_us, outer_us)| JsonSample {
                    cpu,
                    ts: format!("{sec}.{nsec:09}"),
                    inner_us,
                    outer_us,
                })
                .collect(),
            notes: &r.notes,
        },
    };
    let mut text = serde_json::to_string_pretty(&doc).expect("the JSON DTOs always serialize");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instruments::event::HwlatSample;

    fn run(samples: &[(usize, u64, u64)]) -> HwlatRun {
        let mut tally = HwlatTally::default();
        for &(cpu, inner_us, outer_us) in samples {
            tally.record(
                cpu,
                HwlatSample {
                    inner_us,
                    outer_us,
                    nmi_total_us: 0,
                    nmi_count: 1,
                    seqnum: 1,
                    count: 3,
                    wall_sec: 1_795_742_624,
                    wall_nsec: 7,
                },
            );
        }
        HwlatRun {
            cpus: vec![0, 1],
            knobs: HwlatOption {
                threshold_us: 10,
                width_us: 500_000,
                window_us: 1_000_000,
            },
            seconds: 10.2,
            tally,
            smis: Err("not an Intel CPU".to_string()),
            notes: vec![],
        }
    }

    #[test]
    fn the_report_reads_as_hwlatdetects() {
        let text = text(&run(&[(1, 4130, 529), (0, 402, 112)]));
        for line in [
            "hwlatdetect:  test duration 10 seconds",
            "        Latency threshold: 10us",
            "     Non-sampling period:  500000us",
            "Max Latency: 4130us",
            "Samples recorded: 2",
            "Samples exceeding threshold: 2",
            "SMIs during run: not counted (not an Intel CPU)",
            "NMIs during run: 2",
            "ts: 1795742624.000000007, inner:4130, outer:529, cpu:1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} in\n{text}");
        }
        let quiet = super::text(&run(&[]));
        assert!(
            quiet.contains("Max Latency: Below threshold\n") && !quiet.contains("report:"),
            "{quiet}"
        );
    }

    #[test]
    fn the_json_has_the_gaps_and_says_why_smis_are_missing() {
        let doc: serde_json::Value =
            serde_json::from_str(&json_document(&run(&[(1, 4130, 529)]))).unwrap();
        let h = &doc["hwlat"];
        assert_eq!(
            (h["max_us"].as_u64(), h["samples"].as_u64()),
            (Some(4130), Some(1))
        );
        assert_eq!(h["gaps_over_threshold"], 3);
        assert_eq!(h["smis"], serde_json::Value::Null);
        assert_eq!(h["smis_unreadable"], "not an Intel CPU");
        assert_eq!(h["report"][0]["ts"], "1795742624.000000007");
    }
}
