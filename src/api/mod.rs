//! The HTTP API (contract: `shared/API.md`, served as `/openapi.json`).
//!
//! One router per area, merged by [`router`]; one shared [`AppState`]; one
//! error type, [`ApiError`], whose every variant maps to a status and a
//! JSON body `{"error": {"code", "message"}}`. Handlers extract, call the
//! store, and shape JSON: no storage logic lives here.

mod articles;
mod error;
mod extract;
mod ingest;
mod ops;
mod rankings;
mod web;

pub use error::ApiError;

use std::net::IpAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use metrics_exporter_prometheus::PrometheusHandle;

use crate::clock::Clock;
use crate::config::Config;
use crate::gate::{BotDetector, Identity};
use crate::store::Store;

/// Everything a handler may need.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub config: Arc<Config>,
    pub identity: Identity,
    pub bots: Arc<BotDetector>,
    pub clock: Arc<dyn Clock>,
    pub admin_token: Arc<str>,
    pub trusted_proxies: Arc<[(IpAddr, u8)]>,
    pub metrics: Option<PrometheusHandle>,
}

impl AppState {
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
    Router::new()
        .merge(
            ingest::router().route_layer(axum::middleware::from_fn_with_state(
                state.clone(),
                web::cors,
            )),
        )
        .merge(articles::router())
        .merge(rankings::router())
        .merge(ops::router())
        .merge(web::router())
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed)
        // Bodies are read and limited by our own extractor, which answers
        // 413 in the contract's JSON shape.
        .layer(DefaultBodyLimit::disable())
        .layer(axum::middleware::from_fn(ops::track))
        .with_state(state)
}
