//! `POST /api/views` and `POST /api/events`: validation and the stateless
//! half of the gate (identity hashing, bot check), then the store.

use std::net::IpAddr;
use std::time::Instant;

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use metrics::{Counter, Histogram};
use serde_json::json;
use serde_json::value::RawValue;

use super::event_json::{
    Field, RawEvent, one_pass_batch, one_pass_event, raw_event, two_pass_batch,
};
use super::extract::{ClientIp, JsonBody};
use super::{ApiError, AppState};
use crate::gate::{TsError, check_ts};
use crate::model::{ArticleId, Event, EventType, Verdict, VerdictCounts, integral};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/views", post(post_view).options(super::web::preflight))
        .route(
            "/api/events",
            post(post_events).options(super::web::preflight),
        )
        .route("/api/events/{eventId}", get(get_event))
}

/// `GET /api/events/{eventId}`: the verdict the pipeline's filter workers
/// gave the events carrying this eventId.
async fn get_event(
    _: super::budget::QueryBudget,
    State(state): State<AppState>,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> Result<Response, ApiError> {
    let Path(event_id) = path.map_err(|e| ApiError::bad("invalid_event_id", e.to_string()))?;
    if event_id.is_empty() || event_id.len() > 128 {
        return Err(ApiError::bad(
            "invalid_event_id",
            "eventId must be a string of 1-128 bytes",
        ));
    }
    let hashed = state.identity.event_id(&event_id);
    let found = match &state.queue {
        Some(queue) => queue.verdict(hashed).await?,
        None => None,
    };
    let verdict = match found {
        Some(Ok(v)) => v.as_str(),
        Some(Err(r)) => r.code(),
        None => {
            return Err(ApiError::NotFound(
                "unknown_event",
                "no verdict for this eventId: still queued, never sent, older than gate.event_id_ttl_secs, or the server does not run the pipeline".into(),
            ));
        }
    };
    Ok(Json(json!({"eventId": event_id, "verdict": verdict})).into_response())
}

/// What every event of one request shares.
struct Ctx<'a> {
    state: &'a AppState,
    trusted: bool,
    ip: IpAddr,
    user_agent: &'a str,
    now_ms: i64,
    /// `ip`'s rate-limit key and whether `user_agent` is a bot's, worked
    /// out once for the request's events rather than once an event.
    ip_key: u64,
    bot: crate::crawler::Crawler,
    /// `ip`'s network block for the review's evidence, 0 unless
    /// `[review] mode = "suspicious"` (nothing kept, nothing spent).
    net: u64,
}

impl<'a> Ctx<'a> {
    fn new(state: &'a AppState, trusted: bool, ip: IpAddr, headers: &'a HeaderMap) -> Self {
        let user_agent = user_agent(headers);
        Ctx {
            state,
            trusted,
            ip,
            user_agent,
            now_ms: state.clock.now_ms(),
            ip_key: state.ip_key(ip),
            bot: state.bots.classify(user_agent),
            net: net_block(state, ip),
        }
    }
}

/// `ip`'s network block while the review needs it ([`Event::net`]), else 0.
fn net_block(state: &AppState, ip: IpAddr) -> u64 {
    if state.config.review.mode == crate::config::ReviewMode::Suspicious {
        state.identity.net_block(ip)
    } else {
        0
    }
}

/// A string of 1..=128 bytes.
fn short_str<'a>(raw: &'a Field<'_>, code: &'static str, name: &str) -> Result<&'a str, ApiError> {
    match raw.as_str() {
        Some(s) if !s.is_empty() && s.len() <= 128 => Ok(s),
        _ => Err(ApiError::bad(
            code,
            format!("{name} must be a string of 1-128 bytes"),
        )),
    }
}

fn parse_article_id(raw: Option<&Field<'_>>) -> Result<ArticleId, ApiError> {
    let bad = || {
        ApiError::bad(
            "invalid_article_id",
            crate::model::InvalidArticleId.to_string(),
        )
    };
    let raw = raw.ok_or_else(|| ApiError::bad("invalid_article_id", "articleId is required"))?;
    match raw.as_str() {
        Some(s) => ArticleId::parse(s).map_err(|_| bad()),
        None => raw
            .number()
            .and_then(|v| {
                v.as_u64()
                    .or_else(|| integral(&v).and_then(|i| u64::try_from(i).ok()))
            })
            .map(ArticleId::from_number)
            .ok_or_else(bad),
    }
}

