//! Import: dump records written into Redis under the store's prefix, with
//! TTLs relative to `now`; daily buckets are derived from hourly ones
//! where the dump has none (the embedded store keeps only hours), and
//! rankings are left to be rebuilt by their first query. The archive's
//! restore writes an article's record the same way ([`article_writes`]).

use std::collections::{BTreeMap, HashSet};

use super::dump::{CHUNK, GateFamily, glob_escape};
use super::keys::{DAY, oldest_hour};
use super::{Keys, RedisStore, meta_pairs, store_err};
use crate::model::{ArticleId, ArticleMeta, Timestamp};
use crate::sketch::Hll;
use crate::store::dump::{
    DumpBucket, DumpCounters, DumpError, RateScope, Record, bytes_from_b64, hll_from_b64,
};
use crate::store::{StoreError, StoreSettings};

/// Why an import into Redis failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("this Redis prefix already holds articles: import only into an empty one")]
    NotEmpty,
    #[error(transparent)]
    Dump(#[from] DumpError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Writes dump records under the store's prefix, which must hold no
/// article yet. Returns the number of articles written.
pub async fn load_redis(
    store: &RedisStore,
    records: &[Record],
    settings: &StoreSettings,
    now: Timestamp,
) -> Result<u64, LoadError> {
    let keys = store.keys();
    if holds_articles(store).await? {
        return Err(LoadError::NotEmpty);
    }
    let gate = GateSlots::at(store, settings, now).await?;
    let mut articles = 0u64;
    // `stats:articles`, one count per copy (keys.rs `Keys::ledger`).
    let mut registered: BTreeMap<String, u64> = keys
        .ledgers("stats:articles")
        .into_iter()
        .map(|k| (k, 0))
        .collect();
    let mut pipe = redis::pipe();
    let mut queued = 0usize;
    for r in records {
        match r {
            Record::Header { .. } | Record::Identity { .. } => {}
            Record::Article { id, .. } => {
                articles += 1;
                *registered
                    .entry(keys.ledger(id, "stats:articles"))
                    .or_default() += 1;
                article_writes(&mut pipe, store, r, settings, now, true)?;
            }
            _ => site_writes(&mut pipe, keys, r, settings, &gate, now)?,
        }
        queued += 1;
        if queued >= CHUNK {
            // (One pipeline per slot when the site spans slots.)
            store.query_pipe::<()>(&pipe).await.map_err(store_err)?;
            pipe = redis::pipe();
            queued = 0;
        }
    }
    // Rankings and node caches start over from the imported counters.
    for sk in keys.all_shards() {
        pipe.incr(sk.changes_seq(), 1);
    }
    for (key, n) in registered {
        pipe.set(key, n);
    }
    store.query_pipe::<()>(&pipe).await.map_err(store_err)?;
    Ok(articles)
}

/// Whether the store's prefix holds any article (`meta:article:*`).
async fn holds_articles(store: &RedisStore) -> Result<bool, StoreError> {
    let mut con = store.con();
    let mut existing = false;
    for (route, prefix) in store.keys().scan_prefixes() {
        let (_, found): (u64, Vec<String>) = con
            .scan(
                &route,
                0,
                &format!("{}meta:article:*", glob_escape(&prefix)),
                100_000,
            )
            .await
            .map_err(store_err)?;
        existing |= !found.is_empty();
    }
    Ok(existing)
}

/// The gate hashes an import writes entries into: per family, the hash of
/// the gate clock's slot and how long it lives.
struct GateSlots(BTreeMap<GateFamily, (String, i64)>);

impl GateSlots {
    /// Gate entries go into the slot of the site's gate clock (as gate.lua
    /// slots them; `now` where the gate follows the nodes' clocks). Their
    /// arrival times stay as exported: on the gate clock or the exporting
    /// node's, which agree within the nodes' skew.
    async fn at(
        store: &RedisStore,
        settings: &StoreSettings,
        now: Timestamp,
    ) -> Result<Self, StoreError> {
        let gate_now = (store.gate_clock_ms().await?).map_or(now, |ms| ms.div_euclid(1000));
        let slot_secs = |f: GateFamily| f.slot_secs(settings);
        let mut gate_keys: BTreeMap<GateFamily, (String, i64)> = BTreeMap::new();
        for f in GateFamily::ALL {
            let secs = slot_secs(f);
            let k = gate_now.div_euclid(secs);
            let life = ((k + 2) * secs - gate_now).max(60);
            gate_keys.insert(f, (store.keys().gate_slot(f.name(), k), life));
        }
        Ok(GateSlots(gate_keys))
    }

    /// Queues one entry of family `f`.
    fn put(&self, pipe: &mut redis::Pipeline, f: GateFamily, field: &str, v: String) {
        let (key, life) = &self.0[&f];
        pipe.hset(key, field, v).expire(key, *life);
    }
}

/// Queues on `pipe` the writes of one record of the site's own state:
/// totals, a dedupe entry, an event id or a rate log. Other records are
/// ignored.
fn site_writes(
    pipe: &mut redis::Pipeline,
    keys: &Keys,
    r: &Record,
    settings: &StoreSettings,
    gate: &GateSlots,
    now: Timestamp,
) -> Result<(), DumpError> {
    let dkeep = settings.retention_secs + DAY;
    let ttl = |expires_at: i64| (expires_at - now).max(60);
    match r {
        Record::Totals {
            counted,
            quarantine,
            by_hour,
        } => {
            pipe.set(keys.counted(), *counted);
            let names = ["q_dup", "q_rl", "q_bot", "q_rep"];
            for (n, v) in names.iter().zip(quarantine) {
                if *v > 0 {
                    pipe.hset(keys.quarantine(), *n, *v);
                }
            }
            for (h, q) in by_hour {
                let k = keys.quarantine_h(*h);
                for (n, v) in names.iter().zip(q) {
                    if *v > 0 {
                        pipe.hset(&k, *n, *v);
                    }
                }
                pipe.expire(&k, ttl((h + 1) * 3600 + dkeep));
            }
        }
        Record::Dedupe {
            article,
            kind,
            visitor,
            last,
        } => {
            let v = crate::store::dump::parse_u128(visitor)?;
            pipe.cmd("SET")
                .arg(keys.dedupe(article, *kind, v))
                .arg(*last)
                .arg("EX")
                .arg(i64::from(settings.dedupe_window_secs) + 3600);
        }
        Record::EventId { key, seen } => {
            let k = crate::store::dump::parse_u128(key)?;
            gate.put(
                pipe,
                GateFamily::EventId,
                &format!("{k:032x}"),
                seen.to_string(),
            );
        }
        Record::Rate { scope, key, log } => {
            let text: String = log.iter().map(|t| format!("{t:015}")).collect();
            let (family, field) = match scope {
                RateScope::Visitor => (
                    GateFamily::Visitor,
                    format!("{:032x}", crate::store::dump::parse_u128(key)?),
                ),
                RateScope::Ip => (
                    GateFamily::Ip,
                    format!("{:016x}", crate::store::dump::parse_u64(key)?),
                ),
            };
            gate.put(pipe, family, &field, text);
        }
        _ => {}
    }
    Ok(())
}

/// Queues on `pipe` the writes that put one article record into Redis
/// with TTLs relative to `now`: counters, votes, the lifetime sketch (its
/// exact bytes), the hourly buckets Redis keeps and the daily buckets
/// (from the record, or derived from its hours), and their activity sets.
/// `with_meta`: also its metadata and `articles:new` entry (import); a
/// restore from the archive leaves those alone, as eviction keeps them.
/// Other records are ignored.
pub(super) fn article_writes(
    pipe: &mut redis::Pipeline,
    store: &RedisStore,
    record: &Record,
    settings: &StoreSettings,
    now: Timestamp,
    with_meta: bool,
) -> Result<(), DumpError> {
    let Record::Article {
        id,
        meta,
        known,
        deleted,
        lifetime,
        hours,
        days,
        votes,
    } = record
    else {
        return Ok(());
    };
    let keys = store.keys();
    if votes.ups > 0 {
        pipe.hset(keys.counters(id), "ups", votes.ups);
    }
    if votes.downs > 0 {
        pipe.hset(keys.counters(id), "downs", votes.downs);
    }
    let open_for = meta.published_at + settings.models.votes.window_secs() - now;
    if !votes.voters.is_empty() && open_for > 0 {
        pipe.cmd("SADD").arg(keys.voted(id)).arg(&votes.voters);
        pipe.expire(keys.voted(id), open_for);
    }
    if with_meta {
        meta_writes(pipe, keys, id, meta, *known, *deleted);
    }
    if lifetime.pv > 0 {
        pipe.set(keys.views(id), lifetime.pv);
    }
    for (f, v) in bucket_fields(lifetime) {
        if f != "pv" {
            pipe.hset(keys.counters(id), f, v);
        }
    }
    if !lifetime.uv.is_empty() {
        pipe.set(keys.uv(id), bytes_from_b64(&lifetime.uv)?);
    }
    let derived = hour_writes(pipe, store, id, hours, days, settings, now)?;
    day_writes(pipe, keys, id, days, derived, settings, now)
}

/// Queues an article's metadata hash and, unless deleted, its
/// `articles:new` entries.
fn meta_writes(
    pipe: &mut redis::Pipeline,
    keys: &Keys,
    id: &ArticleId,
    meta: &ArticleMeta,
    known: bool,
    deleted: bool,
) {
    let mk = keys.meta(id);
    pipe.cmd("HSET")
        .arg(&mk)
        .arg("publishedAt")
        .arg(meta.published_at)
        .arg("known")
        .arg(if known { "1" } else { "0" })
        .arg("deleted")
        .arg(if deleted { "1" } else { "0" });
    for (k, v) in meta_pairs(meta) {
        pipe.hset(&mk, k, v);
    }
    if !deleted {
        pipe.zadd(keys.of(id).newest(), id.as_str(), meta.published_at);
        for member in super::newest::facet_members(meta, id) {
            pipe.zadd(keys.of(id).newest_by(), member, 0);
        }
    }
}

/// Queues an article's hourly buckets Redis keeps (with their sketches
/// and activity sets), and answers the daily buckets derived from its
/// hours for the days the record lacks.
#[allow(clippy::type_complexity)]
fn hour_writes(
    pipe: &mut redis::Pipeline,
    store: &RedisStore,
    id: &ArticleId,
    hours: &[DumpBucket],
    days: &[DumpBucket],
    settings: &StoreSettings,
    now: Timestamp,
) -> Result<BTreeMap<i64, (DumpCounters, Hll)>, DumpError> {
    let keys = store.keys();
    let hkeep = (i64::from(store.options().hourly_days) + 1) * DAY;
    let dkeep = settings.retention_secs + DAY;
    let ttl = |expires_at: i64| (expires_at - now).max(60);
    let oldest = oldest_hour(now, store.options().hourly_days);
    // Hours Redis keeps; days from the record or derived (only those the
    // record lacks: a merge of sketches is not free).
    let have: HashSet<i64> = days.iter().map(|b| b.at).collect();
    let mut derived: BTreeMap<i64, (DumpCounters, Hll)> = BTreeMap::new();
    for b in hours {
        let d = b.at.div_euclid(24);
        if !have.contains(&d) && (d + 1) * 86_400 + dkeep > now {
            let e = derived
                .entry(d)
                .or_insert_with(|| (DumpCounters::default(), Hll::new()));
            e.0.pv += b.c.pv;
            e.0.likes += b.c.likes;
            e.0.comments += b.c.comments;
            e.0.favorites += b.c.favorites;
            e.0.shares += b.c.shares;
            e.0.dwell_seconds += b.c.dwell_seconds;
            e.0.dwell_reports += b.c.dwell_reports;
            if b.c.pv > 0 {
                e.1.merge(&hll_from_b64(&b.c.uv)?);
            }
        }
        if b.at <= oldest {
            continue;
        }
        let exp = ttl((b.at + 1) * 3600 + hkeep);
        let bk = keys.bucket_h(id, b.at);
        for (f, v) in bucket_fields(&b.c) {
            pipe.hset(&bk, f, v);
        }
        pipe.expire(&bk, exp);
        if b.c.pv > 0 {
            let uk = keys.uv_h(id, b.at);
            pipe.set(&uk, bytes_from_b64(&b.c.uv)?).expire(&uk, exp);
        }
        if active(&b.c) {
            let ak = keys.of(id).active_h(b.at);
            pipe.sadd(&ak, id.as_str()).expire(&ak, exp);
        }
    }
    Ok(derived)
}

/// Queues an article's daily buckets still inside the retention: the
/// record's, and those `derived` from its hours.
fn day_writes(
    pipe: &mut redis::Pipeline,
    keys: &Keys,
    id: &ArticleId,
    days: &[DumpBucket],
    derived: BTreeMap<i64, (DumpCounters, Hll)>,
    settings: &StoreSettings,
    now: Timestamp,
) -> Result<(), DumpError> {
    let dkeep = settings.retention_secs + DAY;
    let ttl = |expires_at: i64| (expires_at - now).max(60);
    let mut day_buckets: Vec<(i64, DumpCounters, Option<Vec<u8>>)> = days
        .iter()
        .map(|b| {
            let img = (!b.c.uv.is_empty())
                .then(|| bytes_from_b64(&b.c.uv))
                .transpose()?;
            Ok((b.at, b.c.clone(), img))
        })
        .collect::<Result<_, DumpError>>()?;
    for (d, (c, h)) in derived {
        let img = (c.pv > 0).then(|| h.to_bytes());
        day_buckets.push((d, c, img));
    }
    for (d, c, img) in day_buckets {
        let expires_at = (d + 1) * 86_400 + dkeep;
        if expires_at <= now {
            // Past retention: Redis would no longer hold it.
            continue;
        }
        let exp = ttl(expires_at);
        let bk = keys.bucket_d(id, d);
        let fields: Vec<_> = bucket_fields(&c)
            .into_iter()
            .filter(|(f, _)| !f.starts_with("q_"))
            .collect();
        if fields.is_empty() {
            continue;
        }
        for (f, v) in fields {
            pipe.hset(&bk, f, v);
        }
        pipe.expire(&bk, exp);
        if let Some(img) = img {
            let uk = keys.uv_d(id, d);
            pipe.set(&uk, img).expire(&uk, exp);
        }
        if active(&c) {
            let ak = keys.of(id).active_d(d);
            pipe.sadd(&ak, id.as_str()).expire(&ak, exp);
        }
    }
    Ok(())
}

fn bucket_fields(c: &DumpCounters) -> Vec<(&'static str, u64)> {
    [
        ("pv", c.pv),
        ("likes", c.likes),
        ("comments", c.comments),
        ("favorites", c.favorites),
        ("shares", c.shares),
        ("dwell_s", c.dwell_seconds),
        ("dwell_n", c.dwell_reports),
        ("q_dup", c.quarantine[0]),
        ("q_rl", c.quarantine[1]),
        ("q_bot", c.quarantine[2]),
        ("q_rep", c.quarantine[3]),
    ]
    .into_iter()
    .filter(|(_, v)| *v > 0)
    .collect()
}

fn active(c: &DumpCounters) -> bool {
    c.pv + c.likes + c.comments + c.favorites + c.shares + c.dwell_reports > 0
}
