//! Scoring models: pure functions of counters, metadata and `now`.
//!
//! No function here reads a clock; the caller passes `now`. That is what
//! lets the stores re-score at query time and tests drive time without
//! sleeping.
//!
//! Every model also explains itself: [`Models::explain`] returns the terms
//! that make the score, and the score is always rebuilt from those terms.

mod gravity;
pub mod peers;
mod votes;
mod weighted;
mod window;
pub mod words;

pub use gravity::GravityParams;
pub use votes::{RedditParams, VotesParams};
pub use weighted::WeightedParams;
pub use window::WindowParams;

use serde::{Deserialize, Serialize};

use crate::model::{ArticleMeta, Counters, Timestamp};

/// The model names and score explanations are vocabulary every layer
/// speaks; they live in [`crate::model`] so that `model` needs nothing
/// from `score`.
pub use crate::model::{Explain, ModelKind};

/// Every model with its configured parameters (the `[models.*]` tables).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Models {
    pub gravity: GravityParams,
    pub weighted: WeightedParams,
    pub votes: VotesParams,
    pub window: WindowParams,
    pub reddit: RedditParams,
}

impl Models {
    /// Checks every parameter; the message names the key and its valid range.
    pub fn validate(&self) -> Result<Vec<String>, String> {
        let warnings = self.gravity.validate()?;
        self.weighted.validate()?;
        self.votes.validate()?;
        self.window.validate()?;
        self.reddit.validate()?;
        Ok(warnings)
    }

    pub fn score(&self, kind: ModelKind, c: &Counters, meta: &ArticleMeta, now: Timestamp) -> f64 {
        let p = meta.published_at;
        match kind {
            ModelKind::Gravity => self.gravity.score(c, p, now),
            ModelKind::Weighted => self.weighted.score(c, p, now),
            ModelKind::Votes => self.votes.score(c, p),
            ModelKind::Window => self.window.score(c),
            ModelKind::Reddit => self.reddit.score(c, p),
            ModelKind::Controversy => peers::controversy(c),
            ModelKind::Confidence => peers::confidence(c),
            ModelKind::Hn => peers::hn(c, p, now),
            ModelKind::Lemmy => peers::lemmy(c, p, now),
        }
    }

    /// A bound of the score at `now` and at every later time, as long as no
    /// new event arrives: what rankings order their candidates by. Equal to
    /// the score for every model whose score cannot rise with time alone.
    pub fn upper_bound(
        &self,
        kind: ModelKind,
        c: &Counters,
        meta: &ArticleMeta,
        now: Timestamp,
    ) -> f64 {
        match kind {
            ModelKind::Weighted => self.weighted.upper_bound(c, meta.published_at, now),
            ModelKind::Hn => peers::hn_upper_bound(c, meta.published_at, now),
            ModelKind::Lemmy => peers::lemmy_upper_bound(c, meta.published_at, now),
            // Gravity: the windowed numerator can only lose buckets and the
            // denominator grows. Window: sums over a shrinking window. Vote
            // models: no dependence on time.
            _ => self.score(kind, c, meta, now),
        }
    }

    pub fn explain(
        &self,
        kind: ModelKind,
        c: &Counters,
        meta: &ArticleMeta,
        now: Timestamp,
    ) -> Explain {
        let p = meta.published_at;
        match kind {
            ModelKind::Gravity => self.gravity.explain(c, p, now),
            ModelKind::Weighted => self.weighted.explain(c, p, now),
            ModelKind::Votes => self.votes.explain(c, p),
            ModelKind::Window => self.window.explain(c),
            ModelKind::Reddit => self.reddit.explain(c, p),
            ModelKind::Controversy => peers::votes_explain(c, "controversy", peers::controversy(c)),
            ModelKind::Confidence => peers::votes_explain(c, "lowerBound", peers::confidence(c)),
            ModelKind::Hn => peers::hn_explain(c, p, now),
            ModelKind::Lemmy => peers::lemmy_explain(c, p, now),
        }
    }
}

/// A parameter must be finite and within `lo..=hi`.
fn check(key: &str, v: f64, lo: f64, hi: f64) -> Result<(), String> {
    if v.is_finite() && (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(format!(
            "{key} = {v} is invalid: must be a finite number in [{lo}, {hi}]"
        ))
    }
}

/// Hours from `published_at` to `now`, never negative (an article
/// published "in the future" is as fresh as one published now).
pub fn age_hours(published_at: Timestamp, now: Timestamp) -> f64 {
    if now > published_at {
        (now - published_at) as f64 / 3600.0
    } else {
        0.0
    }
}
