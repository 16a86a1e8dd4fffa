//! The operations kit checked without outside tools: every alert listed in
//! docs/operations.md and linked to its runbook section (served by a
//! running daemon), every configuration key documented with its default,
//! the man page, the Yocto crate list, and the test gate's own summary
//! (scripts/test-summary, with the skips that scripts/allowed-skips
//! allows under CI=true). The real tools' checks are tests/full/deploy_tools.rs.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;

/// The shipped runbook links: the daemon that fired the alert, or the
/// package's copy for the two alerts that fire when no daemon answers
/// (deploy/prometheus/set-runbook-base.py writes both).
const RUNBOOK_BASE: &str = "http://{{ $labels.instance }}/runbooks#";
const RUNBOOK_FALLBACK: &str = "file:///usr/share/doc/latencyd/runbooks.md#";
const NO_DAEMON_ANSWERS: &[&str] = &["LatencydTargetDown", "LatencydAbsent"];

/// (alert, runbook_url) of every alert of a rule file, in order.
fn runbook_links(rules: &str) -> Vec<(String, String)> {
    rules
        .split("- alert: ")
        .skip(1)
        .map(|chunk| {
            let name = chunk.lines().next().unwrap().trim().to_string();
            let url = chunk
                .lines()
                .find_map(|l| l.trim().strip_prefix("runbook_url: "))
                .unwrap_or_else(|| panic!("{name} has no runbook_url"))
                .trim_matches('"')
                .to_string();
            (name, url)
        })
        .collect()
}

#[test]
fn operations_md_lists_every_shipped_alert_in_the_rule_files_order() {
    let rules =
        std::fs::read_to_string(repo_root().join("deploy/prometheus/latencyd.rules.yml")).unwrap();
    let shipped: Vec<String> = runbook_links(&rules).into_iter().map(|(n, _)| n).collect();
    let listed: Vec<String> = doc_table_rows("docs/operations.md", "Operations kit")
        .into_iter()
        .map(|cells| cells[0].clone())
        .filter(|name| name.starts_with("Latencyd"))
        .collect();
    assert_eq!(
        listed, shipped,
        "docs/operations.md's alert table (left) differs from deploy/prometheus/latencyd.rules.yml (right)"
    );
}

#[test]
fn every_alert_links_to_a_runbook_section_that_says_what_why_and_how() {
    let rules =
        std::fs::read_to_string(repo_root().join("deploy/prometheus/latencyd.rules.yml")).unwrap();
    let runbooks = std::fs::read_to_string(repo_root().join("docs/runbooks.md")).unwrap();
    // The sections of the runbook, by anchor, with their text.
    let mut sections = std::collections::HashMap::new();
    for section in runbooks.split("\n## ").skip(1) {
        let (heading, body) = section.split_once('\n').unwrap_or((section, ""));
        sections.insert(
            latencyd::daemon::render::runbooks::anchor(heading),
            body.to_string(),
        );
    }
    let links = runbook_links(&rules);
    assert!(links.len() >= 9, "{} alerts", links.len());
    // The PrometheusRule links exactly as the rule file does.
    let operator_rules =
        std::fs::read_to_string(repo_root().join("deploy/kubernetes/base/prometheusrule.yaml"))
            .unwrap();
    assert_eq!(runbook_links(&operator_rules), links);
    for (name, url) in &links {
        let base = if NO_DAEMON_ANSWERS.contains(&name.as_str()) {
            RUNBOOK_FALLBACK
        } else {
            RUNBOOK_BASE
        };
        let anchor = url
            .strip_prefix(base)
            .unwrap_or_else(|| panic!("{name}: runbook_url {url} is not under {base}"));
        assert_eq!(anchor, name.to_lowercase(), "{name}: anchor {anchor}");
        let body = sections
            .get(anchor)
            .unwrap_or_else(|| panic!("{name}: docs/runbooks.md has no section #{anchor}"));
        for part in [
            "**What it means.**",
            "**How to confirm.**",
            "**What to do.**",
        ] {
            assert!(body.contains(part), "{name}'s runbook lacks {part}");
        }
    }
    // The fallback is where the package puts its copy.
    let manifest = std::fs::read_to_string(repo_root().join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains("[\"docs/runbooks.md\", \"usr/share/doc/latencyd/\", \"644\"]"),
        "the package installs docs/runbooks.md where LatencydTargetDown and LatencydAbsent link"
    );
}

