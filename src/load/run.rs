//! A running load: a guard process leading the load's process group, the
//! generators inside it, and a supervisor thread that restarts hackbench
//! as it ends (as rteval does), notices generators that exit early, and
//! stops everything at the end.
//!
//! Nothing outlives latencyd: the guard (`latencyd load-guard`) holds the
//! read end of a pipe whose only write end is latencyd's; when latencyd
//! closes it — at the end of the load, or by dying, SIGKILL included —
//! the guard removes the load's scratch directory and kills the whole
//! group. Generators start in that group, on the load's CPUs, under
//! `SCHED_OTHER`.

use std::fs;
use std::io::{self, PipeWriter};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use super::output::{exit_text, hackbench_time, read_output, read_stress_ng_metrics};
use super::profile::{Generator, HACKBENCH_FDS, Kind, Profile};
use super::report::{GeneratorReport, LoadReport, Throughput};
use crate::load::sys::{
    SIGINT, SIGKILL, SIGSTOP, children_of, group_exists, group_members, prepare_child,
    signal_group, signal_process,
};

/// How long stress-ng has to stop on SIGINT and write its metrics.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// How long the group has to disappear once killed (its grandchildren are
/// reaped by init).
const GONE_WAIT: Duration = Duration::from_secs(5);
/// The wait before a generator that failed is started again.
const RETRY_AFTER: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(50);

/// What to run and how: the profile, its CPUs, and the program that
/// guards the group (`/proc/self/exe load-guard`; tests name the binary).
#[derive(Debug, Clone)]
pub struct LoadSpec {
    pub profile: Profile,
    pub cpus: Vec<usize>,
    pub guard_program: PathBuf,
}

impl LoadSpec {
    pub fn new(profile: Profile, cpus: Vec<usize>) -> LoadSpec {
        LoadSpec {
            profile,
            cpus,
            guard_program: PathBuf::from("/proc/self/exe"),
        }
    }
}

struct Shared {
    stop: AtomicBool,
    report: Mutex<LoadReport>,
    events: Mutex<Vec<String>>,
}

/// A load that is running; `stop` ends it and returns its report.
pub struct RunningLoad {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    group: i32,
}

static SCRATCH_SEQ: AtomicU64 = AtomicU64::new(0);

impl RunningLoad {
    /// Starts the guard and the generators. Fails only when the guard or
    /// the scratch directory cannot be had; a generator that cannot start
    /// is an event (`take_events`), counted in its report, and retried.
    pub fn start(spec: LoadSpec) -> io::Result<RunningLoad> {
        let scratch = std::env::temp_dir().join(format!(
            "latencyd-load-{}-{}",
            std::process::id(),
            SCRATCH_SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        {
            use std::os::unix::fs::DirBuilderExt;
            fs::DirBuilder::new()
                .mode(0o700)
                .create(&scratch)
                .map_err(|err| {
                    io::Error::new(
                        err.kind(),
                        format!("cannot create {}: {err}", scratch.display()),
                    )
                })?;
        }
        let (reader, writer) = io::pipe()?;
        let mut guard_cmd = Command::new(&spec.guard_program);
        guard_cmd
            .arg("load-guard")
            .arg(&scratch)
            .stdin(reader)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        prepare_child(&mut guard_cmd, 0, &spec.cpus)?;
        let guard = match guard_cmd.spawn() {
            Ok(child) => child,
            Err(err) => {
                let _ = fs::remove_dir_all(&scratch);
                return Err(io::Error::new(
                    err.kind(),
                    format!(
                        "cannot start the load's guard ({} load-guard): {err}",
                        spec.guard_program.display()
                    ),
                ));
            }
        };
        let group = guard.id() as i32;
        let topology = crate::host::topology::read(Path::new("/"), &spec.cpus);
        let node_of = |cpu: usize| {
            topology
                .iter()
                .find(|t| t.cpu == cpu)
                .and_then(|t| t.node)
                .map_or(-1, |node| node as i32)
        };
        let generators = spec.profile.generators(&spec.cpus, node_of, &scratch);
        let report = LoadReport {
            profile: spec.profile,
            cpus: spec.cpus.clone(),
            started: SystemTime::now(),
            ended: None,
            generators: generators.iter().map(GeneratorReport::new).collect(),
            leftover: Vec::new(),
        };
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            report: Mutex::new(report),
            events: Mutex::new(Vec::new()),
        });
        let mut supervisor = Supervisor {
            shared: Arc::clone(&shared),
            group,
            guard,
            writer: Some(writer),
            scratch,
            running: generators
                .into_iter()
                .map(|generator| Running {
                    generator,
                    child: None,
                    retry_at: Some(Instant::now()),
                    stress_ops: Vec::new(),
                    hackbench_seconds: 0.0,
                    hackbench_runs: 0,
                })
                .collect(),
        };
        // The generators start before `start` returns, so that a caller
        // sees them running (and their start-up failures) at once.
        supervisor.start_due();
        let thread = std::thread::Builder::new()
            .name("latencyd-load".to_string())
            .spawn(move || supervisor.run())?;
        Ok(RunningLoad {
            shared,
            thread: Some(thread),
            group,
        })
    }

