//! Dumps (`hotrank export` / `import`): [`Data`] as the store-neutral
//! records of [`crate::store::dump`], and back.

use super::Data;
use super::article::{Article, Bucket, UvCount};
use super::compact::Lifetime;
use super::dedupe::DedupeKey;
use crate::model::{Counters, EventType, Quarantine};
use crate::store::StoreSettings;
use crate::store::dump::{
    DumpBucket, DumpCounters, DumpError, DumpVotes, RateScope, Record, hll_from_b64, hll_to_b64,
    parse_u64, parse_u128,
};

fn kind_of(c: char) -> Option<EventType> {
    EventType::ALL
        .into_iter()
        .find(|k| k.as_str().starts_with(c))
}

fn bucket_counters(b: &Bucket) -> DumpCounters {
    DumpCounters {
        pv: u64::from(b.pv),
        likes: u64::from(b.likes),
        comments: u64::from(b.comments),
        favorites: u64::from(b.favorites),
        shares: u64::from(b.shares),
        dwell_seconds: b.dwell_seconds,
        dwell_reports: u64::from(b.dwell_reports),
        quarantine: b.quarantine.value().0,
        uv: hll_to_b64(&b.uv),
    }
}

fn bucket_from(hour: i64, c: &DumpCounters) -> Result<Bucket, DumpError> {
    let n = |v: u64| u32::try_from(v).map_err(|_| DumpError::CountTooLarge { hour });
    Ok(Bucket {
        hour: i32::try_from(hour).map_err(|_| DumpError::HourOutOfRange { hour })?,
        pv: n(c.pv)?,
        likes: n(c.likes)?,
        comments: n(c.comments)?,
        favorites: n(c.favorites)?,
        shares: n(c.shares)?,
        dwell_reports: n(c.dwell_reports)?,
        dwell_seconds: c.dwell_seconds,
        uv: hll_from_b64(&c.uv)?,
        quarantine: Quarantine(c.quarantine).into(),
        uv_count: UvCount::STALE,
    })
}

impl Data {
    /// Every article, total and gate entry as dump records.
    pub fn export(&self) -> Vec<Record> {
        let mut out = Vec::new();
        for a in &self.articles {
            let l = a.lifetime.get();
            let mut voters: Vec<String> = (a.voters.get().into_iter().flatten())
                .map(|v| format!("{v:032x}"))
                .collect();
            voters.sort();
            out.push(Record::Article {
                votes: DumpVotes {
                    ups: l.ups,
                    downs: l.downs,
                    voters,
                },
                id: a.id.clone(),
                meta: a.meta.get().into_owned(),
                known: a.known,
                deleted: a.deleted,
                lifetime: DumpCounters {
                    pv: l.pv,
                    likes: l.likes,
                    comments: l.comments,
                    favorites: l.favorites,
                    shares: l.shares,
                    dwell_seconds: l.dwell_seconds,
                    dwell_reports: l.dwell_reports,
                    quarantine: a.quarantine.value().0,
                    uv: hll_to_b64(&a.lifetime_uv),
                },
                hours: a
                    .buckets
                    .iter()
                    .map(|b| DumpBucket {
                        at: b.hour(),
                        c: bucket_counters(b),
                    })
                    .collect(),
                days: Vec::new(),
            });
        }
        out.push(Record::Totals {
            counted: self.counted,
            quarantine: self.quarantine.0,
            by_hour: self
                .quarantine_by_hour
                .iter()
                .map(|(h, q)| (*h, q.0))
                .collect(),
        });
        for (key, last) in self.dedupe.iter() {
            let (idx, visitor, kind) = key.parts();
            let kind = EventType::ALL[kind as usize];
            out.push(Record::Dedupe {
                article: self.article(idx).id.clone(),
                kind: kind.as_str().chars().next().unwrap_or('v'),
                visitor: format!("{visitor:032x}"),
                last,
            });
        }
        for (&key, &seen) in &self.event_ids {
            out.push(Record::EventId {
                key: format!("{key:032x}"),
                seen,
            });
        }
        for (k, log) in self.visitors.logs() {
            out.push(Record::Rate {
                scope: RateScope::Visitor,
                key: format!("{k:032x}"),
                log: log.iter().copied().collect(),
            });
        }
        for (k, log) in self.ip_limits.logs() {
            out.push(Record::Rate {
                scope: RateScope::Ip,
                key: format!("{k:016x}"),
                log: log.iter().copied().collect(),
            });
        }
        out
    }

