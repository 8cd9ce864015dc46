//! The public rankings as an editor left them: what every public ranking
//! answer (`/api/hot`, `/api/new`, the feeds, `/api/stream`) reads
//! through [`page`].
//!
//! The public list is the store's ranking without the hidden articles
//! (excluded; denied or held, and under `new_entries` never reviewed),
//! with each pin of the query at its position and not at its natural
//! place ([`crate::curation::arrange`]). A page of it is read from the
//! top of the store's ranking (with the request's cursor, so a cursor
//! pages through one snapshot) as deep as the page needs: `offset +
//! limit` plus the articles known to be hidden and the pins, deeper (at
//! most twice as deep each time, up to `ranking_cap`) while hidden
//! articles found on the way leave the page short. Ranks are the public
//! list's, 1 up, contiguous. Without any pin for the query or any hidden
//! article, the store's page is served as it is.
//!
//! Webhooks read the same list ([`public_ranking`]), and an article this
//! module holds for the first time is told to them as `held`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Value, json};

use super::movement::PublicOrder;
use super::{ApiError, AppState};
use crate::curation::{Curation, ReviewStatus, Visibility, arrange};
use crate::model::{ArticleId, HotPage, HotQuery, RankedItem, Timestamp};
use crate::store::{StoreError, cursor};
use crate::webhooks::{HeldArticles, PublicRanking};

/// Which public list a page is of: the hot ranking or the newest first.
#[derive(Clone, Copy)]
pub(super) enum List {
    Hot,
    New,
}

/// A public page, and which of its items are pinned.
pub struct CuratedPage {
    pub page: HotPage,
    pub pinned: HashSet<ArticleId>,
}

impl CuratedPage {
    pub fn plain(page: HotPage) -> Self {
        CuratedPage {
            page,
            pinned: HashSet::new(),
        }
    }
}

impl std::ops::Deref for CuratedPage {
    type Target = HotPage;
    fn deref(&self) -> &HotPage {
        &self.page
    }
}

async fn read(
    state: &AppState,
    q: &HotQuery,
    list: List,
    now: Timestamp,
) -> Result<HotPage, ApiError> {
    Ok(match list {
        List::Hot => state.store.hot(q, now).await?,
        List::New => state.store.newest(q, now).await?,
    })
}

/// How the public list of `q` orders a store ranking's articles at `now`
/// (for movement: the earlier ranking as this curation shows it), `None`
/// when curation changes nothing or cannot be read. Hidden articles are
/// left out, pinned ones go to their places, as [`page`] does.
pub(super) async fn public_order(
    state: &AppState,
    q: &HotQuery,
    now: Timestamp,
) -> Option<Box<PublicOrder<'static>>> {
    let mode = state.config.review.mode;
    let cur = state.curation.current().await.ok()?;
    let pins = cur.pins_for(q, now, mode);
    if pins.is_empty() && !cur.hides_any(now, mode) {
        return None;
    }
    Some(Box::new(move |order: &[ArticleId]| {
        let pinned: HashSet<&ArticleId> = pins.iter().map(|(id, _)| id).collect();
        let natural = order
            .iter()
            .filter(|id| !pinned.contains(id) && cur.visibility(id, now, mode) == Visibility::Shown)
            .cloned();
        let placed = pins.iter().map(|(id, p)| (*p, id.clone()));
        arrange(natural, placed, usize::MAX)
            .into_iter()
            .map(|(id, _)| id)
            .collect()
    }))
}

/// What one read of the store's ranking leaves for the public list.
struct Walked {
    /// Shown articles in ranking order, pinned ones left out.
    natural: Vec<RankedItem>,
    /// The pinned articles the read met, to show with their data.
    pinned_seen: HashMap<ArticleId, RankedItem>,
    /// Never-reviewed articles the public list would have shown, with the
    /// rank each would have had.
    unreviewed: Vec<(RankedItem, usize)>,
}

/// Pins in placing order: (article, 1-based position).
type Pins<'a> = &'a [(ArticleId, usize)];

/// Sorts one read of the ranking: `pins` are the pins in force (left out
/// of the natural order), `placed` those this page places.
fn walk(
    cur: &Curation,
    items: Vec<RankedItem>,
    (pins, placed): (Pins<'_>, Pins<'_>),
    want: usize,
    now: Timestamp,
    mode: crate::config::ReviewMode,
) -> Walked {
    let pinned: HashSet<&ArticleId> = pins.iter().map(|(id, _)| id).collect();
    let mut w = Walked {
        natural: Vec::new(),
        pinned_seen: HashMap::new(),
        unreviewed: Vec::new(),
    };
    for it in items {
        if pinned.contains(&it.id) {
            w.pinned_seen.insert(it.id.clone(), it);
            continue;
        }
        match cur.visibility(&it.id, now, mode) {
            Visibility::Shown => w.natural.push(it),
            Visibility::Hidden => {}
            Visibility::Unreviewed => {
                // Where it would have gone: after the shown ones so far,
                // pushed down by each pin at or above that place.
                let mut rank = w.natural.len() + 1;
                for (_, p) in placed {
                    if *p <= rank {
                        rank += 1;
                    }
                }
                if rank <= want {
                    w.unreviewed.push((it, rank));
                }
            }
        }
    }
    w
}

