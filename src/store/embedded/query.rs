//! Answering queries under the state lock: a `/api/hot` page over a built
//! ranking (first pages and cursor pages), and a `/api/new` page.

use crate::model::{
    ArticleId, HotPage, HotQuery, ModelKind, RankedItem, Scale, Timestamp, Trend, day_of,
};
use crate::rank::pages::{self, First};
use crate::score::Scaled;
use crate::store::{Pick, Picker, StoreError, cursor};

use super::inner::Inner;
use super::newest;
use super::ranking::RankKey;
use super::state::article::Idx;
use super::store::EmbeddedStore;

impl EmbeddedStore {
    /// The page of a `/api/hot` query over a built ranking, under the
    /// state lock.
    pub(super) fn hot_page(
        &self,
        inner: &mut Inner,
        q: &HotQuery,
        key: &RankKey,
        now: Timestamp,
    ) -> Result<HotPage, StoreError> {
        let models = &self.settings.models;
        let cap = self.settings.ranking_cap;
        let (snap_id, offset) = match &q.cursor {
            None => {
                let walk = pages::first_walk(q, cap);
                let (items, at) =
                    inner
                        .rankings
                        .top(key, walk, &mut inner.data, models, now, inner.newest_event);
                match pages::first(key.undated(), q, cap, items, at) {
                    First::Page(items) => {
                        return Ok(HotPage {
                            items: inner.page_items(&items, q.offset + 1, q, models),
                            generated_at: at,
                            cursor: None,
                        });
                    }
                    First::Snapshot(snap) => (inner.remember_cursor(snap, now), q.offset),
                }
            }
            Some(c) => {
                let (id, off) = cursor::parse_snapshot(c, cap)?;
                let snap = inner.cursors.get(&id).ok_or_else(|| {
                    StoreError::InvalidCursor("cursor expired; start from the first page".into())
                })?;
                if !snap.snap.fits(&key.undated(), q.per_author) {
                    return Err(StoreError::InvalidCursor(
                        "cursor belongs to a query with other parameters".into(),
                    ));
                }
                (id, off)
            }
        };
        let mut c = inner.cursors.remove(&snap_id).expect("just checked");
        c.touched = now;
        if let Some((walk, need)) = c.snap.extension(offset, q.limit, cap) {
            let (fresh, _) =
                inner
                    .rankings
                    .top(key, walk, &mut inner.data, models, now, inner.newest_event);
            c.snap.extend(fresh, need, cap);
        }
        let (items, more) = c.snap.page(offset, q.limit, cap);
        let page = HotPage {
            items: inner.page_items(items, offset + 1, q, models),
            generated_at: c.snap.generated_at,
            cursor: more.then(|| cursor::snapshot(snap_id, offset + q.limit)),
        };
        inner.cursors.insert(snap_id, c);
        Ok(page)
    }

    /// The page of a `GET /api/new` query: live articles newest first,
    /// walked in the index of the filter's values.
    pub(super) fn newest_page(&self, q: &HotQuery, now: Timestamp) -> Result<HotPage, StoreError> {
        let models = &self.settings.models;
        let key = RankKey::of(q, now);
        let mut inner = self.inner.lock();
        let inner = &mut *inner;
        let start: Option<(std::cmp::Reverse<Timestamp>, ArticleId)> = match &q.cursor {
            None => None,
            Some(c) => {
                let (p, id) = cursor::parse_newest(c)?;
                Some((std::cmp::Reverse(p), id))
            }
        };
        let skip = if start.is_some() { 0 } else { q.offset };
        let mut picked: Vec<Idx> = Vec::new();
        let mut picker = Picker::new(q.per_author, skip, q.limit);
        // Only articles with one of the filter's values: a rare filter
        // costs no more than a common one.
        let index = inner.newest.candidates(&key.filter);
        let iter: Box<dyn Iterator<Item = &newest::Key>> = match &start {
            Some(s) => Box::new(index.range((
                std::ops::Bound::Excluded(s.clone()),
                std::ops::Bound::Unbounded,
            ))),
            None => Box::new(index.iter()),
        };
        let mut more = false;
        for (_, id) in iter {
            inner.new_visited += 1;
            let idx = inner.data.lookup(id).expect("indexed");
            let a = inner.data.article(idx);
            if !key.filter.matches(&a.meta.get()) {
                continue;
            }
            match picker.offer(a.meta.author()) {
                Pick::Skip => {}
                Pick::Take => picked.push(idx),
                Pick::Full => {
                    more = true;
                    break;
                }
            }
        }
        let items: Vec<RankedItem> = picked
            .iter()
            .enumerate()
            .map(|(i, &idx)| {
                let counters = inner.data.window(idx, q.range, now);
                let scale = (q.params.scale == Scale::Category)
                    .then(|| inner.data.category_scale(idx, day_of(now), now));
                let a = inner.data.article(idx);
                let meta = a.meta.get().into_owned();
                let trend = (q.model == ModelKind::Rising)
                    .then(|| trend_of(&a.pv_series(q.params.rising.hours(now)), q));
                let (p, t) = (&q.params, trend.as_ref());
                let score = models
                    .score(q.model, p, &counters, &meta, t, now)
                    .scaled(scale);
                RankedItem {
                    rank: skip + i + 1,
                    id: a.id.clone(),
                    score,
                    counters,
                    explain: (q.explain).then(|| {
                        models
                            .explain(q.model, p, &counters, &meta, t, now)
                            .scaled(scale)
                    }),
                    meta,
                }
            })
            .collect();
        let cursor = match (more, items.last()) {
            (true, Some(last)) => Some(cursor::newest(last.meta.published_at, &last.id)),
            _ => None,
        };
        Ok(HotPage {
            items,
            generated_at: now,
            cursor,
        })
    }
}

/// The trend of `q`'s rising parameters in an article's series.
fn trend_of(series: &[u64], q: &HotQuery) -> Trend {
    crate::score::rising::evaluate(series, q.params.rising).trend
}
