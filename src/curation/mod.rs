//! Curation: an editor's hand on the public rankings (README, "Curation").
//!
//! - **Pins**: an article shown at a position of the rankings its query
//!   matches, until a time.
//! - **Exclusions**: an article kept out of every public ranking, until a
//!   time; its events are still counted.
//! - **Review** (`[review] mode = "new_entries"`): an article about to be
//!   served in a public ranking for the first time is held, with the
//!   evidence of that moment, until an editor allows or denies it; under
//!   `suspicious` only one whose rise breaks [`suspicious`]'s rules.
//!
//! The state is a flat map of entries (`pin:<id>`, `exclude:<id>`,
//! `review:<id>`, each a JSON value) behind [`CurationStore`], kept in the
//! embedded store's data dir ([`file::FileCuration`]) or in one Redis hash
//! per site ([`redis::RedisCuration`]). [`Curator`] reads it into a
//! [`Curation`], the parsed view the ranking answers apply
//! (`src/api/curated.rs`), and caches it briefly ([`Curator::new`]).
//!
//! Nothing here knows HTTP: the pure part is [`Curation`] (what is
//! hidden, which pins apply to a query) and [`arrange`] (pins placed into
//! a ranking).

pub mod file;
pub mod redis;
pub mod suspicious;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::config::ReviewMode;
use crate::model::{ArticleId, HotQuery, Timestamp};
use crate::store::StoreError;

/// Where the entries live: a flat map of field → JSON text.
#[async_trait]
pub trait CurationStore: Send + Sync {
    /// Every entry.
    async fn entries(&self) -> Result<BTreeMap<String, String>, StoreError>;
    /// Sets (`Some`) or removes (`None`) one entry.
    async fn set(&self, field: &str, value: Option<&str>) -> Result<(), StoreError>;
    /// Sets each entry only if it does not exist (in one write); which
    /// were set.
    async fn set_new(&self, entries: &[(String, String)]) -> Result<Vec<bool>, StoreError>;
}

/// Which list an article shows in a pin's query, each filter exactly as a
/// ranking query gives it; `model` and `range`, when set, narrow the pin
/// to that model and range.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PinQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<String>,
}

impl PinQuery {
    /// Whether ranking query `q` (its range as given, `range_text`) is one
    /// this pin is for: the same filters, and the pin's model and range if
    /// it names them.
    pub fn matches(&self, q: &HotQuery) -> bool {
        self.category == q.category
            && self.kind == q.kind
            && self.group == q.group
            && self.model.as_deref().is_none_or(|m| m == q.model.as_str())
            && self
                .range
                .as_deref()
                .is_none_or(|r| crate::model::RangeSpec::parse(r) == Some(q.range))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pin {
    /// 1-based.
    pub position: usize,
    pub until: Option<Timestamp>,
    pub query: PinQuery,
    pub pinned_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Exclusion {
    pub reason: Option<String>,
    pub until: Option<Timestamp>,
    pub excluded_at: Timestamp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReviewStatus {
    Held,
    Allowed,
    Denied,
}

impl ReviewStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewStatus::Held => "held",
            ReviewStatus::Allowed => "allowed",
            ReviewStatus::Denied => "denied",
        }
    }
}

/// What an article's review knows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Review {
    pub status: ReviewStatus,
    /// When it was first held, and the evidence of that moment (none for
    /// an article an editor decided on before it was ever held).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<Timestamp>,
}

/// How the public rankings treat an article now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    Shown,
    /// Excluded, denied, or held.
    Hidden,
    /// Never reviewed, while review is on: under `new_entries` hidden, and
    /// held when a public ranking would serve it; under `suspicious` the
    /// same if its rise breaks a rule ([`suspicious`]), else shown.
    Unreviewed,
}

/// The parsed state, as of one read.
#[derive(Debug, Clone, Default)]
pub struct Curation {
    pub pins: BTreeMap<ArticleId, Pin>,
    pub excludes: BTreeMap<ArticleId, Exclusion>,
    pub reviews: BTreeMap<ArticleId, Review>,
}

/// An entry's field name.
pub fn field(kind: &str, id: &ArticleId) -> String {
    format!("{kind}:{id}")
}

fn live(until: Option<Timestamp>, now: Timestamp) -> bool {
    until.is_none_or(|u| now < u)
}

