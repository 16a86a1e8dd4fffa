//! What a finished run prints, in cyclictest's order: the not-real-time
//! warning, the closing lines (`-q`'s summary or the live screen's last
//! state), the `--spike` list, the `-h` histogram (or `--histfile`), then
//! our `#` blocks (`--load`, `-b`/`--forensics`) and the `--json`
//! document. Text goes to stdout unless stdout carries the JSON alone.

use std::fs;
use std::io::{self, Write};

use anyhow::Context;

use super::breaks::forensics_block;
use super::live::{Live, live_block};
use super::options::{JsonTarget, MeasureOptions};
use super::report::RunReport;
use super::{json, text};
use crate::forensics::Recorder;

/// A finished run and what its printing needs besides the report.
pub(super) struct Results<'a> {
    pub options: &'a MeasureOptions,
    pub report: &'a RunReport,
    pub live: &'a Live,
    pub non_rt_reasons: &'a [String],
    pub recorder: &'a Recorder,
    /// `-b`: the sampler's TID and the latency that stopped the run.
    pub break_hit: Option<(i32, u64)>,
}

impl Results<'_> {
    pub(super) fn print(&self, stdout: &mut impl Write) -> anyhow::Result<()> {
        let options = self.options;
        let text_to_stdout = options.json != Some(JsonTarget::Stdout);
        if self.live.dropped() > 0 {
            eprintln!(
                "latencyd measure: warning: {} samples were not printed (-v): the output could \
                 not keep up",
                self.live.dropped()
            );
        }
        if text_to_stdout {
            self.text(stdout)?;
        }
        if let Some(timerlat) = &self.report.timerlat {
            let mut block = super::timerlat::top_block(timerlat, self.report.unit_ns());
            if options.histogram.is_some() {
                block.push_str(&super::timerlat::hist_block(
                    timerlat,
                    self.report.unit_ns(),
                ));
            }
            after_results(stdout, text_to_stdout, &block)?;
        }
        if let Some(load) = &self.report.load {
            after_results(stdout, text_to_stdout, &load.text_block())?;
        }
        if self.capture_asked() {
            self.recorder.flush();
            let tids: Vec<i32> = self.report.threads.iter().map(|t| t.tid).collect();
            let forensics = forensics_block(options, self.recorder, &tids, self.break_hit);
            after_results(stdout, text_to_stdout, &forensics)?;
        }
        match &options.json {
            Some(JsonTarget::Stdout) => write!(stdout, "{}", json::json_document(self.report))?,
            Some(JsonTarget::File(path)) => fs::write(path, json::json_document(self.report))
                .with_context(|| format!("cannot write the JSON results to {}", path.display()))?,
            None => {}
        }
        Ok(())
    }

    fn capture_asked(&self) -> bool {
        self.options.breaktrace_ns.is_some() || self.options.forensics_ns.is_some()
    }

    /// cyclictest's closing lines: with -q the summary (unless a histogram
    /// replaces it), else the live screen's last state; with -v only the
    /// samples, and the summary with -q.
    fn text(&self, stdout: &mut impl Write) -> anyhow::Result<()> {
        let (options, report) = (self.options, self.report);
        if !report.realtime() {
            writeln!(
                stdout,
                "# latencyd: NOT REAL-TIME ({}): these latencies are not representative",
                self.non_rt_reasons.join("; ")
            )?;
        }
        if options.quiet {
            if options.histogram.is_none() {
                write!(stdout, "{}", text::summary_lines(report))?;
            }
        } else if options.verbose.is_none() {
            let lines = (0..report.threads.len()).map(|i| text::summary_line(report, i));
            write!(stdout, "{}", live_block(options.policy, lines, false))?;
        }
        write!(stdout, "{}", self.live.spike_block())?;
        let histogram = text::histogram_block(report);
        match &options.histfile {
            Some(path) => fs::write(path, histogram)
                .with_context(|| format!("--histfile: cannot write {}", path.display()))?,
            None => write!(stdout, "{histogram}")?,
        }
        Ok(())
    }
}

/// `#` lines after the results: on stdout with the text, on stderr when
/// stdout carries the JSON alone.
fn after_results(stdout: &mut impl Write, text_to_stdout: bool, block: &str) -> io::Result<()> {
    if text_to_stdout {
        stdout.write_all(block.as_bytes())
    } else {
        io::stderr().write_all(block.as_bytes())
    }
}
