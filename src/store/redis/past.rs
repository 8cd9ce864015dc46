//! A ranking as it stood at a time in the past
//! ([`crate::store::Store::ranked_at`]): every article active in the
//! window ending at that hour, read from the activity sets, scored at
//! that time from its hourly buckets, in chunks; every shard, one walk.

use crate::model::{ArticleId, HotQuery, RangeSpec, Timestamp};
use crate::rank::Walk;
use crate::rank::pages::SnapItem;
use crate::store::StoreError;

use super::categories::Scales;
use super::{ActiveSets, RedisStore, calls};

impl RedisStore {
    /// [`crate::store::Store::ranked_at`].
    pub(super) async fn ranked_at_scan(
        &self,
        q: &HotQuery,
        at: Timestamp,
        depth: usize,
    ) -> Result<Vec<ArticleId>, StoreError> {
        let range = q.ranked_range();
        if !matches!(range, RangeSpec::Hours(_)) || q.model.lists_every_live_article() {
            return Ok(Vec::new());
        }
        let seq = self.sync_node().await?;
        // Scaled by category: the window of `at`'s own day, up to `at` (a
        // past hour mark: the hourly counts hold it exactly).
        let mut scales = Scales::new(crate::rank::RankingId::of(q, at).day);
        let mut walk: Walk<SnapItem> = Walk::new(depth, q.per_author);
        for sk in self.keys.all_shards() {
            let mut active = ActiveSets::default();
            let ids = self.candidates(&sk, range, at, &mut active).await?;
            for chunk in ids.chunks(calls::CHUNK) {
                let scored = self
                    .exact_many(chunk, q, at, &mut scales, &seq, Some(&active))
                    .await?;
                // The walk keeps what it is offered: only what may still
                // enter the first `depth` (a full scan sees them all).
                for s in scored.into_iter().flatten() {
                    if walk.wants(s.score, &s.id) {
                        walk.offer(s.listed(at), None);
                    }
                }
            }
        }
        Ok(walk.finish().into_iter().map(|it| it.id).collect())
    }
}
