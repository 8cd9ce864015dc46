//! `POST/GET /api/webhooks`, `DELETE /api/webhooks/{id}`,
//! `GET /api/webhooks/{id}/deliveries` (admin): subscriptions to a
//! ranking query's top N (src/webhooks has the evaluator and sender).

use std::collections::{BTreeMap, HashMap};

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use serde::Deserialize;
use serde_json::{Value, json};

use super::budget::QueryBudget;
use super::extract::{JsonBody, Params, object};
use super::{ApiError, AppState, rankings};
use crate::model::HotQuery;
use crate::webhooks::model::{EventKind, Subscription};
use crate::webhooks::target::Target;
use crate::webhooks::{Webhooks, new_id};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/webhooks", get(list).post(create))
        .route("/api/webhooks/{id}", delete(remove))
        .route("/api/webhooks/{id}/deliveries", get(deliveries))
}

/// The ranking parameters a subscription may set: those of `/api/hot`
/// but paging and explanations (`top` sets the depth).
fn query_param_allowed(k: &str) -> bool {
    !matches!(
        k,
        "limit" | "offset" | "page" | "pageSize" | "cursor" | "explain"
    ) && rankings::PARAMS.contains(&k)
}

/// A subscription's ranking query from its stored parameters, by
/// `GET /api/hot`'s own rules ([`rankings::query_from`]).
pub fn webhook_query(
    map: &BTreeMap<String, String>,
    config: &crate::config::Config,
) -> Result<HotQuery, ApiError> {
    if let Some(k) = map.keys().find(|k| !query_param_allowed(k)) {
        let allowed: Vec<&str> = rankings::PARAMS
            .iter()
            .copied()
            .filter(|k| query_param_allowed(k))
            .collect();
        return Err(ApiError::bad(
            "invalid_parameter",
            format!(
                "query: unknown or paging parameter {k:?}; a subscription's query takes {} (and top sets the depth)",
                allowed.join(", ")
            ),
        ));
    }
    let p = Params(
        map.iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<HashMap<_, _>>(),
    );
    rankings::query_from(&p, rankings::Limits::of(config)).map(|(q, _)| q)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    url: String,
    secret: String,
    events: Vec<String>,
    #[serde(default)]
    query: serde_json::Map<String, Value>,
    /// A JSON integer (`10`, or `10.0`, which JSON Schema calls one too).
    top: Option<Value>,
}

/// A JSON number that is a non-negative integer, however written.
fn whole(v: &Value) -> Option<u64> {
    match v.as_u64() {
        Some(n) => Some(n),
        None => v
            .as_f64()
            .filter(|f| f.fract() == 0.0 && (0.0..9.0e15).contains(f))
            .map(|f| f as u64),
    }
}

fn running(state: &AppState) -> Result<&Webhooks, ApiError> {
    state.webhooks.get().map(|w| &**w).ok_or_else(|| {
        ApiError::Unavailable("webhooks are not running on this node ([webhooks] enabled)".into())
    })
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::bad("invalid_webhook", message)
}

