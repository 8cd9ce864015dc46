//! Key names. docs/redis-keys.md lists every key with its type, TTL and
//! writer; the Lua scripts build the same names from the same prefix.
//!
//! Article ids are validated (`[A-Za-z0-9_-]{1,64}`) before they reach a
//! key, and free-text filter labels only ever appear hashed, so no input
//! can forge a key.

use crate::model::{ArticleId, HOUR, HotQuery, ModelParams, RangeSpec, Timestamp, hour_of};
use crate::rank::{Filter, RankingId};
use crate::score::ModelKind;
use crate::sketch::murmur64a;

/// How long an unused ranking (other than `hot:score`) and an unused
/// cursor are kept.
pub(super) const RANKING_TTL: i64 = 3600;

pub use crate::time::{DAY, day_of};

/// Builds key names under one prefix.
#[derive(Debug, Clone)]
pub struct Keys {
    pub prefix: String,
    /// `[redis] layout = "seed"`: seed 000's `hot:score` is an export
    /// (seed.rs), so hotrank's default ranking has a name of its own.
    pub seed_layout: bool,
    /// Article shards (`[redis] shards`): the keys of [`ShardKeys`] exist
    /// once per shard.
    pub shards: u32,
    /// On a Redis Cluster, the site's hash tag (`site1:`, `hotrank` for
    /// the empty prefix; the prefix is then `{<tag>}`). With more than one
    /// shard, shard `k`'s keys and the per-article keys of its articles
    /// carry the tag `{<tag>:s<k>}` ([`Keys::shard`], [`Keys::article`]).
    pub tag: Option<String>,
}

/// The shard of article `id` among `n`: a polynomial hash of its bytes
/// (× 31, mod 2³¹ − 1), mod `n`. `shard.lua` computes the same in Lua
/// (every intermediate stays below 2⁵³, so Lua's doubles are exact), and a
/// test checks the two agree on a real redis-server.
pub fn shard_of(id: &str, n: u32) -> u32 {
    if n <= 1 {
        return 0;
    }
    let mut h: u64 = 0;
    for b in id.bytes() {
        h = (h * 31 + u64::from(b)) % 2_147_483_647;
    }
    (h % u64::from(n)) as u32
}

/// The Lua chunk in front of every script that names a shard's key, on
/// one Redis: the site's shard count, compiled in (so no script argument,
/// and no journaled one, changes with it), and `shard.lua`'s helpers.
pub fn shard_chunk(n: u32) -> String {
    shard_chunk_tagged(n, None)
}

/// [`shard_chunk`] for a site whose keys carry the hash tag `tag` (a
/// Redis Cluster, [`Keys::tag`]): `shard.lua` then names shard `k`'s keys,
/// and with more than one shard the per-article keys of its articles,
/// under `{<tag>:s<k>}`, as [`Keys::shard`] and [`Keys::article`] do.
pub fn shard_chunk_tagged(n: u32, tag: Option<&str>) -> String {
    // A tag is a validated prefix (`[A-Za-z0-9_:.-]`) or `hotrank`: it
    // needs no quoting in a Lua string.
    let stag = match tag {
        Some(t) => format!("'{t}'"),
        None => "nil".to_string(),
    };
    format!(
        "local NSHARDS = {}\nlocal STAG = {stag}\n{}",
        n.max(1),
        include_str!("shard.lua")
    )
}

/// The keys kept once per article shard (docs/redis-keys.md, "Article
/// shards"): the change log, the activity sets, `articles:new` and the
/// rankings with their index. With one shard they are the site's keys
/// as ever (`<prefix>changes`); with more, shard `k`'s names carry
/// `s<k>:` after the prefix (`<prefix>s3:changes`), which on a cluster
/// would become the hash tag `{<site>:s3}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardKeys {
    /// The shard's prefix: the site's, then `s<k>:` when sharded.
    pub prefix: String,
    /// Which shard (0 when the site has one).
    pub index: u32,
    seed_layout: bool,
}

