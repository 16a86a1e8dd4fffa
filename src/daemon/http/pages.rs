//! The pages people look at: the status page (`/`) and the latency plot
//! (`/plot.svg`, the samplers' or timerlat's, live or from the record).

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::handlers::{QueryPairs, query_pairs, read_record};
use super::{ApiError, AppState, parse_range, parse_window};
use crate::daemon::render::page::{self, Snapshot};
use crate::daemon::render::plots;
use crate::plot;

/// The plot's and the page's data, for `?window=` (lifetime without it).
fn snapshot(app: &AppState, query: QueryPairs) -> Result<Snapshot, ApiError> {
    let pairs = query_pairs(query)?;
    let now = app.clocks.read();
    let s = app.lock();
    let window =
        parse_window(&pairs, s.config.export.max_window_ns).map_err(ApiError::BadRequest)?;
    Ok(Snapshot::take(&s, now, window))
}

/// The OSADL-style plot of every sampled CPU (or with `?source=timerlat`,
/// of timerlat's contexts), drawn after the lock is released; with
/// `?from=&to=`, of the record over that range.
pub(super) async fn plot_svg(
    State(app): State<AppState>,
    query: QueryPairs,
) -> Result<Response, ApiError> {
    let mut pairs = query_pairs(query)?;
    let source = plot_source(&mut pairs)?;
    let now = app.clocks.read();
    let range = parse_range(&pairs, now.unix_ns, &["window"]).map_err(ApiError::BadRequest)?;
    let data = match range {
        None => {
            let s = app.lock();
            let window = parse_window(&pairs, s.config.export.max_window_ns)
                .map_err(ApiError::BadRequest)?;
            // An instrument's plot when it is off or cannot run here is a
            // 404 that says why.
            if let Some(why) = (s.parts.get(source.name())).and_then(|part| part.unplotted()) {
                return Err(ApiError::NotFound(why));
            }
            plots::live(&s, now.monotonic_ns, window, &source).0
        }
        Some(range) => {
            if pairs.iter().any(|(k, _)| k == "window") {
                return Err(ApiError::BadRequest(
                    "give either window (the live window) or from/to (the record), not both"
                        .to_string(),
                ));
            }
            let (summary, report) = read_record(&app, range).await?;
            plots::from_record(&app.lock(), range, &summary, &report, &source)
        }
    };
    let svg = app
        .work
        .heavy("the plot", move |_| plot::render_svg(&data))
        .await?
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok((
        [
            (header::CONTENT_TYPE, "image/svg+xml"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        svg,
    )
        .into_response())
}

/// `source=` and `context=` taken out of `pairs`: what the plot draws.
fn plot_source(pairs: &mut Vec<(String, String)>) -> Result<plot::Source, ApiError> {
    let mut given = [None, None];
    for (slot, key) in given.iter_mut().zip(["source", "context"]) {
        let mut values = pairs
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.clone());
        *slot = values.next();
        if values.next().is_some() {
            return Err(ApiError::BadRequest(format!(
                "{key} is given more than once"
            )));
        }
    }
    pairs.retain(|(k, _)| k != "source" && k != "context");
    let [source, context] = given;
    let source = plot::Source::parse(source.as_deref(), context.as_deref())
        .map_err(|e| ApiError::BadRequest(format!("source/context: {e}")))?;
    Ok(source)
}

/// The status page. A plot that cannot be drawn (no font) leaves the
/// rest of the page standing, with the reason in its place.
pub(super) async fn status_page(
    State(app): State<AppState>,
    query: QueryPairs,
) -> Result<Response, ApiError> {
    let snap = snapshot(&app, query)?;
    let html = app
        .work
        .heavy("the status page", move |_| {
            let svg = plot::render_svg(&snap.plot).map_err(|e| e.to_string());
            let instruments: Vec<_> = (snap.instrument_plots.iter())
                .map(|(_, data)| plot::render_svg(data).map_err(|e| e.to_string()))
                .collect();
            let instruments: Vec<_> = (instruments.iter())
                .map(|svg| svg.as_deref().map_err(String::as_str))
                .collect();
            page::render_page(&snap, svg.as_deref().map_err(String::as_str), &instruments)
        })
        .await?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        html,
    )
        .into_response())
}
