//! `--timerlat`: the kernel's timerlat tracer on the measured CPUs for
//! the run, read on a thread of its own (`instruments::timerlat`), and its
//! results in text laid out as `rtla timerlat top` and `hist` print theirs,
//! so that a person comparing the two reads them alike.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::options::{MeasureOptions, TimerlatOption};
use crate::instruments::event::Context;
use crate::instruments::timerlat::tally::{Tally, TimerlatReport};
use crate::instruments::timerlat::{Session, Spec, describe_users};
use crate::stats::LatencyStats;
use crate::tracefs::DEFAULT_TRACEFS;

/// How often the buffers are read, and every how many reads the
/// neighbours are looked at.
const DRAIN_EVERY: Duration = Duration::from_millis(100);
const CHECK_EVERY: u32 = 10;

/// timerlat running beside the samplers.
pub(super) struct TimerlatRun {
    stop: Arc<AtomicBool>,
    /// Taken by `finish`; a run dropped without it (the measurement
    /// failed) is still stopped and its settings set back.
    handle: Option<JoinHandle<TimerlatReport>>,
}

impl TimerlatRun {
    /// Starts timerlat as `--timerlat` asked; the error says why it could
    /// not (no tracer, another user, no permission).
    pub(super) fn start(options: &MeasureOptions) -> Result<Option<TimerlatRun>, String> {
        let Some(asked) = options.timerlat else {
            return Ok(None);
        };
        let bins = options.histogram.map_or(0, |h| h.bins);
        let spec = spec(asked, options.cpus());
        let stop = Arc::new(AtomicBool::new(false));
        let (started_tx, started_rx) = mpsc::channel();
        let flag = Arc::clone(&stop);
        let threshold_ns = options.spike_threshold_ns;
        let handle = std::thread::Builder::new()
            .name("timerlat-reader".to_string())
            .spawn(move || read_until_stopped(&spec, bins, threshold_ns, &flag, &started_tx))
            .map_err(|err| format!("cannot start the timerlat reader: {err}"))?;
        match started_rx.recv() {
            Ok(Ok(())) => Ok(Some(TimerlatRun {
                stop,
                handle: Some(handle),
            })),
            Ok(Err(why)) => {
                let _ = handle.join();
                Err(why)
            }
            Err(_) => Err("the timerlat reader ended before it started".to_string()),
        }
    }

    /// Stops timerlat and returns what it measured.
    pub(super) fn finish(mut self) -> Option<TimerlatReport> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take()?.join().ok()
    }
}

impl Drop for TimerlatRun {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

fn spec(asked: TimerlatOption, cpus: Vec<usize>) -> Spec {
    let mut spec = Spec::new(std::path::Path::new(DEFAULT_TRACEFS), cpus);
    spec.period_us = asked.period_us;
    spec.priority = asked.priority;
    spec.user_threads = asked.user_threads;
    spec
}

/// The reader thread: starts the session, says whether it started, reads
/// until stopped, then stops the tracer and reads what is left.
fn read_until_stopped(
    spec: &Spec,
    bins: usize,
    threshold_ns: u64,
    stop: &AtomicBool,
    started: &mpsc::Sender<Result<(), String>>,
) -> TimerlatReport {
    let mut tally = Tally::new(&spec.cpus, bins, threshold_ns);
    let mut report = TimerlatReport {
        period_us: spec.period_us,
        user: false,
        seconds: 0.0,
        tally: Tally::new(&spec.cpus, bins, threshold_ns),
        notes: Vec::new(),
    };
    let mut session = match Session::start(spec) {
        Ok(session) => session,
        Err(why) => {
            let _ = started.send(Err(format!("--timerlat: {why}")));
            return report;
        }
    };
    let _ = started.send(Ok(()));
    let began = Instant::now();
    report.user = session.user;
    report.notes.append(&mut session.notes);
    let mut said = Vec::new();
    let mut reads = 0u32;
    let mut lost = false;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(DRAIN_EVERY);
        lost |= session
            .drain(|cpu, sample, at| tally.record(cpu, sample, at))
            .missed;
        reads += 1;
        if reads.is_multiple_of(CHECK_EVERY) {
            note_neighbours(&mut session, &mut said);
        }
    }
    report.seconds = began.elapsed().as_secs_f64();
    // What the buffers still hold once recording stopped is read too.
    let notes = session.stop(|cpu, sample, at| tally.record(cpu, sample, at));
    report.notes.extend(notes);
    if lost {
        report.notes.push(
            "the kernel lost timerlat events (the buffer filled between reads): counts are low"
                .to_string(),
        );
    }
    report.notes.extend(said);
    report.tally = tally;
    report
}