impl Keys {
    pub fn new(prefix: &str) -> Self {
        Keys {
            prefix: prefix.to_string(),
            seed_layout: false,
            shards: 1,
            tag: None,
        }
    }

    /// The Lua chunk of this site's shard helpers ([`shard_chunk_tagged`]).
    pub fn lua_chunk(&self) -> String {
        shard_chunk_tagged(self.shards, self.tag.as_deref())
    }

    /// The same names over `n` article shards.
    pub fn with_shards(self, n: u32) -> Self {
        Keys {
            shards: n.max(1),
            ..self
        }
    }

    /// The site's shard count, when more than one (checked by `ready()`).
    pub fn shards_key(&self) -> String {
        self.k(format_args!("shards"))
    }

    /// The keys of shard `k`: the site's names with one shard; with more,
    /// `<prefix>s<k>:` on one Redis and the hash tag `{<tag>:s<k>}` on a
    /// cluster (the shard's own slot).
    pub fn shard(&self, k: u32) -> ShardKeys {
        let prefix = if self.shards <= 1 {
            self.prefix.clone()
        } else if let Some(tag) = &self.tag {
            format!("{{{tag}:s{k}}}")
        } else {
            format!("{}s{k}:", self.prefix)
        };
        ShardKeys {
            prefix,
            index: k,
            seed_layout: self.seed_layout,
        }
    }

    /// The shard article `id` belongs to.
    pub fn shard_index(&self, id: &ArticleId) -> u32 {
        shard_of(id.as_str(), self.shards)
    }

    /// The keys of the shard article `id` belongs to.
    pub fn of(&self, id: &ArticleId) -> ShardKeys {
        self.shard(self.shard_index(id))
    }

    /// `items` split by the shard of their article (`id_of`): one list per
    /// shard, in shard order, empty ones included, each in the order given.
    pub fn group_by_shard<T>(
        &self,
        items: impl IntoIterator<Item = T>,
        id_of: impl Fn(&T) -> &ArticleId,
    ) -> Vec<Vec<T>> {
        let mut groups: Vec<Vec<T>> = (0..self.shards).map(|_| Vec::new()).collect();
        for item in items {
            let k = self.shard_index(id_of(&item)) as usize;
            groups[k].push(item);
        }
        groups
    }

    /// Where the site's keys live, for a scan: (a key that routes to the
    /// node, the prefix to match). The site's prefix covers everything on
    /// one Redis (shard keys are `<prefix>s<k>:…`); on a cluster with more
    /// than one shard each shard's tag is a prefix of its own, on the node
    /// of the shard's slot.
    pub fn scan_prefixes(&self) -> Vec<(String, String)> {
        let mut out = vec![(self.clock(), self.prefix.clone())];
        if self.spans_slots() {
            for sk in self.all_shards() {
                out.push((sk.changes(), sk.prefix));
            }
        }
        out
    }

    /// The keys of every shard, in shard order.
    pub fn all_shards(&self) -> Vec<ShardKeys> {
        (0..self.shards).map(|k| self.shard(k)).collect()
    }

    /// The names of `[redis] layout = "seed"` (one Redis, never tagged).
    pub fn seed(prefix: &str) -> Self {
        Keys {
            seed_layout: true,
            ..Keys::new(prefix)
        }
    }

    /// Redis Cluster names: the prefix becomes a hash tag (`{site1:}`,
    /// `{hotrank}` for the empty prefix), so every key of one site hashes
    /// to one slot and every script and pipeline stays on one node.
    pub fn tagged(prefix: &str) -> Self {
        let tag = if prefix.is_empty() { "hotrank" } else { prefix };
        Keys {
            prefix: format!("{{{tag}}}"),
            tag: Some(tag.to_string()),
            ..Keys::new("")
        }
    }

