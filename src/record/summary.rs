//! A range of the record summed up: every CPU's statistics merged from
//! the entries the range reader (`reader`) streams, over the whole range
//! or apart by the load they were measured under. One summary per CPU in
//! memory, however long the range.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::format::Entry;
use super::reader::{Range, ReadReport, read, read_while};
use crate::stats::LatencyStats;

/// Every CPU's statistics over a range, merged from its entries.
#[derive(Debug, Default)]
pub struct Summary {
    pub cpus: BTreeMap<usize, LatencyStats>,
    /// The earliest start and the latest end of the entries read.
    pub span_ns: Option<(u64, u64)>,
    /// The host facts' identifier of the last entry read that had one.
    pub fingerprint: Option<String>,
}

impl Summary {
    /// All CPUs together.
    pub fn combined(&self) -> LatencyStats {
        let threshold = self
            .cpus
            .values()
            .next()
            .map_or(u64::MAX, LatencyStats::spike_threshold_ns);
        let mut all = LatencyStats::new(threshold, None);
        for stats in self.cpus.values() {
            let _ = all.merge(stats);
        }
        all
    }

    pub fn add(&mut self, entry: &Entry) {
        if entry.fingerprint.is_some() {
            self.fingerprint.clone_from(&entry.fingerprint);
        }
        let stats = self
            .cpus
            .entry(entry.cpu)
            .or_insert_with(|| LatencyStats::new(entry.stats.spike_threshold_ns(), None));
        // Same range, no linear histograms: merging cannot fail; a
        // histogram from another tool past our range is left out.
        let _ = stats.merge(&entry.stats);
        let (from, to) = self.span_ns.unwrap_or((u64::MAX, 0));
        self.span_ns = Some((from.min(entry.start_ns), to.max(entry.end_ns())));
    }
}

/// Reads a range of `files` into a summary, keeping only `cpus` when given.
pub fn summarize(
    files: &[PathBuf],
    range: Range,
    cpus: Option<&[usize]>,
) -> Result<(Summary, ReadReport), String> {
    summarize_while(files, range, cpus, &|| true)
}

/// `summarize`, stopping with `STOPPED` when `go_on` says no.
pub fn summarize_while(
    files: &[PathBuf],
    range: Range,
    cpus: Option<&[usize]>,
    go_on: &dyn Fn() -> bool,
) -> Result<(Summary, ReadReport), String> {
    let mut summary = Summary::default();
    let report = read_while(files, range, go_on, |entry| {
        if cpus.is_none_or(|c| c.contains(&entry.cpu)) {
            summary.add(&entry);
        }
    })?;
    Ok((summary, report))
}

/// Reads a range of `files` into two summaries, keeping only `cpus` when
/// given: the intervals measured with no load running, and those measured
/// under a load; with the load profiles seen, in order.
pub fn summarize_by_load(
    files: &[PathBuf],
    range: Range,
    cpus: Option<&[usize]>,
) -> Result<(Summary, Summary, Vec<String>, ReadReport), String> {
    let (mut idle, mut loaded) = (Summary::default(), Summary::default());
    let mut profiles: Vec<String> = Vec::new();
    let report = read(files, range, |entry| {
        if cpus.is_some_and(|c| !c.contains(&entry.cpu)) {
            return;
        }
        match &entry.load {
            None => idle.add(&entry),
            Some(profile) => {
                if !profiles.contains(profile) {
                    profiles.push(profile.clone());
                }
                loaded.add(&entry);
            }
        }
    })?;
    Ok((idle, loaded, profiles, report))
}
