//! What one node remembers between queries (articles' metadata and window
//! counters), the reads that fill it, and the change logs' news that
//! invalidates it.

use std::collections::HashMap;
use std::sync::Arc;

use super::{
    MetaRec, RedisStore, bad_reply, calls, changes, counters_from, dump, parse_meta, store_err,
    window_plan,
};
use crate::model::{ArticleId, Counters, RangeSpec, Timestamp, hour_of};
use crate::store::StoreError;

/// What one node remembers between queries. An article's entry is valid
/// while no entry of its shard's change log newer than that shard's `seq`
/// names it.
#[derive(Default)]
pub(super) struct NodeCache {
    /// The change seq of each shard this node has taken in.
    pub(super) seq: Seqs,
    pub(super) articles: HashMap<ArticleId, CachedArticle>,
}

/// One change seq per article shard, in shard order.
pub(crate) type Seqs = Vec<i64>;

#[derive(Default, Clone)]
pub(super) struct CachedArticle {
    meta: Option<Option<Arc<MetaRec>>>,
    /// (range, end hour, counters)
    windows: Vec<(RangeSpec, i64, Counters)>,
}

/// Entries past this many per node are dropped wholesale.
const CACHE_MAX: usize = 200_000;

/// Most articles one `window.lua` call reads: each script call has a
/// fixed cost in Redis and in the node, and a rebuild reads every article
/// of its ranking (100 k calls for 100 k articles, before).
const WINDOW_CALL: usize = 64;

/// The hours and the days of a window whose activity sets hold each
/// article: which of the window's buckets it has.
#[derive(Default)]
pub(crate) struct ActiveSets {
    pub(crate) hours: HashMap<ArticleId, Vec<i64>>,
    pub(crate) days: HashMap<ArticleId, Vec<i64>>,
}

impl ActiveSets {
    /// Whether `id` is in any of the sets read.
    pub(super) fn covers(&self, id: &ArticleId) -> bool {
        self.hours.contains_key(id) || self.days.contains_key(id)
    }

    /// `id`'s hours and days.
    pub(super) fn spans(&self, id: &ArticleId) -> (&[i64], &[i64]) {
        let none: &[i64] = &[];
        (
            self.hours.get(id).map_or(none, Vec::as_slice),
            self.days.get(id).map_or(none, Vec::as_slice),
        )
    }
}

impl RedisStore {
    /// Metadata of many articles, from this node's cache when valid.
    pub(crate) async fn metas(
        &self,
        ids: &[ArticleId],
        seq: &[i64],
    ) -> Result<Vec<Option<Arc<MetaRec>>>, StoreError> {
        let mut out: Vec<Option<Option<Arc<MetaRec>>>> = {
            let c = self.cache.lock();
            ids.iter()
                .map(|id| c.articles.get(id).and_then(|a| a.meta.clone()))
                .collect()
        };
        let missing: Vec<usize> = (0..ids.len()).filter(|&i| out[i].is_none()).collect();
        for missing in missing.chunks(calls::CHUNK) {
            let mut pipe = redis::pipe();
            for &i in missing {
                pipe.hgetall(self.keys.meta(&ids[i]));
            }
            let got: Vec<HashMap<String, String>> =
                self.query_pipe(&pipe).await.map_err(store_err)?;
            let mut c = self.cache.lock();
            let fill = c.seq == seq && c.articles.len() < CACHE_MAX;
            for (&i, fields) in missing.iter().zip(got) {
                let m = parse_meta(&fields).map(Arc::new);
                if fill {
                    c.articles.entry(ids[i].clone()).or_default().meta = Some(m.clone());
                }
                out[i] = Some(m);
            }
        }
        Ok(out.into_iter().map(Option::flatten).collect())
    }

    /// Counters of many articles over `range` at `now`, from this node's
    /// cache when valid, else from Redis: per chunk of articles, one
    /// pipelined read of the window's activity sets, then one of the
    /// buckets they name.
    pub(crate) async fn windows(
        &self,
        ids: &[ArticleId],
        range: RangeSpec,
        now: Timestamp,
        seq: &[i64],
    ) -> Result<Vec<Counters>, StoreError> {
        self.windows_known(ids, range, now, seq, None).await
    }

