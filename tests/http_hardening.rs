//! The real binary's HTTP server against clients that misbehave: slow
//! headers (slowloris), idle connections, too many connections, clients
//! that stop reading, methods other than GET/HEAD, request bodies,
//! oversized and malformed requests. After each, the daemon still serves.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

fn start(export: &str) -> (tempfile::TempDir, Daemon) {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_with_export(dir.path(), export);
    (dir, daemon)
}

/// Reads until the server closes the connection (or `limit` passes) and
/// returns what came and when the connection ended.
fn read_to_close(stream: &mut TcpStream, limit: Duration) -> (Vec<u8>, Option<Duration>) {
    let started = Instant::now();
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    while started.elapsed() < limit {
        match stream.read(&mut buf) {
            Ok(0) => return (got, Some(started.elapsed())),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return (got, Some(started.elapsed())),
        }
    }
    (got, None)
}

fn still_serves(daemon: &Daemon) {
    let (status, body) = daemon.get("/healthz");
    assert!(status == 200 || status == 503, "{status} {body}");
    let (status, _) = daemon.get("/metrics");
    assert_eq!(status, 200);
}

fn raw(addr: SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.write_all(request).unwrap();
    let (got, closed) = read_to_close(&mut stream, Duration::from_secs(10));
    assert!(closed.is_some(), "the server closed the connection");
    String::from_utf8_lossy(&got).into_owned()
}

fn status_of(response: &str) -> u16 {
    response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {response:?}"))
}

fn json_error(response: &str) -> String {
    let body = &response[response.find("\r\n\r\n").expect("a head") + 4..];
    let json: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {response}"));
    json["error"].as_str().unwrap().to_string()
}

#[test]
fn slow_and_idle_clients_are_cut_off_by_the_header_timeout() {
    let (_dir, daemon) = start("header_timeout = \"500ms\"\nrequest_timeout = \"2s\"\n");
    let timeout = Duration::from_millis(500);
    // Nothing sent at all.
    let idle_connected = Instant::now();
    let mut idle = TcpStream::connect(daemon.addr).unwrap();
    // Slowloris: a header line every 200 ms, never the blank line.
    let mut slow = TcpStream::connect(daemon.addr).unwrap();
    slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let trickle_started = Instant::now();
    let mut trickled = 0;
    let slow_closed = loop {
        std::thread::sleep(Duration::from_millis(200));
        if slow
            .write_all(format!("X-Slow-{trickled}: y\r\n").as_bytes())
            .is_err()
        {
            break trickle_started.elapsed();
        }
        trickled += 1;
        slow.set_read_timeout(Some(Duration::from_millis(1)))
            .unwrap();
        let mut byte = [0u8; 1];
        if slow.read(&mut byte).is_ok() {
            break trickle_started.elapsed();
        }
        assert!(
            trickle_started.elapsed() < 40 * timeout,
            "a client trickling headers was still connected after {:?}",
            trickle_started.elapsed()
        );
    };
    assert!(trickled >= 1, "it could send a few lines first");
    let (_, idle_closed) = read_to_close(&mut idle, 40 * timeout);
    assert!(idle_closed.is_some(), "an idle connection was never closed");
    let idle_closed = idle_connected.elapsed();

    // A keep-alive connection that went quiet after a response.
    let mut keep = TcpStream::connect(daemon.addr).unwrap();
    keep.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let (got, closed) = read_to_close(&mut keep, 40 * timeout);
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 "));
    assert!(
        closed.is_some(),
        "a quiet keep-alive connection stayed open"
    );
    eprintln!(
        "closed: slow headers after {slow_closed:?} ({trickled} lines), idle within \
         {idle_closed:?}, quiet keep-alive after {closed:?}; header_timeout {timeout:?}"
    );
    still_serves(&daemon);
}

