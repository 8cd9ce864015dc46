//! `POST /api/views` and `POST /api/events`: validation and the stateless
//! half of the gate (identity hashing, bot check), then the store.

use std::borrow::Cow;
use std::net::IpAddr;
use std::time::Instant;

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use metrics::{Counter, Histogram};
use serde::{Deserialize, Serialize};
use serde_json::json;
use serde_json::value::RawValue;

use super::extract::{ClientIp, JsonBody, object, object_str};
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
    let verdict = match state.store.event_verdict(hashed).await? {
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

/// One event as sent. Each field is parsed once into a [`Field`], whatever
/// its JSON type, so that a bad field fails that event alone, with a
/// precise error code.
#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug, PartialEq))]
#[serde(rename_all = "camelCase")]
struct RawEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Field<'a>>,
    #[serde(borrow)]
    article_id: Option<Field<'a>>,
    #[serde(borrow)]
    visitor_id: Option<Field<'a>>,
    #[serde(borrow)]
    user_id: Option<Field<'a>>,
    #[serde(borrow)]
    ts: Option<Field<'a>>,
    #[serde(borrow)]
    event_id: Option<Field<'a>>,
    #[serde(borrow)]
    seconds: Option<Field<'a>>,
    #[serde(borrow)]
    ip: Option<Field<'a>>,
    #[serde(borrow)]
    user_agent: Option<Field<'a>>,
}

#[derive(Deserialize)]
struct RawBatch<'a> {
    #[serde(borrow)]
    events: Vec<&'a RawValue>,
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
    bot: bool,
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
            bot: state.bots.is_bot(user_agent),
        }
    }
}

/// A field's value as sent (`null` is an absent field): a string, borrowed
/// from the body unless it had escapes; a number; or some other JSON value,
/// skipped, which every field refuses.
#[cfg_attr(test, derive(Debug, PartialEq))]
enum Field<'a> {
    Str(Cow<'a, str>),
    Num(serde_json::Number),
    Other,
}

impl Field<'_> {
    fn as_str(&self) -> Option<&str> {
        match self {
            Field::Str(s) => Some(s),
            _ => None,
        }
    }

    /// A JSON number as [`serde_json::Value`], for [`integral`].
    fn number(&self) -> Option<serde_json::Value> {
        match self {
            Field::Num(n) => Some(serde_json::Value::Number(n.clone())),
            _ => None,
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Field<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FieldVisitor(std::marker::PhantomData))
    }
}