/// Adds to `said` what is new among the session's neighbours.
fn note_neighbours(session: &mut Session, said: &mut Vec<String>) {
    let found = session.check();
    let mut lines = Vec::new();
    if !found.users.is_empty() {
        lines.push(format!(
            "{} started beside latencyd's timerlat and shares its settings",
            describe_users(&found.users)
        ));
    }
    lines.extend(
        found
            .retuned
            .iter()
            .map(|r| format!("retuned by another program: {r}")),
    );
    lines.extend(found.instance);
    lines.extend(found.workload);
    for line in lines {
        if !said.contains(&line) {
            eprintln!("latencyd measure: timerlat: {line}");
            said.push(line);
        }
    }
}

/// The column title of a context, as rtla names them.
fn title(context: Context) -> &'static str {
    match context {
        Context::Irq => "IRQ Timer Latency",
        Context::Thread => "Thread Timer Latency",
        Context::User => "Ret user Timer Latency",
    }
}

fn value(ns: u64, unit_ns: u64) -> u64 {
    ns / unit_ns
}

fn avg(stats: &LatencyStats, unit_ns: u64) -> u64 {
    (stats.avg_ns() / unit_ns as f64) as u64
}

/// `rtla timerlat top`'s screen, at the end of the run: per CPU the
/// periods and each context's last, minimum, average and maximum.
pub fn top_block(report: &TimerlatReport, unit_ns: u64) -> String {
    let unit = if unit_ns == 1 { "ns" } else { "us" };
    let contexts = report.contexts();
    let mut out = String::new();
    let secs = report.seconds as u64;
    let _ = write!(
        out,
        "# timerlat: period {} us, {} threads\n{:>3} {:02}:{:02}:{:02}   |",
        report.period_us,
        if report.user {
            "latencyd's"
        } else {
            "the kernel's"
        },
        secs / 86_400,
        secs / 3600 % 24,
        secs / 60 % 60,
        secs % 60
    );
    for &c in &contexts {
        let _ = write!(out, "{:^40}|", format!("{} ({unit})", title(c)));
    }
    out.push_str("\nCPU COUNT      |");
    for _ in &contexts {
        out.push_str("      cur       min       avg       max |");
    }
    out.push('\n');
    for cpu in &report.tally.cpus {
        let count = cpu.stats(Context::Irq).count;
        let _ = write!(out, "{:>3} #{:<9} |", cpu.cpu, count);
        for &c in &contexts {
            let s = cpu.stats(c);
            if s.count == 0 {
                out.push_str(&format!("{:>9} {:>9} {:>9} {:>9} |", "-", "-", "-", "-"));
                continue;
            }
            let _ = write!(
                out,
                "{:>9} {:>9} {:>9} {:>9} |",
                value(s.last_ns, unit_ns),
                value(s.min_ns(), unit_ns),
                avg(s, unit_ns),
                value(s.max_ns, unit_ns)
            );
        }
        out.push('\n');
    }
    for note in &report.notes {
        let _ = writeln!(out, "# timerlat: {note}");
    }
    out
}

/// Every CPU's samples of one context: count, minimum, sum, maximum.
type Totals = (u64, u64, u128, u64);

