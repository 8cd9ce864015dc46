//! The layouts earlier payload versions wrote, frozen, and how each
//! converts to this build's `Data` and `LogRecord` (the versions are
//! listed in the module docs of [`super`]). Never change a type here: a
//! layout change adds a new frozen copy of the types it replaces.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::super::state::Data;
use super::super::state::article::Article;
use super::super::state::categories::CategoryCounts;
use super::super::state::dedupe::{Dedupe, DedupeKey};
use super::super::state::record::LogRecord;
use crate::gate::{KeyedMap, SlidingLimiter};
use crate::model::{Quarantine, Timestamp};
use crate::store::StoreSettings;

/// `Data` as versions 0 and 1 laid it out (frozen).
#[derive(Deserialize)]
pub(super) struct DataV1 {
    articles: Vec<Article>,
    /// A map in postcard is its length and its pairs, as a sequence is.
    dedupe: Vec<((u32, u128, u8), Timestamp)>,
    event_ids: KeyedMap<u128, Timestamp>,
    visitor_limits: SlidingLimiter<u128>,
    ip_limits: SlidingLimiter<u64>,
    counted: u64,
    quarantine: Quarantine,
    quarantine_by_hour: BTreeMap<i64, Quarantine>,
    #[serde(default)]
    next_post_id: u64,
}

impl From<DataV1> for Data {
    fn from(v: DataV1) -> Data {
        // Version 2's fields, plus the dedupe entries version 1 kept inline.
        let mut d = Data::from(DataV2 {
            articles: v.articles,
            event_ids: v.event_ids,
            visitor_limits: v.visitor_limits,
            ip_limits: v.ip_limits,
            counted: v.counted,
            quarantine: v.quarantine,
            quarantine_by_hour: v.quarantine_by_hour,
            next_post_id: v.next_post_id,
        });
        d.dedupe = Dedupe::with_seed(d.dedupe.seed(), v.dedupe.len());
        (d.dedupe).extend(
            (v.dedupe.into_iter())
                .map(|((idx, visitor, kind), t)| (DedupeKey::new(idx, visitor, kind), t)),
        );
        d
    }
}

/// `Data` (without the dedupe entries) as version 2 laid it out (frozen).
#[derive(Deserialize)]
pub(super) struct DataV2 {
    articles: Vec<Article>,
    event_ids: KeyedMap<u128, Timestamp>,
    visitor_limits: SlidingLimiter<u128>,
    ip_limits: SlidingLimiter<u64>,
    counted: u64,
    quarantine: Quarantine,
    quarantine_by_hour: BTreeMap<i64, Quarantine>,
    next_post_id: u64,
}

impl From<DataV2> for Data {
    fn from(v: DataV2) -> Data {
        let mut d = Data::new(&StoreSettings::default());
        d.articles = v.articles;
        d.event_ids = v.event_ids;
        d.visitors = v.visitor_limits.into();
        d.ip_limits = v.ip_limits;
        d.counted = v.counted;
        d.quarantine = v.quarantine;
        d.quarantine_by_hour = v.quarantine_by_hour;
        d.next_post_id = v.next_post_id;
        d
    }
}

/// The site's figures as version 3 laid them out (frozen).
#[derive(Deserialize)]
pub(super) struct SiteStatsV3 {
    crawlers_by_hour: BTreeMap<i64, Vec<u64>>,
    visitors_by_hour: BTreeMap<i64, crate::sketch::Hll>,
}

/// `Data` (without the dedupe entries) as version 3 laid it out (frozen):
/// version 2's fields, then the site's figures (postcard writes a nested
/// struct as its fields in order, with nothing around them).
#[derive(Deserialize)]
pub(super) struct DataV3 {
    v2: DataV2,
    site: SiteStatsV3,
}

impl From<DataV3> for Data {
    fn from(v: DataV3) -> Data {
        let mut d = Data::from(v.v2);
        d.site.crawlers_by_hour = v.site.crawlers_by_hour;
        d.site.visitors_by_hour = v.site.visitors_by_hour;
        // The category counts version 4 adds, from the articles' hourly
        // buckets and current categories (module docs).
        d.site.categories = CategoryCounts::from_buckets(&d.articles);
        d
    }
}

/// `Event` as versions 0 to 3 laid it out (frozen): version 4 added `net`.
#[derive(Deserialize)]
pub(super) struct EventV3 {
    kind: crate::model::EventType,
    article: crate::model::ArticleId,
    visitor: u128,
    ip: u64,
    ts: Timestamp,
    arrival_ms: i64,
    event_id: Option<u128>,
    seconds: u32,
    bot: crate::crawler::Crawler,
    trusted: bool,
}

/// `LogRecord` as versions 0 to 3 laid it out (frozen): the same variants
/// in the same order, an event as [`EventV3`].
#[derive(Deserialize)]
pub(super) enum LogRecordV3 {
    Event {
        ev: EventV3,
        verdict: crate::model::Verdict,
    },
    Put {
        id: crate::model::ArticleId,
        meta: crate::model::ArticleMeta,
    },
    Delete {
        id: crate::model::ArticleId,
    },
    Post {
        id: crate::model::ArticleId,
        meta: crate::model::ArticleMeta,
        poster: u128,
    },
    Vote {
        id: crate::model::ArticleId,
        user: u128,
        direction: crate::model::VoteDirection,
    },
    PostVoted {
        id: crate::model::ArticleId,
        meta: crate::model::ArticleMeta,
        poster: u128,
    },
}

impl From<LogRecordV3> for LogRecord {
    fn from(r: LogRecordV3) -> LogRecord {
        match r {
            LogRecordV3::Event { ev, verdict } => LogRecord::Event {
                ev: crate::model::Event {
                    kind: ev.kind,
                    article: ev.article,
                    visitor: ev.visitor,
                    ip: ev.ip,
                    ts: ev.ts,
                    arrival_ms: ev.arrival_ms,
                    event_id: ev.event_id,
                    seconds: ev.seconds,
                    bot: ev.bot,
                    trusted: ev.trusted,
                    net: 0,
                },
                verdict,
            },
            LogRecordV3::Put { id, meta } => LogRecord::Put { id, meta },
            LogRecordV3::Delete { id } => LogRecord::Delete { id },
            LogRecordV3::Post { id, meta, poster } => LogRecord::Post { id, meta, poster },
            LogRecordV3::Vote {
                id,
                user,
                direction,
            } => LogRecord::Vote {
                id,
                user,
                direction,
            },
            LogRecordV3::PostVoted { id, meta, poster } => {
                LogRecord::PostVoted { id, meta, poster }
            }
        }
    }
}
