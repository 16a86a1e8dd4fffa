use std::io::Write;

use super::*;
use crate::rt::sys::Policy;
use crate::units::{NS_PER_MS, NS_PER_US};

/// Loads `toml` (if any) as a file, with `env` as the whole environment
/// and `flags` as command-line overrides.
fn load(
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
    (Config::load_with_env(&sources, env), file)
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
    assert_eq!(config.export.listen.to_string(), "0.0.0.0:9479");
    assert_eq!(config.export.buckets_ns.len(), 19);
    assert_eq!(config.export.buckets_ns[0], NS_PER_US);
    assert!(
        config
            .effective
            .values()
            .all(|e| e.source == "built-in default")
    );
    assert_eq!(config.effective.len(), 19, "every key is listed");
}

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

/// Each bad input: the error names the source, the key, and says why.
#[test]
fn bad_values_are_reported_with_source_key_and_reason() {
    struct Case {
        toml: Option<&'static str>,
        env: &'static [(&'static str, &'static str)],
        key: &'static str,
        source_is_env: Option<&'static str>,
        reason_contains: &'static str,
    }
    let file_case = |toml, key, reason_contains| Case {
        toml: Some(toml),
        env: &[],
        key,
        source_is_env: None,
        reason_contains,
    };
    let cases = [
        file_case("[measure]\nbogus = 1\n", "measure.bogus", "unknown key"),
        file_case("[mesure]\ninterval = \"1ms\"\n", "mesure", "unknown key"),
        file_case("measure = 5\n", "measure", "must be a section"),
        file_case(
            "[measure]\npriority = \"high\"\n",
            "measure.priority",
            "whole number",
        ),
        file_case(
            "[measure]\npriority = 100\n",
            "measure.priority",
            "outside 1..=99",
        ),
        file_case(
            "[measure]\npriority = 99999999999999999999\n",
            "the file",
            "",
        ),
        file_case(
            "[measure]\npolicy = \"other\"\npriority = 5\n",
            "measure.priority",
            "outside 0..=0",
        ),
        file_case(
            "[measure]\npolicy = \"deadline\"\n",
            "measure.policy",
            "\"fifo\"",
        ),
        file_case(
            "[measure]\ninterval = \"0ms\"\n",
            "measure.interval",
            "between 10us and 1s",
        ),
        file_case(
            "[measure]\ninterval = \"5s\"\n",
            "measure.interval",
            "between 10us and 1s",
        ),
        file_case(
            "[measure]\ninterval = 1000\n",
            "measure.interval",
            "with a unit",
        ),
        file_case(
            "[measure]\ninterval = \"1.5ms\"\n",
            "measure.interval",
            "not a duration",
        ),
        file_case(
            "[measure]\ncpus = \"0-\"\n",
            "measure.cpus",
            "not a CPU number",
        ),
        file_case("[measure]\ncpus = \"\"\n", "measure.cpus", "empty"),
        file_case(
            "[measure]\ncpus = \"1,1\"\n",
            "measure.cpus",
            "more than once",
        ),
        file_case("[measure]\nwarmup = \"2h\"\n", "measure.warmup", "between"),
        file_case(
            "[measure]\nspike_threshold = \"0ns\"\n",
            "measure.spike_threshold",
            "between",
        ),
        file_case(
            "[measure]\npm_qos = \"yes\"\n",
            "measure.pm_qos",
            "true or false",
        ),
        file_case(
            "[realtime]\nrequired = 1\n",
            "realtime.required",
            "true or false",
        ),
        file_case(
            "[export]\nlisten = \"localhost:9479\"\n",
            "export.listen",
            "IP address and port",
        ),
        file_case(
            "[export]\nlisten = \"0.0.0.0\"\n",
            "export.listen",
            "IP address and port",
        ),
        file_case(
            "[export]\nmax_window = \"1500ms\"\n",
            "export.max_window",
            "whole seconds",
        ),
        file_case(
            "[export]\nbuckets = []\n",
            "export.buckets",
            "between 1 and 64",
        ),
        file_case(
            "[export]\nbuckets = [\"2us\", \"1us\"]\n",
            "export.buckets",
            "strictly ascending",
        ),
        file_case(
            "[export]\nbuckets = [\"1us\", \"soon\"]\n",
            "export.buckets",
            "item 2",
        ),
        file_case(
            "[export]\ncpus = \"x\"\n",
            "export.cpus",
            "not a CPU number",
        ),
        file_case("[log]\nlevel = \"loud\"\n", "log.level", "\"info\""),
        file_case("[log]\nformat = \"xml\"\n", "log.format", "\"json\""),
        file_case("[measure\n", "the file", "TOML"),
        Case {
            toml: None,
            env: &[("LATENCYD_MEASURE__INTERVAL", "fast")],
            key: "measure.interval",
            source_is_env: Some("LATENCYD_MEASURE__INTERVAL"),
            reason_contains: "not a duration",
        },
        Case {
            toml: None,
            env: &[("LATENCYD_MEASURE__INTERVALL", "1ms")],
            key: "measure.intervall",
            source_is_env: Some("LATENCYD_MEASURE__INTERVALL"),
            reason_contains: "unknown key",
        },
        Case {
            toml: None,
            env: &[("LATENCYD_INTERVAL", "1ms")],
            key: "interval",
            source_is_env: Some("LATENCYD_INTERVAL"),
            reason_contains: "LATENCYD_<SECTION>__<KEY>",
        },
        Case {
            toml: None,
            env: &[("LATENCYD_EXPORT__PER_CPU_HISTOGRAMS", "maybe")],
            key: "export.per_cpu_histograms",
            source_is_env: Some("LATENCYD_EXPORT__PER_CPU_HISTOGRAMS"),
            reason_contains: "true or false",
        },
    ];
    for case in cases {
        let (result, file) = load(case.toml, case.env, &[]);
        let err = result.expect_err(case.key);
        let expected_source = match (case.source_is_env, &file) {
            (Some(var), _) => format!("environment variable {var}"),
            (None, Some(file)) => file.path().display().to_string(),
            (None, None) => unreachable!(),
        };
        assert!(
            err.source.contains(&expected_source),
            "{:?}: {err}",
            case.toml
        );
        assert_eq!(err.key, case.key, "{:?}: {err}", case.toml);
        assert!(
            err.reason.contains(case.reason_contains),
            "{:?}: {err}",
            case.toml
        );
    }
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

#[test]
fn host_checks_name_the_key_and_the_fix() {
    let mut host = HostInfo::detect();
    host.usable_cpus = vec![0, 1];
    host.cap_sys_nice = false;
    host.rtprio_limit = Some(50);
    let (config, file) = load(Some("[measure]\ncpus = \"0,7\"\n"), &[], &[]);
    let err = config.unwrap().check_against(&host).unwrap_err();
    assert_eq!(err.key, "measure.cpus");
    assert_eq!(err.source, file.unwrap().path().display().to_string());
    assert!(
        err.reason.contains("CPU 7") && err.reason.contains("0-1"),
        "{err}"
    );

    let (config, _) = load(None, &[], &[]);
    let err = config.unwrap().check_against(&host).unwrap_err();
    assert_eq!(
        (err.key.as_str(), err.source.as_str()),
        ("measure.priority", "built-in default")
    );
    assert!(err.reason.contains("LimitRTPRIO=80"), "{err}");

    let (config, _) = load(None, &[("LATENCYD_REALTIME__REQUIRED", "false")], &[]);
    assert!(
        config.unwrap().check_against(&host).is_ok(),
        "degraded mode is allowed"
    );
    let (config, _) = load(
        None,
        &[
            ("LATENCYD_REALTIME__REQUIRED", "false"),
            ("LATENCYD_EXPORT__CPUS", "1-2"),
        ],
        &[],
    );
    let err = config.unwrap().check_against(&host).unwrap_err();
    assert_eq!(err.key, "export.cpus");
    assert_eq!(err.source, "environment variable LATENCYD_EXPORT__CPUS");
    host.cap_sys_nice = true;
    let (config, _) = load(None, &[], &[]);
    assert!(config.unwrap().check_against(&host).is_ok());
}

/// config.example.toml must load with the real parser, set every key, and
/// show exactly the built-in defaults it claims to show.
#[test]
fn the_example_file_documents_every_key_with_its_default() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/config.example.toml");
    let sources = Sources {
        file: Some(path.into()),
        flags: vec![],
    };
    let example = Config::load_with_env(
        &sources,
        Environment::with_prefix(ENV_PREFIX).source(Some(Map::new())),
    )
    .unwrap();
    assert!(
        example.effective.values().all(|e| e.source == path),
        "every key is set in the example: {:?}",
        example
            .effective
            .iter()
            .filter(|(_, e)| e.source != path)
            .map(|(k, _)| k)
            .collect::<Vec<_>>()
    );
    let builtin = Config::builtin();
    assert!(
        builtin.changed_keys(&example).is_empty(),
        "{:?}",
        builtin.changed_keys(&example)
    );
}