/// A context's short name in `rtla timerlat hist`'s columns.
fn short(c: Context) -> &'static str {
    match c {
        Context::Irq => "IRQ",
        Context::Thread => "Thr",
        Context::User => "Usr",
    }
}

/// `rtla timerlat hist`'s histogram: one row per bin with samples, a
/// column per CPU and context, then over/count/min/avg/max and the ALL
/// block.
pub fn hist_block(report: &TimerlatReport, unit_ns: u64) -> String {
    let contexts = report.contexts();
    let mut columns: Vec<(String, &LatencyStats)> = Vec::new();
    for cpu in &report.tally.cpus {
        for &c in &contexts {
            columns.push((format!("{}-{:03}", short(c), cpu.cpu), cpu.stats(c)));
        }
    }
    let bins = columns
        .first()
        .and_then(|(_, s)| s.linear())
        .map_or(0, |l| l.bins().len());
    let mut out = String::new();
    let secs = report.seconds as u64;
    let _ = writeln!(out, "# timerlat histogram (latencyd)");
    let _ = writeln!(
        out,
        "# Time unit is {}",
        if unit_ns == 1 {
            "nanoseconds (ns)"
        } else {
            "microseconds (us)"
        }
    );
    let _ = writeln!(
        out,
        "# Duration: {:>3} {:02}:{:02}:{:02}",
        secs / 86_400,
        secs / 3600 % 24,
        secs / 60 % 60,
        secs % 60
    );
    out.push_str("Index");
    for (name, _) in &columns {
        let _ = write!(out, " {name:>9}");
    }
    out.push('\n');
    for bin in 0..bins {
        let counts: Vec<u64> = columns
            .iter()
            .map(|(_, s)| s.linear().map_or(0, |l| l.bins()[bin]))
            .collect();
        if counts.iter().all(|&n| n == 0) {
            continue;
        }
        let _ = write!(out, "{bin:<5}");
        for n in counts {
            let _ = write!(out, " {n:>9}");
        }
        out.push('\n');
    }
    let row = |out: &mut String, label: &str, f: &dyn Fn(&LatencyStats) -> u64| {
        let _ = write!(out, "{label:<5}");
        for (_, s) in &columns {
            let _ = write!(out, " {:>9}", f(s));
        }
        out.push('\n');
    };
    row(&mut out, "over:", &|s| {
        s.linear().map_or(0, |l| l.overflows())
    });
    row(&mut out, "count:", &|s| s.count);
    row(&mut out, "min:", &|s| value(s.min_ns(), unit_ns));
    row(&mut out, "avg:", &|s| avg(s, unit_ns));
    row(&mut out, "max:", &|s| value(s.max_ns, unit_ns));
    out.push_str(&all_block(report, &contexts, unit_ns));
    out
}

