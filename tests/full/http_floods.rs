//! Floods one client can send, against the real binary: idle sockets
//! while the liveness probe asks, range reads of a 20 MB record, wrong
//! passwords. The probes answer throughout; the expensive work runs a few
//! at a time, stops with its request, and leaves no work and no memory
//! behind (resident memory back within a few MB of where it was).

#[path = "../common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;

/// A `/proc/PID/status` field, in its own unit (kB for memory).
fn proc_status(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn rss_kib(daemon: &Daemon) -> u64 {
    proc_status(daemon.pid(), "VmRSS:")
}

fn threads(daemon: &Daemon) -> u64 {
    proc_status(daemon.pid(), "Threads:")
}

/// The status code of one request on a fresh connection, or 0 when the
/// server closed without answering.
fn status_of_get(addr: SocketAddr, path: &str, extra: &str) -> u16 {
    let Ok(mut stream) = TcpStream::connect(addr) else {
        return 0;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(15)));
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{extra}Connection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return 0;
    }
    let mut head = [0u8; 12];
    match stream.read_exact(&mut head) {
        Ok(()) => std::str::from_utf8(&head[9..12])
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        Err(_) => 0,
    }
}

#[test]
// Full tier: floods of connections, about 25 s.
fn the_liveness_probe_answers_through_a_flood_of_idle_sockets() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_with_export(dir.path(), "header_timeout = \"30s\"\n");
    let addr = daemon.addr;
    // 300 idle sockets (more than the 256 slots), each opened again as
    // soon as the server closes it, for as long as the probes run.
    let stop = Arc::new(AtomicBool::new(false));
    let flood = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut sockets: Vec<TcpStream> = Vec::new();
            let mut opened = 0u64;
            while !stop.load(Ordering::Relaxed) {
                sockets.retain(|s| {
                    let _ = s.set_nonblocking(true);
                    let mut byte = [0u8; 1];
                    !matches!((&*s).read(&mut byte), Ok(0))
                });
                while sockets.len() < 300 {
                    match TcpStream::connect(addr) {
                        Ok(s) => {
                            sockets.push(s);
                            opened += 1;
                        }
                        Err(_) => break,
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            opened
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    let mut answers = Vec::new();
    for _ in 0..30 {
        answers.push(status_of_get(addr, "/livez", ""));
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    let opened = flood.join().unwrap();
    assert!(
        opened > 300,
        "the flood reconnected: {opened} sockets opened"
    );
    assert!(
        answers.iter().all(|&s| s == 200),
        "/livez answered {answers:?} through {opened} idle sockets"
    );
}

/// A record of about 30 MB in `dir`: 2 CPUs, one interval a second for
/// 14 hours, each with a histogram of 1,000 samples; written in one go
/// (the daemon's writer syncs every interval).
fn big_record(dir: &Path) -> u64 {
    use latencyd::record::format::{encode_entry, header};
    use latencyd::record::{Entry, writer};
    use latencyd::stats::LatencyStats;
    let mut stats = LatencyStats::new(100_000, None);
    for i in 0..1_000u64 {
        stats.record(5_000 + (i * 7919) % 40_000, 0);
    }
    let t0 = latencyd::units::unix_now_ns() / 1_000_000_000 - 50_400;
    // Each CPU's lines once; then only the start differs.
    let lines: Vec<String> = (0..2)
        .map(|cpu| {
            let entry = Entry {
                cpu,
                start_ns: t0 * 1_000_000_000,
                length_ns: 1_000_000_000,
                stats: stats.clone(),
                fingerprint: None,
                load: None,
                hwnoise: false,
                timerlat: None,
            };
            let mut lines = String::new();
            encode_entry(&entry, &mut lines);
            lines
        })
        .collect();
    let mut text = header(t0 * 1_000_000_000, None);
    let first = format!(",{t0}.000,");
    for k in 0..50_400u64 {
        for cpu_lines in &lines {
            text.push_str(&cpu_lines.replace(&first, &format!(",{}.000,", t0 + k)));
        }
    }
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(writer::file_name(t0 * 1_000_000_000)), &text).unwrap();
    text.len() as u64
}

/// The daemon's threads: how many are its own (main, samplers, ...), and
/// the CPU time in ns used so far by each thread of the async runtime's
/// blocking pool (`tokio-rt-worker`, where range reads and bcrypt run).
fn thread_census(daemon: &Daemon) -> (u64, HashMap<String, u64>) {
    let (mut own, mut pool) = (0, HashMap::new());
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", daemon.pid())) else {
        return (0, pool);
    };
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim_end() == "tokio-rt-worker" {
            let ran_ns = std::fs::read_to_string(task.path().join("schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                .unwrap_or(0);
            pool.insert(task.file_name().to_string_lossy().into_owned(), ran_ns);
        } else {
            own += 1;
        }
    }
    (own, pool)
}

/// Waits (up to 15 s) until the flood has left nothing behind: the
/// daemon's own threads back to `own_before`, the blocking pool idle
/// (under 10 ms of CPU in a second: no read or bcrypt runs on), and
/// resident memory within `slack_kib` of `rss_before`. Idle threads of the
/// pool are not counted: tokio keeps each for 10 s, and the daemon's
/// periodic reads of the host start one at times of their own.
fn settles_back(daemon: &Daemon, own_before: u64, rss_before: u64, slack_kib: u64) {
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut last = thread_census(daemon).1;
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let (own, pool) = thread_census(daemon);
        let busy_ns: u64 = pool
            .iter()
            .map(|(tid, ns)| ns - last.get(tid).copied().unwrap_or(0).min(*ns))
            .sum();
        last = pool;
        let r = rss_kib(daemon);
        if own <= own_before && busy_ns < 10_000_000 && r <= rss_before + slack_kib {
            eprintln!(
                "settled: {own} own threads (before {own_before}), {} in the pool using {busy_ns} \
                 ns of CPU in the last second, {r} KiB (before {rss_before})",
                last.len()
            );
            return;
        }
        assert!(
            Instant::now() < deadline,
            "after 15 s: {own} own threads (before {own_before}), {} in the pool using \
             {busy_ns} ns of CPU a second, {r} KiB resident (before {rss_before})",
            last.len()
        );
    }
}

#[test]
// Full tier: floods of connections, about 25 s.
fn a_flood_of_range_reads_is_bounded_stopped_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("record");
    let bytes = big_record(&record);
    assert!(bytes > 15_000_000, "{bytes} bytes of record");
    let config = daemon_config(
        dir.path(),
        "",
        "request_timeout = \"2s\"\n",
        &format!("[record]\nenabled = true\ndir = \"{}\"\n", record.display()),
    );
    let daemon = Daemon::start(latencyd().args(["run", "--config"]).arg(config));
    let path = "/api/v1/latency?from=-1d";
    // How long one whole read takes, from a tenth of the record read here
    // by the same code (the daemon's own is cut at its 2 s timeout).
    let tenth = dir.path().join("tenth.hlog");
    let text: String = latencyd::record::writer::list(&record)
        .unwrap()
        .iter()
        .map(|f| std::fs::read_to_string(&f.0).unwrap())
        .collect();
    let lines: Vec<&str> = text.lines().collect();
    std::fs::write(&tenth, lines[..lines.len() / 10].join("\n")).unwrap();
    let started = Instant::now();
    latencyd::record::summarize(&[tenth], latencyd::record::Range::ALL, None).unwrap();
    let one_read = started.elapsed() * 10;
    let alone = status_of_get(daemon.addr, path, "");
    eprintln!("one whole range read of {bytes} bytes: {one_read:?}; the daemon answered {alone}");
    std::thread::sleep(Duration::from_secs(1));
    let (threads_before, rss_before) = (threads(&daemon), rss_kib(&daemon));
    let own_before = thread_census(&daemon).0;
    // 40 at once, each client gone after 300 ms.
    let addr = daemon.addr;
    let clients: Vec<_> = (0..40)
        .map(|_| {
            std::thread::spawn(move || {
                let mut stream = TcpStream::connect(addr).unwrap();
                stream
                    .write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
                    .unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_millis(300)))
                    .unwrap();
                let mut head = [0u8; 12];
                match stream.read_exact(&mut head) {
                    Ok(()) => String::from_utf8_lossy(&head[9..12]).to_string(),
                    Err(_) => "gone".to_string(),
                }
            })
        })
        .collect();
    let mut peak_threads = 0;
    while clients.iter().any(|c| !c.is_finished()) {
        peak_threads = peak_threads.max(threads(&daemon));
        std::thread::sleep(Duration::from_millis(20));
    }
    let answers: Vec<String> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let refused = answers.iter().filter(|a| *a == "503").count();
    eprintln!("answers: {answers:?}; peak threads {peak_threads} (before {threads_before})");
    assert!(
        refused >= 38 - answers.iter().filter(|a| *a == "200").count(),
        "{answers:?}"
    );
    assert!(
        peak_threads <= threads_before + 4,
        "at most two reads at once: {peak_threads} threads, {threads_before} before"
    );
    // The two reads whose clients went away stop (at the request timeout
    // at the latest): a plot, which needs a permit too, is drawn again
    // long before two whole reads could have finished.
    let deadline = Instant::now() + Duration::from_secs(4);
    let mut again = 0;
    while Instant::now() < deadline {
        again = status_of_get(daemon.addr, "/plot.svg", "");
        if again == 200 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(again, 200, "the permits came back");
    // A client that goes away stops its read before the request timeout:
    // two reads whose clients leave after 300 ms free their permits, and
    // a plot is drawn, well before the 2 s timeout would end them.
    std::thread::sleep(Duration::from_secs(1));
    let started = Instant::now();
    let leaving: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut stream = TcpStream::connect(addr).unwrap();
            stream
                .write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
                .unwrap();
            stream
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        status_of_get(addr, "/plot.svg", ""),
        503,
        "both permits taken"
    );
    drop(leaving);
    let mut freed = None;
    while started.elapsed() < Duration::from_millis(1900) {
        if status_of_get(addr, "/plot.svg", "") == 200 {
            freed = Some(started.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!("permits back {freed:?} after two reads started whose clients left at 300 ms");
    assert!(
        freed.is_some(),
        "the reads of clients that left ran on to the request timeout"
    );
    if one_read < Duration::from_secs(6) {
        report_skip(
            "a_flood_of_range_reads_is_bounded_stopped_and_leaves_nothing_behind",
            &format!(
                "one whole read took {one_read:?} here, under the 2 s timeout and 4 s wait, too \
                 short to tell a stopped read from a finished one; the bounds and the memory \
                 were checked"
            ),
        );
    }
    settles_back(&daemon, own_before, rss_before, 8 * 1024);
}

/// A daemon whose web configuration lets in alice:right only, the hash
/// of bcrypt cost `cost`.
fn with_basic_auth(dir: &Path, cost: u32) -> Daemon {
    let hash = bcrypt::hash("right", cost).unwrap();
    let web = dir.join("web.yml");
    std::fs::write(&web, format!("basic_auth_users:\n  alice: '{hash}'\n")).unwrap();
    let config = daemon_config(
        dir,
        "",
        &format!("web_config_file = \"{}\"\n", web.display()),
        "",
    );
    Daemon::start(latencyd().args(["run", "--config"]).arg(config))
}

#[test]
// Full tier: floods of connections, about 25 s.
fn a_flood_of_wrong_passwords_runs_bcrypt_a_few_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = with_basic_auth(dir.path(), 8);
    let good = "Authorization: Basic YWxpY2U6cmlnaHQ=\r\n"; // alice:right
    let wrong = "Authorization: Basic YWxpY2U6d3Jvbmc=\r\n"; // alice:wrong
    assert_eq!(status_of_get(daemon.addr, "/api/v1/status", good), 200);
    std::thread::sleep(Duration::from_secs(1));
    let (threads_before, rss_before) = (threads(&daemon), rss_kib(&daemon));
    let own_before = thread_census(&daemon).0;
    let addr = daemon.addr;
    let clients: Vec<_> = (0..200)
        .map(|_| std::thread::spawn(move || status_of_get(addr, "/api/v1/status", wrong)))
        .collect();
    let mut peak_threads = 0;
    let mut probes = Vec::new();
    while clients.iter().any(|c| !c.is_finished()) {
        peak_threads = peak_threads.max(threads(&daemon));
        probes.push(status_of_get(addr, "/livez", ""));
        // A credential already verified needs no bcrypt: served at once.
        probes.push(status_of_get(addr, "/api/v1/status", good));
        std::thread::sleep(Duration::from_millis(50));
    }
    let answers: Vec<u16> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let refused = answers.iter().filter(|&&a| a == 401).count();
    let busy = answers.iter().filter(|&&a| a == 503).count();
    eprintln!(
        "200 wrong passwords: {refused} refused (401), {busy} told to retry (503); peak threads \
         {peak_threads} (before {threads_before}); probes {probes:?}"
    );
    assert_eq!(refused + busy, answers.len(), "{answers:?}");
    assert!(refused >= 2, "some were checked: {answers:?}");
    assert!(
        peak_threads <= threads_before + 4,
        "two bcrypt checks at once: {peak_threads} threads, {threads_before} before"
    );
    assert!(probes.iter().all(|&p| p == 200), "{probes:?}");
    settles_back(&daemon, own_before, rss_before, 8 * 1024);
}

/// A scraper that opens many connections at once with a password not yet
/// verified is served on each: one bcrypt check answers them all, and its
/// share of the bcrypt queue (two checks per peer) does not refuse the rest.
#[test]
// Full tier: floods of connections, about 5 s.
fn many_first_requests_with_the_right_password_share_one_check() {
    let dir = tempfile::tempdir().unwrap();
    // Cost 10: a check takes long enough that the requests overlap it.
    let daemon = with_basic_auth(dir.path(), 10);
    let good = "Authorization: Basic YWxpY2U6cmlnaHQ=\r\n"; // alice:right
    let addr = daemon.addr;
    let start = Arc::new(std::sync::Barrier::new(40));
    let clients: Vec<_> = (0..40)
        .map(|_| {
            let start = Arc::clone(&start);
            std::thread::spawn(move || {
                start.wait();
                status_of_get(addr, "/api/v1/status", good)
            })
        })
        .collect();
    let answers: Vec<u16> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    eprintln!("40 first requests with the right password: {answers:?}");
    assert!(answers.iter().all(|&a| a == 200), "{answers:?}");
}

/// A connection to the daemon, plain or TLS (rustls, trusting `ca.crt`).
type Conn = Box<dyn ReadWrite + Send>;
trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// How the mixed flood reaches the daemon.
#[derive(Clone)]
struct Reach {
    addr: SocketAddr,
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl Reach {
    fn connect(&self) -> Option<Conn> {
        let tcp = TcpStream::connect(self.addr).ok()?;
        tcp.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        tcp.set_write_timeout(Some(Duration::from_secs(5))).ok()?;
        match &self.tls {
            None => Some(Box::new(tcp)),
            Some(config) => {
                let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
                let conn = rustls::ClientConnection::new(Arc::clone(config), name).ok()?;
                let mut stream = rustls::StreamOwned::new(conn, tcp);
                // Handshake now: a closed socket shows as an error here.
                while stream.conn.is_handshaking() {
                    stream.conn.complete_io(&mut stream.sock).ok()?;
                }
                Some(Box::new(stream))
            }
        }
    }

    /// The status of one request on a fresh connection (0: no answer).
    fn status(&self, path: &str, extra: &str) -> u16 {
        let Some(mut conn) = self.connect() else {
            return 0;
        };
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{extra}Connection: close\r\n\r\n");
        if conn.write_all(request.as_bytes()).is_err() {
            return 0;
        }
        let mut head = [0u8; 12];
        match conn.read_exact(&mut head) {
            Ok(()) => std::str::from_utf8(&head[9..12])
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0),
            Err(_) => 0,
        }
    }
}

/// One flooding socket's behaviour.
#[derive(Clone, Copy, Debug)]
enum Flooder {
    /// Connects and sends nothing.
    Idle,
    /// Sends a request head a byte every 200 ms.
    Slow,
    /// Keeps two requests with a wrong password pipelined.
    WrongPassword,
}

/// Runs one flooding socket until `stop`, reconnecting whenever the
/// server closes it; returns how many connections it opened.
fn flood(reach: Reach, kind: Flooder, stop: Arc<AtomicBool>) -> u64 {
    let wrong = "GET /metrics HTTP/1.1\r\nHost: x\r\n\
                 Authorization: Basic cHJvbWV0aGV1czp3cm9uZw==\r\n\r\n"; // prometheus:wrong
    let mut opened = 0;
    while !stop.load(Ordering::Relaxed) {
        let Some(mut conn) = reach.connect() else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        opened += 1;
        match kind {
            Flooder::Idle => {
                let mut byte = [0u8; 1];
                // Returns when the server closes it (or after 5 s, and
                // then it is read again).
                while !stop.load(Ordering::Relaxed) {
                    match conn.read(&mut byte) {
                        Ok(0) => break,
                        Ok(_) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                        Err(_) => break,
                    }
                }
            }
            Flooder::Slow => {
                for byte in b"GET /metrics HTTP/1.1\r\nHost: x\r\n".iter().cycle() {
                    if stop.load(Ordering::Relaxed) || conn.write_all(&[*byte]).is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
            Flooder::WrongPassword => {
                if conn
                    .write_all(format!("{wrong}{wrong}").as_bytes())
                    .is_err()
                {
                    continue;
                }
                // One more request for every response, so that two always
                // wait on the connection.
                let mut buf = [0u8; 4096];
                while !stop.load(Ordering::Relaxed) {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            let responses =
                                buf[..n].windows(9).filter(|w| w == b"HTTP/1.1 ").count();
                            if (0..responses).any(|_| conn.write_all(wrong.as_bytes()).is_err()) {
                                break;
                            }
                        }
                    }
                }
            }
        }
    }
    opened
}

/// 64 slots held by a mix of flooders (each kind in `mix`, `per_kind`
/// sockets) from this host, while fresh `/livez` probes and scrapes with
/// the right password (a credential verified before the flood) come from
/// the same address: every one is answered 200.
fn probes_answer_through(mix: &[Flooder], per_kind: usize, tls: bool) {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    // Cost 8: each wrong password keeps a bcrypt permit busy for a while.
    let hash = bcrypt::hash("right", 8).unwrap();
    let mut web = format!("basic_auth_users:\n  prometheus: '{hash}'\n");
    let client_tls = tls.then(|| {
        make_pki(dir.path());
        web.push_str("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n");
        let mut roots = rustls::RootCertStore::empty();
        let ca = std::fs::read(dir.path().join("ca.crt")).unwrap();
        for cert in rustls_pki_types::pem::PemObject::pem_slice_iter(&ca) {
            roots.add(cert.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        Arc::new(
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth(),
        )
    });
    let web_path = dir.path().join("web.yml");
    std::fs::write(&web_path, web).unwrap();
    let config = daemon_config(
        dir.path(),
        "",
        &format!(
            "web_config_file = \"{}\"\nmax_connections = 64\nheader_timeout = \"30s\"\n",
            web_path.display()
        ),
        "",
    );
    let daemon = Daemon::start(latencyd().args(["run", "--config"]).arg(config));
    let reach = Reach {
        addr: daemon.addr,
        tls: client_tls,
    };
    let good = "Authorization: Basic cHJvbWV0aGV1czpyaWdodA==\r\n"; // prometheus:right
    assert_eq!(reach.status("/metrics", good), 200, "the first login");
    let stop = Arc::new(AtomicBool::new(false));
    let flooders: Vec<_> = mix
        .iter()
        .flat_map(|&kind| std::iter::repeat_n(kind, per_kind))
        .map(|kind| {
            let (reach, stop) = (reach.clone(), Arc::clone(&stop));
            std::thread::spawn(move || (kind, flood(reach, kind, stop)))
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    let mut answers = Vec::new();
    for _ in 0..15 {
        answers.push(("livez", reach.status("/livez", "")));
        answers.push(("scrape", reach.status("/metrics", good)));
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    let opened: Vec<(Flooder, u64)> = flooders.into_iter().map(|f| f.join().unwrap()).collect();
    let scrape = daemon.get_with(&reach, good);
    eprintln!(
        "flood {mix:?} x{per_kind} (tls: {tls}): answers {answers:?}; connections opened {opened:?}; \
         refused connections {:?}, auth failures {:?}",
        metric_value(&scrape, "latencyd_http_connections_refused_total"),
        metric_value(&scrape, "latencyd_http_auth_failures_total"),
    );
    assert!(
        answers.iter().all(|(_, status)| *status == 200),
        "probes and scrapes through the flood {mix:?} (tls: {tls}): {answers:?}"
    );
}

trait ScrapeWith {
    fn get_with(&self, reach: &Reach, auth: &str) -> String;
}

impl ScrapeWith for Daemon {
    /// A whole scrape with credentials, plain or TLS.
    fn get_with(&self, reach: &Reach, auth: &str) -> String {
        let Some(mut conn) = reach.connect() else {
            return String::new();
        };
        let request =
            format!("GET /metrics HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n");
        let _ = conn.write_all(request.as_bytes());
        let mut text = String::new();
        let _ = conn.read_to_string(&mut text);
        text
    }
}

#[test]
// Full tier: floods of connections, about 10 s.
fn pipelined_wrong_passwords_cannot_pin_the_slots() {
    // 64 sockets, each with two wrong-password requests always waiting.
    probes_answer_through(&[Flooder::WrongPassword], 64, false);
}

#[test]
// Full tier: floods of connections, about 10 s.
fn pipelined_wrong_passwords_cannot_pin_the_slots_over_tls() {
    probes_answer_through(&[Flooder::WrongPassword], 64, true);
}

#[test]
// Full tier: floods of connections, about 10 s.
fn a_mix_of_idle_slow_and_wrong_password_sockets_leaves_the_probes_answered() {
    let mix = [Flooder::Idle, Flooder::Slow, Flooder::WrongPassword];
    probes_answer_through(&mix, 30, false);
}

#[test]
// Full tier: floods of connections, about 10 s.
fn a_mix_of_idle_slow_and_wrong_password_sockets_over_tls_leaves_the_probes_answered() {
    let mix = [Flooder::Idle, Flooder::Slow, Flooder::WrongPassword];
    probes_answer_through(&mix, 30, true);
}
