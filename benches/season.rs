//! A season of what the daemon accumulates, replayed in minutes, with the
//! live heap (a counting global allocator) read at the end of each
//! simulated day: what must stay flat for a monitor that runs for months.
//!
//! Per day, for each of `SEASON_CPUS` CPUs (2): a minute's interval of
//! samples every simulated minute into the exporter's `CpuView` (lifetime
//! statistics, window maximum, over-budget count, window histograms,
//! bucket and native counts), at wall times a minute apart, so every
//! window rolls over as in a day; the same intervals into the record's
//! accumulator, written by the record's writer into a directory that
//! rotates and prunes at `record.retention` (30 d); two host changes
//! (reverted) into the fingerprint tracker; a stall opened and closed in
//! the gap log. As root, with tracefs, also `SEASON_CAPTURES_PER_DAY`
//! (300) observer captures a day offered to a real forensics recorder
//! writing to disk with `forensics.max_captures` (1,000) evicting.
//!
//! Prints each day's live heap; then the least-squares slope over the
//! days after the first week, in bytes a simulated day, and the record
//! directory's size. Run: `cargo bench --bench season` (`SEASON_DAYS`,
//! default 90).

#[path = "support/counting.rs"]
mod counting;
// Only its sampler is used here.
#[allow(dead_code)]
#[path = "support/synthetic.rs"]
mod synthetic;

use std::time::Instant;

use counting::live_bytes;
use latencyd::daemon::state::{CpuView, GapLog};
use latencyd::host::{Fact, Fingerprint};
use latencyd::instruments::host_facts::{ChangeSeen, HostTrack};
use latencyd::record::writer::{LogWriter, Settings, Target};
use latencyd::record::{Accumulator, GapReason};
use latencyd::stats::LatencyStats;

#[global_allocator]
static ALLOCATOR: counting::Counting = counting::Counting;

const S: u64 = 1_000_000_000;
const MINUTE: u64 = 60 * S;
const DAY: u64 = 24 * 60 * MINUTE;
/// 2026-01-01, so that the record's file names are real dates.
const START_UNIX: u64 = 1_767_225_600 * S;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A minute's interval ending at `end_ns`: 600 samples (a tenth of a
/// 1 kHz sampler's, which fills the same bins), mostly 3 to 12 µs, one in
/// a hundred up to 2 ms.
fn minute_of(interval: &mut LatencyStats, end_ns: u64, x: &mut u64) {
    interval.reset();
    for i in 0..600u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        let latency = match *x % 100 {
            0 => 60_000 + (*x >> 8) % 1_940_000,
            1..=9 => 12_000 + (*x >> 8) % 48_000,
            _ => 3_000 + (*x >> 8) % 9_000,
        };
        interval.record_at(latency, i, end_ns - MINUTE + i * 100_000_000);
    }
}

fn facts(governor: &str) -> Fingerprint {
    let mut f = Fingerprint::default();
    f.insert("kernel.release", Fact::known("6.12.0-rt5"));
    f.insert("cpus.online", Fact::known("0-1"));
    f.insert("cpufreq.policy[cpu0]", Fact::known(governor));
    f
}

