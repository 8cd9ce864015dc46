//! `/api/articles/{id}`: metadata and lifetime counters.

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use axum::extract::RawQuery;

use super::budget::QueryBudget;
use super::budget::Spend;
use super::extract::{ArticlePath, ClientIp, JsonBody, Params, object, valid_label};
use super::{ApiError, AppState};
use crate::model::{ArticleId, ArticleMeta, ArticleView, Verdict, VoteDirection, VoteOutcome};
use crate::store::{PutOutcome, Voter};

pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/api/articles/{id}",
            get(get_article).put(put_article).delete(delete_article),
        )
        .route("/api/articles/{id}/groups", post(post_groups))
        .route("/api/articles", post(post_article))
        .route("/api/articles/{id}/vote", post(post_vote))
        .route("/api/articles/{id}/hourly", get(get_hourly))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MetaBody {
    title: Option<String>,
    url: Option<String>,
    author: Option<String>,
    category: Option<String>,
    kind: Option<String>,
    #[serde(default)]
    groups: Vec<String>,
    #[serde(default, deserialize_with = "crate::model::de_opt_integral")]
    published_at: Option<i64>,
    summary: Option<String>,
    cover: Option<String>,
}

fn check_len(name: &str, v: &Option<String>, max: usize) -> Result<(), ApiError> {
    match v {
        Some(s) if s.chars().count() > max => Err(ApiError::bad(
            "invalid_article",
            format!("{name} is longer than {max} characters"),
        )),
        _ => Ok(()),
    }
}

fn check_label(name: &str, v: &Option<String>) -> Result<(), ApiError> {
    match v {
        Some(s) if !valid_label(s) => Err(ApiError::bad(
            "invalid_article",
            format!("{name} must be 1-128 printable characters"),
        )),
        _ => Ok(()),
    }
}

/// Group names become parts of storage keys: same alphabet as article ids.
fn check_groups(groups: &[String]) -> Result<(), ApiError> {
    if groups.len() > 64 {
        return Err(ApiError::bad("invalid_article", "at most 64 groups"));
    }
    for g in groups {
        ArticleId::parse(g).map_err(|_| {
            ApiError::bad(
                "invalid_group",
                format!("group {g:?} must be 1-64 characters of [A-Za-z0-9_-]"),
            )
        })?;
    }
    Ok(())
}

/// Validates every metadata field but `publishedAt`.
fn check_meta(b: &MetaBody) -> Result<(), ApiError> {
    check_len("title", &b.title, 512)?;
    check_len("url", &b.url, 2048)?;
    check_len("summary", &b.summary, 4096)?;
    check_len("cover", &b.cover, 2048)?;
    check_label("author", &b.author)?;
    check_label("category", &b.category)?;
    check_label("kind", &b.kind)?;
    check_groups(&b.groups)
}

fn sorted_groups(mut groups: Vec<String>) -> Vec<String> {
    groups.sort();
    groups.dedup();
    groups
}

async fn put_article(
    _: QueryBudget,
    State(state): State<AppState>,
    headers: HeaderMap,
    ArticlePath(id): ArticlePath,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    state.is_admin(&headers)?;
    let b: MetaBody = object(&body)
        .map_err(|e| ApiError::bad("invalid_json", format!("invalid article body: {e}")))?;
    check_meta(&b)?;
    let now = state.clock.now();
    let published_at = match b.published_at {
        Some(p) if p < 0 || p > now + 366 * 86_400 => {
            return Err(ApiError::bad(
                "invalid_timestamp",
                "publishedAt must be Unix seconds, at most a year ahead",
            ));
        }
        Some(p) => p,
        None => state
            .store
            .article(&id, now)
            .await?
            .map_or(now, |a| a.meta.published_at),
    };
    let meta = ArticleMeta {
        title: b.title,
        url: b.url,
        author: b.author,
        category: b.category,
        kind: b.kind,
        groups: sorted_groups(b.groups),
        published_at,
        summary: b.summary,
        cover: b.cover,
    };
    let outcome = state.store.put_article(id.clone(), meta, now).await?;
    let view = state
        .store
        .article(&id, now)
        .await?
        .ok_or_else(|| ApiError::Internal("article vanished after put".into()))?;
    let status = match outcome {
        PutOutcome::Created => StatusCode::CREATED,
        PutOutcome::Updated => StatusCode::OK,
    };
    Ok((status, Json(article_json(&view))).into_response())
}

async fn get_article(
    _: QueryBudget,
    State(state): State<AppState>,
    ArticlePath(id): ArticlePath,
) -> Result<Json<Value>, ApiError> {
    let view = state
        .store
        .article(&id, state.clock.now())
        .await?
        .ok_or_else(|| ApiError::NotFound("not_found", format!("no article {id}")))?;
    Ok(Json(article_json(&view)))
}

