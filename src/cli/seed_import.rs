//! `hotrank import --from-redis URL --layout seed000|seed001|seed003|seed004`:
//! adopts a Redis that one of the seeds' designs filled into the configured
//! store (embedded, or Redis in hotrank's layout), through the same dump
//! records `hotrank import` loads.
//!
//! What each layout reads (key names after `--from-prefix`):
//! - seed000: `counter:views:<id>` (lifetime PV), `hll:uv:<id>` (the UV
//!   sketch, byte for byte), `meta:article:<id>` (`publishedAt`, and
//!   `title`/`url`/`author`/`category` if present), `hot:score` members;
//! - seed001: `cnt:pv|dur|like|cmt:<id>:<yyyyMMddHH>` into hourly buckets
//!   (dwell reports = the hour's PV, so the average is the seed's
//!   `dur / pv`), `hot:articles` and `hot:articles:<category>` members
//!   (the category); `cnt:uv` holds a count, not a sketch, and is reported;
//! - seed003: `article:<id>` hashes, `time:`, `score:`, `voted:<id>` (the
//!   `user:<userId>` members hashed with this site's `identity.key`, as the
//!   API hashes a `userId`), `group:<name>`;
//! - seed004: `<yyyy-MM-dd>` sorted sets (member = item id, score = the
//!   day's clicks) into daily buckets (PV).
//!
//! Everything it could not interpret is counted by reason (with an
//! example key) in the report. The target must be empty, or already hold
//! exactly what this import would write: a second run changes nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

use crate::clock::{Clock, SystemClock};
use crate::config::{Config, RedisLayout, StoreKind};
use crate::gate::Identity;
use crate::model::{ArticleId, ArticleMeta, Timestamp};
use crate::sketch::Hll;
use crate::store::dump::{DUMP_VERSION, DumpBucket, DumpCounters, DumpVotes, Record, hll_from_b64};
use crate::time::{DAY, HOUR, parse_date_stamp, parse_hour_stamp};

use super::transfer::{load_records, store_records};

/// Which seed design filled the source Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeedLayout {
    Seed000,
    Seed001,
    Seed003,
    Seed004,
}

impl FromStr for SeedLayout {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "seed000" => SeedLayout::Seed000,
            "seed001" => SeedLayout::Seed001,
            "seed003" => SeedLayout::Seed003,
            "seed004" => SeedLayout::Seed004,
            _ => {
                return Err(format!(
                    "--layout {s:?}: use seed000, seed001, seed003 or seed004"
                ));
            }
        })
    }
}

impl SeedLayout {
    pub fn as_str(self) -> &'static str {
        match self {
            SeedLayout::Seed000 => "seed000",
            SeedLayout::Seed001 => "seed001",
            SeedLayout::Seed003 => "seed003",
            SeedLayout::Seed004 => "seed004",
        }
    }
}

/// What an import read and what it could not interpret.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ImportReport {
    /// Keys read, by family (e.g. `counter:views`).
    pub read: BTreeMap<String, u64>,
    /// Keys or values skipped, by reason: (count, an example).
    pub skipped: BTreeMap<String, (u64, String)>,
    pub articles: u64,
    /// The target already held exactly this import: nothing was written.
    pub unchanged: bool,
}

impl ImportReport {
    fn read(&mut self, family: &str) {
        *self.read.entry(family.to_string()).or_default() += 1;
    }

    fn skip(&mut self, reason: &str, example: &str) {
        let e = self
            .skipped
            .entry(reason.to_string())
            .or_insert((0, example.to_string()));
        e.0 += 1;
    }

    /// The report as lines for the terminal.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        let read: Vec<String> = self.read.iter().map(|(k, n)| format!("{k} {n}")).collect();
        out.push(format!("read: {}", read.join(", ")));
        for (why, (n, example)) in &self.skipped {
            out.push(format!("not interpreted: {why}: {n} (e.g. {example})"));
        }
        out.push(if self.unchanged {
            format!(
                "the store already holds these {} articles: nothing changed",
                self.articles
            )
        } else {
            format!("imported {} articles", self.articles)
        });
        out
    }
}

#[derive(Default)]
struct Acc {
    meta: ArticleMeta,
    published: Option<Timestamp>,
    lifetime: DumpCounters,
    hours: BTreeMap<i64, DumpCounters>,
    days: BTreeMap<i64, DumpCounters>,
    votes: DumpVotes,
    /// Raw voter members (seed 003), hashed at the end.
    voters: BTreeSet<String>,
    groups: BTreeSet<String>,
}

