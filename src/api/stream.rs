//! `GET /api/stream`: a ranking's top N as Server-Sent Events, for the
//! dashboard and any page that would otherwise poll `/api/hot`.
//!
//! Each distinct query is read from the store by one task every
//! `feeds.stream_poll_ms`, however many streams follow it; the task keeps
//! the newest answer in a `watch` channel, which every stream of that
//! query reads. An `event: ranking` goes out when the list changes: the
//! order, the members, or an item's counters or metadata (a score that
//! drifts with age alone is no change). A stream that says nothing for
//! `feeds.stream_keepalive_secs` sends a comment, so that proxies keep it
//! open and a client that went away is noticed. At most
//! `feeds.max_streams` are open at once; beyond, 503 `too_many_streams`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::budget::QueryBudget;
use super::extract::Params;
use super::rankings;
use super::{ApiError, AppState};
use crate::config::FeedsConfig;
use crate::model::HotQuery;

/// The parameters of `/api/stream`: a ranking's, less paging, plus `top`.
const PARAMS: &[&str] = &[
    "range",
    "model",
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
    "top",
];

/// Items in a stream's list without `top`.
const DEFAULT_TOP: usize = 10;

/// Seconds a client refused for the cap is asked to wait.
const RETRY_AFTER_SECS: &str = "5";

/// The route, with this server's own streams.
pub fn router(state: &AppState) -> Router<AppState> {
    let hub = Arc::new(Hub::new(&state.config.feeds));
    Router::new().route(
        "/api/stream",
        get(
            move |_: QueryBudget, State(state): State<AppState>, RawQuery(raw): RawQuery| {
                open(hub.clone(), state, raw)
            },
        ),
    )
}

async fn open(hub: Arc<Hub>, state: AppState, raw: Option<String>) -> Result<Response, ApiError> {
    let p = Params::parse(raw.as_deref(), PARAMS)?;
    let cap = state.config.retention.ranking_cap;
    let (mut q, range_text) = rankings::query_from(&p, rankings::Limits::of(&state.config))?;
    q.offset = 0;
    q.limit = p.int("top", 1, 100)?.unwrap_or(DEFAULT_TOP).min(cap);
    let Some(slot) = hub.admit() else {
        return Ok(too_many(hub.max));
    };
    let listener = Listener {
        rx: hub.subscribe(&state, q, range_text),
        _slot: slot,
        keepalive: hub.keepalive,
        closing: state.closing.subscribe(),
        hello: Some(Bytes::from(format!("retry: {}\n\n", hub.retry_ms))),
    };
    Ok((
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
            // nginx would otherwise hold the events back in its buffer.
            (header::HeaderName::from_static("x-accel-buffering"), "no"),
        ],
        Body::from_stream(events(listener)),
    )
        .into_response())
}

fn too_many(max: usize) -> Response {
    metrics::counter!("hotrank_streams_refused_total").increment(1);
    let body = json!({"error": {
        "code": "too_many_streams",
        "message": format!(
            "{max} live streams are open, as many as feeds.max_streams allows; retry later"
        ),
    }});
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, RETRY_AFTER_SECS)],
        Json(body),
    )
        .into_response()
}

/// One server's live streams: how many are open, and the queries read.
struct Hub {
    max: usize,
    open: AtomicUsize,
    poll: Duration,
    keepalive: Duration,
    /// The reconnection delay offered to clients (`retry:`), milliseconds.
    retry_ms: u64,
    /// Per query, a receiver of its newest event: a stream subscribes by
    /// cloning it. The query's task holds the sender, and ends (removing
    /// the entry) when this copy is the only receiver left.
    queries: Mutex<HashMap<String, watch::Receiver<Option<Bytes>>>>,
}

impl Hub {
    fn new(c: &FeedsConfig) -> Self {
        // Present from the first scrape.
        metrics::gauge!("hotrank_streams_open").increment(0.0);
        metrics::gauge!("hotrank_stream_queries").increment(0.0);
        Hub {
            max: c.max_streams,
            open: AtomicUsize::new(0),
            poll: Duration::from_millis(c.stream_poll_ms),
            keepalive: Duration::from_secs(c.stream_keepalive_secs),
            retry_ms: c.stream_poll_ms.max(1000),
            queries: Mutex::new(HashMap::new()),
        }
    }

    /// A place for one more stream, if the cap leaves one.
    fn admit(self: &Arc<Self>) -> Option<Slot> {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .ok()?;
        metrics::gauge!("hotrank_streams_open").increment(1.0);
        Some(Slot(self.clone()))
    }

