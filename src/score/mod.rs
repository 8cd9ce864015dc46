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
pub mod rising;
mod votes;
mod weighted;
mod window;
pub mod words;

pub use gravity::GravityParams;
pub use votes::{RedditParams, VotesParams};
pub use weighted::WeightedParams;
pub use window::WindowParams;

use serde::{Deserialize, Serialize};

use crate::model::{ArticleMeta, Counters, ModelParams, Timestamp, Trend};

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

    /// The score of `kind` with its parameters `p` at `now`. Rising reads
    /// its `trend` (the views each store reads from its hourly buckets,
    /// [`rising::evaluate`]); without one it is an article with no views.
    pub fn score(
        &self,
        kind: ModelKind,
        p: &ModelParams,
        c: &Counters,
        meta: &ArticleMeta,
        trend: Option<&Trend>,
        now: Timestamp,
    ) -> f64 {
        let pb = meta.published_at;
        match kind {
            ModelKind::Gravity => self.gravity.score(c, pb, now, p.decay),
            ModelKind::Weighted => self.weighted.score(c, pb, now, p.decay),
            ModelKind::Votes => self.votes.score(c, pb),
            ModelKind::Window => self.window.score(c),
            ModelKind::Reddit => self.reddit.score(c, pb),
            ModelKind::Controversy => peers::controversy(c),
            ModelKind::Confidence => peers::confidence(c),
            ModelKind::Hn => peers::hn(c, pb, now),
            ModelKind::Lemmy => peers::lemmy(c, pb, now),
            ModelKind::Rising => rising::z(&trend.copied().unwrap_or_default()),
        }
    }

    /// A bound of the score at `now` and at every later time, as long as no
    /// new event arrives: what rankings order their candidates by. Equal to
    /// the score for every model whose score cannot rise with time alone.
    /// Rising's comes from its hourly series ([`Models::standing`]).
    pub fn upper_bound(
        &self,
        kind: ModelKind,
        p: &ModelParams,
        c: &Counters,
        meta: &ArticleMeta,
        now: Timestamp,
    ) -> f64 {
        match kind {
            ModelKind::Weighted => self
                .weighted
                .upper_bound(c, meta.published_at, now, p.decay),
            ModelKind::Hn => peers::hn_upper_bound(c, meta.published_at, now),
            ModelKind::Lemmy => peers::lemmy_upper_bound(c, meta.published_at, now),
            // Gravity: the windowed numerator can only lose buckets and the
            // denominator grows (a power of age or a half-life alike).
            // Window: sums over a shrinking window. Vote models: no
            // dependence on time.
            _ => self.score(kind, p, c, meta, None, now),
        }
    }

    /// An article's score and bound in a ranking of `kind` at `now`, or
    /// `None` when it cannot be listed there from now on without a new
    /// event. `series`: for rising, its views per hour over
    /// [`crate::model::RisingSpec::hours`] (ignored by other models).
    pub fn standing(
        &self,
        kind: ModelKind,
        p: &ModelParams,
        c: &Counters,
        meta: &ArticleMeta,
        series: Option<&[u64]>,
        now: Timestamp,
    ) -> Option<Standing> {
        if kind == ModelKind::Rising {
            let series = series.expect("a rising score reads the article's hourly series");
            let r = rising::evaluate(series, p.rising);
            return Some(Standing {
                score: r.z,
                bound: r.bound?,
                trend: Some(r.trend),
            });
        }
        Some(Standing {
            score: self.score(kind, p, c, meta, None, now),
            bound: self.upper_bound(kind, p, c, meta, now),
            trend: None,
        })
    }

    pub fn explain(
        &self,
        kind: ModelKind,
        p: &ModelParams,
        c: &Counters,
        meta: &ArticleMeta,
        trend: Option<&Trend>,
        now: Timestamp,
    ) -> Explain {
        let pb = meta.published_at;
        match kind {
            ModelKind::Gravity => self.gravity.explain(c, pb, now, p.decay),
            ModelKind::Weighted => self.weighted.explain(c, pb, now, p.decay),
            ModelKind::Votes => self.votes.explain(c, pb),
            ModelKind::Window => self.window.explain(c),
            ModelKind::Reddit => self.reddit.explain(c, pb),
            ModelKind::Controversy => peers::votes_explain(c, "controversy", peers::controversy(c)),
            ModelKind::Confidence => peers::votes_explain(c, "lowerBound", peers::confidence(c)),
            ModelKind::Hn => peers::hn_explain(c, pb, now),
            ModelKind::Lemmy => peers::lemmy_explain(c, pb, now),
            ModelKind::Rising => rising::explain(&trend.copied().unwrap_or_default(), p.rising),
        }
    }
}

/// `scale=category` ([`crate::model::Scale::Category`], Lemmy's scaled
/// rank): a score divided by log10(2 + `events`), the counted events of
/// the article's category in its window ([`crate::model::category_hours`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CategoryScale {
    pub events: u64,
}

impl CategoryScale {
    /// log10(2 + events): at least log10(2), so never 0.
    pub fn divisor(self) -> f64 {
        (2.0 + self.events as f64).log10()
    }

    pub fn score(self, score: f64) -> f64 {
        score / self.divisor()
    }

    /// A bound of the scaled score from now on, within the day (where the
    /// divisor never decreases) and while the article gets no event: a
    /// bound `b ≥ 0` of the score divided by today's divisor, or 0 for a
    /// negative one (a negative score rises toward 0 as the divisor grows).
    pub fn bound(self, bound: f64) -> f64 {
        if bound >= 0.0 {
            bound / self.divisor()
        } else {
            0.0
        }
    }

    pub fn standing(self, st: Standing) -> Standing {
        Standing {
            score: self.score(st.score),
            bound: self.bound(st.bound),
            trend: st.trend,
        }
    }

    /// The terms with the category's events and divisor after them.
    pub fn explain(self, mut e: Explain) -> Explain {
        e.0.push(("categoryEvents", self.events as f64));
        e.0.push(("categoryScale", self.divisor()));
        e
    }
}

/// Applies an optional scale (`None`: unscaled) to a score, a standing or
/// an explanation.
pub trait Scaled: Sized {
    fn scaled(self, by: Option<CategoryScale>) -> Self;
}

impl Scaled for f64 {
    fn scaled(self, by: Option<CategoryScale>) -> f64 {
        by.map_or(self, |c| c.score(self))
    }
}

impl Scaled for Standing {
    fn scaled(self, by: Option<CategoryScale>) -> Standing {
        by.map_or(self, |c| c.standing(self))
    }
}

impl Scaled for Explain {
    fn scaled(self, by: Option<CategoryScale>) -> Explain {
        match by {
            Some(c) => c.explain(self),
            None => self,
        }
    }
}

/// One article's standing in a ranking ([`Models::standing`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Standing {
    pub score: f64,
    /// Bounds the score from now on while no event arrives.
    pub bound: f64,
    /// Rising's observed and expected views.
    pub trend: Option<Trend>,
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

/// 2^(ageHours / n): the divisor of a half-life of `n` hours.
pub fn halving(age_hours: f64, n: u32) -> f64 {
    (age_hours / f64::from(n)).exp2()
}
