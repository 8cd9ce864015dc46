//! `[redis] layout = "seed"`: the seeds' own keys and member formats, so a
//! site's existing seed code keeps reading and writing them beside hotrank
//! on one Redis (README, "Coming from a seed design"; docs/redis-keys.md,
//! "Layouts").
//!
//! - Seed 003: posts, votes and deletes go through `seed_*.lua`, which
//!   keep `article:<id>`, `time:`/`score:` (members `article:<id>`),
//!   `voted:<id>` (members `user:<userId>`, the id as sent) and
//!   `group:<name>` as the seed's code does; the votes ranking and a
//!   group's ranking are read straight from `score:` (the model is
//!   time-invariant, so `score:` is the exact ranking), `GET /api/new`
//!   reads `time:` beside `articles:new` ([`RedisStore::seed_newest`]), an
//!   article only the seed's code posted is answered from its
//!   `article:<id>` hash, and the `article:` counter is kept past every
//!   numeric id hotrank creates (seed_claim.lua). The seed's `time` is
//!   `time.time()`, with a fraction: `publishedAt` is its whole second.
//! - Seed 000: `hot:score` is an export, rewritten every
//!   `seed_refresh_secs` by [`RedisStore::maintain`] with the exact gravity
//!   scores (lifetime `counter:views`/`hll:uv`, as the seed's script
//!   computes them) of the top 1000 articles; hotrank's own default
//!   ranking moves to `hot:gravity:72h:all`.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use redis::{Script, Value};

use super::{MetaRec, RedisStore, bad_reply, script, store_err, v_str};
use crate::model::{
    ArticleId, ArticleMeta, ArticleView, Counters, Decay, HotPage, HotQuery, RangeSpec, RankedItem,
    Timestamp, VoteOutcome,
};
use crate::score::ModelKind;
use crate::store::{StoreError, cursor};

/// What `layout = "seed"` cannot do; logged at start, listed in README.
pub const SEED_LAYOUT_LIMITS: &str = "redis.layout = \"seed\": \
voter and poster ids are stored raw (voted:<id> holds user:<userId>, as the seed's code needs), not hashed; \
no Redis Cluster; no down-votes (the seed has none); \
votes cast by the seed's own code count in the votes ranking (unfiltered or by group) and article views, not in the reddit model nor in votes rankings filtered by category, kind or per_author; \
articles only the seed's code posted have no category/kind and, outside GET /api/new, are not in rankings filtered by perAuthor; \
hot:score is rewritten every seed_refresh_secs with the top 1000 (lifetime PV/UV gravity), hotrank's own default ranking is hot:gravity:72h:all; \
visitors counted by both hotrank (16-byte elements) and the seed's script (its visitorId) count twice in hll:uv";

/// Seed 000 keeps the top 1000 (`ZREMRANGEBYRANK hot:score 0 -1001`).
pub const SEED_HOT_SCORE_SIZE: usize = 1000;

struct SeedScripts {
    post: Script,
    vote: Script,
    delete: Script,
    claim: Script,
}

/// `seed_claim(P, id)`: the `article:` counter moved past an id hotrank
/// creates (seed_claim.lua).
const CLAIM: &str = include_str!("seed_claim.lua");

fn scripts() -> &'static SeedScripts {
    static S: OnceLock<SeedScripts> = OnceLock::new();
    S.get_or_init(|| SeedScripts {
        post: script(concat!(
            include_str!("facets.lua"),
            include_str!("seed_post.lua")
        )),
        vote: script(include_str!("seed_vote.lua")),
        delete: script(concat!(
            include_str!("facets.lua"),
            include_str!("seed_delete.lua")
        )),
        claim: super::chunks(&[CLAIM, "return seed_claim(ARGV[1], ARGV[2])\n"]),
    })
}

/// The ingest script of seed layout: [`super::ingest_script`]'s chunks
/// with, before the reply, the `article:` counter moved past the articles
/// the batch registered (seed_claim.lua) and `seed_apply.lua` (seeds 001
/// and 004's keys).
pub(super) fn ingest_script() -> Script {
    super::ingest_script_with(
        &super::Keys::new(""),
        &[
            CLAIM,
            "for _, id in ipairs(new_arts) do seed_claim(P, id) end\n",
            include_str!("seed_apply.lua"),
        ],
    )
}

/// The seed 003 member of a user id as sent (`user:<id>`).
pub fn user_member(raw: &str) -> String {
    format!("user:{raw}")
}

