//! `GET /api/new`: the newest articles first, a page at a time, merged
//! from every shard's `articles:new` (and, in seed layout, the site's
//! `time:`), or with a filter from `articles:new:by`, the range of the
//! filter value fewest articles have (facets.lua): a page reads about a
//! page of entries however rare the value.

use std::sync::Arc;

use super::categories::Scales;
use super::{MetaRec, RedisStore, store_err};
use crate::model::{
    ArticleId, HotPage, HotQuery, ModelKind, RankedItem, Scale, Timestamp, Trend, day_of,
};
use crate::rank::Filter;
use crate::score::{Scaled, rising};
use crate::store::{Pick, Picker, StoreError, cursor};

/// One shard's `articles:new` (or, in seed layout, the site's `time:`) as
/// a feed of the newest list's merge: the entries read and not yet merged,
/// in list order, and where the next read starts (`None`: the shard has no
/// more). Entries are at the whole second of their score (`time:` holds
/// the site's `time.time()`, with a fraction), and a read ends at a whole
/// second.
struct Feed {
    key: String,
    /// `time:`: members are `article:<id>`.
    seed: bool,
    upper: Option<String>,
    /// Over `articles:new:by`: the prefix of the filter value's members,
    /// and `upper` is where the next ZRANGEBYLEX starts.
    lex: Option<String>,
    buf: std::collections::VecDeque<(i64, ArticleId)>,
}

/// The member of `articles:new:by` that marks it filled for the articles
/// written before it existed ([`RedisStore::fill_facets`]): `~` sorts
/// after every value's range.
const FILLED: &str = "~filled";

/// `articles:new:by` (facets.lua) stores `NEWEST_BY_FROM - publishedAt`
/// in 13 digits, so that newer articles sort first.
const NEWEST_BY_FROM: i64 = 9_999_999_999_999;

fn facet_at(published: i64) -> String {
    format!("{:013}", NEWEST_BY_FROM - published)
}

/// The prefixes of `articles:new:by` members for these filter values
/// (facets.lua): `c`/`k`/`g`, the value's byte length, `:`, the value.
fn facet_prefixes(category: Option<&str>, kind: Option<&str>, groups: &[String]) -> Vec<String> {
    let one = |dim: char, v: &str| format!("{dim}{}:{v}", v.len());
    (category.map(|c| one('c', c)).into_iter())
        .chain(kind.map(|k| one('k', k)))
        .chain(groups.iter().map(|g| one('g', g)))
        .collect()
}

/// The `articles:new:by` members of live article `id` (facets.lua
/// `facets_of`; dumps restore them).
pub(super) fn facet_members(meta: &crate::model::ArticleMeta, id: &ArticleId) -> Vec<String> {
    let at = facet_at(meta.published_at);
    facet_prefixes(meta.category.as_deref(), meta.kind.as_deref(), &meta.groups)
        .into_iter()
        .map(|p| format!("{p}{at}{id}"))
        .collect()
}

/// The newest list's order: publication time descending, then id.
fn newest_order(a: &(i64, ArticleId), b: &(i64, ArticleId)) -> std::cmp::Ordering {
    b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1))
}

