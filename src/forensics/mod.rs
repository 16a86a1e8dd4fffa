//! Spike forensics: what delayed a late wake-up, without stopping the
//! measurement.
//!
//! A flight recorder in a private tracefs instance (`tracefs`) keeps the
//! recent scheduling, interrupt and timer events of every measured CPU.
//! When the consumer (the daemon's collector, `measure`'s drain loop)
//! sees an interval whose maximum is over the threshold, it hands the
//! spike to the recorder thread (`recorder`, its loop in `worker`)
//! without waiting; the thread,
//! within its rate limits (`limits`), reads that CPU's events from the missed deadline to the wake-up
//! (`events`), splits the latency into what ran (`attribution`) and names
//! its main cause (`verdict`), adds
//! what the kernel and hardware count behind the scheduler's back
//! (`noise`: hypervisor steal, SMIs), and keeps the capture in a bounded
//! directory (`store`). Where the kernel's timerlat runs beside, its
//! split of the same wake-up joins the capture (`timerlat`). The samplers do nothing new: no system call, no
//! marker, no trigger; the sample time each interval carries for its
//! maximum is all the recorder needs. A capture is drawn as a picture of
//! its CPU around the wake-up (`picture`, SVG) for `plot --capture`, the
//! daemon's `/spikes/{id}` and qualify's report.

pub mod attribution;
pub mod events;
pub mod journal;
pub mod limits;
pub mod noise;
pub mod picture;
pub mod recorder;
pub mod scheduling;
pub mod store;
pub mod timeline;
mod timerlat;
pub mod tracefs;
pub mod verdict;
mod worker;

pub use attribution::{CAUSE_KINDS, Cause};
pub use journal::{Journal, JournalData, Settings, Spike, Trigger, UNCAPTURED_REASONS};
pub use recorder::{Capturer, Recorder};
pub use store::{Capture, Lookup, NoSamplerCapture, Summary, TaskRef, TimerlatSplit};
pub use tracefs::Capability;
pub use worker::Offer;