struct FieldVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> serde::de::Visitor<'de> for FieldVisitor<'a> {
    type Value = Field<'a>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Field<'a>, E> {
        Ok(Field::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Field<'a>, E> {
        Ok(Field::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Field<'a>, E> {
        Ok(Field::Str(Cow::Owned(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Field<'a>, E> {
        Ok(Field::Num(v.into()))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Field<'a>, E> {
        Ok(Field::Num(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Field<'a>, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Field::Other, Field::Num))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Field<'a>, E> {
        Ok(Field::Other)
    }
    fn visit_unit<E>(self) -> Result<Field<'a>, E> {
        Ok(Field::Other)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Field<'a>, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(Field::Other)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Field<'a>, A::Error> {
        while map
            .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
            .is_some()
        {}
        Ok(Field::Other)
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

/// One event of a body already parsed as JSON, as a [`RawEvent`].
fn raw_event(raw: &RawValue) -> Result<RawEvent<'_>, ApiError> {
    object_str(raw.get()).map_err(|e| {
        ApiError::bad(
            "invalid_event",
            format!("an event must be a JSON object: {e}"),
        )
    })
}

/// A batch body in one pass, when it is an object whose `events` are at
/// most `max` objects none of which repeats a field: the usual batch. Any
/// other body is `None`, and the caller parses it in two passes (the body,
/// then each event), which say precisely what is wrong where.
fn one_pass_batch(body: &[u8], max: usize) -> Option<Vec<RawEvent<'_>>> {
    // UTF-8 checked once for the whole body, not string by string.
    let body = std::str::from_utf8(body).ok()?;
    let mut de = serde_json::Deserializer::from_str(body);
    let events = serde::de::DeserializeSeed::deserialize(OnePassBatch { max }, &mut de).ok()?;
    de.end().ok()?;
    Some(events)
}

/// A batch body the slow way: the body, then each event, each failing on
/// its own with a precise error.
fn two_pass_batch(
    body: &[u8],
    max: usize,
) -> Result<Vec<Result<RawEvent<'_>, ApiError>>, ApiError> {
    let batch: RawBatch<'_> = object(body).map_err(|e| {
        ApiError::bad(
            "invalid_json",
            format!("body must be a JSON object {{\"events\": [...]}}: {e}"),
        )
    })?;
    if batch.events.len() > max {
        return Err(ApiError::bad(
            "batch_too_large",
            format!(
                "a batch holds at most {max} events, got {}",
                batch.events.len()
            ),
        ));
    }
    Ok(batch.events.into_iter().map(raw_event).collect())
}

struct OnePassBatch {
    max: usize,
}

impl<'de> serde::de::DeserializeSeed<'de> for OnePassBatch {
    type Value = Vec<RawEvent<'de>>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for OnePassBatch {
    type Value = Vec<RawEvent<'de>>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a batch object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        use serde::de::Error;
        let mut events = None;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if key != "events" {
                map.next_value::<serde::de::IgnoredAny>()?;
            } else if events.is_some() {
                return Err(A::Error::duplicate_field("events"));
            } else {
                events = Some(map.next_value_seed(OnePassEvents { max: self.max })?);
            }
        }
        events.ok_or_else(|| A::Error::missing_field("events"))
    }
}

struct OnePassEvents {
    max: usize,
}

impl<'de> serde::de::DeserializeSeed<'de> for OnePassEvents {
    type Value = Vec<RawEvent<'de>>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> serde::de::Visitor<'de> for OnePassEvents {
    type Value = Vec<RawEvent<'de>>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an array of event objects")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut events = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(self.max));
        while let Some(EventObject(ev)) = seq.next_element()? {
            if events.len() == self.max {
                return Err(serde::de::Error::custom("too many events"));
            }
            events.push(ev);
        }
        Ok(events)
    }
}

/// A [`RawEvent`] that must be a JSON object (serde's derive would also
/// take an array of the fields' values).
struct EventObject<'a>(RawEvent<'a>);

impl<'de> Deserialize<'de> for EventObject<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EventObjectVisitor)
    }
}

struct EventObjectVisitor;

