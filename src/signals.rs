//! The signals that end a one-shot command (`measure`, `oslat`,
//! `qualify`) with its results: SIGINT (Ctrl-C), SIGTERM (`kill`) and
//! SIGALRM (cyclictest ends `-D` with `alarm`, and scripts send it). The
//! first sets a flag the command watches and ends gracefully on; a second,
//! while the first is pending, exits at once with 130, for runs too long
//! to wait for.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// The signals that stop a one-shot command.
pub const STOP: [i32; 3] = [
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGALRM,
];

/// The flag the first stop signal sets, the handlers installed.
pub fn stop_flag() -> std::io::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in STOP {
        signal_hook::flag::register_conditional_shutdown(signal, 130, Arc::clone(&stop))?;
        signal_hook::flag::register(signal, Arc::clone(&stop))?;
    }
    Ok(stop)
}
