//! The keys each script call of the pipeline declares on a Redis Cluster
//! (`declared.lua`: the gate and the counters refuse any name the call did
//! not declare). A cluster routes a call by its keys, and refuses it as a
//! whole, before it runs, while one of them is moving (`ASK`, `TRYAGAIN`):
//! so a call never writes half of its effects on one node. The site's
//! keys are in one slot (`[redis] shards = 1`). On one Redis calls declare
//! nothing, as the direct store's (names cost bytes on every call).

use redis::ScriptInvocation;

use super::ingest::IngestPipeline;
use super::stream::Entry;
use crate::model::{ArticleId, Event, EventType, Timestamp};
use crate::store::redis::kind_char;

/// Raw entry fields (pipe_append.lua's NAMES) the keys depend on.
const RAW_KIND: usize = 1;
const RAW_ARTICLE: usize = 2;
const RAW_VISITOR: usize = 3;
const RAW_IP: usize = 5;
const RAW_TS: usize = 6;
const RAW_EVENT_ID: usize = 9;
/// Flagged entry fields (pipe_flag.lua) the keys depend on.
const FLAGGED_KIND: usize = 1;
const FLAGGED_ARTICLE: usize = 2;
const FLAGGED_TS: usize = 4;
const FLAGGED_NET: usize = 10;

impl IngestPipeline {
    /// Whether calls name their keys: on a cluster (and with a cluster's
    /// names on one Redis, in tests).
    pub(super) fn declares(&self) -> bool {
        let o = self.store.options();
        o.cluster || o.cluster_names
    }

    /// Declares `keys` on `inv` when calls declare theirs.
    pub(super) fn declare(
        &self,
        inv: &mut ScriptInvocation<'_>,
        keys: impl FnOnce() -> Vec<String>,
    ) {
        if self.declares() {
            for k in keys() {
                inv.key(k);
            }
        }
    }

    /// Every key a filter call over `entries` of partition `n` may touch:
    /// the gate's (the direct store's ingest keys for the same events, on
    /// the gate clock as last learnt at `now`), the partition's streams,
    /// the refusal tallies and the verdicts of the entries' eventIds.
    pub(super) fn filter_keys(&self, n: u32, entries: &[Entry], now: Timestamp) -> Vec<String> {
        let events: Vec<Event> = entries
            .iter()
            .filter_map(|(_, f)| {
                let net = f.get(RAW_IP).is_some_and(|ip| ip.len() > 16);
                key_event(
                    f.get(RAW_KIND)?,
                    f.get(RAW_ARTICLE)?,
                    f.get(RAW_VISITOR),
                    f.get(RAW_TS)?,
                    net,
                )
            })
            .collect();
        let mut keys = self.store.ingest_keys(&events, "", now);
        keys.extend([self.raw_key(n), self.flagged_key(n), self.refused_key()]);
        for (_, f) in entries {
            if let Some(eid) = f.get(RAW_EVENT_ID).filter(|e| !e.is_empty()) {
                keys.push(self.verdict_key_hex(&String::from_utf8_lossy(eid)));
            }
        }
        keys
    }

    /// Every key a count call over `entries` of partition `n` may touch:
    /// the counters' (the direct store's ingest keys for the same events)
    /// and the partition's flagged stream.
    pub(super) fn count_keys(&self, n: u32, entries: &[Entry], now: Timestamp) -> Vec<String> {
        let events: Vec<Event> = entries
            .iter()
            .filter_map(|(_, f)| {
                let net = f.get(FLAGGED_NET).is_some_and(|x| !x.is_empty());
                key_event(
                    f.get(FLAGGED_KIND)?,
                    f.get(FLAGGED_ARTICLE)?,
                    None,
                    f.get(FLAGGED_TS)?,
                    net,
                )
            })
            .collect();
        let mut keys = self.store.ingest_keys(&events, "", now);
        keys.push(self.flagged_key(n));
        keys
    }
}

/// An event with the fields its keys are named by (kind, article, visitor,
/// ts, whether its network block is known); `None` for fields the scripts
/// would refuse anyway.
fn key_event(
    kind: &[u8],
    article: &[u8],
    visitor_hex: Option<&Vec<u8>>,
    ts: &[u8],
    net: bool,
) -> Option<Event> {
    let kind = EventType::ALL
        .into_iter()
        .find(|k| kind_char(*k).as_bytes() == kind)?;
    let article = ArticleId::parse(std::str::from_utf8(article).ok()?).ok()?;
    let visitor = match visitor_hex {
        Some(v) => u128::from_str_radix(std::str::from_utf8(v).ok()?, 16).ok()?,
        None => 0,
    };
    let ts = std::str::from_utf8(ts).ok()?.parse().ok()?;
    Some(Event {
        kind,
        net: u64::from(net),
        ..Event::view(article, visitor, ts)
    })
}