#[test]
fn every_alert_link_opens_its_heading_on_a_running_daemon() {
    let rules =
        std::fs::read_to_string(repo_root().join("deploy/prometheus/latencyd.rules.yml")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_with_export(dir.path(), "");
    for (name, url) in runbook_links(&rules) {
        // As Prometheus renders it for an alert from this daemon; the two
        // that fire when no daemon answers name the same section, which
        // any daemon serves too.
        let url = url
            .replace("{{ $labels.instance }}", &daemon.addr.to_string())
            .replace(
                RUNBOOK_FALLBACK,
                &format!("http://{}/runbooks#", daemon.addr),
            );
        let rest = url
            .strip_prefix(&format!("http://{}", daemon.addr))
            .unwrap_or_else(|| panic!("{name}: {url} does not lead to the daemon"));
        let (path, anchor) = rest.split_once('#').unwrap();
        let (status, page) = daemon.get(path);
        assert_eq!(status, 200, "{name}: GET {path}: {page}");
        let heading = format!("<h2 id=\"{anchor}\">{name}</h2>");
        assert!(page.contains(&heading), "{name}: no {heading} at {path}");
    }
}

/// `section.key` -> default (as written) of every key in a TOML file laid
/// out as config.example.toml is: `[section]` headers, `key = value`.
fn example_keys(toml: &str) -> Vec<(String, String)> {
    let mut section = String::new();
    let mut keys = Vec::new();
    for line in toml.lines() {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_string();
        } else if let Some((key, value)) = line.split_once(" = ")
            && !line.starts_with('#')
            && !section.is_empty()
        {
            keys.push((format!("{section}.{key}"), value.to_string()));
        }
    }
    keys
}

#[test]
fn docs_configuration_md_has_every_key_of_the_example_with_its_default() {
    let example = std::fs::read_to_string(repo_root().join("config.example.toml")).unwrap();
    let keys = example_keys(&example);
    assert!(
        keys.len() >= 30,
        "{} keys in config.example.toml",
        keys.len()
    );
    let rows: Vec<(String, String)> = doc_table_rows("docs/configuration.md", "Every key")
        .into_iter()
        .map(|cells| (cells[0].clone(), cells[1].trim_matches('`').to_string()))
        .collect();
    assert_eq!(
        rows, keys,
        "docs/configuration.md's key table (left) differs from config.example.toml (right): \
         every key, in the example's order, with the example's default"
    );
    // And the example is what the daemon reads: every key loads.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("latencyd.toml");
    std::fs::write(&file, &example).unwrap();
    let out = run_ok(
        latencyd()
            .args(["check-config"])
            .arg(&file)
            .env_remove("LATENCYD_MEASURE__CPUS")
            // Without real-time privileges (the unprivileged pass) the
            // example's `required = true` refuses to start; every other
            // key is still read and checked.
            .env("LATENCYD_REALTIME__REQUIRED", "false"),
    );
    let effective = stdout_of(&out);
    for (key, _) in &keys {
        let leaf = key.split('.').nth(1).unwrap();
        assert!(
            effective.contains(leaf),
            "{key} is not in check-config's output"
        );
    }
    // The defaults written are the daemon's: check-config of an empty
    // file prints the built-in ones.
    let empty = dir.path().join("empty.toml");
    std::fs::write(&empty, "").unwrap();
    let out = run_ok(
        latencyd()
            .args(["check-config"])
            .arg(&empty)
            .env_remove("LATENCYD_MEASURE__CPUS")
            .env("LATENCYD_REALTIME__REQUIRED", "false"),
    );
    let builtin: Vec<(String, String)> = example_keys(&stdout_of(&out))
        .into_iter()
        .map(|(key, value)| (key, value.split("  #").next().unwrap().trim().to_string()))
        .collect();
    for (key, value) in &keys {
        if key == "realtime.required" {
            continue; // set above for the unprivileged pass
        }
        let daemon = builtin.iter().find(|(k, _)| k == key).map(|(_, v)| v);
        assert_eq!(
            daemon,
            Some(value),
            "{key}: config.example.toml and docs/configuration.md say {value}, the daemon's \
             built-in default is {daemon:?}"
        );
    }
    // The overview names every section check-config prints.
    let doc = std::fs::read_to_string(repo_root().join("docs/configuration.md")).unwrap();
    let overview = doc.split("| exit status |").next().unwrap();
    for section in stdout_of(&out).lines().filter(|l| l.starts_with('[')) {
        assert!(
            overview.contains(&format!("`{section}`")),
            "docs/configuration.md's overview does not name {section}"
        );
    }
}

