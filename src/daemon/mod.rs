//! `latencyd run`: the long-running service, and `check-config`.
//!
//! Start-up does everything that can fail for a reason the operator must
//! fix before any thread starts: load and check the configuration (exit
//! 78, EX_CONFIG), bind the listener (a port in use is a configuration
//! error too). Then samplers start (exit 77, EX_NOPERM, if real-time
//! scheduling or memory locking is refused and required), the HTTP server
//! starts, and systemd hears READY=1. Every start-up failure is one
//! `StartupError`, whose `exit_code` says which.
//!
//! The exporter runs on a current-thread tokio runtime on the main thread:
//! one thread for the collector tick, the HTTP server, signals and the
//! watchdog. That thread never waits: nothing on it sleeps, and no lock is
//! held across I/O, compression or a thread start; what is slow (restarting
//! a sampler, reading files on reload, bcrypt, joining at shutdown) runs on
//! tokio's blocking pool and hands its result back.
//!
//! - `startup`: the start-up order and shutdown.
//! - `event_loop`: ticks, signals, watchdog, STATUS=.
//! - `collector`: samplers' intervals into the state; hotplug restarts.
//! - `cpu_watch`: the sampled CPUs reconciled with sysfs once a second.
//! - `gaps`: stalls and offline stretches, said, counted, recorded.
//! - `scheduling`: each sampler's policy, priority and CPUs read again
//!   every tick; a change behind latencyd's back said and set back.
//! - the registered instruments (`instruments::registry`): started
//!   (`parts`), their runs' claims, steps and stops (`runs`), shown
//!   through their parts.
//! - `reload`: SIGHUP; `check`: what a configuration passes before use.
//! - `state`, `render`, `http`: what is known, how it is shown, how it is
//!   served. `logging`, `notify`: tracing and sd_notify.

mod check;
mod collector;
mod cpu_watch;
mod error;
mod event_loop;
mod gaps;
mod listen;
mod logging;
mod notify;
mod parts;
mod reload;
mod runs;
mod scheduling;
mod shutdown;
mod startup;

pub mod http;
pub mod render;
pub mod state;

pub use error::{EX_NOPERM, StartupError};
pub use startup::{check_config, main};
