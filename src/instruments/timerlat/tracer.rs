//! The timerlat tracer run by latencyd: a private instance
//! (`instances/latencyd-timerlat-PID`, owned as `crate::tracefs` says)
//! with the `timerlat` tracer on the measured CPUs, read as binary pages
//! from each CPU's `trace_pipe_raw`.
//!
//! The kernel arms one timer per CPU and period. When it fires, the
//! handler records how late it runs (`irq`); the thread the timer wakes
//! records how late it runs (`thread`). Where the kernel has
//! `osnoise/per_cpu/cpuN/timerlat_fd` (6.5 and later), that thread is
//! latencyd's own: pinned, SCHED_FIFO, blocked in `read` on the file, and
//! the kernel also records when it comes back from user space for its
//! next period (`user`). Elsewhere the kernel's `timerlat/N` threads
//! (SCHED_FIFO 95) are the workload.
//!
//! The `osnoise/` settings are global to the host; `osnoise::Guard` holds
//! what latencyd changes and sets it back. latencyd never starts timerlat
//! beside another user of timerlat or osnoise, whose settings it would
//! retune, and names whoever starts one beside it (`Session::check`).

use std::fs::{self, File};
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::workload::Workload;
use crate::instruments::event::{TimerlatLayout, TimerlatSample};
use crate::instruments::osnoise::{self, Guard};
use crate::tracefs::ring::PageLayout;
use crate::tracefs::{self, Capability, Check, Instance, Role, read_text};

/// How long after the kernel ended latencyd's timerlat threads they are
/// started again (once nobody else runs timerlat or osnoise).
const RESTART_AFTER: Duration = Duration::from_secs(10);

/// The tracers that share timerlat's global settings and threads.
pub const SHARED_TRACERS: [&str; 2] = ["timerlat", "osnoise"];

/// How a timerlat run is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub tracefs: PathBuf,
    pub cpus: Vec<usize>,
    pub period_us: u64,
    /// latencyd's own threads as the workload where the kernel has
    /// `timerlat_fd`; the kernel's threads otherwise, or when false.
    pub user_threads: bool,
    /// SCHED_FIFO priority of latencyd's own timerlat threads.
    pub priority: i32,
    pub buffer_size_kb: u64,
    /// The program that runs latencyd's threads (`workload`):
    /// `/proc/self/exe`; tests name the binary.
    pub helper: PathBuf,
}

impl Spec {
    /// rtla's defaults: a 1 ms period, FIFO 95, user threads where they
    /// can be.
    pub fn new(tracefs: &Path, cpus: Vec<usize>) -> Spec {
        Spec {
            tracefs: tracefs.to_path_buf(),
            cpus,
            period_us: 1000,
            user_threads: true,
            priority: 95,
            buffer_size_kb: 1024,
            helper: PathBuf::from("/proc/self/exe"),
        }
    }
}

/// What the kernel under `root` offers timerlat: the tracer, and the
/// user-space workload.
pub fn capabilities(root: &Path) -> Vec<Capability> {
    let tracers = fs::read_to_string(root.join("available_tracers")).unwrap_or_default();
    let has = |name: &str| tracers.split_whitespace().any(|t| t == name);
    let timerlat = has("timerlat");
    let fd = root.join("osnoise/per_cpu/cpu0/timerlat_fd").exists();
    vec![
        Capability::new(
            "timerlat",
            timerlat,
            if timerlat {
                "the kernel's timerlat tracer: IRQ and thread latency of every period".to_string()
            } else {
                format!(
                    "no timerlat tracer in {}/available_tracers (a kernel built without \
                     CONFIG_TIMERLAT_TRACER, as Debian's generic kernels are)",
                    root.display()
                )
            },
        ),
        Capability::new(
            "timerlat_user",
            timerlat && fd,
            if fd {
                "osnoise/per_cpu/cpuN/timerlat_fd: latencyd's threads as the workload, and the \
                 return-to-user latency"
            } else {
                "no osnoise/per_cpu/cpuN/timerlat_fd (Linux 6.5 and later): the kernel's threads \
                 are the workload, no return-to-user latency"
            },
        ),
        Capability::new(
            "hwlat",
            has("hwlat"),
            if has("hwlat") {
                "the kernel's hwlat tracer: hardware noise in windows"
            } else {
                "no hwlat tracer (CONFIG_HWLAT_TRACER)"
            },
        ),
    ]
}

