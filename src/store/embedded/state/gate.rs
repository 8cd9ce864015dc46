//! The gate's stateful checks over [`Data`]: whether an event is taken,
//! its verdict (eventId replay, bots, rate limits, dedupe), the checks of a
//! vote, and what the gate's state holds. Pure: [`Data::apply`] records.

use super::Data;
use super::article::Idx;
use super::dedupe::DedupeKey;
use super::visitors::VisitorState;
use crate::model::{ArticleId, Event, EventType, Timestamp, Verdict, VoteDirection, VoteOutcome};
use crate::store::{IngestReject, StoreSettings};

impl Data {
    /// The newest arrival time (ms, on the gate's clock) the gate state
    /// holds: rate logs, the behaviour rule's views, remembered eventIds.
    /// A restarted store's [`crate::clock::GateClock`] never reads below
    /// it, so a wall clock that stepped back while it was down cannot put
    /// those entries in its future.
    pub fn newest_arrival_ms(&self) -> i64 {
        let ids = self
            .event_ids
            .values()
            .max()
            .map(|&s| s.saturating_mul(1000));
        [self.visitors.newest(), self.ip_limits.newest(), ids]
            .into_iter()
            .flatten()
            .max()
            .unwrap_or(i64::MIN)
    }

    /// Whether an event may be taken at all: with `require_known_articles`
    /// only for articles created by `PUT`; past `max_articles`, untrusted
    /// events only for articles the store already holds. A refused event
    /// changes nothing. `Ok` holds the event's article as [`Self::lookup`]
    /// finds it, for `judge` and `apply_event`.
    pub fn accepts(&self, ev: &Event, s: &StoreSettings) -> Result<Option<Idx>, IngestReject> {
        let found = self.lookup(&ev.article);
        if s.require_known_articles && !found.is_some_and(|i| self.article(i).known) {
            return Err(IngestReject::UnknownArticle);
        }
        if found.is_none()
            && !ev.trusted
            && s.max_articles > 0
            && self.articles.len() as u64 >= s.max_articles
        {
            return Err(IngestReject::TooManyArticles);
        }
        Ok(found)
    }

    /// Whether the behaviour rule quarantines this event's visitor: already
    /// quarantined (`Some(false)`), or this view would be its
    /// `bot_articles_per_minute + 1`-th distinct article in 60 s
    /// (`Some(true)`). Pure. `found` is the event's article (`lookup`).
    pub fn behaviour_bot(&self, ev: &Event, found: Option<Idx>, s: &StoreSettings) -> Option<bool> {
        let state = self.visitors.get(&ev.visitor);
        behaviour_bot(state.as_deref(), ev, found, s)
    }

    /// The gate's stateful checks, in order. Pure: `apply` records.
    /// `found` is the event's article (`lookup`).
    pub fn judge(&self, ev: &Event, found: Option<Idx>, s: &StoreSettings) -> Verdict {
        if let Some(key) = ev.event_id
            && let Some(&seen) = self.event_ids.get(&key)
            && ev.arrival_ms / 1000 - seen < i64::from(s.event_id_ttl_secs)
        {
            return Verdict::Replayed;
        }
        // The visitor's state, looked up once for both of its checks.
        let visitor = self.visitors.get(&ev.visitor);
        let behaviour = behaviour_bot(visitor.as_deref(), ev, found, s);
        if ev.bot.is_bot() || behaviour == Some(false) {
            return Verdict::Bot;
        }
        let clock = ev.rate_clock_ms();
        if !self.visitors.admits(visitor.as_deref(), clock) || !self.ip_limits.allows(&ev.ip, clock)
        {
            return Verdict::RateLimited;
        }
        if ev.kind.deduplicated()
            && let Some(idx) = found
            && let Some(last) = self
                .dedupe
                .get(&DedupeKey::new(idx, ev.visitor, ev.kind as u8))
            && (ev.ts - last).abs() < i64::from(s.dedupe_window_secs)
        {
            return Verdict::Duplicate;
        }
        if behaviour == Some(true) {
            return Verdict::Bot;
        }
        Verdict::Counted
    }

    /// Seed 003's checks for a vote, in order. Pure: `apply` records.
    pub fn judge_vote(
        &self,
        id: &ArticleId,
        user: u128,
        direction: VoteDirection,
        now: Timestamp,
        s: &StoreSettings,
    ) -> Result<Idx, VoteOutcome> {
        let idx = self
            .lookup(id)
            .filter(|&i| !self.article(i).deleted)
            .ok_or(VoteOutcome::UnknownArticle)?;
        let votes = &s.models.votes;
        if direction == VoteDirection::Down && !votes.allow_down_votes {
            return Err(VoteOutcome::DownVotesDisabled);
        }
        let a = self.article(idx);
        if now - a.meta.published_at() >= votes.window_secs() {
            return Err(VoteOutcome::Closed);
        }
        if a.voters.get().is_some_and(|v| v.contains(&user)) {
            return Err(VoteOutcome::AlreadyVoted);
        }
        Ok(idx)
    }

    /// Entries of the gate's state: dedupe pairs, eventIds, and rate-limit
    /// plus behaviour keys (one per visitor with either, one per IP).
    pub fn gate_sizes(&self) -> (usize, usize, usize) {
        (
            self.dedupe.len(),
            self.event_ids.len(),
            self.visitors.len() + self.ip_limits.keys(),
        )
    }

    /// Heap bytes the dedupe table and the per-visitor state hold.
    pub fn gate_heap_bytes(&self) -> (usize, usize) {
        (self.dedupe.heap_bytes(), self.visitors.heap_bytes())
    }
}

/// [`Data::behaviour_bot`] over the visitor's state `state` (looked up by
/// the caller).
fn behaviour_bot(
    state: Option<&VisitorState>,
    ev: &Event,
    found: Option<Idx>,
    s: &StoreSettings,
) -> Option<bool> {
    if s.bot_articles_per_minute == 0 {
        return None;
    }
    let clock = ev.rate_clock_ms();
    let b = state.map(|s| &s.behaviour);
    if b.is_some_and(|b| b.flagged(clock)) {
        return Some(false);
    }
    if ev.kind != EventType::View {
        return None;
    }
    let others = b.map_or(0, |b| b.others(clock, found));
    (others >= s.bot_articles_per_minute as usize).then_some(true)
}