fn parse_event(ev: RawEvent<'_>, ctx: &Ctx<'_>, only_views: bool) -> Result<Event, ApiError> {
    let kind = match ev.kind {
        None if only_views => EventType::View,
        None => return Err(ApiError::bad("invalid_event_type", "type is required")),
        Some(t) => {
            let t = t.as_str().and_then(EventType::parse);
            match t {
                Some(EventType::View) => EventType::View,
                Some(t) if !only_views => t,
                _ if only_views => {
                    return Err(ApiError::bad(
                        "invalid_event_type",
                        "POST /api/views takes views only; use POST /api/events",
                    ));
                }
                _ => {
                    return Err(ApiError::bad(
                        "invalid_event_type",
                        "type must be one of view, dwell, like, comment, favorite, share, impression, click",
                    ));
                }
            }
        }
    };
    let article = parse_article_id(ev.article_id.as_ref())?;
    let cfg = &ctx.state.config;
    let now = ctx.now_ms.div_euclid(1000);
    let ts = match ev.ts {
        None => now,
        Some(raw) => raw
            .number()
            .and_then(|v| integral(&v))
            .filter(|t| *t >= 0)
            .ok_or_else(|| {
                ApiError::bad(
                    "invalid_timestamp",
                    "ts must be a non-negative integer (Unix seconds)",
                )
            })?,
    };
    match check_ts(
        ts,
        now,
        cfg.retention_secs(),
        i64::from(cfg.gate.max_future_secs),
    ) {
        Ok(()) => {}
        Err(TsError::TooOld) => {
            return Err(ApiError::bad(
                "invalid_timestamp",
                format!(
                    "ts {ts} is older than the retention ({} days)",
                    cfg.retention.hourly_days
                ),
            ));
        }
        Err(TsError::InFuture) => {
            return Err(ApiError::bad(
                "invalid_timestamp",
                format!(
                    "ts {ts} is more than {} s in the future",
                    cfg.gate.max_future_secs
                ),
            ));
        }
    }
    let seconds = match (kind, &ev.seconds) {
        (EventType::Dwell, Some(raw)) => {
            let s = match raw {
                Field::Num(n) => n.as_f64().filter(|s| s.is_finite()),
                _ => None,
            };
            match s {
                Some(s) if s > 0.0 && s <= 86_400.0 => (s.round() as u32).max(1),
                _ => {
                    return Err(ApiError::bad(
                        "invalid_seconds",
                        "seconds must be a number > 0 and <= 86400",
                    ));
                }
            }
        }
        (EventType::Dwell, None) => {
            return Err(ApiError::bad(
                "invalid_seconds",
                "a dwell event needs seconds",
            ));
        }
        (_, _) => 0,
    };
    let event_id = match &ev.event_id {
        None => None,
        Some(raw) => Some(ctx.state.identity.event_id(short_str(
            raw,
            "invalid_event_id",
            "eventId",
        )?)),
    };
    // A trusted backend speaks for its readers: their IP and user agent.
    // A trusted backend's own address is not its readers': their block
    // is unknown (0) unless the event names their `ip`.
    let mut net = if ctx.trusted { 0 } else { ctx.net };
    let (ip, ip_key, user_agent, bot): (IpAddr, u64, Option<&str>, crate::crawler::Crawler) =
        if ctx.trusted {
            let (ip, ip_key) = match &ev.ip {
                None => (ctx.ip, ctx.ip_key),
                Some(raw) => {
                    let ip = raw
                        .as_str()
                        .and_then(|s| s.trim().parse::<IpAddr>().ok())
                        .ok_or_else(|| {
                            ApiError::bad("invalid_ip", "ip must be an IPv4 or IPv6 address")
                        })?;
                    net = net_block(ctx.state, ip);
                    (ip, ctx.state.ip_key(ip))
                }
            };
            let ua = match &ev.user_agent {
                None => None,
                Some(raw) => match raw.as_str() {
                    Some(s) if s.len() <= 1024 => Some(s),
                    _ => {
                        return Err(ApiError::bad(
                            "invalid_user_agent",
                            "userAgent must be a string of at most 1024 bytes",
                        ));
                    }
                },
            };
            let bot = ua.map_or(crate::crawler::Crawler::NONE, |ua| {
                ctx.state.bots.classify(ua)
            });
            (ip, ip_key, ua, bot)
        } else {
            (ctx.ip, ctx.ip_key, Some(ctx.user_agent), ctx.bot)
        };
    // Both are validated when given; `visitorId` wins.
    let visitor_id = ev
        .visitor_id
        .as_ref()
        .map(|raw| short_str(raw, "invalid_visitor_id", "visitorId"))
        .transpose()?;
    let user_id = ev
        .user_id
        .as_ref()
        .map(|raw| short_str(raw, "invalid_user_id", "userId"))
        .transpose()?;
    let visitor = match visitor_id.or(user_id) {
        Some(id) => ctx.state.identity.visitor(id),
        None => ctx
            .state
            .identity
            .anonymous_visitor(ip, user_agent.unwrap_or(""), now),
    };
    Ok(Event {
        kind,
        article,
        visitor,
        ip: ip_key,
        ts,
        arrival_ms: ctx.now_ms,
        event_id,
        seconds,
        bot,
        trusted: ctx.trusted,
        net,
    })
}

