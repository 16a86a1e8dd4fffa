//! Helpers shared by the integration tests: running the real binary,
//! knowing whether this user may use real-time scheduling, reporting what
//! was skipped, and a parser for cyclictest's text output written the way
//! users' scripts read it.

#![allow(dead_code)]

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Output};

pub mod cyclictest;
pub mod daemon;
pub mod measure;
pub mod oslat;
pub mod plot;
pub mod prometheus;
pub mod protobuf;
pub mod qualify;
pub mod record;
pub mod stall;
pub mod victoria;

/// The checkout's root (where Cargo.toml is).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `program` with `args` in `dir`: whether it succeeded, and what it
/// printed (stdout, then stderr).
pub fn run_in(dir: &std::path::Path, program: &str, args: &[&str]) -> (bool, String) {
    let output = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    let said = format!("{}{}", stdout_of(&output), stderr_of(&output));
    (output.status.success(), said)
}

/// The binary under test.
pub fn latencyd() -> Command {
    Command::new(env!("CARGO_BIN_EXE_latencyd"))
}

/// Root can lock memory and use SCHED_FIFO here; anyone else is tested on
/// the non-real-time path.
pub fn privileged() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The tests of one binary that would disturb each other (a spinner, a
/// busy thread or a whole harness on every CPU, or one tracefs instance
/// name) take turns: each holds this while it runs. Cargo runs a binary's
/// tests on several threads; a test that panicked lets the next one go.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Flags that let a `measure` run succeed for this user.
pub fn run_flags() -> Vec<&'static str> {
    if privileged() {
        vec![]
    } else {
        vec!["--allow-non-rt", "--default-system"]
    }
}

/// Fails the test unless `tool` runs (`tool arg` succeeds), naming the
/// Debian package that provides it: a missing tool is an installation
/// problem to fix, not a test to skip.
pub fn require_tool(tool: &str, arg: &str, package: &str) {
    let found = Command::new(tool).arg(arg).output();
    assert!(
        found.is_ok_and(|o| o.status.success()),
        "{tool} is missing: install Debian's {package} package (.ci/run does)"
    );
}

/// Says loudly, past the test harness's output capture, what a test did
/// not cover.
pub fn report_skip(test: &str, reason: &str) {
    // One write: stderr is unbuffered, and a formatted write goes out
    // piece by piece, so the harness's "ok" could land inside the line
    // and the gate's summary could not read it.
    let line = format!("\n*** SKIPPED PART of {test}: {reason} ***\n\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// Whether plots can be drawn here (a TrueType font such as Debian's
/// fonts-dejavu-core, which scripts/test installs); when not, says loudly
/// that `test` did not check its plots.
pub fn font_or_skip(test: &str) -> bool {
    let found = latencyd::plot::system_font().is_some();
    if !found {
        report_skip(
            test,
            "no TrueType font (install fonts-dejavu-core): the plots were not drawn",
        );
    }
    found
}

pub fn stdout_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Runs a command and fails with its output if it did not exit 0.
pub fn run_ok(cmd: &mut Command) -> Output {
    let output = cmd.output().expect("the command starts");
    assert!(
        output.status.success(),
        "{cmd:?} failed with {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        stdout_of(&output),
        stderr_of(&output)
    );
    output
}

/// Where checked-in test data lives.
pub fn data_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// Number of CPUs `measure` uses by default: online and in our affinity.
pub fn usable_cpus() -> usize {
    latencyd::host::HostInfo::detect().usable_cpus.len()
}

/// The command that runs `latencyd` without its privileges: directly
/// when the tests already run unprivileged, else as nobody through setpriv
/// with a default login's limits (RLIMIT_RTPRIO 0, RLIMIT_MEMLOCK 8 MiB) on
/// a copy of the binary that nobody may execute. With `keep_sys_nice`,
/// CAP_SYS_NICE is kept (real-time priority allowed, memory locking not);
/// that needs root, so it is `None` when the tests run unprivileged.
pub fn unprivileged_latencyd(dir: &std::path::Path, keep_sys_nice: bool) -> Option<Command> {
    if !privileged() {
        return (!keep_sys_nice).then(latencyd);
    }
    use std::os::unix::fs::PermissionsExt;
    let copy = dir.join("latencyd");
    std::fs::copy(env!("CARGO_BIN_EXE_latencyd"), &copy).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    let caps = if keep_sys_nice {
        "-all,+sys_nice"
    } else {
        "-all"
    };
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(format!("--inh-caps={caps}"))
        .arg(format!("--ambient-caps={caps}"))
        .arg(format!("--bounding-set={caps}"))
        .args(["prlimit", "--rtprio=0", "--memlock=8388608", "--"])
        .arg(copy);
    Some(cmd)
}

/// The bytes a `GET path` over a new connection brought back, whole
/// (empty when the server closed it without answering).
#[allow(dead_code)]
pub fn http_get_raw(addr: std::net::SocketAddr, path: &str) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut stream =
        std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(5))?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    Ok(response)
}

