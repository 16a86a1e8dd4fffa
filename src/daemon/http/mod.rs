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
//! - `server`: the accept loop and its limits (`connections`: which to
//!   close for a newcomer); `busy`: expensive work,
//!   bounded and cancelled with its request; `webconfig`: TLS and basic
//!   auth; `query`: query-string parsing; `error`: `ApiError`;
//!   `handlers`: the API's routes; `pages`: the status page and the plot;
//!   `openapi`: the routes' document, with each instrument's schema.

mod busy;
mod connections;
pub mod encoding;
mod error;
mod handlers;
pub mod openapi;
mod pages;
mod query;
pub mod server;
pub mod webconfig;

use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use axum::Router;
use axum::extract::Request;
use axum::extract::{Path, State};
use axum::http::{Method, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use connections::Passage;
pub use error::ApiError;
use handlers::*;
use pages::{plot_svg, status_page};
pub use query::{parse_range, parse_window};
use webconfig::{Lead, Security, Turn};

use super::render::metrics;
use super::state::MonitorState;
use crate::instruments::registry::INSTRUMENTS;

/// The web configuration in force (TLS, basic auth); replaced whole on
/// reload, read by every request and every new connection.
pub type SharedSecurity = Arc<RwLock<Arc<Security>>>;

#[derive(Clone)]
pub struct AppState {
    pub state: Arc<Mutex<MonitorState>>,
    pub registry: prometheus::Registry,
    /// The same without latencyd's state collector (the process and HTTP
    /// metrics): the protobuf and OpenMetrics expositions build the
    /// state's families themselves, unsorted, beside these.
    pub others: prometheus::Registry,
    /// The handlers' and the metrics' clocks.
    pub clocks: metrics::Clocks,
    pub security: SharedSecurity,
    /// What the HTTP surface counts about itself, exported in `registry`.
    pub counters: HttpCounters,
    /// The permits of expensive work (range reads, plots, bcrypt).
    work: busy::Work,
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
    /// Registers the same counters in another registry.
    fn register_in(&self, registry: &prometheus::Registry) {
        for collector in [
            Box::new(self.refused_connections.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(self.refused_credentials.clone()),
            Box::new(self.render_seconds.clone()),
        ] {
            registry.register(collector).expect("registered once");
        }
    }

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
        let others = metrics::process_registry(with_process_metrics);
        let counters = HttpCounters::registered_in(&registry);
        counters.register_in(&others);
        AppState {
            state,
            registry,
            others,
            clocks,
            security: Arc::new(RwLock::new(Arc::new(Security::open()))),
            counters,
            work: busy::Work::default(),
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

/// The daemon's own routes (the registered instruments' follow
/// [`INSTRUMENT_ROUTES_AFTER`] in [`routes`]).
const OWN_ROUTES: &[&str] = &[
    "/",
    "/plot.svg",
    "/metrics",
    "/healthz",
    "/livez",
    "/api/v1/status",
    "/api/v1/latency",
    "/api/v1/latency/{cpu}",
    "/api/v1/openapi.json",
    "/runbooks",
];

/// The route the registered instruments' routes (`/api/v1/NAME`, then
/// their others) follow, in the list and in the OpenAPI document.
pub const INSTRUMENT_ROUTES_AFTER: &str = "/api/v1/status";

/// Every route `router` serves, as written in the OpenAPI document
/// (`/api/v1/openapi.json`, checked against both by `tests/daemon_http.rs`):
/// the daemon's own, and each registered instrument's.
pub fn routes() -> &'static [String] {
    static ROUTES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    ROUTES.get_or_init(|| {
        let mut routes: Vec<String> = OWN_ROUTES.iter().map(|r| r.to_string()).collect();
        let at = (routes.iter().position(|r| r == INSTRUMENT_ROUTES_AFTER)).map_or(0, |at| at + 1);
        let own = INSTRUMENTS.iter().flat_map(|entry| {
            let api = (entry.api.is_some()).then(|| format!("/api/v1/{}", entry.name));
            let others = entry.routes.iter().flat_map(|r| r.list.iter());
            api.into_iter()
                .chain(others.map(|route| route.path.to_string()))
        });
        routes.splice(at..at, own.collect::<Vec<_>>());
        routes
    })
}

/// The registered instruments' pages' paths before their parameter
/// (`/spikes/` of `/spikes/{id}`): a path under one that is not found is
/// answered with a page.
fn page_prefixes() -> impl Iterator<Item = &'static str> {
    (INSTRUMENTS.iter())
        .flat_map(|entry| entry.routes.iter().flat_map(|r| r.list.iter()))
        .filter(|route| route.page)
        .filter_map(|route| route.path.split_once('{').map(|(prefix, _)| prefix))
}

/// The routes; the metrics are served at `export.telemetry_path`
/// (`/metrics` unless configured).
pub fn router(app: AppState) -> Router {
    let telemetry_path = app.lock().config.export.telemetry_path.clone();
    let mut router = Router::new();
    for entry in INSTRUMENTS {
        if let Some(api) = entry.api {
            let route = format!("/api/v1/{}", entry.name);
            let name = entry.name;
            router = router.route(
                &route,
                get(move |State(app): State<AppState>| instrument_api(app, name, api)),
            );
        }
        for &route in entry.routes.iter().flat_map(|r| r.list.iter()) {
            let name = entry.name;
            router = if route.path.contains('{') {
                router.route(
                    route.path,
                    get(move |State(app): State<AppState>, Path(id): Path<String>| {
                        instrument_route(app, name, route, Some(id))
                    }),
                )
            } else {
                router.route(
                    route.path,
                    get(move |State(app): State<AppState>| {
                        instrument_route(app, name, route, None)
                    }),
                )
            };
        }
    }
    router
        .route("/", get(status_page))
        .route("/plot.svg", get(plot_svg))
        .route(&telemetry_path, get(metrics_handler))
        .route("/healthz", get(healthz))
        .route(LIVENESS_PATH, get(livez))
        .route("/api/v1/status", get(status))
        .route("/api/v1/latency", get(latency_all))
        .route("/api/v1/latency/{cpu}", get(latency_one))
        .route("/api/v1/openapi.json", get(openapi))
        .route("/runbooks", get(runbooks))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(app.clone(), guard))
        .with_state(app)
}

/// Whether the router can be built with the metrics at `telemetry_path`
/// (axum refuses a path that collides with another route, or that it
/// reads as a parameter, by panicking): tried on a router of the same
/// routes, the panic caught and said.
pub fn check_routes(telemetry_path: &str) -> Result<(), String> {
    let built = std::panic::catch_unwind(|| {
        let mut router = Router::<()>::new().route(telemetry_path, get(|| async {}));
        // The metrics' own route is where the configuration puts it.
        for route in routes().iter().filter(|r| *r != "/metrics") {
            router = router.route(route, get(|| async {}));
        }
        drop(router);
    });
    built.map_err(|panic| {
        let why = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("the router refused it");
        format!("{telemetry_path} cannot be served beside latencyd's own routes: {why}")
    })
}

/// The liveness probe's path, the one served without credentials: it says
/// only that the exporter answers, as Kubernetes' own components leave
/// `/livez` open to their probes.
pub const LIVENESS_PATH: &str = "/livez";

/// Whether `authorization` carries a configured user's password: the
/// answer of a check of the same credential under way if there is one,
/// else a bcrypt check of its own whose answer the others share.
async fn verify(
    app: &AppState,
    security: &Arc<Security>,
    peer: Option<std::net::IpAddr>,
    authorization: Option<Vec<u8>>,
) -> Result<bool, ApiError> {
    let Some(auth) = security.auth.as_ref() else {
        return Ok(true);
    };
    let lead = match auth.turn(authorization.as_deref()) {
        Turn::Lead(lead) => Some(lead),
        Turn::Follow(follow) => match Lead::wait(follow).await {
            Some(ok) => return Ok(ok),
            // The check it waited for was refused or dropped: its own.
            None => None,
        },
    };
    let security = Arc::clone(security);
    let ok = app
        .work
        .bcrypt(peer, move |_| {
            security
                .auth
                .as_ref()
                .is_some_and(|auth| auth.check(authorization.as_deref()))
        })
        .await?;
    if let Some(lead) = lead {
        lead.answer(ok);
    }
    Ok(ok)
}

/// What every request passes before it is routed, in this order:
/// authentication when the web configuration asks for it (401 with
/// `WWW-Authenticate`; `LIVENESS_PATH` excepted), GET or HEAD only (405
/// with `Allow`), no body (413). Each refusal is a JSON error like every
/// other.
async fn guard(State(app): State<AppState>, request: Request, next: Next) -> Response {
    let security = app.security();
    let passage = request.extensions().get::<Passage>().cloned();
    if security.auth.is_some() && request.uri().path() != LIVENESS_PATH {
        let peer = passage.as_ref().and_then(Passage::peer);
        let authorization = request
            .headers()
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes().to_vec());
        let remembered = security
            .auth
            .as_ref()
            .is_some_and(|auth| auth.remembered(authorization.as_deref()));
        // bcrypt takes milliseconds: off the runtime's thread, a few at a
        // time (busy.rs), once per credential however many requests carry
        // it at once (auth.rs); a credential already verified needs none.
        let ok = if remembered {
            true
        } else {
            match verify(&app, &security, peer, authorization).await {
                Ok(ok) => ok,
                Err(busy) => {
                    if let Some(passage) = &passage {
                        passage.refused();
                    }
                    return busy.into_response();
                }
            }
        };
        if !ok {
            if let Some(passage) = &passage {
                passage.refused();
            }
            app.counters.refused_credentials.inc();
            return ApiError::Unauthorized(
                "missing or wrong credentials: this endpoint needs HTTP basic authentication"
                    .to_string(),
            )
            .into_response();
        }
    }
    // Past authentication: only now does the request keep its connection
    // from being closed for a newcomer (connections.rs).
    if let Some(passage) = &passage {
        passage.passed();
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