    /// The events of query `q`, starting its reader if none runs.
    fn subscribe(
        self: &Arc<Self>,
        state: &AppState,
        q: HotQuery,
        range_text: String,
    ) -> watch::Receiver<Option<Bytes>> {
        let key = format!("{q:?} {range_text}");
        let mut queries = self.queries.lock();
        if let Some(rx) = queries.get(&key)
            && rx.has_changed().is_ok()
        {
            return rx.clone();
        }
        let (tx, rx) = watch::channel(None);
        if queries.insert(key.clone(), rx.clone()).is_none() {
            metrics::gauge!("hotrank_stream_queries").increment(1.0);
        }
        tokio::spawn(read(self.clone(), state.clone(), key, q, range_text, tx));
        rx
    }
}

/// An admitted stream; dropping it (the stream ended) frees its place.
struct Slot(Arc<Hub>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
        metrics::gauge!("hotrank_streams_open").decrement(1.0);
    }
}

/// Reads query `q` every poll interval and publishes each change, until
/// no stream follows it.
async fn read(
    hub: Arc<Hub>,
    state: AppState,
    key: String,
    q: HotQuery,
    range_text: String,
    tx: watch::Sender<Option<Bytes>>,
) {
    let mut last: Option<Vec<Value>> = None;
    let mut id = 0u64;
    let mut movement_wait = Duration::from_secs(1);
    loop {
        match rankings::hot(&state, &q).await {
            Ok(page) => {
                let mut body = rankings::page_json(&page, &q, &range_text);
                // Movement too: the first read waits a little for it (a
                // small site's is ready at once, so the first event has
                // it); later, a new event once it is computed, and at each
                // hour mark.
                rankings::with_movement(&state, &q, &page, &mut body, movement_wait).await;
                movement_wait = Duration::ZERO;
                let seen = compared(&body);
                if last.as_ref() != Some(&seen) {
                    last = Some(seen);
                    id += 1;
                    // A stream hands out no cursors: it has no pages.
                    if let Some(o) = body.as_object_mut() {
                        o.remove("cursor");
                    }
                    let event = format!("event: ranking\nid: {id}\ndata: {body}\n\n");
                    tx.send_replace(Some(Bytes::from(event)));
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "a live stream's ranking read failed; trying again")
            }
        }
        tokio::time::sleep(hub.poll).await;
        // Only the hub's own receiver left: stop, unless a stream
        // subscribes meanwhile (which takes the same lock).
        if tx.receiver_count() <= 1 {
            let mut queries = hub.queries.lock();
            if tx.receiver_count() <= 1 {
                queries.remove(&key);
                metrics::gauge!("hotrank_stream_queries").decrement(1.0);
                return;
            }
        }
    }
}

/// What a change is judged on: the items without their score and its
/// explanation, which move with the clock alone.
fn compared(page: &Value) -> Vec<Value> {
    let mut items = page["items"].as_array().cloned().unwrap_or_default();
    for it in &mut items {
        if let Some(o) = it.as_object_mut() {
            for k in ["score", "explain", "why"] {
                o.remove(k);
            }
        }
    }
    items
}

/// One open stream.
struct Listener {
    rx: watch::Receiver<Option<Bytes>>,
    _slot: Slot,
    keepalive: Duration,
    /// Turns true when the server begins to shut down: the stream ends,
    /// so it does not hold the shutdown for its grace period.
    closing: watch::Receiver<bool>,
    /// What goes out first: the `retry:` field.
    hello: Option<Bytes>,
}

/// The stream's body: the hello and the current list, then each change,
/// with a keep-alive comment in every quiet `keepalive`.
fn events(
    listener: Listener,
) -> impl futures_util::Stream<Item = Result<Bytes, Infallible>> + Send + 'static {
    futures_util::stream::unfold(listener, |mut l| async move {
        if let Some(hello) = l.hello.take() {
            let current = l.rx.borrow_and_update().clone();
            let chunk = match current {
                Some(event) => {
                    metrics::counter!("hotrank_stream_events_total").increment(1);
                    [hello, event].concat().into()
                }
                None => hello,
            };
            return Some((Ok(chunk), l));
        }
        if *l.closing.borrow() {
            return None;
        }
        let changed = tokio::select! {
            changed = l.rx.changed() => Some(changed),
            () = tokio::time::sleep(l.keepalive) => None,
            // The server shuts down: end the stream (the client
            // reconnects after `retry`, to whichever node is up).
            _ = l.closing.changed() => return None,
        };
        let chunk = match changed {
            // The query's reader is gone: end the stream; the client
            // reconnects after `retry`.
            Some(Err(_)) => return None,
            Some(Ok(())) => match l.rx.borrow_and_update().clone() {
                Some(event) => {
                    metrics::counter!("hotrank_stream_events_total").increment(1);
                    event
                }
                None => Bytes::from_static(b": keep-alive\n\n"),
            },
            None => Bytes::from_static(b": keep-alive\n\n"),
        };
        Some((Ok(chunk), l))
    })
}
