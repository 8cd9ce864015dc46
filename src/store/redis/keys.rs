//! Key names. docs/redis-keys.md lists every key with its type, TTL and
//! writer; the Lua scripts build the same names from the same prefix.
//!
//! Article ids are validated (`[A-Za-z0-9_-]{1,64}`) before they reach a
//! key, and free-text filter labels only ever appear hashed, so no input
//! can forge a key.

use crate::model::{ArticleId, HOUR, HotQuery, RangeSpec, Timestamp, hour_of};
use crate::score::ModelKind;
use crate::sketch::murmur64a;

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
        let default = HotQuery::default_page();
        if model == default.model
            && range == default.range
            && category.is_none()
            && kind.is_none()
            && group.is_none()
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
        self.k(format_args!("hot:{}:{range}:{filter}", model.as_str()))
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

/// Whether a key carries a TTL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ttl {
    /// Lives until deleted.
    None,
    /// Always has an expiry, set by the script that creates it.
    Expires,
}

/// One row of the key table: docs/redis-keys.md renders these rows
/// ([`render_key_table`]) and a test checks every key a mixed load leaves
/// in Redis against them (type and TTL).
#[derive(Debug, Clone, Copy)]
pub struct KeySpec {
    /// The docs section the row belongs to.
    pub section: &'static str,
    /// The key as documented (`<id>` etc. are placeholders).
    pub pattern: &'static str,
    /// A regular expression the key (without prefix) matches.
    pub regex: &'static str,
    /// Redis type (`TYPE`).
    pub kind: &'static str,
    pub holds: &'static str,
    pub ttl: Ttl,
    pub ttl_text: &'static str,
    pub writer: &'static str,
}

/// Where a key lives on a Redis Cluster when the site has more than one
/// article shard (with one, every key of the site is in the slot of `{<site>}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// The site's slot, `{<site>}`: gate state, totals, the archive's and
    /// the posts' bookkeeping.
    Site,
    /// Shard `k`'s slot, `{<site>:s<k>}`: its change log, activity sets,
    /// `articles:new`, rankings and their index.
    Shard,
    /// The slot of the article's shard: the article's own keys.
    Article,
    /// Each shard's slot: the copy each shard keeps of the site's
    /// bookkeeping that writes of its articles touch ([`Keys::ledger`]).
    Ledger,
    /// Never on a sharded cluster (seed layout, the ingest pipeline:
    /// config refuses either with `shards > 1`).
    OneShard,
}

/// Per-article keys (their article's shard slot on a sharded cluster).
const ARTICLE_KEYS: &[&str] = &[
    "counter:views:<id>",
    "hll:uv:<id>",
    "meta:article:<id>",
    "voted:<id>",
    "counter:article:<id>",
    "bucket:h:<id>:<hour>",
    "hll:uv:h:<id>:<hour>",
    "bucket:d:<id>:<day>",
    "hll:uv:d:<id>:<day>",
];

/// The site's bookkeeping of which each shard keeps a copy when the site
/// spans slots ([`Keys::ledger`]).
const LEDGER_KEYS: &[&str] = &[
    "post:req:<hex>",
    "stats:articles",
    "archive:dirty",
    "archive:taking",
    "archive:written",
    "archive:evicted",
    "time:",
    "score:",
];

/// Per-shard keys, as named with one shard (after a shard's tag on a
/// sharded cluster) and with `s<k>:` on one Redis.
const SHARD_KEYS: &[&str] = &[
    "hot:score",
    "active:h:<hour>",
    "active:d:<day>",
    "articles:new",
    "articles:new:by",
    "hot:<model>:<range>:<filter>",
    "hot:score:state",
    "hot:<model>:<range>:<filter>:state",
    "hot:index",
    "<ranking>:build:<hex>",
    "<ranking>:rebuilding",
    "changes",
    "changes:seq",
    "changes:floor",
    "gate:done:<hex>",
    "epoch",
];

impl KeySpec {
    /// The slot this key lives in on a cluster with more than one shard.
    pub fn slot(&self) -> Slot {
        if matches!(self.section, "layouts" | "pipeline") {
            Slot::OneShard
        } else if ARTICLE_KEYS.contains(&self.pattern) {
            Slot::Article
        } else if LEDGER_KEYS.contains(&self.pattern) {
            Slot::Ledger
        } else if SHARD_KEYS.contains(&self.pattern)
            || SHARD_KEYS.contains(&self.pattern.trim_start_matches("s<k>:"))
        {
            Slot::Shard
        } else {
            Slot::Site
        }
    }

