//! `[review] mode = "suspicious"`: which articles about to be served hold
//! for review because their rise comes from a narrow slice of the network
//! (README, "Curation").
//!
//! The evidence is the store's ([`crate::store::NetEvidence`]) over the
//! review's window (`review.window_hours` to the current hour): `blocks`,
//! the distinct network blocks (/24, /64) of the article's counted views
//! whose address is known, `uv` the distinct visitors of those same views,
//! and `held_share` the share of its events the gate held back
//! (quarantined / (counted + quarantined)). An article holds when
//!
//! - `uv >= review.min_visitors` and `blocks / uv <= review.max_block_share`
//!   (`narrow_network`), or
//! - at least `review.min_visitors` events and `held_share >=
//!   review.max_held_share` (`held_back`).
//!
//! Views whose block is unknown (trusted backends that send no `ip`,
//! events logged before the block was kept) count in neither `blocks`
//! nor `uv`: an article seen only through them has no network evidence
//! and is never held for its network.
//!
//! A verdict is remembered per article for [`SCREEN_TTL`], so a busy
//! ranking reads the evidence of its unreviewed articles at most that
//! often.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::config::ReviewConfig;
use crate::model::{ArticleId, Timestamp, hour_of};
use crate::store::{NetEvidence, Store, StoreError};

/// How long a verdict on an article is reused.
pub const SCREEN_TTL: Duration = Duration::from_secs(5);

/// Most verdicts remembered; past it the memory is emptied.
const MAX_REMEMBERED: usize = 100_000;

/// Which rule held an article.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    NarrowNetwork,
    HeldBack,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::NarrowNetwork => "narrow_network",
            Rule::HeldBack => "held_back",
        }
    }
}

/// A rule an article broke, and its evidence.
pub type Suspect = (Rule, NetEvidence);

/// The rule `e` breaks under `cfg`, if any (module docs).
pub fn judge(e: &NetEvidence, cfg: &ReviewConfig) -> Option<Rule> {
    if e.visitors >= cfg.min_visitors && e.blocks as f64 <= cfg.max_block_share * e.visitors as f64
    {
        return Some(Rule::NarrowNetwork);
    }
    let events = e.counted + e.held;
    if events >= cfg.min_visitors && e.held as f64 >= cfg.max_held_share * events as f64 {
        return Some(Rule::HeldBack);
    }
    None
}

/// The hours the evidence covers at `now`, oldest first.
pub fn window(now: Timestamp, cfg: &ReviewConfig) -> std::ops::RangeInclusive<i64> {
    crate::time::last_hours(hour_of(now), cfg.window_hours)
}

/// The evidence as the review queue shows it (`evidence.network`).
pub fn evidence_json(e: &NetEvidence, rule: Rule, now: Timestamp, cfg: &ReviewConfig) -> Value {
    let hours = window(now, cfg);
    let share = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    json!({
        "rule": rule.as_str(),
        "blocks": e.blocks,
        "uv": e.visitors,
        "blockShare": share(e.blocks, e.visitors),
        "counted": e.counted,
        "heldBack": e.held,
        "heldShare": share(e.held, e.counted + e.held),
        "from": hours.start() * 3600,
        "until": (hours.end() + 1) * 3600,
        "minVisitors": cfg.min_visitors,
        "maxBlockShare": cfg.max_block_share,
        "maxHeldShare": cfg.max_held_share,
    })
}

/// Remembered verdicts: article → (when, the rule broken and its evidence).
#[derive(Default)]
pub struct Screen {
    seen: Mutex<HashMap<ArticleId, (Instant, Option<Suspect>)>>,
}

impl Screen {
    /// The articles of `ids` that break a rule, with the rule and evidence.
    pub async fn suspects(
        &self,
        store: &dyn Store,
        ids: Vec<ArticleId>,
        now: Timestamp,
        cfg: &ReviewConfig,
    ) -> Result<HashMap<ArticleId, Suspect>, StoreError> {
        let mut out = HashMap::new();
        let mut ask = Vec::new();
        {
            let seen = self.seen.lock();
            for id in ids {
                match seen.get(&id) {
                    Some((at, v)) if at.elapsed() < SCREEN_TTL => {
                        if let Some(v) = v {
                            out.insert(id, *v);
                        }
                    }
                    _ => ask.push(id),
                }
            }
        }
        if ask.is_empty() {
            return Ok(out);
        }
        let got = store.net_evidence(&ask, now, cfg.window_hours).await?;
        let at = Instant::now();
        let mut seen = self.seen.lock();
        if seen.len() + ask.len() > MAX_REMEMBERED {
            seen.clear();
        }
        for (id, e) in ask.into_iter().zip(got) {
            let v = judge(&e, cfg).map(|r| (r, e));
            if let Some(v) = v {
                out.insert(id.clone(), v);
            }
            seen.insert(id, (at, v));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(blocks: u64, visitors: u64, counted: u64, held: u64) -> NetEvidence {
        NetEvidence {
            blocks,
            visitors,
            counted,
            held,
        }
    }

    #[test]
    fn the_rules_and_their_edges() {
        let c = ReviewConfig::default();
        assert_eq!(judge(&ev(1, 100, 100, 0), &c), Some(Rule::NarrowNetwork));
        assert_eq!(judge(&ev(20, 100, 100, 0), &c), Some(Rule::NarrowNetwork));
        assert_eq!(judge(&ev(21, 100, 100, 0), &c), None);
        assert_eq!(judge(&ev(100, 100, 100, 0), &c), None);
        // Too few visitors to tell.
        assert_eq!(judge(&ev(1, 19, 19, 0), &c), None);
        // No known blocks: no network evidence at all.
        assert_eq!(judge(&ev(0, 0, 500, 0), &c), None);
        // Held back: half of 40 events.
        assert_eq!(judge(&ev(40, 40, 20, 20), &c), Some(Rule::HeldBack));
        assert_eq!(judge(&ev(40, 40, 21, 19), &c), None);
        assert_eq!(judge(&ev(5, 5, 5, 10), &c), None);
    }
}
