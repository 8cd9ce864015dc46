//! The HTTP API (reference: docs/api.md, served as `/openapi.json`).
//!
//! One router per area, merged by [`router`]; one shared [`AppState`]; one
//! error type, [`ApiError`], whose every variant maps to a status and a
//! JSON body `{"error": {"code", "message"}}`. Handlers extract, call the
//! store, and shape JSON: no storage logic lives here.

mod access;
mod around;
mod articles;
pub mod budget;
mod ctr;
mod curated;
mod curation;
mod error;
mod event_json;
mod extract;
mod feeds;
mod guard;
pub use extract::request_client;
pub use guard::head_refusal;
pub use ops::record as record_request;
mod ingest;
pub mod movement;
mod ops;
mod overview;
mod rankings;
mod stream;
mod web;
mod webhooks;
mod widget;

pub use curated::{held_articles, public_ranking};
pub use error::ApiError;
pub use ingest::IngestMeters;
pub use rankings::PARAMS as RANKING_PARAMS;
pub use webhooks::webhook_query;

use std::net::IpAddr;
use std::sync::Arc;

use axum::Router;
use metrics_exporter_prometheus::PrometheusHandle;

use crate::clock::Clock;
use crate::config::Config;
use crate::gate::{BotDetector, Identity};
use crate::store::Store;

/// Everything a handler may need: one pointer, so that the clones axum
/// makes for every request (the routed service, each `State` extractor)
/// are one reference count rather than one per shared part.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    pub fn new(shared: Shared) -> Self {
        AppState(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// What [`AppState`] points to.
pub struct Shared {
    pub store: Arc<dyn Store>,
    /// Pins, exclusions and review, applied to every public ranking.
    pub curation: Arc<crate::curation::Curator>,
    /// The queue ingest goes through instead of the store, if any (the
    /// Redis pipeline): events are answered `queued`.
    pub queue: Option<Arc<dyn crate::store::Queue>>,
    /// Set to true when the server begins to shut down: long-lived answers
    /// (live streams) end instead of holding the shutdown.
    pub closing: tokio::sync::watch::Sender<bool>,
    pub config: Arc<Config>,
    pub identity: Identity,
    pub bots: Arc<BotDetector>,
    pub clock: Arc<dyn Clock>,
    pub admin_token: Arc<str>,
    pub trusted_proxies: Arc<[(IpAddr, u8)]>,
    pub metrics: Option<PrometheusHandle>,
    pub budgets: Arc<budget::Budgets>,
    pub ingest_meters: IngestMeters,
    /// This node's webhooks (src/webhooks), set once they start
    /// ([`crate::app::Parts`]); unset, the webhook routes answer 503.
    pub webhooks: std::sync::OnceLock<Arc<crate::webhooks::Webhooks>>,
    /// Earlier rankings, for each item's movement.
    pub movements: Arc<movement::Movements>,
    /// The widget's impressions and clicks, apart from views.
    pub ctr: Arc<crate::ctr::Ctr>,
}

impl Shared {
    /// The block a client address is budgeted by (`limits.ipv4_prefix`,
    /// `limits.ipv6_prefix`), for every per-IP limit.
    pub fn ip_block(&self, ip: IpAddr) -> IpAddr {
        self.budgets.block(ip)
    }

    /// The rate-limit key of a client address: its block's keyed hash.
    pub fn ip_key(&self, ip: IpAddr) -> u64 {
        self.identity.ip(self.ip_block(ip))
    }

    /// Whether `Authorization` carries the admin token.
    fn is_admin(&self, headers: &axum::http::HeaderMap) -> Result<(), ApiError> {
        match bearer(headers) {
            Some(t) if constant_time_eq(t, &self.admin_token) => Ok(()),
            Some(_) => Err(ApiError::Unauthorized("wrong admin token".into())),
            None => Err(ApiError::Unauthorized(
                "this endpoint needs Authorization: Bearer <admin token>".into(),
            )),
        }
    }

    /// `Ok(true)` for a request carrying the ingest or admin token,
    /// `Ok(false)` for one with no token, an error for a wrong token.
    fn is_trusted(&self, headers: &axum::http::HeaderMap) -> Result<bool, ApiError> {
        let Some(t) = bearer(headers) else {
            return Ok(false);
        };
        let ingest = self.config.ingest_token.as_deref();
        if constant_time_eq(t, &self.admin_token) || ingest.is_some_and(|i| constant_time_eq(t, i))
        {
            Ok(true)
        } else {
            Err(ApiError::Unauthorized("wrong ingest token".into()))
        }
    }
}

impl Shared {
    /// For posting and voting: with `access = "token"` the request must
    /// carry the ingest or admin token. `Ok(trusted)`.
    fn check_access(
        &self,
        access: crate::config::Access,
        key: &str,
        headers: &axum::http::HeaderMap,
    ) -> Result<bool, ApiError> {
        let trusted = self.is_trusted(headers)?;
        if access == crate::config::Access::Token && !trusted {
            return Err(ApiError::Unauthorized(format!(
                "this endpoint needs Authorization: Bearer <ingest or admin token> ({key} = \"token\")"
            )));
        }
        Ok(trusted)
    }
}

fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    let v = headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let t = v
        .strip_prefix("Bearer ")
        .or_else(|| v.strip_prefix("bearer "))?;
    Some(t.trim())
}

