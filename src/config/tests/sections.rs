//! Each section's values: checked, and a refusal names the key, the
//! value and what is accepted.

use super::*;

#[test]
fn observe_values_are_checked_and_named() {
    for (toml, key, says) in [
        (
            "cpus = \"two\"",
            "observe.cpus",
            "\"unmeasured\" or \"all\"",
        ),
        (
            "cpus = \"3-1\"",
            "observe.cpus",
            "\"unmeasured\" or \"all\"",
        ),
        ("max_tasks = 0", "observe.max_tasks", "between 1 and 4096"),
        (
            "max_names = 5000",
            "observe.max_names",
            "between 1 and 4096",
        ),
        (
            "buffer_size_kb = 8",
            "observe.buffer_size_kb",
            "between 64 and",
        ),
        ("enabled = \"yes\"", "observe.enabled", "true or false"),
        ("tasks = 3", "observe.tasks", "unknown key"),
    ] {
        let (config, _file) = load(Some(&format!("[observe]\n{toml}\n")), &[], &[]);
        let err = config.unwrap_err();
        assert_eq!(err.key, key, "{toml}: {err}");
        assert!(err.reason.contains(says), "{toml}: {err}");
    }
    let (config, _file) = load(
        Some("[observe]\nenabled = true\ncpus = \"2-3\"\n"),
        &[],
        &[],
    );
    let config = config.unwrap();
    assert_eq!(config.observe.cpus, super::ObserveCpus::List(vec![2, 3]));
    // Listed CPUs must be online; outside the affinity mask is fine.
    let host = crate::host::HostInfo {
        usable_cpus: vec![0],
        online_cpus: Some(vec![0, 1, 2]),
        ..crate::host::HostInfo::detect()
    };
    // The section's own check (the whole check_against would first refuse
    // the sampler's priority when the tests run without privileges).
    let err = config
        .observe
        .check_against(&host, &config.effective)
        .unwrap_err();
    assert_eq!(err.key, "observe.cpus");
    assert!(err.reason.contains("CPU 3 is offline"), "{err}");
    assert_eq!(config.observe.cpu_list(&host, &[0]), vec![2, 3]);
    let mut unmeasured = config.observe.clone();
    unmeasured.cpus = super::ObserveCpus::Unmeasured;
    assert_eq!(unmeasured.cpu_list(&host, &[0]), vec![1, 2]);
}

#[test]
fn forensics_values_are_checked_and_named() {
    for (toml, key, says) in [
        (
            "threshold = \"0us\"",
            "forensics.threshold",
            "between 1us and 10s",
        ),
        ("threshold = 500", "forensics.threshold", "with a unit"),
        (
            "max_captures = 0",
            "forensics.max_captures",
            "between 1 and 10000",
        ),
        ("max_bytes = 1000", "forensics.max_bytes", "at least 65536"),
        (
            "buffer_size_kb = 8",
            "forensics.buffer_size_kb",
            "between 64 and",
        ),
        ("dir = \"spikes\"", "forensics.dir", "absolute path"),
        (
            "per_cpu_interval = \"2h\"",
            "forensics.per_cpu_interval",
            "at most 1h",
        ),
        (
            "max_per_minute = 0",
            "forensics.max_per_minute",
            "between 1 and 600",
        ),
        ("enabled = \"yes\"", "forensics.enabled", "true or false"),
        ("snapshot = true", "forensics.snapshot", "unknown key"),
    ] {
        let (config, _file) = load(Some(&format!("[forensics]\n{toml}\n")), &[], &[]);
        let err = config.unwrap_err();
        assert_eq!(err.key, key, "{toml}: {err}");
        assert!(err.reason.contains(says), "{toml}: {err}");
    }
    // The environment too, named.
    let (config, _) = load(None, &[("LATENCYD_FORENSICS__MAX_CAPTURES", "0")], &[]);
    let err = config.unwrap_err();
    assert_eq!(
        err.source,
        "environment variable LATENCYD_FORENSICS__MAX_CAPTURES"
    );
    let (config, _) = load(None, &[("LATENCYD_FORENSICS__ENABLED", "true")], &[]);
    assert!(config.unwrap().forensics.enabled);
}