/// Pages outside this package that latencyd(8)'s SEE ALSO may name, with
/// the Debian package that installs each.
const PAGES_ELSEWHERE: &[(&str, &str)] = &[
    ("cyclictest(8)", "rt-tests"),
    ("systemd.exec(5)", "systemd"),
];

#[test]
fn the_man_page_is_listed_in_help_and_names_only_pages_that_exist() {
    let help = stdout_of(&run_ok(latencyd().arg("--help")));
    assert!(
        help.lines().any(|l| l.trim_start().starts_with("manpage ")),
        "--help lists the manpage command: {help}"
    );
    let page = stdout_of(&run_ok(latencyd().arg("manpage")));
    // The commands are sections of this page, not pages of their own.
    for (i, _) in page.match_indices("see LATENCYD ") {
        let name = page[i + 4..].split(" below").next().unwrap();
        assert!(
            page.contains(&format!(".SH \"{name}\"")),
            "the page points to a section {name} it lacks"
        );
    }
    let references: Vec<&str> = page
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| {
            w.ends_with(')')
                && w.split_once('(').is_some_and(|(n, s)| {
                    !n.is_empty() && s.len() == 2 && s.as_bytes()[0].is_ascii_digit()
                })
        })
        .collect();
    assert!(!references.is_empty(), "SEE ALSO names pages");
    for reference in references {
        let known = PAGES_ELSEWHERE.iter().find(|(p, _)| *p == reference);
        assert!(
            reference == "latencyd(8)" || known.is_some(),
            "latencyd(8) names {reference}, which neither it nor PAGES_ELSEWHERE's packages install"
        );
        // Where man itself is installed, the page is there too.
        let (name, section) = reference.trim_end_matches(')').split_once('(').unwrap();
        match Command::new("man").args(["-w", section, name]).output() {
            Ok(out) if out.status.success() => {}
            Ok(_) if reference != "latencyd(8)" => report_skip(
                "the_man_page_is_listed_in_help_and_names_only_pages_that_exist",
                &format!(
                    "man -w does not find {reference} (its package, {}, or its man pages are not installed)",
                    known.unwrap().1
                ),
            ),
            _ => {}
        }
    }
}