    /// The id in `rest` (a key without its prefix or tag) of a per-article
    /// key ([`Slot::Article`]), e.g. `42` in `bucket:h:42:493000`.
    pub fn article_in<'a>(&self, rest: &'a str) -> Option<&'a str> {
        if self.slot() != Slot::Article {
            return None;
        }
        let head = self.pattern.split("<id>").next()?;
        rest.strip_prefix(head)?.split(':').next()
    }
}

macro_rules! key_spec {
    ($section:expr, $pattern:expr, $regex:expr, $kind:expr, $holds:expr, $ttl:expr, $ttl_text:expr, $writer:expr) => {
        KeySpec {
            section: $section,
            pattern: $pattern,
            regex: $regex,
            kind: $kind,
            holds: $holds,
            ttl: $ttl,
            ttl_text: $ttl_text,
            writer: $writer,
        }
    };
}

/// Every key the Redis store writes.
pub const KEY_TABLE: &[KeySpec] = &[
    key_spec!(
        "seed000",
        "counter:views:<id>",
        r"^counter:views:[A-Za-z0-9_-]{1,64}$",
        "string",
        "lifetime PV (counted views only), `INCRBY`",
        Ttl::None,
        "none",
        "ingest.lua"
    ),
    key_spec!(
        "seed000",
        "hll:uv:<id>",
        r"^hll:uv:[A-Za-z0-9_-]{1,64}$",
        "string",
        "lifetime UV sketch (HLL); `PFADD` of exactly the 16 bytes `Event::visitor_element()`, so its byte image equals the embedded store's sketch",
        Ttl::None,
        "none",
        "ingest.lua"
    ),
    key_spec!(
        "seed000",
        "meta:article:<id>",
        r"^meta:article:[A-Za-z0-9_-]{1,64}$",
        "hash",
        "`publishedAt` (Unix s), `known` (1 = created by `PUT`), `deleted` (1/0), and when set `title`, `url`, `author`, `category`, `kind`, `summary`, `cover`, `groups` (JSON array); with a pipeline journal, `ops`: how many article operations (PUT, post, vote, delete) changed it, the number the journal and the archive's position record (docs/design.md, \"Disaster recovery\")",
        Ttl::None,
        "none",
        "put.lua, post.lua, delete.lua, ingest.lua (first counted event); vote.lua (`ops`)"
    ),
    key_spec!(
        "seed000",
        "hot:score",
        r"^hot:score$",
        "zset",
        "the default ranking (gravity, `range=72h`, no filter): member = article id, score = gravity score (an upper bound, see Freshness); seed layout: the exact lifetime gravity scores of the top 1000, rewritten every `seed_refresh_secs` (hotrank's ranking is then `hot:gravity:72h:all`)",
        Ttl::None,
        "none",
        "writeback.lua; seed.rs (seed layout)"
    ),
    key_spec!(
        "seed003",
        "article:",
        r"^article:$",
        "string",
        "the post counter (`INCR`); ids already taken are skipped; seed layout: kept at or past every numeric id hotrank creates (`PUT`, a first event), so the site's `INCR` never takes one",
        Ttl::None,
        "none",
        "post.lua; seed_post.lua, seed_claim.lua (seed layout)"
    ),
    key_spec!(
        "seed003",
        "post:req:<hex>",
        r"^post:req:[0-9a-f]{32}$",
        "string",
        "the id one post.lua call created, so a call re-sent after a lost reply creates nothing twice (over a split site: `post_at.lua`'s, per shard)",
        Ttl::Expires,
        "2 min",
        "post.lua, post_at.lua"
    ),
    key_spec!(
        "seed003",
        "post:id:<hex>",
        r"^post:id:[0-9a-f]{32}$",
        "string",
        "over a split site only: the id the first stage of one post reserved (`post_id.lua`), so a re-sent call reserves nothing twice",
        Ttl::Expires,
        "2 min",
        "post_id.lua"
    ),
    key_spec!(
        "seed003",
        "voted:<id>",
        r"^voted:[A-Za-z0-9_-]{1,64}$",
        "set",
        "who voted (32 hex digits of the keyed user hash; seed layout: `user:<userId>` as sent), the poster included",
        Ttl::Expires,
        "until voting closes",
        "post.lua, vote.lua"
    ),
    key_spec!(
        "seed003",
        "time:",
        r"^time:$",
        "zset",
        "posted or voted articles (seed layout: member `article:<id>`), score = `publishedAt`",
        Ttl::None,
        "none",
        "post.lua, vote.lua"
    ),
    key_spec!(
        "seed003",
        "score:",
        r"^score:$",
        "zset",
        "the seed's vote score `publishedAt + 432·(ups − downs)` (seed layout: member `article:<id>`, and the votes ranking itself)",
        Ttl::None,
        "none",
        "post.lua, vote.lua"
    ),
    key_spec!(
        "layouts",
        "article:<id>",
        r"^article:[A-Za-z0-9_-]{1,64}$",
        "hash",
        "seed layout only: seed 003's `title`, `link`, `poster` (`user:<userId>`), `time` (publishedAt), `votes` (the poster's included)",
        Ttl::None,
        "none",
        "seed_post.lua, seed_vote.lua (an article hotrank knows, on its first vote)"
    ),
    key_spec!(
        "layouts",
        "group:<name>",
        r"^group:.+$",
        "set",
        "seed layout only: members `article:<id>` of the group (the name as given)",
        Ttl::None,
        "none",
        "seed_post.lua, seed.rs (`PUT` and group changes move the member, DELETE removes it)"
    ),
    key_spec!(
        "layouts",
        r"cnt:pv\|uv\|dur\|like\|cmt:<id>:<yyyyMMddHH>",
        r"^cnt:(pv|uv|dur|like|cmt):[A-Za-z0-9_-]{1,64}:[0-9]{10}$",
        "string",
        "seed layout only: seed 001's hourly counts (UTC hour of the event): PV, UV (the hour's `PFCOUNT`), dwell seconds, likes, comments",
        Ttl::Expires,
        "hour end + 7 days",
        "seed_apply.lua (ingest)"
    ),
    key_spec!(
        "layouts",
        "hot:articles",
        r"^hot:articles$",
        "zset",
        "seed layout only: seed 001's ranking, member = id, score = the weighted score over the last 24 h, for every live article active in them",
        Ttl::None,
        "none",
        "seed.rs (every `seed_refresh_secs`)"
    ),
    key_spec!(
        "layouts",
        "hot:articles:<category>",
        r"^hot:articles:.+$",
        "zset",
        "seed layout only: the same for one category (as given)",
        Ttl::None,
        "none",
        "seed.rs (every `seed_refresh_secs`)"
    ),
    key_spec!(
        "layouts",
        "seed:hot:categories",
        r"^seed:hot:categories$",
        "set",
        "seed layout only: the categories whose `hot:articles:<category>` the last refresh wrote (the next refresh deletes those it no longer writes)",
        Ttl::None,
        "none",
        "seed.rs (every `seed_refresh_secs`)"
    ),
    key_spec!(
        "layouts",
        "<yyyy-MM-dd>",
        r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
        "zset",
        "seed layout only: seed 004's clicks of one UTC day, member = id, score = counted views",
        Ttl::Expires,
        "day end + `retention.hourly_days` + 1 day",
        "seed_apply.lua (ingest)"
    ),
    key_spec!(
        "counters",
        "counter:article:<id>",
        r"^counter:article:[A-Za-z0-9_-]{1,64}$",
        "hash",
        "lifetime `likes`, `comments`, `favorites`, `shares`, `dwell_s`, `dwell_n`, votes `ups`, `downs`, quarantine tallies `q_dup`, `q_rl`, `q_bot`, `q_rep`",
        Ttl::None,
        "none",
        "ingest.lua, vote.lua, post.lua (the poster's vote)"
    ),
    key_spec!(
        "counters",
        "bucket:h:<id>:<hour>",
        r"^bucket:h:[A-Za-z0-9_-]{1,64}:-?[0-9]+$",
        "hash",
        "the hour's `pv`, `likes`, `comments`, `favorites`, `shares`, `dwell_s`, `dwell_n`, `q_dup`, `q_rl`, `q_bot`, `q_rep`",
        Ttl::Expires,
        "hour end + `redis.hourly_days` + 1 day",
        "ingest.lua"
    ),
    key_spec!(
        "counters",
        "hll:uv:h:<id>:<hour>",
        r"^hll:uv:h:[A-Za-z0-9_-]{1,64}:-?[0-9]+$",
        "string",
        "the hour's UV sketch",
        Ttl::Expires,
        "as its bucket (set after the `PFADD` that creates it)",
        "ingest.lua"
    ),
    key_spec!(
        "counters",
        "bucket:d:<id>:<day>",
        r"^bucket:d:[A-Za-z0-9_-]{1,64}:-?[0-9]+$",
        "hash",
        "the day's counters (no quarantine)",
        Ttl::Expires,
        "day end + `retention.hourly_days` + 1 day",
        "ingest.lua"
    ),
    key_spec!(
        "counters",
        "hll:uv:d:<id>:<day>",
        r"^hll:uv:d:[A-Za-z0-9_-]{1,64}:-?[0-9]+$",
        "string",
        "the day's UV sketch",
        Ttl::Expires,
        "as its bucket (set after the `PFADD` that creates it)",
        "ingest.lua"
    ),
    key_spec!(
        "counters",
        "active:h:<hour>",
        r"^active:h:-?[0-9]+$",
        "set",
        "ids with a counted event in the hour (ranking builds)",
        Ttl::Expires,
        "as hourly buckets",
        "ingest.lua"
    ),
    key_spec!(
        "counters",
        "active:d:<day>",
        r"^active:d:-?[0-9]+$",
        "set",
        "ids with a counted event in the day",
        Ttl::Expires,
        "as daily buckets",
        "ingest.lua"
    ),
    key_spec!(
        "counters",
        "articles:new",
        r"^articles:new$",
        "zset",
        "live (not deleted) articles, score = `publishedAt` (`GET /api/new`; `ZCARD` = live articles)",
        Ttl::None,
        "none",
        "put/post/delete/ingest.lua"
    ),
    key_spec!(
        "counters",
        "articles:new:by",
        r"^articles:new:by$",
        "zset",
        "live articles with a category, kind or group, one member per value: `c`/`k`/`g`, the value's byte length, `:`, the value, 9999999999999 − `publishedAt` (13 digits), the id; score 0 (`GET /api/new` with a filter reads one value's range, facets.lua); the member `~filled` marks it filled for articles written before it existed",
        Ttl::None,
        "none",
        "put/post/delete.lua"
    ),
    key_spec!(
        "counters",
        "stats:articles",
        r"^stats:articles$",
        "string",
        "articles ever registered (deleted ones included): what `max_articles` bounds",
        Ttl::None,
        "none",
        "put/post/ingest.lua, import"
    ),
    key_spec!(
        "counters",
        "stats:counted",
        r"^stats:counted$",
        "string",
        "counted events, all articles",
        Ttl::None,
        "none",
        "ingest.lua"
    ),
    key_spec!(
        "counters",
        "stats:quarantine",
        r"^stats:quarantine$",
        "hash",
        "`q_dup`, `q_rl`, `q_bot`, `q_rep` totals",
        Ttl::None,
        "none",
        "ingest.lua"
    ),
    key_spec!(
        "counters",
        "stats:quarantine:h:<hour>",
        r"^stats:quarantine:h:-?[0-9]+$",
        "hash",
        "the same per hour",
        Ttl::Expires,
        "hour end + retention + 1 day",
        "ingest.lua"
    ),
    key_spec!(
        "gate",
        "gate:eid:<slot>",
        r"^gate:eid:-?[0-9]+$",
        "hash",
        "field = eventId hash (32 hex digits), value = arrival second (gate clock), for **counted** events only (refused ones leave nothing); slot = gate clock ÷ `gate.event_id_ttl_secs`",
        Ttl::Expires,
        "end of the next slot",
        "ingest.lua"
    ),
    key_spec!(
        "gate",
        "gate:dd:<id>:<k>:<vhex>",
        r"^gate:dd:[A-Za-z0-9_-]{1,64}:[vlfs]:[0-9a-f]{32}$",
        "string",
        "last counted event time of (article, visitor, kind `v`/`l`/`f`/`s`): the dedupe window",
        Ttl::Expires,
        "window + 1 h",
        "ingest.lua"
    ),
    key_spec!(
        "gate",
        "gate:rl:v:<slot>",
        r"^gate:rl:v:-?[0-9]+$",
        "hash",
        "field = visitor (32 hex digits), value = its sliding rate log (its last N admission times in ms, 15-digit fixed width, oldest first), then a bar (`\\|`) and `<ms>,<id>;` per article it viewed in the last 60 s (the behaviour rule); slot = gate clock ÷ 120 s",
        Ttl::Expires,
        "end of the next slot",
        "ingest.lua"
    ),
    key_spec!(
        "gate",
        "gate:rl:ip:<slot>",
        r"^gate:rl:ip:-?[0-9]+$",
        "hash",
        "field = client IP hash (16 hex digits), value = its rate log; slot = gate clock ÷ 120 s",
        Ttl::Expires,
        "end of the next slot",
        "ingest.lua"
    ),
    key_spec!(
        "gate",
        "gate:bot:<slot>",
        r"^gate:bot:-?[0-9]+$",
        "hash",
        "field = visitor quarantined by the behaviour rule, value = until when (rate clock, ms); slot = gate clock ÷ `gate.bot_quarantine_secs`",
        Ttl::Expires,
        "end of the next slot",
        "ingest.lua"
    ),
    key_spec!(
        "gate",
        "gate:time",
        r"^gate:time$",
        "hash",
        "the site's gate clock, which arrival (rate limits, the behaviour rule, eventIds) and the gate's slots follow: `wall` = Redis's `TIME` at the last gate call (ms), `at` = the gate time it gave (ms; advanced by the wall's progress, never back); `source` = `node` only where tests that simulate time make the gate follow the nodes' clocks",
        Ttl::None,
        "none",
        "ingest.lua, pipe_filter.lua (gate_clock.lua)"
    ),
    key_spec!(
        "gate",
        "gate:batch:<hex>",
        r"^gate:batch:[0-9a-f]{32}$",
        "string",
        "the answer of one ingest.lua call (verdicts), so a call retried after a lost reply applies nothing twice",
        Ttl::Expires,
        "2 min",
        "ingest.lua"
    ),
    key_spec!(
        "gate",
        "gate:out:<k>:<hex>",
        r"^gate:out:[0-9]{1,3}:[0-9a-f]{32}$",
        "string",
        "over a split site only: shard `k`'s outbox entry of one batch (its counted events, quarantine tallies and new articles, MessagePack), written by the gate stage, removed once the shard's count stage ran",
        Ttl::None,
        "none (removed after the count stage, or by the sweeper)",
        "gate_stage.lua; split.rs removes it"
    ),
    key_spec!(
        "gate",
        "gate:outbox",
        r"^gate:outbox$",
        "zset",
        "over a split site only: pending outbox entries, member `<k>:<batch>`, score = the gate stage's `now`; the sweeper applies those older than 5 s",
        Ttl::None,
        "none",
        "gate_stage.lua; split.rs"
    ),
    key_spec!(
        "gate",
        "gate:done:<hex>",
        r"^gate:done:[0-9a-f]{32}$",
        "string",
        "over a split site only, in each shard's slot: the batch's count stage ran there (it runs once)",
        Ttl::Expires,
        "1 day",
        "count_stage.lua"
    ),
    key_spec!(
        "rankings",
        "hot:<model>:<range>:<filter>",
        r"^hot:[a-z]+:[0-9a-z]+:(all|[0-9a-f]{16})$",
        "zset",
        "one ranking: member = id, score = an upper bound of its score (exact for the entries the last query visited); `<filter>` = `all` or a 64-bit hash of category/kind/group",
        Ttl::Expires,
        "1 h unused",
        "writeback.lua"
    ),
    key_spec!(
        "rankings",
        "hot:score:state",
        r"^hot:score:state$",
        "hash",
        "`seq` (change seq the ranking has taken in), `now` (time of its newest scores)",
        Ttl::None,
        "none",
        "writeback.lua"
    ),
    key_spec!(
        "rankings",
        "hot:<model>:<range>:<filter>:state",
        r"^hot:[a-z]+:[0-9a-z]+:(all|[0-9a-f]{16}):state$",
        "hash",
        "the same for another ranking",
        Ttl::Expires,
        "as its ranking",
        "writeback.lua"
    ),
    key_spec!(
        "rankings",
        "<ranking>:build:<hex>",
        r"^hot:(score|[a-z]+:[0-9a-z]+:(all|[0-9a-f]{16})):build:[0-9a-f]{16}$",
        "zset",
        "a rebuild of the ranking `<ranking>` in progress (one per rebuild): its entries gathered over several calls, renamed over the ranking by the last",
        Ttl::Expires,
        "10 min (an abandoned rebuild)",
        "writeback.lua"
    ),
    key_spec!(
        "rankings",
        "<ranking>:rebuilding",
        r"^hot:(score|[a-z]+:[0-9a-z]+:(all|[0-9a-f]{16})):rebuilding$",
        "string",
        "a token of the node rebuilding the ranking `<ranking>` (`SET NX`): other nodes' queries that need the same rebuild wait for it (at most 2 min), then walk what it built",
        Ttl::Expires,
        "10 s, renewed every 3 s while the rebuild runs; given back by its node when the rebuild ends (or at its next claim or shutdown, if Redis was away)",
        "rank.rs (`Claim`)"
    ),
    key_spec!(
        "rankings",
        "hot:index",
        r"^hot:index$",
        "set",
        "names of live rankings (at most `rankings.max_live`; the least recently used is dropped)",
        Ttl::None,
        "none",
        "writeback.lua, maintenance"
    ),
    key_spec!(
        "rankings",
        "changes",
        r"^changes$",
        "zset",
        "member = article id, score = seq of its latest change (counted event, `PUT`, delete, vote)",
        Ttl::None,
        "none (entries older than every ranking's `seq` are removed each minute)",
        "ingest/put/post/vote/delete.lua"
    ),
    key_spec!(
        "rankings",
        "archive:dirty",
        r"^archive:dirty$",
        "set",
        "article ids changed (counted event, vote, `PUT`, post, delete) since the archive writer last took the set (at most one member per article, also without a writer)",
        Ttl::None,
        "none (renamed to `archive:taking` by each flush)",
        "apply.lua, vote/put/post/delete.lua; seed_vote/seed_post/seed_delete.lua (seed layout)"
    ),
    key_spec!(
        "rankings",
        "archive:taking",
        r"^archive:taking$",
        "set",
        "the ids a flush took, deleted once they are in the archive, merged back into `archive:dirty` when the write failed",
        Ttl::None,
        "none",
        "archive writer (src/archive/writer.rs)"
    ),
    key_spec!(
        "rankings",
        "pipe:epoch",
        r"^pipe:epoch$",
        "string",
        "the site's epoch: which lifetime of its data this Redis holds, created by the first node on a new site (or one written before epochs). A node learns it once and every write it sends carries it: a Redis that lost its data (restarted empty, FLUSHALL, a lost disk) refuses them, and `/readyz` answers 503, until `hotrank archive restore` or `hotrank redis-ack-loss` sets it again. With a journal (`pipeline.log_url`) it equals the journal's `pipe:journal:epoch` and the archive's `pipeline.epoch`, and only `hotrank archive restore --replay` sets it again (docs/design.md, \"Disaster recovery\")",
        Ttl::None,
        "none",
        "marker.rs (a new site; `redis-ack-loss`, `archive import`/`restore`); journal.rs (`Journal::attach`); replay.rs (last step of a restore)"
    ),
    key_spec!(
        "rankings",
        "archive:flushed",
        r"^archive:flushed$",
        "string",
        "wall-clock time (Unix s) of the last successful archive flush (`archiveAgeSeconds` in `/api/stats`)",
        Ttl::None,
        "none",
        "archive writer (src/archive/writer.rs)"
    ),
    key_spec!(
        "rankings",
        "archive:lock",
        r"^archive:lock$",
        "string",
        "token of the node flushing to the archive",
        Ttl::Expires,
        "3 × `archive.flush_secs` (at least 30 s), deleted by its holder after the flush",
        "archive writer (src/archive/writer.rs)"
    ),
    key_spec!(
        "rankings",
        "archive:written",
        r"^archive:written$",
        "zset",
        "member = article id, score = data time (Unix s) of the flush that last archived it or of its last restore: eviction takes those older than `archive.evict_after_secs`",
        Ttl::None,
        "none",
        "archive writer, restore.lua"
    ),
    key_spec!(
        "rankings",
        "archive:evicted",
        r"^archive:evicted$",
        "set",
        "tombstones: ids of articles evicted from Redis (their meta and `articles:new` entry stay); an event, vote, read or ranking that needs one restores it from the archive first",
        Ttl::None,
        "none",
        "evict.lua, restore.lua"
    ),
    key_spec!(
        "rankings",
        "changes:seq",
        r"^changes:seq$",
        "string",
        "the change sequence",
        Ttl::None,
        "none",
        "ingest/put/post/vote/delete.lua"
    ),
    key_spec!(
        "rankings",
        "clock",
        r"^clock$",
        "string",
        "the newest arrival time (s) any ingest call carried: queries never run before it",
        Ttl::None,
        "none",
        "ingest.lua"
    ),
    key_spec!(
        "rankings",
        "changes:floor",
        r"^changes:floor$",
        "string",
        "entries at or below were collected",
        Ttl::None,
        "none",
        "maintenance"
    ),
    key_spec!(
        "rankings",
        "cursor:<16 hex>",
        r"^cursor:[0-9a-f]{16}$",
        "string",
        "a cursor's snapshot (ids, exact scores, counters, `generatedAt`)",
        Ttl::Expires,
        "10 min unused",
        "any node"
    ),
    key_spec!(
        "shards",
        "shards",
        r"^shards$",
        "string",
        "the site's shard count N when more than 1, set by its first node's readiness check: a node with another N is not ready (`/readyz` answers 503)",
        Ttl::None,
        "none",
        "any node (`ready()`)"
    ),
    key_spec!(
        "shards",
        "epoch",
        r"^epoch$",
        "string",
        "on a cluster with more than one shard: each shard's copy of `pipe:epoch`, under the shard's tag (`{<site>:s<k>}epoch`), so a primary that lost its shards' data is found too",
        Ttl::None,
        "none",
        "marker.rs"
    ),
    key_spec!(
        "shards",
        "s<k>:changes",
        r"^s[0-9]{1,3}:changes$",
        "zset",
        "shard `k`'s change log: as `changes`, for the articles of the shard only",
        Ttl::None,
        "none (collected as `changes`)",
        "ingest/put/post/vote/delete.lua"
    ),
    key_spec!(
        "shards",
        "s<k>:changes:seq",
        r"^s[0-9]{1,3}:changes:seq$",
        "string",
        "shard `k`'s change sequence",
        Ttl::None,
        "none",
        "ingest/put/post/vote/delete.lua"
    ),
    key_spec!(
        "shards",
        "s<k>:changes:floor",
        r"^s[0-9]{1,3}:changes:floor$",
        "string",
        "entries of `s<k>:changes` at or below were collected",
        Ttl::None,
        "none",
        "maintenance"
    ),
    key_spec!(
        "shards",
        "s<k>:active:h:<hour>",
        r"^s[0-9]{1,3}:active:h:-?[0-9]+$",
        "set",
        "the shard's ids with a counted event in the hour",
        Ttl::Expires,
        "as hourly buckets",
        "ingest.lua"
    ),
    key_spec!(
        "shards",
        "s<k>:active:d:<day>",
        r"^s[0-9]{1,3}:active:d:-?[0-9]+$",
        "set",
        "the shard's ids with a counted event in the day",
        Ttl::Expires,
        "as daily buckets",
        "ingest.lua"
    ),
    key_spec!(
        "shards",
        "s<k>:articles:new",
        r"^s[0-9]{1,3}:articles:new$",
        "zset",
        "the shard's live articles, score = `publishedAt` (`GET /api/new` merges every shard's; `/api/stats` sums their `ZCARD`)",
        Ttl::None,
        "none",
        "put/post/delete/ingest.lua"
    ),
    key_spec!(
        "shards",
        "s<k>:articles:new:by",
        r"^s[0-9]{1,3}:articles:new:by$",
        "zset",
        "the shard's `articles:new:by` (`GET /api/new` with a filter merges every shard's range of one value)",
        Ttl::None,
        "none",
        "put/post/delete.lua"
    ),
    key_spec!(
        "shards",
        "s<k>:hot:score",
        r"^s[0-9]{1,3}:hot:score$",
        "zset",
        "the default ranking's bounds of the shard's articles (a query walks every shard's)",
        Ttl::None,
        "none",
        "writeback.lua"
    ),
    key_spec!(
        "shards",
        "s<k>:hot:score:state",
        r"^s[0-9]{1,3}:hot:score:state$",
        "hash",
        "`seq` (of `s<k>:changes:seq`) and `now` of `s<k>:hot:score`",
        Ttl::None,
        "none",
        "writeback.lua"
    ),
    key_spec!(
        "shards",
        "s<k>:hot:<model>:<range>:<filter>",
        r"^s[0-9]{1,3}:hot:[a-z]+:[0-9a-z]+:(all|[0-9a-f]{16})$",
        "zset",
        "another ranking's bounds of the shard's articles",
        Ttl::Expires,
        "1 h unused",
        "writeback.lua"
    ),
    key_spec!(
        "shards",
        "s<k>:hot:<model>:<range>:<filter>:state",
        r"^s[0-9]{1,3}:hot:[a-z]+:[0-9a-z]+:(all|[0-9a-f]{16}):state$",
        "hash",
        "its state",
        Ttl::Expires,
        "as its ranking",
        "writeback.lua"
    ),
    key_spec!(
        "shards",
        "s<k>:<ranking>:build:<hex>",
        r"^s[0-9]{1,3}:hot:(score|[a-z]+:[0-9a-z]+:(all|[0-9a-f]{16})):build:[0-9a-f]{16}$",
        "zset",
        "a rebuild of one of the shard's rankings in progress",
        Ttl::Expires,
        "10 min (an abandoned rebuild)",
        "writeback.lua"
    ),
    key_spec!(
        "shards",
        "s<k>:<ranking>:rebuilding",
        r"^s[0-9]{1,3}:hot:(score|[a-z]+:[0-9a-z]+:(all|[0-9a-f]{16})):rebuilding$",
        "string",
        "a node's claim to rebuild a ranking over every shard (shard 0's name stands for all)",
        Ttl::Expires,
        "10 s, renewed every 3 s while the rebuild runs; given back when it ends",
        "rank.rs (`Claim`)"
    ),
    key_spec!(
        "shards",
        "s<k>:hot:index",
        r"^s[0-9]{1,3}:hot:index$",
        "set",
        "names of the shard's live rankings (at most `rankings.max_live` per shard)",
        Ttl::None,
        "none",
        "writeback.lua, maintenance"
    ),
    key_spec!(
        "pipeline",
        "pipe:raw:<n>",
        r"^pipe:raw:[0-9]{1,4}$",
        "stream",
        "partition `n` of events queued by API nodes (`hash(article) % pipeline.partitions`): fields `n` (the node's now), then ingest.lua's 12 event fields; consumer group `filter`",
        Ttl::None,
        "none; trimmed (`XTRIM MINID`) to the oldest entry group `filter` has not acknowledged, every `pipeline.trim_every_ms`",
        "pipe_append.lua; pipe_filter.lua acknowledges"
    ),
    key_spec!(
        "pipeline",
        "pipe:flagged:<n>",
        r"^pipe:flagged:[0-9]{1,4}$",
        "stream",
        "partition `n`'s gated events: fields `v` (verdict code), `k`, `a`, `b`, `t`, `s`, `g` (tally), `n` (now), `r` (raw entry id); consumer group `count`",
        Ttl::None,
        "none; trimmed like `pipe:raw:<n>`, for group `count`",
        "pipe_flag.lua (filter worker); pipe_count.lua acknowledges"
    ),
    key_spec!(
        "pipeline",
        "pipe:verdict:<ehex>",
        r"^pipe:verdict:[0-9a-f]{32}$",
        "string",
        "the verdict code of the events carrying one eventId (counted if any copy counted, else the latest copy's), for `GET /api/events/{eventId}`",
        Ttl::Expires,
        "`gate.event_id_ttl_secs` (at least 60 s) after the latest copy was gated",
        "pipe_flag.lua"
    ),
    key_spec!(
        "pipeline",
        "pipe:waiters:<n>",
        r"^pipe:waiters:[0-9]{1,4}$",
        "zset",
        "callers of `PipelineStore::ingest` (the tools' path) waiting for verdicts on flagged partition `n`: member `<token> <mark>`, score = deadline (ms); the count group's trim keeps every entry after a live mark",
        Ttl::None,
        "none (members removed by their caller, or by the trim past their deadline)",
        "pipeline.rs (`ingest_and_wait`); pipe_trim.lua"
    ),
    key_spec!(
        "pipeline",
        "pipe:refused",
        r"^pipe:refused$",
        "hash",
        "events the filter stage refused, by reason: `unknown_article` (`require_known_articles`), `too_many_articles` (`max_articles`); `pipeline.refused` in `/api/stats`",
        Ttl::None,
        "none",
        "pipe_flag.lua"
    ),
];

