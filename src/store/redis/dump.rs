//! Export of everything a prefix holds, as the store-neutral records of
//! [`crate::store::dump`], and the reads of articles' records the archive
//! shares.
//!
//! Export walks the prefix with `SCAN` once, classifies keys by name and
//! reads values in pipelined chunks. Hourly buckets are exported for the
//! hours Redis still keeps (after [`oldest_hour`]); daily
//! buckets for the days before the hourly horizon. Import (the other way)
//! is load.rs.

use std::collections::{BTreeMap, HashMap};

use redis::Value;

use super::keys::{ShardKeys, day_of, oldest_hour};
use super::{ActiveSets, RedisStore, parse_meta, store_err, v_i64};
use crate::model::{ArticleId, Timestamp};
use crate::store::dump::{DUMP_VERSION, DumpBucket, DumpCounters, DumpVotes, RateScope, Record};
use crate::store::{StoreError, StoreSettings};

// The archive and the pipeline's replay name the import here.
pub(super) use super::load::article_writes;

pub(super) const CHUNK: usize = 200;
const RATE_W: usize = 15;

#[derive(Default)]
struct Found {
    articles: Vec<ArticleId>,
    hours: HashMap<ArticleId, Vec<i64>>,
    days: HashMap<ArticleId, Vec<i64>>,
    q_hours: Vec<i64>,
    /// Slotted gate hashes: (family, slot, key).
    gate: Vec<(GateFamily, i64, String)>,
    /// Dedupe keys: (key, article, kind, visitor).
    dedupe: Vec<(String, ArticleId, char, String)>,
}

/// The slotted gate hashes `gate:<family>:<slot>` (ingest.lua).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum GateFamily {
    EventId,
    Visitor,
    Ip,
}

impl GateFamily {
    pub(super) const ALL: [GateFamily; 3] =
        [GateFamily::EventId, GateFamily::Visitor, GateFamily::Ip];

    pub(super) fn name(self) -> &'static str {
        match self {
            GateFamily::EventId => "gate:eid",
            GateFamily::Visitor => "gate:rl:v",
            GateFamily::Ip => "gate:rl:ip",
        }
    }

    fn of(parts: &[&str]) -> Option<Self> {
        Some(match parts {
            ["eid"] => GateFamily::EventId,
            ["rl", "v"] => GateFamily::Visitor,
            ["rl", "ip"] => GateFamily::Ip,
            _ => return None,
        })
    }

    /// The slot length S (ingest.lua's `family(name, S)`).
    pub(super) fn slot_secs(self, s: &StoreSettings) -> i64 {
        match self {
            GateFamily::EventId => i64::from(s.event_id_ttl_secs.max(1)),
            GateFamily::Visitor | GateFamily::Ip => 120,
        }
    }

    /// One field as a dump record. A visitor's record is its rate log,
    /// then `|` and behaviour state (not exported: the embedded store does
    /// not snapshot it).
    fn record(self, field: &str, value: &str) -> Option<Record> {
        let rate_log = |v: &str| -> Option<Vec<i64>> {
            let log = v.split('|').next()?;
            let log: Vec<i64> = log
                .as_bytes()
                .chunks(RATE_W)
                .filter_map(|c| std::str::from_utf8(c).ok()?.parse().ok())
                .collect();
            (!log.is_empty()).then_some(log)
        };
        Some(match self {
            GateFamily::EventId => Record::EventId {
                key: field.to_string(),
                seen: value.parse().ok()?,
            },
            GateFamily::Visitor => Record::Rate {
                scope: RateScope::Visitor,
                key: field.to_string(),
                log: rate_log(value)?,
            },
            GateFamily::Ip => Record::Rate {
                scope: RateScope::Ip,
                key: field.to_string(),
                log: rate_log(value)?,
            },
        })
    }
}