    /// The prefix of article `id`'s own keys (counters, metadata, buckets,
    /// sketches, voters): the site's, except on a cluster with more than
    /// one shard, where they live in the slot of the article's shard
    /// (`{<tag>:s<k>}`, `shard.lua`'s `AK`). On one Redis they keep the
    /// site's names whatever the shard count.
    pub fn article(&self, id: &ArticleId) -> String {
        if self.spans_slots() {
            self.of(id).prefix
        } else {
            self.prefix.clone()
        }
    }

    /// Whether the site's keys span several cluster slots (tagged, more
    /// than one shard): pipelines then run one per slot
    /// (`slots::query_by_slot`).
    pub fn spans_slots(&self) -> bool {
        self.tag.is_some() && self.shards > 1
    }

    fn a(&self, id: &ArticleId, rest: std::fmt::Arguments<'_>) -> String {
        format!("{}{}", self.article(id), rest)
    }

    /// The seed 003 post counter.
    pub fn post_counter(&self) -> String {
        self.k(format_args!("article:"))
    }
    /// The id one post.lua call created, by request id.
    pub fn post_request(&self, request: &str) -> String {
        self.k(format_args!("post:req:{request}"))
    }
    /// The id the first stage of a post over a split site reserved, by
    /// request id (`post_id.lua`).
    pub fn post_reserved(&self, request: &str) -> String {
        self.k(format_args!("post:id:{request}"))
    }
    /// Every key `post_at.lua` touches creating article `id` for
    /// `request` (one slot: the article's shard's).
    pub fn post_at_keys(&self, id: &ArticleId, request: &str) -> Vec<String> {
        let sk = self.of(id);
        let mut keys = vec![
            self.meta(id),
            self.voted(id),
            self.counters(id),
            sk.newest(),
            sk.newest_by(),
            sk.changes_seq(),
            sk.changes(),
        ];
        for name in ["stats:articles", "time:", "score:", "archive:dirty"] {
            keys.push(self.ledger(id, name));
        }
        keys.push(self.ledger(id, &format!("post:req:{request}")));
        keys
    }
    /// Seed 003's `time:` and `score:` sorted sets.
    pub fn vote_time(&self) -> String {
        self.k(format_args!("time:"))
    }
    pub fn vote_score(&self) -> String {
        self.k(format_args!("score:"))
    }
    /// The newest arrival time any ingest call carried.
    pub fn clock(&self) -> String {
        self.k(format_args!("clock"))
    }
    /// The site's gate clock (gate_clock.lua).
    pub fn gate_time(&self) -> String {
        self.k(format_args!("gate:time"))
    }
    /// The answer of one ingest call, by batch id.
    pub fn batch(&self, id: &str) -> String {
        self.k(format_args!("gate:batch:{id}"))
    }
    /// Over a split site: shard `k`'s outbox entry of one batch (what its
    /// count stage applies), in the site's slot.
    pub fn outbox_entry(&self, k: u32, batch: &str) -> String {
        self.k(format_args!("gate:out:{k}:{batch}"))
    }
    /// Over a split site: the pending outbox entries (`<k>:<batch>`) by
    /// the time of their gate stage.
    pub fn outbox(&self) -> String {
        self.k(format_args!("gate:outbox"))
    }

    fn k(&self, rest: std::fmt::Arguments<'_>) -> String {
        format!("{}{}", self.prefix, rest)
    }

