//! The HTTP server around the router: what keeps a monitor that listens on
//! every host of a fleet from becoming the thing that breaks.
//!
//! - At most `export.max_connections` connections are open at once. When
//!   they are all open and another arrives, the connection that has waited
//!   longest without a request in flight is closed to make room for it,
//!   taken from the peer holding the most connections: idle sockets cannot
//!   starve the probes, since an idle connection is the cheapest thing to
//!   give up (one client's 256 idle sockets failed 28 of 31 `/livez`
//!   probes when new connections were refused instead). Only when every
//!   connection has a request in flight does the newcomer get a 503
//!   written without waiting.
//! - A client must send its request headers within `export.header_timeout`
//!   of connecting or of its previous response (hyper's header-read
//!   timeout, which also closes idle keep-alive connections), and the TLS
//!   handshake must finish within the same time.
//! - A request must be answered within `export.request_timeout`, and a
//!   response write that makes no progress for that long (a client that
//!   does not read) closes the connection.
//! - A handler that panics answers 500 and leaves the server running.
//!
//! Authentication, the method and the body are checked by the router's
//! guard (`http::guard`), so they hold in-process too.
//!
//! TLS and authentication come from the web configuration
//! (`webconfig::Security`), read again on SIGHUP so that certificates can
//! be renewed without a restart; each new connection takes the current one.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, Response};
use axum::response::IntoResponse;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Sleep;
use tower::ServiceExt as _;
use tracing::{debug, error, warn};

use super::connections::{InFlightBody, Registry, Requests, lock};
use super::webconfig::Security;
use super::{ApiError, SharedSecurity};

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub request_timeout: Duration,
}

/// Largest request head accepted (hyper's read buffer); a longer one is
/// answered 431 by hyper.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// How long in-flight requests get to finish once shutdown starts.
pub const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

/// Accepts and serves connections until `shutdown` turns true, then lets
/// in-flight requests finish (for at most `SHUTDOWN_GRACE`).
pub async fn serve(
    listeners: Vec<TcpListener>,
    router: Router,
    security: SharedSecurity,
    limits: Limits,
    refused: prometheus::IntCounter,
    mut shutdown: watch::Receiver<bool>,
) {
    let registry = Arc::new(Mutex::new(Registry::new(limits.max_connections)));
    let mut connections = JoinSet::new();
    // Each listener accepts on its own task; the connections meet here,
    // under one connection limit.
    let (accepted_tx, mut accepted) = tokio::sync::mpsc::channel::<(TcpStream, IpAddr)>(64);
    let mut acceptors = JoinSet::new();
    for listener in listeners {
        let sender = accepted_tx.clone();
        let mut stop = shutdown.clone();
        acceptors.spawn(async move {
            loop {
                tokio::select! {
                    biased;
                    _ = stop.changed() => break,
                    result = listener.accept() => match result {
                        Ok((stream, peer)) => {
                            if sender.send((stream, peer.ip())).await.is_err() {
                                break;
                            }
                        }
                        Err(err) => {
                            // Out of file descriptors and the like: not the
                            // client's fault and not fatal; try again shortly.
                            warn!("accepting a connection failed: {err}");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    },
                }
            }
        });
    }
    drop(accepted_tx);
    loop {
        let (stream, peer) = tokio::select! {
            biased;
            _ = shutdown.changed() => break,
            stream = accepted.recv() => match stream {
                Some(stream) => stream,
                None => break,
            },
        };
        while connections.try_join_next().is_some() {}
        let admitted = lock(&registry).admit(peer, Instant::now());
        let Some(slot) = admitted else {
            let tls = read_security(&security).tls.is_some();
            refuse_busy(&stream, tls, limits.max_connections);
            refused.inc();
            continue;
        };
        let security = read_security(&security);
        let router = router.clone();
        let shutdown = shutdown.clone();
        let registry = Arc::clone(&registry);
        connections.spawn(async move {
            let _ = stream.set_nodelay(true);
            let id = slot.id;
            let requests = Requests {
                registry: Arc::clone(&registry),
                id,
            };
            tokio::select! {
                () = connection(stream, router, security, limits, shutdown, requests) => {}
                // Closed to make room for a newer connection while idle.
                () = slot.evicted.notified() => {}
            }
            lock(&registry).remove(id);
        });
    }
    // The listeners close with their tasks: new connections are refused.
    acceptors.shutdown().await;
    drop(accepted);
    let drain = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(SHUTDOWN_GRACE, drain).await.is_err() {
        debug!("closing connections still open after {SHUTDOWN_GRACE:?}");
    }
    connections.abort_all();
}

fn read_security(security: &SharedSecurity) -> Arc<Security> {
    Arc::clone(&security.read().unwrap_or_else(|e| e.into_inner()))
}

/// Over the connection limit: say so if it can be said at once, then
/// close. Over TLS nothing can be said before a handshake, so just close.
fn refuse_busy(stream: &TcpStream, tls: bool, limit: usize) {
    if tls {
        return;
    }
    let body = format!(
        "{{\"error\":\"too many connections: latencyd serves at most {limit} at once \
         (export.max_connections); retry later\"}}"
    );
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    // One attempt without waiting: a refused client must not hold a task.
    let _ = stream.try_write(response.as_bytes());
}

async fn connection(
    stream: TcpStream,
    router: Router,
    security: Arc<Security>,
    limits: Limits,
    shutdown: watch::Receiver<bool>,
    requests: Requests,
) {
    // Without basic auth every request passes at once: shielded from the
    // moment it is read, not from when the guard gets to it.
    let open = security.auth.is_none();
    match &security.tls {
        None => {
            let io = StallGuard::new(stream, limits.request_timeout);
            http(io, router, limits, shutdown, requests, open).await;
        }
        Some(config) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(Arc::clone(config));
            match tokio::time::timeout(limits.header_timeout, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    let io = StallGuard::new(tls, limits.request_timeout);
                    http(io, router, limits, shutdown, requests, open).await;
                }
                Ok(Err(err)) => debug!("TLS handshake failed: {err}"),
                Err(_) => debug!("TLS handshake not done within {:?}", limits.header_timeout),
            }
        }
    }
}