/// The seed 003 member of an article (`article:<id>`).
pub fn article_member(id: &ArticleId) -> String {
    format!("article:{id}")
}

/// The article id of a `time:`/`score:`/`group:` member, if it is one.
pub fn id_of_member(m: &str) -> Option<ArticleId> {
    ArticleId::parse(m.strip_prefix("article:")?).ok()
}

/// Metadata from an `article:<id>` hash (title, link, poster, time);
/// `None` without a `time`.
fn meta_of_article(h: &HashMap<String, String>) -> Option<ArticleMeta> {
    let s = |k: &str| h.get(k).filter(|v| !v.is_empty()).cloned();
    Some(ArticleMeta {
        title: s("title"),
        url: s("link"),
        author: s("poster"),
        published_at: h.get("time")?.parse::<f64>().ok()? as Timestamp,
        ..ArticleMeta::default()
    })
}

fn votes_of(h: &HashMap<String, String>) -> u64 {
    h.get("votes")
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(0)
        .max(0) as u64
}

impl RedisStore {
    pub(crate) fn seed_layout(&self) -> bool {
        self.opts.seed_layout
    }

    /// Seed layout: an article's groups before a `PUT` (`None` in
    /// hotrank's layout, which keeps no group sets).
    pub(crate) async fn seed_groups_before(
        &self,
        id: &ArticleId,
    ) -> Result<Option<Vec<String>>, StoreError> {
        if !self.seed_layout() {
            return Ok(None);
        }
        let mut con = self.con();
        let g: Option<String> = redis::cmd("HGET")
            .arg(self.keys.meta(id))
            .arg("groups")
            .query_async(&mut con)
            .await
            .map_err(store_err)?;
        Ok(Some(
            g.and_then(|g| serde_json::from_str(&g).ok())
                .unwrap_or_default(),
        ))
    }

    /// Seed layout: after a `PUT` (or a group change), the article leaves
    /// the `group:<name>` sets it left and joins the new ones.
    pub(crate) async fn seed_groups_after(
        &self,
        id: &ArticleId,
        before: Option<Vec<String>>,
        now: &[String],
    ) -> Result<(), StoreError> {
        let Some(before) = before else {
            return Ok(());
        };
        let member = article_member(id);
        let mut pipe = redis::pipe();
        pipe.atomic();
        for g in before.iter().filter(|g| !now.contains(g)) {
            pipe.srem(self.keys.seed_group(g), &member).ignore();
        }
        for g in now.iter().filter(|g| !before.contains(g)) {
            pipe.sadd(self.keys.seed_group(g), &member).ignore();
        }
        let mut con = self.con();
        pipe.query_async::<()>(&mut con).await.map_err(store_err)
    }

    /// Seed layout, before hotrank creates `id` (a `PUT`): the seed's
    /// `article:` counter moved to it if it is a numeric id past the
    /// counter, so the site's `post_article` never takes it.
    pub(crate) async fn seed_claim(&self, id: &ArticleId) -> Result<(), StoreError> {
        if !self.seed_layout() {
            return Ok(());
        }
        let _: i64 = self
            .seed_eval(
                &scripts().claim,
                &[self.keys.prefix.as_bytes(), id.as_str().as_bytes()],
            )
            .await?;
        Ok(())
    }

    /// Every key matching `pattern` (one Redis: seed layout has no cluster).
    async fn scan_all(&self, pattern: &str) -> Result<Vec<String>, StoreError> {
        let mut con = self.con();
        let (mut out, mut at) = (Vec::new(), 0);
        loop {
            let (next, found) = con
                .scan(pattern, at, pattern, 1000)
                .await
                .map_err(store_err)?;
            out.extend(found);
            if next == 0 {
                return Ok(out);
            }
            at = next;
        }
    }

    async fn seed_eval<T: redis::FromRedisValue>(
        &self,
        s: &Script,
        args: &[&[u8]],
    ) -> Result<T, StoreError> {
        let mut inv = s.prepare_invoke();
        for a in args {
            inv.arg(*a);
        }
        let mut con = self.con();
        inv.invoke_async(&mut con).await.map_err(store_err)
    }