/// The subscription the body describes, checked field by field.
fn validate(b: CreateBody, state: &AppState, w: &Webhooks) -> Result<Subscription, ApiError> {
    let target = Target::parse(&b.url).map_err(|e| bad(format!("url: {e}")))?;
    let cfg = w.config();
    target
        .check_at_creation(cfg.allow_private)
        .map_err(|e| bad(format!("url: {e}")))?;
    let secret_len = b.secret.chars().count();
    if !(8..=256).contains(&secret_len) || b.secret.chars().any(char::is_control) {
        return Err(bad(
            "secret must be 8-256 characters, no control characters",
        ));
    }
    if b.events.is_empty() {
        return Err(bad(
            "events must name at least one of entered, left, rising, held",
        ));
    }
    let mut events = Vec::new();
    for e in &b.events {
        let k = EventKind::parse(e).ok_or_else(|| {
            bad(format!(
                "events: unknown event {e:?}; known: entered, left, rising, held"
            ))
        })?;
        if !events.contains(&k) {
            events.push(k);
        }
    }
    let top = match &b.top {
        None => 10,
        Some(v) => whole(v)
            .filter(|n| (1..=100).contains(n))
            .ok_or_else(|| bad(format!("top must be an integer in 1..=100, got {v}")))?,
    };
    let mut query = BTreeMap::new();
    for (k, v) in b.query {
        let n = whole(&v);
        let text = match (v, n) {
            (Value::String(s), _) => s,
            (Value::Bool(x), _) => x.to_string(),
            (Value::Number(_), Some(n)) => n.to_string(),
            (other, _) => {
                return Err(ApiError::bad(
                    "invalid_parameter",
                    format!(
                        "query.{k} must be a string, a non-negative integer or a boolean, got {other}"
                    ),
                ));
            }
        };
        query.insert(k, text);
    }
    webhook_query(&query, &state.config)?;
    Ok(Subscription {
        id: new_id(),
        url: b.url,
        secret: b.secret,
        events,
        query,
        top: top as u32,
        created_at: state.clock.now(),
    })
}

/// A subscription as the API shows it: everything but the secret.
fn sub_json(s: &Subscription) -> Value {
    json!({
        "id": s.id,
        "url": s.url,
        "events": s.events.iter().map(|e| e.as_str()).collect::<Vec<_>>(),
        "query": s.query,
        "top": s.top,
        "createdAt": s.created_at,
    })
}

async fn create(
    _: QueryBudget,
    State(state): State<AppState>,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    state.is_admin(&headers)?;
    let w = running(&state)?;
    let b: CreateBody = object(&body)
        .map_err(|e| ApiError::bad("invalid_json", format!("invalid webhook body: {e}")))?;
    let sub = validate(b, &state, w)?;
    if w.list().await?.len() >= w.config().max_subscriptions {
        return Err(ApiError::Conflict(
            "too_many_webhooks",
            format!(
                "{} subscriptions exist (webhooks.max_subscriptions)",
                w.config().max_subscriptions
            ),
        ));
    }
    w.create(&sub).await?;
    let location = format!("/api/webhooks/{}", sub.id);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(sub_json(&sub)),
    )
        .into_response())
}

async fn list(
    _: QueryBudget,
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    state.is_admin(&headers)?;
    let subs = running(&state)?.list().await?;
    Ok(Json(
        json!({"webhooks": subs.iter().map(sub_json).collect::<Vec<_>>()}),
    ))
}

/// The `{id}` of a subscription: what [`new_id`] makes, else 400.
fn check_id(id: &str) -> Result<(), ApiError> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad(
            "invalid_webhook_id",
            "a webhook id is 1-64 of [A-Za-z0-9_-]",
        ))
    }
}

fn no_such(id: &str) -> ApiError {
    ApiError::NotFound("not_found", format!("no webhook {id}"))
}

async fn remove(
    _: QueryBudget,
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.is_admin(&headers)?;
    check_id(&id)?;
    if running(&state)?.delete(&id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(no_such(&id))
    }
}

async fn deliveries(
    _: QueryBudget,
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    state.is_admin(&headers)?;
    check_id(&id)?;
    let w = running(&state)?;
    if !w.list().await?.iter().any(|s| s.id == id) {
        return Err(no_such(&id));
    }
    let attempts = w.deliveries(&id).await?;
    let items: Vec<Value> = attempts
        .iter()
        .map(|a| {
            json!({
                "delivery": a.delivery, "event": a.event.as_str(), "articleId": a.article_id,
                "attempt": a.attempt, "status": a.status, "error": a.error,
                "outcome": a.outcome, "at": a.at_ms / 1000, "atMs": a.at_ms,
                "decidedAtMs": a.decided_ms,
                "durationMs": a.duration_ms,
            })
        })
        .collect();
    Ok(Json(json!({"id": id, "deliveries": items})))
}
