//! The operations kit checked with the real tools: promtool on the rules,
//! their unit tests and the scrape configuration; systemd-analyze on the
//! unit (security exposure at most 2.0, verify clean); systemd-sysusers
//! on the user entry; every YAML file and every latencyd configuration
//! under deploy/ with the real parsers. (tests/ops.rs checks what needs
//! no outside tool.)

#[path = "../common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use latencyd::config::{Config, Sources};

#[test]
// Full tier: promtool.
fn rules_rule_tests_and_scrape_config_pass_promtool() {
    tool("promtool", "prometheus");
    let dir = repo_root().join("deploy/prometheus");
    let (ok, said) = run_in(&dir, "promtool", &["check", "rules", "latencyd.rules.yml"]);
    assert!(ok && said.contains("SUCCESS: 30 rules found"), "{said}");
    let (ok, said) = run_in(
        &dir,
        "promtool",
        &["test", "rules", "latencyd.rules.test.yml"],
    );
    assert!(ok && said.contains("SUCCESS"), "{said}");
    let (ok, said) = run_in(&dir, "promtool", &["check", "config", "prometheus.yml"]);
    assert!(ok, "{said}");
    // Every alert has a firing and a quiet case in the rule tests.
    let rules = std::fs::read_to_string(dir.join("latencyd.rules.yml")).unwrap();
    let tests = std::fs::read_to_string(dir.join("latencyd.rules.test.yml")).unwrap();
    for alert in rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
    {
        let cases: Vec<&str> = tests
            .split("alertname: ")
            .skip(1)
            .filter(|c| c.starts_with(alert))
            .collect();
        let quiet = cases.iter().any(|c| {
            c.lines()
                .nth(1)
                .is_some_and(|l| l.contains("exp_alerts: []"))
        });
        let firing = cases
            .iter()
            .any(|c| c.lines().nth(1).is_some_and(|l| !l.contains("[]")));
        assert!(
            quiet && firing,
            "{alert} needs a firing and a quiet test case"
        );
    }
}

