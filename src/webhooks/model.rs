//! What webhooks keep: subscriptions, each one's membership (the articles
//! it last saw in its top N), outbox entries (decided transitions waiting
//! to be delivered) and delivery attempts. Plain data, serialized as JSON
//! by both outboxes.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// A transition a subscription can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventKind {
    /// The article reached rank <= `top`.
    Entered,
    /// The article fell below `top + hysteresis`, or out of the ranking.
    Left,
    /// An article in the list whose current hour's views are a spike
    /// against its own past (`webhooks.rising_z`).
    Rising,
    /// The article was held for review (curation; decided by the evaluator
    /// from the held articles it reads, [`super::Webhooks::read_held`]).
    Held,
}

impl EventKind {
    pub const ALL: [EventKind; 4] = [
        EventKind::Entered,
        EventKind::Left,
        EventKind::Rising,
        EventKind::Held,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Entered => "entered",
            EventKind::Left => "left",
            EventKind::Rising => "rising",
            EventKind::Held => "held",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// One subscription, as created by `POST /api/webhooks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subscription {
    pub id: String,
    pub url: String,
    /// The HMAC key of its signatures; never shown by the API.
    pub secret: String,
    pub events: Vec<EventKind>,
    /// The ranking parameters, as `GET /api/hot` takes them (validated).
    pub query: BTreeMap<String, String>,
    pub top: u32,
    pub created_at: i64,
}

impl Subscription {
    pub fn wants(&self, k: EventKind) -> bool {
        self.events.contains(&k)
    }
}

/// An article in a subscription's list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Member {
    pub rank: u32,
    /// A `rising` was sent for the current spike (cleared when it ends).
    #[serde(default)]
    pub rising: bool,
}

/// What a subscription has decided so far: its list and how many
/// transitions it decided (the next delivery id's number).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SubState {
    pub members: BTreeMap<String, Member>,
    pub seq: u64,
    /// Whether the subscription was evaluated once (its first list).
    #[serde(default)]
    pub evaluated: bool,
    /// The articles it was told are held (a `held` decided), while they
    /// still are: the next hold of one of them after a decision is told
    /// again, and none is told twice for one hold.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub held: BTreeSet<String>,
}

/// A decided transition: what one delivery sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// `<subscription>-<n>`: the n-th transition the subscription decided.
    pub delivery: String,
    pub subscription: String,
    pub event: EventKind,
    pub article_id: String,
    pub rank: Option<u32>,
    /// When it was decided (Unix seconds, the server's clock).
    pub at: i64,
    /// When it was decided (Unix milliseconds, wall clock): the
    /// transition-to-delivery latency is measured from here.
    pub decided_ms: i64,
}

impl Entry {
    /// The delivery id of a subscription's `seq`-th transition.
    pub fn delivery_id(subscription: &str, seq: u64) -> String {
        format!("{subscription}-{seq}")
    }
}

/// One delivery attempt, for `GET /api/webhooks/{id}/deliveries`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempt {
    pub delivery: String,
    pub subscription: String,
    pub event: EventKind,
    pub article_id: String,
    pub attempt: u32,
    /// The receiver's status code, if it answered.
    pub status: Option<u16>,
    /// Why the attempt failed, if it did.
    pub error: Option<String>,
    /// `delivered`, `retry` (will be tried again), `failed` (given up) or
    /// `dropped` (its subscription was deleted).
    pub outcome: String,
    /// When the attempt started (Unix milliseconds).
    pub at_ms: i64,
    /// When its transition was decided (Unix milliseconds).
    #[serde(default)]
    pub decided_ms: i64,
    pub duration_ms: u64,
}

/// Most attempts kept per subscription.
pub const ATTEMPTS_KEPT: usize = 100;

/// Wall-clock milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