/// A running timerlat.
pub struct Session {
    layout: TimerlatLayout,
    page: PageLayout,
    buf: Vec<u8>,
    readers: Vec<(usize, File)>,
    /// latencyd's threads, in a process of their own.
    workload: Option<Workload>,
    /// How to start them again, when they are latencyd's.
    user_spec: Option<Spec>,
    /// When to try, after the kernel ended them.
    restart_at: Option<Instant>,
    osnoise: Guard,
    root: PathBuf,
    /// Removed last: the readers and the tracer go first.
    instance: Instance,
    stopped: bool,
    /// Whether the `user` context is measured (latencyd's own threads).
    pub user: bool,
    /// What was set up, for the log: the osnoise settings changed,
    /// instances swept.
    pub notes: Vec<String>,
}

/// What `Session::check` found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Neighbours {
    /// Others running timerlat or osnoise: (instance or `top`, tracer).
    pub users: Vec<(String, String)>,
    /// Settings changed under latencyd, said.
    pub retuned: Vec<String>,
    /// The instance's own settings, repaired or broken.
    pub instance: Option<String>,
    /// What happened to latencyd's timerlat threads: ended (and why),
    /// started again, or could not be.
    pub workload: Vec<String>,
}

impl Session {
    /// Sets timerlat up as `spec` says and starts it. The errors name
    /// what is missing or who holds the tracer.
    pub fn start(spec: &Spec) -> Result<Session, String> {
        let root = tracefs::locate_for(&spec.tracefs, "timerlat")?;
        let caps = capabilities(&root);
        if !caps[0].available {
            return Err(caps[0].detail.clone());
        }
        // A killed latencyd's instance still runs timerlat: gone first.
        let swept = tracefs::instance::sweep_role(&root, Role::Timerlat);
        let users = tracefs::tracer_users(&root, &SHARED_TRACERS, None);
        if !users.is_empty() {
            return Err(format!(
                "timerlat cannot start beside {}: timerlat's settings are global to the host and \
                 latencyd does not retune another program's; stop it first",
                describe_users(&users)
            ));
        }
        let layout =
            TimerlatLayout::parse(&read_text(&root.join("events/ftrace/timerlat/format"))?)?;
        let page = PageLayout::parse(&read_text(&root.join("events/header_page"))?)?;
        let (instance, mut notes) = Instance::create(&root, Role::Timerlat)?;
        notes.splice(0..0, swept.into_iter().filter(|n| n.starts_with("removed")));
        let user = spec.user_threads && caps[1].available;
        let mut osnoise = Guard::take(&root.join("osnoise"));
        let cpus = crate::cpulist::format_cpu_list(&spec.cpus);
        osnoise.set("cpus", &cpus, osnoise::same_cpus)?;
        osnoise.set(
            "timerlat_period_us",
            &spec.period_us.to_string(),
            osnoise::same_number,
        )?;
        osnoise.set("stop_tracing_us", "0", osnoise::same_number)?;
        osnoise.set("stop_tracing_total_us", "0", osnoise::same_number)?;
        if osnoise.before.get("print_stack").is_some() {
            osnoise.set("print_stack", "0", osnoise::same_number)?;
        }
        if user {
            osnoise.set_option("OSNOISE_WORKLOAD", false)?;
        } else if osnoise.before.option("OSNOISE_WORKLOAD").is_some() {
            osnoise.set_option("OSNOISE_WORKLOAD", true)?;
        }
        notes.extend(osnoise.changes());
        instance.write("tracing_on", "0")?;
        instance.write("trace_clock", "mono")?;
        instance.write("buffer_size_kb", &spec.buffer_size_kb.to_string())?;
        instance.write("tracing_cpumask", &tracefs::cpumask(&spec.cpus))?;
        instance
            .write("current_tracer", "timerlat")
            .map_err(|err| {
                let users = tracefs::tracer_users(&root, &SHARED_TRACERS, Some(&instance.name()));
                if users.is_empty() {
                    err
                } else {
                    format!("{err}: {} runs it", describe_users(&users))
                }
            })?;
        // Readers after the tracer: the kernel refuses to change the tracer
        // of an instance whose buffers someone has open (EBUSY).
        let dir = instance.dir().to_path_buf();
        let readers = tracefs::raw_readers(&dir, &spec.cpus)?;
        instance.write("tracing_on", "1")?;
        let mut session = Session {
            layout,
            page,
            buf: Vec::new(),
            readers,
            workload: None,
            user_spec: user.then(|| spec.clone()),
            restart_at: None,
            osnoise,
            root,
            instance,
            stopped: false,
            user,
            notes,
        };
        session.buf = vec![0u8; tracefs::page_size(&dir)];
        if user {
            session.workload = Some(Workload::start(
                &spec.helper,
                &session.root,
                &spec.cpus,
                spec.priority,
            )?);
        }
        Ok(session)
    }