async fn http<IO>(
    io: IO,
    router: Router,
    limits: Limits,
    mut shutdown: watch::Receiver<bool>,
    requests: Requests,
    open: bool,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
        let router = router.clone();
        // In flight from here until the response's body is sent (or
        // dropped); shielded from eviction once the guard lets it pass.
        let in_flight = requests.begin();
        if open {
            in_flight.passage().passed();
        }
        request.extensions_mut().insert(in_flight.passage());
        async move {
            let response = handle(request, router, limits).await;
            Ok::<_, Infallible>(response.map(|body| {
                Body::new(InFlightBody {
                    body,
                    _in_flight: in_flight,
                })
            }))
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_HEAD_BYTES)
        .serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        _ = shutdown.changed() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(err) = result {
        debug!("connection closed: {err}");
    }
}

/// Runs the router on one request, bounded in time and shielded from
/// panics (authentication, method and body are checked by the router's
/// own guard, `http::guard`).
async fn handle(request: Request<Incoming>, router: Router, limits: Limits) -> Response<Body> {
    let routed = tokio::spawn(router.oneshot(request.map(Body::new)));
    let abort = routed.abort_handle();
    // If hyper drops this future (the client went away), the request's
    // task goes too, and the work it started is cancelled (busy.rs).
    let _abort_on_drop = AbortOnDrop(routed.abort_handle());
    match tokio::time::timeout(limits.request_timeout, routed).await {
        Ok(Ok(Ok(response))) => response,
        Ok(Ok(Err(never))) => match never {},
        Ok(Err(err)) => {
            error!("a request handler failed: {err}");
            ApiError::Internal("the request failed inside latencyd; it is logged".to_string())
                .into_response()
        }
        Err(_) => {
            abort.abort();
            ApiError::Unavailable(format!(
                "no answer within {:?} (export.request_timeout)",
                limits.request_timeout
            ))
            .into_response()
        }
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Fails a write (or flush) that has made no progress for `limit`: a client
/// that stops reading cannot hold its connection, and its buffers,
/// forever.
struct StallGuard<T> {
    inner: T,
    limit: Duration,
    stalled_since: Option<Pin<Box<Sleep>>>,
}

impl<T> StallGuard<T> {
    fn new(inner: T, limit: Duration) -> StallGuard<T> {
        StallGuard {
            inner,
            limit,
            stalled_since: None,
        }
    }

    /// Passes `poll`'s result on, arming the deadline while it is pending
    /// and failing once the deadline passes.
    fn guard<R>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        if poll.is_ready() {
            self.stalled_since = None;
            return poll;
        }
        let limit = self.limit;
        let deadline = self
            .stalled_since
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        ready!(deadline.as_mut().poll(cx));
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the client has not read its response for export.request_timeout",
        )))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for StallGuard<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for StallGuard<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.guard(cx, poll)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.guard(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.guard(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.guard(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
