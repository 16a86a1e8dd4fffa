//! timerlat's run in the daemon: started as `[timerlat]` says (saying in
//! the log on which CPUs it runs, what the kernel offers and what it
//! changed, or why it cannot run), its reader's intervals taken in at
//! each collector tick, and stopped at shutdown.

use tracing::{error, info, warn};

use super::TimerlatPart;
use super::source::Source;
use super::tracer::Spec;
use crate::config::Config;
use crate::cpulist::format_cpu_list;
use crate::forensics::TimerlatSplit;
use crate::instruments::event::Context;
use crate::instruments::shape::{Boxed, Run, Started, Step};

/// timerlat's part, and its run when the section turns it on (one that
/// finds no tracer keeps its reason in the part and reads nothing).
pub(super) fn start(config: &Config, measured: &[usize]) -> Started {
    if !config.section::<super::TimerlatConfig>().enabled {
        return Started {
            part: Box::new(TimerlatPart::off(config)),
            run: None,
        };
    }
    let source = start_source(config, measured);
    Started {
        part: Box::new(TimerlatPart::new(source.status(), config)),
        run: Some(Box::new(Reading { source })),
    }
}

/// Starts the tracer and its reader as the section says.
fn start_source(config: &Config, measured: &[usize]) -> Source {
    let t = config.section::<super::TimerlatConfig>();
    let mut spec = Spec::new(
        &config
            .section::<crate::instruments::forensics::ForensicsConfig>()
            .tracefs,
        t.cpu_list(measured),
    );
    spec.period_us = t.period_us;
    spec.priority = t.priority;
    spec.user_threads = t.user_threads;
    spec.buffer_size_kb = t.buffer_size_kb;
    let source = Source::start(spec, config.measure.spike_threshold_ns);
    let status = source
        .status()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    if status.available {
        info!(
            "timerlat: the kernel's IRQ, thread{} latency on CPUs {}, every {} us ({} threads)",
            if status.user_threads {
                " and return-to-user"
            } else {
                ""
            },
            format_cpu_list(&status.cpus),
            status.period_us,
            if status.user_threads {
                "latencyd's"
            } else {
                "the kernel's"
            }
        );
        for change in &status.changed {
            info!("timerlat: {change} (set back at stop)");
        }
    } else {
        warn!(
            "timerlat is enabled but unavailable: {}; latencyd measures without it",
            status.reason.as_deref().unwrap_or("unknown reason")
        );
    }
    for cap in &status.capabilities {
        let how = if cap.available { "yes" } else { "no" };
        info!("timerlat: {}: {how}: {}", cap.name, cap.detail);
    }
    source
}

/// The reader of a started timerlat.
struct Reading {
    source: Source,
}

impl Reading {
    /// The intervals the reader handed over: into the part (a claimed
    /// CPU's kept apart and filed to the instrument that claimed it), the
    /// record's interval in progress, and forensics for a thread at least
    /// its threshold late (never on a claimed CPU: latencyd's own
    /// spinner delayed it).
    fn read(&self, step: &mut Step<'_>) {
        let claimed = step.claimed_cpus();
        for interval in self.source.drain() {
            if let Some((accumulator, _)) = step.record.as_deref_mut() {
                for cpu in &interval.cpus {
                    for context in Context::ALL {
                        let stats = cpu.stats(context);
                        if stats.count > 0 {
                            accumulator.add_timerlat(cpu.cpu, context.name(), stats);
                        }
                    }
                }
            }
            if let Some(recorder) = step.capturer
                && let Some(threshold) = recorder.threshold_ns()
            {
                for cpu in interval.cpus.iter().filter(|c| !claimed.contains(&c.cpu)) {
                    if let Some(w) = cpu.worst.filter(|w| w.thread_ns >= threshold) {
                        let split = TimerlatSplit {
                            irq_ns: w.irq_ns,
                            thread_ns: w.thread_ns,
                            user_ns: w.user_ns,
                            thread_mono_ns: w.thread_at_ns,
                        };
                        recorder.notice_timerlat(cpu.cpu, split);
                    }
                }
            }
            let mut kept_apart = Vec::new();
            step.update(|part: &mut TimerlatPart| kept_apart = part.absorb(&interval, &claimed));
            for (cpu, periods) in kept_apart {
                step.keep_apart(cpu, "timerlat", periods, None);
            }
        }
    }
}

impl Run for Reading {
    fn take_in(&mut self, mut step: Step<'_>) {
        self.read(&mut step);
    }

    /// Nothing: the reader runs on its own thread, and what it handed
    /// over was taken in.
    fn step<'a>(&'a mut self, _step: Step<'a>) -> Boxed<'a, ()> {
        Box::pin(async {})
    }

    /// Joins the reader, which stops the tracer and sets `osnoise/` back
    /// (on the blocking pool: it waits).
    fn stop<'a>(&'a mut self, _step: Step<'a>) -> Boxed<'a, ()> {
        let mut source = std::mem::replace(&mut self.source, Source::disabled());
        Box::pin(async move {
            if tokio::task::spawn_blocking(move || source.stop())
                .await
                .is_err()
            {
                error!("the timerlat thread could not be stopped cleanly");
            }
        })
    }
}