    /// Reads every page the CPUs' buffers hold now and hands each sample
    /// to `each` with its CPU and its time (`CLOCK_MONOTONIC` ns); returns
    /// whether the kernel flagged events lost before one of them, and what
    /// could not be read.
    pub fn drain(&mut self, mut each: impl FnMut(usize, TimerlatSample, u64)) -> Drained {
        let mut drained = Drained::default();
        for (cpu, file) in &mut self.readers {
            loop {
                match file.read(&mut self.buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        let layout = &self.layout;
                        let cpu = *cpu;
                        match self.page.records(&self.buf[..n], |at, record| {
                            if let Some(sample) = layout.decode(record) {
                                each(cpu, sample, at);
                            }
                        }) {
                            Ok(info) => drained.missed |= info.missed,
                            Err(err) => drained.errors.push(format!("CPU {cpu}: {err}")),
                        }
                    }
                    Err(err) if err.kind() == ErrorKind::WouldBlock => break,
                    Err(err) if err.kind() == ErrorKind::Interrupted => {}
                    Err(err) => {
                        drained
                            .errors
                            .push(format!("CPU {cpu}: cannot read its buffer: {err}"));
                        break;
                    }
                }
            }
        }
        drained
    }

    /// Who else runs timerlat or osnoise, what they retuned, whether the
    /// instance still holds, and which of latencyd's threads stopped.
    pub fn check(&mut self) -> Neighbours {
        let instance = match self.instance.check() {
            Check::Intact => None,
            Check::Repaired(what) => Some(format!("set back: {what}")),
            Check::Broken(why) | Check::Paused(why) => Some(why),
        };
        let users = tracefs::tracer_users(&self.root, &SHARED_TRACERS, Some(&self.instance.name()));
        let workload = self.tend_workload(users.is_empty());
        Neighbours {
            users,
            retuned: self.osnoise.changed_behind(),
            instance,
            workload,
        }
    }

    /// Notices latencyd's threads gone (the kernel kills them when
    /// another program writes `osnoise/cpus` or `options`) and starts them
    /// again `RESTART_AFTER` later, once nobody else runs timerlat or
    /// osnoise (`alone`); says each step.
    fn tend_workload(&mut self, alone: bool) -> Vec<String> {
        let mut said = Vec::new();
        let Some(spec) = &self.user_spec else {
            return said;
        };
        if let Some(why) = self.workload.as_mut().and_then(Workload::ended) {
            said.push(why);
            self.workload = None;
            self.restart_at = Some(Instant::now() + RESTART_AFTER);
        }
        let due = self.restart_at.is_some_and(|at| Instant::now() >= at);
        if self.workload.is_none() && due && alone {
            match Workload::start(&spec.helper, &self.root, &spec.cpus, spec.priority) {
                Ok(workload) => {
                    self.workload = Some(workload);
                    self.restart_at = None;
                    said.push("latencyd's timerlat threads started again".to_string());
                }
                Err(why) => {
                    self.restart_at = Some(Instant::now() + RESTART_AFTER);
                    said.push(format!(
                        "latencyd's timerlat threads could not start again (tried again in {} s): {why}",
                        RESTART_AFTER.as_secs()
                    ));
                }
            }
        }
        said
    }

    /// The instance's name under `instances/`.
    pub fn instance_name(&self) -> String {
        self.instance.name()
    }

    /// Stops the threads and recording, hands what the buffers still hold
    /// to `each`, stops the tracer and sets the `osnoise/` settings back;
    /// says what could not be done.
    pub fn stop(&mut self, each: impl FnMut(usize, TimerlatSample, u64)) -> Vec<String> {
        if self.stopped {
            return Vec::new();
        }
        self.stopped = true;
        let mut notes = Vec::new();
        // The threads first: with their files closed, the tracer can stop
        // without the kernel killing them.
        if let Some(mut workload) = self.workload.take() {
            notes.extend(workload.stop());
        }
        if let Err(err) = self.instance.write("tracing_on", "0") {
            notes.push(err);
        }
        let last = self.drain(each);
        notes.extend(last.errors);
        // The tracer can be changed only once its buffers are closed.
        self.readers.clear();
        if let Err(err) = self.instance.write("current_tracer", "nop") {
            notes.push(err);
        }
        notes.extend(self.osnoise.restore());
        notes
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.stop(|_, _, _| {});
    }
}