/// The hot list as `GET /api/hot` serves it, for the webhooks' evaluator
/// ([`crate::webhooks::Webhooks::read_public`]). It holds the state
/// weakly (the state holds the webhooks): once the server is gone it
/// answers unavailable.
pub fn public_ranking(state: &AppState) -> PublicRanking {
    let weak = Arc::downgrade(&state.0);
    Arc::new(move |q: HotQuery, now: Timestamp| {
        let weak = weak.clone();
        Box::pin(async move {
            let Some(shared) = weak.upgrade() else {
                return Err(StoreError::Unavailable("the server stopped".into()));
            };
            let state = AppState(shared);
            page(&state, &q, List::Hot, now)
                .await
                .map(|p| p.page)
                .map_err(|e| match e {
                    ApiError::Unavailable(m) => StoreError::Unavailable(m),
                    e => StoreError::Internal(e.to_string()),
                })
        })
    })
}

/// The articles held for review now, with when each was held, for the
/// webhooks' evaluator ([`crate::webhooks::Webhooks::read_held`]; held
/// weakly, as [`public_ranking`]).
pub fn held_articles(state: &AppState) -> HeldArticles {
    let weak = Arc::downgrade(&state.0);
    Arc::new(move || {
        let weak = weak.clone();
        Box::pin(async move {
            let Some(shared) = weak.upgrade() else {
                return Err(StoreError::Unavailable("the server stopped".into()));
            };
            let curation = AppState(shared).curation.current().await?;
            Ok(curation
                .reviews
                .iter()
                .filter(|(_, r)| r.status == ReviewStatus::Held)
                .map(|(id, r)| (id.as_str().to_string(), r.held_at.unwrap_or(0)))
                .collect())
        })
    })
}

/// Where a curated page starts: a ranking snapshot's cursor carries the
/// public list's offset (the store's offsets differ from it), a
/// `/api/new` cursor the item after which its list goes on.
enum Start {
    Top { offset: usize },
    Snapshot { id: u64, offset: usize },
    After,
}

/// The page `q` asks for of the public list.
pub(super) async fn page(
    state: &AppState,
    q: &HotQuery,
    list: List,
    now: Timestamp,
) -> Result<CuratedPage, ApiError> {
    let mode = state.config.review.mode;
    let cur = state.curation.current().await?;
    let cap = state.config.retention.ranking_cap;
    let start = match (&q.cursor, list) {
        (None, _) => Start::Top { offset: q.offset },
        (Some(c), List::Hot) => {
            let (id, offset) = cursor::parse_snapshot(c, cap)?;
            Start::Snapshot { id, offset }
        }
        (Some(_), List::New) => Start::After,
    };
    let pins = cur.pins_for(q, now, mode);
    // A `/api/new` cursor does not know its place in the list: pins go
    // on the pages that start at the top (and on none after them).
    let placed = match start {
        Start::After => &[][..],
        _ => &pins[..],
    };
    if pins.is_empty() && !cur.hides_any(now, mode) {
        return Ok(CuratedPage::plain(read(state, q, list, now).await?));
    }
    let offset = match start {
        Start::Top { offset } | Start::Snapshot { offset, .. } => offset,
        Start::After => 0,
    };
    let limit = q.limit.min(cap.saturating_sub(offset));
    let want = offset + limit;
    let mut depth = (want + cur.hidden_count(now, mode) + pins.len()).clamp(1, cap.max(1));
    let (store_page, walked, more) = loop {
        let deep = HotQuery {
            offset: 0,
            limit: depth,
            cursor: match start {
                Start::Snapshot { id, .. } => Some(cursor::snapshot(id, 0)),
                _ => q.cursor.clone(),
            },
            ..q.clone()
        };
        let mut p = read(state, &deep, list, now).await?;
        let more = p.items.len() >= depth && depth < cap;
        let items = std::mem::take(&mut p.items);
        let w = walk(&cur, items, (&pins, placed), want, now, mode);
        if w.natural.len() + placed.len() > want || !more {
            break (p, w, more);
        }
        depth = (depth * 2).max(depth + want).min(cap);
    };
    hold(state, q, list, &walked.unreviewed, now).await;
    let Walked {
        natural,
        pinned_seen,
        ..
    } = walked;
    let pin_items = pin_items(state, q, placed, pinned_seen, now).await?;
    let mut public = arrange(natural, pin_items, want + 1);
    let follows = (public.len() > want || more) && want < cap;
    public.truncate(want);
    // A `/api/new` cursor continues after the last item of the store's
    // list up to this page's end (on it, or above it).
    let after = public
        .iter()
        .rev()
        .find(|(_, is_pin)| !is_pin)
        .map(|(it, _)| cursor::newest(it.meta.published_at, &it.id));
    let mut pinned = HashSet::new();
    let mut items = Vec::with_capacity(limit);
    for (i, (mut it, is_pin)) in public.into_iter().enumerate().skip(offset) {
        it.rank = i + 1;
        if is_pin {
            pinned.insert(it.id.clone());
        }
        items.push(it);
    }
    // The next page's: on `/api/hot` the snapshot's at public offset
    // `want`, on `/api/new` after the last item of the store's list.
    let cursor = match (follows, list, start) {
        (false, ..) => None,
        (true, List::New, _) => after,
        (true, List::Hot, Start::Snapshot { id, .. }) => Some(cursor::snapshot(id, want)),
        (true, List::Hot, _) => snapshot_id(state, q, store_page.cursor.as_deref(), now)
            .await?
            .map(|id| cursor::snapshot(id, want)),
    };
    Ok(CuratedPage {
        page: HotPage {
            items,
            generated_at: store_page.generated_at,
            cursor,
        },
        pinned,
    })
}