#[test]
fn idle_connections_make_room_and_busy_ones_refuse_the_rest() {
    let (_dir, daemon) =
        start("max_connections = 4\nheader_timeout = \"30s\"\nrequest_timeout = \"3s\"\n");
    // Four idle connections take every slot; a fifth is served all the
    // same, the oldest idle one closed to make room.
    let mut idle: Vec<TcpStream> = (0..4)
        .map(|_| {
            let stream = TcpStream::connect(daemon.addr).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            stream
        })
        .collect();
    let served = raw(
        daemon.addr,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status_of(&served), 200, "{served}");
    let (_, closed) = read_to_close(&mut idle[0], Duration::from_secs(2));
    assert!(closed.is_some(), "the oldest idle connection was closed");
    drop(idle);
    // Four connections each with requests in flight (pipelined /metrics
    // they do not read, more than loopback's socket buffers hold, which
    // autotuning lets grow to megabytes): none is idle, so a fifth is
    // refused.
    let busy: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut stream = TcpStream::connect(daemon.addr).unwrap();
            let request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".repeat(2000);
            stream.write_all(&request).unwrap();
            stream
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let refused = raw(
        daemon.addr,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status_of(&refused), 503, "{refused}");
    assert!(
        json_error(&refused).contains("too many connections"),
        "{refused}"
    );
    assert!(refused.to_ascii_lowercase().contains("retry-after: 1"));
    // Closing connections frees their slots.
    drop(busy);
    wait_until(
        "a slot to come back",
        Duration::from_millis(50),
        Duration::from_secs(10),
        || http_get(daemon.addr, "/metrics").is_ok_and(|(status, _)| status == 200),
    );
    // The refusal was counted (a busy wait above may have added more).
    let (_, scrape) = http_get(daemon.addr, "/metrics").unwrap();
    let refused = common::metric_value(&scrape, "latencyd_http_connections_refused_total");
    assert!(refused.is_some_and(|n| n >= 1.0), "{scrape}");
    // And /metrics times itself: the scrapes above are in the histogram.
    let renders = common::metric_value(&scrape, "latencyd_metrics_render_duration_seconds_count");
    assert!(renders.is_some_and(|n| n >= 1.0), "{scrape}");
}

#[test]
fn a_client_that_stops_reading_is_dropped_after_the_request_timeout() {
    let (_dir, daemon) = start("request_timeout = \"1s\"\n");
    let mut stream = TcpStream::connect(daemon.addr).unwrap();
    // Pipelined requests whose responses (each /metrics is several KiB)
    // fill both socket buffers when nobody reads them.
    let request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    let pipelined = request.repeat(5_000);
    stream
        .set_write_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let _ = stream.write_all(&pipelined);
    std::thread::sleep(Duration::from_secs(4));
    let (got, closed) = read_to_close(&mut stream, Duration::from_secs(30));
    let responses = String::from_utf8_lossy(&got)
        .matches("HTTP/1.1 200 OK")
        .count();
    assert!(closed.is_some(), "the connection was not closed");
    assert!(
        responses < 5_000,
        "all {responses} responses were written: nothing stalled"
    );
    eprintln!("a non-reading client got {responses} of 5000 responses before being dropped");
    still_serves(&daemon);
}

#[test]
fn only_get_and_head_without_a_body_and_json_errors() {
    // Blank lines alone make hyper wait for a request line: the header
    // timeout ends those.
    let (_dir, daemon) = start("header_timeout = \"1s\"\n");
    for method in ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "BREW"] {
        let response = raw(
            daemon.addr,
            format!("{method} /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        );
        assert_eq!(status_of(&response), 405, "{method}: {response}");
        assert!(response.to_ascii_lowercase().contains("allow: get, head"));
        assert!(json_error(&response).contains("use GET or HEAD"));
    }
    for body_headers in ["Content-Length: 5\r\n", "Transfer-Encoding: chunked\r\n"] {
        let response = raw(
            daemon.addr,
            format!(
                "GET /api/v1/status HTTP/1.1\r\nHost: x\r\n{body_headers}Connection: close\r\n\r\nhello"
            )
            .as_bytes(),
        );
        assert_eq!(status_of(&response), 413, "{body_headers}: {response}");
        assert!(json_error(&response).contains("no body"));
    }
    for (path, status, message) in [
        ("/nope", 404, "no such path"),
        ("/api/v1/latency/x", 400, "not a CPU number"),
        ("/api/v1/latency/4096", 404, "no sampler runs on CPU 4096"),
        ("/plot.svg?window=1y", 400, "window"),
        ("/?window=%zz", 400, "window"),
        ("/%ff%fe", 404, "no such path"),
    ] {
        let response = raw(
            daemon.addr,
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        );
        assert_eq!(status_of(&response), status, "{path}: {response}");
        assert!(
            json_error(&response).contains(message),
            "{path}: {response}"
        );
    }
    // What hyper refuses before routing: a head too large, garbage.
    let huge = format!(
        "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(64 * 1024)
    );
    let response = raw(daemon.addr, huge.as_bytes());
    assert!(
        response.is_empty() || matches!(status_of(&response), 400 | 431),
        "{response}"
    );
    for garbage in [
        &b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"[..],
        b"GET\r\n\r\n",
        b"GET / HTTP/9.9\r\n\r\n",
        b"\r\n\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
    ] {
        let response = raw(daemon.addr, garbage);
        assert!(
            response.is_empty() || (400..500).contains(&status_of(&response)),
            "{garbage:?}: {response}"
        );
    }
    still_serves(&daemon);
}
