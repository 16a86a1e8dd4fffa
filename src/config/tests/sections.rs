//! Each section's values: checked, and a refusal names the key, the
//! value and what is accepted.

use super::*;

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