    pub fn views(&self, id: &ArticleId) -> String {
        self.a(id, format_args!("counter:views:{id}"))
    }
    pub fn uv(&self, id: &ArticleId) -> String {
        self.a(id, format_args!("hll:uv:{id}"))
    }
    pub fn meta(&self, id: &ArticleId) -> String {
        self.a(id, format_args!("meta:article:{id}"))
    }
    pub fn counters(&self, id: &ArticleId) -> String {
        self.a(id, format_args!("counter:article:{id}"))
    }
    pub fn bucket_h(&self, id: &ArticleId, hour: i64) -> String {
        self.a(id, format_args!("bucket:h:{id}:{hour}"))
    }
    pub fn uv_h(&self, id: &ArticleId, hour: i64) -> String {
        self.a(id, format_args!("hll:uv:h:{id}:{hour}"))
    }
    /// The hour's sketch of the network blocks of its counted views
    /// (`[review] mode = "suspicious"`).
    pub fn net_h(&self, id: &ArticleId, hour: i64) -> String {
        self.a(id, format_args!("hll:net:h:{id}:{hour}"))
    }
    /// The hour's sketch of the visitors of those views.
    pub fn netuv_h(&self, id: &ArticleId, hour: i64) -> String {
        self.a(id, format_args!("hll:netuv:h:{id}:{hour}"))
    }
    pub fn bucket_d(&self, id: &ArticleId, day: i64) -> String {
        self.a(id, format_args!("bucket:d:{id}:{day}"))
    }
    pub fn uv_d(&self, id: &ArticleId, day: i64) -> String {
        self.a(id, format_args!("hll:uv:d:{id}:{day}"))
    }
    /// Articles ever registered (events, `PUT`, posts): `max_articles`.
    pub fn articles_count(&self) -> String {
        self.k(format_args!("stats:articles"))
    }
    pub fn counted(&self) -> String {
        self.k(format_args!("stats:counted"))
    }
    pub fn quarantine(&self) -> String {
        self.k(format_args!("stats:quarantine"))
    }
    pub fn quarantine_h(&self, hour: i64) -> String {
        self.k(format_args!("stats:quarantine:h:{hour}"))
    }
    /// The site's figures by hour and minute (totals.lua; `GET /api/stats`).
    pub fn quarantine_articles_h(&self, hour: i64) -> String {
        self.k(format_args!("stats:quarantine:a:h:{hour}"))
    }
    pub fn crawlers_h(&self, hour: i64) -> String {
        self.k(format_args!("stats:crawler:h:{hour}"))
    }
    pub fn views_m(&self, minute: i64) -> String {
        self.k(format_args!("stats:views:m:{minute}"))
    }
    pub fn visitors_h(&self, hour: i64) -> String {
        self.k(format_args!("hll:site:h:{hour}"))
    }
    /// The copy of the site's bookkeeping `name` (`stats:articles`,
    /// `archive:dirty`, `archive:taking`, `archive:written`,
    /// `archive:evicted`, `time:`, `score:`) that writes of article `id`
    /// touch: the site's, except when the site spans slots
    /// (tagged, more than one shard), where each shard keeps its own in
    /// its slot (`shard.lua`'s `LK`) and readers take them all
    /// ([`Keys::ledgers`]).
    pub fn ledger(&self, id: &ArticleId, name: &str) -> String {
        self.a(id, format_args!("{name}"))
    }

    /// Counted events by category (field; `""` for none) in an hour and in
    /// a UTC day, every copy (apply.lua writes them where it writes the
    /// article's shard's bookkeeping, [`Keys::ledger`]): `scale=category`.
    pub fn categories_h(&self, hour: i64) -> Vec<String> {
        self.ledgers(&format!("stats:cat:h:{hour}"))
    }
    pub fn categories_d(&self, day: i64) -> Vec<String> {
        self.ledgers(&format!("stats:cat:d:{day}"))
    }

    /// Every copy of the site's bookkeeping `name` (see [`Keys::ledger`]):
    /// the site's, or one per shard.
    pub fn ledgers(&self, name: &str) -> Vec<String> {
        if self.spans_slots() {
            self.all_shards()
                .into_iter()
                .map(|sk| format!("{}{name}", sk.prefix))
                .collect()
        } else {
            vec![self.k(format_args!("{name}"))]
        }
    }