impl RedisStore {
    /// Entries `GET /api/new` pages looked at so far (metadata read): a
    /// page of `limit` looks at about `offset + limit` of its filter
    /// value's entries however rare the value (tests of its cost).
    pub fn new_visited(&self) -> u64 {
        self.new_visited.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(super) async fn newest_page(
        &self,
        q: &HotQuery,
        now: Timestamp,
    ) -> Result<HotPage, StoreError> {
        let start: Option<(i64, ArticleId)> = match &q.cursor {
            None => None,
            Some(c) => {
                let (p, id) = cursor::parse_newest(c)?;
                Some((p, id))
            }
        };
        let seq = self.sync_node().await?;
        let skip = if start.is_some() { 0 } else { q.offset };
        // Scores below the cursor's second's end: its whole second.
        let upper = match &start {
            Some((p, _)) => format!("({}", p.saturating_add(1)),
            None => "+inf".to_string(),
        };
        // A merge of every shard's `articles:new` in list order, a batch
        // of about a page (at most 256) entries at a time. With a filter,
        // of every shard's range of `articles:new:by` for the filter value
        // fewest articles have (facets.lua): all of them match it, so a
        // page reads about a page of entries however rare the value.
        let chunk = (skip + q.limit + 1).clamp(16, 256);
        let filter = Filter::of(q);
        let prefixes = facet_prefixes(
            filter.category.as_deref(),
            filter.kind.as_deref(),
            filter.group.as_slice(),
        );
        let lex = match prefixes.is_empty() {
            true => None,
            false => match self.fill_facets().await?.smallest_facet(prefixes).await? {
                Some(p) => Some(p),
                None => {
                    return Ok(HotPage {
                        items: Vec::new(),
                        generated_at: now,
                        cursor: None,
                    });
                }
            },
        };
        // Seed layout: the site's `time:` too, unless a filter reads
        // `articles:new:by` (an article only the site posted has no
        // category, kind or group: no filter matches it).
        let seed_feed = self.seed_layout() && lex.is_none();
        let mut feeds = self.feeds(lex.as_deref(), start.as_ref(), &upper, seed_feed);
        let picker = Picker::new(q.per_author, skip, q.limit);
        let (picked, more) = self
            .pick_newest(
                &mut feeds,
                picker,
                &filter,
                chunk,
                start.as_ref(),
                &seq,
                seed_feed,
            )
            .await?;
        let items = self.newest_items(picked, q, skip, now, &seq).await?;
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

    /// The feeds of the newest list's merge: every shard's `articles:new`
    /// from `upper`, or with a filter (`lex`, the prefix of the value's
    /// members) its `articles:new:by` from the cursor `start`; with
    /// `seed_feed`, the site's `time:` too.
    fn feeds(
        &self,
        lex: Option<&str>,
        start: Option<&(i64, ArticleId)>,
        upper: &str,
        seed_feed: bool,
    ) -> Vec<Feed> {
        let mut feeds: Vec<Feed> = self
            .keys
            .all_shards()
            .iter()
            .map(|sk| match lex {
                None => Feed {
                    key: sk.newest(),
                    seed: false,
                    upper: Some(upper.to_string()),
                    lex: None,
                    buf: Default::default(),
                },
                Some(prefix) => Feed {
                    key: sk.newest_by(),
                    seed: false,
                    upper: Some(match start {
                        Some((p, id)) => format!("({prefix}{}{id}", facet_at(*p)),
                        None => format!("[{prefix}"),
                    }),
                    lex: Some(prefix.to_string()),
                    buf: Default::default(),
                },
            })
            .collect();
        if seed_feed {
            feeds.push(Feed {
                key: self.keys.vote_time(),
                seed: true,
                upper: Some(upper.to_string()),
                lex: None,
                buf: Default::default(),
            });
        }
        feeds
    }

    /// Merges `feeds` a batch of about `chunk` entries at a time and offers
    /// each live article that matches `filter` to `picker`: the articles
    /// taken (with, from `time:`, the site's votes), and whether more
    /// follow.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    async fn pick_newest(
        &self,
        feeds: &mut [Feed],
        mut picker: Picker,
        filter: &Filter,
        chunk: usize,
        start: Option<&(i64, ArticleId)>,
        seq: &[i64],
        seed_feed: bool,
    ) -> Result<(Vec<(ArticleId, Arc<MetaRec>, Option<u64>)>, bool), StoreError> {
        let mut picked: Vec<(ArticleId, Arc<MetaRec>, Option<u64>)> = Vec::new();
        let mut more = false;
        'outer: loop {
            self.refill(feeds, chunk, start).await?;
            // (id, and for an entry of `time:` its second)
            let mut batch: Vec<(ArticleId, Option<i64>)> = Vec::new();
            // Merge while every feed that has more holds an entry.
            while batch.len() < chunk
                && !feeds.iter().any(|f| f.buf.is_empty() && f.upper.is_some())
            {
                let Some(f) = feeds
                    .iter_mut()
                    .filter(|f| !f.buf.is_empty())
                    .min_by(|a, b| newest_order(&a.buf[0], &b.buf[0]))
                else {
                    break;
                };
                let seed = f.seed;
                batch.extend(f.buf.pop_front().map(|e| (e.1, seed.then_some(e.0))));
            }
            if batch.is_empty() {
                if feeds.iter().all(|f| f.upper.is_none() && f.buf.is_empty()) {
                    break;
                }
                continue;
            }
            (self.new_visited).fetch_add(batch.len() as u64, std::sync::atomic::Ordering::Relaxed);
            let ids: Vec<ArticleId> = batch.iter().map(|b| b.0.clone()).collect();
            let metas = self.metas(&ids, seq).await?;
            let metas = if seed_feed {
                self.seed_newest(&batch, metas).await?
            } else {
                metas.into_iter().map(|m| (m, None)).collect()
            };
            for (id, (m, votes)) in ids.into_iter().zip(metas) {
                let Some(m) = m else { continue };
                if m.deleted || !filter.matches(&m.meta) {
                    continue;
                }
                match picker.offer(m.meta.author.as_deref()) {
                    Pick::Skip => {}
                    Pick::Take => picked.push((id, m, votes)),
                    Pick::Full => {
                        more = true;
                        break 'outer;
                    }
                }
            }
        }
        Ok((picked, more))
    }

