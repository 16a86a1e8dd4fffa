//! A spike in words: its main cause as one line for logs, the status page
//! and `measure`'s break report, why a capture was made and timerlat's
//! split of its period as its page says them, and durations as people
//! read them.

use super::attribution::Cause;
pub use super::scheduling::scheduling;
use super::store::Summary;

/// A duration for people: microseconds below a millisecond, else
/// milliseconds with two decimals.
pub fn human(ns: u64) -> String {
    if ns < 1_000_000 {
        format!("{}us", ns / 1_000)
    } else {
        format!("{:.2}ms", ns as f64 / 1e6)
    }
}

/// One line naming the main cause of a sampler's late wake-up.
pub fn verdict(cpu: usize, latency_ns: u64, causes: &[Cause]) -> String {
    verdict_of(&format!("CPU {cpu}"), "the sampler", latency_ns, causes)
}

/// One line naming the main cause: `who` woke late (`CPU 2`, `task rtapp
/// (pid 7) on CPU 3`), `waiter` waited (`the sampler`, `it`).
pub fn verdict_of(who: &str, waiter: &str, latency_ns: u64, causes: &[Cause]) -> String {
    let late = format!("{who} woke {} late", human(latency_ns));
    let Some(main) = causes.first() else {
        return format!("{late}: no cause could be named");
    };
    let share = main.duration_ns as f64 * 100.0 / latency_ns.max(1) as f64;
    let took = format!("{} ({share:.0}%)", human(main.duration_ns));
    match main.kind.as_str() {
        "task" => {
            let how = scheduling(main.policy.as_deref(), main.priority)
                .map_or_else(String::new, |s| format!(", {s}"));
            format!(
                "{late}: {} ran {took} while {waiter} waited",
                match main.pid {
                    Some(pid) => format!("task {} (pid {pid}{how})", main.name),
                    None => format!("task {}", main.name),
                }
            )
        }
        "irq" => format!("{late}: interrupt handler {} took {took}", main.name),
        "softirq" => format!("{late}: {} took {took}", main.name),
        "nmi" => format!("{late}: {} took {took}", main.name),
        "steal" => format!("{late}: the hypervisor did not run this CPU for {took}"),
        "sampler" => format!(
            "{late}: {took} in the sampler's own wake-up path ({})",
            main.name
        ),
        _ => format!("{late}: {took} no event accounts for: {}", main.name),
    }
}

/// Why the capture was made, as its page says it.
pub fn trigger(summary: &Summary) -> String {
    match summary.trigger.as_str() {
        "new_max" => "a new maximum of its CPU's window".to_string(),
        "timerlat" => format!(
            "timerlat's thread at least the forensics threshold late, and no sampler's \
             capture of the same wake-up ({})",
            // Captures written before the reason was kept say all three.
            summary.no_sampler_capture.map_or(
                "the samplers were on time, their capture was over the rate limits, \
                 or no sampler runs here",
                |why| why.says()
            )
        ),
        _ => "at least the forensics threshold late".to_string(),
    }
}

/// timerlat's split of the capture's period as a fact of its page (its
/// name, and the split), when the capture has one.
pub fn split(summary: &Summary) -> Option<(&'static str, String)> {
    let t = summary.timerlat.as_ref()?;
    let or_unread = |ns: Option<u64>| ns.map_or("not read".to_string(), human);
    Some((
        "timerlat's split of its period",
        format!(
            "IRQ {}, thread {}, return to user {}",
            or_unread(t.irq_ns),
            human(t.thread_ns),
            or_unread(t.user_ns)
        ),
    ))
}
