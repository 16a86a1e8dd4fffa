//! latencyd's timerlat threads, in a process of their own.
//!
//! Where the kernel has `osnoise/per_cpu/cpuN/timerlat_fd`, the workload
//! timerlat measures is a user thread per CPU, pinned and SCHED_FIFO,
//! blocked in `read` on its CPU's file. The kernel ends such a workload
//! with SIGKILL whenever any program writes `osnoise/cpus` or
//! `osnoise/options` while it runs (`stop_kthread` in
//! kernel/trace/trace_osnoise.c), as rtla does when it starts, and SIGKILL
//! takes the whole process. So the threads live in a child,
//! `latencyd timerlat-workload` (`/proc/self/exe`): the kernel's kill ends
//! it, never latencyd, which says so. The child stops when its standard
//! input closes: when latencyd asks, or when latencyd is gone.

use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::rt::sys::{self, Policy};

/// How long the child has to open its files and say so.
const READY_WAIT: Duration = Duration::from_secs(5);
/// How long the child has to end once asked (a thread sees the request
/// at its next period, at most 1 s away).
const STOP_WAIT: Duration = Duration::from_secs(3);

/// The running child.
pub struct Workload {
    child: Child,
    stdin: Option<ChildStdin>,
    ended: Option<String>,
}

impl Workload {
    /// Starts `program timerlat-workload` for `cpus` and waits until every
    /// thread has its file open; the error says why one could not.
    pub fn start(
        program: &Path,
        tracefs: &Path,
        cpus: &[usize],
        priority: i32,
    ) -> Result<Workload, String> {
        let mut child = Command::new(program)
            .arg("timerlat-workload")
            .arg("--cpus")
            .arg(crate::cpulist::format_cpu_list(cpus))
            .arg("--priority")
            .arg(priority.to_string())
            .arg("--tracefs")
            .arg(tracefs)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|err| {
                format!(
                    "cannot start {} timerlat-workload: {err}",
                    program.display()
                )
            })?;
        let stdout = child.stdout.take();
        let (said_tx, said_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            if let Some(out) = stdout {
                let _ = BufReader::new(out).read_line(&mut line);
            }
            let _ = said_tx.send(line);
        });
        let said = said_rx.recv_timeout(READY_WAIT).unwrap_or_default();
        let stdin = child.stdin.take();
        let mut workload = Workload {
            child,
            stdin,
            ended: None,
        };
        match said.trim() {
            "ready" => Ok(workload),
            "" => {
                let why = workload
                    .stop()
                    .unwrap_or_else(|| "it said nothing".to_string());
                Err(format!("latencyd's timerlat threads did not start: {why}"))
            }
            why => {
                let _ = workload.stop();
                Err(why.trim_start_matches("error: ").to_string())
            }
        }
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Why the child ended, once it has, said once; None while it runs.
    pub fn ended(&mut self) -> Option<String> {
        if self.ended.is_some() {
            return None;
        }
        let status = self.child.try_wait().ok()??;
        let why = describe(status);
        self.ended = Some(why.clone());
        Some(why)
    }

    /// Asks the child to stop and waits for it (killing it past
    /// `STOP_WAIT`); says how it ended unless as asked.
    pub fn stop(&mut self) -> Option<String> {
        self.stdin = None;
        let deadline = Instant::now() + STOP_WAIT;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) if status.success() => return None,
                Ok(Some(status)) => {
                    return Some(self.ended.clone().unwrap_or_else(|| describe(status)));
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return Some(format!(
                        "latencyd's timerlat threads did not stop within {} s and were killed",
                        STOP_WAIT.as_secs()
                    ));
                }
            }
        }
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.stop();
        }
    }
}