/// The ingest endpoints' metric handles, registered once when the state is
/// built: a labelled metric looked up in the registry per request cost a
/// single view about 1,500 instructions (callgrind).
pub struct IngestMeters {
    /// `hotrank_events_total` by verdict, in [`Verdict::ALL`] order.
    events: [Counter; Verdict::ALL.len()],
    invalid: Counter,
    queued: Counter,
    /// `hotrank_ingest_seconds` for `views` and for `events`.
    seconds_views: Histogram,
    seconds_events: Histogram,
}

impl IngestMeters {
    /// Handles on the installed recorder (no-ops if none is installed).
    pub fn new() -> Self {
        IngestMeters {
            events: Verdict::ALL
                .map(|v| metrics::counter!("hotrank_events_total", "verdict" => v.as_str())),
            invalid: metrics::counter!("hotrank_events_invalid_total"),
            queued: metrics::counter!("hotrank_events_queued_total"),
            seconds_views: metrics::histogram!("hotrank_ingest_seconds", "endpoint" => "views"),
            seconds_events: metrics::histogram!("hotrank_ingest_seconds", "endpoint" => "events"),
        }
    }

    fn verdicts(&self, counts: &VerdictCounts) {
        for (v, counter) in Verdict::ALL.iter().zip(&self.events) {
            let n = counts.get(*v);
            if n > 0 {
                counter.increment(n);
            }
        }
    }

    fn seconds(&self, endpoint: Endpoint) -> &Histogram {
        match endpoint {
            Endpoint::Views => &self.seconds_views,
            Endpoint::Events => &self.seconds_events,
        }
    }

    /// Events queued for the pipeline's workers (their verdicts are counted
    /// there, in `hotrank_pipeline_processed_total`).
    fn queued(&self, n: u64, endpoint: Endpoint, started: Instant) {
        self.queued.increment(n);
        self.seconds(endpoint)
            .record(started.elapsed().as_secs_f64());
    }

    fn applied(&self, counts: &VerdictCounts, endpoint: Endpoint, started: Instant) {
        self.verdicts(counts);
        self.seconds(endpoint)
            .record(started.elapsed().as_secs_f64());
    }
}

impl Default for IngestMeters {
    fn default() -> Self {
        Self::new()
    }
}

#[derive(Clone, Copy)]
enum Endpoint {
    Views,
    Events,
}

