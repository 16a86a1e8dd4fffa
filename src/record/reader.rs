//! Reading the record back over a time range, streaming: one line in
//! memory at a time, and per CPU one summary, however long the range.
//!
//! An entry belongs to a range when its interval overlaps it. A line that
//! cannot be read is skipped and counted; an unfinished last line of a
//! file (a crash or power loss while it was written) is skipped and named
//! as torn. Neither stops the reading.

use std::collections::BTreeMap;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use super::format::{Context, Entry, Gap, HostFacts, Line, LineParser};
use super::lines::{MAX_LINE_BYTES, NextLine, next_line};
use super::writer::start_from_name;
use crate::files::{self, Links};
use crate::stats::LatencyStats;

/// A time range, nanoseconds since the epoch, `from` included, `to` not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub from_ns: u64,
    pub to_ns: u64,
}

impl Range {
    pub const ALL: Range = Range {
        from_ns: 0,
        to_ns: u64::MAX,
    };

    pub fn overlaps(&self, entry: &Entry) -> bool {
        entry.start_ns < self.to_ns && entry.end_ns().max(entry.start_ns + 1) > self.from_ns
    }
}

/// What reading found besides the entries.
#[derive(Debug, Clone, Default)]
pub struct ReadReport {
    pub files: usize,
    pub entries: u64,
    /// Lines skipped because they could not be read.
    pub corrupt: u64,
    /// The first few of them: file, line number, why.
    pub corrupt_examples: Vec<String>,
    /// Files whose last line was torn (skipped).
    pub torn: Vec<PathBuf>,
    /// What was measured, from the latest file read that says it.
    pub context: Option<Context>,
    /// The host facts lines of the files read, in order, each once (a
    /// line repeated at the top of the next file is not kept twice).
    pub hosts: Vec<HostFacts>,
    /// The stretches without samples the record names that overlap the
    /// range, in order (at most `MAX_GAPS`; `gaps_left_out` counts the
    /// rest).
    pub gaps: Vec<Gap>,
    pub gaps_left_out: u64,
    /// The `[hwnoise]` windows that overlap the range (at most
    /// `MAX_GAPS`), and the intervals measured while one spun their CPU:
    /// latencyd's own disturbance, counted here and not given to `visit`.
    pub hwnoise: Vec<super::HwnoiseLine>,
    pub hwnoise_entries: u64,
    /// What the kernel's timerlat measured in the range, by CPU and
    /// context (`[timerlat]`), merged over its entries.
    pub timerlat: BTreeMap<(usize, String), LatencyStats>,
}

/// Gaps a read keeps: a CPU going offline and back every minute for a
/// month is 40,000 of them.
pub const MAX_GAPS: usize = 1_000;

