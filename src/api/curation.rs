//! The editor's routes (admin token): `PUT`/`DELETE
//! /api/articles/{id}/pin` and `.../exclude`, `GET /api/review`, `POST
//! /api/review/{id}`. Bad input is a 400 that changes nothing; an unknown
//! article a 404, as `PUT`/`DELETE /api/articles/{id}` answer.

use axum::Json;
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post, put};
use serde::Deserialize;
use serde_json::{Value, json};

use super::budget::QueryBudget;
use super::extract::{ArticlePath, JsonBody, Params, object, valid_label};
use super::web::{Asset, html_page};
use super::{ApiError, AppState};
use crate::curation::{Exclusion, Pin, PinQuery, Review, ReviewStatus};
use crate::model::{ArticleId, RangeSpec, Timestamp};
use crate::score::ModelKind;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/articles/{id}/pin", put(put_pin).delete(delete_pin))
        .route(
            "/api/articles/{id}/exclude",
            put(put_exclude).delete(delete_exclude),
        )
        .route("/api/review", get(get_review))
        .route("/api/review/{id}", post(post_review))
        .route(
            "/review",
            get(|h: HeaderMap| async move { html_page(&REVIEW_HTML, &h) }),
        )
        .route(
            "/review.js",
            get(|h: HeaderMap| async move { REVIEW_JS.serve(&h) }),
        )
        .route(
            "/review.css",
            get(|h: HeaderMap| async move { REVIEW_CSS.serve(&h) }),
        )
}

/// The review page (`/review`): the dashboard's style, its own script.
static REVIEW_HTML: Asset = Asset::new(
    include_str!("web/review.html"),
    "text/html; charset=utf-8",
    60,
);
static REVIEW_JS: Asset = Asset::new(
    include_str!("web/review.js"),
    "text/javascript; charset=utf-8",
    60,
);
static REVIEW_CSS: Asset = Asset::new(
    include_str!("web/review.css"),
    "text/css; charset=utf-8",
    60,
);

/// The latest `until` accepted: ten years ahead.
const MAX_AHEAD_SECS: i64 = 10 * 366 * 86_400;

/// Longest exclusion reason, in characters.
const MAX_REASON_CHARS: usize = 512;

fn bad_json(what: &str, e: serde_json::Error) -> ApiError {
    ApiError::bad("invalid_json", format!("invalid {what} body: {e}"))
}

/// `until`, if given: Unix seconds after now, at most ten years ahead.
fn check_until(until: Option<Timestamp>, now: Timestamp) -> Result<(), ApiError> {
    match until {
        Some(u) if u <= now || u > now + MAX_AHEAD_SECS => Err(ApiError::bad(
            "invalid_timestamp",
            format!("until must be Unix seconds after now ({now}) and at most ten years ahead"),
        )),
        _ => Ok(()),
    }
}