/// `POST /api/views`' answer, `{"verdict":…,"pv":…,"uv":…}`: the bytes
/// `Json` of a struct with these fields writes (a verdict's name is a
/// plain word, nothing to escape), written directly, which spares a single
/// view about 2,000 instructions of serde (callgrind).
fn view_answer(verdict: Verdict, pv: u64, uv: u64) -> Response {
    use std::fmt::Write;
    let mut body = String::with_capacity(64);
    let _ = write!(
        body,
        r#"{{"verdict":"{}","pv":{pv},"uv":{uv}}}"#,
        verdict.as_str()
    );
    (
        StatusCode::ACCEPTED,
        [(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

async fn post_view(
    State(state): State<AppState>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let trusted = state.is_trusted(&headers)?;
    let raw = match one_pass_event(&body) {
        Some(ev) => Ok(ev),
        None => {
            let raw: &RawValue = serde_json::from_slice(&body).map_err(|e| {
                ApiError::bad("invalid_json", format!("body is not valid JSON: {e}"))
            })?;
            raw_event(raw)
        }
    };
    let ctx = Ctx::new(&state, trusted, ip, &headers);
    let ev = raw
        .and_then(|ev| parse_event(ev, &ctx, true))
        .inspect_err(|_| {
            state.ingest_meters.invalid.increment(1);
        })?;
    let now = ev.arrival_ms.div_euclid(1000);
    if let Some(queue) = &state.queue {
        queue.enqueue(vec![ev], now).await?;
        state.ingest_meters.queued(1, Endpoint::Views, started);
        return Ok((StatusCode::ACCEPTED, Json(json!({"verdict": "queued"}))).into_response());
    }
    let outcome = state.store.ingest(vec![ev], now).await?;
    let outcome = match outcome.into_iter().next() {
        Some(Ok(o)) => o,
        Some(Err(reject)) => return Err(reject.into()),
        None => return Err(ApiError::Internal("store returned no outcome".into())),
    };
    let mut counts = VerdictCounts::default();
    counts.add(outcome.verdict);
    state
        .ingest_meters
        .applied(&counts, Endpoint::Views, started);
    Ok(view_answer(outcome.verdict, outcome.pv, outcome.uv))
}

async fn post_events(
    State(state): State<AppState>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let trusted = state.is_trusted(&headers)?;
    let max = state.config.max_batch_events;
    let raw_events = match one_pass_batch(&body, max) {
        Some(events) => events.into_iter().map(Ok).collect(),
        None => two_pass_batch(&body, max)?,
    };
    let ctx = Ctx::new(&state, trusted, ip, &headers);
    let mut events = Vec::with_capacity(raw_events.len());
    let mut positions = Vec::with_capacity(raw_events.len());
    let mut errors = Vec::new();
    // Widget events are counted apart from views (super::ctr).
    let mut widget = Vec::new();
    for (i, raw) in raw_events.into_iter().enumerate() {
        let raw = match raw {
            Ok(ev) if super::ctr::is_widget(&ev) => {
                match super::ctr::parse(&ev) {
                    Ok(hit) => widget.push((i, hit)),
                    Err(e) => {
                        errors.push(json!({"index": i, "code": e.code(), "message": e.to_string()}))
                    }
                }
                continue;
            }
            raw => raw,
        };
        match raw.and_then(|ev| parse_event(ev, &ctx, false)) {
            Ok(ev) => {
                events.push(ev);
                positions.push(i);
            }
            Err(e) => errors.push(json!({"index": i, "code": e.code(), "message": e.to_string()})),
        }
    }
    if !errors.is_empty() {
        state.ingest_meters.invalid.increment(errors.len() as u64);
    }
    let sender = super::ctr::Sender {
        trusted,
        ip,
        bot: ctx.bot.is_bot(),
        now_ms: ctx.now_ms,
    };
    let (widget, widget_errors) = super::ctr::apply(&state, &sender, widget).await?;
    errors.extend(widget_errors);
    let widget_counted = widget.get(Verdict::Counted);
    let now = ctx.now_ms.div_euclid(1000);
    if let Some(queue) = &state.queue {
        // Verdicts come later, from the workers (README, "The ingest pipeline").
        let queued = events.len();
        if queued > 0 {
            queue.enqueue(events, now).await?;
        }
        state
            .ingest_meters
            .queued(queued as u64, Endpoint::Events, started);
        let status = if queued > 0 {
            StatusCode::ACCEPTED
        } else {
            StatusCode::OK
        };
        errors.sort_by_key(|e| e["index"].as_u64());
        let accepted = queued as u64 + widget_counted;
        let body =
            json!({"accepted": accepted, "verdict": "queued", "queued": queued, "errors": errors});
        return Ok((status, Json(body)).into_response());
    }
    let outcomes = if events.is_empty() {
        Vec::new()
    } else {
        state.store.ingest(events, now).await?
    };
    let mut counts = VerdictCounts::default();
    let mut accepted = widget_counted;
    for (o, i) in outcomes.into_iter().zip(positions) {
        match o {
            Ok(o) => {
                accepted += 1;
                counts.add(o.verdict);
            }
            Err(r) => errors.push(json!({"index": i, "code": r.code(), "message": r.message()})),
        }
    }
    if accepted == 0 && errors.iter().any(|e| e["code"] == "unknown_article") {
        // Nothing applied and the batch names an article that was never
        // created: the batch's answer is the single event's (API.md).
        return Err(ApiError::NotFound(
            "unknown_article",
            "the batch names an article that was never created (require_known_articles is set); nothing applied".into(),
        ));
    }
    errors.sort_by_key(|e| e["index"].as_u64());
    state
        .ingest_meters
        .applied(&counts, Endpoint::Events, started);
    let verdicts: serde_json::Map<String, serde_json::Value> = Verdict::ALL
        .iter()
        .map(|v| {
            (
                v.as_str().to_string(),
                json!(counts.get(*v) + widget.get(*v)),
            )
        })
        .collect();
    Ok(Json(json!({"accepted": accepted, "verdicts": verdicts, "errors": errors})).into_response())
}

fn user_agent(headers: &HeaderMap) -> &str {
    headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}