    /// [`Self::windows`], with the window's activity sets already read
    /// for the articles `known` covers (a rebuild reads them whole).
    pub(crate) async fn windows_known(
        &self,
        ids: &[ArticleId],
        range: RangeSpec,
        now: Timestamp,
        seq: &[i64],
        known: Option<&ActiveSets>,
    ) -> Result<Vec<Counters>, StoreError> {
        let end_hour = hour_of(now);
        let mut out: Vec<Option<Counters>> = {
            let c = self.cache.lock();
            ids.iter()
                .map(|id| {
                    c.articles.get(id).and_then(|a| {
                        a.windows
                            .iter()
                            .find(|(r, h, _)| *r == range && *h == end_hour)
                            .map(|(_, _, w)| *w)
                    })
                })
                .collect()
        };
        let missing: Vec<usize> = (0..ids.len()).filter(|&i| out[i].is_none()).collect();
        let plan = window_plan(range, now, self.opts.hourly_days);
        for missing in missing.chunks(calls::CHUNK) {
            let wanted: Vec<ArticleId> = missing.iter().map(|&i| ids[i].clone()).collect();
            self.restore_if_evicted(&wanted, now).await?;
            // Which of the window's buckets each article has: those of the
            // activity sets that hold it (ingest writes both in one call),
            // so an article active in 2 hours of 72 reads 2 buckets.
            let active = match &plan {
                None => None,
                Some(plan) => {
                    let unread: Vec<ArticleId> = (wanted.iter())
                        .filter(|id| !known.is_some_and(|k| k.covers(id)))
                        .cloned()
                        .collect();
                    Some(
                        dump::active_over(self, &unread, plan.hours.clone(), plan.days.clone())
                            .await?,
                    )
                }
            };
            let spans = |id: &ArticleId| match known.filter(|k| k.covers(id)) {
                Some(k) => k.spans(id),
                None => active.as_ref().map_or((&[][..], &[][..]), |a| a.spans(id)),
            };
            // Articles by slot (their shard's, when the site spans slots),
            // at most [`WINDOW_CALL`] to a `window.lua` call.
            let mut order = missing.to_vec();
            if self.keys.spans_slots() {
                order.sort_by_key(|&i| self.keys.shard_index(&ids[i]));
            }
            let got: Vec<Vec<i64>> = self
                .eval_pipe(|p| {
                    let mut at = 0;
                    while at < order.len() {
                        let k = self.keys.shard_index(&ids[order[at]]);
                        let len = order[at..]
                            .iter()
                            .take(WINDOW_CALL)
                            .take_while(|&&i| self.keys.shard_index(&ids[i]) == k)
                            .count();
                        let call: Vec<&ArticleId> =
                            order[at..at + len].iter().map(|&i| &ids[i]).collect();
                        at += len;
                        let spans = active
                            .as_ref()
                            .map(|_| call.iter().map(|id| spans(id)).collect());
                        self.queue_window(p, &call, spans);
                    }
                })
                .await?;
            let flat: Vec<i64> = got.concat();
            if flat.len() != 10 * order.len() {
                return Err(bad_reply("window"));
            }
            let mut c = self.cache.lock();
            let fill = c.seq == seq && c.articles.len() < CACHE_MAX;
            for (&i, v) in order.iter().zip(flat.chunks(10)) {
                let w = counters_from(v);
                if fill {
                    let a = c.articles.entry(ids[i].clone()).or_default();
                    a.windows.retain(|(r, _, _)| *r != range);
                    a.windows.push((range, end_hour, w));
                }
                out[i] = Some(w);
            }
        }
        Ok(out.into_iter().map(Option::unwrap_or_default).collect())
    }