/// A minimal HTTP/1.1 GET against the daemon: (status, body).
pub fn http_get(addr: std::net::SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    Ok(parse_response(&http_get_raw(addr, path)?))
}

/// A response's status (0 when there is none) and body, dechunked.
pub fn parse_response(response: &[u8]) -> (u16, String) {
    let text = String::from_utf8_lossy(response).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
    });
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    (status, body)
}

/// Decodes an HTTP/1.1 chunked body (size line in hex, data, CRLF, ...).
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size_line, rest)) = body.split_once("\r\n") {
        let size =
            usize::from_str_radix(size_line.split(';').next().unwrap().trim(), 16).unwrap_or(0);
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// Percent-encodes a query-string value.
pub fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A running daemon, killed when dropped. Its stderr is collected; the
/// listening address is taken from its start-up log line.
pub struct Daemon {
    pub child: std::process::Child,
    pub addr: std::net::SocketAddr,
    pub log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Daemon {
    /// `latencyd run` on the test configuration of [`daemon_config`] with
    /// `export` added to its `[export]` section, written into `dir`.
    pub fn start_with_export(dir: &std::path::Path, export: &str) -> Daemon {
        Daemon::start(
            latencyd()
                .args(["run", "--config"])
                .arg(daemon_config(dir, "", export, "")),
        )
    }

    /// Starts `cmd` (a `latencyd run …` command) and waits until it serves.
    pub fn start(cmd: &mut Command) -> Daemon {
        use std::io::BufRead;
        let mut child = cmd
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("latencyd starts");
        let stderr = child.stderr.take().unwrap();
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let sink = std::sync::Arc::clone(&log);
        let reader = std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                // The address ends where address characters do (in JSON
                // logs a quote follows it).
                let addr: Option<String> = line.split("serving http").nth(1).map(|rest| {
                    let rest = rest.strip_prefix('s').unwrap_or(rest);
                    rest.trim_start_matches("://")
                        .chars()
                        .take_while(|c| c.is_ascii_hexdigit() || ".:[]".contains(*c))
                        .collect()
                });
                // Stored before anyone is told the daemon serves.
                sink.lock().unwrap().push(line);
                if let Some(addr) = addr {
                    let _ = tx.send(addr);
                }
            }
        });
        let addr = match rx.recv_timeout(std::time::Duration::from_secs(15)) {
            Ok(addr) => addr.parse().expect("a socket address"),
            Err(_) => {
                let _ = child.kill();
                let status = child.wait().unwrap();
                panic!(
                    "latencyd did not start ({status}): {:?}",
                    log.lock().unwrap()
                );
            }
        };
        Daemon {
            child,
            addr,
            log,
            reader: Some(reader),
        }
    }

    /// Waits for the daemon to exit and returns its status and whole log.
    pub fn wait_with_log(&mut self) -> (std::process::ExitStatus, Vec<String>) {
        let status = self.child.wait().unwrap();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        (status, self.log.lock().unwrap().clone())
    }

    pub fn get(&self, path: &str) -> (u16, String) {
        http_get(self.addr, path).unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, signal: i32) {
        // SAFETY: kill with our child's pid and a valid signal.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }

    pub fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes a configuration file for a test daemon on a free loopback port
/// with no warm-up (so samples arrive at once), plus `measure` and
/// `export` keys and further `sections` (TOML text). Without privileges the
/// daemon is allowed to run degraded.
pub fn daemon_config(
    dir: &std::path::Path,
    measure: &str,
    export: &str,
    sections: &str,
) -> PathBuf {
    let realtime = if privileged() {
        ""
    } else {
        "[realtime]\nrequired = false\n"
    };
    let path = dir.join("latencyd.toml");
    let text = format!(
        "[measure]\nwarmup = \"0s\"\n{measure}\n[export]\nlisten = \"127.0.0.1:0\"\n{export}\n{realtime}{sections}"
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// The value of an unlabelled or labelled sample line in a scrape.
pub fn metric_value(scrape: &str, series: &str) -> Option<f64> {
    scrape.lines().find_map(|line| {
        line.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// Compares `actual` with `tests/data/expected/NAME`; with UPDATE_EXPECT
/// set, writes it there instead (review the diff before committing).
pub fn check_expected(name: &str, actual: &str) {
    let path = data_path(&format!("expected/{name}"));
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run with UPDATE_EXPECT=1", path.display()));
    assert!(
        expected == actual,
        "{name} differs from {}\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}

/// A PREEMPT_RT host with every privilege, for renderers fed synthetic
/// data (the expected output under tests/data/expected/ shows it).
/// A record entry of `cpu` over `length_ns` from `start_ns`: its
/// sampler's, or timerlat's `context` when given.
pub fn record_entry(
    cpu: usize,
    start_ns: u64,
    length_ns: u64,
    stats: latencyd::stats::LatencyStats,
    timerlat: Option<&str>,
) -> latencyd::record::Entry {
    latencyd::record::Entry {
        cpu,
        start_ns,
        length_ns,
        stats,
        fingerprint: None,
        load: None,
        hwnoise: false,
        timerlat: timerlat.map(str::to_string),
    }
}

pub fn synthetic_host(usable_cpus: &[usize], online_cpus: &[usize]) -> latencyd::host::HostInfo {
    latencyd::host::HostInfo {
        uname: latencyd::rt::sys::Uname {
            sysname: "Linux".into(),
            nodename: "rt-host-7".into(),
            release: "6.12.0-rt5".into(),
            version: "#1 SMP PREEMPT_RT".into(),
            machine: "x86_64".into(),
        },
        preempt_rt: true,
        usable_cpus: usable_cpus.to_vec(),
        allowed_cpus: online_cpus.to_vec(),
        online_cpus: Some(online_cpus.to_vec()),
        cpuset_cpus: None,
        isolated_cpus: vec![],
        cap_sys_nice: true,
        cap_ipc_lock: true,
        rtprio_limit: Some(0),
        memlock_limit: None,
        sched_rt_runtime_us: Some(-1),
        clock_resolution_ns: Some(1),
    }
}

/// How many times a process's main thread (the daemon's runtime thread)
/// has switched out of its own accord, sampled over `span`, per second.
pub fn runtime_thread_wakeups_per_second(pid: u32, span: std::time::Duration) -> f64 {
    let switches = || {
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/status"))
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .unwrap()
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    let before = switches();
    let started = std::time::Instant::now();
    std::thread::sleep(span);
    (switches() - before) as f64 / started.elapsed().as_secs_f64()
}

/// Polls `ready` every `poll` until it holds; fails the test, naming
/// `what`, after `timeout`.
pub fn wait_until(
    what: &str,
    poll: std::time::Duration,
    timeout: std::time::Duration,
    mut ready: impl FnMut() -> bool,
) {
    let deadline = std::time::Instant::now() + timeout;
    while !ready() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(poll);
    }
}

/// What every plot must show for `cpus` (as "CPU n" labels).
pub fn check_plot_svg(svg: &str, cpus: &[&str]) {
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
    assert!(
        svg.contains("Latency (logarithmic)") && svg.contains("Number of samples"),
        "axis labels"
    );
    // One outline per CPU (the legend's short samples have two points).
    assert_eq!(polylines_of_series(svg), cpus.len(), "one series per CPU");
    for cpu in cpus {
        let legend = format!("{cpu} (max ");
        assert!(svg.contains(&legend), "legend entry for {cpu}");
    }
    // Each maximum is marked with its value.
    assert_eq!(
        svg_texts(svg)
            .iter()
            .filter(|t| t.starts_with("max "))
            .count(),
        cpus.len(),
        "one max marker per CPU"
    );
}

/// The text of each `<text>` element of an SVG document, trimmed.
pub fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| Some(t.split_once('>')?.1.split('<').next()?.trim().to_string()))
        .collect()
}

/// Series outlines are the polylines of more than two points (a series
/// has at least four: up, across, down; ticks and legend samples have two).
pub fn polylines_of_series(svg: &str) -> usize {
    svg.split("<polyline")
        .skip(1)
        .filter_map(|p| p.split("points=\"").nth(1)?.split('"').next())
        .filter(|points| points.split_whitespace().count() > 2)
        .count()
}

/// Spins for `busy` on `cpu` in a new thread with SCHED_FIFO at
/// `priority` (root only), so that nothing of lower priority runs there
/// meanwhile; returns when the spinning started and when it stopped.
pub fn busy_real_time_thread(
    cpu: usize,
    priority: i32,
    busy: std::time::Duration,
) -> (std::time::Instant, std::time::Instant) {
    std::thread::spawn(move || spin_pinned_fifo(cpu, priority, busy))
        .join()
        .unwrap()
}

/// Pins the calling thread to `cpu`, makes it SCHED_FIFO `priority` and
/// spins for `busy`; returns when the spinning started and ended.
fn spin_pinned_fifo(
    cpu: usize,
    priority: i32,
    busy: std::time::Duration,
) -> (std::time::Instant, std::time::Instant) {
    // SAFETY: a zeroed cpu_set_t with one bit set, and a valid
    // sched_param, for the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set),
            0,
            "cannot pin the busy thread to CPU {cpu}"
        );
        let param = libc::sched_param {
            sched_priority: priority,
        };
        assert_eq!(
            libc::sched_setscheduler(0, libc::SCHED_FIFO, &param),
            0,
            "cannot make the busy thread SCHED_FIFO {priority}"
        );
    }
    let started = std::time::Instant::now();
    while started.elapsed() < busy {
        std::hint::spin_loop();
    }
    (started, std::time::Instant::now())
}

/// As `busy_real_time_thread`, under the thread name `name` (its `comm`);
/// returns the thread's TID.
pub fn busy_named_thread(cpu: usize, priority: i32, busy: std::time::Duration, name: &str) -> i32 {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            spin_pinned_fifo(cpu, priority, busy);
            // SAFETY: gettid has no preconditions.
            unsafe { libc::gettid() }
        })
        .unwrap()
        .join()
        .unwrap()
}

/// Makes sure tracefs is mounted at /sys/kernel/tracing (mounting it as
/// root); `Err` says why it cannot be used.
pub fn ensure_tracefs() -> Result<(), String> {
    let root = std::path::Path::new("/sys/kernel/tracing");
    if root.join("instances").is_dir() {
        return Ok(());
    }
    if !privileged() {
        return Err("tracefs is not mounted and only root may mount it".to_string());
    }
    let status = Command::new("mount")
        .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
        .status()
        .map_err(|e| format!("cannot run mount: {e}"))?;
    if status.success() && root.join("instances").is_dir() {
        Ok(())
    } else {
        Err(format!("mounting tracefs failed ({status})"))
    }
}

/// The rows of the first table under `## {section}` in the project's
/// Markdown file `doc` (relative to the checkout), one `Vec` of trimmed
/// cells per row whose first cell is code (`` | `name` | … ``), with the
/// first cell's backquotes removed. Panics naming what is missing.
#[allow(dead_code)]
pub fn doc_table_rows(doc: &str, section: &str) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(doc))
        .unwrap_or_else(|e| panic!("{doc}: {e}"));
    let body = text
        .split(&format!("\n## {section}\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("{doc} has no \"{section}\" section"));
    let body = body.split("\n## ").next().unwrap();
    body.lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let mut cells: Vec<String> = l
                .trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect();
            cells[0] = cells[0].trim_matches('`').to_string();
            cells
        })
        .collect()
}