    /// The site's epoch marker (marker.rs): which lifetime of the site's
    /// data Redis holds.
    pub fn epoch(&self) -> String {
        self.k(format_args!("pipe:epoch"))
    }

    /// Every epoch marker of the site: [`Keys::epoch`] in the site's slot
    /// and, when the site spans slots, `epoch` in each shard's (each
    /// primary can lose its data alone).
    pub fn epochs(&self) -> Vec<String> {
        let mut out = vec![self.epoch()];
        if self.spans_slots() {
            out.extend(
                self.all_shards()
                    .iter()
                    .map(|sk| format!("{}epoch", sk.prefix)),
            );
        }
        out
    }

    /// When (Unix s) a node last flushed to the archive.
    pub fn archive_flushed(&self) -> String {
        self.k(format_args!("archive:flushed"))
    }
    /// The lock one node holds while it flushes.
    pub fn archive_lock(&self) -> String {
        self.k(format_args!("archive:lock"))
    }
    pub fn cursor(&self, id: u64) -> String {
        self.k(format_args!("cursor:{id:016x}"))
    }
    pub fn dedupe(&self, id: &ArticleId, kind: char, visitor: u128) -> String {
        self.k(format_args!("gate:dd:{id}:{kind}:{visitor:032x}"))
    }

    /// One slot of a gate family's hash (`gate:eid`, `gate:rl:v`,
    /// `gate:rl:ip`, `gate:bot`; see ingest.lua).
    pub fn gate_slot(&self, family: &str, slot: i64) -> String {
        self.k(format_args!("{family}:{slot}"))
    }

    /// Seed 003's voter set of an article.
    pub fn voted(&self, id: &ArticleId) -> String {
        self.a(id, format_args!("voted:{id}"))
    }

    /// Seed 000's `hot:score` in seed layout: the top 1000 exact scores,
    /// rewritten every `seed_refresh_secs`.
    pub fn seed_hot_score(&self) -> String {
        self.k(format_args!("hot:score"))
    }
    /// Seed 001's `hot:articles` (or `hot:articles:<category>`, the
    /// category as given) in seed layout.
    pub fn seed_hot_articles(&self, category: Option<&str>) -> String {
        match category {
            None => self.k(format_args!("hot:articles")),
            Some(c) => self.k(format_args!("hot:articles:{c}")),
        }
    }

    /// The categories whose `hot:articles:<category>` the last seed 001
    /// refresh wrote (seed layout), so the next one drops the emptied ones
    /// without scanning the keyspace.
    pub fn seed_hot_categories(&self) -> String {
        self.k(format_args!("seed:hot:categories"))
    }
    /// Seed 003's article hash in seed layout.
    pub fn seed_article(&self, id: &ArticleId) -> String {
        self.k(format_args!("article:{id}"))
    }
    /// Seed 003's group set in seed layout (the name as given).
    pub fn seed_group(&self, group: &str) -> String {
        self.k(format_args!("group:{group}"))
    }
}

impl ShardKeys {
    fn k(&self, rest: std::fmt::Arguments<'_>) -> String {
        format!("{}{}", self.prefix, rest)
    }
    pub fn changes(&self) -> String {
        self.k(format_args!("changes"))
    }
    pub fn changes_seq(&self) -> String {
        self.k(format_args!("changes:seq"))
    }
    pub fn changes_floor(&self) -> String {
        self.k(format_args!("changes:floor"))
    }
    pub fn active_h(&self, hour: i64) -> String {
        self.k(format_args!("active:h:{hour}"))
    }
    pub fn active_d(&self, day: i64) -> String {
        self.k(format_args!("active:d:{day}"))
    }
    /// Live articles by `publishedAt`.
    pub fn newest(&self) -> String {
        self.k(format_args!("articles:new"))
    }
    /// Live articles by filter value, then `publishedAt` (facets.lua).
    pub fn newest_by(&self) -> String {
        self.k(format_args!("articles:new:by"))
    }
    pub fn ranking_index(&self) -> String {
        self.k(format_args!("hot:index"))
    }