    /// State rebuilt from dump records. Daily buckets (from Redis, for
    /// days past its hourly horizon) become the first hour of their day.
    pub fn import(records: &[Record], s: &StoreSettings) -> Result<Data, DumpError> {
        let mut d = Data::new(s);
        let mut pending = Vec::new();
        for r in records {
            match r {
                Record::Header { .. } | Record::Identity { .. } => {}
                Record::Article {
                    id,
                    meta,
                    known,
                    deleted,
                    lifetime,
                    hours,
                    days,
                    votes,
                } => {
                    if d.lookup(id).is_some() {
                        return Err(DumpError::Duplicate(id.clone()));
                    }
                    let mut a = Article::new(id.clone(), meta.clone().into(), *known);
                    a.deleted = *deleted;
                    a.lifetime = Lifetime::from(Counters {
                        pv: lifetime.pv,
                        likes: lifetime.likes,
                        comments: lifetime.comments,
                        favorites: lifetime.favorites,
                        shares: lifetime.shares,
                        dwell_seconds: lifetime.dwell_seconds,
                        dwell_reports: lifetime.dwell_reports,
                        ups: votes.ups,
                        downs: votes.downs,
                        ..Counters::default()
                    });
                    for v in &votes.voters {
                        let user =
                            u128::from_str_radix(v, 16).map_err(|_| DumpError::BadVoter {
                                article: id.clone(),
                                voter: v.clone(),
                            })?;
                        a.voters.get_mut().insert(user);
                    }
                    a.lifetime_uv = hll_from_b64(&lifetime.uv)?;
                    a.quarantine = Quarantine(lifetime.quarantine).into();
                    for b in hours {
                        a.buckets.push(bucket_from(b.at, &b.c)?);
                    }
                    for b in days {
                        let first = b.at * 24;
                        if !a.buckets.iter().any(|x| x.hour().div_euclid(24) == b.at) {
                            a.buckets.push(bucket_from(first, &b.c)?);
                        }
                    }
                    a.buckets.sort_by_key(|b| b.hour());
                    a.buckets.dedup_by_key(|b| b.hour());
                    d.insert_article(a);
                }
                Record::Totals {
                    counted,
                    quarantine,
                    by_hour,
                } => {
                    d.counted = *counted;
                    d.quarantine = Quarantine(*quarantine);
                    d.quarantine_by_hour =
                        by_hour.iter().map(|(h, q)| (*h, Quarantine(*q))).collect();
                }
                other => pending.push(other),
            }
        }
        for r in pending {
            match r {
                Record::Dedupe {
                    article,
                    kind,
                    visitor,
                    last,
                } => {
                    let kind = kind_of(*kind).ok_or(DumpError::UnknownKind)?;
                    if let Some(idx) = d.lookup(article) {
                        d.dedupe
                            .insert(DedupeKey::new(idx, parse_u128(visitor)?, kind as u8), *last);
                    }
                }
                Record::EventId { key, seen } => {
                    d.event_ids.insert(parse_u128(key)?, *seen);
                }
                Record::Rate { scope, key, log } => match scope {
                    RateScope::Visitor => d.visitors.set_log(parse_u128(key)?, log.clone()),
                    RateScope::Ip => d.ip_limits.set_log(parse_u64(key)?, log.clone()),
                },
                _ => {}
            }
        }
        // A dump holds no counts by category: the buckets' (`categories`).
        d.site.categories = super::categories::CategoryCounts::from_buckets(&d.articles);
        Ok(d)
    }
}
