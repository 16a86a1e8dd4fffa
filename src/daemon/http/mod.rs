//! The HTTP surface: `/metrics`, `/healthz`, the read-only JSON API, and
//! for people the status page `/` and the plot `/plot.svg` (see `page`).
//!
//! Handlers take the state's lock once and build their whole answer from
//! it, so the numbers of a response agree with each other and with a
//! `/metrics` scrape taken at the same moment; anything slow (drawing,
//! compressing) happens after the lock is released. Errors are JSON
//! `{"error": …}` with a 4xx status, mapped in one place (`error.rs`). The
//! bodies are built by `render`; this layer only routes, guards and
//! serializes.
//!
//! - `server`: the accept loop and its limits; `webconfig`: TLS and basic
//!   auth; `query`: query-string parsing; `error`: `ApiError`.

pub mod encoding;
mod error;
mod query;
pub mod server;
pub mod webconfig;

use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use axum::Router;
use axum::extract::Request;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};

pub use error::ApiError;
pub use query::{parse_range, parse_window};
use webconfig::Security;

use super::render::page::{self, Snapshot};
use super::render::{json, metrics, protobuf};
use super::state::MonitorState;
use crate::cpulist::format_cpu_list;
use crate::forensics;
use crate::plot;
use crate::record;
use crate::units::format_rfc3339_ms;

/// The web configuration in force (TLS, basic auth); replaced whole on
/// reload, read by every request and every new connection.
pub type SharedSecurity = Arc<RwLock<Arc<Security>>>;

#[derive(Clone)]
pub struct AppState {
    pub state: Arc<Mutex<MonitorState>>,
    pub registry: prometheus::Registry,
    /// The handlers' and the metrics' clocks.
    pub clocks: metrics::Clocks,
    pub security: SharedSecurity,
    /// What the HTTP surface counts about itself, exported in `registry`.
    pub counters: HttpCounters,
}

/// latencyd's metrics about its own HTTP surface.
#[derive(Clone)]
pub struct HttpCounters {
    /// Connections refused because `export.max_connections` were open.
    pub refused_connections: prometheus::IntCounter,
    /// Requests refused for missing or wrong credentials.
    pub refused_credentials: prometheus::IntCounter,
    /// How long building and encoding `/metrics` took.
    pub render_seconds: prometheus::Histogram,
}

impl HttpCounters {
    fn registered_in(registry: &prometheus::Registry) -> HttpCounters {
        let counter = |name: &str, help: &str| {
            let counter = prometheus::IntCounter::new(name, help)
                .expect("a valid constant metric name and help");
            registry
                .register(Box::new(counter.clone()))
                .expect("registered once");
            counter
        };
        let counters = HttpCounters {
            refused_connections: counter(
                "latencyd_http_connections_refused_total",
                "Connections refused with a 503 because export.max_connections were open.",
            ),
            refused_credentials: counter(
                "latencyd_http_auth_failures_total",
                "Requests refused with a 401 for missing or wrong basic-auth credentials.",
            ),
            render_seconds: prometheus::Histogram::with_opts(
                prometheus::HistogramOpts::new(
                    "latencyd_metrics_render_duration_seconds",
                    "How long building and encoding the /metrics answers took (this one not yet \
                     included).",
                )
                .buckets(vec![
                    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                    1.0,
                ]),
            )
            .expect("valid constant buckets"),
        };
        registry
            .register(Box::new(counters.render_seconds.clone()))
            .expect("registered once");
        counters
    }
}

impl AppState {
    /// The handlers' state; `clocks` are what every time-dependent answer
    /// reads (`metrics::SYSTEM_CLOCKS` in the daemon, fixed ones in tests
    /// with expected output).
    pub fn new(
        state: Arc<Mutex<MonitorState>>,
        with_process_metrics: bool,
        clocks: metrics::Clocks,
    ) -> AppState {
        let registry = metrics::registry(Arc::clone(&state), with_process_metrics, clocks);
        let counters = HttpCounters::registered_in(&registry);
        AppState {
            state,
            registry,
            clocks,
            security: Arc::new(RwLock::new(Arc::new(Security::open()))),
            counters,
        }
    }

    /// `CLOCK_MONOTONIC` now, by the handlers' clock.
    fn now_ns(&self) -> u64 {
        (self.clocks.monotonic_ns)()
    }

    pub fn security(&self) -> Arc<Security> {
        Arc::clone(&self.security.read().unwrap_or_else(|e| e.into_inner()))
    }

