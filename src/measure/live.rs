//! What `measure` prints while it runs, sample by sample or interval by
//! interval, in cyclictest's formats: `-v`'s `thread:cycle:latency` lines
//! (reduced by `-o`), the `--spike` list kept for the end, `-M`'s rule
//! for when the live lines refresh, and the `-F` named pipe that hands the
//! summary lines to whoever reads it.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::options::{MeasureOptions, PUBLISH_PERIOD_NS, SpikeList};
use crate::rt::sys::{self, Policy};
use crate::stats::{LatencyStats, SampleLog};

/// The most single samples a sampler's interval keeps for `-v`/`--spike`.
const MAX_LOG_ROOM: usize = 1 << 20;

/// The sample log a sampler of this interval needs (`None` without `-v`
/// and `--spike`): room for four publish periods' worth, so a main thread
/// a little behind loses nothing.
pub(super) fn sample_log(options: &MeasureOptions, interval_ns: u64) -> Option<SampleLog> {
    let per_period = (PUBLISH_PERIOD_NS / interval_ns + 1) as usize;
    let room = (4 * per_period).min(MAX_LOG_ROOM);
    match (options.verbose, options.spike_list) {
        (Some(_), _) => Some(SampleLog::new(room, 0)),
        (None, Some(spikes)) => Some(SampleLog::new(
            room.min(spikes.nodes),
            spike_floor_ns(spikes, options.unit_ns()),
        )),
        (None, None) => None,
    }
}

/// The smallest latency cyclictest lists for a trigger: it compares the
/// latency in whole units (µs, or ns with -N) with `> trigger`.
fn spike_floor_ns(spikes: SpikeList, unit_ns: u64) -> u64 {
    (spikes.trigger + 1).saturating_mul(unit_ns)
}

/// `-o`'s reduction state of one thread.
#[derive(Default, Clone)]
struct Reduction {
    seen: u64,
    max: u64,
    cycle_of_max: u64,
}

/// `--spike` records: (thread, latency in the run's unit, time in µs).
#[derive(Default)]
struct Spikes {
    kept: Vec<(usize, u64, u64)>,
    total: u64,
}

pub(super) struct Live {
    unit_ns: u64,
    verbose: Option<u64>,
    reductions: Vec<Reduction>,
    spike_list: Option<SpikeList>,
    spikes: Spikes,
    /// Samples a full sample log could not keep.
    dropped: u64,
    refresh_on_max: bool,
    maxima: Vec<u64>,
}

impl Live {
    pub(super) fn new(options: &MeasureOptions) -> Live {
        let n = options.threads.len();
        Live {
            unit_ns: options.unit_ns(),
            verbose: options.verbose,
            reductions: vec![Reduction::default(); n],
            spike_list: options.spike_list,
            spikes: Spikes::default(),
            dropped: 0,
            refresh_on_max: options.refresh_on_max,
            maxima: vec![0; n],
        }
    }

    /// Reads thread `idx`'s interval: prints its samples with `-v`, keeps
    /// its spikes with `--spike`.
    pub(super) fn on_interval(
        &mut self,
        idx: usize,
        interval: &LatencyStats,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let Some(log) = interval.sample_log() else {
            return Ok(());
        };
        if self.verbose.is_some() {
            self.dropped += log.dropped();
        } else {
            // A spike-only log keeps spikes alone: what had no room is a
            // spike counted in `spikes = N`, as cyclictest counts past its
            // nodes.
            self.spikes.total += log.dropped();
        }
        for sample in log.entries() {
            let latency = sample.latency_ns / self.unit_ns;
            if let Some(reduction) = self.verbose {
                let state = &mut self.reductions[idx];
                if latency > state.max {
                    state.max = latency;
                    state.cycle_of_max = sample.sample_idx;
                }
                state.seen += 1;
                if state.seen == reduction {
                    writeln!(out, "{idx:8}:{:8}:{:8}", state.cycle_of_max, state.max)?;
                    *state = Reduction::default();
                }
            }
            if let Some(spikes) = self.spike_list
                && sample.latency_ns >= spike_floor_ns(spikes, self.unit_ns)
            {
                self.spikes.total += 1;
                if self.spikes.kept.len() < spikes.nodes {
                    self.spikes.kept.push((idx, latency, sample.at_ns / 1_000));
                }
            }
        }
        Ok(())
    }

    /// Whether the live lines should be redrawn now: always, or with `-M`
    /// only when some thread's maximum grew.
    pub(super) fn refresh_due(&mut self, totals: &[LatencyStats]) -> bool {
        let mut grew = false;
        for (seen, total) in self.maxima.iter_mut().zip(totals) {
            if total.max_ns > *seen {
                *seen = total.max_ns;
                grew = true;
            }
        }
        !self.refresh_on_max || grew
    }

    /// `--spike`'s list as cyclictest prints it at the end (nothing when
    /// there was none).
    pub(super) fn spike_block(&self) -> String {
        if self.spike_list.is_none() || self.spikes.total == 0 {
            return String::new();
        }
        let mut out = String::from("\n");
        for (idx, latency, at_us) in &self.spikes.kept {
            out.push_str(&format!("T:{idx:2} Spike:{latency:8}: TS: {at_us:12}\n"));
        }
        out.push_str(&format!("spikes = {}\n\n", self.spikes.total));
        out
    }

