//! Access control on the real binary: `--web.config.file` with TLS
//! (certificates made here with `openssl`), client certificates, minimum
//! TLS versions and basic auth, checked with real clients — curl, and
//! Prometheus scraping with `scheme: https`, `basic_auth` and `tls_config`.

#[path = "../common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::*;

const USER: &str = "prometheus";
const PASSWORD: &str = "scrape-me";

fn web_config(dir: &Path, tls_extra: &str, with_users: bool) -> PathBuf {
    let mut text =
        format!("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n{tls_extra}");
    if with_users {
        // Cost 4: the tests need the check, not the strength.
        let hash = bcrypt::hash(PASSWORD, 4).unwrap();
        text.push_str(&format!("basic_auth_users:\n  {USER}: '{hash}'\n"));
    }
    let path = dir.join("web.yml");
    std::fs::write(&path, text).unwrap();
    path
}

fn start(dir: &Path, web: &Path) -> Daemon {
    Daemon::start(
        latencyd()
            .args(["run", "--config"])
            .arg(daemon_config(dir, "", "", ""))
            .arg("--web.config.file")
            .arg(web),
    )
}

/// curl's HTTP status (0 when no HTTP answer came) and its output.
fn curl(daemon: &Daemon, dir: &Path, path: &str, extra: &[&str]) -> (u16, Output) {
    let output = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-D",
            "-",
            "-w",
            "%{http_code}",
            "--max-time",
            "10",
        ])
        .arg("--cacert")
        .arg(dir.join("ca.crt"))
        .args(extra)
        .arg(format!("https://{}{path}", daemon.addr))
        .output()
        .expect("curl runs");
    let text = stdout_of(&output);
    let status = text
        .trim()
        .rsplit('\n')
        .next()
        .unwrap_or("")
        .trim()
        .parse()
        .unwrap_or(0);
    (status, output)
}

fn curl_found() {
    require_tool("curl", "--version", "curl");
}

#[test]
// Full tier: openssl, curl and a real Prometheus.
fn tls_with_basic_auth_right_and_wrong() {
    curl_found();
    let dir = tempfile::tempdir().unwrap();
    make_pki(dir.path());
    let web = web_config(dir.path(), "", true);
    let daemon = start(dir.path(), &web);
    assert!(
        daemon.log_text().contains("serving https://"),
        "{}",
        daemon.log_text()
    );
    assert!(daemon.log_text().contains("TLS, basic auth, 1 user"));

    let good = format!("{USER}:{PASSWORD}");
    let (status, _) = curl(&daemon, dir.path(), "/metrics", &["-u", &good]);
    assert_eq!(status, 200);
    // Remembered credentials still work, and every route is behind auth.
    for path in ["/metrics", "/healthz", "/api/v1/status", "/", "/nope"] {
        let (status, output) = curl(&daemon, dir.path(), path, &["-u", &good]);
        assert!(
            matches!(status, 200 | 404 | 503),
            "{path}: {}",
            stdout_of(&output)
        );
    }
    for (what, args) in [
        ("no credentials", vec![]),
        ("a wrong password", vec!["-u", "prometheus:guess"]),
        ("an unknown user", vec!["-u", "grafana:scrape-me"]),
        ("an empty password", vec!["-u", "prometheus:"]),
    ] {
        for path in ["/metrics", "/api/v1/latency", "/nope"] {
            let (status, output) = curl(&daemon, dir.path(), path, &args);
            let head = stdout_of(&output).to_ascii_lowercase();
            assert_eq!(status, 401, "{what} on {path}: {head}");
            assert!(
                head.contains("www-authenticate: basic realm=\"latencyd\""),
                "{what}: {head}"
            );
        }
    }
    // Every refusal was counted: 4 kinds of bad credentials on 3 paths.
    let output = Command::new("curl")
        .args(["-s", "--max-time", "10", "-u", &good, "--cacert"])
        .arg(dir.path().join("ca.crt"))
        .arg(format!("https://{}/metrics", daemon.addr))
        .output()
        .unwrap();
    let scrape = stdout_of(&output);
    assert_eq!(
        common::metric_value(&scrape, "latencyd_http_auth_failures_total"),
        Some(12.0),
        "{scrape}"
    );
    // The liveness probe is the one path open without credentials (a
    // kubelet probe carries none), and it tells nothing but that the
    // exporter answers; the refusals above were not joined by it.
    let (status, output) = curl(&daemon, dir.path(), "/livez", &[]);
    assert_eq!(status, 200, "{}", stdout_of(&output));
    let output = Command::new("curl")
        .args(["-s", "--max-time", "10", "--cacert"])
        .arg(dir.path().join("ca.crt"))
        .arg(format!("https://{}/livez", daemon.addr))
        .output()
        .unwrap();
    assert_eq!(stdout_of(&output), "{\"status\":\"alive\"}");
    assert_eq!(curl(&daemon, dir.path(), "/livez/x", &[]).0, 401);
    // Plain HTTP to the TLS port gets no metrics.
    if let Ok((status, body)) = http_get(daemon.addr, "/metrics") {
        assert_ne!(status, 200, "{body}");
    }
    // A client that does not trust the CA refuses the server.
    let output = Command::new("curl")
        .args(["-s", "--max-time", "10", "-u", &good])
        .arg(format!("https://{}/metrics", daemon.addr))
        .output()
        .unwrap();
    assert!(!output.status.success(), "an unknown CA must not verify");
}

