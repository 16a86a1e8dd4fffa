//! The one shape of an instrument of the daemon: what it keeps in the
//! state (a [`Part`]), what runs it (a [`Run`]), and the [`Entry`] that
//! the registry lists, with its metric families and what it serves
//! (`serve`: its histogram with native buckets and exemplars, [`Native`];
//! its own route, [`Api`]; its other routes, [`Routes`]). The daemon
//! holds the parts and the runs in registry order and walks them: the
//! collector's tick steps each run (with the CPUs claimed and the
//! [`Capturer`] of late wake-ups at hand, which one run offers), shutdown
//! stops each, `/metrics` builds each family from its part,
//! `/api/v1/status`, the instruments' routes, the status page and
//! `/plot.svg?source=NAME` show each part, the exemplars are chosen from
//! what a part captured, and a reload offers each part the keys of its
//! section and the new `export.max_window`. None of them names an
//! instrument.
//!
//! Choose a part for what is read (by renderers, under the state's one
//! lock, so that one answer's numbers come from one moment) and a run for
//! what acts (threads, processes, the kernel's tracers; on the collector's
//! tick, never holding the lock across a wait). An instrument that is off
//! has a part that says so and no run: it costs nothing.
//!
//! A minimal instrument, a counter of ticks:
//!
//! ```
//! use latencyd::exposition::{Family, metric};
//! use latencyd::instruments::shape::{
//!     Boxed, Entry, Part, PartBuild, Run, Start, Started, Step, Visit,
//! };
//! use latencyd::units::Now;
//! use prometheus::proto::{Metric, MetricType};
//!
//! #[derive(Default)]
//! struct Ticks { total: u64 }
//!
//! impl Part for Ticks {
//!     fn status(&self) -> Option<Box<serde_json::value::RawValue>> {
//!         serde_json::value::to_raw_value(&serde_json::json!({ "total": self.total })).ok()
//!     }
//! }
//!
//! struct Counting;
//!
//! impl Run for Counting {
//!     fn step<'a>(&'a mut self, step: Step<'a>) -> Boxed<'a, ()> {
//!         Box::pin(async move { step.update(|t: &mut Ticks| t.total += 1) })
//!     }
//!     fn stop<'a>(&'a mut self, _: Step<'a>) -> Boxed<'a, ()> {
//!         Box::pin(async {})
//!     }
//! }
//!
//! fn ticks_total(part: &dyn Part, _now: Now) -> Vec<Metric> {
//!     let ticks = part.as_any().downcast_ref::<Ticks>().map_or(0, |t| t.total);
//!     vec![metric::counter(vec![], ticks as f64)]
//! }
//!
//! const FAMILIES: &[Family<PartBuild>] = &[Family {
//!     name: "example_ticks_total",
//!     help: "Collector ticks counted.",
//!     kind: MetricType::COUNTER,
//!     labels: &[],
//!     build: ticks_total,
//! }];
//!
//! static TICKS: Entry = Entry {
//!     name: "ticks",
//!     section: None,
//!     families: FAMILIES,
//!     native: None,
//!     api: None,
//!     routes: None,
//!     schema: Some(r#"{ "Ticks": { "type": "object", "properties": { "total": { "type": "integer" } } } }"#),
//!     fields: None,
//!     idle: |_| Box::new(Ticks::default()),
//!     start: |_| Started { part: Box::new(Ticks::default()), run: Some(Box::new(Counting)) },
//! };
//!
//! // What the daemon does with it, in short.
//! let config = latencyd::instruments::registry::builtin_config();
//! let host = latencyd::host::HostInfo::detect();
//! let started = (TICKS.start)(&Start { config: &config, host: &host, measured: &[0] });
//! let (part, mut run) = (std::sync::Mutex::new(started.part), started.run.unwrap());
//! let access = |_: Option<&str>, f: &mut Visit<'_>| f(part.lock().unwrap().as_mut());
//! let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! runtime.block_on(run.step(Step::new("ticks", (0, 0), &access, None)));
//! let part = part.into_inner().unwrap();
//! assert_eq!(part.as_any().downcast_ref::<Ticks>().unwrap().total, 1);
//! assert_eq!((TICKS.families[0].build)(part.as_ref(), Now::default()).len(), 1);
//! ```

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;

use prometheus::proto::Metric;
use serde_json::value::RawValue;

use crate::config::{Config, SectionSpec};
use crate::exposition::Family;
pub use crate::forensics::{Capturer, Spike};
use crate::host::HostInfo;
use crate::record::{Accumulator, Keeper};
use crate::series::exemplars::Captures;
use crate::series::{WindowHistogram, WindowMax};
use crate::stats::LatencyStats;
use crate::units::Now;