impl ReadReport {
    /// What the daemon's instrument `name` measured in the range, by CPU
    /// and line (timerlat's context), as its entries hold it.
    pub fn lines_of(&self, name: &str) -> Vec<(usize, &str, &LatencyStats)> {
        match name {
            "timerlat" => (self.timerlat.iter())
                .map(|((cpu, context), stats)| (*cpu, context.as_str(), stats))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The facts a record identifier stands for, if the record has them.
    pub fn host(&self, id: &str) -> Option<&HostFacts> {
        self.hosts.iter().rev().find(|h| h.id == id)
    }

    /// One line for a person: what was skipped, or `None`.
    pub fn warning(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.corrupt > 0 {
            parts.push(format!(
                "{} unreadable line(s) skipped ({})",
                self.corrupt,
                self.corrupt_examples.join("; ")
            ));
        }
        for path in &self.torn {
            parts.push(format!(
                "the unfinished last line of {} skipped (written when the process or machine \
                 stopped)",
                path.display()
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// Reads `files` (in order) and gives `visit` every entry overlapping
/// `range`. Files named by the writer are skipped without being opened
/// when the next one starts before the range does, and reading stops at
/// the first that starts after it. A file that cannot be opened is an
/// error naming it.
pub fn read(
    files: &[PathBuf],
    range: Range,
    visit: impl FnMut(Entry),
) -> Result<ReadReport, String> {
    read_while(files, range, &|| true, visit)
}

/// `read`, giving `visit` timerlat's entries instead (`entries` counts them).
pub fn read_timerlat(
    files: &[PathBuf],
    range: Range,
    visit: impl FnMut(Entry),
) -> Result<ReadReport, String> {
    read_selected(files, range, &|| true, Visit::Timerlat, visit)
}

/// The entries a read gives to its visitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Visit {
    /// The samplers'; timerlat's are merged into `ReadReport::timerlat`.
    Samplers,
    /// timerlat's; the samplers' are passed over.
    Timerlat,
}

/// What stops a read early: `go_on` said no (its client is gone, its
/// deadline passed).
pub const STOPPED: &str = "the read was stopped before its end";

/// `read`, asking `go_on` every `CHECK_EVERY` lines whether to go on; when
/// it says no, the read stops with `STOPPED`.
pub fn read_while(
    files: &[PathBuf],
    range: Range,
    go_on: &dyn Fn() -> bool,
    visit: impl FnMut(Entry),
) -> Result<ReadReport, String> {
    read_selected(files, range, go_on, Visit::Samplers, visit)
}

fn read_selected(
    files: &[PathBuf],
    range: Range,
    go_on: &dyn Fn() -> bool,
    which: Visit,
    mut visit: impl FnMut(Entry),
) -> Result<ReadReport, String> {
    let starts: Vec<Option<u64>> = files
        .iter()
        .map(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(start_from_name)
        })
        .collect();
    let mut report = ReadReport::default();
    for (i, path) in files.iter().enumerate() {
        if let (Some(start), true) = (starts[i], starts.iter().all(Option::is_some)) {
            if start >= range.to_ns {
                break;
            }
            if let Some(Some(next)) = starts.get(i + 1)
                && *next <= range.from_ns
            {
                continue;
            }
        }
        read_file(path, range, go_on, which, &mut visit, &mut report)?;
    }
    Ok(report)
}

/// How many lines a read goes between two questions to `go_on`.
const CHECK_EVERY: u64 = 256;

fn read_file(
    path: &Path,
    range: Range,
    go_on: &dyn Fn() -> bool,
    which: Visit,
    visit: &mut impl FnMut(Entry),
    report: &mut ReadReport,
) -> Result<(), String> {
    let file = files::open_regular(path, Links::Refuse)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    report.files += 1;
    let mut reader = BufReader::new(file);
    let mut parser = LineParser::default();
    let mut buf = Vec::new();
    let mut number = 0;
    loop {
        let read = next_line(&mut reader, &mut buf, go_on)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let fits = match read {
            NextLine::End => return Ok(()),
            NextLine::Stopped => return Err(STOPPED.to_string()),
            NextLine::Line { fits } => fits,
        };
        number += 1;
        if number % CHECK_EVERY == 0 && !go_on() {
            return Err(STOPPED.to_string());
        }
        let finished = buf.ends_with(b"\n");
        if !fits {
            // Longer than any entry: skipped to its end, counted.
            corrupt(
                report,
                path,
                number,
                format!("a line over {MAX_LINE_BYTES} bytes"),
            );
            continue;
        }
        let line = String::from_utf8_lossy(&buf);
        match parser.line(&line) {
            Line::Entry(entry) if entry.hwnoise => {
                if range.overlaps(&entry) {
                    report.hwnoise_entries += 1;
                }
            }
            Line::Entry(entry) if entry.timerlat.is_some() => {
                if !range.overlaps(&entry) {
                } else if which == Visit::Timerlat {
                    report.entries += 1;
                    visit(*entry);
                } else {
                    merge_timerlat(report, *entry);
                }
            }
            Line::Entry(_) if which == Visit::Timerlat => {}
            Line::Entry(entry) => {
                if range.overlaps(&entry) {
                    report.entries += 1;
                    visit(*entry);
                }
            }
            Line::Hwnoise(window)
                if window.start_ns < range.to_ns
                    && window.end_ns >= range.from_ns
                    && report.hwnoise.len() < MAX_GAPS =>
            {
                report.hwnoise.push(*window);
            }
            Line::Hwnoise(_) => {}
            Line::Other => {}
            Line::Gap(gap) if gap.start_ns < range.to_ns && gap.end_ns > range.from_ns => {
                if report.gaps.len() < MAX_GAPS {
                    report.gaps.push(gap);
                } else {
                    report.gaps_left_out += 1;
                }
            }
            Line::Gap(_) => {}
            Line::Context(context) => report.context = Some(context),
            Line::Host(host) => {
                if report.hosts.last().is_none_or(|last| last.id != host.id) {
                    report.hosts.push(*host);
                }
            }
            Line::Corrupt(_) if !finished => report.torn.push(path.to_path_buf()),
            Line::Corrupt(why) => corrupt(report, path, number, why),
        }
    }
}

/// A timerlat entry merged into the report's figures by CPU and context.
fn merge_timerlat(report: &mut ReadReport, entry: Entry) {
    let key = (entry.cpu, entry.timerlat.unwrap_or_default());
    match report.timerlat.entry(key) {
        std::collections::btree_map::Entry::Vacant(v) => {
            v.insert(entry.stats);
        }
        std::collections::btree_map::Entry::Occupied(mut o) => {
            // Every entry's histogram has the record's range.
            let _ = o.get_mut().merge(&entry.stats);
        }
    }
}

/// Counts a line that cannot be read, keeping the first few as examples.
fn corrupt(report: &mut ReadReport, path: &Path, number: u64, why: String) {
    report.corrupt += 1;
    if report.corrupt_examples.len() < 3 {
        report
            .corrupt_examples
            .push(format!("{} line {number}: {why}", path.display()));
    }
}

/// The host facts line written last in the record in `dir`, if any: what
/// the host was when latencyd last measured it. Reads the newest files
/// first and stops at the first that has one.
pub fn last_host_facts(dir: &Path) -> Option<HostFacts> {
    let files = super::writer::list(dir).ok()?;
    for (path, _, _) in files.iter().rev() {
        let Ok(file) = files::open_regular(path, Links::Refuse) else {
            continue;
        };
        let mut parser = LineParser::default();
        let mut last = None;
        let mut reader = BufReader::new(file);
        let mut buf = Vec::new();
        // Line by bounded line: a 300 MB zero-filled file (what a crash
        // leaves on some filesystems) is read past, never held.
        while let Ok(NextLine::Line { fits }) = next_line(&mut reader, &mut buf, &|| true) {
            if fits
                && buf.starts_with(b"#[latencyd host ")
                && let Line::Host(host) = parser.line(&String::from_utf8_lossy(&buf))
            {
                last = Some(*host);
            }
        }
        if last.is_some() {
            return last;
        }
    }
    None
}

/// The files named on a command line: `.hlog` files as given, a
/// directory's record files; sorted by name (the writer's names sort in
/// time). Anything else is an error naming it.
pub fn expand_inputs(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for input in inputs {
        // A file named on the command line is followed if it is a link,
        // as a person named it; files in directories never are (the
        // reader refuses links).
        let input = &std::fs::canonicalize(input)
            .map_err(|e| format!("cannot read {}: {e}", input.display()))?;
        if input.is_dir() {
            let listed = super::writer::list(input)
                .map_err(|e| format!("cannot list {}: {e}", input.display()))?;
            if listed.is_empty() {
                return Err(format!(
                    "{} holds no record files (latencyd-*.hlog)",
                    input.display()
                ));
            }
            files.extend(listed.into_iter().map(|f| f.0));
        } else if input.extension().is_some_and(|e| e == "hlog") {
            files.push(input.clone());
        } else {
            return Err(format!(
                "{}: not an .hlog file or a directory of them (a results file is plotted alone)",
                input.display()
            ));
        }
    }
    files.sort();
    files.dedup();
    Ok(files)
}

/// `--from`, `--to` and `--cpus` as a range and a CPU list.
pub fn selection(
    args: &crate::cli::RangeArgs,
    now_unix_ns: u64,
) -> Result<(Range, Option<Vec<usize>>), String> {
    let time = |flag: &str, value: &Option<String>| -> Result<Option<u64>, String> {
        value
            .as_deref()
            .map(|v| {
                crate::calendar::parse_time_ns(v, now_unix_ns).map_err(|e| format!("--{flag}: {e}"))
            })
            .transpose()
    };
    let range = Range {
        from_ns: time("from", &args.from)?.unwrap_or(0),
        to_ns: time("to", &args.to)?.unwrap_or(u64::MAX),
    };
    if range.from_ns >= range.to_ns {
        return Err("--from must be before --to".to_string());
    }
    let cpus = args
        .cpus
        .as_deref()
        .map(|list| crate::cpulist::parse_cpu_list(list).map_err(|e| format!("--cpus: {e}")))
        .transpose()?;
    Ok((range, cpus))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::summary::summarize;
    use crate::record::writer::{Batch, LogWriter, Settings, Target};
    use crate::units::NS_PER_SEC;
    use std::io::Write;

    fn write_record(dir: &Path, seconds: std::ops::Range<u64>) -> u64 {
        let mut writer = LogWriter::new(Target::Dir(Settings {
            dir: dir.to_path_buf(),
            interval_ns: NS_PER_SEC,
            retention_ns: 1 << 62,
            max_bytes: 1 << 40,
        }));
        let mut total = 0;
        for s in seconds {
            let entries = (0..2)
                .map(|cpu| {
                    let mut stats = LatencyStats::new(100_000, None);
                    for i in 0..(100 + s % 7) {
                        stats.record(5_000 + i * 10 + cpu as u64, i);
                    }
                    total += stats.count;
                    Entry {
                        cpu,
                        start_ns: s * NS_PER_SEC,
                        length_ns: NS_PER_SEC,
                        stats,
                        fingerprint: None,
                        load: None,
                        hwnoise: false,
                        timerlat: None,
                    }
                })
                .collect();
            let batch = Batch {
                gaps: Vec::new(),
                hwnoise: Vec::new(),
                entries,
                fingerprint: None,
            };
            writer.write(&batch, s * NS_PER_SEC).unwrap();
        }
        total
    }

    fn files(dir: &Path) -> Vec<PathBuf> {
        crate::record::writer::list(dir)
            .unwrap()
            .into_iter()
            .map(|f| f.0)
            .collect()
    }

    #[test]
    fn spun_and_timerlat_intervals_are_kept_apart_and_the_window_is_listed() {
        use crate::record::{HwnoiseLine, HwnoiseOutcome};
        let dir = tempfile::tempdir().unwrap();
        let t0 = 1_795_315_538;
        let total = write_record(dir.path(), t0..t0 + 3);
        let mut writer = LogWriter::new(Target::Dir(Settings {
            dir: dir.path().to_path_buf(),
            interval_ns: NS_PER_SEC,
            retention_ns: 1 << 62,
            max_bytes: 1 << 40,
        }));
        let mut spun = LatencyStats::new(100_000, None);
        spun.record(480_000_000, 0);
        let window = HwnoiseLine {
            start_ns: (t0 + 3) * NS_PER_SEC,
            end_ns: (t0 + 4) * NS_PER_SEC,
            cpus: vec![1],
            threshold_us: 10,
            width_us: 500_000,
            window_us: 1_000_000,
            outcome: HwnoiseOutcome::Ran {
                samples: 1,
                gaps: 1,
                max_us: 12,
                nmis: 0,
                smis: None,
            },
        };
        let batch = Batch {
            entries: vec![Entry {
                cpu: 1,
                start_ns: (t0 + 3) * NS_PER_SEC,
                length_ns: NS_PER_SEC,
                stats: spun,
                fingerprint: None,
                load: None,
                hwnoise: true,
                timerlat: None,
            }],
            gaps: Vec::new(),
            hwnoise: vec![window.clone()],
            fingerprint: None,
        };
        writer.write(&batch, (t0 + 3) * NS_PER_SEC).unwrap();
        let mut timerlat = LatencyStats::new(100_000, None);
        timerlat.record(7_000, 0);
        let batch = Batch {
            entries: vec![Entry {
                cpu: 0,
                start_ns: (t0 + 4) * NS_PER_SEC,
                length_ns: NS_PER_SEC,
                stats: timerlat,
                fingerprint: None,
                load: None,
                hwnoise: false,
                timerlat: Some("irq".to_string()),
            }],
            gaps: Vec::new(),
            hwnoise: Vec::new(),
            fingerprint: None,
        };
        writer.write(&batch, (t0 + 4) * NS_PER_SEC).unwrap();
        let (all, report) = summarize(&files(dir.path()), Range::ALL, None).unwrap();
        let irq = &report.timerlat[&(0, "irq".to_string())];
        assert_eq!(
            (irq.count, irq.max_ns),
            (1, 7_000),
            "timerlat apart from the samplers"
        );
        assert_eq!(all.cpus.values().map(|s| s.count).sum::<u64>(), total);
        assert!(
            all.cpus.values().all(|s| s.max_ns < 1_000_000),
            "the spin is not a latency"
        );
        assert_eq!((report.entries, report.hwnoise_entries), (6, 1));
        assert_eq!(report.hwnoise, vec![window]);
    }

    #[test]
    fn a_range_gets_exactly_the_intervals_it_overlaps() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = 1_795_315_538;
        let total = write_record(dir.path(), t0..t0 + 20);
        let (all, report) = summarize(&files(dir.path()), Range::ALL, None).unwrap();
        assert_eq!(all.cpus.values().map(|s| s.count).sum::<u64>(), total);
        assert_eq!((report.entries, report.corrupt), (40, 0));
        let range = Range {
            from_ns: (t0 + 5) * NS_PER_SEC,
            to_ns: (t0 + 8) * NS_PER_SEC,
        };
        let (part, report) = summarize(&files(dir.path()), range, Some(&[1])).unwrap();
        assert_eq!(
            report.entries, 6,
            "seconds 5, 6 and 7 of both CPUs read, CPU 1 kept"
        );
        assert_eq!(part.cpus.keys().copied().collect::<Vec<_>>(), vec![1]);
        assert_eq!(
            part.span_ns,
            Some(((t0 + 5) * NS_PER_SEC, (t0 + 8) * NS_PER_SEC))
        );
    }

    #[test]
    fn a_torn_last_line_and_a_corrupt_middle_line_are_skipped_and_said() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = 1_795_315_538;
        let total = write_record(dir.path(), t0..t0 + 4);
        let path = files(dir.path()).pop().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        // Damage one CPU 0 entry in the middle: its samples are lost.
        let victim = text
            .lines()
            .find(|l| l.starts_with(&format!("Tag=cpu0,{}", t0 + 1)))
            .unwrap();
        let lost: u64 = 100 + (t0 + 1) % 7;
        let damaged = text.replace(victim, &victim.replace("HISTF", "HISTX"));
        std::fs::write(&path, damaged).unwrap();
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        file.write_all(b"#[latencyd cpu0 count=5 sum=1 min=1 max=1 missed=0 overflows=0 spikes=0 threshold=1]\nTag=cpu0,1795315599.000,1.000,0.0000").unwrap();
        drop(file);
        let (summary, report) = summarize(&files(dir.path()), Range::ALL, None).unwrap();
        assert_eq!(
            summary.cpus.values().map(|s| s.count).sum::<u64>(),
            total - lost
        );
        assert_eq!(report.corrupt, 1);
        assert_eq!(report.torn, vec![path.clone()]);
        let warning = report.warning().unwrap();
        assert!(
            warning.contains("1 unreadable line") && warning.contains("unfinished last line"),
            "{warning}"
        );
    }
}