    /// Counted views per hour over `hours` of each of `ids`, oldest first
    /// (0 for an hour without a bucket): what a rising score reads. Per
    /// chunk of articles, one pipelined read of the hours' activity sets
    /// ([`dump::active_over`]), then one of the `pv` of the buckets they
    /// name. Every hour must still have its bucket (`window_plan` hourly):
    /// the API keeps `window + baseline` within it.
    pub(crate) async fn pv_series(
        &self,
        ids: &[ArticleId],
        hours: std::ops::RangeInclusive<i64>,
        now: Timestamp,
    ) -> Result<Vec<Vec<u64>>, StoreError> {
        let first = *hours.start();
        let len = hours.clone().count();
        let mut out = Vec::with_capacity(ids.len());
        for part in ids.chunks(calls::CHUNK) {
            self.restore_if_evicted(part, now).await?;
            #[allow(clippy::reversed_empty_ranges)]
            let no_days = 1..=0;
            let active = dump::active_over(self, part, hours.clone(), no_days).await?;
            let mut pipe = redis::pipe();
            let mut slots = Vec::new();
            for (i, id) in part.iter().enumerate() {
                for &h in active.spans(id).0 {
                    pipe.hget(self.keys.bucket_h(id, h), "pv");
                    slots.push((i, (h - first) as usize));
                }
            }
            let got: Vec<Option<i64>> = if slots.is_empty() {
                Vec::new()
            } else {
                self.query_pipe(&pipe).await.map_err(store_err)?
            };
            let mut series = vec![vec![0u64; len]; part.len()];
            for ((i, at), pv) in slots.into_iter().zip(got) {
                series[i][at] = pv.unwrap_or(0).max(0) as u64;
            }
            out.extend(series);
        }
        Ok(out)
    }

    /// Takes in what every shard's change log says changed: drops cached
    /// state of those articles (all of it if this node fell behind a log).
    pub(super) fn absorb(&self, shards: &[changes::Synced]) {
        let mut c = self.cache.lock();
        let behind = shards.iter().any(|s| {
            let mine = c.seq.get(s.shard as usize).copied().unwrap_or(0);
            s.truncated || mine < s.floor || s.seq < mine
        });
        if behind || c.articles.len() >= CACHE_MAX || c.seq.len() != shards.len() {
            c.articles.clear();
        } else {
            for s in shards {
                let since = c.seq[s.shard as usize];
                for (id, at) in &s.changed {
                    if *at > since {
                        c.articles.remove(id);
                    }
                }
            }
        }
        c.seq = shards.iter().map(|s| s.seq).collect();
    }

    /// Every shard's current change seq, with this node's cache brought up
    /// to them.
    pub(crate) async fn sync_node(&self) -> Result<Seqs, StoreError> {
        let s = self.sync(None).await?;
        Ok(s.iter().map(|s| s.seq).collect())
    }

    /// One `window.lua` call onto `p` for `ids`: over the window's
    /// buckets each article has (`spans`: per article, the hours and days
    /// whose activity sets hold it), or, without a window, over their
    /// lifetimes.
    pub(crate) fn queue_window(
        &self,
        p: &mut redis::Pipeline,
        ids: &[&ArticleId],
        spans: Option<Vec<(&[i64], &[i64])>>,
    ) {
        let c = p.cmd("EVALSHA").arg(self.scripts.window.get_hash());
        let Some(spans) = spans else {
            c.arg(3 * ids.len());
            for id in ids {
                c.arg(self.keys.views(id))
                    .arg(self.keys.counters(id))
                    .arg(self.keys.uv(id));
            }
            c.arg("a").arg(ids.len());
            return;
        };
        c.arg(
            spans
                .iter()
                .map(|(h, d)| 2 * (h.len() + d.len()) + 1)
                .sum::<usize>(),
        );
        for (id, &(hours, days)) in ids.iter().zip(&spans) {
            for &h in hours {
                c.arg(self.keys.bucket_h(id, h));
            }
            for &d in days {
                c.arg(self.keys.bucket_d(id, d));
            }
            for &h in hours {
                c.arg(self.keys.uv_h(id, h));
            }
            for &d in days {
                c.arg(self.keys.uv_d(id, d));
            }
            c.arg(self.keys.counters(id));
        }
        c.arg("w").arg(ids.len());
        for (h, d) in &spans {
            c.arg(h.len() + d.len());
        }
    }
}
