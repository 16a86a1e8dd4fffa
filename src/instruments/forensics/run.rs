//! Forensics' run: the recorder started as `[forensics]` says (what it
//! can do here, or why it cannot, said in the log), its capturer offered
//! to the daemon, what happened to its tracefs instance said at each
//! tick, and its thread stopped at shutdown.

use tracing::{error, info, warn};

use super::part::ForensicsPart;
use crate::cpulist::format_cpu_list;
use crate::forensics::{Capturer, Recorder};
use crate::instruments::shape::{Boxed, Run, Start, Started, Step};
use crate::units::format_duration_ns;

/// Starts spike forensics on the measured CPUs when the section asks for
/// it; off, its part says so and it has no run.
pub(super) fn start(start: &Start<'_>) -> Started {
    let f = start.config.section::<super::ForensicsConfig>();
    if !f.enabled {
        let journal = Recorder::disabled().journal();
        return Started {
            part: Box::new(ForensicsPart::new(start.config, journal)),
            run: None,
        };
    }
    let cpus = start.measured;
    let recorder = Recorder::start(f.settings(), cpus);
    let journal = recorder.journal();
    let data = journal.lock();
    if data.available {
        info!(
            "forensics: capturing wake-ups {} or later on CPUs {} ({} KiB ring buffer per CPU) into {}",
            format_duration_ns(f.threshold_ns),
            format_cpu_list(cpus),
            f.buffer_size_kb,
            f.dir.display()
        );
        for cap in &data.capabilities {
            let how = if cap.available { "yes" } else { "no" };
            info!("forensics: {}: {how}: {}", cap.name, cap.detail);
        }
    } else {
        warn!(
            "forensics is enabled but unavailable: {}; latencyd measures without it",
            data.reason.as_deref().unwrap_or("unknown reason")
        );
    }
    drop(data);
    Started {
        part: Box::new(ForensicsPart::new(start.config, recorder.journal())),
        run: Some(Box::new(Recording { recorder })),
    }
}

/// The recorder while the daemon runs.
struct Recording {
    recorder: Recorder,
}

impl Run for Recording {
    fn capturer(&self) -> Option<Capturer> {
        Some(Capturer::clone(&self.recorder))
    }

    /// The flight recorder checks its tracefs instance as often as the
    /// collector ticks; what it found changed, made again or lost is said
    /// here.
    fn take_in(&mut self, _step: Step<'_>) {
        for notice in self.recorder.take_notices() {
            warn!("forensics: {notice}");
        }
    }

    fn step<'a>(&'a mut self, _step: Step<'a>) -> Boxed<'a, ()> {
        Box::pin(async {})
    }

    /// Stops the thread, which waits for a capture under way and removes
    /// the tracefs instance (on the blocking pool: it waits). What is
    /// offered after it is dropped.
    fn stop<'a>(&'a mut self, _step: Step<'a>) -> Boxed<'a, ()> {
        let mut recorder = std::mem::replace(&mut self.recorder, Recorder::disabled());
        Box::pin(async move {
            if tokio::task::spawn_blocking(move || recorder.stop())
                .await
                .is_err()
            {
                error!("the forensics thread could not be stopped cleanly");
            }
        })
    }
}