/// How the child ended, in words.
fn describe(status: std::process::ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (_, Some(9)) => "the kernel ended latencyd's timerlat threads (SIGKILL): another \
                         program wrote osnoise/cpus or osnoise/options while they ran, as \
                         rtla does when it starts; the kernel stops a user-space timerlat \
                         workload that way"
            .to_string(),
        (_, Some(signal)) => format!("latencyd's timerlat threads were killed by signal {signal}"),
        (Some(3), _) => "a timerlat thread could not read its CPU's timerlat_fd (the CPU went \
                         offline, the thread was moved, or the tracer stopped); latencyd's \
                         timerlat threads ended"
            .to_string(),
        (Some(code), _) => format!("latencyd's timerlat threads exited with status {code}"),
        _ => "latencyd's timerlat threads ended".to_string(),
    }
}

/// `latencyd timerlat-workload`: one thread per CPU of `cpus` on its
/// `timerlat_fd`; prints `ready` once all have it open (or `error: why`,
/// exit 1), and ends when standard input closes.
pub fn main(cpus: &[usize], priority: i32, tracefs: &Path) -> ExitCode {
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();
    let mut threads = Vec::new();
    for &cpu in cpus {
        let path: PathBuf = tracefs.join(format!("osnoise/per_cpu/cpu{cpu}/timerlat_fd"));
        let flag = Arc::clone(&stop);
        let ready = ready_tx.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("timerlat-cpu{cpu}"))
            .spawn(move || thread(cpu, priority, &path, &flag, &ready));
        match spawned {
            Ok(handle) => threads.push(handle),
            Err(err) => return fail(&stop, threads, format!("cannot start a thread: {err}")),
        }
    }
    drop(ready_tx);
    for _ in cpus {
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(why)) => return fail(&stop, threads, why),
            Err(_) => {
                return fail(
                    &stop,
                    threads,
                    "a thread ended before it started".to_string(),
                );
            }
        }
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "ready").and_then(|()| out.flush());
    let mut buf = [0u8; 64];
    let mut stdin = std::io::stdin().lock();
    loop {
        match stdin.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(err) if err.kind() == ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut failed = false;
    for handle in threads {
        if let Ok(Err(why)) = handle.join() {
            eprintln!("latencyd timerlat-workload: {why}");
            failed = true;
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn fail(
    stop: &AtomicBool,
    threads: Vec<std::thread::JoinHandle<Result<(), String>>>,
    why: String,
) -> ExitCode {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "error: {why}").and_then(|()| out.flush());
    stop.store(true, Ordering::Relaxed);
    drop(threads);
    ExitCode::FAILURE
}

/// One thread: pinned to `cpu`, SCHED_FIFO at `priority`, each `read` of
/// `timerlat_fd` one period.
fn thread(
    cpu: usize,
    priority: i32,
    path: &Path,
    stop: &AtomicBool,
    ready: &mpsc::Sender<Result<(), String>>,
) -> Result<(), String> {
    // Pinned before the open (the kernel lets only a thread on that one
    // CPU open it), the policy after.
    let setup = || -> Result<File, String> {
        sys::pin_current_thread(cpu)
            .map_err(|err| format!("cannot pin the timerlat thread to CPU {cpu}: {err}"))?;
        let file =
            File::open(path).map_err(|err| format!("cannot open {}: {err}", path.display()))?;
        sys::set_current_thread_policy(Policy::Fifo, priority).map_err(|err| {
            format!("cannot make the timerlat thread of CPU {cpu} SCHED_FIFO {priority}: {err}")
        })?;
        Ok(file)
    };
    let mut file = match setup() {
        Ok(file) => {
            let _ = ready.send(Ok(()));
            file
        }
        Err(why) => {
            let _ = ready.send(Err(why.clone()));
            return Err(why);
        }
    };
    let mut buf = [0u8; 8];
    while !stop.load(Ordering::Relaxed) {
        match file.read(&mut buf) {
            Ok(_) => {}
            Err(err) if err.kind() == ErrorKind::Interrupted => {}
            Err(err) => {
                // The CPU went offline, the thread was moved off it, or the
                // tracer stopped: the whole child ends, so that latencyd
                // sees it (`Workload::ended`), says it and starts the
                // threads again, rather than one CPU going unmeasured.
                eprintln!(
                    "latencyd timerlat-workload: reading {} failed: {err}",
                    path.display()
                );
                std::process::exit(3);
            }
        }
    }
    Ok(())
}