/// The synthetic host's fingerprint: facts read at `start_unix_ns`, then
/// one change 60 s later (CPU 2's deepest idle state disabled, an IRQ
/// moved onto it), and the topology of a 2-socket machine with SMT.
pub fn synthetic_fingerprint(start_unix_ns: u64) -> latencyd::instruments::host_facts::HostTrack {
    use latencyd::host::{CpuTopology, Fact, Fingerprint};
    use latencyd::instruments::host_facts::{ChangeSeen, HostTrack};
    let facts = |states: &str, irq: &str| {
        let mut fp = Fingerprint::default();
        for (name, value) in [
            ("kernel.release", "6.12.0-rt5"),
            ("kernel.preempt", "rt"),
            ("kernel.cmdline", "isolcpus=3 nohz_full=3 quiet"),
            ("cpu.model", "Test CPU"),
            ("cpu.microcode", "0xa"),
            ("cpu.smt", "on"),
            ("cpuidle.driver", "intel_idle"),
            ("cpuidle.governor", "menu"),
            ("cpufreq.policy[cpu0]", "performance 800000-3000000 kHz"),
            ("cpufreq.policy[cpu2]", "performance 800000-3000000 kHz"),
            ("pm_qos.cpu_dma_latency_us", "none"),
            ("cpuidle.states[cpu2]", states),
            ("irq[24]", irq),
        ] {
            fp.insert(name, Fact::known(value));
        }
        fp.insert(
            "dmi.bios_version",
            Fact::absent("/sys/class/dmi/id/bios_version: not present"),
        );
        fp
    };
    let topology: Vec<CpuTopology> = (0..4)
        .map(|cpu| CpuTopology {
            cpu,
            package: Some((cpu / 2) as i64),
            core: Some(0),
            node: Some(cpu / 2),
            smt_siblings: Some(format!("{},{}", cpu - cpu % 2, cpu - cpu % 2 + 1)),
        })
        .collect();
    let mut track = HostTrack::new(
        facts("POLL 0us, C1 2us, C6 133us", "eth0 on 0"),
        topology.clone(),
        start_unix_ns,
        1_250_000,
    );
    track.take_read(
        facts("POLL 0us, C1 2us", "eth0 on 2"),
        topology,
        start_unix_ns + 60_000_000_000,
        1_250_000,
        ChangeSeen::Running,
    );
    track
}