fn main() {
    let days = env_or("SEASON_DAYS", 90);
    let cpus = env_or("SEASON_CPUS", 2) as usize;
    let config = latencyd::instruments::registry::builtin_config();
    let dir = tempfile::tempdir().unwrap();
    let mut views: Vec<CpuView> = (0..cpus)
        .map(|cpu| CpuView::new(cpu, &config, synthetic::sampler(cpu, 0)))
        .collect();
    let mut record = Accumulator::new(
        config.record.interval_ns,
        config.measure.spike_threshold_ns,
        START_UNIX,
    );
    let mut writer = LogWriter::new(Target::Dir(Settings {
        dir: dir.path().to_path_buf(),
        interval_ns: config.record.interval_ns,
        retention_ns: config.record.retention_ns,
        max_bytes: config.record.max_bytes,
    }));
    let mut host = HostTrack::new(facts("performance"), Vec::new(), START_UNIX, 0);
    let mut gaps = GapLog::default();
    let captures = captures::Offers::start(dir.path());
    let mut interval = LatencyStats::new(config.measure.spike_threshold_ns, None);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let started = Instant::now();
    let mut heap = Vec::new();
    println!("day  live heap KiB  record files  captures kept");
    for day in 0..days {
        for minute in 1..=24 * 60 {
            let mono = (day * DAY + minute * MINUTE) + S;
            let unix = START_UNIX + day * DAY + minute * MINUTE;
            minute_of(&mut interval, mono, &mut x);
            for (cpu, view) in views.iter_mut().enumerate() {
                view.absorb(&interval).unwrap();
                record.add(cpu, &interval);
            }
            if let Some(batch) = record.take(unix, false) {
                writer.write(&batch, unix).expect("the record is written");
            }
            if minute.is_multiple_of(720) {
                let governor = if minute == 720 {
                    "powersave"
                } else {
                    "performance"
                };
                host.take_read(facts(governor), Vec::new(), unix, 0, ChangeSeen::Running);
                gaps.open(day as usize % cpus, GapReason::Stalled, unix);
                gaps.close(day as usize % cpus, GapReason::Stalled, unix + 3 * S);
            }
            captures.offer(day, minute, mono);
        }
        captures.settle();
        let files = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".hlog"))
            })
            .count();
        let live = live_bytes();
        heap.push(live as f64);
        println!(
            "{day:3}  {:13.1}  {files:12}  {}",
            live as f64 / 1024.0,
            captures.kept()
        );
    }
    // Every bounded list fills within the first days (the host's 64
    // changes at two a day, the 32 gaps, the record's 30 days): the slope
    // is taken over the second half.
    let second_half: Vec<(f64, f64)> = heap
        .iter()
        .enumerate()
        .skip(heap.len() / 2)
        .map(|(d, &b)| (d as f64, b))
        .collect();
    let n = second_half.len() as f64;
    let (mx, my) = (
        second_half.iter().map(|p| p.0).sum::<f64>() / n,
        second_half.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let slope = second_half
        .iter()
        .map(|p| (p.0 - mx) * (p.1 - my))
        .sum::<f64>()
        / second_half.iter().map(|p| (p.0 - mx).powi(2)).sum::<f64>();
    let (low, high) = second_half
        .iter()
        .fold((f64::MAX, 0f64), |(l, h), p| (l.min(p.1), h.max(p.1)));
    println!(
        "{days} simulated days, {cpus} CPUs, in {:.1} s: live heap over the second half \
         {:.1} to {:.1} KiB, slope {slope:+.1} bytes a simulated day; host changes kept {} of \
         {}, gaps kept {}, captures kept {}",
        started.elapsed().as_secs_f64(),
        low / 1024.0,
        high / 1024.0,
        host.history.len(),
        host.changes_total,
        gaps.seen.len(),
        captures.kept()
    );
}

/// The observer's captures, offered to a real recorder (root, tracefs).
mod captures {
    use std::path::Path;

    use latencyd::forensics::{Offer, Recorder, Settings};
    use latencyd::instruments::observe::TaskKey;
    use latencyd::instruments::observe::tally::{Comm, WorkloadSpike};

    pub struct Offers {
        recorder: Option<Recorder>,
        per_day: u64,
    }

    impl Offers {
        pub fn start(dir: &Path) -> Offers {
            let per_day = super::env_or("SEASON_CAPTURES_PER_DAY", 300);
            let settings = Settings {
                threshold_ns: 1_000_000,
                dir: Some(dir.join("captures")),
                max_captures: 1_000,
                max_bytes: 256 << 20,
                buffer_size_kb: 64,
                tracefs: "/sys/kernel/tracing".into(),
                per_cpu_gap_ns: 0,
                max_per_minute: usize::MAX,
                capture_new_max: false,
            };
            let recorder = Recorder::start(settings, &[0]);
            let available = recorder.journal().lock().available;
            if !available {
                eprintln!("no forensics here (needs root and tracefs): captures left out");
            }
            Offers {
                recorder: available.then_some(recorder),
                per_day,
            }
        }

        /// Offers this minute's share of the day's captures.
        pub fn offer(&self, day: u64, minute: u64, mono: u64) {
            let Some(recorder) = &self.recorder else {
                return;
            };
            if !minute.is_multiple_of((24 * 60 / self.per_day.max(1)).max(1)) {
                return;
            }
            let spike = WorkloadSpike {
                pid: 1_000 + (minute % 97) as i32,
                comm: Comm::new(b"rtapp"),
                latency_ns: 2_000_000 + day,
                since_ns: mono - 2_000_000,
                woken_ns: mono - 2_000_000,
                ran_ns: mono,
                from_timer: true,
                causes: vec![],
                events: vec![],
                events_omitted: 0,
            };
            let key = TaskKey {
                cpu: 0,
                task: "rtapp".to_string(),
                container: String::new(),
            };
            let unix = super::START_UNIX + mono;
            recorder.offer(Offer {
                cpu: 0,
                wakeup_mono_ns: mono,
                latency_ns: spike.latency_ns,
                build: Box::new(move || {
                    latencyd::instruments::observe::spike::capture(&key, &spike, (mono, unix))
                }),
            });
        }

        /// Waits until every offer so far is kept or counted.
        pub fn settle(&self) {
            if let Some(recorder) = &self.recorder {
                recorder.flush();
            }
        }

        pub fn kept(&self) -> usize {
            self.recorder
                .as_ref()
                .map_or(0, |r| r.journal().lock().recent.len())
        }
    }
}