/// What one `drain` read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Drained {
    pub missed: bool,
    pub errors: Vec<String>,
}

/// "instance timerlat_hist (timerlat)", "the top-level buffer (osnoise)".
pub fn describe_users(users: &[(String, String)]) -> String {
    users
        .iter()
        .map(|(name, tracer)| match name.as_str() {
            "top" => format!("the top-level buffer ({tracer})"),
            name => format!("instance {name} ({tracer})"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_without_timerlat_says_so_and_why() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("available_tracers"), "blk function nop\n").unwrap();
        let caps = capabilities(dir.path());
        assert!(
            !caps[0].available && caps[0].detail.contains("CONFIG_TIMERLAT_TRACER"),
            "{caps:?}"
        );
        assert!(
            !caps[1].available && caps[1].detail.contains("6.5"),
            "{caps:?}"
        );
        assert!(!caps[2].available, "{caps:?}");
        fs::create_dir_all(dir.path().join("instances")).unwrap();
        let err = Session::start(&Spec::new(dir.path(), vec![0]))
            .err()
            .unwrap();
        assert!(err.contains("no timerlat tracer"), "{err}");
    }

    #[test]
    fn every_captured_kernel_offers_what_it_has() {
        for (kernel, has) in [
            ("6.1-amd64", false),
            ("6.1-rt-amd64", true),
            ("6.1-rt-arm64", true),
            ("6.12-rt-amd64", true),
            ("6.12-rt-arm64", true),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let from = format!(
                "{}/tests/data/kernels/{kernel}/tracefs/available_tracers",
                env!("CARGO_MANIFEST_DIR")
            );
            fs::copy(&from, dir.path().join("available_tracers")).unwrap();
            let caps = capabilities(dir.path());
            assert_eq!(
                (caps[0].available, caps[2].available),
                (has, has),
                "{kernel}: {caps:?}"
            );
        }
    }

    #[test]
    fn it_never_starts_beside_another_user_of_the_tracer() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("available_tracers"),
            "timerlat osnoise hwlat nop\n",
        )
        .unwrap();
        fs::create_dir_all(dir.path().join("instances/timerlat_hist")).unwrap();
        fs::write(
            dir.path().join("instances/timerlat_hist/current_tracer"),
            "timerlat\n",
        )
        .unwrap();
        let err = Session::start(&Spec::new(dir.path(), vec![0]))
            .err()
            .unwrap();
        assert!(
            err.contains("cannot start beside instance timerlat_hist (timerlat)"),
            "{err}"
        );
    }
}
