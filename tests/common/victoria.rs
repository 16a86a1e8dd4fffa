//! VictoriaMetrics' programs from Debian's `victoria-metrics` package, for
//! end-to-end tests on loopback with temporary storage: the single-node
//! database (queried through its Prometheus-compatible API), vmagent and
//! vmalert.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::prometheus::{Prometheus, free_port};
use super::{http_get, require_tool, wait_until};

/// A VictoriaMetrics program, killed when dropped.
pub struct Program {
    child: Child,
    pub addr: SocketAddr,
}

impl Drop for Program {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `program` with `args` and `-httpListenAddr` on a free port,
/// logging to `dir/<program>.log`, and waits for its `/health`.
fn spawn(dir: &Path, program: &str, args: &[String]) -> (Child, SocketAddr) {
    require_tool(program, "-version", "victoria-metrics");
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let log = std::fs::File::create(dir.join(format!("{program}.log"))).unwrap();
    let child = Command::new(program)
        .args(args)
        .arg(format!("-httpListenAddr={addr}"))
        .arg("-loggerLevel=WARN")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    wait_until(
        &format!("{program} to answer /health"),
        Duration::from_millis(100),
        Duration::from_secs(30),
        || http_get(addr, "/health").is_ok_and(|(status, _)| status == 200),
    );
    (child, addr)
}

/// The single-node VictoriaMetrics, storing in `dir`, queried as a
/// Prometheus is. Its queries see samples at once
/// (`-search.latencyOffset=0s`; by default the last 30 s are hidden).
pub fn victoria_metrics(dir: &Path) -> Prometheus {
    let (child, addr) = spawn(
        dir,
        "victoria-metrics",
        &[
            format!("-storageDataPath={}", dir.join("data").display()),
            "-retentionPeriod=1d".to_string(),
            "-search.latencyOffset=0s".to_string(),
            "-search.disableCache".to_string(),
        ],
    );
    Prometheus::adopt(child, addr)
}

/// vmagent with the scrape configuration `config`, writing to every URL
/// of `remote_write`, buffering in `dir`.
pub fn vmagent(dir: &Path, config: &str, remote_write: &[String]) -> Program {
    std::fs::write(dir.join("vmagent.yml"), config).unwrap();
    let mut args = vec![
        format!("-promscrape.config={}", dir.join("vmagent.yml").display()),
        format!("-remoteWrite.tmpDataPath={}", dir.join("buffer").display()),
        "-remoteWrite.flushInterval=200ms".to_string(),
    ];
    args.extend(
        remote_write
            .iter()
            .map(|url| format!("-remoteWrite.url={url}")),
    );
    let (child, addr) = spawn(dir, "vmagent", &args);
    Program { child, addr }
}

/// vmalert evaluating `rules` every second against `datasource`, writing
/// the alerts' state (`ALERTS`) back there, notifying `notifier`.
pub fn vmalert(dir: &Path, rules: &str, datasource: SocketAddr, notifier: &str) -> Program {
    std::fs::write(dir.join("vmalert-rules.yml"), rules).unwrap();
    let (child, addr) = spawn(
        dir,
        "vmalert",
        &[
            format!("-rule={}", dir.join("vmalert-rules.yml").display()),
            format!("-datasource.url=http://{datasource}"),
            format!("-remoteWrite.url=http://{datasource}"),
            format!("-notifier.url={notifier}"),
            "-evaluationInterval=1s".to_string(),
        ],
    );
    Program { child, addr }
}