mod serve;
pub use serve::{Answer, Api, Check, Native, Refusal, Route, Routes};

/// A future a run returns, borrowing what it was given.
pub type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A family built from the instrument's part at a scrape (both clocks:
/// `CLOCK_MONOTONIC` for what a trailing window holds, the wall clock for
/// what is kept in wall time).
pub type PartBuild = fn(&dyn Part, Now) -> Vec<Metric>;

/// A part as the concrete type its instrument's code downcasts it to;
/// every `'static` type has it.
pub trait AsAny: Any {
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any> AsAny for T {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// What an instrument keeps in the daemon's state: plain data, read by
/// the renderers under the state's lock and written by its run through
/// [`Step::update`].
pub trait Part: AsAny + Send {
    /// Its object in `/api/v1/status`, under the instrument's name (its
    /// entry's `schema` describes it); None when it has none there (its
    /// own route says all).
    fn status(&self) -> Option<Box<RawValue>>;
    /// Its fields among the daemon's own, at the end of `/api/v1/status`
    /// (its entry's `fields` describes them): what the other objects are
    /// read beside, such as the host's fingerprint. None by default.
    fn status_fields(&self) -> Vec<(&'static str, Box<RawValue>)> {
        Vec::new()
    }
    /// A copy of it as one look, when some of it is shared with a thread
    /// that changes it under a lock of its own (forensics' journal): a
    /// scrape builds every family of the instrument from that copy, so
    /// that one scrape's numbers come from one moment. None (the default):
    /// they are built from the part, which the state's lock holds still.
    fn one_look(&self) -> Option<Box<dyn Part>> {
        None
    }
    /// Its line at the top of the status page (None: it has nothing to
    /// say there).
    fn page_line(&self) -> Option<PageLine> {
        None
    }
    /// Its list on the status page, a line per item, at `now_ns` (empty:
    /// none).
    fn page_list(&self, _now_ns: u64) -> Vec<String> {
        Vec::new()
    }
    /// Its section of the status page (HTML, its heading included), after
    /// the gaps in the measurement, at `now` (None: it has none).
    fn page_section(&self, _now: Now) -> Option<String> {
        None
    }
    /// Its section of the status page after the record's (HTML, its
    /// heading included), at `now` (None: it has none).
    fn page_section_after_record(&self, _now: Now) -> Option<String> {
        None
    }
    /// What it captured in this run (since `started_unix_ns`), newest
    /// first, and what it is about to capture, at `now`: the exemplars
    /// of every latency histogram are chosen from them. None: it captures
    /// nothing (one instrument does).
    fn captures(&self, _now: Now, _started_unix_ns: u64) -> Option<Captures> {
        None
    }
    /// Its lines among the status page's notes on CPUs without a sampler
    /// (what it sees on those it watches), at `now_ns` (empty: none).
    fn cpu_notes(&self, _now_ns: u64) -> Vec<String> {
        Vec::new()
    }
    /// The repairs of the tracefs instance it owns (found changed or
    /// broken by another program, set back or made again), while it is
    /// enabled; None when it owns none.
    fn tracefs_repairs(&self) -> Option<u64> {
        None
    }
    /// A key of its section changed on reload (`load.cpus`): true when
    /// applied, false when it waits for a restart (the default).
    fn apply(&mut self, _key: &str, _new: &Config) -> bool {
        false
    }
    /// Its latency series for a live plot (`/plot.svg?source=NAME` and
    /// the status page), in the order they are drawn: none by default.
    fn plot_lines(&self) -> Vec<PlotLine<'_>> {
        Vec::new()
    }
    /// Why nothing of it can be plotted live (off, or not running here),
    /// said to whoever asks for its plot.
    fn unplotted(&self) -> Option<String> {
        None
    }
    /// Whether the kernel's thread named `comm` works for this instrument
    /// (timerlat's `timerlat/N` while it runs them): its late wake-ups
    /// are this instrument's measurement, never offered as the observer's
    /// captures of a workload task.
    fn owns_kernel_thread(&self, _comm: &[u8]) -> bool {
        false
    }
    /// `export.max_window` changed on reload: its trailing windows, if it
    /// keeps any, now span `window_ns`, keeping what they hold.
    fn resize_window(&mut self, _window_ns: u64, _now_ns: u64) {}
    /// What another source (`sampler`, `timerlat`) measured on a CPU this
    /// instrument claimed ([`Run::claim`]): `count` samples, the largest
    /// `max_ns` when it has one, kept out of that source's figures.
    fn keep_apart(
        &mut self,
        _cpu: usize,
        _source: &'static str,
        _count: u64,
        _max_ns: Option<u64>,
    ) {
    }
}

/// One line of an instrument's live plot: a CPU's series of one kind
/// (`line`: timerlat's context), its lifetime statistics and its
/// trailing window's histogram and maximum.
pub struct PlotLine<'a> {
    pub cpu: usize,
    pub line: &'static str,
    pub lifetime: &'a LatencyStats,
    pub recent: &'a WindowHistogram,
    pub window: &'a WindowMax,
}