/// The markdown table of one docs section, as docs/redis-keys.md holds it
/// between `<!-- keys:<section> -->` and `<!-- /keys -->`.
pub fn render_key_table(section: &str) -> String {
    let mut out = String::from(
        "| key | type | holds | TTL | written by | tag on a cluster, shards > 1 |\n|---|---|---|---|---|---|\n",
    );
    for k in KEY_TABLE.iter().filter(|k| k.section == section) {
        let tag = match k.slot() {
            Slot::Site => "`{<site>}`",
            Slot::Shard => "`{<site>:s<k>}`",
            Slot::Article => "`{<site>:s<k>}`, k = the article's shard",
            Slot::Ledger => "`{<site>:s<k>}`: a copy per shard, of its articles",
            Slot::OneShard => "(one shard only)",
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {tag} |\n",
            k.pattern, k.kind, k.holds, k.ttl_text, k.writer
        ));
    }
    out
}

/// The row a key (without its prefix) belongs to.
pub fn key_spec_of(key: &str) -> Option<&'static KeySpec> {
    KEY_TABLE.iter().find(|k| {
        regex::Regex::new(k.regex)
            .map(|r| r.is_match(key))
            .unwrap_or(false)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
            k.ranking(ModelKind::Gravity, RangeSpec::Hours(72), None, None, None),
            "hot:score"
        );
        let other = Keys::new("site1:").shard(0).ranking(
            ModelKind::Gravity,
            RangeSpec::Hours(24),
            Some("x"),
            None,
            None,
        );
        assert!(other.starts_with("site1:hot:gravity:24h:"));
    }
}
