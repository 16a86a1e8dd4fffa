//! The endpoints' handlers: each turns a request into a response from one
//! look at the state (routing, the guard and the shared state are in
//! `mod.rs`).

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};

use super::{ApiError, AppState, encoding, parse_range, routes};

use crate::cpulist::format_cpu_list;
use crate::daemon::render::exposition::{self, Exposition};
use crate::daemon::render::{self, json, metrics, openmetrics, protobuf, status};
use crate::instruments::shape::{Api, Refusal, Route};
use crate::record;

pub(super) async fn not_found(uri: axum::http::Uri) -> Response {
    let message = format!(
        "no such path: {}; the routes are {} (described in /api/v1/openapi.json)",
        uri.path(),
        routes().join(", ")
    );
    // Under a page's path (`/spikes/`), the answer is a page too.
    if super::page_prefixes().any(|prefix| uri.path().starts_with(prefix)) {
        return html_error(StatusCode::NOT_FOUND, &message);
    }
    ApiError::NotFound(message).into_response()
}

/// An HTML answer that is not kept by caches (it changes as captures come
/// and go).
fn html(status: StatusCode, body: String) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

/// An error of a page, as a page.
fn html_error(status: StatusCode, message: &str) -> Response {
    let title = format!(
        "{} {}",
        status.as_u16(),
        status.canonical_reason().unwrap_or("Error")
    );
    html(status, render::page::error_page(&title, message))
}

pub(super) async fn openapi() -> Response {
    let document = super::openapi::document();
    ([(header::CONTENT_TYPE, "application/json")], document).into_response()
}

pub(super) type QueryPairs = Result<Query<Vec<(String, String)>>, QueryRejection>;

/// A range of the on-disk record, summarized on the blocking pool (the
/// files are read, streaming, off the runtime's thread). Without a
/// record the answer says how to turn it on.
pub(super) async fn read_record(
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
    app.work
        .heavy("this range", move |cancel| {
            let files: Vec<std::path::PathBuf> = record::writer::list(&dir)
                .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
                .into_iter()
                .map(|f| f.0)
                .collect();
            record::summarize_while(&files, range, None, &|| !cancel.cancelled())
        })
        .await?
        .map_err(ApiError::Internal)
}

pub(super) fn query_pairs(query: QueryPairs) -> Result<Vec<(String, String)>, ApiError> {
    let Query(pairs) = query.map_err(|e| {
        ApiError::BadRequest(format!("the query string is not valid: {}", e.body_text()))
    })?;
    Ok(pairs)
}

/// The runbooks every alert links to, as one page.
pub(super) async fn runbooks() -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        crate::daemon::render::runbooks::page(),
    )
        .into_response()
}

/// The exposition: Prometheus' protobuf format when the scraper asks for
/// it (the only one that carries the native histogram), OpenMetrics text
/// when it asks for that (exemplars, no native histogram), the Prometheus
/// text format otherwise; gzipped when the scraper accepts it.
/// Compressing and encoding happen after the state's lock is released;
/// the render-time histogram covers both.
pub(super) async fn metrics_handler(
    State(app): State<AppState>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    let timer = app.counters.render_seconds.start_timer();
    let header_text = |name| headers.get(name).and_then(|v| v.to_str().ok());
    let accept = header_text(header::ACCEPT);
    let (body, content_type) = match exposition::chosen(accept) {
        Exposition::Protobuf => (
            exposition::protobuf(&app.others, &app.state, app.clocks),
            protobuf::CONTENT_TYPE,
        ),
        Exposition::OpenMetrics => (
            exposition::openmetrics(&app.others, &app.state, app.clocks).into_bytes(),
            openmetrics::CONTENT_TYPE,
        ),
        Exposition::Text => {
            let text =
                metrics::render(&app.registry).map_err(|e| ApiError::Internal(e.to_string()))?;
            (
                text.into_bytes(),
                "text/plain; version=0.0.4; charset=utf-8",
            )
        }
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

pub(super) async fn healthz(State(app): State<AppState>) -> Response {
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
pub(super) async fn livez() -> Response {
    axum::Json(serde_json::json!({ "status": "alive" })).into_response()
}

pub(super) async fn status(State(app): State<AppState>) -> axum::Json<status::StatusBody> {
    let now = app.clocks.read();
    axum::Json(status::status(&app.lock(), now))
}

/// A registered instrument's own route (`/api/v1/NAME`): its JSON, built
/// from its part under the state's lock.
pub(super) async fn instrument_api(app: AppState, name: &'static str, api: Api) -> Response {
    let now = app.now_ns();
    let body = (app.lock().parts.get(name)).map(|part| (api.json)(part, now));
    match body {
        Some(body) => axum::Json(body).into_response(),
        None => ApiError::NotFound(format!("{name} is not in this state")).into_response(),
    }
}

/// A registered instrument's other route ([`Route`]): what it needs
/// taken from its part under the state's lock, then answered (on the pool
/// for heavy work when the route says so). A page's refusals are pages.
pub(super) async fn instrument_route(
    app: AppState,
    name: &'static str,
    route: Route,
    id: Option<String>,
) -> Response {
    let refused = |refusal: Refusal| match (route.page, refusal) {
        (true, Refusal::BadRequest(m)) => html_error(StatusCode::BAD_REQUEST, &m),
        (true, Refusal::NotFound(m)) => html_error(StatusCode::NOT_FOUND, &m),
        (true, Refusal::Internal(m)) => html_error(StatusCode::INTERNAL_SERVER_ERROR, &m),
        (false, Refusal::BadRequest(m)) => ApiError::BadRequest(m).into_response(),
        (false, Refusal::NotFound(m)) => ApiError::NotFound(m).into_response(),
        (false, Refusal::Internal(m)) => ApiError::Internal(m).into_response(),
    };
    if let (Some(check), Some(id)) = (route.check, &id)
        && let Err(message) = check(id)
    {
        return refused(Refusal::BadRequest(message));
    }
    let answer = {
        let s = app.lock();
        match s.parts.get(name) {
            Some(part) => (route.take)(part, &s.host),
            None => {
                return ApiError::NotFound(format!("{name} is not in this state")).into_response();
            }
        }
    };
    let answered = match route.heavy {
        Some(what) => match app.work.heavy(what, move |_| answer(id.as_deref())).await {
            Ok(answered) => answered,
            Err(busy) => return busy.into_response(),
        },
        None => answer(id.as_deref()),
    };
    match answered {
        Ok(body) if route.page => html(StatusCode::OK, body),
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(refusal) => refused(refusal),
    }
}

/// Every CPU now, or with `?from=&to=` over a range of the record.
pub(super) async fn latency_all(
    State(app): State<AppState>,
    query: QueryPairs,
) -> Result<Response, ApiError> {
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
pub(super) async fn latency_one(
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
