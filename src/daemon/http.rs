//! The HTTP surface: `/metrics`, `/healthz`, the read-only JSON API, and
//! for people the status page `/` and the plot `/plot.svg` (see `page`).
//!
//! Handlers take the state's lock once and build their whole answer from
//! it, so the numbers of a response agree with each other and with a
//! `/metrics` scrape taken at the same moment. Errors are JSON
//! `{"error": …}` with a 4xx status, mapped in one place (`ApiError`). The
//! JSON shapes are DTOs of this module; the state types know nothing of
//! serialization.

use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use axum::Router;
use axum::extract::Request;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use serde::Serialize;

use super::metrics;
use super::page::{self, Snapshot};
use super::state::{CpuView, MonitorState};
use crate::cpulist::format_cpu_list;
use crate::plot;
use crate::report::HostFacts;
use crate::stats::{P50, P90, P99, P999, P9999};
use crate::sys;
use crate::webconfig::Security;

/// The web configuration in force (TLS, basic auth); replaced whole on
/// reload, read by every request and every new connection.
pub type SharedSecurity = Arc<RwLock<Arc<Security>>>;

#[derive(Clone)]
pub struct AppState {
    pub state: Arc<Mutex<MonitorState>>,
    pub registry: prometheus::Registry,
    /// `CLOCK_MONOTONIC` now, replaceable so tests can pin time.
    pub now_ns: fn() -> u64,
    pub security: SharedSecurity,
}

impl AppState {
    pub fn new(state: Arc<Mutex<MonitorState>>, with_process_metrics: bool) -> AppState {
        let registry = metrics::registry(Arc::clone(&state), with_process_metrics);
        AppState {
            state,
            registry,
            now_ns: sys::monotonic_now_ns,
            security: Arc::new(RwLock::new(Arc::new(Security::open()))),
        }
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
    "/api/v1/status",
    "/api/v1/latency",
    "/api/v1/latency/{cpu}",
    "/api/v1/openapi.json",
];

/// The OpenAPI 3.1 description of the routes.
pub const OPENAPI: &str = include_str!("openapi.json");

pub fn router(app: AppState) -> Router {
    Router::new()
        .route("/", get(status_page))
        .route("/plot.svg", get(plot_svg))
        .route("/metrics", get(metrics_handler))
        .route("/healthz", get(healthz))
        .route("/api/v1/status", get(status))
        .route("/api/v1/latency", get(latency_all))
        .route("/api/v1/latency/{cpu}", get(latency_one))
        .route("/api/v1/openapi.json", get(openapi))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(app.clone(), guard))
        .with_state(app)
}

/// What every request passes before it is routed, in this order:
/// authentication when the web configuration asks for it (401 with
/// `WWW-Authenticate`), GET or HEAD only (405 with `Allow`), no body (413).
/// Each refusal is a JSON error like every other.
async fn guard(State(app): State<AppState>, request: Request, next: Next) -> Response {
    let security = app.security();
    if security.auth.is_some() {
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

/// Every error a request can meet, with its status.
#[derive(Debug)]
pub enum ApiError {
    NotFound(String),
    BadRequest(String),
    Unauthorized(String),
    MethodNotAllowed(String),
    PayloadTooLarge(String),
    Internal(String),
    Unavailable(String),
}

#[derive(Serialize)]
struct ErrorBody {
    error: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, message) = match self {
            ApiError::NotFound(m) => (StatusCode::NOT_FOUND, m),
            ApiError::BadRequest(m) => (StatusCode::BAD_REQUEST, m),
            ApiError::Unauthorized(m) => (StatusCode::UNAUTHORIZED, m),
            ApiError::MethodNotAllowed(m) => (StatusCode::METHOD_NOT_ALLOWED, m),
            ApiError::PayloadTooLarge(m) => (StatusCode::PAYLOAD_TOO_LARGE, m),
            ApiError::Internal(m) => (StatusCode::INTERNAL_SERVER_ERROR, m),
            ApiError::Unavailable(m) => (StatusCode::SERVICE_UNAVAILABLE, m),
        };
        let mut response = (status, axum::Json(ErrorBody { error: message })).into_response();
        let extra = match status {
            StatusCode::UNAUTHORIZED => Some((
                header::WWW_AUTHENTICATE,
                "Basic realm=\"latencyd\", charset=\"UTF-8\"",
            )),
            StatusCode::METHOD_NOT_ALLOWED => Some((header::ALLOW, "GET, HEAD")),
            StatusCode::SERVICE_UNAVAILABLE => Some((header::RETRY_AFTER, "1")),
            _ => None,
        };
        if let Some((name, value)) = extra {
            response
                .headers_mut()
                .insert(name, HeaderValue::from_static(value));
        }
        response
    }
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
    let now = (app.now_ns)();
    let s = app.lock();
    let window =
        page::parse_window(&pairs, s.config.export.max_window_ns).map_err(ApiError::BadRequest)?;
    Ok(Snapshot::take(&s, now, window))
}

