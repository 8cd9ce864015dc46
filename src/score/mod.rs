//! Scoring models: pure functions of counters, metadata and `now`.
//!
//! No function here reads a clock; the caller passes `now`. That is what
//! lets the stores re-score at query time and tests drive time without
//! sleeping.
//!
//! Every model also explains itself: [`Models::explain`] returns the terms
//! that make the score, and the score is always rebuilt from those terms.

mod gravity;

pub use gravity::GravityParams;

use serde::{Deserialize, Serialize};

use crate::model::{ArticleMeta, Counters, Timestamp};

/// The ranking models hotrank serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelKind {
    /// Seed 000: `(α·pv + β·uv) / (hours_since_pub + base)^γ`.
    Gravity,
}

impl ModelKind {
    pub const ALL: [ModelKind; 1] = [ModelKind::Gravity];

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ModelKind::Gravity => "gravity",
        }
    }

    /// Whether a score, once computed, can only stay or fall as time passes
    /// with no new event. Stores rely on it: a score computed earlier is an
    /// upper bound of the score now, which is what makes exact top-k at
    /// query time cheap (see docs/design.md, "Freshness").
    pub fn non_increasing_in_time(self) -> bool {
        match self {
            // The numerator only loses buckets as the window slides and the
            // denominator grows with age.
            ModelKind::Gravity => true,
        }
    }
}

/// The terms of one score, in the order a reader would add them up.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explain(pub Vec<(&'static str, f64)>);

impl Explain {
    pub fn get(&self, name: &str) -> Option<f64> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }
}

/// Every model with its configured parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Models {
    pub gravity: GravityParams,
}

impl Models {
    /// Checks every parameter; the message names the key and its valid range.
    pub fn validate(&self) -> Result<Vec<String>, String> {
        self.gravity.validate()
    }

    pub fn score(&self, kind: ModelKind, c: &Counters, meta: &ArticleMeta, now: Timestamp) -> f64 {
        match kind {
            ModelKind::Gravity => self.gravity.score(c, meta.published_at, now),
        }
    }

    pub fn explain(
        &self,
        kind: ModelKind,
        c: &Counters,
        meta: &ArticleMeta,
        now: Timestamp,
    ) -> Explain {
        match kind {
            ModelKind::Gravity => self.gravity.explain(c, meta.published_at, now),
        }
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