fn constant_time_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The whole API.
pub fn router(state: AppState) -> Router {
    // Public reads any page may make from the browser (the widget on a
    // site's own origin): `Access-Control-Allow-Origin: *`.
    let public = around::Around(web::PublicRead);
    let routes = Router::new()
        .merge(ingest::router().route_layer(around::Around(web::Cors(state.config.clone()))))
        .merge(articles::router())
        .merge(curation::router())
        .merge(rankings::router().route_layer(public.clone()))
        .merge(feeds::router().route_layer(public.clone()))
        .merge(stream::router(&state).route_layer(public))
        .merge(overview::router())
        .merge(ctr::router())
        .merge(ops::router())
        .merge(webhooks::router())
        .merge(web::router())
        .merge(widget::router());
    guarded(routes, state)
}

/// What every route shares: JSON 404/405, a JSON 500 for a panicking
/// handler, and the request metrics around all of it. (The head limits
/// come first, in the accept loop: [`head_refusal`].) Bodies are read and
/// limited by our own extractor, [`extract::JsonBody`], which answers 413
/// in the contract's JSON shape; axum's own body extractors keep their
/// default limit.
///
/// The panic guard and the metrics are one `layer` call: axum boxes each
/// route once per call, and every request clones the boxes of its route.
fn guarded(routes: Router<AppState>, state: AppState) -> Router {
    routes
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed)
        .layer(
            tower::ServiceBuilder::new()
                .layer(around::Around(ops::Track(state.trusted_proxies.clone())))
                .layer(tower_http::catch_panic::CatchPanicLayer::custom(
                    guard::panic_response,
                )),
        )
        .with_state(state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use tower::ServiceExt;

    #[tokio::test]
    async fn a_panicking_handler_answers_json_500_and_is_counted() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            data_dir: dir.path().to_path_buf(),
            ..Config::default()
        };
        let (store, _) = crate::store::embedded::EmbeddedStore::open(
            crate::store::embedded::Durability::from_config(&config),
            crate::store::StoreSettings::from_config(&config),
        )
        .unwrap();
        let state = crate::server::build_state(
            config,
            Arc::new(store),
            None,
            Arc::new(crate::clock::ManualClock::at(1_763_760_000)),
        )
        .unwrap();
        let metrics = state.metrics.clone().unwrap();
        let app = guarded(
            Router::new().route(
                "/boom",
                axum::routing::get(|| async {
                    let v: Vec<u8> = Vec::new();
                    v[3].to_string()
                }),
            ),
            state,
        );
        for _ in 0..2 {
            let resp = app
                .clone()
                .oneshot(Request::get("/boom").body(Body::empty()).unwrap())
                .await
                .unwrap();
            assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
            let body = axum::body::to_bytes(resp.into_body(), 1 << 16)
                .await
                .unwrap();
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(v["error"]["code"], "internal", "{v}");
        }
        let text = metrics.render();
        let count = |prefix: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(prefix))
                .and_then(|v| v.trim().parse::<f64>().ok())
        };
        assert_eq!(count("hotrank_http_panics_total "), Some(2.0), "{text}");
        assert_eq!(
            count("hotrank_http_requests_total{route=\"/boom\",status=\"500\"} "),
            Some(2.0),
            "{text}"
        );
    }
}