/// A line at the top of the status page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageLine {
    pub text: String,
    /// Shown before the text, as a warning, while the instrument acts on
    /// the CPUs it measures ("Under load").
    pub running: Option<&'static str>,
}

/// What starts an instrument.
pub struct Start<'a> {
    pub config: &'a Config,
    pub host: &'a HostInfo,
    /// The CPUs the samplers measure.
    pub measured: &'a [usize],
}

/// A started instrument: its first part, and its run unless its section
/// leaves it off (the part then says why).
pub struct Started {
    pub part: Box<dyn Part>,
    pub run: Option<Box<dyn Run>>,
}

/// What is done to a part under the state's lock.
pub type Visit<'a> = dyn FnMut(&mut dyn Part) + 'a;

/// Runs a visit on the part of the instrument named (every part, in
/// registry order, for None), under the state's lock.
pub type PartsAccess<'a> = dyn Fn(Option<&str>, &mut Visit<'_>) + Sync + 'a;

/// The CPUs claimed this tick ([`Run::claim`]), each with the name of the
/// instrument that claimed it.
pub type Claims = BTreeMap<usize, &'static str>;

/// No CPU claimed.
static NO_CLAIMS: Claims = BTreeMap::new();

/// What a run is given at a collector tick and at shutdown.
pub struct Step<'a> {
    /// `CLOCK_MONOTONIC` and wall time at the tick, ns.
    pub mono_ns: u64,
    pub unix_ns: u64,
    /// The instrument's name, whose part [`Step::update`] reaches.
    name: &'a str,
    parts: &'a PartsAccess<'a>,
    /// The record's interval in progress and its writer, when recording.
    pub record: Option<&'a mut (Accumulator, Keeper)>,
    claims: &'a Claims,
    /// What captures late wake-ups (spike forensics), while it runs:
    /// what an instrument measured over its threshold is offered to it
    /// (never waiting).
    pub capturer: Option<&'a Capturer>,
}