/// Every entry of scripts/allowed-skips has a scope, a pattern grep takes
/// and a why above it; and the gate's summary fails under CI=true exactly
/// for a skip that no entry allows where it happened.
#[test]
fn the_gate_fails_under_ci_for_a_skip_no_entry_allows() {
    let list = std::fs::read_to_string(repo_root().join("scripts/allowed-skips")).unwrap();
    let mut said_why = false;
    for line in list.lines() {
        if line.starts_with('#') {
            said_why = true;
            continue;
        }
        if line.trim().is_empty() {
            said_why = false;
            continue;
        }
        let (scope, pattern) = line.split_once(' ').expect("SCOPE PATTERN");
        assert!(["any", "root", "unprivileged"].contains(&scope), "{line}");
        assert!(said_why, "no why above: {line}");
        let grep = Command::new("grep")
            .args(["-qE", pattern, "/dev/null"])
            .status()
            .unwrap();
        assert_eq!(grep.code(), Some(1), "grep -E does not take: {pattern}");
    }
    let dir = tempfile::tempdir().unwrap();
    let log = |name: &str, lines: &[&str]| {
        let path = dir.path().join(name);
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        path
    };
    let skip = |test: &str, why: &str| format!("*** SKIPPED PART of {test}: {why} ***");
    let allowed = skip(
        "h",
        "LATENCYD_RTEVAL_DIR is not set: point it at a checkout",
    );
    let not_root = skip("m", "not root: SCHED_FIFO is not available to check");
    let no_font = skip("p", "no TrueType font (install fonts-dejavu-core)");
    let ok = "test result: ok. 7 passed; 0 failed; 0 ignored";
    let summary = |root_log: &Path, unprivileged_log: &Path, ci: bool| {
        let mut cmd = Command::new(repo_root().join("scripts/test-summary"));
        cmd.arg(root_log).arg(unprivileged_log).env_remove("CI");
        if ci {
            cmd.env("CI", "true");
        }
        let output = cmd.output().unwrap();
        (output.status.success(), stdout_of(&output))
    };
    let clean = log("clean", &[&allowed, ok]);
    let unprivileged = log("nobody", &[&not_root, ok]);
    let (passed, said) = summary(&clean, &unprivileged, true);
    assert!(passed, "{said}");
    assert!(said.contains("skipped parts: 2"), "{said}");
    assert!(said.ends_with("total: 14 passed, 0 failed\n"), "{said}");
    // A missing font is an install step left out: listed, and fatal only
    // under CI=true; "not root" is allowed only in the unprivileged pass.
    let fonts = log("fonts", &[&no_font, &not_root, ok]);
    let (passed, said) = summary(&fonts, &unprivileged, false);
    assert!(passed, "{said}");
    assert!(said.contains(&format!("  root: {no_font}")), "{said}");
    assert!(said.contains(&format!("  root: {not_root}")), "{said}");
    let (passed, said) = summary(&fonts, &unprivileged, true);
    assert!(!passed, "{said}");
    assert!(said.contains("skips not allowed under CI=true"), "{said}");
    assert!(
        !said.contains(&format!("unprivileged: {not_root}")),
        "{said}"
    );
    // A failed test fails the summary whatever the skips.
    let failed = log("failed", &["test x ... FAILED", ok]);
    let (passed, said) = summary(&failed, Path::new("/dev/null"), false);
    assert!(
        !passed && said.contains("failed tests:\n  test x ... FAILED"),
        "{said}"
    );
    // The kernel matrix's failures are named (CI shows the summary's
    // tail), and so is a check that needed its second boot.
    let matrix = log(
        "matrix",
        &[
            "kernel-matrix: 6.1-rt-amd64 attempt 1: ✗ observer decodes: lost 7; booting it again",
            "✗ 6.12-rt-arm64 observer decodes: lost 9",
            "kernel-matrix: 231 passed, 1 failed",
            ok,
        ],
    );
    let (passed, said) = summary(&matrix, Path::new("/dev/null"), false);
    assert!(!passed, "{said}");
    assert!(
        said.contains("failed tests:\n  ✗ 6.12-rt-arm64 observer decodes: lost 9"),
        "{said}"
    );
    assert!(
        said.contains("before the last:\n  6.1-rt-amd64 attempt 1: ✗ observer decodes"),
        "{said}"
    );
    assert!(said.ends_with("total: 238 passed, 1 failed\n"), "{said}");
}

/// The Yocto recipe's crate list is Cargo.lock's, with its checksums:
/// `deploy/yocto/update-crates --check` fails while they disagree, so a
/// dependency change that forgets the layer fails here.
#[test]
fn the_yocto_crate_list_matches_cargo_lock() {
    let (ok, output) = run_in(
        &repo_root(),
        "python3",
        &["deploy/yocto/update-crates", "--check"],
    );
    assert!(ok, "{output}");
    let inc = std::fs::read_to_string(
        repo_root().join("deploy/yocto/meta-latencyd/recipes-support/latencyd/latencyd-crates.inc"),
    )
    .unwrap();
    let lock = std::fs::read_to_string(repo_root().join("Cargo.lock")).unwrap();
    let registry = lock
        .matches("source = \"registry+https://github.com/rust-lang/crates.io-index\"")
        .count();
    assert_eq!(inc.matches("crate://crates.io/").count(), registry);
    assert_eq!(inc.matches(".sha256sum] = \"").count(), registry);
}
