//! `GET /api/hot` and `GET /api/new`.

use std::time::Instant;

use axum::Json;
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::routing::get;
use serde_json::{Value, json};

use super::extract::Params;
use super::{ApiError, AppState};
use crate::model::{HotPage, HotQuery, RangeSpec, RankedItem};
use crate::score::ModelKind;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/hot", get(get_hot))
        .route("/api/new", get(get_new))
}

const PARAMS: &[&str] = &[
    "range",
    "model",
    "limit",
    "offset",
    "page",
    "pageSize",
    "cursor",
    "category",
    "kind",
    "group",
    "perAuthor",
    "explain",
];

/// Parses and validates a ranking query; returns it with the range as given.
fn parse_query(raw: Option<&str>, cap: usize) -> Result<(HotQuery, String), ApiError> {
    let p = Params::parse(raw, PARAMS)?;
    let range_text = p.get("range").unwrap_or("72h").to_string();
    let range = RangeSpec::parse(&range_text).ok_or_else(|| {
        ApiError::bad(
            "invalid_parameter",
            format!("range must be 1h..2160h, 1d..90d or all, got {range_text:?}"),
        )
    })?;
    let model = match p.get("model") {
        None => ModelKind::Gravity,
        Some(m) => ModelKind::parse(m).ok_or_else(|| {
            let known: Vec<&str> = ModelKind::ALL.iter().map(|m| m.as_str()).collect();
            ApiError::bad(
                "invalid_parameter",
                format!(
                    "model {m:?} is not available; this server has: {}",
                    known.join(", ")
                ),
            )
        })?,
    };
    let (offset, limit) = match (p.get("page"), p.get("pageSize")) {
        (None, None) => {
            let limit = p.int("limit", 1, 100)?.unwrap_or(20);
            (p.int("offset", 0, cap)?.unwrap_or(0), limit)
        }
        _ => {
            if p.get("offset").is_some() || p.get("limit").is_some() {
                return Err(ApiError::bad(
                    "invalid_parameter",
                    "use either limit/offset or page/pageSize, not both",
                ));
            }
            let size = p.int("pageSize", 1, 100)?.unwrap_or(20);
            let page = p.int("page", 1, cap)?.unwrap_or(1);
            ((page - 1) * size, size)
        }
    };
    if offset + limit > cap {
        return Err(ApiError::bad(
            "invalid_parameter",
            format!(
                "rankings are {cap} deep (retention.ranking_cap): offset + limit must be <= {cap}"
            ),
        ));
    }
    let cursor = match p.get("cursor") {
        Some(c) if c.is_empty() || c.len() > 512 => {
            return Err(ApiError::bad(
                "invalid_cursor",
                "not a cursor this server issued",
            ));
        }
        c => c.map(str::to_string),
    };
    let q = HotQuery {
        model,
        range,
        offset,
        limit,
        category: p.label("category")?,
        kind: p.label("kind")?,
        group: p.label("group")?,
        per_author: p.int("perAuthor", 1, 100)?,
        cursor,
        explain: p.bool("explain")?,
    };
    Ok((q, range_text))
}

fn item_json(it: &RankedItem) -> Value {
    let m = &it.meta;
    let c = &it.counters;
    let mut v = json!({
        "rank": it.rank, "articleId": it.id.as_str(), "score": it.score,
        "pv": c.pv, "uv": c.uv, "likes": c.likes, "comments": c.comments,
        "favorites": c.favorites, "shares": c.shares, "avgDwellSeconds": c.avg_dwell_seconds(),
        "title": m.title, "summary": m.summary, "cover": m.cover, "url": m.url,
        "author": m.author, "category": m.category, "kind": m.kind, "groups": m.groups,
        "publishedAt": m.published_at,
    });
    if let Some(e) = &it.explain {
        let terms: serde_json::Map<String, Value> =
            e.0.iter().map(|(k, x)| (k.to_string(), json!(x))).collect();
        v["explain"] = Value::Object(terms);
    }
    v
}

fn page_json(page: &HotPage, q: &HotQuery, range_text: &str) -> Value {
    json!({
        "items": page.items.iter().map(item_json).collect::<Vec<_>>(),
        "model": q.model.as_str(),
        "range": range_text,
        "generatedAt": page.generated_at,
        "cursor": page.cursor,
    })
}

async fn get_hot(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let started = Instant::now();
    let (q, range_text) = parse_query(raw.as_deref(), state.config.retention.ranking_cap)?;
    let page = state.store.hot(&q, state.clock.now()).await?;
    metrics::histogram!("hotrank_query_seconds", "endpoint" => "hot")
        .record(started.elapsed().as_secs_f64());
    Ok(Json(page_json(&page, &q, &range_text)))
}

async fn get_new(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let started = Instant::now();
    let (q, range_text) = parse_query(raw.as_deref(), state.config.retention.ranking_cap)?;
    let page = state.store.newest(&q, state.clock.now()).await?;
    metrics::histogram!("hotrank_query_seconds", "endpoint" => "new")
        .record(started.elapsed().as_secs_f64());
    Ok(Json(page_json(&page, &q, &range_text)))
}
