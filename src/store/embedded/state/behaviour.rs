//! The gate's behaviour rule (`gate.bot_articles_per_minute`): what it
//! keeps per visitor, derived from counted views.

use smallvec::SmallVec;

use super::article::Idx;
use crate::store::StoreSettings;

/// The behaviour rule's window: distinct articles viewed in any 60 s.
pub const BEHAVIOUR_MS: i64 = 60_000;

/// Per-visitor state of the behaviour rule (`gate.bot_articles_per_minute`).
/// Derived from counted views (rebuilt by log replay, not kept in
/// snapshots): a restart from a snapshot forgets who was quarantined.
#[derive(Debug, Clone, Default)]
pub struct Behaviour {
    /// Quarantined as `bot` until this rate-clock time (ms); 0: not.
    pub(super) bot_until_ms: i64,
    /// (rate clock ms, article) of counted views in the last 60 s, one
    /// entry per article. Most visitors view one article a minute: that
    /// one is held inline, with no allocation.
    pub(super) views: SmallVec<[(i64, Idx); 1]>,
}

impl Behaviour {
    pub(super) fn flagged(&self, clock: i64) -> bool {
        clock < self.bot_until_ms
    }

    /// Distinct articles viewed in the 60 s before `clock`, besides `idx`.
    pub(super) fn others(&self, clock: i64, idx: Option<Idx>) -> usize {
        self.views
            .iter()
            .filter(|&&(t, a)| t > clock - BEHAVIOUR_MS && Some(a) != idx)
            .count()
    }

    /// Quarantines the visitor from `clock` for `ms`, unless it is
    /// already.
    pub(super) fn quarantine(&mut self, clock: i64, ms: i64) {
        if !self.flagged(clock) {
            self.bot_until_ms = clock.saturating_add(ms);
            self.views = SmallVec::new();
        }
    }

    /// A counted view of article `idx` at `clock`.
    pub(super) fn viewed(&mut self, clock: i64, idx: Idx) {
        self.views
            .retain(|&mut (t, a)| t > clock - BEHAVIOUR_MS && a != idx);
        self.views.push((clock, idx));
    }

    pub(super) fn live(&self, clock: i64) -> bool {
        self.flagged(clock) || self.views.iter().any(|&(t, _)| t > clock - BEHAVIOUR_MS)
    }
}

pub fn bot_quarantine_ms(s: &StoreSettings) -> i64 {
    if s.bot_articles_per_minute == 0 {
        0
    } else {
        i64::from(s.bot_quarantine_secs) * 1000
    }
}
