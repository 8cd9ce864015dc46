//! Operations: health, readiness, metrics, stats and the OpenAPI document.

use std::net::IpAddr;
use std::time::Instant;

use axum::Json;
use axum::Router;
use axum::extract::{MatchedPath, RawQuery, Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics::{Counter, Histogram};
use serde_json::{Value, json};

use super::around::Hooks;
use super::budget::QueryBudget;
use super::extract::Params;
use super::{ApiError, AppState};
use crate::gate::KeyedMap;
use crate::model::{Quarantine, Verdict};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(prometheus))
        .route("/openapi.json", get(openapi))
        .route("/api/stats", get(stats))
        .route("/api/settings", get(settings))
}

/// The OpenAPI document, kept beside the code and checked against the
/// router by a test.
pub const OPENAPI: &str = include_str!("openapi.json");

async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok", "version": crate::metrics::VERSION}))
}

/// 200, or 503 saying why in `error.reason`.
async fn readyz(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    match state.store.ready().await {
        Err(crate::store::StoreError::Unavailable(why)) => return Err(ApiError::NotReady(why)),
        r => r?,
    }
    if let Some(why) = state.store.warming() {
        return Err(ApiError::NotReady(why));
    }
    Ok(Json(json!({"status": "ready"})))
}

async fn prometheus(State(state): State<AppState>) -> Response {
    crate::metrics::refresh_process();
    let body = state
        .metrics
        .as_ref()
        .map(|h| h.render())
        .unwrap_or_default();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

pub fn quarantine_json(q: &Quarantine) -> Value {
    let mut m = serde_json::Map::new();
    for v in Verdict::ALL {
        if let Some(i) = v.quarantine_slot() {
            m.insert(v.as_str().to_string(), json!(q.0[i]));
        }
    }
    Value::Object(m)
}

/// What the dashboard takes from the server's configuration: the site's
/// time zone (`dashboard.time_zone`), its default when the browser has no
/// choice of its own.
async fn settings(State(state): State<AppState>) -> Json<Value> {
    Json(json!({"timeZone": state.config.dashboard.time_zone}))
}

async fn stats(
    _: QueryBudget,
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let p = Params::parse(raw.as_deref(), &["hours"])?;
    let hours = p.int("hours", 1, 24 * 90)?.unwrap_or(24) as u32;
    let s = state.store.stats(state.clock.now(), hours).await?;
    let by_hour: Vec<Value> = s
        .quarantine_by_hour
        .iter()
        .map(|(h, q)| json!({"hour": h * 3600, "quarantined": quarantine_json(q)}))
        .collect();
    let mut body = json!({
        "articles": s.articles,
        "counted": s.counted,
        "quarantined": quarantine_json(&s.quarantined),
        "quarantinedTotal": s.quarantined.total(),
        "quarantinedByHour": by_hour,
        "byArticle": s.quarantine_by_article.iter()
            .map(|(id, q)| json!({"id": id, "quarantined": quarantine_json(q), "total": q.total()}))
            .collect::<Vec<_>>(),
        "byCrawler": s.quarantine_by_crawler.iter()
            .map(|(family, n)| json!({"family": family, "events": n}))
            .collect::<Vec<_>>(),
    });
    // The Redis store's archive writer (direct or pipeline): how old the
    // archive is (README, "The archive: PostgreSQL").
    let archive = &state.config.archive;
    if state.config.store == crate::config::StoreKind::Redis
        && !archive.url.is_empty()
        && archive.flush_secs > 0
    {
        body["archiveAgeSeconds"] = json!(state.store.archive_age().await?);
    }
    if let Some(queue) = &state.queue {
        body["pipeline"] = json!(queue.status().await?);
    }
    Ok(Json(body))
}

/// Counts requests by route and status, and writes the access log (an
/// [`Around`](super::around::Around) layer over every route). Holds the
/// trusted proxies, to name the client as the handlers do.
#[derive(Clone)]
pub struct Track(pub std::sync::Arc<[(IpAddr, u8)]>);

impl Hooks for Track {
    type Seen = (Instant, Method, Option<MatchedPath>, IpAddr);

    fn before(&self, req: &Request) -> Self::Seen {
        let route = req.extensions().get::<MatchedPath>().cloned();
        let client = super::extract::request_client(req.extensions(), req.headers(), &self.0);
        (Instant::now(), req.method().clone(), route, client)
    }

    fn after<B>((started, method, route, client): Self::Seen, resp: &mut axum::http::Response<B>) {
        let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
        record(route, &method, resp.status(), started.elapsed(), client);
    }
}

/// Counts one answered request (`hotrank_http_*`) and writes its access
/// log line ([`super::access`]).
pub fn record(
    route: &str,
    method: &Method,
    status: StatusCode,
    elapsed: std::time::Duration,
    client: IpAddr,
) {
    let (requests, seconds) = handles(route, status);
    requests.increment(1);
    seconds.record(elapsed.as_secs_f64());
    super::access::log(route, method, status, elapsed, client);
}

thread_local! {
    /// The request metrics' handles by route and status, per thread: a
    /// labelled key built and looked up in the registry for every request
    /// cost more than the rest of the request's bookkeeping. Routes are the
    /// router's patterns and statuses are few, so this stays small.
    /// Hashed with foldhash: SipHash's three lookups cost ~500 instructions
    /// a request, and the keys are the router's own.
    static HANDLES: std::cell::RefCell<KeyedMap<String, ByStatus>> = std::cell::RefCell::default();
}

/// One route's handles: requests by status, and its latency.
type ByStatus = KeyedMap<u16, (Counter, Histogram)>;

fn handles(route: &str, status: StatusCode) -> (Counter, Histogram) {
    HANDLES.with_borrow_mut(|by_route| {
        if !by_route.contains_key(route) {
            by_route.insert(route.to_string(), ByStatus::default());
        }
        let by_status = by_route.get_mut(route).expect("inserted above");
        by_status
            .entry(status.as_u16())
            .or_insert_with(|| {
                let route = route.to_string();
                (
                    metrics::counter!(
                        "hotrank_http_requests_total",
                        "route" => route.clone(),
                        "status" => status.as_u16().to_string()
                    ),
                    metrics::histogram!("hotrank_http_request_seconds", "route" => route),
                )
            })
            .clone()
    })
}