fn classify(found: &mut Found, key: &str, rest: &str) {
    let parts: Vec<&str> = rest.split(':').collect();
    let id = |s: &str| ArticleId::parse(s).ok();
    match parts.as_slice() {
        ["meta", "article", a] => found.articles.extend(id(a)),
        ["bucket", "h", a, h] => {
            if let (Some(a), Ok(h)) = (id(a), h.parse()) {
                found.hours.entry(a).or_default().push(h);
            }
        }
        ["bucket", "d", a, d] => {
            if let (Some(a), Ok(d)) = (id(a), d.parse()) {
                found.days.entry(a).or_default().push(d);
            }
        }
        ["stats", "quarantine", "h", h] => found.q_hours.extend(h.parse::<i64>().ok()),
        ["gate", "dd", a, k, v] => {
            if let (Some(a), Some(k)) = (id(a), k.chars().next()) {
                found.dedupe.push((key.to_string(), a, k, v.to_string()));
            }
        }
        ["gate", rest @ .., slot] => {
            if let (Some(f), Ok(slot)) = (GateFamily::of(rest), slot.parse()) {
                found.gate.push((f, slot, key.to_string()));
            }
        }
        _ => {}
    }
}

fn hash_of(v: &Value) -> HashMap<String, Vec<u8>> {
    let mut out = HashMap::new();
    let mut put = |k: &Value, v: &Value| {
        if let (Some(k), Value::BulkString(b)) = (super::v_str(k), v) {
            out.insert(k.to_string(), b.clone());
        }
    };
    match v {
        Value::Array(a) => {
            for kv in a.chunks(2) {
                if let [k, v] = kv {
                    put(k, v);
                }
            }
        }
        Value::Map(m) => {
            for (k, v) in m {
                put(k, v);
            }
        }
        _ => {}
    }
    out
}

fn num(h: &HashMap<String, Vec<u8>>, f: &str) -> u64 {
    h.get(f)
        .and_then(|b| std::str::from_utf8(b).ok())
        .and_then(|s| s.parse::<i64>().ok())
        .unwrap_or(0)
        .max(0) as u64
}

fn counters_of(h: &HashMap<String, Vec<u8>>, sketch: &Value) -> DumpCounters {
    use base64::Engine;
    DumpCounters {
        pv: num(h, "pv"),
        likes: num(h, "likes"),
        comments: num(h, "comments"),
        favorites: num(h, "favorites"),
        shares: num(h, "shares"),
        dwell_seconds: num(h, "dwell_s"),
        dwell_reports: num(h, "dwell_n"),
        quarantine: [
            num(h, "q_dup"),
            num(h, "q_rl"),
            num(h, "q_bot"),
            num(h, "q_rep"),
        ],
        uv: match sketch {
            Value::BulkString(b) => base64::engine::general_purpose::STANDARD.encode(b),
            _ => String::new(),
        },
    }
}

