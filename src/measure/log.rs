//! `measure --log`: the record's format for a one-shot run, one file of
//! HdrHistogram interval logs that `latencyd report` and `plot` read.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;

use super::options::MeasureOptions;
use crate::host::{Fingerprint, HostInfo};
use crate::record::{Accumulator, Context as RecordContext, LogWriter, Target};
use crate::stats::LatencyStats;
use crate::units::unix_now_ns;

/// `measure --log`: the record's format for a one-shot run, one file.
pub(super) struct MeasureLog {
    accumulator: Accumulator,
    writer: LogWriter,
    path: PathBuf,
    failed: bool,
}

impl MeasureLog {
    /// Created before the run, so a path that cannot be written stops it
    /// before it starts. The header names the first thread's interval and
    /// priority (the others differ only with -t, -d or --priospread); the
    /// host's facts follow it, with the first interval.
    pub(super) fn create(
        path: &Path,
        interval_ns: u64,
        options: &MeasureOptions,
        host: &HostInfo,
        fingerprint: &Fingerprint,
    ) -> anyhow::Result<MeasureLog> {
        std::fs::File::create(path)
            .with_context(|| format!("--log: cannot create {}", path.display()))?;
        let first = &options.threads[0];
        let context = RecordContext::of(
            host,
            first.interval_ns,
            options.policy.name(),
            first.priority,
        );
        let mut accumulator =
            Accumulator::new(interval_ns, options.spike_threshold_ns, unix_now_ns());
        accumulator.set_fingerprint(Arc::new(fingerprint.clone()));
        Ok(MeasureLog {
            accumulator,
            writer: LogWriter::new(Target::File(path.to_path_buf())).with_context(context),
            path: path.to_path_buf(),
            failed: false,
        })
    }

    /// Adds a sampler's interval to its CPU's histogram.
    pub(super) fn add(&mut self, cpu: usize, interval: &LatencyStats) {
        self.accumulator.add(cpu, interval);
    }

    /// Writes the finished interval (every interval, or the part in
    /// progress at the end). A failure is said once; the run goes on.
    pub(super) fn write_due(&mut self, end: bool) {
        let batch = self.accumulator.take(unix_now_ns(), end);
        self.write(batch);
    }

    /// From now on the run is under `load` (`--load`'s profile): the
    /// interval in progress ends here, filed as measured without it.
    pub(super) fn set_load(&mut self, load: Option<String>) {
        for batch in self.accumulator.set_load(load, unix_now_ns()) {
            self.write(Some(batch));
        }
    }

    fn write(&mut self, batch: Option<crate::record::Batch>) {
        let Some(batch) = batch else {
            return;
        };
        if let Err(err) = self.writer.write(&batch, unix_now_ns())
            && !self.failed
        {
            self.failed = true;
            eprintln!(
                "latencyd measure: warning: --log {}: {err}; the run goes on, the log is \
                 incomplete",
                self.path.display()
            );
        }
    }
}