async fn delete_article(
    _: QueryBudget,
    State(state): State<AppState>,
    headers: HeaderMap,
    ArticlePath(id): ArticlePath,
) -> Result<StatusCode, ApiError> {
    state.is_admin(&headers)?;
    if state.store.delete_article(&id, state.clock.now()).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound("not_found", format!("no article {id}")))
    }
}

/// `GET /api/articles/{id}/hourly?hours=N`: PV, UV and quarantine per hour
/// over the last `hours` (1–2160, default 72), oldest first; hours with no
/// activity are listed with zeros, so the series has exactly `hours` rows.
async fn get_hourly(
    _: QueryBudget,
    State(state): State<AppState>,
    ArticlePath(id): ArticlePath,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let p = Params::parse(raw.as_deref(), &["hours"])?;
    let hours = p.int("hours", 1, 24 * 90)?.unwrap_or(72) as u32;
    let now = state.clock.now();
    let rows = state
        .store
        .hourly(&id, now, hours)
        .await?
        .ok_or_else(|| ApiError::NotFound("not_found", format!("no article {id}")))?;
    let last = now.div_euclid(3600);
    let first = *crate::time::last_hours(last, hours).start();
    let mut rows = rows.into_iter().peekable();
    let mut out = Vec::with_capacity(hours as usize);
    for hour in first..=last {
        // Skip anything outside the window a store might return.
        while rows.peek().is_some_and(|r| r.hour < hour) {
            rows.next();
        }
        let row = rows.next_if(|r| r.hour == hour);
        let (pv, uv, q) = match &row {
            Some(r) => (r.pv, r.uv, r.quarantined),
            None => (0, 0, Default::default()),
        };
        out.push(json!({
            "hour": hour * 3600, "pv": pv, "uv": uv,
            "quarantined": super::ops::quarantine_json(&q),
        }));
    }
    Ok(Json(json!({"articleId": id.as_str(), "hours": out})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupsBody {
    #[serde(default)]
    add: Vec<String>,
    #[serde(default)]
    remove: Vec<String>,
}

async fn post_groups(
    _: QueryBudget,
    State(state): State<AppState>,
    headers: HeaderMap,
    ArticlePath(id): ArticlePath,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    state.is_admin(&headers)?;
    let b: GroupsBody = object(&body).map_err(|e| {
        ApiError::bad(
            "invalid_json",
            format!("expected {{\"add\": [], \"remove\": []}}: {e}"),
        )
    })?;
    check_groups(&b.add)?;
    check_groups(&b.remove)?;
    let now = state.clock.now();
    let view = state
        .store
        .article(&id, now)
        .await?
        .ok_or_else(|| ApiError::NotFound("not_found", format!("no article {id}")))?;
    let mut meta = view.meta;
    meta.groups.retain(|g| !b.remove.contains(g));
    meta.groups.extend(b.add);
    meta.groups.sort();
    meta.groups.dedup();
    check_groups(&meta.groups)?;
    state.store.put_article(id.clone(), meta, now).await?;
    let view = state
        .store
        .article(&id, now)
        .await?
        .ok_or_else(|| ApiError::Internal("article vanished after put".into()))?;
    Ok(Json(article_json(&view)))
}

pub fn article_json(v: &ArticleView) -> Value {
    let m = &v.meta;
    let c = &v.lifetime;
    let q = &v.quarantined;
    let slot = |verdict: Verdict| q.0[verdict.quarantine_slot().expect("quarantine verdict")];
    let scores: serde_json::Map<String, Value> = v
        .scores
        .iter()
        .map(|(m, s)| (m.as_str().to_string(), json!(s)))
        .collect();
    json!({
        "articleId": v.id.as_str(),
        "title": m.title, "url": m.url, "author": m.author,
        "category": m.category, "kind": m.kind, "groups": m.groups,
        "publishedAt": m.published_at, "summary": m.summary, "cover": m.cover,
        "pv": c.pv, "uv": c.uv, "votes": c.ups as i64 - c.downs as i64,
        "ups": c.ups, "downs": c.downs, "likes": c.likes, "comments": c.comments,
        "favorites": c.favorites, "shares": c.shares,
        "avgDwellSeconds": c.avg_dwell_seconds(),
        "dwellSeconds": c.dwell_seconds, "dwellReports": c.dwell_reports,
        "quarantined": {
            "duplicate": slot(Verdict::Duplicate),
            "rate_limited": slot(Verdict::RateLimited),
            "bot": slot(Verdict::Bot),
            "replayed": slot(Verdict::Replayed),
        },
        "scores": scores,
    })
}

/// A post: `poster` plus the metadata fields. Read as the poster and a
/// [`MetaBody`] of the rest, so that unknown fields are refused (serde's
/// `flatten` would let them through).
struct PostBody {
    poster: String,
    meta: MetaBody,
}

impl PostBody {
    fn parse(body: &[u8]) -> Result<Self, serde_json::Error> {
        use serde::de::Error;
        let mut fields: serde_json::Map<String, Value> = object(body)?;
        let poster = match fields.remove("poster") {
            Some(Value::String(p)) => p,
            Some(_) => return Err(serde_json::Error::custom("poster must be a string")),
            None => return Err(serde_json::Error::missing_field("poster")),
        };
        let meta = serde_json::from_value(Value::Object(fields))?;
        Ok(PostBody { poster, meta })
    }
}

/// Seed 003 posting: the id comes from a counter, the poster's vote is
/// recorded (so they cannot vote for their own article), and the author
/// defaults to the poster.
async fn post_article(
    State(state): State<AppState>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let trusted = state.check_access(state.config.posting, "posting", &headers)?;
    let b = PostBody::parse(&body)
        .map_err(|e| ApiError::bad("invalid_json", format!("invalid article body: {e}")))?;
    if b.poster.is_empty() || b.poster.len() > 128 {
        return Err(ApiError::bad(
            "invalid_user_id",
            "poster must be a string of 1-128 bytes",
        ));
    }
    if b.meta.published_at.is_some() {
        return Err(ApiError::bad(
            "invalid_article",
            "a posted article is published now; omit publishedAt",
        ));
    }
    check_meta(&b.meta)?;
    let now = state.clock.now();
    let m = b.meta;
    let author = m
        .author
        .or_else(|| valid_label(&b.poster).then(|| b.poster.clone()));
    let meta = ArticleMeta {
        title: m.title,
        url: m.url,
        author,
        category: m.category,
        kind: m.kind,
        groups: sorted_groups(m.groups),
        published_at: now,
        summary: m.summary,
        cover: m.cover,
    };
    let poster = state.identity.visitor(&b.poster);
    state.budgets.spend(
        Spend::Post,
        &state.identity,
        (!trusted).then_some(ip),
        Some(poster),
        state.clock.now_ms(),
    )?;
    let id = state
        .store
        .post_article(
            meta,
            Voter {
                hash: poster,
                raw: &b.poster,
            },
            now,
        )
        .await?;
    let view = state
        .store
        .article(&id, now)
        .await?
        .ok_or_else(|| ApiError::Internal("posted article vanished".into()))?;
    let location = format!("/api/articles/{id}");
    Ok((
        StatusCode::CREATED,
        [(axum::http::header::LOCATION, location)],
        Json(article_json(&view)),
    )
        .into_response())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct VoteBody {
    user_id: String,
    #[serde(default)]
    direction: Option<String>,
}

async fn post_vote(
    State(state): State<AppState>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
    ArticlePath(id): ArticlePath,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    let trusted = state.check_access(state.config.voting, "voting", &headers)?;
    let b: VoteBody = object(&body).map_err(|e| {
        ApiError::bad(
            "invalid_json",
            format!("expected {{\"userId\": ..., \"direction\": \"up\"|\"down\"}}: {e}"),
        )
    })?;
    if b.user_id.is_empty() || b.user_id.len() > 128 {
        return Err(ApiError::bad(
            "invalid_user_id",
            "userId must be a string of 1-128 bytes",
        ));
    }
    let direction = match b.direction.as_deref() {
        None | Some("up") => VoteDirection::Up,
        Some("down") => VoteDirection::Down,
        Some(other) => {
            return Err(ApiError::bad(
                "invalid_parameter",
                format!("direction must be up or down, got {other:?}"),
            ));
        }
    };
    let user = state.identity.visitor(&b.user_id);
    state.budgets.spend(
        Spend::Vote,
        &state.identity,
        (!trusted).then_some(ip),
        Some(user),
        state.clock.now_ms(),
    )?;
    match state
        .store
        .vote(
            &id,
            Voter {
                hash: user,
                raw: &b.user_id,
            },
            direction,
            state.clock.now(),
        )
        .await?
    {
        VoteOutcome::Counted { ups, downs, score } => Ok(Json(json!({
            "articleId": id.as_str(), "votes": ups as i64 - downs as i64, "ups": ups, "downs": downs, "score": score
        }))),
        VoteOutcome::AlreadyVoted => Err(ApiError::Conflict(
            "already_voted",
            format!("this user already voted on {id}"),
        )),
        VoteOutcome::Closed => Err(ApiError::Gone(
            "voting_closed",
            format!("voting on {id} is closed: it is older than the voting window"),
        )),
        VoteOutcome::DownVotesDisabled => Err(ApiError::bad(
            "down_votes_disabled",
            "down-votes are not enabled (models.votes.allow_down_votes)",
        )),
        VoteOutcome::UnknownArticle => {
            Err(ApiError::NotFound("not_found", format!("no article {id}")))
        }
    }
}