impl Curation {
    /// Parses the entries; one that does not parse is logged and left out.
    pub fn parse(entries: &BTreeMap<String, String>) -> Curation {
        let mut c = Curation::default();
        for (k, v) in entries {
            let Some((kind, id)) = k.split_once(':') else {
                continue;
            };
            let Ok(id) = ArticleId::parse(id) else {
                continue;
            };
            let ok = match kind {
                "pin" => serde_json::from_str(v)
                    .map(|p| c.pins.insert(id, p))
                    .is_ok(),
                "exclude" => serde_json::from_str(v)
                    .map(|x| c.excludes.insert(id, x))
                    .is_ok(),
                "review" => serde_json::from_str(v)
                    .map(|r| c.reviews.insert(id, r))
                    .is_ok(),
                _ => false,
            };
            if !ok {
                tracing::warn!(field = %k, "curation: an entry that does not parse is ignored");
            }
        }
        c
    }

    pub fn excluded(&self, id: &ArticleId, now: Timestamp) -> bool {
        self.excludes.get(id).is_some_and(|x| live(x.until, now))
    }

    /// How article `id` is treated at `now` under review `mode` (pins
    /// aside: see [`Curation::pins_for`]).
    pub fn visibility(&self, id: &ArticleId, now: Timestamp, mode: ReviewMode) -> Visibility {
        if self.excluded(id, now) {
            return Visibility::Hidden;
        }
        if mode == ReviewMode::Off {
            return Visibility::Shown;
        }
        match self.reviews.get(id).map(|r| r.status) {
            Some(ReviewStatus::Allowed) => Visibility::Shown,
            Some(ReviewStatus::Held | ReviewStatus::Denied) => Visibility::Hidden,
            None => Visibility::Unreviewed,
        }
    }

    /// Whether any article is hidden at `now` under `mode`, or could be
    /// (`new_entries` hides every unreviewed article).
    pub fn hides_any(&self, now: Timestamp, mode: ReviewMode) -> bool {
        mode != ReviewMode::Off || self.excludes.values().any(|x| live(x.until, now))
    }

    /// How many articles are known to be hidden at `now`: how much deeper
    /// than a page a curated answer reads the ranking at first.
    pub fn hidden_count(&self, now: Timestamp, mode: ReviewMode) -> usize {
        let held = if mode == ReviewMode::Off {
            0
        } else {
            self.reviews
                .iter()
                .filter(|(id, r)| r.status != ReviewStatus::Allowed && !self.excluded(id, now))
                .count()
        };
        self.excludes
            .values()
            .filter(|x| live(x.until, now))
            .count()
            + held
    }

    /// The pins in force for query `q` at `now`, in placing order
    /// (position, then the earlier pin, then id). A pin shows its article
    /// even if unreviewed or held (pinning is an editor's decision), but
    /// not one excluded, or denied while review is on.
    pub fn pins_for(
        &self,
        q: &HotQuery,
        now: Timestamp,
        mode: ReviewMode,
    ) -> Vec<(ArticleId, usize)> {
        let mut pins: Vec<(&ArticleId, &Pin)> = self
            .pins
            .iter()
            .filter(|(id, p)| {
                live(p.until, now)
                    && p.query.matches(q)
                    && !self.excluded(id, now)
                    && !(mode != ReviewMode::Off
                        && self.reviews.get(*id).map(|r| r.status) == Some(ReviewStatus::Denied))
            })
            .collect();
        pins.sort_by(|a, b| {
            (a.1.position, a.1.pinned_at, a.0).cmp(&(b.1.position, b.1.pinned_at, b.0))
        });
        pins.into_iter()
            .map(|(id, p)| (id.clone(), p.position))
            .collect()
    }
}

/// The public list: `natural` (the ranking without hidden or pinned
/// articles) with each pin at its 1-based position, at most `want` items;
/// `true` marks a pinned one. Pins come in placing order; a pin whose
/// position is taken by an earlier pin goes right after it, and one past
/// the end of the ranking goes at its end.
pub fn arrange<T>(
    natural: impl IntoIterator<Item = T>,
    pins: impl IntoIterator<Item = (usize, T)>,
    want: usize,
) -> Vec<(T, bool)> {
    let mut natural = natural.into_iter();
    let mut pins = pins.into_iter().peekable();
    let mut out = Vec::new();
    while out.len() < want {
        if pins.peek().is_some_and(|(p, _)| *p <= out.len() + 1) {
            let (_, t) = pins.next().expect("peeked");
            out.push((t, true));
        } else if let Some(t) = natural.next() {
            out.push((t, false));
        } else if let Some((_, t)) = pins.next() {
            out.push((t, true));
        } else {
            break;
        }
    }
    out
}