    /// The default ranking (gravity, 72 h, no filter): seed 000's
    /// `hot:score`, except in seed layout, where `hot:score` is the export
    /// of [`Keys::seed_hot_score`].
    pub fn ranking_default(&self) -> String {
        if self.seed_layout {
            self.k(format_args!("hot:gravity:72h:all"))
        } else {
            self.k(format_args!("hot:score"))
        }
    }
    /// The sorted set of one ranking. Seed 000's `hot:score` is the default
    /// one: gravity over 72 h, no filter.
    pub fn ranking(
        &self,
        model: ModelKind,
        range: RangeSpec,
        category: Option<&str>,
        kind: Option<&str>,
        group: Option<&str>,
    ) -> String {
        self.ranking_with(model, ModelParams::default(), range, category, kind, group)
    }

    /// [`Self::ranking`] of a model with its parameters: those it reads
    /// ([`ModelParams::suffix`]) follow its name (`gravity.hl6h`).
    pub fn ranking_with(
        &self,
        model: ModelKind,
        params: ModelParams,
        range: RangeSpec,
        category: Option<&str>,
        kind: Option<&str>,
        group: Option<&str>,
    ) -> String {
        let id = RankingId {
            model,
            range,
            filter: Filter {
                category: category.map(str::to_string),
                kind: kind.map(str::to_string),
                group: group.map(str::to_string),
            },
            params: params.of(model),
            day: None,
        };
        self.ranking_named(&id, range)
    }

    /// The sorted set of the ranking a query answered at `at` walks
    /// ([`RankingId::of`]); a ranking scaled by category names its UTC day
    /// after its parameters (`gravity.cat.d20419`). The range in the name
    /// is the query's as given (the vote models' rankings were named so
    /// before the identity was shared).
    pub fn ranking_of(&self, q: &HotQuery, at: Timestamp) -> String {
        self.ranking_named(&RankingId::of(q, at), q.range)
    }

    /// The undated name of [`Self::ranking_of`]: what a cursor's snapshot
    /// and the warm-up know a ranking by, whatever the day.
    pub fn ranking_undated(&self, q: &HotQuery) -> String {
        self.ranking_named(&RankingId::of(q, 0).undated(), q.range)
    }

    fn ranking_named(&self, id: &RankingId, range: RangeSpec) -> String {
        let default = HotQuery::default_page();
        let (category, kind, group) = (
            id.filter.category.as_deref(),
            id.filter.kind.as_deref(),
            id.filter.group.as_deref(),
        );
        let model = id.model;
        if model == default.model
            && id.params == default.params
            && range == default.range
            && id.filter == Filter::default()
            && id.day.is_none()
        {
            return self.ranking_default();
        }
        let filter = match (category, kind, group) {
            (None, None, None) => "all".to_string(),
            _ => {
                // Labels are free text: only their hash reaches the key.
                let text = format!(
                    "c={}\u{0}k={}\u{0}g={}",
                    category.unwrap_or("\u{1}"),
                    kind.unwrap_or("\u{1}"),
                    group.unwrap_or("\u{1}")
                );
                format!("{:016x}", murmur64a(text.as_bytes(), 0x686f_7472))
            }
        };
        let mut suffix = id.params.suffix(model);
        if let Some(day) = id.day {
            suffix.push_str(&format!(".d{day}"));
        }
        self.k(format_args!(
            "hot:{}{suffix}:{range}:{filter}",
            model.as_str()
        ))
    }
}

/// The state hash beside a ranking's sorted set.
pub fn ranking_state(zkey: &str) -> String {
    format!("{zkey}:state")
}

/// A node's claim to rebuild a ranking (rank.rs `Claim`), in its slot.
pub fn ranking_claim(zkey: &str) -> String {
    format!("{zkey}:rebuilding")
}

