//! The one line `systemctl status` shows (sd_notify `STATUS=`), refreshed
//! by the event loop and after a reload.

use crate::daemon::state::MonitorState;
use crate::rt::sys;
use crate::units::NS_PER_SEC;

/// One line for `systemctl status`.
pub fn status_line(s: &MonitorState) -> String {
    let now = sys::monotonic_now_ns();
    let max = s.cpus.iter().map(|v| v.lifetime.max_ns).max().unwrap_or(0);
    let window = s.cpus.iter().filter_map(|v| v.window.max(now)).max();
    let missed: u64 = s.cpus.iter().map(|v| v.lifetime.missed).sum();
    format!(
        "{} CPUs: max {}us, last {}s max {}, {missed} missed{}",
        s.cpus.len(),
        max / 1_000,
        s.config.export.max_window_ns / NS_PER_SEC,
        window.map_or_else(|| "-".to_string(), |w| format!("{}us", w / 1_000)),
        if s.health(now).healthy {
            ""
        } else {
            ", UNHEALTHY"
        },
    )
}