/// The exposure score systemd-analyze gives a unit file.
fn exposure(unit: &Path) -> f64 {
    let (ok, said) = run_in(
        &repo_root(),
        "systemd-analyze",
        &["security", "--offline=true", unit.to_str().unwrap()],
    );
    assert!(ok, "{said}");
    said.lines()
        .find_map(|l| l.split("exposure level for latencyd.service: ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|score| score.parse().ok())
        .unwrap_or_else(|| panic!("no exposure score in: {said}"))
}

#[test]
// Full tier: systemd-analyze.
fn the_unit_is_hardened_and_verifies_clean() {
    tool("systemd-analyze", "systemd");
    let unit_path = repo_root().join("systemd/latencyd.service");
    let unit = std::fs::read_to_string(&unit_path).unwrap();
    let dir = tempfile::tempdir().unwrap();

    let score = exposure(&unit_path);
    assert!(score <= 2.0, "exposure {score} > 2.0");
    // The unit with a drop-in's [Service] settings merged in, rated.
    let merged_dir = dir.path().join("merged");
    std::fs::create_dir(&merged_dir).unwrap();
    let with_drop_in = |name: &str| -> (String, f64) {
        let drop_in =
            std::fs::read_to_string(repo_root().join("deploy/systemd").join(name)).unwrap();
        let extra: String = drop_in
            .lines()
            .skip_while(|l| *l != "[Service]")
            .skip(1)
            .map(|l| format!("{l}\n"))
            .collect();
        let merged = unit.replace("[Install]", &format!("{extra}\n[Install]"));
        std::fs::write(merged_dir.join("latencyd.service"), merged).unwrap();
        (drop_in, exposure(&merged_dir.join("latencyd.service")))
    };
    // With the PM QoS drop-in, still within bounds.
    let (_, score) = with_drop_in("latencyd-pmqos.conf");
    assert!(
        score <= 2.0,
        "exposure with the PM QoS drop-in {score} > 2.0"
    );
    // With the load drop-in (tasks and stop time only): no wider.
    let (drop_in, load_score) = with_drop_in("latencyd-load.conf");
    assert!(drop_in.contains("TasksMax=infinity") && drop_in.contains("TimeoutStopSec=20s"));
    assert!(
        load_score <= 2.0,
        "exposure with the load drop-in {load_score} > 2.0, the base unit's bound"
    );
    // With the forensics drop-in (tracefs, capabilities, MSR reads): the
    // rating its comment states.
    let (drop_in, score) = with_drop_in("latencyd-forensics.conf");
    assert!(drop_in.contains("rates the unit with this\n# drop-in 2.1"));
    assert!(
        drop_in.contains("StateDirectory=latencyd")
            && drop_in.contains("ReadWritePaths=/sys/kernel/tracing")
    );
    assert!(
        score <= 2.1,
        "exposure with the forensics drop-in {score} > 2.1"
    );
    // With the observe drop-in (the same, and other users' processes
    // visible in /proc): the rating its comment states.
    let (drop_in, score) = with_drop_in("latencyd-observe.conf");
    assert!(drop_in.contains("rates\n# the unit with this drop-in 2.2"));
    assert!(
        drop_in.contains("ProtectProc=default")
            && drop_in.contains("ReadWritePaths=/sys/kernel/tracing")
    );
    assert!(
        score <= 2.2,
        "exposure with the observe drop-in {score} > 2.2"
    );

    // What the unit must say, line by line.
    for needed in [
        "Type=notify",
        "WatchdogSec=",
        "Restart=on-failure",
        "RestartPreventExitStatus=77 78",
        "User=latencyd",
        "LimitRTPRIO=",
        "LimitMEMLOCK=infinity",
    ] {
        assert!(
            unit.lines().any(|l| l.starts_with(needed)),
            "the unit lacks {needed}"
        );
    }
    for forbidden in [
        "CPUSchedulingPolicy=",
        "RestrictRealtime=",
        "AmbientCapabilities=CAP",
    ] {
        assert!(
            !unit.lines().any(|l| l.starts_with(forbidden)),
            "the unit sets {forbidden}"
        );
    }

    // verify wants ExecStart to exist: point a copy at the binary under test.
    let copy = dir.path().join("latencyd.service");
    std::fs::write(
        &copy,
        unit.replace("/usr/bin/latencyd", env!("CARGO_BIN_EXE_latencyd")),
    )
    .unwrap();
    let (ok, said) = run_in(
        &repo_root(),
        "systemd-analyze",
        &["verify", copy.to_str().unwrap()],
    );
    assert!(
        ok && said.trim().is_empty(),
        "systemd-analyze verify: {said}"
    );
}

#[test]
// Full tier: python3 with PyYAML.
fn every_yaml_file_and_latencyd_configuration_under_deploy_parses() {
    let probe = Command::new("python3").args(["-c", "import yaml"]).output();
    assert!(
        probe.is_ok_and(|o| o.status.success()),
        "python3 with PyYAML is missing (scripts/test installs it as root)"
    );
    let mut yaml_files = Vec::new();
    let mut toml_files = Vec::new();
    for top in ["deploy", "grafana"] {
        let mut stack = vec![repo_root().join(top)];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "yml" || e == "yaml") {
                    yaml_files.push(path);
                } else if path.extension().is_some_and(|e| e == "toml")
                    && path.parent().is_some_and(|d| d.ends_with("qualify"))
                {
                    // `latencyd qualify`'s ready profiles, read as qualify reads them.
                    let text = std::fs::read_to_string(&path).unwrap();
                    if let Err(err) = latencyd::qualify::Profile::parse(&text) {
                        panic!("{}: {err}", path.display());
                    }
                } else if path.extension().is_some_and(|e| e == "toml") {
                    toml_files.push(path);
                }
            }
        }
    }
    assert!(yaml_files.len() >= 6, "{yaml_files:?}");
    // Each file: every document parses; a ConfigMap's latencyd.toml is
    // printed so it can be loaded with latencyd's own parser, as are the
    // .toml files kustomize makes ConfigMaps of.
    let script = "import sys, yaml\n\
        for path in sys.argv[1:]:\n\
        \x20   for doc in yaml.safe_load_all(open(path)):\n\
        \x20       if isinstance(doc, dict) and doc.get('kind') == 'ConfigMap' \\\n\
        \x20               and 'latencyd.toml' in doc.get('data', {}):\n\
        \x20           print('@@@' + doc['data']['latencyd.toml'])\n";
    let output = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(&yaml_files)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    let configs: Vec<String> = stdout_of(&output)
        .split("@@@")
        .skip(1)
        .map(str::to_string)
        .collect();
    assert!(
        !toml_files.is_empty(),
        "the Kubernetes base's latencyd.toml is under deploy/"
    );

    let dir = tempfile::tempdir().unwrap();
    let mut files: Vec<PathBuf> = vec![repo_root().join("config.example.toml")];
    files.extend(toml_files);
    for (i, text) in configs.iter().enumerate() {
        let path = dir.path().join(format!("configmap-{i}.toml"));
        std::fs::write(&path, text).unwrap();
        files.push(path);
    }
    for file in files {
        let sources = Sources {
            file: Some(file.clone()),
            flags: vec![],
        };
        let no_env = config::Environment::with_prefix("LATENCYD").source(Some(Default::default()));
        if let Err(err) = Config::load_with_env(
            &sources,
            no_env,
            latencyd::instruments::registry::config_sections(),
        ) {
            panic!("{}: {err}", file.display());
        }
    }
}

#[test]
// Full tier: root and systemd-sysusers.
fn the_sysusers_entry_is_valid() {
    if !privileged() {
        report_skip(
            "the_sysusers_entry_is_valid",
            "not root: systemd-sysusers needs to read /etc/shadow",
        );
        return;
    }
    tool("systemd-sysusers", "systemd");
    let path = repo_root().join("systemd/latencyd.sysusers");
    let (ok, said) = run_in(
        &repo_root(),
        "systemd-sysusers",
        &["--dry-run", path.to_str().unwrap()],
    );
    assert!(ok, "{said}");
}

fn tool(name: &str, package: &str) {
    require_tool(name, "--version", package);
}