/// The article must exist (not deleted): 404 otherwise.
async fn known(state: &AppState, id: &ArticleId, now: Timestamp) -> Result<(), ApiError> {
    match state.store.article(id, now).await? {
        Some(v) if !v.deleted => Ok(()),
        _ => Err(ApiError::NotFound("not_found", format!("no article {id}"))),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PinBody {
    /// Required (a missing field is refused); `null` is refused below.
    #[serde(deserialize_with = "crate::model::de_opt_integral")]
    position: Option<i64>,
    #[serde(default, deserialize_with = "crate::model::de_opt_integral")]
    until: Option<i64>,
    /// Absent or `null`: no filters; else an object ([`pin_query`]).
    #[serde(default)]
    query: Value,
}

/// A pin's `query`: an object (serde would also take a list for a
/// struct), `null` or absent.
fn pin_query(v: Value) -> Result<PinQuery, ApiError> {
    match v {
        Value::Null => Ok(PinQuery::default()),
        Value::Object(_) => serde_json::from_value(v).map_err(|e| bad_json("pin", e)),
        _ => Err(ApiError::bad(
            "invalid_json",
            "invalid pin body: query must be an object",
        )),
    }
}

/// The pin query's filters, checked as a ranking query checks them; its
/// range written as the API writes ranges.
fn check_query(mut q: PinQuery) -> Result<PinQuery, ApiError> {
    for (name, v) in [("category", &q.category), ("kind", &q.kind)] {
        if v.as_deref().is_some_and(|v| !valid_label(v)) {
            return Err(ApiError::bad(
                "invalid_parameter",
                format!("query.{name} must be 1-128 printable characters"),
            ));
        }
    }
    if let Some(g) = &q.group {
        ArticleId::parse(g).map_err(|_| {
            ApiError::bad(
                "invalid_parameter",
                "query.group must be 1-64 characters of [A-Za-z0-9_-]",
            )
        })?;
    }
    if let Some(m) = &q.model
        && ModelKind::parse(m).is_none()
    {
        return Err(ApiError::bad(
            "invalid_parameter",
            format!("query.model {m:?} is not available on this server"),
        ));
    }
    if let Some(r) = &q.range {
        let range = RangeSpec::parse(r).ok_or_else(|| {
            ApiError::bad(
                "invalid_parameter",
                format!("query.range must be 1h..2160h, 1d..90d or all, got {r:?}"),
            )
        })?;
        q.range = Some(range.to_string());
    }
    Ok(q)
}

async fn put_pin(
    _: QueryBudget,
    State(state): State<AppState>,
    headers: HeaderMap,
    ArticlePath(id): ArticlePath,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    state.is_admin(&headers)?;
    let b: PinBody = object(&body).map_err(|e| bad_json("pin", e))?;
    let cap = state.config.retention.ranking_cap;
    let position = b
        .position
        .and_then(|p| usize::try_from(p).ok())
        .filter(|p| (1..=cap).contains(p))
        .ok_or_else(|| {
            ApiError::bad(
                "invalid_parameter",
                format!("position must be 1..={cap} (retention.ranking_cap)"),
            )
        })?;
    let now = state.clock.now();
    check_until(b.until, now)?;
    let query = check_query(pin_query(b.query)?)?;
    known(&state, &id, now).await?;
    let pin = Pin {
        position,
        until: b.until,
        query,
        pinned_at: now,
    };
    state.curation.set("pin", &id, Some(&pin)).await?;
    tracing::info!(article = %id, position = pin.position, until = ?pin.until, "curation: pinned");
    Ok(Json(entry_json(&id, &pin)))
}

async fn delete_pin(
    _: QueryBudget,
    State(state): State<AppState>,
    headers: HeaderMap,
    ArticlePath(id): ArticlePath,
) -> Result<StatusCode, ApiError> {
    remove(&state, &headers, &id, "pin").await
}

/// `DELETE .../pin` and `.../exclude`: 204 whether or not there was one.
async fn remove(
    state: &AppState,
    headers: &HeaderMap,
    id: &ArticleId,
    kind: &str,
) -> Result<StatusCode, ApiError> {
    state.is_admin(headers)?;
    known(state, id, state.clock.now()).await?;
    state.curation.set::<()>(kind, id, None).await?;
    tracing::info!(article = %id, kind, "curation: removed");
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExcludeBody {
    #[serde(default)]
    reason: Option<String>,
    #[serde(default, deserialize_with = "crate::model::de_opt_integral")]
    until: Option<i64>,
}

async fn put_exclude(
    _: QueryBudget,
    State(state): State<AppState>,
    headers: HeaderMap,
    ArticlePath(id): ArticlePath,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    state.is_admin(&headers)?;
    let b: ExcludeBody = object(&body).map_err(|e| bad_json("exclude", e))?;
    if b.reason
        .as_deref()
        .is_some_and(|r| r.chars().count() > MAX_REASON_CHARS)
    {
        return Err(ApiError::bad(
            "invalid_parameter",
            format!("reason is longer than {MAX_REASON_CHARS} characters"),
        ));
    }
    let now = state.clock.now();
    check_until(b.until, now)?;
    known(&state, &id, now).await?;
    let x = Exclusion {
        reason: b.reason,
        until: b.until,
        excluded_at: now,
    };
    state.curation.set("exclude", &id, Some(&x)).await?;
    tracing::info!(article = %id, until = ?x.until, "curation: excluded");
    Ok(Json(entry_json(&id, &x)))
}

async fn delete_exclude(
    _: QueryBudget,
    State(state): State<AppState>,
    headers: HeaderMap,
    ArticlePath(id): ArticlePath,
) -> Result<StatusCode, ApiError> {
    remove(&state, &headers, &id, "exclude").await
}

/// An entry as the API shows it: its fields and `articleId`.
fn entry_json<T: serde::Serialize>(id: &ArticleId, v: &T) -> Value {
    let mut j = serde_json::to_value(v).expect("serializable");
    j["articleId"] = json!(id.as_str());
    j
}

/// `GET /api/review?status=held|allowed|denied|all` (default `held`):
/// the review entries, oldest hold first.
async fn get_review(
    _: QueryBudget,
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    state.is_admin(&headers)?;
    let p = Params::parse(raw.as_deref(), &["status"])?;
    let want = match p.get("status").unwrap_or("held") {
        "all" => None,
        "held" => Some(ReviewStatus::Held),
        "allowed" => Some(ReviewStatus::Allowed),
        "denied" => Some(ReviewStatus::Denied),
        s => {
            return Err(ApiError::bad(
                "invalid_parameter",
                format!("status must be held, allowed, denied or all, got {s:?}"),
            ));
        }
    };
    let cur = state.curation.fresh().await?;
    let mut items: Vec<(&ArticleId, &Review)> = cur
        .reviews
        .iter()
        .filter(|(_, r)| want.is_none_or(|w| r.status == w))
        .collect();
    items.sort_by_key(|(id, r)| (r.held_at.or(r.decided_at), *id));
    Ok(Json(json!({
        "mode": state.config.review.mode.as_str(),
        "items": items.iter().map(|(id, r)| entry_json(id, r)).collect::<Vec<_>>(),
    })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DecisionBody {
    decision: Decision,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum Decision {
    Allow,
    Deny,
}

/// `POST /api/review/{id}`: an editor's decision, on a held article or
/// ahead of its hold; a later decision replaces an earlier one.
async fn post_review(
    _: QueryBudget,
    State(state): State<AppState>,
    headers: HeaderMap,
    ArticlePath(id): ArticlePath,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    state.is_admin(&headers)?;
    let b: DecisionBody = object(&body).map_err(|e| {
        ApiError::bad(
            "invalid_json",
            format!("expected {{\"decision\": \"allow\" | \"deny\"}}: {e}"),
        )
    })?;
    let now = state.clock.now();
    known(&state, &id, now).await?;
    let before = state.curation.fresh().await?.reviews.get(&id).cloned();
    let review = Review {
        status: match b.decision {
            Decision::Allow => ReviewStatus::Allowed,
            Decision::Deny => ReviewStatus::Denied,
        },
        held_at: before.as_ref().and_then(|r| r.held_at),
        evidence: before.and_then(|r| r.evidence),
        decided_at: Some(now),
    };
    state.curation.set("review", &id, Some(&review)).await?;
    tracing::info!(article = %id, decision = review.status.as_str(), "curation: reviewed");
    Ok(Json(entry_json(&id, &review)))
}