/// `SCAN MATCH` text matching `s` literally (the cluster prefix has
/// braces; prefixes have no other glob characters).
pub(super) fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A quarantine hash (`stats:quarantine`, an hour's) by reason.
pub(crate) fn quarantine_of(v: &Value) -> [u64; 4] {
    let h = hash_of(v);
    [
        num(&h, "q_dup"),
        num(&h, "q_rl"),
        num(&h, "q_bot"),
        num(&h, "q_rep"),
    ]
}

/// Everything under the store's prefix as dump records.
pub async fn dump_redis(store: &RedisStore, now: Timestamp) -> Result<Vec<Record>, StoreError> {
    let keys = store.keys();
    let mut con = store.con();
    let mut found = scan_site(store).await?;
    let horizon = (day_of(now) - i64::from(store.options().hourly_days)) * 24;
    let oldest = oldest_hour(now, store.options().hourly_days);
    let mut out = vec![Record::Header {
        version: DUMP_VERSION,
        source: "redis".into(),
    }];
    found.articles.sort();
    let mut hours = std::mem::take(&mut found.hours);
    let mut days = std::mem::take(&mut found.days);
    for h in hours.values_mut() {
        h.retain(|h| *h > oldest);
        h.sort();
    }
    for d in days.values_mut() {
        d.retain(|d| *d < horizon / 24);
        d.sort();
    }
    out.extend(read_articles(store, &found.articles, &hours, &days).await?);
    out.push(totals_record(&mut con, keys, &mut found.q_hours).await?);
    out.extend(gate_records(&mut con, &found.dedupe, &mut found.gate).await?);
    Ok(out)
}

/// Every key under the store's prefix (one `SCAN`), classified by name.
async fn scan_site(store: &RedisStore) -> Result<Found, StoreError> {
    let mut con = store.con();
    let mut found = Found::default();
    for (route, prefix) in store.keys().scan_prefixes() {
        let mut cursor: u64 = 0;
        let pattern = format!("{}*", glob_escape(&prefix));
        loop {
            let (next, batch): (u64, Vec<String>) = con
                .scan(&route, cursor, &pattern, 1000)
                .await
                .map_err(store_err)?;
            for k in &batch {
                if let Some(rest) = k.strip_prefix(prefix.as_str()) {
                    classify(&mut found, k, rest);
                }
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    Ok(found)
}

/// The site's totals: counted events and quarantine, overall and for the
/// hours `q_hours` (sorted here).
async fn totals_record(
    con: &mut super::Con,
    keys: &super::Keys,
    q_hours: &mut [i64],
) -> Result<Record, StoreError> {
    let mut pipe = redis::pipe();
    pipe.get(keys.counted()).hgetall(keys.quarantine());
    q_hours.sort();
    for h in q_hours.iter() {
        pipe.hgetall(keys.quarantine_h(*h));
    }
    let got: Vec<Value> = pipe.query_async(con).await.map_err(store_err)?;
    let q_of = quarantine_of;
    if got.len() < 2 {
        return Err(super::bad_reply("export"));
    }
    Ok(Record::Totals {
        counted: v_i64(&got[0]).unwrap_or(0).max(0) as u64,
        quarantine: q_of(&got[1]),
        by_hour: q_hours
            .iter()
            .zip(&got[2..])
            .map(|(h, v)| (*h, q_of(v)))
            .collect(),
    })
}

/// Gate state: dedupe keys, then every field of every slot of the other
/// families (`gate`, sorted here), the newer slot winning.
async fn gate_records(
    con: &mut super::Con,
    dedupe: &[(String, ArticleId, char, String)],
    gate: &mut [(GateFamily, i64, String)],
) -> Result<Vec<Record>, StoreError> {
    let mut out = Vec::new();
    for part in dedupe.chunks(CHUNK) {
        let mut pipe = redis::pipe();
        for (k, ..) in part {
            pipe.get(k);
        }
        let got: Vec<Option<i64>> = pipe.query_async(con).await.map_err(store_err)?;
        for ((_, a, kind, v), last) in part.iter().zip(got) {
            if let Some(last) = last {
                out.push(Record::Dedupe {
                    article: a.clone(),
                    kind: *kind,
                    visitor: v.clone(),
                    last,
                });
            }
        }
    }
    gate.sort();
    let mut latest: BTreeMap<(GateFamily, String), String> = BTreeMap::new();
    for (family, _, key) in gate.iter() {
        let mut cursor: u64 = 0;
        loop {
            let (next, pairs): (u64, Vec<(String, String)>) = redis::cmd("HSCAN")
                .arg(key)
                .arg(cursor)
                .arg("COUNT")
                .arg(1000)
                .query_async(con)
                .await
                .map_err(store_err)?;
            for (field, value) in pairs {
                latest.insert((*family, field), value);
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    for ((family, field), value) in latest {
        if let Some(r) = family.record(&field, &value) {
            out.push(r);
        }
    }
    Ok(out)
}

/// The records of some articles: meta, lifetime counters and sketch,
/// votes, and the hourly and daily buckets listed for each (sorted).
/// Ids without meta are left out. Export and the archive writer both read
/// articles here.
async fn read_articles(
    store: &RedisStore,
    ids: &[ArticleId],
    hours_of: &HashMap<ArticleId, Vec<i64>>,
    days_of: &HashMap<ArticleId, Vec<i64>>,
) -> Result<Vec<Record>, StoreError> {
    let mut out = Vec::with_capacity(ids.len());
    for ids in ids.chunks(CHUNK) {
        let mut pipe = redis::pipe();
        queue_reads(&mut pipe, store, ids, hours_of, days_of);
        // (One pipeline per slot when the site spans slots.)
        let got: Vec<Value> = store.query_pipe(&pipe).await.map_err(store_err)?;
        parse_reads(&mut got.into_iter(), ids, hours_of, days_of, &mut out)?;
    }
    Ok(out)
}

/// Queues the reads of [`read_articles`] for `ids`.
fn queue_reads(
    pipe: &mut redis::Pipeline,
    store: &RedisStore,
    ids: &[ArticleId],
    hours_of: &HashMap<ArticleId, Vec<i64>>,
    days_of: &HashMap<ArticleId, Vec<i64>>,
) {
    let keys = store.keys();
    let none = Vec::new();
    for id in ids {
        pipe.hgetall(keys.meta(id))
            .get(keys.views(id))
            .hgetall(keys.counters(id))
            .get(keys.uv(id))
            .smembers(keys.voted(id));
        for h in hours_of.get(id).unwrap_or(&none) {
            pipe.hgetall(keys.bucket_h(id, *h)).get(keys.uv_h(id, *h));
        }
        for d in days_of.get(id).unwrap_or(&none) {
            pipe.hgetall(keys.bucket_d(id, *d)).get(keys.uv_d(id, *d));
        }
    }
}

/// Parses the replies [`queue_reads`] queued into records.
fn parse_reads(
    it: &mut impl Iterator<Item = Value>,
    ids: &[ArticleId],
    hours_of: &HashMap<ArticleId, Vec<i64>>,
    days_of: &HashMap<ArticleId, Vec<i64>>,
    out: &mut Vec<Record>,
) -> Result<(), StoreError> {
    let none = Vec::new();
    let mut next = || it.next().ok_or_else(|| super::bad_reply("export"));
    for id in ids {
        let meta_h = next()?;
        let views = next()?;
        let counters = next()?;
        let sketch = next()?;
        let voters = next()?;
        let fields: HashMap<String, String> = hash_of(&meta_h)
            .into_iter()
            .filter_map(|(k, v)| Some((k, String::from_utf8(v).ok()?)))
            .collect();
        let mut buckets = |list: &[i64]| -> Result<Vec<DumpBucket>, StoreError> {
            let mut b_out = Vec::new();
            for &at in list {
                let b = next()?;
                let s = next()?;
                let hm = hash_of(&b);
                if !hm.is_empty() {
                    b_out.push(DumpBucket {
                        at,
                        c: counters_of(&hm, &s),
                    });
                }
            }
            Ok(b_out)
        };
        let hours_out = buckets(hours_of.get(id).unwrap_or(&none))?;
        let days_out = buckets(days_of.get(id).unwrap_or(&none))?;
        let Some(m) = parse_meta(&fields) else {
            continue;
        };
        let counter_h = hash_of(&counters);
        let mut lifetime = counters_of(&counter_h, &sketch);
        lifetime.pv = v_i64(&views).unwrap_or(0).max(0) as u64;
        let mut voters: Vec<String> = match &voters {
            Value::Array(items) | Value::Set(items) => items
                .iter()
                .filter_map(|v| match v {
                    Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        voters.sort();
        out.push(Record::Article {
            votes: DumpVotes {
                ups: num(&counter_h, "ups"),
                downs: num(&counter_h, "downs"),
                voters,
            },
            id: id.clone(),
            meta: m.meta,
            known: m.known,
            deleted: m.deleted,
            lifetime,
            hours: hours_out,
            days: days_out,
        });
    }
    Ok(())
}

/// The records of the given articles as the archive holds them: like
/// [`dump_redis`]'s, with the hourly buckets Redis keeps (found through
/// the per-hour activity sets) and no daily ones (those inside the hourly
/// horizon are derived from the hours; older days no event changes).
pub async fn article_records(
    store: &RedisStore,
    ids: &[ArticleId],
    now: Timestamp,
) -> Result<Vec<Record>, StoreError> {
    records_of(store, ids, now, false).await
}

/// [`article_records`] with every daily bucket Redis holds too (found
/// through the per-day activity sets): the complete state an eviction
/// writes to the archive before it drops the article's keys.
pub(super) async fn article_records_whole(
    store: &RedisStore,
    ids: &[ArticleId],
    now: Timestamp,
) -> Result<Vec<Record>, StoreError> {
    records_of(store, ids, now, true).await
}

/// Which of `ids` each activity set of the hours `hours` and the days
/// `days` holds (each article in its shard's sets): one pipeline per
/// chunk of articles for both.
pub(super) async fn active_over(
    store: &RedisStore,
    ids: &[ArticleId],
    hours: std::ops::RangeInclusive<i64>,
    days: std::ops::RangeInclusive<i64>,
) -> Result<ActiveSets, StoreError> {
    let mut out = ActiveSets::default();
    if hours.is_empty() && days.is_empty() {
        return Ok(out);
    }
    for part in ids.chunks(CHUNK) {
        let mut pipe = redis::pipe();
        queue_members(&mut pipe, store, part, hours.clone(), ShardKeys::active_h);
        queue_members(&mut pipe, store, part, days.clone(), ShardKeys::active_d);
        let got: Vec<Value> = store.query_pipe(&pipe).await.map_err(store_err)?;
        let mut got = got.into_iter();
        collect_members(&mut got, store, part, hours.clone(), &mut out.hours)?;
        collect_members(&mut got, store, part, days.clone(), &mut out.days)?;
    }
    Ok(out)
}

/// `ids` by shard, in shard order (shards without any left out).
fn by_shard(store: &RedisStore, ids: &[ArticleId]) -> Vec<(ShardKeys, Vec<ArticleId>)> {
    let keys = store.keys();
    keys.group_by_shard(ids.iter().cloned(), |id| id)
        .into_iter()
        .enumerate()
        .filter(|(_, g)| !g.is_empty())
        .map(|(k, g)| (keys.shard(k as u32), g))
        .collect()
}

/// Queues one `SMISMEMBER` per set of `span` and shard, of the shard's
/// `ids`.
fn queue_members(
    pipe: &mut redis::Pipeline,
    store: &RedisStore,
    ids: &[ArticleId],
    span: std::ops::RangeInclusive<i64>,
    set: impl Fn(&ShardKeys, i64) -> String,
) {
    for (sk, ids) in by_shard(store, ids) {
        for t in span.clone() {
            pipe.cmd("SMISMEMBER")
                .arg(set(&sk, t))
                .arg(ids.iter().map(|i| i.as_str()).collect::<Vec<_>>());
        }
    }
}

/// Reads the replies [`queue_members`] queued into `out`.
fn collect_members(
    got: &mut impl Iterator<Item = Value>,
    store: &RedisStore,
    ids: &[ArticleId],
    span: std::ops::RangeInclusive<i64>,
    out: &mut HashMap<ArticleId, Vec<i64>>,
) -> Result<(), StoreError> {
    for (_, ids) in by_shard(store, ids) {
        for t in span.clone() {
            let member: Vec<bool> =
                redis::from_redis_value(got.next().ok_or_else(|| super::bad_reply("SMISMEMBER"))?)
                    .map_err(|_| super::bad_reply("SMISMEMBER"))?;
            for (id, m) in ids.iter().zip(member) {
                if m {
                    out.entry(id.clone()).or_default().push(t);
                }
            }
        }
    }
    Ok(())
}

/// [`records_of`], a chunk of ids at a time, each chunk read in one
/// MULTI/EXEC after `head` (the pipeline's position script) together with
/// the activity sets its bucket lists came from, read again: a chunk whose
/// sets changed in between is read again. Answers each chunk's records
/// with `head`'s reply, which holds for exactly the state they were read
/// in (docs/design.md, "Disaster recovery"), and each article's operation
/// number (`ops` in its meta, ops.rs), read in the same MULTI/EXEC.
pub(crate) async fn positioned_records(
    store: &RedisStore,
    ids: &[ArticleId],
    now: Timestamp,
    with_days: bool,
    head: &redis::Cmd,
) -> Result<Vec<(Vec<Record>, Value, HashMap<ArticleId, u64>)>, StoreError> {
    let keys = store.keys();
    let (hspan, dspan) = record_spans(store, now, with_days);
    let mut con = store.con();
    let mut out = Vec::new();
    for part in ids.chunks(CHUNK) {
        let mut tries = 0;
        loop {
            let active = active_over(store, part, hspan.clone(), dspan.clone()).await?;
            let (hours, days) = (&active.hours, &active.days);
            let mut pipe = redis::pipe();
            pipe.atomic().add_command(head.clone());
            queue_members(&mut pipe, store, part, hspan.clone(), ShardKeys::active_h);
            queue_members(&mut pipe, store, part, dspan.clone(), ShardKeys::active_d);
            queue_reads(&mut pipe, store, part, hours, days);
            for id in part {
                pipe.hget(keys.meta(id), "ops");
            }
            let got: Vec<Value> = pipe.query_async(&mut con).await.map_err(store_err)?;
            let mut it = got.into_iter();
            let position = it.next().ok_or_else(|| super::bad_reply("position"))?;
            let (mut h2, mut d2) = (HashMap::new(), HashMap::new());
            collect_members(&mut it, store, part, hspan.clone(), &mut h2)?;
            collect_members(&mut it, store, part, dspan.clone(), &mut d2)?;
            if &h2 == hours && &d2 == days {
                let mut records = Vec::with_capacity(part.len());
                parse_reads(&mut it, part, hours, days, &mut records)?;
                let ops = part
                    .iter()
                    .zip(it)
                    .map(|(id, v)| (id.clone(), v_i64(&v).unwrap_or(0).max(0) as u64))
                    .collect();
                out.push((records, position, ops));
                break;
            }
            tries += 1;
            if tries >= 10 {
                return Err(StoreError::Unavailable(
                    "the articles' activity sets kept changing while they were read".into(),
                ));
            }
        }
    }
    Ok(out)
}

type Span = std::ops::RangeInclusive<i64>;

/// The hours (and with `with_days` the days) whose buckets an archived
/// record holds.
fn record_spans(store: &RedisStore, now: Timestamp, with_days: bool) -> (Span, Span) {
    let oldest = oldest_hour(now, store.options().hourly_days);
    // Events may carry a time a little ahead of `now`.
    let newest = crate::time::hour_of(now) + 2;
    let days = if with_days {
        day_of(now - store.settings.retention_secs) - 1..=day_of(now) + 1
    } else {
        Span::new(1, 0)
    };
    (oldest + 1..=newest, days)
}

async fn records_of(
    store: &RedisStore,
    ids: &[ArticleId],
    now: Timestamp,
    with_days: bool,
) -> Result<Vec<Record>, StoreError> {
    let (hspan, dspan) = record_spans(store, now, with_days);
    let active = active_over(store, ids, hspan, dspan).await?;
    read_articles(store, ids, &active.hours, &active.days).await
}