/// Where one rebuild of a ranking gathers its entries before they replace
/// the ranking at once (`writeback.lua` modes `b` and `r`): a name of its
/// own per rebuild (`nonce`), in the ranking's slot.
pub fn ranking_build(zkey: &str, nonce: u64) -> String {
    format!("{zkey}:build:{nonce:016x}")
}

/// Which buckets hold a window: hourly buckets back to the hourly horizon,
/// daily buckets before it.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowPlan {
    pub hours: std::ops::RangeInclusive<i64>,
    pub days: std::ops::RangeInclusive<i64>,
}

/// The oldest hour whose bucket still exists at `now`: hourly buckets live
/// `hourly_days + 1` days after their hour ends (`RedisStore::keeps`).
pub fn oldest_hour(now: Timestamp, hourly_days: u32) -> i64 {
    hour_of(now) - (i64::from(hourly_days) + 1) * 24
}

/// `hourly_days`: how many whole days before today hourly buckets are
/// kept (they live until their day is that old, plus one day).
///
/// A window is hour-exact whenever every hour it covers still has its
/// bucket (up to `(hourly_days + 1) * 24` hours: 192 by default). A longer
/// one takes hourly buckets from the start of the day `hourly_days` before
/// today and whole daily buckets before that, the oldest (partial) day
/// counted whole; its counts only fall with time alone (the oldest day
/// leaves at midnight), never rise.
pub fn window_plan(range: RangeSpec, now: Timestamp, hourly_days: u32) -> Option<WindowPlan> {
    let RangeSpec::Hours(n) = range else {
        return None;
    };
    let last = hour_of(now);
    let first = *crate::time::last_hours(last, n).start();
    if first > oldest_hour(now, hourly_days) {
        return Some(WindowPlan {
            hours: first..=last,
            #[allow(clippy::reversed_empty_ranges)]
            days: 1..=0,
        });
    }
    let horizon = (day_of(now) - i64::from(hourly_days)) * 24;
    let first_day = day_of(first * HOUR);
    Some(WindowPlan {
        hours: horizon..=last,
        days: first_day..=(horizon / 24 - 1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Decay, RisingSpec};

    #[test]
    fn plans() {
        let now = 1_763_760_000; // 21:20 UTC
        let p = window_plan(RangeSpec::Hours(72), now, 7).unwrap();
        assert_eq!(p.hours.clone().count(), 72);
        assert!(p.days.is_empty());
        let p = window_plan(RangeSpec::Hours(24 * 30), now, 7).unwrap();
        assert_eq!(*p.hours.start(), (day_of(now) - 7) * 24);
        assert_eq!(*p.days.end(), day_of(now) - 8);
        assert_eq!(*p.days.start(), day_of((hour_of(now) - 719) * HOUR));
        assert!(window_plan(RangeSpec::All, now, 7).is_none());
        // Up to 8 days (the hourly keep) the plan is hourly only.
        let p = window_plan(RangeSpec::Hours(192), now, 7).unwrap();
        assert_eq!(p.hours.clone().count(), 192);
        assert!(p.days.is_empty());
    }

    /// Issue 11 item 2: windows of 169-191 h counted the oldest partial day
    /// hour by hour before midnight and whole after it. With no events,
    /// a window's buckets may only lose hours as time passes.
    #[test]
    fn windows_never_gain_buckets_with_time_alone() {
        let midnight = 1_763_769_600; // a UTC midnight
        assert_eq!(midnight % DAY, 0);
        let covered = |p: &WindowPlan| -> std::collections::BTreeSet<i64> {
            let mut hours: std::collections::BTreeSet<i64> = p.hours.clone().collect();
            for d in p.days.clone() {
                hours.extend(d * 24..d * 24 + 24);
            }
            hours
        };
        for n in (1..=400).chain([720, 2160]) {
            let mut prev: Option<std::collections::BTreeSet<i64>> = None;
            for step in -30..30 {
                let now = midnight + step * HOUR + 1800;
                let p = window_plan(RangeSpec::Hours(n), now, 7).unwrap();
                let cur = covered(&p);
                // Past hours covered now were covered an hour ago too.
                if let Some(prev) = &prev {
                    let past: Vec<_> = cur.iter().filter(|h| **h < hour_of(now)).collect();
                    for h in past {
                        assert!(prev.contains(h), "n={n} at {step}: hour {h} joined");
                    }
                }
                if n <= 192 {
                    assert!(p.days.is_empty(), "n={n}");
                    assert_eq!(cur.len(), n as usize);
                    assert!(*p.hours.start() >= oldest_hour(now, 7));
                }
                prev = Some(cur);
            }
        }
    }

    #[test]
    fn default_ranking_is_seed_key() {
        let k = Keys::new("").shard(0);
        assert_eq!(
            k.ranking_with(
                ModelKind::Gravity,
                P,
                RangeSpec::Hours(72),
                None,
                None,
                None
            ),
            "hot:score"
        );
        let other = Keys::new("site1:").shard(0).ranking_with(
            ModelKind::Gravity,
            P,
            RangeSpec::Hours(24),
            Some("x"),
            None,
            None,
        );
        assert!(other.starts_with("site1:hot:gravity:24h:"));
    }

    const P: ModelParams = ModelParams {
        rising: RisingSpec {
            window: 1,
            baseline: 24,
            min: 5,
        },
        decay: Decay::Model,
        scale: crate::model::Scale::None,
    };

    /// A model's parameters are part of its ranking's name, and only those
    /// it reads.
    #[test]
    fn parameters_name_their_ranking() {
        let k = Keys::new("").shard(0);
        let half = ModelParams {
            decay: Decay::HalfLife(6),
            ..P
        };
        let r = |m, p, h| k.ranking_with(m, p, RangeSpec::Hours(h), None, None, None);
        assert_eq!(r(ModelKind::Gravity, half, 72), "hot:gravity.hl6h:72h:all");
        assert_eq!(
            r(ModelKind::Weighted, half, 24),
            "hot:weighted.hl6h:24h:all"
        );
        assert_eq!(r(ModelKind::Window, half, 24), "hot:window:24h:all");
        assert_eq!(r(ModelKind::Rising, P, 1), "hot:rising.b24h.m5:1h:all");
        let other = ModelParams {
            rising: RisingSpec {
                window: 3,
                baseline: 48,
                min: 2,
            },
            ..P
        };
        assert_eq!(r(ModelKind::Rising, other, 3), "hot:rising.b48h.m2:3h:all");
        // Scaled by category: the scale and the ranking's UTC day.
        let scaled = HotQuery {
            params: ModelParams {
                scale: crate::model::Scale::Category,
                ..half
            },
            ..HotQuery::top(ModelKind::Gravity, RangeSpec::Hours(24), 5)
        };
        let at = 20_419 * 86_400 + 5;
        assert_eq!(
            k.ranking_of(&scaled, at),
            "hot:gravity.hl6h.cat.d20419:24h:all"
        );
        assert_eq!(k.ranking_undated(&scaled), "hot:gravity.hl6h.cat:24h:all");
        assert_eq!(
            k.ranking_of(&HotQuery::default_page(), at),
            "hot:score",
            "an unscaled ranking has no day"
        );
        let spec = super::super::KEY_TABLE
            .iter()
            .find(|s| s.pattern == "hot:<model>:<range>:<filter>")
            .expect("the rankings' row");
        let re = regex::Regex::new(spec.regex).unwrap();
        for name in [
            "hot:gravity.hl6h:72h:all",
            "hot:rising.b48h.m2:3h:all",
            "hot:gravity.hl6h.cat.d20419:24h:all",
        ] {
            assert!(re.is_match(name), "{name}");
        }
    }
}