#[test]
// Full tier: openssl, curl and a real Prometheus.
fn client_certificates_and_minimum_version_are_enforced() {
    curl_found();
    let dir = tempfile::tempdir().unwrap();
    make_pki(dir.path());
    let web = web_config(
        dir.path(),
        "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  \
         min_version: TLS13\n",
        false,
    );
    let daemon = start(dir.path(), &web);
    let cert = dir.path().join("client.crt");
    let key = dir.path().join("client.key");
    let with_cert = [
        "--cert",
        cert.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
    ];
    let (status, _) = curl(&daemon, dir.path(), "/metrics", &with_cert);
    assert_eq!(status, 200);
    let (status, _) = curl(&daemon, dir.path(), "/metrics", &[]);
    assert_eq!(status, 0, "no client certificate, no HTTP");
    // From the CA but for servers only (no clientAuth usage), and one the
    // CA never signed.
    for (name, why) in [("server", "without clientAuth"), ("rogue", "self-signed")] {
        let cert = dir.path().join(format!("{name}.crt"));
        let key = dir.path().join(format!("{name}.key"));
        let (status, _) = curl(
            &daemon,
            dir.path(),
            "/metrics",
            &[
                "--cert",
                cert.to_str().unwrap(),
                "--key",
                key.to_str().unwrap(),
            ],
        );
        assert_eq!(status, 0, "a client certificate {why} is refused");
    }
    let mut tls12 = with_cert.to_vec();
    tls12.extend(["--tls-max", "1.2"]);
    let (status, _) = curl(&daemon, dir.path(), "/metrics", &tls12);
    assert_eq!(status, 0, "TLS 1.2 is below min_version");
}

#[test]
// Full tier: openssl, curl and a real Prometheus.
fn bad_web_configurations_stop_the_start_with_exit_78() {
    let dir = tempfile::tempdir().unwrap();
    make_pki(dir.path());
    let config = daemon_config(dir.path(), "", "", "");
    let cases: Vec<(&str, String, &str)> = vec![
        ("missing file", String::new(), "cannot read"),
        (
            "missing key",
            "tls_server_config:\n  cert_file: server.crt\n".into(),
            "key_file is missing",
        ),
        (
            "absent certificate",
            "tls_server_config:\n  cert_file: nope.crt\n  key_file: server.key\n".into(),
            "nope.crt",
        ),
        (
            "a key that is not the certificate's",
            "tls_server_config:\n  cert_file: server.crt\n  key_file: client.key\n".into(),
            "do not make a usable certificate",
        ),
        (
            "a CA file that holds a key",
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  \
             client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.key\n"
                .into(),
            "no PEM certificate",
        ),
        (
            "plain-text password",
            "basic_auth_users:\n  alice: secret\n".into(),
            "not a bcrypt hash",
        ),
        ("YAML syntax", "basic_auth_users: {\n".into(), "web.yml"),
    ];
    for (what, text, message) in cases {
        let web = dir.path().join("web.yml");
        if what == "missing file" {
            let _ = std::fs::remove_file(&web);
        } else {
            std::fs::write(&web, text).unwrap();
        }
        let output = latencyd()
            .args(["run", "--config"])
            .arg(&config)
            .arg("--web.config.file")
            .arg(&web)
            .output()
            .unwrap();
        let stderr = stderr_of(&output);
        assert_eq!(output.status.code(), Some(78), "{what}: {stderr}");
        assert!(
            stderr.contains("export.web_config_file")
                && stderr.contains("--web.config.file")
                && stderr.contains(message),
            "{what}: {stderr}"
        );
        // check-config agrees.
        let toml = dir.path().join("with-web.toml");
        std::fs::write(
            &toml,
            format!(
                "[export]\nweb_config_file = {:?}\n",
                web.display().to_string()
            ),
        )
        .unwrap();
        let checked = latencyd().arg("check-config").arg(&toml).output().unwrap();
        assert_eq!(
            checked.status.code(),
            Some(78),
            "{what}: {}",
            stderr_of(&checked)
        );
    }
}