    /// The ranked items of the articles a page took, scored at `now`.
    async fn newest_items(
        &self,
        picked: Vec<(ArticleId, Arc<MetaRec>, Option<u64>)>,
        q: &HotQuery,
        skip: usize,
        now: Timestamp,
        seq: &[i64],
    ) -> Result<Vec<RankedItem>, StoreError> {
        let ids: Vec<ArticleId> = picked.iter().map(|p| p.0.clone()).collect();
        let windows = self.windows(&ids, q.range, now, seq).await?;
        let trends: Vec<Option<Trend>> = if q.model == ModelKind::Rising {
            let spec = q.params.rising;
            let series = self.pv_series(&ids, spec.hours(now), now).await?;
            (series.iter())
                .map(|s| Some(rising::evaluate(s, spec).trend))
                .collect()
        } else {
            vec![None; ids.len()]
        };
        // Scaled by category: the window of `now`'s day, up to `now`.
        let day = (q.params.scale == Scale::Category).then(|| day_of(now));
        let mut scales = Scales::new(day);
        let categories = picked.iter().map(|p| p.1.meta.category.as_deref());
        self.read_scales(&mut scales, categories, now).await?;
        Ok(picked
            .into_iter()
            .zip(windows)
            .zip(trends)
            .enumerate()
            .map(|(i, (((id, m, votes), mut counters), trend))| {
                let scale = scales.of(m.meta.category.as_deref());
                // Seed layout: the site's votes (`article:<id>`).
                if let Some(v) = votes {
                    counters.ups = v;
                    counters.downs = 0;
                }
                let models = &self.settings.models;
                let (p, t) = (&q.params, trend.as_ref());
                RankedItem {
                    rank: skip + i + 1,
                    id,
                    score: models
                        .score(q.model, p, &counters, &m.meta, t, now)
                        .scaled(scale),
                    counters,
                    explain: (q.explain).then(|| {
                        (models.explain(q.model, p, &counters, &m.meta, t, now)).scaled(scale)
                    }),
                    meta: m.meta.clone(),
                }
            })
            .collect())
    }

