//! A ranking as it stood at a time in the past ([`crate::store::Store::ranked_at`]):
//! every article scored at that time from its hourly buckets up to that
//! hour, in short holds of the state lock, so that ingest never waits
//! long for it.

use std::time::Instant;

use crate::model::{ArticleId, HotQuery, ModelKind, RangeSpec, Scale, Timestamp, hour_of};
use crate::rank::pages::SnapItem;
use crate::rank::{Filter, Walk};
use crate::score::Scaled;

use super::inner::record_hold;
use super::state::article::Idx;
use super::store::EmbeddedStore;

/// How long one hold of the lock scores articles before letting others in.
const HOLD: std::time::Duration = std::time::Duration::from_millis(2);

impl EmbeddedStore {
    /// [`crate::store::Store::ranked_at`].
    pub(super) async fn ranked_at_scan(
        &self,
        q: &HotQuery,
        at: Timestamp,
        depth: usize,
    ) -> Vec<ArticleId> {
        let RangeSpec::Hours(hours) = q.ranked_range() else {
            return Vec::new();
        };
        if q.model.lists_every_live_article() {
            return Vec::new();
        }
        let filter = Filter::of(q);
        let mut walk: Walk<SnapItem> = Walk::new(depth, q.per_author);
        let mut next: Idx = 0;
        while !self.score_past_chunk(q, &filter, hours, at, &mut walk, &mut next) {
            tokio::task::yield_now().await;
        }
        walk.finish().into_iter().map(|it| it.id).collect()
    }

    /// Scores articles from `*next` on for one short hold of the lock;
    /// `true` once every article was looked at.
    fn score_past_chunk(
        &self,
        q: &HotQuery,
        filter: &Filter,
        hours: u32,
        at: Timestamp,
        walk: &mut Walk<SnapItem>,
        next: &mut Idx,
    ) -> bool {
        let models = &self.settings.models;
        let end_hour = hour_of(at);
        let scaled = q.params.scale == Scale::Category;
        let inner = self.inner.lock();
        // Timed from when the lock is held (not from when it was asked
        // for), and at least one article a hold: a hold that started late
        // still moves the scan on instead of taking the lock for nothing.
        let held = Instant::now();
        let data = &inner.data;
        let len = data.articles.len();
        let first = *next;
        while (*next as usize) < len && (*next == first || held.elapsed() < HOLD) {
            let a = data.article(*next);
            *next += 1;
            let meta = a.meta.get();
            if a.deleted || !filter.matches(&meta) {
                continue;
            }
            let c = a.window_uncached(hours, end_hour);
            if !c.is_active() {
                continue;
            }
            // Rising reads its views per hour up to `at`.
            let series =
                (q.model == ModelKind::Rising).then(|| a.pv_series(q.params.rising.hours(at)));
            let Some(st) = models.standing(q.model, &q.params, &c, &meta, series.as_deref(), at)
            else {
                continue;
            };
            // Scaled by its category's events up to `at` (a past hour
            // mark: the hourly counts hold it exactly).
            let scale = scaled.then(|| data.category_scale_at(*next - 1, at));
            let st = st.scaled(scale);
            let score = st.score;
            // The walk keeps what it is offered: offer only what may
            // still enter the first `depth` (a full scan sees them all).
            if !walk.wants(score, &a.id) {
                continue;
            }
            let item = SnapItem {
                id: a.id.clone(),
                score,
                counters: c,
                author: meta.author.clone(),
                at,
                trend: st.trend,
                scale,
            };
            walk.offer(item, None);
        }
        let done = *next as usize >= len;
        drop(inner);
        record_hold("ranked_at", held);
        done
    }
}