/// Reads the entries through a short cache: what every ranking answer
/// asks.
pub struct Curator {
    backend: Arc<dyn CurationStore>,
    /// How long a read is reused; writes through this node clear it, so
    /// only other nodes' writes wait for it (Redis: [`REDIS_CACHE`]).
    ttl: Duration,
    cache: Mutex<Option<(Instant, Arc<Curation>)>>,
    /// `suspicious`'s remembered verdicts.
    pub screen: suspicious::Screen,
}

/// Holds by reason: `new_entry`, `narrow_network`, `held_back`.
pub const HOLDS_METRIC: &str = "hotrank_review_holds_total";

/// How long a Redis node reuses a read of the curation hash: another
/// node's pin, exclusion or decision shows on this node's answers within
/// this bound.
pub const REDIS_CACHE: Duration = Duration::from_secs(1);

impl Curator {
    pub fn new(backend: Arc<dyn CurationStore>, ttl: Duration) -> Self {
        Curator {
            backend,
            ttl,
            cache: Mutex::new(None),
            screen: suspicious::Screen::default(),
        }
    }

    /// The state, read at most `ttl` ago.
    pub async fn current(&self) -> Result<Arc<Curation>, StoreError> {
        if let Some((at, c)) = &*self.cache.lock()
            && at.elapsed() < self.ttl
        {
            return Ok(c.clone());
        }
        let c = Arc::new(Curation::parse(&self.backend.entries().await?));
        *self.cache.lock() = Some((Instant::now(), c.clone()));
        Ok(c)
    }

    /// The state as the store holds it now (the admin routes' reads).
    pub async fn fresh(&self) -> Result<Arc<Curation>, StoreError> {
        self.cache.lock().take();
        self.current().await
    }

    /// Sets or removes `kind:id`.
    pub async fn set<T: Serialize>(
        &self,
        kind: &str,
        id: &ArticleId,
        value: Option<&T>,
    ) -> Result<(), StoreError> {
        let json = value.map(|v| serde_json::to_string(v).expect("serializable"));
        let r = self.backend.set(&field(kind, id), json.as_deref()).await;
        self.cache.lock().take();
        r
    }

    /// Holds each article for review with its evidence unless it has a
    /// review entry already; the ones this call held. Each comes with why
    /// (`new_entry`, or the `suspicious` rule it broke), which the metric
    /// [`HOLDS_METRIC`] counts.
    pub async fn hold(
        &self,
        found: Vec<(ArticleId, serde_json::Value, &'static str)>,
        now: Timestamp,
    ) -> Result<Vec<ArticleId>, StoreError> {
        if found.is_empty() {
            return Ok(Vec::new());
        }
        let entries: Vec<(String, String)> = found
            .iter()
            .map(|(id, evidence, _)| {
                let review = Review {
                    status: ReviewStatus::Held,
                    held_at: Some(now),
                    evidence: Some(evidence.clone()),
                    decided_at: None,
                };
                let json = serde_json::to_string(&review).expect("serializable");
                (field("review", id), json)
            })
            .collect();
        let set = self.backend.set_new(&entries).await;
        self.cache.lock().take();
        let held: Vec<ArticleId> = found
            .into_iter()
            .zip(set?)
            .filter_map(|((id, _, reason), new)| {
                new.then(|| {
                    metrics::counter!(HOLDS_METRIC, "reason" => reason).increment(1);
                    id
                })
            })
            .collect();
        metrics::counter!("hotrank_curation_held_total").increment(held.len() as u64);
        for id in &held {
            tracing::info!(article = %id, "curation: held for review");
        }
        Ok(held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_go_to_their_places() {
        let got = arrange(["a", "b", "c"], [(1, "P"), (3, "Q")], 10);
        assert_eq!(
            got.iter().map(|x| x.0).collect::<String>(),
            "PaQbc",
            "{got:?}"
        );
        // Two pins for one place: the second right after; past the end: at the end.
        let got = arrange(["a"], [(1, "P"), (1, "Q"), (9, "R")], 10);
        assert_eq!(got.iter().map(|x| x.0).collect::<String>(), "PQaR");
        assert_eq!(arrange(["a", "b"], [(1, "P")], 2).len(), 2);
    }

    #[test]
    fn expired_entries_do_not_apply() {
        let id = ArticleId::parse("a1").unwrap();
        let mut c = Curation::default();
        c.excludes.insert(
            id.clone(),
            Exclusion {
                reason: None,
                until: Some(100),
                excluded_at: 0,
            },
        );
        assert_eq!(c.visibility(&id, 99, ReviewMode::Off), Visibility::Hidden);
        assert_eq!(c.visibility(&id, 100, ReviewMode::Off), Visibility::Shown);
        assert_eq!(
            c.visibility(&id, 100, ReviewMode::NewEntries),
            Visibility::Unreviewed
        );
    }
}