#[test]
// Full tier: openssl, curl and a real Prometheus.
fn sighup_applies_a_changed_password_to_new_requests() {
    curl_found();
    let dir = tempfile::tempdir().unwrap();
    make_pki(dir.path());
    let web = web_config(dir.path(), "", true);
    let daemon = start(dir.path(), &web);
    let old = format!("{USER}:{PASSWORD}");
    assert_eq!(curl(&daemon, dir.path(), "/healthz", &["-u", &old]).0, 200);
    let hash = bcrypt::hash("rotated", 4).unwrap();
    let text = std::fs::read_to_string(&web).unwrap();
    let rotated = text.split("basic_auth_users").next().unwrap().to_string()
        + &format!("basic_auth_users:\n  {USER}: '{hash}'\n");
    std::fs::write(&web, rotated).unwrap();
    daemon.signal(libc::SIGHUP);
    let new = format!("{USER}:rotated");
    wait_until(
        "the new password to work",
        Duration::from_millis(100),
        Duration::from_secs(10),
        || curl(&daemon, dir.path(), "/healthz", &["-u", &new]).0 == 200,
    );
    assert_eq!(curl(&daemon, dir.path(), "/healthz", &["-u", &old]).0, 401);

    // A broken file is refused; the running configuration stays.
    std::fs::write(&web, "basic_auth_users:\n  alice: secret\n").unwrap();
    daemon.signal(libc::SIGHUP);
    wait_until(
        "the refused reload to be logged",
        Duration::from_millis(100),
        Duration::from_secs(10),
        || daemon.log_text().contains("reload refused"),
    );
    assert_eq!(curl(&daemon, dir.path(), "/healthz", &["-u", &new]).0, 200);
}

#[test]
// Full tier: openssl, curl and a real Prometheus.
fn prometheus_scrapes_over_tls_with_basic_auth() {
    require_tool("prometheus", "--version", "prometheus");
    let dir = tempfile::tempdir().unwrap();
    make_pki(dir.path());
    let web = web_config(
        dir.path(),
        "  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.crt\n",
        true,
    );
    let daemon = start(dir.path(), &web);
    let prometheus_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // The scrape configuration docs/configuration.md documents.
    std::fs::write(
        dir.path().join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: latencyd\n    \
             scheme: https\n    basic_auth:\n      username: {USER}\n      password: {PASSWORD}\n    \
             tls_config:\n      ca_file: {dir}/ca.crt\n      cert_file: {dir}/client.crt\n      \
             key_file: {dir}/client.key\n    static_configs:\n      - targets: ['{addr}']\n",
            dir = dir.path().display(),
            addr = daemon.addr
        ),
    )
    .unwrap();
    let mut prometheus = Command::new("prometheus")
        .arg(format!(
            "--config.file={}/prometheus.yml",
            dir.path().display()
        ))
        .arg(format!("--storage.tsdb.path={}/tsdb", dir.path().display()))
        .arg(format!("--web.listen-address=127.0.0.1:{prometheus_port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let api: std::net::SocketAddr = format!("127.0.0.1:{prometheus_port}").parse().unwrap();
    let mut last = String::new();
    let healthy = (0..300).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        if let Ok((200, body)) = http_get(api, "/api/v1/targets") {
            last = body;
            last.contains("\"health\":\"up\"")
        } else {
            false
        }
    });
    let _ = prometheus.kill();
    let _ = prometheus.wait();
    assert!(
        healthy,
        "Prometheus never scraped latencyd successfully: {last}"
    );
}
