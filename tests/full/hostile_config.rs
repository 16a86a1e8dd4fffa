//! Hostile configuration, as one table run against the real binary: every
//! key with malformed values, wrong types, huge numbers, empty and
//! overlapping CPU lists, absent CPUs, metrics paths on latencyd's own
//! routes, a bcrypt hash that is not ASCII, unreadable and non-UTF-8
//! files, bad environment values and flags. Each one must exit 78 before
//! any thread exists (checked with `strace -f`: no clone), with a message
//! naming where the value came from and the key. (A listed CPU that is
//! only offline is no error: tests/full/hotplug.rs samples it once it is back.)

#[path = "../common/mod.rs"]
mod common;

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// Where a bad value is given.
enum Via {
    /// TOML text of the configuration file.
    File(&'static str),
    /// The configuration file's raw bytes.
    FileBytes(&'static [u8]),
    /// The configuration file is this path instead of a file we write.
    Path(&'static str),
    Env(&'static str, OsString),
    Flag(&'static str, &'static str),
    /// A web configuration file of this text, named by the configuration.
    WebConfig(String),
}

struct Case {
    via: Via,
    /// The key the message must name (`section.key`, or "the file").
    key: &'static str,
    /// A piece of the reason, when it matters.
    reason: &'static str,
}

fn file(text: &'static str, key: &'static str, reason: &'static str) -> Case {
    Case {
        via: Via::File(text),
        key,
        reason,
    }
}

fn env(name: &'static str, value: &str, key: &'static str, reason: &'static str) -> Case {
    Case {
        via: Via::Env(name, value.into()),
        key,
        reason,
    }
}

fn flag(name: &'static str, value: &'static str, key: &'static str, reason: &'static str) -> Case {
    Case {
        via: Via::Flag(name, value),
        key,
        reason,
    }
}

fn cases() -> Vec<Case> {
    let mut cases = vec![
        // [measure] cpus
        file("[measure]\ncpus = \"\"\n", "measure.cpus", "empty"),
        file("[measure]\ncpus = \"5-3\"\n", "measure.cpus", "backwards"),
        file(
            "[measure]\ncpus = \"0,0\"\n",
            "measure.cpus",
            "more than once",
        ),
        file(
            "[measure]\ncpus = \"0-1,1\"\n",
            "measure.cpus",
            "more than once",
        ),
        file(
            "[measure]\ncpus = \"1023\"\n",
            "measure.cpus",
            "absent or outside",
        ),
        file(
            "[measure]\ncpus = \"0-99999\"\n",
            "measure.cpus",
            "largest CPU number",
        ),
        file("[measure]\ncpus = \"0x1\"\n", "measure.cpus", ""),
        file("[measure]\ncpus = 3\n", "measure.cpus", ""),
        file("[measure]\ncpus = [0, 1]\n", "measure.cpus", ""),
        // interval
        file(
            "[measure]\ninterval = \"0ms\"\n",
            "measure.interval",
            "between 10us and 1s",
        ),
        file(
            "[measure]\ninterval = \"1.5ms\"\n",
            "measure.interval",
            "not a duration",
        ),
        file(
            "[measure]\ninterval = \"1000\"\n",
            "measure.interval",
            "unit",
        ),
        file(
            "[measure]\ninterval = 1000\n",
            "measure.interval",
            "with a unit",
        ),
        file(
            "[measure]\ninterval = \"2s\"\n",
            "measure.interval",
            "between",
        ),
        file("[measure]\ninterval = \"-1ms\"\n", "measure.interval", ""),
        file(
            "[measure]\ninterval = \"99999999999999999999s\"\n",
            "measure.interval",
            "",
        ),
        file("[measure]\ninterval = true\n", "measure.interval", ""),
        file(
            "[measure]\ninterval = \"1 fortnight\"\n",
            "measure.interval",
            "unit",
        ),
        // policy, priority
        file("[measure]\npolicy = \"batch\"\n", "measure.policy", ""),
        file("[measure]\npolicy = 1\n", "measure.policy", ""),
        file("[measure]\npriority = 0\n", "measure.priority", ""),
        file(
            "[measure]\npriority = 100\n",
            "measure.priority",
            "outside 1..=99",
        ),
        file("[measure]\npriority = -5\n", "measure.priority", ""),
        file(
            "[measure]\npriority = \"high\"\n",
            "measure.priority",
            "whole number",
        ),
        file(
            "[measure]\npriority = 1.5\n",
            "measure.priority",
            "whole number",
        ),
        file(
            "[measure]\npriority = 99999999999999999999\n",
            "the file",
            "",
        ),
        // warmup, spike_threshold, pm_qos
        file("[measure]\nwarmup = \"-1s\"\n", "measure.warmup", ""),
        file("[measure]\nwarmup = 5\n", "measure.warmup", "unit"),
        file(
            "[measure]\nspike_threshold = \"abc\"\n",
            "measure.spike_threshold",
            "",
        ),
        file(
            "[measure]\npm_qos = \"yes\"\n",
            "measure.pm_qos",
            "true or false",
        ),
        file("[measure]\npm_qos = 1\n", "measure.pm_qos", "true or false"),
        // [realtime]
        file(
            "[realtime]\nrequired = \"maybe\"\n",
            "realtime.required",
            "true or false",
        ),
        file(
            "[realtime]\nrequired = 0\n",
            "realtime.required",
            "true or false",
        ),
        // [export]
        file(
            "[export]\nlisten = \"localhost:9479\"\n",
            "export.listen",
            "not resolved",
        ),
        file(
            "[export]\nlisten = \"0.0.0.0\"\n",
            "export.listen",
            "IP address and port",
        ),
        file(
            "[export]\nlisten = \"0.0.0.0:99999\"\n",
            "export.listen",
            "",
        ),
        file("[export]\nlisten = \"\"\n", "export.listen", ""),
        file("[export]\nlisten = 9479\n", "export.listen", ""),
        file(
            "[export]\nlisten = \"192.0.2.1:9479\"\n",
            "export.listen",
            "cannot listen",
        ),
        file(
            "[export]\nmax_window = \"0s\"\n",
            "export.max_window",
            "whole seconds",
        ),
        file(
            "[export]\nmax_window = \"1500ms\"\n",
            "export.max_window",
            "whole seconds",
        ),
        file(
            "[export]\nmax_window = \"25h\"\n",
            "export.max_window",
            "whole seconds",
        ),
        file(
            "[export]\nper_cpu_histograms = \"sometimes\"\n",
            "export.per_cpu_histograms",
            "",
        ),
        file(
            "[export]\nbuckets = []\n",
            "export.buckets",
            "between 1 and 64",
        ),
        file(
            "[export]\nbuckets = [\"2us\", \"1us\"]\n",
            "export.buckets",
            "ascending",
        ),
        file(
            "[export]\nbuckets = [\"0us\"]\n",
            "export.buckets",
            "above 0",
        ),
        file("[export]\nbuckets = \"1us,x\"\n", "export.buckets", ""),
        file("[export]\nbuckets = [1, 2]\n", "export.buckets", ""),
        file(
            "[export]\ncpus = \"1023\"\n",
            "export.cpus",
            "offline, absent",
        ),
        file("[export]\ncpus = \"\"\n", "export.cpus", "empty"),
        file(
            "[export]\ncpus = \"0,0\"\n",
            "export.cpus",
            "more than once",
        ),
        file(
            "[export]\nweb_config_file = \"/nonexistent/web.yml\"\n",
            "export.web_config_file",
            "cannot read",
        ),
        file(
            "[export]\nweb_config_file = 5\n",
            "export.web_config_file",
            "",
        ),
        file(
            "[export]\nmax_connections = 0\n",
            "export.max_connections",
            "between",
        ),
        file(
            "[export]\nmax_connections = 70000\n",
            "export.max_connections",
            "between",
        ),
        file(
            "[export]\nmax_connections = -1\n",
            "export.max_connections",
            "between",
        ),
        file(
            "[export]\nmax_connections = \"many\"\n",
            "export.max_connections",
            "whole number",
        ),
        file(
            "[export]\nheader_timeout = \"0s\"\n",
            "export.header_timeout",
            "between",
        ),
        file(
            "[export]\nheader_timeout = \"10m\"\n",
            "export.header_timeout",
            "between",
        ),
        file(
            "[export]\nheader_timeout = 10\n",
            "export.header_timeout",
            "unit",
        ),
        file(
            "[export]\nrequest_timeout = \"1h\"\n",
            "export.request_timeout",
            "between",
        ),
        // [log]
        file("[log]\nlevel = \"verbose\"\n", "log.level", ""),
        file("[log]\nlevel = 3\n", "log.level", ""),
        file("[log]\nformat = \"xml\"\n", "log.format", "\"json\""),
        // [forensics] and [record]
        file(
            "[forensics]\nthreshold = \"1h\"\n",
            "forensics.threshold",
            "between 1us and 10s",
        ),
        file(
            "[record]\ninterval = \"250ms\"\n",
            "record.interval",
            "whole seconds",
        ),
        file(
            "[record]\nenabled = \"sometimes\"\n",
            "record.enabled",
            "\"auto\"",
        ),
        file(
            "[record]\ndir = \"relative/dir\"\n",
            "record.dir",
            "absolute path",
        ),
        // Structure
        file("[measure]\nbogus = 1\n", "measure.bogus", "unknown key"),
        file("[bogus]\nx = 1\n", "bogus", "unknown"),
        file("measure = 5\n", "measure", "must be a section"),
        file("[measure\n", "the file", "TOML parse error"),
        file(
            "[measure]\ninterval = \"1ms\"\ninterval = \"2ms\"\n",
            "the file",
            "",
        ),
        Case {
            via: Via::FileBytes(b"[measure]\ninterval = \"1\xffms\"\n"),
            key: "the file",
            reason: "not UTF-8",
        },
        Case {
            via: Via::Path("/nonexistent/latencyd.toml"),
            key: "the file",
            reason: "cannot be read",
        },
        Case {
            via: Via::Path("/"),
            key: "the file",
            reason: "cannot be read",
        },
        // Environment
        env("LATENCYD_MEASURE__INTERVAL", "abc", "measure.interval", ""),
        env("LATENCYD_MEASURE__INTERVAL", "", "measure.interval", ""),
        env(
            "LATENCYD_MEASURE__PRIORITY",
            "1e3",
            "measure.priority",
            "whole number",
        ),
        env(
            "LATENCYD_MEASURE__CPUS",
            "0-1,0",
            "measure.cpus",
            "more than once",
        ),
        env(
            "LATENCYD_EXPORT__MAX_CONNECTIONS",
            "18446744073709551616",
            "export.max_connections",
            "",
        ),
        env(
            "LATENCYD_REALTIME__REQUIRED",
            "yes",
            "realtime.required",
            "true or false",
        ),
        env(
            "LATENCYD_MEASURE__BOGUS",
            "1",
            "measure.bogus",
            "unknown key",
        ),
        env("LATENCYD_BOGUS", "1", "bogus", "unknown key"),
        env(
            "LATENCYD_RECORD__MAX_BYTES",
            "10",
            "record.max_bytes",
            "at least 16384",
        ),
        env(
            "LATENCYD_RECORD__RETENTION",
            "5m",
            "record.retention",
            "at least 1h",
        ),
        Case {
            via: Via::Env(
                "LATENCYD_LOG__LEVEL",
                OsString::from_vec(b"in\xfffo".to_vec()),
            ),
            key: "log.level",
            reason: "not valid UTF-8",
        },
        // Cases that once lived in src/config/tests.rs.
        file("[mesure]\ninterval = \"1ms\"\n", "mesure", "unknown key"),
        file(
            "[measure]\npolicy = \"other\"\npriority = 5\n",
            "measure.priority",
            "outside 0..=0",
        ),
        file(
            "[measure]\npolicy = \"deadline\"\n",
            "measure.policy",
            "\"fifo\"",
        ),
        file(
            "[measure]\ninterval = \"5s\"\n",
            "measure.interval",
            "between 10us and 1s",
        ),
        file(
            "[measure]\ncpus = \"0-\"\n",
            "measure.cpus",
            "not a CPU number",
        ),
        file("[measure]\nwarmup = \"2h\"\n", "measure.warmup", "between"),
        file(
            "[measure]\nspike_threshold = \"0ns\"\n",
            "measure.spike_threshold",
            "between",
        ),
        file(
            "[realtime]\nrequired = 1\n",
            "realtime.required",
            "true or false",
        ),
        file(
            "[export]\nbuckets = [\"1us\", \"soon\"]\n",
            "export.buckets",
            "item 2",
        ),
        file(
            "[export]\ncpus = \"x\"\n",
            "export.cpus",
            "not a CPU number",
        ),
        file("[log]\nlevel = \"loud\"\n", "log.level", "\"info\""),
        env(
            "LATENCYD_MEASURE__INTERVAL",
            "fast",
            "measure.interval",
            "not a duration",
        ),
        env(
            "LATENCYD_MEASURE__INTERVALL",
            "1ms",
            "measure.intervall",
            "unknown key",
        ),
        env(
            "LATENCYD_INTERVAL",
            "1ms",
            "interval",
            "LATENCYD_<SECTION>__<KEY>",
        ),
        env(
            "LATENCYD_EXPORT__PER_CPU_HISTOGRAMS",
            "maybe",
            "export.per_cpu_histograms",
            "true or false",
        ),
        // Flags
        flag("--interval", "abc", "measure.interval", ""),
        flag("--priority", "1000", "measure.priority", ""),
        flag("--cpus", "5-3", "measure.cpus", "backwards"),
        flag("--web.listen-address", "nowhere", "export.listen", ""),
        flag(
            "--web.config.file",
            "/nonexistent/web.yml",
            "export.web_config_file",
            "cannot read",
        ),
        flag("--log.level", "loud", "log.level", ""),
    ];
    // The metrics' path on one of latencyd's own routes, or one the
    // router would read as a parameter: a start that panicked (exit 101),
    // which systemd's RestartPreventExitStatus did not stop.
    for path in [
        "/runbooks",
        "/livez",
        "/spikes/x",
        "/api/v9",
        "/m:x",
        "/a/{b}",
    ] {
        let text: &'static str =
            Box::leak(format!("[export]\ntelemetry_path = \"{path}\"\n").into_boxed_str());
        cases.push(file(text, "export.telemetry_path", ""));
    }
    // A bcrypt hash of the right length with a two-byte character in it:
    // a panic of check-config (exit 101) once.
    let hash = "$2y$04$GaaVZTkHhvmuAuAjJFV0GOqdYh8I6YyHjAsOc4ac52rxFDRhkhF\u{e9}";
    assert_eq!(hash.len(), 60);
    cases.push(Case {
        via: Via::WebConfig(format!("basic_auth_users:\n  alice: '{hash}'\n")),
        key: "export.web_config_file",
        reason: "not a bcrypt hash",
    });
    // 65 buckets: one too many.
    let many: Vec<String> = (1..=65).map(|i| format!("\"{i}us\"")).collect();
    let text: &'static str =
        Box::leak(format!("[export]\nbuckets = [{}]\n", many.join(", ")).into_boxed_str());
    cases.push(file(text, "export.buckets", "between 1 and 64"));
    cases
}

/// Runs `latencyd run` for one case under `strace -f`, returning its exit
/// code, its stderr and how many threads or processes it created.
fn run_case(case: &Case, dir: &Path, n: usize) -> (Option<i32>, String, usize) {
    let mut config: PathBuf = dir.join(format!("case{n}.toml"));
    let mut command_env: Vec<(&str, OsString)> = Vec::new();
    let mut flags: Vec<&str> = Vec::new();
    match &case.via {
        Via::File(text) => std::fs::write(&config, text).unwrap(),
        Via::FileBytes(bytes) => std::fs::write(&config, bytes).unwrap(),
        Via::Path(path) => config = PathBuf::from(path),
        Via::Env(name, value) => {
            std::fs::write(&config, "").unwrap();
            command_env.push((name, value.clone()));
        }
        Via::Flag(name, value) => {
            std::fs::write(&config, "").unwrap();
            flags.extend([*name, *value]);
        }
        Via::WebConfig(text) => {
            let web = dir.join(format!("case{n}.web.yml"));
            std::fs::write(&web, text).unwrap();
            let toml = format!("[export]\nweb_config_file = \"{}\"\n", web.display());
            std::fs::write(&config, toml).unwrap();
        }
    }
    // Without privileges the real-time check would refuse the defaults
    // first, before the host-dependent cases (listen, export.cpus, the web
    // configuration) are reached.
    if !privileged() && case.key != "realtime.required" {
        command_env.push(("LATENCYD_REALTIME__REQUIRED", "false".into()));
    }
    let trace = dir.join(format!("case{n}.trace"));
    let stderr_path = dir.join(format!("case{n}.stderr"));
    let mut child = Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=clone,clone3,fork,vfork", "-o"])
        .arg(&trace)
        .arg(env!("CARGO_BIN_EXE_latencyd"))
        .args(["run", "--config"])
        .arg(&config)
        .args(&flags)
        .envs(command_env)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .expect("strace runs");
    // A value wrongly accepted starts the daemon: stop it, and say so.
    let started = std::time::Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if started.elapsed() > std::time::Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            // strace's death detaches the daemon; it is found by its
            // configuration file, unique to this case.
            let _ = Command::new("pkill")
                .args(["-KILL", "-f"])
                .arg(config.as_os_str())
                .status();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let clones = std::fs::read_to_string(&trace)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("clone") || l.contains("fork"))
        .count();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    (code, stderr, clones)
}

/// What the message must say the value came from.
fn source_of(case: &Case, config: &Path) -> String {
    match &case.via {
        Via::File(_) | Via::FileBytes(_) | Via::WebConfig(_) => config.display().to_string(),
        Via::Path(path) => path.to_string(),
        Via::Env(name, _) => format!("environment variable {name}"),
        Via::Flag(name, _) => format!("command-line flag {name}"),
    }
}

#[test]
// Full tier: strace watches every case for a thread start.
fn every_hostile_value_exits_78_naming_source_and_key_before_any_thread() {
    require_tool("strace", "-V", "strace");
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let mut cases = cases();
    // A port in use is a configuration error too (once in tests/daemon.rs).
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let listen: &'static str =
        Box::leak(format!("[export]\nlisten = \"127.0.0.1:{port}\"\n").into_boxed_str());
    cases.push(file(listen, "export.listen", "cannot listen on"));
    for (n, case) in cases.iter().enumerate() {
        let (code, stderr, clones) = run_case(case, dir.path(), n);
        let config = dir.path().join(format!("case{n}.toml"));
        let source = source_of(case, &config);
        let message_ok = stderr.starts_with("latencyd: configuration error: ")
            && stderr.contains(&source)
            && stderr.contains(case.key)
            && stderr.contains(case.reason);
        if code != Some(78) || !message_ok || clones != 0 || stderr.contains("panicked") {
            failures.push(format!(
                "case {n} ({source}, {}): exit {code:?}, {clones} clones: {stderr}",
                case.key
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    eprintln!(
        "{} hostile configurations: each exit 78, named, no thread",
        cases.len()
    );
}