    /// Reads the next page of every feed whose entries are used up and
    /// that has more, in one pipeline (and the rest of each full page's
    /// lowest publication time in a second: ties go by id). Entries at or
    /// before the cursor `start` are left out.
    async fn refill(
        &self,
        feeds: &mut [Feed],
        chunk: usize,
        start: Option<&(i64, ArticleId)>,
    ) -> Result<(), StoreError> {
        let need: Vec<usize> = (0..feeds.len())
            .filter(|&i| feeds[i].buf.is_empty() && feeds[i].upper.is_some())
            .collect();
        if need.is_empty() {
            return Ok(());
        }
        if feeds.iter().any(|f| f.lex.is_some()) {
            return self.refill_lex(feeds, &need, chunk).await;
        }
        let mut pipe = redis::pipe();
        for &i in &need {
            pipe.cmd("ZREVRANGEBYSCORE")
                .arg(&feeds[i].key)
                .arg(feeds[i].upper.as_deref().unwrap_or("+inf"))
                .arg("-inf")
                .arg("WITHSCORES")
                .arg("LIMIT")
                .arg(0)
                .arg(chunk);
        }
        let mut pages: Vec<Vec<(String, f64)>> = self.query_pipe(&pipe).await.map_err(store_err)?;
        let full: Vec<bool> = pages.iter().map(|p| p.len() == chunk).collect();
        // A full page ends with the whole second of its lowest entry.
        let second = |page: &[(String, f64)]| page[page.len() - 1].1.floor();
        if full.iter().any(|f| *f) {
            let mut pipe = redis::pipe();
            for (&i, page) in need.iter().zip(&pages) {
                if page.len() == chunk {
                    let s = second(page);
                    pipe.cmd("ZRANGEBYSCORE")
                        .arg(&feeds[i].key)
                        .arg(s)
                        .arg(format!("({}", s + 1.0))
                        .arg("WITHSCORES");
                }
            }
            let ties: Vec<Vec<(String, f64)>> = self.query_pipe(&pipe).await.map_err(store_err)?;
            let mut ties = ties.into_iter();
            for page in pages.iter_mut().filter(|p| p.len() == chunk) {
                let s = second(page);
                page.retain(|e| e.1.floor() != s);
                page.extend(ties.next().unwrap_or_default());
            }
        }
        for ((&i, page), full) in need.iter().zip(pages).zip(full) {
            let lowest = page.iter().map(|e| e.1.floor()).reduce(f64::min);
            let seed = feeds[i].seed;
            let mut entries: Vec<(i64, ArticleId)> = page
                .iter()
                .filter_map(|(m, p)| {
                    let id = if seed {
                        super::seed::id_of_member(m)?
                    } else {
                        ArticleId::parse(m).ok()?
                    };
                    Some((p.floor() as i64, id))
                })
                .filter(|(p, id)| match start {
                    Some((sp, sid)) => *p < *sp || (*p == *sp && id > sid),
                    None => true,
                })
                .collect();
            entries.sort_by(newest_order);
            let f = &mut feeds[i];
            f.buf = entries.into();
            f.upper = match (full, lowest) {
                (true, Some(l)) => Some(format!("({l}")),
                _ => None,
            };
        }
        Ok(())
    }

    /// [`refill`](Self::refill) of the feeds `need` over `articles:new:by`:
    /// the next `chunk` members of the feed's value each.
    async fn refill_lex(
        &self,
        feeds: &mut [Feed],
        need: &[usize],
        chunk: usize,
    ) -> Result<(), StoreError> {
        let mut pipe = redis::pipe();
        for &i in need {
            let f = &feeds[i];
            let prefix = f.lex.as_deref().unwrap_or_default();
            pipe.cmd("ZRANGEBYLEX")
                .arg(&f.key)
                .arg(f.upper.as_deref().unwrap_or_default())
                .arg(format!("({prefix};"))
                .arg("LIMIT")
                .arg(0)
                .arg(chunk);
        }
        let pages: Vec<Vec<String>> = self.query_pipe(&pipe).await.map_err(store_err)?;
        for (&i, page) in need.iter().zip(pages) {
            let f = &mut feeds[i];
            let prefix = f.lex.as_deref().unwrap_or_default();
            f.buf = (page.iter())
                .filter_map(|m| {
                    let (at, id) = m.strip_prefix(prefix)?.split_at_checked(13)?;
                    let at: i64 = at.parse().ok()?;
                    Some((NEWEST_BY_FROM - at, ArticleId::parse(id).ok()?))
                })
                .collect();
            f.upper = match page.last() {
                Some(last) if page.len() == chunk => Some(format!("({last}")),
                _ => None,
            };
        }
        Ok(())
    }

