//! `GET /api/hot` and `GET /api/new`.

use std::time::{Duration, Instant};

use axum::Json;
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::routing::get;
use serde_json::{Value, json};

use super::budget::QueryBudget;
use super::curated::{self, CuratedPage, List};
use super::extract::Params;
use super::{ApiError, AppState};
use crate::model::{
    Decay, HotPage, HotQuery, ModelParams, RangeSpec, RankedItem, RisingSpec, Scale, Timestamp,
};
use crate::score::{ModelKind, words};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/hot", get(get_hot))
        .route("/api/new", get(get_new))
}

/// The query parameters of `/api/hot` and `/api/new`.
pub const PARAMS: &[&str] = &[
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
    "window",
    "baseline",
    "min",
    "decay",
    "halfLife",
    "scale",
];

/// The parameters only `model=rising` takes, and those only `gravity` and
/// `weighted` take: given with another model they are refused.
const RISING_PARAMS: [&str; 3] = ["window", "baseline", "min"];
const DECAY_PARAMS: [&str; 2] = ["decay", "halfLife"];

/// What a ranking query may ask of this server: how deep a ranking goes
/// (`retention.ranking_cap`), and how many hours back hourly buckets
/// reach on every store (rising's `window + baseline`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub cap: usize,
    pub hourly_hours: u32,
}

impl Limits {
    pub fn of(c: &crate::config::Config) -> Self {
        Limits {
            cap: c.retention.ranking_cap,
            hourly_hours: hourly_hours(c),
        }
    }
}

/// The hours every store holds hour by hour: the embedded store its
/// `retention.hourly_days`, Redis `redis.hourly_days + 1` days
/// (`window_plan`); the smaller, so that a query answers alike on both.
pub fn hourly_hours(c: &crate::config::Config) -> u32 {
    let embedded = c.retention.hourly_days.saturating_mul(24);
    let redis = c.redis.hourly_days.saturating_add(1).saturating_mul(24);
    embedded.min(redis).min(RangeSpec::MAX_HOURS)
}

/// The largest `offset` and `page` accepted: the deepest a ranking can be
/// configured (`retention.ranking_cap`).
const MAX_DEPTH: usize = 100_000;

/// Parses and validates a ranking query; returns it with the range as given.
pub(super) fn parse_query(
    raw: Option<&str>,
    limits: Limits,
) -> Result<(HotQuery, String), ApiError> {
    query_from(&Params::parse(raw, PARAMS)?, limits)
}