    /// The load's process group (its guard's process ID).
    pub fn group(&self) -> i32 {
        self.group
    }

    /// What happened since the last call: generators that failed to start
    /// or exited early, one line each.
    pub fn take_events(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.shared.events))
    }

    /// The report so far (throughput of the completed hackbench runs;
    /// stress-ng's comes at the end).
    pub fn snapshot(&self) -> LoadReport {
        lock(&self.shared.report).clone()
    }

    /// Stops every generator, waits for the group to be gone, and returns
    /// the load's report.
    pub fn stop(mut self) -> LoadReport {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
        lock(&self.shared.report).clone()
    }
}

impl Drop for RunningLoad {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

struct Running {
    generator: Generator,
    child: Option<Child>,
    /// When to start it (again); None while it runs or once stopping.
    retry_at: Option<Instant>,
    /// stress-ng: (stressor, bogo-ops, seconds) summed over its runs.
    stress_ops: Vec<(String, f64, f64)>,
    hackbench_seconds: f64,
    hackbench_runs: u64,
}

struct Supervisor {
    shared: Arc<Shared>,
    group: i32,
    guard: Child,
    writer: Option<PipeWriter>,
    scratch: PathBuf,
    running: Vec<Running>,
}

impl Supervisor {
    fn run(mut self) {
        while !self.shared.stop.load(Ordering::Relaxed) {
            self.reap();
            self.start_due();
            std::thread::park_timeout(POLL);
        }
        self.finish();
    }

    fn event(&self, line: String) {
        lock(&self.shared.events).push(line);
    }

    /// A generator's failure: counted in its report, kept as its last,
    /// and said as an event.
    fn failed(&self, idx: usize, line: String) {
        self.publish(idx, |r| {
            r.failures += 1;
            r.last_failure = Some(line.clone());
        });
        self.event(line);
    }

    fn publish(&self, idx: usize, f: impl FnOnce(&mut GeneratorReport)) {
        let mut report = lock(&self.shared.report);
        if let Some(generator) = report.generators.get_mut(idx) {
            f(generator);
        }
    }

    fn start_due(&mut self) {
        let now = Instant::now();
        for idx in 0..self.running.len() {
            let due = self.running[idx].retry_at.is_some_and(|at| at <= now);
            if !due || self.running[idx].child.is_some() {
                continue;
            }
            let generator = &self.running[idx].generator;
            match generator.spawn(self.group, &self.scratch) {
                Ok(child) => {
                    self.running[idx].child = Some(child);
                    self.running[idx].retry_at = None;
                    self.publish(idx, |r| {
                        r.starts += 1;
                        r.running = true;
                    });
                }
                Err(err) => {
                    let line = format!(
                        "load generator {} could not start ({}): {err}; trying again in {} s",
                        generator.name,
                        generator.command_line(),
                        RETRY_AFTER.as_secs()
                    );
                    self.running[idx].retry_at = Some(now + RETRY_AFTER);
                    self.failed(idx, line);
                }
            }
        }
    }

    /// Handles every generator that exited: hackbench's run counted and
    /// started again, anything else an early exit (counted, retried).
    fn reap(&mut self) {
        for idx in 0..self.running.len() {
            let status = match self.running[idx].child.as_mut().map(Child::try_wait) {
                Some(Ok(Some(status))) => status,
                _ => continue,
            };
            self.running[idx].child = None;
            self.absorb(idx, status, false);
        }
    }

