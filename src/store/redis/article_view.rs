//! One article as `GET /api/articles/{id}` shows it: its metadata,
//! lifetime counters, quarantine and each model's score.

use redis::Value;

use super::{RedisStore, bad_reply, counters_from, v_i64};
use crate::model::{
    ArticleId, ArticleView, Counters, ModelParams, Quarantine, RangeSpec, Timestamp,
};
use crate::score::{ModelKind, rising};
use crate::store::StoreError;

/// The range each model's score in `GET /api/articles/{id}` uses.
pub(super) fn default_range(m: ModelKind) -> RangeSpec {
    m.default_range()
}

impl RedisStore {
    /// Lifetime counters and quarantine of one article.
    /// `GET /api/articles/{id}` from hotrank's own keys.
    pub(super) async fn article_own(
        &self,
        id: &ArticleId,
        now: Timestamp,
    ) -> Result<Option<ArticleView>, StoreError> {
        let seq = self.sync_node().await?;
        let Some(Some(m)) = self.metas(std::slice::from_ref(id), &seq).await?.pop() else {
            return Ok(None);
        };
        if m.deleted {
            return Ok(None);
        }
        self.restore_if_evicted(std::slice::from_ref(id), now)
            .await?;
        let (lifetime, quarantined) = self.lifetime(id).await?;
        let mut scores = Vec::new();
        for model in ModelKind::ALL {
            let range = default_range(model);
            let c = self
                .windows(std::slice::from_ref(id), range, now, &seq)
                .await?;
            let c = c.first().copied().unwrap_or_default();
            let p = ModelParams::default();
            let trend = match model {
                ModelKind::Rising => {
                    let series = self.pv_series(std::slice::from_ref(id), p.rising.hours(now), now);
                    let series = series.await?.pop().unwrap_or_default();
                    Some(rising::evaluate(&series, p.rising).trend)
                }
                _ => None,
            };
            let models = &self.settings.models;
            scores.push((
                model,
                models.score(model, &p, &c, &m.meta, trend.as_ref(), now),
            ));
        }
        Ok(Some(ArticleView {
            id: id.clone(),
            meta: m.meta.clone(),
            lifetime,
            quarantined,
            deleted: false,
            scores,
        }))
    }

    pub(super) async fn lifetime(
        &self,
        id: &ArticleId,
    ) -> Result<(Counters, Quarantine), StoreError> {
        let got: Vec<Value> = self
            .eval_pipe(|p| {
                self.queue_window(p, &[id], None);
                p.cmd("HMGET")
                    .arg(self.keys.counters(id))
                    .arg(&["q_dup", "q_rl", "q_bot", "q_rep"]);
            })
            .await?;
        let [Value::Array(c), Value::Array(q)] = got.as_slice() else {
            return Err(bad_reply("lifetime"));
        };
        let c: Vec<i64> = c.iter().map(|v| v_i64(v).unwrap_or(0)).collect();
        let mut quarantine = Quarantine::default();
        for (i, v) in q.iter().enumerate().take(4) {
            quarantine.0[i] = v_i64(v).unwrap_or(0).max(0) as u64;
        }
        Ok((counters_from(&c), quarantine))
    }
}