/// A ranking query from parameters already parsed against a route's own
/// list (`PARAMS`, or a subset of it plus the route's own); what the list
/// leaves out takes its default.
pub(super) fn query_from(p: &Params, limits: Limits) -> Result<(HotQuery, String), ApiError> {
    let cap = limits.cap;
    // What is not asked for is the default page's.
    let default = HotQuery::default_page();
    let range_text = p
        .get("range")
        .map_or_else(|| default.range.to_string(), str::to_string);
    let range = RangeSpec::parse(&range_text).ok_or_else(|| {
        ApiError::bad(
            "invalid_parameter",
            format!("range must be 1h..2160h, 1d..90d or all, got {range_text:?}"),
        )
    })?;
    let model = match p.get("model") {
        None => default.model,
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
    // Two spellings of one window, which may be mixed: `pageSize` (else
    // `limit`) items, starting `offset + (page - 1) * size` items in.
    let limit = p.int("limit", 1, 100)?;
    let size = p
        .int("pageSize", 1, 100)?
        .or(limit)
        .unwrap_or(default.limit);
    let page = p.int("page", 1, MAX_DEPTH)?.unwrap_or(1);
    let offset = p.int("offset", 0, MAX_DEPTH)?.unwrap_or(0) + (page - 1) * size;
    // A ranking is `cap` deep: past that, pages are short or empty.
    let limit = size.min(cap.saturating_sub(offset));
    let cursor = match p.get("cursor") {
        Some(c) if c.is_empty() || c.len() > 512 => {
            return Err(ApiError::bad(
                "invalid_cursor",
                "not a cursor this server issued",
            ));
        }
        c => c.map(str::to_string),
    };
    let params = model_params(p, model, limits)?;
    let (range, range_text) = match model {
        // Rising ranks over its window: `range` does not apply (as with
        // the vote models, it is checked and left aside).
        ModelKind::Rising => {
            let w = params.rising.window;
            (RangeSpec::Hours(w), RangeSpec::Hours(w).to_string())
        }
        _ => (range, range_text),
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
        params,
    };
    Ok((q, range_text))
}

/// The model's own parameters: `window`, `baseline`, `min` for rising,
/// `decay` and `halfLife` for gravity and weighted; refused with any other
/// model.
fn model_params(p: &Params, model: ModelKind, limits: Limits) -> Result<ModelParams, ApiError> {
    let given = |names: &[&'static str]| names.iter().copied().find(|n| p.get(n).is_some());
    let refuse = |name: &str, models: &str| {
        Err(ApiError::bad(
            "invalid_parameter",
            format!(
                "{name} applies to model={models} only, not {}",
                model.as_str()
            ),
        ))
    };
    let mut out = ModelParams::default();
    if model == ModelKind::Rising {
        let d = out.rising;
        let window = hours_param(p, "window")?.unwrap_or(d.window);
        let baseline = hours_param(p, "baseline")?.unwrap_or(d.baseline);
        if window + baseline > limits.hourly_hours {
            return Err(ApiError::bad(
                "invalid_parameter",
                format!(
                    "window + baseline must be at most {} h (the hours this server keeps hour by hour), got {} h",
                    limits.hourly_hours,
                    window + baseline
                ),
            ));
        }
        let max_min = RisingSpec::MAX_MIN as usize;
        let min = p.int("min", 1, max_min)?.map_or(d.min, |m| m as u64);
        out.rising = RisingSpec {
            window,
            baseline,
            min,
        };
    } else if let Some(name) = given(&RISING_PARAMS) {
        return refuse(name, "rising");
    }
    if model.takes_decay() {
        out.decay = decay_param(p)?;
    } else if let Some(name) = given(&DECAY_PARAMS) {
        return refuse(name, "gravity or model=weighted");
    }
    out.scale = scale_param(p)?;
    Ok(out)
}

/// `scale=category` (every model), or `none` (the default).
fn scale_param(p: &Params) -> Result<Scale, ApiError> {
    match p.get("scale") {
        None | Some("none") => Ok(Scale::None),
        Some("category") => Ok(Scale::Category),
        Some(s) => Err(ApiError::bad(
            "invalid_parameter",
            format!("scale must be category or none, got {s:?}"),
        )),
    }
}

/// A duration in whole hours, written as `range` is (`6h`, `2d`).
fn hours_param(p: &Params, name: &str) -> Result<Option<u32>, ApiError> {
    let Some(v) = p.get(name) else {
        return Ok(None);
    };
    match RangeSpec::parse(v) {
        Some(RangeSpec::Hours(h)) => Ok(Some(h)),
        _ => Err(ApiError::bad(
            "invalid_parameter",
            format!("{name} must be 1h..2160h or 1d..90d, got {v:?}"),
        )),
    }
}

/// `decay=default` (the model's own) or `decay=halflife&halfLife=<hours>`.
fn decay_param(p: &Params) -> Result<Decay, ApiError> {
    match (p.get("decay"), hours_param(p, "halfLife")?) {
        (None | Some("default"), None) => Ok(Decay::Model),
        (Some("halflife"), Some(n)) => Ok(Decay::HalfLife(n)),
        (Some("halflife"), None) => Err(ApiError::bad(
            "invalid_parameter",
            "decay=halflife needs halfLife (e.g. halfLife=6h)",
        )),
        (None | Some("default"), Some(_)) => Err(ApiError::bad(
            "invalid_parameter",
            "halfLife applies with decay=halflife only",
        )),
        (Some(d), _) => Err(ApiError::bad(
            "invalid_parameter",
            format!("decay must be default or halflife, got {d:?}"),
        )),
    }
}

/// An item as the API lists it; with `explain`, its terms and `why`, the
/// same terms in words.
pub(super) fn item_json(it: &RankedItem, q: &HotQuery, now: Timestamp) -> Value {
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
        v["why"] = json!(words::why(&words::Scored {
            model: q.model,
            explain: e,
            counters: c,
            range: q.range,
            published_at: m.published_at,
            now,
        }));
    }
    v
}

pub(super) fn page_json(page: &CuratedPage, q: &HotQuery, range_text: &str) -> Value {
    json!({
        "items": page
            .items
            .iter()
            .map(|it| {
                let mut v = item_json(it, q, page.generated_at);
                if page.pinned.contains(&it.id) {
                    v["pinned"] = json!(true);
                }
                v
            })
            .collect::<Vec<_>>(),
        "model": q.model.as_str(),
        "range": range_text,
        "generatedAt": page.generated_at,
        "cursor": page.cursor,
    })
}

async fn get_hot(
    _: QueryBudget,
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    answer(&state, raw.as_deref(), List::Hot).await
}

async fn get_new(
    _: QueryBudget,
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    answer(&state, raw.as_deref(), List::New).await
}

async fn answer(state: &AppState, raw: Option<&str>, list: List) -> Result<Json<Value>, ApiError> {
    let (q, range_text) = parse_query(raw, Limits::of(&state.config))?;
    let page = fetch(state, &q, list).await?;
    let mut body = page_json(&page, &q, &range_text);
    if let List::Hot = list {
        // Never waits: a ranking's first answer in an hour starts the
        // earlier ranking's computation and says `null` meanwhile.
        with_movement(state, &q, &page, &mut body, Duration::ZERO).await;
    }
    Ok(Json(body))
}

/// Adds each item's `previousRank` and `movement` and the page's
/// `movementSince` (movement.rs), waiting at most `wait` for them. The
/// page is a public list: the earlier ranking is compared as the same
/// curation shows it ([`curated::public_order`]).
pub(super) async fn with_movement(
    state: &AppState,
    q: &HotQuery,
    page: &HotPage,
    body: &mut Value,
    wait: Duration,
) {
    let mut items = std::mem::take(&mut body["items"]);
    let public = curated::public_order(state, q, page.generated_at).await;
    let since = match items.as_array_mut() {
        Some(items) => {
            (state.movements)
                .annotate(
                    &state.store,
                    q,
                    page.generated_at,
                    wait,
                    public.as_deref(),
                    &page.items,
                    items,
                )
                .await
        }
        None => Value::Null,
    };
    body["items"] = items;
    body["movementSince"] = since;
}

/// The page of the hot ranking `q` asks for, as `GET /api/hot` gets it.
pub(super) async fn hot(state: &AppState, q: &HotQuery) -> Result<CuratedPage, ApiError> {
    fetch(state, q, List::Hot).await
}

async fn fetch(state: &AppState, q: &HotQuery, list: List) -> Result<CuratedPage, ApiError> {
    let started = Instant::now();
    let now = state.clock.now();
    let (page, endpoint) = match list {
        // Past the ranking's depth: nothing to ask the store.
        _ if q.limit == 0 => (
            CuratedPage::plain(HotPage {
                items: Vec::new(),
                generated_at: now,
                cursor: None,
            }),
            "empty",
        ),
        // Curation applies to every public ranking here, in one place.
        List::Hot => (curated::page(state, q, list, now).await?, "hot"),
        List::New => (curated::page(state, q, list, now).await?, "new"),
    };
    metrics::histogram!("hotrank_query_seconds", "endpoint" => endpoint)
        .record(started.elapsed().as_secs_f64());
    Ok(page)
}