/// Reads a seed's keys into dump records.
struct Reader<'a> {
    con: redis::aio::MultiplexedConnection,
    prefix: String,
    identity: &'a Identity,
    report: ImportReport,
    articles: BTreeMap<ArticleId, Acc>,
    scanned: u64,
}

impl Reader<'_> {
    fn key(&self, rest: &str) -> String {
        format!("{}{rest}", self.prefix)
    }

    /// Every key matching `pattern` (after the prefix) of type `ty`,
    /// without the prefix.
    async fn scan(&mut self, pattern: &str, ty: &str) -> Result<Vec<String>, String> {
        let mut out = Vec::new();
        let mut cursor = 0u64;
        let full = format!("{}{pattern}", self.prefix);
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&full)
                .arg("COUNT")
                .arg(1000)
                .arg("TYPE")
                .arg(ty)
                .query_async(&mut self.con)
                .await
                .map_err(|e| format!("source redis: SCAN {full}: {e}"))?;
            for k in keys {
                self.scanned += 1;
                if self.scanned.is_multiple_of(10_000) {
                    eprintln!("… {} keys read", self.scanned);
                }
                out.push(k[self.prefix.len()..].to_string());
            }
            if next == 0 {
                return Ok(out);
            }
            cursor = next;
        }
    }

    fn article(&mut self, id: &ArticleId) -> &mut Acc {
        self.articles.entry(id.clone()).or_default()
    }

    /// The id after `family`, or a report line.
    fn id_after(&mut self, key: &str, family: &str) -> Option<ArticleId> {
        let rest = key.strip_prefix(family)?;
        match ArticleId::parse(rest) {
            Ok(id) => Some(id),
            Err(_) => {
                self.report
                    .skip(&format!("{family}<id> with an invalid article id"), key);
                None
            }
        }
    }

    async fn strings(&mut self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, String> {
        let mut out = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(500) {
            let full: Vec<String> = chunk.iter().map(|k| self.key(k)).collect();
            let mut pipe = redis::pipe();
            for k in &full {
                pipe.get(k);
            }
            let got: Vec<Option<Vec<u8>>> = pipe
                .query_async(&mut self.con)
                .await
                .map_err(|e| format!("source redis: GET: {e}"))?;
            out.extend(got);
        }
        Ok(out)
    }

    async fn hashes(
        &mut self,
        keys: &[String],
    ) -> Result<Vec<std::collections::HashMap<String, String>>, String> {
        let mut out = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(500) {
            let mut pipe = redis::pipe();
            for k in chunk {
                pipe.hgetall(self.key(k));
            }
            let got: Vec<std::collections::HashMap<String, String>> = pipe
                .query_async(&mut self.con)
                .await
                .map_err(|e| format!("source redis: HGETALL: {e}"))?;
            out.extend(got);
        }
        Ok(out)
    }

    async fn zset(&mut self, key: &str) -> Result<Vec<(String, f64)>, String> {
        redis::cmd("ZRANGE")
            .arg(self.key(key))
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query_async(&mut self.con)
            .await
            .map_err(|e| format!("source redis: ZRANGE {key}: {e}"))
    }

    async fn members(&mut self, key: &str) -> Result<Vec<String>, String> {
        redis::cmd("SMEMBERS")
            .arg(self.key(key))
            .query_async(&mut self.con)
            .await
            .map_err(|e| format!("source redis: SMEMBERS {key}: {e}"))
    }

    fn number(&mut self, key: &str, v: Option<&[u8]>) -> Option<u64> {
        let parsed = v
            .and_then(|b| std::str::from_utf8(b).ok())
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|x| x.is_finite() && *x >= 0.0);
        if parsed.is_none() {
            self.report.skip("a counter that is not a number ≥ 0", key);
        }
        parsed.map(|x| x.round() as u64)
    }

    async fn seed000(&mut self) -> Result<(), String> {
        let views = self.scan("counter:views:*", "string").await?;
        let values = self.strings(&views).await?;
        for (k, v) in views.iter().zip(values) {
            let Some(id) = self.id_after(k, "counter:views:") else {
                continue;
            };
            self.report.read("counter:views");
            if let Some(n) = self.number(k, v.as_deref()) {
                self.article(&id).lifetime.pv = n;
            }
        }
        let hlls = self.scan("hll:uv:*", "string").await?;
        let values = self.strings(&hlls).await?;
        for (k, v) in hlls.iter().zip(values) {
            let Some(id) = self.id_after(k, "hll:uv:") else {
                continue;
            };
            self.report.read("hll:uv");
            let bytes = v.unwrap_or_default();
            if Hll::from_bytes(&bytes).is_err() {
                self.report.skip("hll:uv:<id> that is not a HyperLogLog", k);
                continue;
            }
            use base64::Engine;
            self.article(&id).lifetime.uv =
                base64::engine::general_purpose::STANDARD.encode(&bytes);
        }
        let metas = self.scan("meta:article:*", "hash").await?;
        let values = self.hashes(&metas).await?;
        for (k, h) in metas.iter().zip(values) {
            let Some(id) = self.id_after(k, "meta:article:") else {
                continue;
            };
            self.report.read("meta:article");
            let published = h.get("publishedAt").and_then(|p| p.parse::<f64>().ok());
            if published.is_none() {
                self.report
                    .skip("meta:article:<id> without a publishedAt", k);
            }
            let a = self.article(&id);
            a.published = published.map(|p| p as Timestamp);
            let s = |f: &str| h.get(f).filter(|v| !v.is_empty()).cloned();
            a.meta.title = s("title");
            a.meta.url = s("url");
            a.meta.author = s("author");
            a.meta.category = s("category");
        }
        for (m, _) in self.zset("hot:score").await? {
            self.report.read("hot:score member");
            match ArticleId::parse(&m) {
                Ok(id) => {
                    self.article(&id);
                }
                Err(_) => self.report.skip("hot:score member that is not an id", &m),
            }
        }
        Ok(())
    }

    async fn seed001(&mut self) -> Result<(), String> {
        let keys = self.scan("cnt:*", "string").await?;
        let values = self.strings(&keys).await?;
        for (k, v) in keys.iter().zip(values) {
            let parts: Vec<&str> = k.split(':').collect();
            let [_, metric, id, stamp] = parts.as_slice() else {
                self.report
                    .skip("cnt: key not of the form cnt:<metric>:<id>:<yyyyMMddHH>", k);
                continue;
            };
            let (Ok(id), Some(hour)) = (ArticleId::parse(id), parse_hour_stamp(stamp)) else {
                self.report
                    .skip("cnt: key with an invalid id or yyyyMMddHH", k);
                continue;
            };
            if *metric == "uv" {
                self.report.skip(
                    "cnt:uv holds a count, not a sketch: not imported (UV starts anew)",
                    k,
                );
                continue;
            }
            if !["pv", "dur", "like", "cmt"].contains(metric) {
                self.report.skip("cnt: key of an unknown metric", k);
                continue;
            }
            self.report.read(&format!("cnt:{metric}"));
            let Some(n) = self.number(k, v.as_deref()) else {
                continue;
            };
            let b = self.article(&id).hours.entry(hour).or_default();
            match *metric {
                "pv" => b.pv += n,
                "dur" => b.dwell_seconds += n,
                "like" => b.likes += n,
                _ => b.comments += n,
            }
        }
        for (m, _) in self.zset("hot:articles").await? {
            self.report.read("hot:articles member");
            match ArticleId::parse(&m) {
                Ok(id) => {
                    self.article(&id);
                }
                Err(_) => self
                    .report
                    .skip("hot:articles member that is not an id", &m),
            }
        }
        for k in self.scan("hot:articles:*", "zset").await? {
            let category = k["hot:articles:".len()..].to_string();
            for (m, _) in self.zset(&k).await? {
                self.report.read("hot:articles:<category> member");
                let Ok(id) = ArticleId::parse(&m) else {
                    self.report
                        .skip("hot:articles member that is not an id", &m);
                    continue;
                };
                let a = self.article(&id);
                match &a.meta.category {
                    None => a.meta.category = Some(category.clone()),
                    Some(c) if *c == category => {}
                    Some(_) => self.report.skip(
                        "an article in several hot:articles:<category> (first category kept)",
                        &format!("{k} {m}"),
                    ),
                }
            }
        }
        Ok(())
    }

    async fn seed003(&mut self) -> Result<(), String> {
        let time: BTreeMap<String, f64> = self.zset("time:").await?.into_iter().collect();
        let score: BTreeMap<String, f64> = self.zset("score:").await?.into_iter().collect();
        self.report
            .read
            .insert("time: member".into(), time.len() as u64);
        self.report
            .read
            .insert("score: member".into(), score.len() as u64);
        let keys = self.scan("article:*", "hash").await?;
        let values = self.hashes(&keys).await?;
        let mut seen = BTreeSet::new();
        for (k, h) in keys.iter().zip(values) {
            let Some(id) = self.id_after(k, "article:") else {
                continue;
            };
            self.report.read("article:<id>");
            seen.insert(k.clone());
            let published = h
                .get("time")
                .and_then(|t| t.parse::<f64>().ok())
                .or_else(|| time.get(k).copied());
            let Some(published) = published else {
                self.report.skip("article:<id> without a time", k);
                continue;
            };
            let votes = h
                .get("votes")
                .and_then(|v| v.parse::<i64>().ok())
                .unwrap_or(0)
                .max(0) as u64;
            if let Some(s) = score.get(k)
                && (s - published - 432.0 * votes as f64).abs() > 1e-6
            {
                self.report.skip(
                    "score: differs from time + 432 · votes (votes kept, score recomputed)",
                    k,
                );
            }
            let s = |f: &str| h.get(f).filter(|v| !v.is_empty()).cloned();
            let a = self.article(&id);
            a.published = Some(published as Timestamp);
            a.meta.title = s("title");
            a.meta.url = s("link");
            a.meta.author = s("poster").map(|p| p.strip_prefix("user:").unwrap_or(&p).to_string());
            a.votes.ups = votes;
        }
        for m in time.keys().chain(score.keys()) {
            if !seen.contains(m) {
                self.report
                    .skip("time:/score: member without an article:<id> hash", m);
            }
        }
        for k in self.scan("voted:*", "set").await? {
            let Some(id) = self.id_after(&k, "voted:") else {
                continue;
            };
            self.report.read("voted:<id>");
            let users = self.members(&k).await?;
            match self.articles.get_mut(&id) {
                Some(a) => a.voters.extend(users),
                None => self.report.skip("voted:<id> of an unknown article", &k),
            }
        }
        for k in self.scan("group:*", "set").await? {
            let group = k["group:".len()..].to_string();
            self.report.read("group:<name>");
            for m in self.members(&k).await? {
                let known = m
                    .strip_prefix("article:")
                    .and_then(|i| ArticleId::parse(i).ok())
                    .filter(|id| self.articles.contains_key(id));
                match known {
                    Some(id) => {
                        self.article(&id).groups.insert(group.clone());
                    }
                    None => self
                        .report
                        .skip("group member that is not a known article:<id>", &m),
                }
            }
        }
        Ok(())
    }

    async fn seed004(&mut self) -> Result<(), String> {
        let keys = self
            .scan("[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]", "zset")
            .await?;
        for k in keys {
            let Some(day) = parse_date_stamp(&k) else {
                self.report
                    .skip("a date key that is not a valid yyyy-MM-dd", &k);
                continue;
            };
            self.report.read("<yyyy-MM-dd>");
            for (m, clicks) in self.zset(&k).await? {
                let Ok(id) = ArticleId::parse(&m) else {
                    self.report.skip("a member that is not an item id", &m);
                    continue;
                };
                if !(clicks.is_finite() && clicks >= 0.0) {
                    self.report.skip("a click count that is not ≥ 0", &m);
                    continue;
                }
                self.article(&id).days.entry(day).or_default().pv += clicks.round() as u64;
            }
        }
        Ok(())
    }

    /// The dump records of everything read.
    fn records(&mut self, layout: SeedLayout, now: Timestamp, window: i64) -> Vec<Record> {
        let mut out = vec![Record::Header {
            version: DUMP_VERSION,
            source: format!("{} (hotrank import --from-redis)", layout.as_str()),
        }];
        let mut counted = 0;
        let articles = std::mem::take(&mut self.articles);
        for (id, mut a) in articles {
            let first_activity = a
                .hours
                .keys()
                .next()
                .map(|h| h * HOUR)
                .into_iter()
                .chain(a.days.keys().next().map(|d| d * DAY))
                .min();
            a.meta.published_at = match (a.published, first_activity) {
                (Some(p), _) => p,
                (None, Some(t)) => {
                    self.report.skip(
                        "no publishedAt in Redis: the first hour with activity is used",
                        id.as_str(),
                    );
                    t
                }
                (None, None) => {
                    if layout != SeedLayout::Seed000 {
                        self.report.skip(
                            "no publishedAt in Redis: the import time is used",
                            id.as_str(),
                        );
                    }
                    now
                }
            };
            a.meta.groups = a.groups.iter().cloned().collect();
            for b in a.hours.values_mut() {
                if b.dwell_seconds > 0 {
                    b.dwell_reports = b.pv.max(1);
                }
            }
            let (mut pv, mut likes, mut comments, mut dwell, mut reports) = (0, 0, 0, 0, 0);
            for b in a.hours.values().chain(a.days.values()) {
                pv += b.pv;
                likes += b.likes;
                comments += b.comments;
                dwell += b.dwell_seconds;
                reports += b.dwell_reports;
            }
            if layout != SeedLayout::Seed000 {
                a.lifetime.pv = pv;
            }
            a.lifetime.likes = likes;
            a.lifetime.comments = comments;
            a.lifetime.dwell_seconds = dwell;
            a.lifetime.dwell_reports = reports;
            counted += a.lifetime.pv;
            let open = a.meta.published_at + window > now;
            a.votes.voters = if open {
                a.voters
                    .iter()
                    .map(|m| {
                        let raw = m.strip_prefix("user:").unwrap_or(m);
                        format!("{:032x}", self.identity.visitor(raw))
                    })
                    .collect()
            } else {
                Vec::new()
            };
            a.votes.voters.sort();
            out.push(Record::Article {
                id,
                meta: a.meta,
                known: true,
                deleted: false,
                lifetime: a.lifetime,
                hours: a
                    .hours
                    .into_iter()
                    .map(|(at, c)| DumpBucket { at, c })
                    .collect(),
                days: a
                    .days
                    .into_iter()
                    .map(|(at, c)| DumpBucket { at, c })
                    .collect(),
                votes: a.votes,
            });
        }
        self.report.articles = (out.len() - 1) as u64;
        out.push(Record::Totals {
            counted,
            quarantine: [0; 4],
            by_hour: Vec::new(),
        });
        out
    }
}

