//! The review's network evidence in the embedded store (`[review] mode =
//! "suspicious"`, README "Curation"): per article and hour, a sketch of
//! the distinct network blocks of its counted views and one of the
//! visitors of those views (views whose block is unknown, 0, are left
//! out of both). Kept only while the mode is on, for the review's window
//! of hours; snapshotted with the state (version 4).
//!
//! Memory: an article-hour is one map entry of 88 bytes (index and two
//! [`Hll`] heads) plus the two sketches' images: 42 bytes for one
//! reader, 562 for 100 readers from 100 blocks, 3,752 for 1,000 (about 2-3
//! bytes per distinct element while sparse; at most 12,304 each dense),
//! as `size::bytes_per_article_hour` prints.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::article::Idx;
use crate::gate::KeyedMap;
use crate::model::{Event, EventType, Timestamp, hour_of};
use crate::sketch::{HLL_SEED, Hll, murmur64a};

/// One article's hour of evidence.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetHour {
    /// Distinct network blocks (`murmur64a` of [`Event::net`]'s 8 bytes,
    /// little-endian: Redis' `PFADD` of the same bytes).
    pub blocks: Hll,
    /// Distinct visitors of the views with a known block.
    pub visitors: Hll,
}

/// Every article's evidence, by hour.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct NetEvidence {
    hours: BTreeMap<i64, KeyedMap<Idx, NetHour>>,
}

/// What an article's evidence says over some hours.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetFigures {
    pub blocks: u64,
    pub visitors: u64,
}

impl NetEvidence {
    /// A counted event of `articles[idx]`, `visitor_hash` its visitor's
    /// sketch hash: a view with a known block is recorded.
    pub fn counted(&mut self, idx: Idx, ev: &Event, visitor_hash: u64) {
        if ev.kind != EventType::View || ev.net == 0 {
            return;
        }
        let h = self
            .hours
            .entry(hour_of(ev.ts))
            .or_default()
            .entry(idx)
            .or_default();
        h.blocks
            .add_hash(murmur64a(&ev.net.to_le_bytes(), HLL_SEED));
        h.visitors.add_hash(visitor_hash);
    }

    /// The union over `hours` (inclusive) of `idx`'s evidence.
    pub fn figures(&self, idx: Idx, hours: std::ops::RangeInclusive<i64>) -> NetFigures {
        let hs: Vec<&NetHour> = self
            .hours
            .range(hours)
            .filter_map(|(_, m)| m.get(&idx))
            .collect();
        let blocks: Vec<&Hll> = hs.iter().map(|h| &h.blocks).collect();
        let visitors: Vec<&Hll> = hs.iter().map(|h| &h.visitors).collect();
        NetFigures {
            blocks: Hll::union_count(&blocks),
            visitors: Hll::union_count(&visitors),
        }
    }

    /// Keeps the last `keep` hours to `now`'s (none when 0: the mode is off).
    pub fn expire(&mut self, now: Timestamp, keep: u32) {
        if keep == 0 {
            self.hours.clear();
            return;
        }
        let first = hour_of(now) - i64::from(keep) + 1;
        self.hours = self.hours.split_off(&first);
    }

    /// Article-hours held.
    pub fn len(&self) -> usize {
        self.hours.values().map(|m| m.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.hours.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ArticleId;

    #[test]
    fn blocks_and_visitors_per_window_unknown_blocks_left_out() {
        let mut n = NetEvidence::default();
        let t0 = 1_800_000_000; // an hour's start
        for v in 0..100u128 {
            let ev = Event {
                net: 7,
                ..Event::view(ArticleId::from_number(1), v, t0 + 10)
            };
            n.counted(0, &ev, murmur64a(&ev.visitor_element(), HLL_SEED));
            let other = Event {
                net: 0,
                ..Event::view(ArticleId::from_number(1), v + 1000, t0 + 3600)
            };
            n.counted(0, &other, murmur64a(&other.visitor_element(), HLL_SEED));
        }
        let h = hour_of(t0);
        let f = n.figures(0, h..=h + 1);
        assert_eq!(
            f,
            NetFigures {
                blocks: 1,
                visitors: 100
            }
        );
        assert_eq!(n.figures(1, h..=h + 1), NetFigures::default());
        assert_eq!(n.len(), 1);
        n.expire(t0 + 3 * 3600, 2);
        assert!(n.is_empty());
    }
}

#[cfg(test)]
mod size {
    use super::*;

    /// The memory README states per article-hour (run with --nocapture).
    #[test]
    fn bytes_per_article_hour() {
        for n in [1u64, 10, 100, 1000] {
            let mut h = NetHour::default();
            for i in 0..n {
                h.blocks.add_hash(murmur64a(&i.to_le_bytes(), HLL_SEED));
                h.visitors
                    .add_hash(murmur64a(&(i + 7).to_le_bytes(), HLL_SEED));
            }
            let heap = h.blocks.byte_len() + h.visitors.byte_len();
            println!(
                "{n} blocks and visitors: {} bytes inline, {heap} on the heap",
                std::mem::size_of::<(Idx, NetHour)>()
            );
            assert!(heap <= 2 * crate::sketch::HLL_DENSE_SIZE);
        }
    }
}
