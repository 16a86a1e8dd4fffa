use crate::sampling::CpuSelection;
use std::io::Write;

use super::*;
use crate::rt::sys::Policy;
use crate::units::{NS_PER_MS, NS_PER_SEC, NS_PER_US};

mod sections;

/// Loads `toml` (if any) as a file, with `env` as the whole environment
/// and `flags` as command-line overrides: the daemon's own sections.
pub(super) fn load(
    toml: Option<&str>,
    env: &[(&str, &str)],
    flags: &[(&'static str, &str, &'static str)],
) -> (Result<Config, ConfigError>, Option<tempfile::NamedTempFile>) {
    load_with(&[], toml, env, flags)
}

/// The same with the instruments' sections `specs`.
pub(crate) fn load_with(
    specs: &Specs,
    toml: Option<&str>,
    env: &[(&str, &str)],
    flags: &[(&'static str, &str, &'static str)],
) -> (Result<Config, ConfigError>, Option<tempfile::NamedTempFile>) {
    let file = toml.map(|text| {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(text.as_bytes()).unwrap();
        file
    });
    let sources = Sources {
        file: file.as_ref().map(|f| f.path().to_path_buf()),
        flags: flags
            .iter()
            .map(|(k, v, f)| (*k, v.to_string(), *f))
            .collect(),
    };
    let env_map = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let env = Environment::with_prefix(ENV_PREFIX).source(Some(env_map));
    (Config::load_with_env(&sources, env, specs), file)
}

#[test]
fn defaults_need_no_file() {
    let (config, _) = load(None, &[], &[]);
    let config = config.unwrap();
    assert_eq!(config.measure.cpus, CpuSelection::All);
    assert_eq!(config.measure.interval_ns, NS_PER_MS);
    assert_eq!(
        (config.measure.policy, config.measure.priority),
        (Policy::Fifo, 80)
    );
    assert!(config.realtime.required);
    assert_eq!(
        config.export.listen,
        vec!["[::]:9479".parse::<std::net::SocketAddr>().unwrap()]
    );
    assert_eq!(config.export.telemetry_path, "/metrics");
    assert_eq!(config.export.buckets_ns.len(), 19);
    assert_eq!(config.export.buckets_ns[0], NS_PER_US);
    assert!(
        config
            .effective
            .values()
            .all(|e| e.source == "built-in default")
    );
    assert_eq!(config.effective.len(), OWN_KEYS, "every key is listed");
    assert!(config.realtime.restore, "a changed sampler is set back");
    assert_eq!(config.measure.stall_threshold_ns, 2 * NS_PER_SEC, "auto");
    assert!(config.measure.stall_threshold_auto);
    assert_eq!(config.record.enabled, super::record::Switch::Auto);
    if std::env::var_os("STATE_DIRECTORY").is_none() {
        assert!(!config.record.on(), "no state directory, no record");
    }
    assert_eq!(
        config.record.dir,
        std::path::PathBuf::from("/var/lib/latencyd/record")
    );
    assert_eq!(config.record.interval_ns, 300 * NS_PER_SEC);
    assert_eq!(config.sections, Sections::default(), "none asked for");
}

/// The keys of the daemon's own sections.
const OWN_KEYS: usize = 27;

#[test]
fn file_then_environment_then_flags() {
    let toml = "[measure]\ninterval = \"500us\"\npriority = 70\n[log]\nlevel = \"debug\"\n";
    let env = [
        ("LATENCYD_MEASURE__PRIORITY", "60"),
        ("LATENCYD_EXPORT__PER_CPU_HISTOGRAMS", "false"),
        ("LATENCYD_EXPORT__BUCKETS", "10us,1ms"),
        ("UNRELATED", "x"),
    ];
    let flags = [("log.level", "warn", "--log-level")];
    let (config, file) = load(Some(toml), &env, &flags);
    let config = config.unwrap();
    let path = file.unwrap().path().display().to_string();
    assert_eq!(config.measure.interval_ns, 500 * NS_PER_US);
    assert_eq!(config.effective["measure.interval"].source, path);
    assert_eq!(config.measure.priority, 60);
    assert_eq!(
        config.effective["measure.priority"].source,
        "environment variable LATENCYD_MEASURE__PRIORITY"
    );
    assert!(!config.export.per_cpu_histograms);
    assert_eq!(config.export.buckets_ns, vec![10 * NS_PER_US, NS_PER_MS]);
    assert_eq!(config.log.level, LogLevel::Warn);
    assert_eq!(
        config.effective["log.level"].source,
        "command-line flag --log-level"
    );
}

#[test]
fn a_fifo_or_a_device_is_refused_at_once_and_dev_null_means_the_defaults() {
    let read = |path: &str| {
        let sources = Sources {
            file: Some(path.into()),
            flags: vec![],
        };
        Config::load_with_env(
            &sources,
            Environment::with_prefix(ENV_PREFIX).source(Some(Map::new())),
            &[],
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("latencyd.toml");
    crate::rt::sys::make_fifo(&fifo).unwrap();
    // Nobody writes into it: refused at once, not waited on.
    let err = read(fifo.to_str().unwrap()).unwrap_err();
    assert!(err.reason.contains("is not a regular file"), "{err}");
    let err = read("/dev/zero").unwrap_err();
    assert!(err.reason.contains("is not a regular file"), "{err}");
    let defaults = read("/dev/null").unwrap();
    assert_eq!(defaults.measure.priority, 80);
}

#[test]
fn unreadable_and_non_utf8_files_name_the_file() {
    let sources = Sources {
        file: Some("/nonexistent/latencyd.toml".into()),
        flags: vec![],
    };
    let err = Config::load_with_env(
        &sources,
        Environment::with_prefix(ENV_PREFIX).source(Some(Map::new())),
        &[],
    )
    .unwrap_err();
    assert_eq!(err.source, "/nonexistent/latencyd.toml");
    assert!(err.reason.contains("cannot be read"), "{err}");

    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(b"[measure]\ninterval = \"1\xffms\"\n")
        .unwrap();
    let sources = Sources {
        file: Some(file.path().to_path_buf()),
        flags: vec![],
    };
    let err = Config::load_with_env(
        &sources,
        Environment::with_prefix(ENV_PREFIX).source(Some(Map::new())),
        &[],
    )
    .unwrap_err();
    assert_eq!(err.source, file.path().display().to_string());
}

#[test]
fn the_annotated_effective_config_loads_back_to_the_same_values() {
    let toml =
        "[measure]\ncpus = \"0\"\ninterval = \"250us\"\n[export]\nbuckets = [\"5us\", \"1ms\"]\n";
    let (config, _) = load(Some(toml), &[("LATENCYD_LOG__FORMAT", "json")], &[]);
    let config = config.unwrap();
    let printed = config.to_annotated_toml();
    assert!(printed.contains("interval = \"250us\""), "{printed}");
    assert!(
        printed.contains("# environment variable LATENCYD_LOG__FORMAT"),
        "{printed}"
    );
    let (reloaded, _) = load(Some(&printed), &[], &[]);
    let reloaded = reloaded.unwrap();
    assert_eq!(reloaded.measure, config.measure);
    assert_eq!(reloaded.export, config.export);
    assert_eq!(reloaded.log, config.log);
    assert!(config.changed_keys(&reloaded).is_empty());
    let (other, _) = load(Some("[export]\nmax_window = \"30s\"\n"), &[], &[]);
    let changed = config.changed_keys(&other.unwrap());
    assert!(changed.contains(&"export.max_window".to_string()));
    assert!(changed.contains(&"measure.interval".to_string()));
}