    fn lock(&self) -> MutexGuard<'_, MonitorState> {
        // The state stays consistent even if a holder panicked: every
        // update is a whole merge done before the lock is released.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Every route `router` serves, as written in the OpenAPI document
/// (`/api/v1/openapi.json`, checked against both by `tests/daemon_http.rs`).
pub const ROUTES: &[&str] = &[
    "/",
    "/plot.svg",
    "/metrics",
    "/healthz",
    "/livez",
    "/api/v1/status",
    "/api/v1/latency",
    "/api/v1/latency/{cpu}",
    "/api/v1/spikes",
    "/api/v1/spikes/{id}",
    "/api/v1/openapi.json",
];

/// The OpenAPI 3.1 description of the routes.
pub const OPENAPI: &str = include_str!("openapi.json");

/// The routes; the metrics are served at `export.telemetry_path`
/// (`/metrics` unless configured).
pub fn router(app: AppState) -> Router {
    let telemetry_path = app.lock().config.export.telemetry_path.clone();
    Router::new()
        .route("/", get(status_page))
        .route("/plot.svg", get(plot_svg))
        .route(&telemetry_path, get(metrics_handler))
        .route("/healthz", get(healthz))
        .route(LIVENESS_PATH, get(livez))
        .route("/api/v1/status", get(status))
        .route("/api/v1/latency", get(latency_all))
        .route("/api/v1/latency/{cpu}", get(latency_one))
        .route("/api/v1/spikes", get(spikes))
        .route("/api/v1/spikes/{id}", get(spike_one))
        .route("/api/v1/openapi.json", get(openapi))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(app.clone(), guard))
        .with_state(app)
}

/// The liveness probe's path, the one served without credentials: it says
/// only that the exporter answers, as Kubernetes' own components leave
/// `/livez` open to their probes.
pub const LIVENESS_PATH: &str = "/livez";

/// What every request passes before it is routed, in this order:
/// authentication when the web configuration asks for it (401 with
/// `WWW-Authenticate`; `LIVENESS_PATH` excepted), GET or HEAD only (405
/// with `Allow`), no body (413). Each refusal is a JSON error like every
/// other.
async fn guard(State(app): State<AppState>, request: Request, next: Next) -> Response {
    let security = app.security();
    if security.auth.is_some() && request.uri().path() != LIVENESS_PATH {
        let authorization = request
            .headers()
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes().to_vec());
        // bcrypt takes milliseconds: off the runtime's thread.
        let ok = tokio::task::spawn_blocking(move || {
            security
                .auth
                .as_ref()
                .is_some_and(|auth| auth.check(authorization.as_deref()))
        })
        .await
        .unwrap_or(false);
        if !ok {
            app.counters.refused_credentials.inc();
            return ApiError::Unauthorized(
                "missing or wrong credentials: this endpoint needs HTTP basic authentication"
                    .to_string(),
            )
            .into_response();
        }
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return ApiError::MethodNotAllowed(format!(
            "{} is not allowed: latencyd is read-only, use GET or HEAD",
            request.method()
        ))
        .into_response();
    }
    let headers = request.headers();
    let has_body = headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get_all(header::CONTENT_LENGTH)
            .iter()
            .any(|v| v.as_bytes() != b"0");
    if has_body {
        return ApiError::PayloadTooLarge(
            "requests to latencyd carry no body; send the request without one".to_string(),
        )
        .into_response();
    }
    next.run(request).await
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::NotFound(format!(
        "no such path: {}; the routes are {} (described in /api/v1/openapi.json)",
        uri.path(),
        ROUTES.join(", ")
    ))
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

type QueryPairs = Result<Query<Vec<(String, String)>>, QueryRejection>;

/// The plot's and the page's data, for `?window=` (lifetime without it).
fn snapshot(app: &AppState, query: QueryPairs) -> Result<Snapshot, ApiError> {
    let Query(pairs) = query.map_err(|e| {
        ApiError::BadRequest(format!("the query string is not valid: {}", e.body_text()))
    })?;
    let now = app.now_ns();
    let s = app.lock();
    let window =
        parse_window(&pairs, s.config.export.max_window_ns).map_err(ApiError::BadRequest)?;
    Ok(Snapshot::take(&s, now, window))
}