/// What must match for a target to already hold an import: per article,
/// its publication time, title, category, groups, counts, UV estimate,
/// votes and voters.
fn fingerprint(records: &[Record]) -> Result<BTreeMap<ArticleId, String>, String> {
    let mut out = BTreeMap::new();
    for r in records {
        if let Record::Article {
            id,
            meta,
            lifetime,
            votes,
            deleted: false,
            ..
        } = r
        {
            let uv = hll_from_b64(&lifetime.uv)
                .map_err(|e| e.to_string())?
                .count();
            let mut voters = votes.voters.clone();
            voters.sort();
            out.insert(
                id.clone(),
                format!(
                    "{} {:?} {:?} {:?} pv={} uv={uv} likes={} cmts={} dwell={} ups={} {voters:?}",
                    meta.published_at,
                    meta.title,
                    meta.category,
                    meta.groups,
                    lifetime.pv,
                    lifetime.likes,
                    lifetime.comments,
                    lifetime.dwell_seconds,
                    votes.ups,
                ),
            );
        }
    }
    Ok(out)
}

/// Reads the seed's keys on `from` (under `from_prefix`) and loads them
/// into the store `config` names.
pub fn import(
    config: &Config,
    from: &str,
    from_prefix: &str,
    layout: SeedLayout,
) -> Result<ImportReport, String> {
    config.validate()?;
    if config.store == StoreKind::Redis && config.redis.layout == RedisLayout::Seed {
        return Err(
            "import --from-redis loads into hotrank's own layout; with layout = \"seed\", point hotrank at the seed's Redis instead".into(),
        );
    }
    let identity = Identity::new(crate::secrets::identity_secret(&config.data_dir)?);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let now = SystemClock.now();
    let window = crate::store::StoreSettings::from_config(config)
        .models
        .votes
        .window_secs();
    let (records, mut report) = rt.block_on(async {
        let client =
            redis::Client::open(from).map_err(|e| format!("--from-redis {from:?}: {e}"))?;
        let con = client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| format!("--from-redis: cannot connect: {e}"))?;
        let mut r = Reader {
            con,
            prefix: from_prefix.to_string(),
            identity: &identity,
            report: ImportReport::default(),
            articles: BTreeMap::new(),
            scanned: 0,
        };
        match layout {
            SeedLayout::Seed000 => r.seed000().await?,
            SeedLayout::Seed001 => r.seed001().await?,
            SeedLayout::Seed003 => r.seed003().await?,
            SeedLayout::Seed004 => r.seed004().await?,
        }
        let records = r.records(layout, now, window);
        Ok::<_, String>((records, r.report))
    })?;
    let want = fingerprint(&records)?;
    let held = store_records(&rt, config)?;
    let have = fingerprint(&held)?;
    if have.is_empty() {
        load_records(&rt, config, &records)?;
        return Ok(report);
    }
    let differs: Vec<&ArticleId> = want
        .iter()
        .filter(|(id, f)| have.get(*id) != Some(*f))
        .map(|(id, _)| id)
        .collect();
    if differs.is_empty() {
        report.unchanged = true;
        return Ok(report);
    }
    Err(format!(
        "the store already holds articles and {} of this import's differ (e.g. {}): import only into an empty store",
        differs.len(),
        differs[0]
    ))
}