/// Headless Chromium (Debian's `chromium`) opening `url` with `extra`
/// flags (`--dump-dom`, `--screenshot=FILE`), its profile in `profile`.
#[allow(dead_code)]
pub fn chromium(profile: &std::path::Path, extra: &[&str], url: &str) -> Output {
    Command::new("chromium")
        .args([
            "--headless",
            // The sandbox needs user namespaces, which containers and root
            // often lack; the page is our own.
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1200,1100",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        // Chromium wants a writable home for its caches, also as nobody.
        .env("HOME", profile)
        .output()
        .expect("chromium runs")
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate,
/// all signed by the CA, as PEM files in `dir`.
pub fn make_pki(dir: &std::path::Path) {
    let openssl = |args: &[&str]| {
        let output = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl runs (Debian's openssl package)");
        assert!(
            output.status.success(),
            "openssl {args:?}: {}",
            stderr_of(&output)
        );
    };
    // The CA, and a self-signed "rogue" client the CA never signed.
    for (name, subject) in [("ca", "/CN=latencyd test CA"), ("rogue", "/CN=prometheus")] {
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.crt"),
            "-days",
            "2",
            "-subj",
            subject,
        ]);
    }
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    for (name, subject) in [("server", "/CN=127.0.0.1"), ("client", "/CN=prometheus")] {
        openssl(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
            "-subj",
            subject,
        ]);
        openssl(&[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &format!("{name}.crt"),
            "-days",
            "2",
            "-extfile",
            &format!("{name}.ext"),
        ]);
    }
}

/// The status API's view of CPU `cpu`'s sampler.
pub fn sampler_status(daemon: &Daemon, cpu: usize) -> serde_json::Value {
    let status: serde_json::Value = serde_json::from_str(&daemon.get("/api/v1/status").1).unwrap();
    status["samplers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["cpu"] == cpu)
        .cloned()
        .unwrap_or_else(|| panic!("no sampler on CPU {cpu}: {status}"))
}
