//! The widget's `impression` and `click` events, taken apart from views
//! by `POST /api/events` and counted in [`crate::ctr`] (never in an
//! article's counters), and `GET /api/ctr`, click-through by position per
//! model ([`crate::ctr::report`]).
//!
//! Anonymous senders are budgeted: at most
//! `limits.widget_events_per_minute_per_ip` of these events per client IP
//! block in any minute (requests carrying the ingest or admin token are
//! not); past it an event is `rate_limited` and counts nothing. Events
//! from a bot's user agent are `bot` and count nothing either.

use std::net::IpAddr;

use axum::Json;
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::routing::get;
use serde_json::{Value, json};

use super::budget::{QueryBudget, Spend};
use super::event_json::{Field, RawEvent};
use super::extract::Params;
use super::{ApiError, AppState};
use crate::ctr::{Hit, Kind, MAX_POSITION, parse_list};
use crate::model::{Verdict, VerdictCounts, integral};

pub fn router() -> Router<AppState> {
    Router::new().route("/api/ctr", get(get_ctr))
}

/// Whether `ev` is a widget event (its `type` is `impression` or `click`).
pub(super) fn is_widget(ev: &RawEvent<'_>) -> bool {
    ev.kind
        .as_ref()
        .and_then(Field::as_str)
        .and_then(Kind::parse)
        .is_some()
}

/// A widget event: its kind, `list` and `position` (1..=100).
pub(super) fn parse(ev: &RawEvent<'_>) -> Result<Hit, ApiError> {
    let kind = ev
        .kind
        .as_ref()
        .and_then(Field::as_str)
        .and_then(Kind::parse)
        .ok_or_else(|| ApiError::bad("invalid_event_type", "not a widget event"))?;
    let list = ev.list.as_ref().and_then(Field::as_str).ok_or_else(|| {
        ApiError::bad(
            "invalid_list",
            "list must be a string, e.g. \"gravity:24h\"",
        )
    })?;
    parse_list(list).map_err(|m| ApiError::bad("invalid_list", m))?;
    let position = ev
        .position
        .as_ref()
        .and_then(Field::number)
        .and_then(|v| integral(&v))
        .filter(|p| (1..=i64::from(MAX_POSITION)).contains(p))
        .ok_or_else(|| {
            ApiError::bad(
                "invalid_position",
                format!("position must be an integer 1-{MAX_POSITION}"),
            )
        })?;
    Ok(Hit {
        list: list.to_string(),
        position: position as u32,
        kind,
    })
}

/// Who sent a batch's widget events.
pub(super) struct Sender {
    /// Carries the ingest or admin token: not budgeted.
    pub trusted: bool,
    pub ip: IpAddr,
    /// The request's user agent is a bot's.
    pub bot: bool,
    pub now_ms: i64,
}

/// Budgets and counts a batch's widget events (`(index in the batch,
/// event)`): their verdicts, and the errors of those refused.
pub(super) async fn apply(
    state: &AppState,
    from: &Sender,
    hits: Vec<(usize, Hit)>,
) -> Result<(VerdictCounts, Vec<Value>), ApiError> {
    let mut verdicts = VerdictCounts::default();
    let mut admitted = Vec::with_capacity(hits.len());
    for (i, hit) in hits {
        if from.bot {
            verdicts.add(Verdict::Bot);
            continue;
        }
        let ip = (!from.trusted).then_some(from.ip);
        let spent = state
            .budgets
            .spend(Spend::Widget, &state.identity, ip, None, from.now_ms);
        if spent.is_err() {
            verdicts.add(Verdict::RateLimited);
            continue;
        }
        admitted.push((i, hit));
    }
    let events: Vec<Hit> = admitted.iter().map(|(_, h)| h.clone()).collect();
    let outcomes = state
        .ctr
        .record(&events)
        .await
        .map_err(|e| ApiError::Unavailable(e.to_string()))?;
    let mut errors = Vec::new();
    for ((i, _), o) in admitted.iter().zip(outcomes) {
        match o {
            Ok(()) => verdicts.add(Verdict::Counted),
            Err(r) => errors.push(json!({"index": i, "code": r.code(), "message": r.message()})),
        }
    }
    Ok((verdicts, errors))
}

/// `GET /api/ctr[?model=]`: click-through by position per model.
async fn get_ctr(
    _: QueryBudget,
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let p = Params::parse(raw.as_deref(), &["model"])?;
    let model = p.get("model");
    if let Some(m) = model
        && crate::score::ModelKind::parse(m).is_none()
    {
        return Err(ApiError::bad(
            "invalid_parameter",
            format!("model {m:?} is not available"),
        ));
    }
    let counts = state
        .ctr
        .counts()
        .await
        .map_err(|e| ApiError::Unavailable(e.to_string()))?;
    Ok(Json(crate::ctr::report::report(&counts, model)))
}