/// A range of the on-disk record, summarized on the blocking pool (the
/// files are read, streaming, off the runtime's thread). Without a
/// record the answer says how to turn it on.
async fn read_record(
    app: &AppState,
    range: record::Range,
) -> Result<(record::Summary, record::ReadReport), ApiError> {
    let (enabled, dir) = {
        let s = app.lock();
        let enabled = s.record.lock().unwrap_or_else(|p| p.into_inner()).enabled;
        (enabled, s.config.record.dir.clone())
    };
    if !enabled {
        return Err(ApiError::NotFound(
            "the on-disk record is off, so there is no range to read: set record.enabled = \
             true (or run under systemd with StateDirectory=); /api/v1/status says more"
                .to_string(),
        ));
    }
    tokio::task::spawn_blocking(move || {
        let files: Vec<std::path::PathBuf> = record::writer::list(&dir)
            .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
            .into_iter()
            .map(|f| f.0)
            .collect();
        record::summarize(&files, range, None)
    })
    .await
    .map_err(|e| ApiError::Internal(format!("reading the record failed: {e}")))?
    .map_err(ApiError::Internal)
}

fn query_pairs(query: QueryPairs) -> Result<Vec<(String, String)>, ApiError> {
    let Query(pairs) = query.map_err(|e| {
        ApiError::BadRequest(format!("the query string is not valid: {}", e.body_text()))
    })?;
    Ok(pairs)
}

