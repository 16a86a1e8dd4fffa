//! A real-time culprit for the kernel matrix (`scripts/kernel-matrix`):
//! a thread pinned to one CPU, SCHED_FIFO at a given priority, that spins
//! for a given time and then prints what it did as one JSON line, so the
//! host can compare what latencyd attributed or counted with what really
//! ran. The guests have busybox only (no `chrt`, no compiler), so the
//! matrix ships this next to the binary it checks.
//!
//! Usage: `rt_spin CPU PRIORITY SPIN_MS NAME`. The thread's `comm` is
//! NAME, which is what forensics and the observer report it by.
//!
//! Two figures of CPU time: `runtime_ns`, the spin alone (the thread's
//! schedstat around the loop), and `life_ns`, everything the thread ran
//! from its start to its exit (pinning, the switch to SCHED_FIFO, the
//! spin, its JSON line, its teardown): the process's CPU clock around the
//! thread's life less the main thread's own. What a tracer sees of the
//! thread on its CPU lies between the two.

use std::process::ExitCode;

use latencyd_rt::sys::{self, Policy};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [cpu, priority, spin_ms, name] = args.as_slice() else {
        eprintln!("usage: rt_spin CPU PRIORITY SPIN_MS NAME");
        return ExitCode::from(2);
    };
    let (Ok(cpu), Ok(priority), Ok(spin_ms)) = (
        cpu.parse::<usize>(),
        priority.parse::<i32>(),
        spin_ms.parse::<u64>(),
    ) else {
        eprintln!("rt_spin: CPU, PRIORITY and SPIN_MS are whole numbers");
        return ExitCode::from(2);
    };
    let (process_before, main_before) = (
        cpu_clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID),
        cpu_clock_ns(libc::CLOCK_THREAD_CPUTIME_ID),
    );
    let spinner = std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || spin(cpu, priority, spin_ms));
    match spinner.map(|handle| handle.join()) {
        Ok(Ok(Ok(line))) => {
            let process = cpu_clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID) - process_before;
            let main = cpu_clock_ns(libc::CLOCK_THREAD_CPUTIME_ID) - main_before;
            println!("{line},\"life_ns\":{}}}", process.saturating_sub(main));
            ExitCode::SUCCESS
        }
        Ok(Ok(Err(why))) => {
            eprintln!("rt_spin: {why}");
            ExitCode::FAILURE
        }
        _ => {
            eprintln!("rt_spin: the spinning thread could not run");
            ExitCode::FAILURE
        }
    }
}

/// Pins the calling thread, makes it SCHED_FIFO and spins; returns the
/// JSON line that says what it did.
fn spin(cpu: usize, priority: i32, spin_ms: u64) -> Result<String, String> {
    sys::pin_current_thread(cpu).map_err(|e| format!("cannot pin to CPU {cpu}: {e}"))?;
    sys::set_current_thread_policy(Policy::Fifo, priority)
        .map_err(|e| format!("cannot switch to SCHED_FIFO {priority}: {e}"))?;
    let tid = sys::current_tid();
    let runtime_before = own_runtime_ns()?;
    let start_ns = sys::monotonic_now_ns();
    let end_ns = start_ns + spin_ms * 1_000_000;
    while sys::monotonic_now_ns() < end_ns {
        std::hint::spin_loop();
    }
    let stop_ns = sys::monotonic_now_ns();
    let runtime_ns = own_runtime_ns()? - runtime_before;
    // The line's closing brace is main's, after `life_ns`.
    Ok(format!(
        "{{\"tid\":{tid},\"cpu\":{cpu},\"priority\":{priority},\"start_ns\":{start_ns},\
         \"end_ns\":{stop_ns},\"runtime_ns\":{runtime_ns}"
    ))
}

/// A CPU-time clock (`CLOCK_PROCESS_CPUTIME_ID`, `CLOCK_THREAD_CPUTIME_ID`)
/// in nanoseconds: the kernel's exact runtime, exited threads included in
/// the process's.
fn cpu_clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; both CPU-time clocks exist
    // for the calling process and thread, so the call cannot fail.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The calling thread's CPU time so far, from the first field of its
/// schedstat (nanoseconds on the CPU, exact rather than tick-sampled).
fn own_runtime_ns() -> Result<u64, String> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat")
        .map_err(|e| format!("cannot read /proc/thread-self/schedstat: {e}"))?;
    text.split_whitespace()
        .next()
        .and_then(|field| field.parse().ok())
        .ok_or_else(|| format!("/proc/thread-self/schedstat reads {text:?}"))
}