    /// Takes a finished run's results from its output file (a file, not a
    /// pipe: a child it left behind cannot make the read wait);
    /// `stopping`: the exit was asked for.
    fn absorb(&mut self, idx: usize, status: ExitStatus, stopping: bool) {
        let output = read_output(&self.running[idx].generator.output_path(&self.scratch));
        let run = &mut self.running[idx];
        let failure = match &run.generator.kind {
            Kind::Hackbench { .. } => match hackbench_time(&output) {
                Some(seconds) if status.success() => {
                    run.hackbench_runs += 1;
                    run.hackbench_seconds += seconds;
                    run.retry_at = Some(Instant::now());
                    None
                }
                _ if stopping => None,
                _ => Some(exit_text(status, &output)),
            },
            Kind::StressNg { yaml } => {
                let metrics = read_stress_ng_metrics(yaml);
                let unread = match metrics {
                    Ok(metrics) => {
                        for (stressor, ops, seconds) in metrics {
                            match run.stress_ops.iter_mut().find(|(s, _, _)| *s == stressor) {
                                Some(entry) => {
                                    entry.1 += ops;
                                    entry.2 += seconds;
                                }
                                None => run.stress_ops.push((stressor, ops, seconds)),
                            }
                        }
                        None
                    }
                    Err(why) => Some(why),
                };
                // Asked to stop, it must have written its metrics; any
                // other exit is early, whatever it wrote.
                if stopping {
                    unread
                } else {
                    Some(exit_text(status, &output))
                }
            }
        };
        let name = run.generator.name.clone();
        if let Some(why) = failure {
            let line = if stopping {
                format!("load generator {name}: {why}")
            } else {
                run.retry_at = Some(Instant::now() + RETRY_AFTER);
                format!(
                    "load generator {name} exited early: {why}; starting it again in {} s",
                    RETRY_AFTER.as_secs()
                )
            };
            self.failed(idx, line);
        }
        let throughput = throughput_of(&self.running[idx]);
        let runs = self.running[idx].hackbench_runs;
        self.publish(idx, |r| {
            r.running = false;
            r.completed_runs = runs;
            r.throughput = throughput;
        });
    }

    fn finish(mut self) {
        for run in &mut self.running {
            run.retry_at = None;
        }
        // hackbench has nothing to say about a run cut short: it goes
        // first, its processes with it, so that they leave the CPUs to
        // stress-ng, which stops on SIGINT and writes its metrics.
        for run in &mut self.running {
            if let (Kind::Hackbench { .. }, Some(child)) = (&run.generator.kind, &mut run.child) {
                let pid = child.id() as i32;
                let _ = signal_process(pid, SIGSTOP);
                for worker in children_of(pid) {
                    let _ = signal_process(worker, SIGKILL);
                }
                let _ = child.kill();
                let _ = child.wait();
                run.child = None;
            }
        }
        let stress: Vec<usize> = (0..self.running.len())
            .filter(|&i| {
                matches!(self.running[i].generator.kind, Kind::StressNg { .. })
                    && self.running[i].child.is_some()
            })
            .collect();
        for &idx in &stress {
            if let Some(child) = &self.running[idx].child {
                let _ = signal_process(child.id() as i32, SIGINT);
            }
        }
        let deadline = Instant::now() + STOP_GRACE;
        for &idx in &stress {
            while let Some(child) = self.running[idx].child.as_mut() {
                match child.try_wait() {
                    Ok(Some(status)) => {
                        self.running[idx].child = None;
                        self.absorb(idx, status, true);
                        break;
                    }
                    Ok(None) if Instant::now() < deadline => std::thread::sleep(POLL),
                    _ => {
                        let name = self.running[idx].generator.name.clone();
                        let line = format!(
                            "load generator {name} did not stop within {} s of SIGINT; killed",
                            STOP_GRACE.as_secs()
                        );
                        self.failed(idx, line);
                        break;
                    }
                }
            }
        }
        // Everything left — hackbench and its children, the guard — goes
        // at once; the guard would do the same on the pipe's closing.
        let _ = signal_group(self.group, SIGKILL);
        for run in &mut self.running {
            if let Some(mut child) = run.child.take() {
                let _ = child.wait();
            }
        }
        drop(self.writer.take());
        let _ = self.guard.wait();
        let deadline = Instant::now() + GONE_WAIT;
        while group_exists(self.group) && Instant::now() < deadline {
            std::thread::sleep(POLL);
        }
        let leftover = if group_exists(self.group) {
            group_members(self.group)
        } else {
            Vec::new()
        };
        let _ = fs::remove_dir_all(&self.scratch);
        for idx in 0..self.running.len() {
            let throughput = throughput_of(&self.running[idx]);
            let runs = self.running[idx].hackbench_runs;
            self.publish(idx, |r| {
                r.running = false;
                r.completed_runs = runs;
                r.throughput = throughput;
            });
        }
        let mut report = lock(&self.shared.report);
        report.ended = Some(SystemTime::now());
        report.leftover = leftover;
    }
}

fn throughput_of(run: &Running) -> Vec<Throughput> {
    match &run.generator.kind {
        Kind::Hackbench { groups, loops } => {
            if run.hackbench_runs == 0 {
                return Vec::new();
            }
            let per_run = (*groups as u64 * HACKBENCH_FDS * HACKBENCH_FDS * loops) as f64;
            vec![Throughput {
                what: "messages".to_string(),
                count: per_run * run.hackbench_runs as f64,
                seconds: run.hackbench_seconds,
                unit: "messages/s",
            }]
        }
        Kind::StressNg { .. } => run
            .stress_ops
            .iter()
            .map(|(stressor, ops, seconds)| Throughput {
                what: stressor.clone(),
                count: *ops,
                seconds: *seconds,
                unit: "bogo-ops/s",
            })
            .collect(),
    }
}