    /// Samples that `-v` could not show because the main thread fell
    /// behind.
    pub(super) fn dropped(&self) -> u64 {
        self.dropped
    }
}

/// `-F PATH`: a named pipe that gives whoever opens it the summary lines
/// of the run so far. A thread of its own tries to open the pipe's writing
/// end every half second (it succeeds only while someone reads).
pub(super) struct Fifo {
    path: PathBuf,
    lines: Arc<Mutex<String>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Fifo {
    pub(super) fn start(path: &Path) -> io::Result<Fifo> {
        let _ = std::fs::remove_file(path);
        sys::make_fifo(path)?;
        let lines = Arc::new(Mutex::new(String::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (thread_path, thread_lines, thread_stop) =
            (path.to_path_buf(), Arc::clone(&lines), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("measure-fifo".to_string())
            .spawn(move || {
                // Relaxed: a flag that orders nothing else.
                while !thread_stop.load(Ordering::Relaxed) {
                    let opened = OpenOptions::new()
                        .write(true)
                        .custom_flags(sys::O_NONBLOCK)
                        .open(&thread_path);
                    let Ok(mut pipe) = opened else {
                        std::thread::sleep(Duration::from_millis(500));
                        continue;
                    };
                    let text = thread_lines.lock().map(|l| l.clone()).unwrap_or_default();
                    let _ = pipe.write_all(text.as_bytes());
                    drop(pipe);
                    std::thread::sleep(Duration::from_millis(250));
                }
            })?;
        Ok(Fifo {
            path: path.to_path_buf(),
            lines,
            stop,
            thread: Some(thread),
        })
    }

    /// The summary lines a reader gets from now on.
    pub(super) fn publish(&self, text: String) {
        if let Ok(mut lines) = self.lines.lock() {
            *lines = text;
        }
    }
}

impl Drop for Fifo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// cyclictest's screen: a `policy: … loadavg: …` line, a blank line and a
/// summary line per thread; while `moving_up`, the cursor then goes back
/// to the top so the next refresh overwrites it.
pub(super) fn live_block(
    policy: Policy,
    lines: impl Iterator<Item = String>,
    moving_up: bool,
) -> String {
    let loadavg = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut block = format!(
        "policy: {}: loadavg: {}          \n\n",
        policy.name(),
        loadavg.trim()
    );
    let mut n_lines = 0;
    for line in lines {
        block.push_str(&line);
        block.push('\n');
        n_lines += 1;
    }
    if moving_up {
        block.push_str(&format!("\x1b[{}A", n_lines + 2));
    }
    block
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::LatencyStats;

    fn interval_with(latencies_us: &[u64], log: SampleLog) -> LatencyStats {
        let mut stats = LatencyStats::for_sampler(u64::MAX, None).with_sample_log(Some(log));
        for (i, us) in latencies_us.iter().enumerate() {
            stats.record_at(us * 1_000, i as u64, 5_000_000 + i as u64 * 1_000_000);
        }
        stats
    }

    fn live(verbose: Option<u64>, spike_list: Option<SpikeList>) -> Live {
        Live {
            unit_ns: 1_000,
            verbose,
            reductions: vec![Reduction::default(); 2],
            spike_list,
            spikes: Spikes::default(),
            dropped: 0,
            refresh_on_max: true,
            maxima: vec![0; 2],
        }
    }

    #[test]
    fn verbose_prints_each_sample_or_the_largest_of_each_reduction() {
        let interval = interval_with(&[14, 16, 13, 15], SampleLog::new(8, 0));
        let mut out = Vec::new();
        live(Some(1), None)
            .on_interval(1, &interval, &mut out)
            .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "       1:       0:      14\n       1:       1:      16\n       \
             1:       2:      13\n       1:       3:      15\n"
        );
        let mut out = Vec::new();
        live(Some(2), None)
            .on_interval(0, &interval, &mut out)
            .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "       0:       1:      16\n       0:       3:      15\n"
        );
    }

    #[test]
    fn spikes_above_the_trigger_are_listed_as_cyclictest_lists_them() {
        let spikes = SpikeList {
            trigger: 14,
            nodes: 1,
        };
        let interval = interval_with(
            &[14, 16, 13, 15],
            SampleLog::new(8, spike_floor_ns(spikes, 1_000)),
        );
        let mut live = live(None, Some(spikes));
        live.on_interval(0, &interval, &mut Vec::new()).unwrap();
        assert_eq!(
            live.spike_block(),
            "\nT: 0 Spike:      16: TS:         6000\nspikes = 2\n\n"
        );
    }

    #[test]
    fn refresh_on_max_waits_for_a_new_maximum() {
        let mut live = live(None, None);
        let mut totals = vec![
            LatencyStats::new(u64::MAX, None),
            LatencyStats::new(u64::MAX, None),
        ];
        totals[0].record_at(5_000, 0, 1);
        assert!(live.refresh_due(&totals));
        assert!(!live.refresh_due(&totals));
        totals[1].record_at(9_000, 0, 1);
        assert!(live.refresh_due(&totals));
    }
}