/// The OSADL-style plot of every sampled CPU, drawn after the lock is
/// released; with `?from=&to=`, of the record over that range.
async fn plot_svg(State(app): State<AppState>, query: QueryPairs) -> Result<Response, ApiError> {
    let pairs = query_pairs(query)?;
    let range = parse_range(&pairs, app.clocks.read().unix_ns, &["window"])
        .map_err(ApiError::BadRequest)?;
    let data = match range {
        None => snapshot(&app, Ok(Query(pairs)))?.plot,
        Some(range) => {
            if pairs.iter().any(|(k, _)| k == "window") {
                return Err(ApiError::BadRequest(
                    "give either window (the live window) or from/to (the record), not both"
                        .to_string(),
                ));
            }
            let (summary, _) = read_record(&app, range).await?;
            let s = app.lock();
            plot::PlotData {
                title: format!(
                    "Wake-up latency from {} to {}",
                    format_rfc3339_ms(range.from_ns.max(summary.span_ns.map_or(0, |s| s.0))),
                    format_rfc3339_ms(range.to_ns.min(summary.span_ns.map_or(u64::MAX, |s| s.1)))
                ),
                subtitle: plot::subtitle(
                    Some(&s.host.uname.nodename),
                    Some(&s.host.uname.release),
                    s.host.preempt_rt,
                ),
                series: summary
                    .cpus
                    .iter()
                    .map(|(cpu, stats)| plot::series_from_stats(format!("CPU {cpu}"), stats))
                    .collect(),
            }
        }
    };
    let svg = plot::render_svg(&data).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok((
        [
            (header::CONTENT_TYPE, "image/svg+xml"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        svg,
    )
        .into_response())
}

/// The status page. A plot that cannot be drawn (no font) leaves the
/// rest of the page standing, with the reason in its place.
async fn status_page(State(app): State<AppState>, query: QueryPairs) -> Result<Response, ApiError> {
    let snap = snapshot(&app, query)?;
    let svg = plot::render_svg(&snap.plot).map_err(|e| e.to_string());
    let html = page::render_page(&snap, svg.as_deref().map_err(String::as_str));
    Ok((
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        html,
    )
        .into_response())
}

/// The exposition: Prometheus' protobuf format when the scraper asks for
/// it (the only one that carries the native histogram), text otherwise;
/// gzipped when the scraper accepts it. Compressing and encoding happen
/// after the state's lock is released; the render-time histogram covers
/// both.
async fn metrics_handler(
    State(app): State<AppState>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    let timer = app.counters.render_seconds.start_timer();
    let header_text = |name| headers.get(name).and_then(|v| v.to_str().ok());
    let (body, content_type) = if protobuf::wanted(header_text(header::ACCEPT)) {
        let mut families = app.registry.gather();
        // The latency histogram again, classic and native buckets from one
        // look at the state, so its counts agree with each other.
        let (histograms, natives) = {
            let s = app.lock();
            (
                metrics::latency_histograms(&s),
                metrics::latency_natives(&s),
            )
        };
        for family in &mut families {
            if family.name() == metrics::LATENCY_HISTOGRAM {
                family.set_metric(histograms.clone());
            }
        }
        let body = protobuf::encode(&families, metrics::LATENCY_HISTOGRAM, &natives);
        (body, protobuf::CONTENT_TYPE)
    } else {
        let text = metrics::render(&app.registry).map_err(|e| ApiError::Internal(e.to_string()))?;
        (
            text.into_bytes(),
            "text/plain; version=0.0.4; charset=utf-8",
        )
    };
    let response = if encoding::accepts_gzip(header_text(header::ACCEPT_ENCODING)) {
        let body = encoding::gzip(&body)
            .map_err(|e| ApiError::Internal(format!("compressing the metrics failed: {e}")))?;
        (
            [
                (header::CONTENT_TYPE, content_type),
                (header::CONTENT_ENCODING, "gzip"),
                (header::VARY, "Accept, Accept-Encoding"),
            ],
            body,
        )
            .into_response()
    } else {
        (
            [
                (header::CONTENT_TYPE, content_type),
                (header::VARY, "Accept, Accept-Encoding"),
            ],
            body,
        )
            .into_response()
    };
    timer.observe_duration();
    Ok(response)
}

async fn healthz(State(app): State<AppState>) -> Response {
    let health = app.lock().health(app.now_ns());
    let status = if health.healthy {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, axum::Json(json::health(health))).into_response()
}

/// The liveness probe: answering at all is the answer. The samplers'
/// condition is `/healthz`'s, and a starved sampler is what latencyd is
/// there to measure, not a reason to restart it.
async fn livez() -> Response {
    axum::Json(serde_json::json!({ "status": "alive" })).into_response()
}

async fn status(State(app): State<AppState>) -> axum::Json<json::StatusBody> {
    let now = app.now_ns();
    axum::Json(json::status(&app.lock(), now))
}

/// Recent spike captures, newest first, with their verdicts.
async fn spikes(State(app): State<AppState>) -> axum::Json<json::SpikesBody> {
    let journal = Arc::clone(&app.lock().forensics);
    axum::Json(json::spikes(&journal))
}

/// One capture whole: its attribution and the raw events. It is read from
/// the capture directory on the blocking pool.
async fn spike_one(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    if !forensics::store::valid_id(&id) {
        return Err(ApiError::BadRequest(format!(
            "'{id}' is not a capture id: ids look like 1795315538123-cpu1 (see /api/v1/spikes)"
        )));
    }
    let journal = Arc::clone(&app.lock().forensics);
    let lookup = id.clone();
    let text = tokio::task::spawn_blocking(move || journal.capture_json(&lookup))
        .await
        .map_err(|e| ApiError::Internal(format!("reading the capture failed: {e}")))?;
    match text {
        Some(text) => Ok(([(header::CONTENT_TYPE, "application/json")], text).into_response()),
        None => Err(ApiError::NotFound(format!(
            "no capture {id}: it may have been dropped to stay within forensics.max_captures \
             and forensics.max_bytes; /api/v1/spikes lists those kept"
        ))),
    }
}

/// Every CPU now, or with `?from=&to=` over a range of the record.
async fn latency_all(State(app): State<AppState>, query: QueryPairs) -> Result<Response, ApiError> {
    let pairs = query_pairs(query)?;
    match parse_range(&pairs, app.clocks.read().unix_ns, &[]).map_err(ApiError::BadRequest)? {
        None => {
            let now = app.now_ns();
            Ok(axum::Json(json::latency_all(&app.lock(), now)).into_response())
        }
        Some(range) => {
            let (summary, report) = read_record(&app, range).await?;
            let window_ns = app.lock().config.export.max_window_ns;
            Ok(
                axum::Json(json::latency_range(window_ns, range, &summary, &report))
                    .into_response(),
            )
        }
    }
}

/// One CPU in detail. The body and a copy of the histogram are taken
/// under the lock; the histogram is compressed after it is released
/// (DEFLATE of 200 KiB takes long enough to hold up scrapes).
async fn latency_one(
    State(app): State<AppState>,
    Path(cpu): Path<String>,
) -> Result<axum::Json<json::LatencyOneBody>, ApiError> {
    let cpu: usize = cpu.parse().map_err(|_| {
        ApiError::BadRequest(format!(
            "'{cpu}' is not a CPU number: use e.g. /api/v1/latency/0"
        ))
    })?;
    let now = app.now_ns();
    let (body, hdr) = {
        let s = app.lock();
        let view = s.view(cpu).ok_or_else(|| {
            let sampled: Vec<usize> = s.cpus.iter().map(|v| v.cpu).collect();
            ApiError::NotFound(format!(
                "no sampler runs on CPU {cpu}; sampled CPUs are {}",
                format_cpu_list(&sampled)
            ))
        })?;
        let body = json::latency_one(view, s.config.export.max_window_ns, now);
        (body, view.lifetime.hdr().clone())
    };
    let hdr = hdr.to_hdrhistogram();
    let mut encoded = Vec::new();
    V2DeflateSerializer::new()
        .serialize(&hdr, &mut encoded)
        .map_err(|e| ApiError::Internal(format!("cannot encode the histogram: {e:?}")))?;
    let encoded = base64::engine::general_purpose::STANDARD.encode(encoded);
    Ok(axum::Json(body.with_hdr_histogram(encoded)))
}