#[test]
fn record_values_are_checked_and_named() {
    for (toml, key, says) in [
        (
            "interval = \"500ms\"",
            "record.interval",
            "whole seconds between 1s and 1h",
        ),
        (
            "interval = \"2h\"",
            "record.interval",
            "whole seconds between 1s and 1h",
        ),
        ("interval = \"1500ms\"", "record.interval", "whole seconds"),
        ("retention = \"10m\"", "record.retention", "at least 1h"),
        ("max_bytes = 1024", "record.max_bytes", "at least 16384"),
        ("dir = \"record\"", "record.dir", "absolute path"),
        (
            "enabled = \"yes\"",
            "record.enabled",
            "true, false or \"auto\"",
        ),
        ("path = \"/x\"", "record.path", "unknown key"),
    ] {
        let (config, _file) = load(Some(&format!("[record]\n{toml}\n")), &[], &[]);
        let err = config.unwrap_err();
        assert_eq!(err.key, key, "{toml}: {err}");
        assert!(err.reason.contains(says), "{toml}: {err}");
    }
    let (config, _) = load(None, &[("LATENCYD_RECORD__RETENTION", "1m")], &[]);
    let err = config.unwrap_err();
    assert_eq!(
        err.source,
        "environment variable LATENCYD_RECORD__RETENTION"
    );
    let (config, _) = load(
        Some("[record]\nenabled = true\ndir = \"/tmp/r\"\ninterval = \"10s\"\n"),
        &[("LATENCYD_RECORD__RETENTION", "7d")],
        &[],
    );
    let record = config.unwrap().record;
    assert!(record.on());
    assert_eq!(record.interval_ns, 10 * NS_PER_SEC);
    assert_eq!(record.retention_ns, 7 * 86_400 * NS_PER_SEC);
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

#[test]
fn load_windows_are_off_by_default_and_read_as_scheduled() {
    let (config, _) = load(None, &[], &[]);
    let config = config.unwrap();
    assert_eq!(config.load.profile, None, "no load unless configured");
    let (config, _) = load(
        Some(
            "[load]\nprofile = \"irq\"\ncpus = \"1\"\nevery = \"1d\"\nat = \"02:30\"\nduration = \"45m\"\n",
        ),
        &[],
        &[],
    );
    let config = config.unwrap();
    assert_eq!(config.load.profile, Some(crate::load::Profile::Irq));
    assert_eq!(config.load.cpus, CpuSelection::List(vec![1]));
    assert_eq!(config.load.schedule.at.as_secs(), 9_000);
    assert_eq!(config.load.schedule.duration.as_secs(), 2_700);
    let (config, _) = load(None, &[("LATENCYD_LOAD__AT", "90s")], &[]);
    assert_eq!(config.unwrap().load.schedule.at.as_secs(), 90);
}

#[test]
fn bad_load_settings_name_the_key_and_what_is_accepted() {
    let err = |toml: &str| load(Some(toml), &[], &[]).0.unwrap_err().to_string();
    let e = err("[load]\nprofile = \"heavy\"\n");
    assert!(
        e.contains("load.profile") && e.contains("'heavy' is not a load profile"),
        "{e}"
    );
    assert!(e.contains("or \"none\""), "{e}");
    let e = err("[load]\nprofile = \"cpu\"\nevery = \"1h\"\nduration = \"2h\"\nat = \"0s\"\n");
    assert!(
        e.contains("load.duration = 2h is not shorter than load.every = 1h"),
        "{e}"
    );
    let e = err("[load]\nat = \"25:00\"\n");
    assert!(e.contains("load.at") && e.contains("\"HH:MM\""), "{e}");
    let e = err("[load]\nat = \"02:00\"\nevery = \"1h\"\nduration = \"30m\"\n");
    assert!(e.contains("is not within the period"), "{e}");
    let e = err("[load]\nprofile = \"cpu\"\nintensity = 3\n");
    assert!(e.contains("intensity"), "{e}");
}

#[test]
fn a_bare_port_listens_on_every_address() {
    // node_exporter's habit: `--web.listen-address :9100`.
    let (config, _) = load(
        None,
        &[],
        &[(
            "export.listen",
            ":9479,127.0.0.1:9480",
            "--web.listen-address",
        )],
    );
    assert_eq!(
        config.unwrap().export.listen,
        vec![
            "[::]:9479".parse::<std::net::SocketAddr>().unwrap(),
            "127.0.0.1:9480".parse().unwrap()
        ]
    );
    for bad in [":", ":port", ":65536", "9479"] {
        let (config, _) = load(None, &[], &[("export.listen", bad, "--web.listen-address")]);
        let err = config.unwrap_err().to_string();
        assert!(
            err.contains(&format!("'{bad}'")) && err.contains("\":9479\""),
            "{err}"
        );
    }
}