    /// Fills `articles:new:by` once per shard where it is not marked
    /// filled ([`FILLED`]): a site written before the index existed has
    /// its live articles in `articles:new` only. Once per process; the
    /// fill is idempotent, so nodes starting together may both run it.
    async fn fill_facets(&self) -> Result<&Self, StoreError> {
        self.facets_filled
            .get_or_try_init(|| async {
                let script = super::sharded(
                    &self.keys,
                    &[include_str!("facets.lua"), include_str!("facets_fill.lua")],
                );
                let mut con = self.con();
                for sk in self.keys.all_shards() {
                    let by = sk.newest_by();
                    let done: Option<f64> = redis::cmd("ZSCORE")
                        .arg(&by)
                        .arg(FILLED)
                        .query_async(&mut con)
                        .await
                        .map_err(store_err)?;
                    if done.is_some() {
                        continue;
                    }
                    // ZSCAN returns every id live throughout at least once.
                    let mut cursor = 0u64;
                    loop {
                        let (next, page): (u64, Vec<String>) = redis::cmd("ZSCAN")
                            .arg(sk.newest())
                            .arg(cursor)
                            .arg("COUNT")
                            .arg(256)
                            .query_async(&mut con)
                            .await
                            .map_err(store_err)?;
                        // Replies alternate member and score.
                        let ids: Vec<ArticleId> = (page.iter().step_by(2))
                            .filter_map(|id| ArticleId::parse(id).ok())
                            .collect();
                        if !ids.is_empty() {
                            let mut inv = script.prepare_invoke();
                            inv.key(&by).arg(self.keys.prefix.as_str());
                            for id in &ids {
                                inv.key(self.keys.meta(id)).arg(id.as_str());
                            }
                            inv.invoke_async::<i64>(&mut con).await.map_err(store_err)?;
                        }
                        cursor = next;
                        if cursor == 0 {
                            break;
                        }
                    }
                    redis::cmd("ZADD")
                        .arg(&by)
                        .arg(0)
                        .arg(FILLED)
                        .query_async::<()>(&mut con)
                        .await
                        .map_err(store_err)?;
                }
                Ok::<(), StoreError>(())
            })
            .await?;
        Ok(self)
    }

    /// Of the filter values `prefixes` (members' prefixes in
    /// `articles:new:by`), the one fewest live articles have over every
    /// shard; `None` if no article has one of them.
    async fn smallest_facet(&self, prefixes: Vec<String>) -> Result<Option<String>, StoreError> {
        let shards = self.keys.all_shards();
        let mut pipe = redis::pipe();
        for p in &prefixes {
            for sk in &shards {
                pipe.cmd("ZLEXCOUNT")
                    .arg(sk.newest_by())
                    .arg(format!("[{p}"))
                    .arg(format!("({p};"));
            }
        }
        let counts: Vec<u64> = self.query_pipe(&pipe).await.map_err(store_err)?;
        let per: Vec<u64> = (counts.chunks(shards.len().max(1)))
            .map(|c| c.iter().sum())
            .collect();
        Ok(prefixes
            .into_iter()
            .zip(per)
            .min_by_key(|(_, n)| *n)
            .filter(|(_, n)| *n > 0)
            .map(|(p, _)| p))
    }
}