/// The OSADL-style plot of every sampled CPU, drawn after the lock is
/// released.
async fn plot_svg(State(app): State<AppState>, query: QueryPairs) -> Result<Response, ApiError> {
    let snap = snapshot(&app, query)?;
    let svg = plot::render_svg(&snap.plot).map_err(|e| ApiError::Internal(e.to_string()))?;
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

async fn metrics_handler(State(app): State<AppState>) -> Result<Response, ApiError> {
    let text = metrics::render(&app.registry).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response())
}

#[derive(Serialize)]
struct HealthBody {
    status: &'static str,
    stale: Vec<StaleSampler>,
}

#[derive(Serialize)]
struct StaleSampler {
    cpu: usize,
    last_sample_age_ns: u64,
}

async fn healthz(State(app): State<AppState>) -> Response {
    let health = app.lock().health((app.now_ns)());
    let status = if health.healthy {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = HealthBody {
        status: if health.healthy { "ok" } else { "unhealthy" },
        stale: health
            .stale
            .into_iter()
            .map(|(cpu, age)| StaleSampler {
                cpu,
                last_sample_age_ns: age,
            })
            .collect(),
    };
    (status, axum::Json(body)).into_response()
}

#[derive(Serialize)]
struct StatusBody {
    version: &'static str,
    uptime_ns: u64,
    healthy: bool,
    realtime: bool,
    non_rt_reasons: Vec<String>,
    listen: String,
    reload_failures: u64,
    host: HostBody,
    config: ConfigBody,
    samplers: Vec<SamplerBody>,
}

#[derive(Serialize)]
struct HostBody {
    nodename: String,
    kernel: String,
    kernel_version: String,
    machine: String,
    #[serde(flatten)]
    facts: HostFacts,
}

#[derive(Serialize)]
struct ConfigBody {
    cpus: Vec<usize>,
    interval_ns: u64,
    policy: &'static str,
    priority: i32,
    warmup_ns: u64,
    spike_threshold_ns: u64,
    pm_qos: bool,
    realtime_required: bool,
    listen: String,
    max_window_ns: u64,
    per_cpu_histograms: bool,
    buckets_ns: Vec<u64>,
    log_level: &'static str,
    /// Where each key's value came from (`section.key` → source).
    sources: std::collections::BTreeMap<String, String>,
}

#[derive(Serialize)]
struct SamplerBody {
    cpu: usize,
    tid: i32,
    policy: &'static str,
    priority: i32,
    realtime: bool,
    alive: bool,
    /// False while the CPU is offline (its sampler stopped, not failed).
    online: bool,
    last_sample_age_ns: Option<u64>,
}

async fn status(State(app): State<AppState>) -> axum::Json<StatusBody> {
    let now = (app.now_ns)();
    let s = app.lock();
    let c = &s.config;
    let host = &s.host;
    axum::Json(StatusBody {
        version: env!("CARGO_PKG_VERSION"),
        uptime_ns: now.saturating_sub(s.started_ns),
        healthy: s.health(now).healthy,
        realtime: s.cpus.iter().all(|v| v.sampler.realtime),
        non_rt_reasons: s.non_rt_reasons.clone(),
        listen: s.listen.to_string(),
        reload_failures: s.reload_failures,
        host: HostBody {
            nodename: host.uname.nodename.clone(),
            kernel: host.uname.release.clone(),
            kernel_version: host.uname.version.clone(),
            machine: host.uname.machine.clone(),
            facts: HostFacts::of(host),
        },
        config: ConfigBody {
            cpus: s.cpus.iter().map(|v| v.cpu).collect(),
            interval_ns: c.measure.interval_ns,
            policy: c.measure.policy.name(),
            priority: c.measure.priority,
            warmup_ns: c.measure.warmup_ns,
            spike_threshold_ns: c.measure.spike_threshold_ns,
            pm_qos: c.measure.pm_qos,
            realtime_required: c.realtime.required,
            listen: c.export.listen.to_string(),
            max_window_ns: c.export.max_window_ns,
            per_cpu_histograms: c.export.per_cpu_histograms,
            buckets_ns: c.export.buckets_ns.clone(),
            log_level: c.log.level.name(),
            sources: c
                .effective
                .iter()
                .map(|(key, e)| (key.clone(), e.source.clone()))
                .collect(),
        },
        samplers: s
            .cpus
            .iter()
            .map(|v| SamplerBody {
                cpu: v.cpu,
                tid: v.sampler.tid,
                policy: v.sampler.policy.name(),
                priority: v.sampler.priority,
                realtime: v.sampler.realtime,
                alive: v.sampler.alive,
                online: v.sampler.online,
                last_sample_age_ns: (v.sampler.last_sample_ns > 0)
                    .then(|| now.saturating_sub(v.sampler.last_sample_ns)),
            })
            .collect(),
    })
}

/// One CPU's latency summary; all times in nanoseconds.
#[derive(Serialize)]
struct LatencyBody {
    cpu: usize,
    count: u64,
    min_ns: u64,
    avg_ns: f64,
    max_ns: u64,
    /// `null` while the window holds no sample.
    window_max_ns: Option<u64>,
    p50_ns: u64,
    p90_ns: u64,
    p99_ns: u64,
    p999_ns: u64,
    p9999_ns: u64,
    missed: u64,
    overflows: u64,
    spikes: u64,
}

fn latency_body(view: &CpuView, now_ns: u64) -> LatencyBody {
    let stats = &view.lifetime;
    LatencyBody {
        cpu: view.cpu,
        count: stats.count,
        min_ns: stats.min_ns(),
        avg_ns: stats.avg_ns(),
        max_ns: stats.max_ns,
        window_max_ns: view.window.max(now_ns),
        p50_ns: stats.quantile_ns(P50),
        p90_ns: stats.quantile_ns(P90),
        p99_ns: stats.quantile_ns(P99),
        p999_ns: stats.quantile_ns(P999),
        p9999_ns: stats.quantile_ns(P9999),
        missed: stats.missed,
        overflows: stats.hdr_overflows,
        spikes: stats.spikes,
    }
}

#[derive(Serialize)]
struct LatencyAllBody {
    window_ns: u64,
    cpus: Vec<LatencyBody>,
}

async fn latency_all(State(app): State<AppState>) -> axum::Json<LatencyAllBody> {
    let now = (app.now_ns)();
    let s = app.lock();
    axum::Json(LatencyAllBody {
        window_ns: s.config.export.max_window_ns,
        cpus: s.cpus.iter().map(|v| latency_body(v, now)).collect(),
    })
}

#[derive(Serialize)]
struct LatencyOneBody {
    window_ns: u64,
    #[serde(flatten)]
    latency: LatencyBody,
    /// The non-empty HDR buckets: samples from `lowest_ns` to `highest_ns`.
    buckets: Vec<HdrBucket>,
    /// The HDR histogram, base64 of HdrHistogram's V2 format compressed
    /// with DEFLATE (what HdrHistogram's Java and JS tools decode).
    hdr_histogram: String,
}

#[derive(Serialize)]
struct HdrBucket {
    lowest_ns: u64,
    highest_ns: u64,
    count: u64,
}

async fn latency_one(
    State(app): State<AppState>,
    Path(cpu): Path<String>,
) -> Result<axum::Json<LatencyOneBody>, ApiError> {
    let cpu: usize = cpu.parse().map_err(|_| {
        ApiError::BadRequest(format!(
            "'{cpu}' is not a CPU number: use e.g. /api/v1/latency/0"
        ))
    })?;
    let now = (app.now_ns)();
    let s = app.lock();
    let view = s.view(cpu).ok_or_else(|| {
        let sampled: Vec<usize> = s.cpus.iter().map(|v| v.cpu).collect();
        ApiError::NotFound(format!(
            "no sampler runs on CPU {cpu}; sampled CPUs are {}",
            format_cpu_list(&sampled)
        ))
    })?;
    let hdr = view.lifetime.hdr();
    let mut encoded = Vec::new();
    V2DeflateSerializer::new()
        .serialize(hdr, &mut encoded)
        .map_err(|e| ApiError::Internal(format!("cannot encode the histogram: {e:?}")))?;
    Ok(axum::Json(LatencyOneBody {
        window_ns: s.config.export.max_window_ns,
        latency: latency_body(view, now),
        buckets: hdr
            .iter_recorded()
            .map(|v| HdrBucket {
                lowest_ns: hdr.lowest_equivalent(v.value_iterated_to()),
                highest_ns: v.value_iterated_to(),
                count: v.count_at_value(),
            })
            .collect(),
        hdr_histogram: base64::engine::general_purpose::STANDARD.encode(encoded),
    }))
}