impl<'a> Step<'a> {
    /// A step of the instrument `name`, no CPU claimed, nothing capturing.
    pub fn new(
        name: &'a str,
        (mono_ns, unix_ns): (u64, u64),
        parts: &'a PartsAccess<'a>,
        record: Option<&'a mut (Accumulator, Keeper)>,
    ) -> Step<'a> {
        Step {
            mono_ns,
            unix_ns,
            name,
            parts,
            record,
            claims: &NO_CLAIMS,
            capturer: None,
        }
    }

    /// The CPUs instruments claimed this tick.
    pub fn with_claims(self, claims: &'a Claims) -> Step<'a> {
        Step { claims, ..self }
    }

    /// What captures late wake-ups, which hears of what this instrument
    /// measured.
    pub fn with_capturer(self, capturer: &'a Capturer) -> Step<'a> {
        Step {
            capturer: Some(capturer),
            ..self
        }
    }

    /// Changes the instrument's part, of type `P`, under the state's lock
    /// (held only for `f`: plain memory work).
    pub fn update<P: Part>(&self, f: impl FnOnce(&mut P)) {
        let mut f = Some(f);
        (self.parts)(Some(self.name), &mut |part: &mut dyn Part| {
            if let (Some(part), Some(f)) = (part.as_any_mut().downcast_mut::<P>(), f.take()) {
                f(part);
            }
        });
    }

    /// The CPUs instruments claimed this tick: what else measured them
    /// then is disturbed by those instruments, and is kept apart.
    pub fn claimed_cpus(&self) -> BTreeSet<usize> {
        self.claims.keys().copied().collect()
    }

    /// Files what this instrument (`source`) measured on a claimed CPU to
    /// the instrument that claimed it ([`Part::keep_apart`]).
    pub fn keep_apart(&self, cpu: usize, source: &'static str, count: u64, max_ns: Option<u64>) {
        if let Some(name) = self.claims.get(&cpu) {
            (self.parts)(Some(name), &mut |part: &mut dyn Part| {
                part.keep_apart(cpu, source, count, max_ns)
            });
        }
    }

    /// Whether the kernel's thread named `comm` works for a registered
    /// instrument ([`Part::owns_kernel_thread`]).
    pub fn owned_kernel_thread(&self, comm: &[u8]) -> bool {
        let mut owned = false;
        (self.parts)(None, &mut |part: &mut dyn Part| {
            owned |= part.owns_kernel_thread(comm)
        });
        owned
    }
}

/// What runs an instrument: its threads, processes or tracers.
pub trait Run: Send {
    /// At the start of a tick, before anything measured is taken in: the
    /// CPUs this instrument disturbs now (a window spinning them), whose
    /// other measurements are kept apart and filed to its part
    /// ([`Part::keep_apart`]). None by default.
    fn claim(&mut self, _step: Step<'_>) -> BTreeSet<usize> {
        BTreeSet::new()
    }
    /// Once the samplers' intervals are in, before the record's interval
    /// is cut and before any run's step: what it measured since the last
    /// tick, taken in (so that it is filed with the samplers' of the same
    /// time, before a window starting in a step cuts the record). Plain
    /// memory work; nothing by default.
    fn take_in(&mut self, _step: Step<'_>) {}
    /// What captures late wake-ups, when this instrument runs it: the
    /// daemon asks once after start and offers it every run's steps and
    /// the samplers' late wake-ups (one instrument has one; None by
    /// default).
    fn capturer(&self) -> Option<Capturer> {
        None
    }
    /// One collector tick. Slow work (starting processes, joining
    /// threads) goes to the blocking pool; the step only looks at it.
    fn step<'a>(&'a mut self, step: Step<'a>) -> Boxed<'a, ()>;
    /// At shutdown, before the samplers are joined: nothing of it outlives
    /// the daemon, and what it measured last is in its part and the record.
    fn stop<'a>(&'a mut self, step: Step<'a>) -> Boxed<'a, ()>;
}

/// An instrument as the registry lists it.
pub struct Entry {
    /// Its configuration section and its key in `/api/v1/status`.
    pub name: &'static str,
    /// Its configuration section (its folder's `config.rs`), named
    /// `name`, when it has one.
    pub section: Option<&'static SectionSpec>,
    /// Its metric families, in the order `/metrics` serves them.
    pub families: &'static [Family<PartBuild>],
    /// Its latency histogram with native buckets in the protobuf
    /// exposition (one of its families, by name), and its series.
    pub native: Option<Native>,
    /// Its own route, `/api/v1/NAME`, when it has one.
    pub api: Option<Api>,
    /// Its other routes (pages, a resource by id), when it has any.
    pub routes: Option<Routes>,
    /// Its object in `/api/v1/status` as OpenAPI 3.1 schemas (its folder's
    /// `schema.json`): a JSON object whose first schema is the object's,
    /// the others any it refers to. None: it has no object there.
    pub schema: Option<&'static str>,
    /// Its fields among the daemon's own at the end of `/api/v1/status`
    /// ([`Part::status_fields`]) as OpenAPI 3.1 schemas (its folder's
    /// `fields.json`): a JSON object whose first schema is an object whose
    /// properties are the fields, all required, the others any they refer
    /// to. None: it has none.
    pub fields: Option<&'static str>,
    /// Its part of a state it does not run in (synthetic states of tests
    /// and benches): as configured, nothing measured.
    pub idle: fn(&Config) -> Box<dyn Part>,
    /// Starts it as its section says.
    pub start: fn(&Start<'_>) -> Started,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A part that owns the kernel threads named `prefix…`.
    struct Owning(&'static str);

    impl Part for Owning {
        fn status(&self) -> Option<Box<RawValue>> {
            None
        }
        fn owns_kernel_thread(&self, comm: &[u8]) -> bool {
            comm.starts_with(self.0.as_bytes())
        }
    }

    #[test]
    fn a_kernel_thread_is_owned_when_any_registered_part_owns_it() {
        let parts: Vec<std::sync::Mutex<Box<dyn Part>>> = vec![
            std::sync::Mutex::new(Box::new(Owning("none/"))),
            std::sync::Mutex::new(Box::new(Owning("timerlat/"))),
        ];
        let visited = std::sync::atomic::AtomicUsize::new(0);
        let access = |name: Option<&str>, f: &mut Visit<'_>| {
            assert_eq!(name, None, "every part, not one by name");
            for part in &parts {
                visited.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                f(part.lock().unwrap().as_mut());
            }
        };
        let step = Step::new("observe", (0, 0), &access, None);
        assert!(step.owned_kernel_thread(b"timerlat/1"));
        assert!(!step.owned_kernel_thread(b"ktimers/1"));
        assert_eq!(visited.into_inner(), 4);
    }
}
