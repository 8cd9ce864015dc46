//! The key table's rows: what a key is (type, TTL, writer, docs
//! section), where it lives on a sharded cluster, and the table's markdown
//! for docs/redis-keys.md. The rows themselves are in key_table.rs.

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
    /// bookkeeping that writes of its articles touch
    /// ([`super::Keys::ledger`]).
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
    "hll:net:h:<id>:<hour>",
    "hll:netuv:h:<id>:<hour>",
    "bucket:d:<id>:<day>",
    "hll:uv:d:<id>:<day>",
];

/// The site's bookkeeping of which each shard keeps a copy when the site
/// spans slots ([`super::Keys::ledger`]).
const LEDGER_KEYS: &[&str] = &[
    "post:req:<hex>",
    "stats:articles",
    "archive:dirty",
    "archive:taking",
    "archive:written",
    "archive:evicted",
    "time:",
    "score:",
    "stats:cat:h:<hour>",
    "stats:cat:d:<day>",
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