impl<'de> serde::de::Visitor<'de> for EventObjectVisitor {
    type Value = EventObject<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an event object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        RawEvent::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(EventObject)
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
                        "type must be one of view, dwell, like, comment, favorite, share",
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
    let (ip, ip_key, user_agent, bot): (IpAddr, u64, Option<&str>, bool) = if ctx.trusted {
        let (ip, ip_key) = match &ev.ip {
            None => (ctx.ip, ctx.ip_key),
            Some(raw) => {
                let ip = raw
                    .as_str()
                    .and_then(|s| s.trim().parse::<IpAddr>().ok())
                    .ok_or_else(|| {
                        ApiError::bad("invalid_ip", "ip must be an IPv4 or IPv6 address")
                    })?;
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
        let bot = ua.is_some_and(|ua| ctx.state.bots.is_bot(ua));
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

/// `POST /api/views`' answer.
#[derive(Serialize)]
struct ViewAnswer {
    verdict: &'static str,
    pv: u64,
    uv: u64,
}

async fn post_view(
    State(state): State<AppState>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let trusted = state.is_trusted(&headers)?;
    let raw: &RawValue = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad("invalid_json", format!("body is not valid JSON: {e}")))?;
    let ctx = Ctx::new(&state, trusted, ip, &headers);
    let ev = raw_event(raw)
        .and_then(|ev| parse_event(ev, &ctx, true))
        .inspect_err(|_| {
            state.ingest_meters.invalid.increment(1);
        })?;
    let now = ev.arrival_ms.div_euclid(1000);
    if state.store.queues() {
        state.store.enqueue(vec![ev], now).await?;
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
    let body = ViewAnswer {
        verdict: outcome.verdict.as_str(),
        pv: outcome.pv,
        uv: outcome.uv,
    };
    Ok((StatusCode::ACCEPTED, Json(body)).into_response())
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
    for (i, raw) in raw_events.into_iter().enumerate() {
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
    let now = ctx.now_ms.div_euclid(1000);
    if state.store.queues() {
        // Verdicts come later, from the workers (README, "Pipeline").
        let queued = events.len();
        if queued > 0 {
            state.store.enqueue(events, now).await?;
        }
        state
            .ingest_meters
            .queued(queued as u64, Endpoint::Events, started);
        let status = if queued > 0 {
            StatusCode::ACCEPTED
        } else {
            StatusCode::OK
        };
        let body =
            json!({"accepted": queued, "verdict": "queued", "queued": queued, "errors": errors});
        return Ok((status, Json(body)).into_response());
    }
    let outcomes = if events.is_empty() {
        Vec::new()
    } else {
        state.store.ingest(events, now).await?
    };
    let mut counts = VerdictCounts::default();
    let mut accepted = 0u64;
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
        .map(|v| (v.as_str().to_string(), json!(counts.get(*v))))
        .collect();
    Ok(Json(json!({"accepted": accepted, "verdicts": verdicts, "errors": errors})).into_response())
}

fn user_agent(headers: &HeaderMap) -> &str {
    headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// JSON text for a field's value: strings with and without escapes,
    /// integers, floats, and the other kinds.
    fn value() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z0-9]{0,6}".prop_map(|s| format!("\"{s}\"")),
            "[a-z]{0,3}".prop_map(|s| format!("\"\\u0041{s}\\n\"")),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
            (-1e6f64..1e6).prop_map(|f| format!("{f:e}")),
            Just("1e400".to_string()),
            Just("null".to_string()),
            Just("true".to_string()),
            Just("[1, {\"a\": [2]}]".to_string()),
            Just("{\"type\": \"view\"}".to_string()),
        ]
    }

    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("type"),
            Just("articleId"),
            Just("visitorId"),
            Just("userId"),
            Just("ts"),
            Just("eventId"),
            Just("seconds"),
            Just("ip"),
            Just("userAgent"),
            Just("other"),
        ]
        .prop_map(str::to_string)
    }

    /// An event: mostly objects (sometimes repeating a field), now and then
    /// another JSON value.
    fn event() -> impl Strategy<Value = String> {
        prop_oneof![
            8 => prop::collection::vec((key(), value()), 0..6).prop_map(|fields| {
                let fields: Vec<String> =
                    fields.iter().map(|(k, v)| format!("\"{k}\": {v}")).collect();
                format!("{{{}}}", fields.join(", "))
            }),
            1 => value(),
            1 => Just("[\"view\", \"a1\"]".to_string()),
        ]
    }

    fn body() -> impl Strategy<Value = String> {
        (prop::collection::vec(event(), 0..8), 0..4u8).prop_map(|(events, shape)| {
            let list = format!("[{}]", events.join(", "));
            match shape {
                0 => format!("{{\"events\": {list}}}"),
                1 => format!("{{\"x\": [1], \"events\": {list}, \"y\": null}}"),
                2 => format!("{{\"events\": {list}, \"events\": []}}"),
                _ => list,
            }
        })
    }

    proptest! {
        /// The one-pass parse takes only bodies the two-pass parse takes
        /// whole, and reads every event the same.
        #[test]
        fn one_pass_reads_what_two_passes_read(body in body(), max in 1usize..10) {
            let two = two_pass_batch(body.as_bytes(), max);
            match one_pass_batch(body.as_bytes(), max) {
                Some(one) => {
                    let two: Vec<RawEvent<'_>> = two
                        .expect("the two-pass parse takes the body")
                        .into_iter()
                        .collect::<Result<_, _>>()
                        .expect("and every event");
                    prop_assert_eq!(one, two);
                }
                None => {
                    // The usual batch always takes the one pass.
                    let whole = two.is_ok_and(|evs| evs.iter().all(Result::is_ok));
                    let repeats = body.matches("\"events\"").count() > 1;
                    prop_assert!(!whole || repeats, "one pass refused a plain batch: {}", body);
                }
            }
        }
    }
}
