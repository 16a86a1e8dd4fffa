//! The systemd notification protocol (`sd_notify`), a no-op when
//! `NOTIFY_SOCKET` is not set. Failures to notify are logged, never fatal:
//! a monitor that cannot talk to its supervisor should still monitor.

use sd_notify::NotifyState;

fn send(states: &[NotifyState<'_>]) {
    if let Err(err) = sd_notify::notify(states) {
        tracing::warn!("cannot notify systemd: {err}");
    }
}

/// Every sampler runs and the listener is bound.
pub fn ready(status: &str) {
    send(&[NotifyState::Ready, NotifyState::Status(status)]);
}

pub fn status(status: &str) {
    send(&[NotifyState::Status(status)]);
}

pub fn watchdog() {
    send(&[NotifyState::Watchdog]);
}

pub fn reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(now) => send(&[NotifyState::Reloading, now]),
        Err(_) => send(&[NotifyState::Reloading]),
    }
}

pub fn stopping() {
    send(&[NotifyState::Stopping]);
}

/// The watchdog interval systemd expects pings within (`WatchdogSec=`),
/// if it is enabled for this process.
pub fn watchdog_interval() -> Option<std::time::Duration> {
    sd_notify::watchdog_enabled()
}