/// The snapshot a first page's cursor continues: the store's, or, when
/// the store's list fit in what was read (so it gave no cursor) while
/// more public items follow, a new one.
async fn snapshot_id(
    state: &AppState,
    q: &HotQuery,
    given: Option<&str>,
    now: Timestamp,
) -> Result<Option<u64>, ApiError> {
    let cap = state.config.retention.ranking_cap;
    let c = match given {
        Some(c) => Some(c.to_string()),
        None => {
            let first = HotQuery {
                offset: 0,
                limit: 1,
                cursor: None,
                explain: false,
                ..q.clone()
            };
            state.store.hot(&first, now).await?.cursor
        }
    };
    Ok(match c {
        Some(c) => Some(cursor::parse_snapshot(&c, cap)?.0),
        None => None,
    })
}

/// The pinned articles with their data, at their positions: as the read
/// met them, else as [`pinned_item`] finds them; gone ones left out.
async fn pin_items(
    state: &AppState,
    q: &HotQuery,
    placed: Pins<'_>,
    mut seen: HashMap<ArticleId, RankedItem>,
    now: Timestamp,
) -> Result<Vec<(usize, RankedItem)>, ApiError> {
    let mut out = Vec::with_capacity(placed.len());
    for (id, position) in placed {
        let item = match seen.remove(id) {
            Some(it) => Some(it),
            None => pinned_item(state, id, q, now).await?,
        };
        out.extend(item.map(|it| (*position, it)));
    }
    Ok(out)
}

/// A pinned article the read did not meet (deeper, or outside the
/// query's filters): its lifetime counters and its score under the
/// query's model over that model's default range. `None` if it is gone.
async fn pinned_item(
    state: &AppState,
    id: &ArticleId,
    q: &HotQuery,
    now: Timestamp,
) -> Result<Option<RankedItem>, ApiError> {
    let Some(view) = state.store.article(id, now).await? else {
        return Ok(None);
    };
    if view.deleted {
        return Ok(None);
    }
    let score = view
        .scores
        .iter()
        .find(|(m, _)| *m == q.model)
        .map_or(0.0, |(_, s)| *s);
    Ok(Some(RankedItem {
        rank: 0,
        id: view.id,
        score,
        counters: view.lifetime,
        meta: view.meta,
        explain: None,
    }))
}

/// Records each never-reviewed article a public list would have shown as
/// held, with its evidence, in one write, and wakes the webhooks'
/// evaluator, which tells every subscription that asked for `held` (a hold
/// hides the article from every public list) from the recorded holds
/// ([`held_articles`]). A failure is logged: the articles stay hidden
/// either way, and the next answer tries again.
async fn hold(
    state: &AppState,
    q: &HotQuery,
    list: List,
    found: &[(RankedItem, usize)],
    now: Timestamp,
) {
    let found = found
        .iter()
        .map(|(it, rank)| (it.id.clone(), evidence(q, list, it, *rank, now)))
        .collect();
    let held = match state.curation.hold(found, now).await {
        Ok(held) => held,
        Err(e) => {
            tracing::warn!(error = %e, "curation: could not record holds");
            return;
        }
    };
    if let Some(w) = state.webhooks.get().filter(|_| !held.is_empty()) {
        w.held_changed();
    }
}

/// Why an article was held: when, in which query, at which rank, with
/// which counters.
fn evidence(q: &HotQuery, list: List, it: &RankedItem, rank: usize, now: Timestamp) -> Value {
    let c = &it.counters;
    json!({
        "at": now,
        "list": match list { List::Hot => "hot", List::New => "new" },
        "query": {
            "model": q.model.as_str(), "range": q.range.to_string(),
            "category": q.category, "kind": q.kind, "group": q.group,
        },
        "rank": rank,
        "score": it.score,
        "counters": {
            "pv": c.pv, "uv": c.uv, "likes": c.likes, "comments": c.comments,
            "favorites": c.favorites, "shares": c.shares,
        },
        "title": it.meta.title,
    })
}