/// `rtla timerlat hist`'s ALL block: every CPU's samples of a context
/// together.
fn all_block(report: &TimerlatReport, contexts: &[Context], unit_ns: u64) -> String {
    let mut out = String::new();
    out.push_str("ALL: ");
    for &c in contexts {
        let _ = write!(out, " {:>9}", short(c));
    }
    out.push('\n');
    // Every CPU's samples of a context together.
    let all: Vec<Totals> = contexts
        .iter()
        .map(|&c| {
            let mut total = (0u64, u64::MAX, 0u128, 0u64);
            for cpu in &report.tally.cpus {
                let s = cpu.stats(c);
                if s.count > 0 {
                    total = (
                        total.0 + s.count,
                        total.1.min(s.min_ns()),
                        total.2 + s.sum_ns,
                        total.3.max(s.max_ns),
                    );
                }
            }
            total
        })
        .collect();
    let mut line = |label: &str, f: &dyn Fn(&Totals) -> u64| {
        let _ = write!(out, "{label:<5}");
        for t in &all {
            let _ = write!(out, " {:>9}", if t.0 == 0 { 0 } else { f(t) });
        }
        out.push('\n');
    };
    line("count:", &|t| t.0);
    line("min:", &|t| value(t.1, unit_ns));
    line("avg:", &|t| (t.2 / u128::from(t.0)) as u64 / unit_ns);
    line("max:", &|t| value(t.3, unit_ns));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instruments::event::TimerlatSample;

    fn report(user: bool) -> TimerlatReport {
        let mut tally = Tally::new(&[0, 1], 20, 100_000);
        for (cpu, context, latency_ns) in [
            (0, Context::Irq, 2_400),
            (0, Context::Thread, 5_100),
            (0, Context::User, 6_000),
            (0, Context::Irq, 1_200),
            (0, Context::Thread, 3_900),
            (1, Context::Irq, 800),
            (1, Context::Thread, 25_000),
        ] {
            let seqnum = tally.cpus[cpu].stats(context).count as u32 + 1;
            tally.record(
                cpu,
                TimerlatSample {
                    seqnum,
                    context,
                    latency_ns,
                },
                0,
            );
        }
        TimerlatReport {
            period_us: 1000,
            user,
            seconds: 61.0,
            tally,
            notes: vec!["a note".into()],
        }
    }

    #[test]
    fn the_top_block_has_rtlas_columns_and_a_row_per_cpu() {
        let text = top_block(&report(true), 1000);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[1].starts_with("  0 00:01:01   |"), "{text}");
        assert!(
            lines[1].contains("IRQ Timer Latency (us)")
                && lines[1].contains("Ret user Timer Latency (us)"),
            "{text}"
        );
        assert_eq!(
            lines[2]
                .matches("cur       min       avg       max")
                .count(),
            3,
            "{text}"
        );
        // CPU 0: two periods; IRQ last 1, min 1, avg 1, max 2.
        let cpu0: Vec<&str> = lines[3].split_whitespace().collect();
        assert_eq!(&cpu0[..7], ["0", "#2", "|", "1", "1", "1", "2"], "{text}");
        assert!(lines[4].contains('-'), "CPU 1 has no user samples: {text}");
        assert!(text.ends_with("# timerlat: a note\n"), "{text}");
        let kernel = top_block(&report(false), 1);
        assert!(
            !kernel.contains("Ret user") && kernel.contains("(ns)"),
            "{kernel}"
        );
    }

    #[test]
    fn the_hist_block_has_a_column_per_cpu_and_context_and_the_all_block() {
        let text = hist_block(&report(false), 1000);
        let header = text.lines().find(|l| l.starts_with("Index")).unwrap();
        let columns: Vec<&str> = header.split_whitespace().skip(1).collect();
        assert_eq!(
            columns,
            ["IRQ-000", "Thr-000", "IRQ-001", "Thr-001"],
            "{text}"
        );
        let row = |label: &str| -> Vec<u64> {
            let line = text.lines().find(|l| l.starts_with(label)).unwrap();
            line.split_whitespace()
                .skip(1)
                .map(|v| v.parse().unwrap())
                .collect()
        };
        assert_eq!(row("2    "), [1, 0, 0, 0]);
        assert_eq!(row("over:"), [0, 0, 0, 1], "25 µs is past 20 bins");
        assert_eq!(row("count:"), [2, 2, 1, 1]);
        assert_eq!(row("max:"), [2, 5, 0, 25]);
        let all = text.split("ALL:").nth(1).unwrap();
        let all_row = |label: &str| -> Vec<u64> {
            let line = all.lines().find(|l| l.starts_with(label)).unwrap();
            line.split_whitespace()
                .skip(1)
                .map(|v| v.parse().unwrap())
                .collect()
        };
        assert_eq!(all_row("count:"), [3, 3], "{all}");
        assert_eq!(all_row("min:"), [0, 3], "{all}");
        assert_eq!(all_row("max:"), [2, 25], "{all}");
    }
}