    /// Seed 003 posting in seed layout (see seed_post.lua).
    pub(crate) async fn seed_post(
        &self,
        meta: ArticleMeta,
        poster_raw: &str,
        now: Timestamp,
    ) -> Result<ArticleId, StoreError> {
        let mut meta = meta;
        meta.published_at = now;
        let pairs = super::meta_pairs(&meta);
        let votes = &self.settings.models.votes;
        let (published, window, per) = (
            now.to_string(),
            votes.window_secs().to_string(),
            votes.per_vote.to_string(),
        );
        let poster = user_member(poster_raw);
        let request = format!("{:032x}", rand::random::<u128>());
        let ngroups = meta.groups.len().to_string();
        let mut args: Vec<&[u8]> = vec![
            self.keys.prefix.as_bytes(),
            published.as_bytes(),
            poster.as_bytes(),
            window.as_bytes(),
            request.as_bytes(),
            per.as_bytes(),
            meta.title.as_deref().unwrap_or("").as_bytes(),
            meta.url.as_deref().unwrap_or("").as_bytes(),
            ngroups.as_bytes(),
        ];
        for g in &meta.groups {
            args.push(g.as_bytes());
        }
        for (k, v) in &pairs {
            args.push(k.as_bytes());
            args.push(v.as_bytes());
        }
        let id: String = self.seed_eval(&scripts().post, &args).await?;
        ArticleId::parse(&id).map_err(|_| bad_reply("seed post"))
    }

    /// Seed 003 voting in seed layout (see seed_vote.lua): up-votes only.
    pub(crate) async fn seed_vote(
        &self,
        id: &ArticleId,
        user_raw: &str,
        up: bool,
        now: Timestamp,
    ) -> Result<VoteOutcome, StoreError> {
        if !up {
            return Ok(VoteOutcome::DownVotesDisabled);
        }
        let votes = &self.settings.models.votes;
        let (now_s, window, per) = (
            now.to_string(),
            votes.window_secs().to_string(),
            votes.per_vote.to_string(),
        );
        let user = user_member(user_raw);
        let args: Vec<&[u8]> = vec![
            self.keys.prefix.as_bytes(),
            id.as_str().as_bytes(),
            user.as_bytes(),
            now_s.as_bytes(),
            window.as_bytes(),
            per.as_bytes(),
        ];
        let r: Vec<Value> = self.seed_eval(&scripts().vote, &args).await?;
        let code = r.first().and_then(super::v_i64);
        Ok(match (code, r.len()) {
            (Some(-1), 1) => VoteOutcome::UnknownArticle,
            (Some(-3), 1) => VoteOutcome::Closed,
            (Some(-4), 1) => VoteOutcome::AlreadyVoted,
            (Some(n), 2) => VoteOutcome::Counted {
                ups: n.max(0) as u64,
                downs: 0,
                score: r
                    .get(1)
                    .and_then(v_str)
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| bad_reply("seed vote"))?,
            },
            _ => return Err(bad_reply("seed vote")),
        })
    }

    /// DELETE in seed layout: out of `time:`/`score:`, the voter set and
    /// every `group:<name>` as well.
    pub(crate) async fn seed_delete(&self, id: &ArticleId) -> Result<bool, StoreError> {
        let done: i64 = self
            .seed_eval(
                &scripts().delete,
                &[self.keys.prefix.as_bytes(), id.as_str().as_bytes()],
            )
            .await?;
        if done != 1 {
            return Ok(false);
        }
        // The seed's code may have put it in groups hotrank never heard of.
        let member = article_member(id);
        let groups = self
            .scan_all(&format!("{}group:*", self.keys.prefix))
            .await?;
        let mut con = self.con();
        if !groups.is_empty() {
            let mut pipe = redis::pipe();
            for g in &groups {
                pipe.cmd("SREM").arg(g).arg(&member).ignore();
            }
            pipe.query_async::<()>(&mut con).await.map_err(store_err)?;
        }
        Ok(true)
    }

    /// `GET /api/articles/{id}` in seed layout: the votes are the seed's
    /// (`article:<id>` votes, `score:`), and an article only the seed's code
    /// posted is answered from its hash.
    pub(crate) async fn seed_article(
        &self,
        id: &ArticleId,
        view: Option<ArticleView>,
        now: Timestamp,
    ) -> Result<Option<ArticleView>, StoreError> {
        let member = article_member(id);
        let mut con = self.con();
        let (h, score, deleted): (HashMap<String, String>, Option<f64>, Option<String>) =
            redis::pipe()
                .hgetall(self.keys.seed_article(id))
                .zscore(self.keys.vote_score(), &member)
                .hget(self.keys.meta(id), "deleted")
                .query_async(&mut con)
                .await
                .map_err(store_err)?;
        let Some(score) = score else {
            return Ok(view);
        };
        let mut view = match view {
            Some(v) => v,
            None => {
                if deleted.as_deref() == Some("1") {
                    return Ok(None);
                }
                let Some(meta) = meta_of_article(&h) else {
                    return Ok(None);
                };
                let (lifetime, quarantined) = self.lifetime(id).await?;
                ArticleView {
                    id: id.clone(),
                    meta,
                    lifetime,
                    quarantined,
                    deleted: false,
                    scores: Vec::new(),
                }
            }
        };
        // The site's hash wins: an article hotrank first saw through an
        // event got that event's time, the site's `time` is the post's.
        if let Some(m) = meta_of_article(&h) {
            view.meta.published_at = m.published_at;
            if view.meta.title.is_none() {
                view.meta.title = m.title;
            }
            if view.meta.url.is_none() {
                view.meta.url = m.url;
            }
        }
        view.lifetime.ups = votes_of(&h);
        view.lifetime.downs = 0;
        let computed = view.scores.is_empty();
        if computed {
            for model in ModelKind::ALL {
                let s = self.settings.models.score(
                    model,
                    &Default::default(),
                    &view.lifetime,
                    &view.meta,
                    None,
                    now,
                );
                view.scores.push((model, s));
            }
        }
        for (m, s) in &mut view.scores {
            if *m == ModelKind::Votes {
                *s = score;
            }
        }
        Ok(Some(view))
    }

    /// `GET /api/new` in seed layout merges hotrank's `articles:new` with
    /// the site's `time:`, read a page at a time like it (rank.rs,
    /// `newest_page`). For a merged batch (`Some(second)` for an entry of
    /// `time:`) and hotrank's metadata of its ids: each entry's metadata
    /// to list (`None`: not listed) and, for an entry of `time:`, the
    /// site's votes. An article in `time:` is listed from there, at its
    /// `time` (the whole second), so its `articles:new` entry is left out;
    /// one only the site posted is answered from its `article:<id>` hash.
    pub(crate) async fn seed_newest(
        &self,
        batch: &[(ArticleId, Option<Timestamp>)],
        metas: Vec<Option<Arc<MetaRec>>>,
    ) -> Result<Vec<(Option<Arc<MetaRec>>, Option<u64>)>, StoreError> {
        let mut pipe = redis::pipe();
        for (id, at) in batch {
            match at {
                Some(_) => pipe.hgetall(self.keys.seed_article(id)),
                None => pipe.zscore(self.keys.vote_time(), article_member(id)),
            };
        }
        let mut con = self.con();
        let got: Vec<Value> = if batch.is_empty() {
            Vec::new()
        } else {
            pipe.query_async(&mut con).await.map_err(store_err)?
        };
        let mut out = Vec::with_capacity(batch.len());
        for (((_, at), m), v) in batch.iter().zip(metas).zip(got) {
            let Some(at) = *at else {
                // In `time:` as well: listed from there.
                out.push((m.filter(|_| matches!(v, Value::Nil)), None));
                continue;
            };
            let h: HashMap<String, String> =
                redis::from_redis_value(v).map_err(|_| bad_reply("seed newest"))?;
            let site = meta_of_article(&h);
            let rec = match (m, site) {
                (Some(m), site) => {
                    let mut rec = (*m).clone();
                    if let Some(site) = site {
                        rec.meta.title = rec.meta.title.or(site.title);
                        rec.meta.url = rec.meta.url.or(site.url);
                    }
                    Some(rec)
                }
                (None, Some(meta)) => Some(MetaRec {
                    meta,
                    known: false,
                    deleted: false,
                }),
                (None, None) => None,
            };
            out.push((
                rec.map(|mut rec| {
                    rec.meta.published_at = at;
                    Arc::new(rec)
                }),
                Some(votes_of(&h)),
            ));
        }
        Ok(out)
    }

    /// Whether a query is served straight from the seed's `score:`.
    pub(crate) fn seed_serves(&self, q: &HotQuery) -> bool {
        self.seed_layout()
            && q.model == ModelKind::Votes
            && q.category.is_none()
            && q.kind.is_none()
            && q.per_author.is_none()
    }

    /// The votes ranking (or a group's) straight from `score:`, ordered as
    /// the seed's `ZREVRANGE score:` (or `ZINTERSTORE … AGGREGATE MAX` of
    /// `group:<name>` and `score:`) lists it: score descending, equal
    /// scores by member descending. Cursors continue at an offset of the
    /// live ranking.
    pub(crate) async fn seed_votes_page(
        &self,
        q: &HotQuery,
        now: Timestamp,
    ) -> Result<HotPage, StoreError> {
        let skip = match &q.cursor {
            Some(c) => cursor::parse_snapshot(c, self.settings.ranking_cap)?.1,
            None => q.offset,
        };
        let mut con = self.con();
        let entries: Vec<(String, f64)> = match &q.group {
            None => redis::cmd("ZREVRANGE")
                .arg(self.keys.vote_score())
                .arg(skip)
                .arg(skip + q.limit)
                .arg("WITHSCORES")
                .query_async(&mut con)
                .await
                .map_err(store_err)?,
            Some(g) => {
                let members: Vec<String> = redis::cmd("SMEMBERS")
                    .arg(self.keys.seed_group(g))
                    .query_async(&mut con)
                    .await
                    .map_err(store_err)?;
                let scores: Vec<Option<f64>> = if members.is_empty() {
                    Vec::new()
                } else {
                    redis::cmd("ZMSCORE")
                        .arg(self.keys.vote_score())
                        .arg(&members)
                        .query_async(&mut con)
                        .await
                        .map_err(store_err)?
                };
                // AGGREGATE MAX of a set member (1) and its score.
                let mut all: Vec<(String, f64)> = members
                    .into_iter()
                    .zip(scores)
                    .filter_map(|(m, s)| s.map(|s| (m, s.max(1.0))))
                    .collect();
                all.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
                all.into_iter().skip(skip).take(q.limit + 1).collect()
            }
        };
        let more = entries.len() > q.limit;
        let entries: Vec<(ArticleId, f64)> = entries
            .into_iter()
            .take(q.limit)
            .filter_map(|(m, s)| Some((id_of_member(&m)?, s)))
            .collect();
        let mut pipe = redis::pipe();
        for (id, _) in &entries {
            pipe.hgetall(self.keys.seed_article(id));
            pipe.hgetall(self.keys.meta(id));
        }
        let hashes: Vec<HashMap<String, String>> = if entries.is_empty() {
            Vec::new()
        } else {
            pipe.query_async(&mut con).await.map_err(store_err)?
        };
        let mut items = Vec::with_capacity(entries.len());
        for (i, (id, score)) in entries.into_iter().enumerate() {
            let (art, meta) = (&hashes[2 * i], &hashes[2 * i + 1]);
            let mut m = match super::parse_meta(meta) {
                Some(rec) => rec.meta,
                None => meta_of_article(art).unwrap_or_default(),
            };
            if let Some(t) = meta_of_article(art) {
                m.published_at = t.published_at;
            }
            let counters = Counters {
                ups: votes_of(art),
                ..Counters::default()
            };
            let explain = q.explain.then(|| {
                (self.settings.models).explain(q.model, &q.params, &counters, &m, None, now)
            });
            items.push(RankedItem {
                rank: skip + i + 1,
                id,
                score,
                counters,
                meta: m,
                explain,
            });
        }
        let next = skip + items.len();
        Ok(HotPage {
            items,
            generated_at: now,
            cursor: more.then(|| cursor::snapshot(0, next)),
        })
    }

    /// Rewrites seed 000's `hot:score` with the exact gravity scores (the
    /// seed's formula over lifetime `counter:views` and `hll:uv`, as its
    /// script computes them) of the top [`SEED_HOT_SCORE_SIZE`] live
    /// articles with views: those hotrank lists and those the seed's script
    /// scored.
    pub(crate) async fn seed_refresh(&self, now: Timestamp) -> Result<usize, StoreError> {
        let mut con = self.con();
        let hot = self.keys.seed_hot_score();
        let (listed, scored): (Vec<String>, Vec<String>) = redis::pipe()
            .zrange(self.keys.shard(0).newest(), 0, -1)
            .zrange(&hot, 0, -1)
            .query_async(&mut con)
            .await
            .map_err(store_err)?;
        let mut ids: Vec<ArticleId> = listed
            .iter()
            .chain(&scored)
            .filter_map(|s| ArticleId::parse(s).ok())
            .collect();
        ids.sort();
        ids.dedup();
        let mut best: Vec<(f64, ArticleId)> = Vec::new();
        for chunk in ids.chunks(500) {
            let mut pipe = redis::pipe();
            for id in chunk {
                pipe.get(self.keys.views(id));
                pipe.cmd("PFCOUNT").arg(self.keys.uv(id));
                pipe.cmd("HMGET")
                    .arg(self.keys.meta(id))
                    .arg(&["publishedAt", "deleted"]);
            }
            let got: Vec<Value> = pipe.query_async(&mut con).await.map_err(store_err)?;
            for (i, id) in chunk.iter().enumerate() {
                let num = |v: &Value| super::v_i64(v).unwrap_or(0).max(0) as u64;
                let Value::Array(m) = &got[3 * i + 2] else {
                    return Err(bad_reply("seed refresh"));
                };
                if m.get(1).and_then(v_str) == Some("1") {
                    continue;
                }
                // The seed's script: no publishedAt counts as age 0.
                let published = m
                    .first()
                    .and_then(v_str)
                    .and_then(|s| s.parse::<Timestamp>().ok())
                    .unwrap_or(now);
                let c = Counters {
                    pv: num(&got[3 * i]),
                    uv: num(&got[3 * i + 1]),
                    ..Counters::default()
                };
                // The seed's script scores an article on its first view.
                if c.pv == 0 && c.uv == 0 {
                    continue;
                }
                let s = (self.settings.models.gravity).score(&c, published, now, Decay::Model);
                best.push((s, id.clone()));
            }
        }
        best.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| b.1.cmp(&a.1)));
        best.truncate(SEED_HOT_SCORE_SIZE);
        let mut pipe = redis::pipe();
        pipe.atomic().del(&hot).ignore();
        if !best.is_empty() {
            let pairs: Vec<(f64, &str)> = best.iter().map(|(s, id)| (*s, id.as_str())).collect();
            pipe.zadd_multiple(&hot, &pairs).ignore();
        }
        pipe.query_async::<()>(&mut con).await.map_err(store_err)?;
        Ok(best.len())
    }

    /// Rewrites seed 001's `hot:articles` and `hot:articles:<category>`
    /// with the seed's weighted score over the last 24 hours of every live
    /// article with activity in them (the seed's per-minute batch).
    pub(crate) async fn seed_refresh_weighted(&self, now: Timestamp) -> Result<usize, StoreError> {
        let seq = self.sync_node().await?;
        let mut con = self.con();
        let last = crate::time::hour_of(now);
        let hours: Vec<String> = crate::time::last_hours(last, 24)
            .map(|h| self.keys.shard(0).active_h(h))
            .collect();
        let mut ids: Vec<String> = redis::cmd("SUNION")
            .arg(&hours)
            .query_async(&mut con)
            .await
            .map_err(store_err)?;
        ids.sort();
        let ids: Vec<ArticleId> = ids
            .iter()
            .filter_map(|s| ArticleId::parse(s).ok())
            .collect();
        let mut all: Vec<(f64, &str)> = Vec::new();
        let mut by_category: std::collections::BTreeMap<String, Vec<(f64, &str)>> =
            Default::default();
        for chunk in ids.chunks(500) {
            let metas = self.metas(chunk, &seq).await?;
            let counts = self.windows(chunk, RangeSpec::Hours(24), now, &seq).await?;
            for ((id, m), c) in chunk.iter().zip(metas).zip(counts) {
                let Some(m) = m.filter(|m| !m.deleted) else {
                    continue;
                };
                let score = self.settings.models.score(
                    ModelKind::Weighted,
                    &Default::default(),
                    &c,
                    &m.meta,
                    None,
                    now,
                );
                all.push((score, id.as_str()));
                if let Some(cat) = &m.meta.category {
                    by_category
                        .entry(cat.clone())
                        .or_default()
                        .push((score, id.as_str()));
                }
            }
        }
        let main = self.keys.seed_hot_articles(None);
        let written = self.keys.seed_hot_categories();
        let before: Vec<String> = redis::cmd("SMEMBERS")
            .arg(&written)
            .query_async(&mut con)
            .await
            .map_err(store_err)?;
        let mut pipe = redis::pipe();
        pipe.atomic();
        pipe.del(&main).ignore();
        for cat in &before {
            pipe.del(self.keys.seed_hot_articles(Some(cat))).ignore();
        }
        pipe.del(&written).ignore();
        if !all.is_empty() {
            pipe.zadd_multiple(&main, &all).ignore();
        }
        for (cat, items) in &by_category {
            pipe.zadd_multiple(self.keys.seed_hot_articles(Some(cat)), items)
                .ignore();
            pipe.sadd(&written, cat).ignore();
        }
        pipe.query_async::<()>(&mut con).await.map_err(store_err)?;
        Ok(all.len())
    }
}
