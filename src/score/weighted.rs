//! Seed 001's weighted multi-signal score.

use serde::{Deserialize, Serialize};

use super::{Explain, age_hours, check, halving};
use crate::model::{Counters, Decay, Timestamp};

/// `pv·ln(PV+1) + uv·UV + dwell·min(AvgDuration, cap)/60 + likes·Likes +
/// comments·Comments + favorites·Favorites + shares·Shares − age·AgeHours`.
/// AvgDuration is dwell seconds over dwell reports inside the window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WeightedParams {
    pub pv: f64,
    pub uv: f64,
    pub dwell: f64,
    pub dwell_cap_secs: f64,
    pub likes: f64,
    pub comments: f64,
    pub favorites: f64,
    pub shares: f64,
    /// Penalty per hour since publication.
    pub age: f64,
}

impl Default for WeightedParams {
    /// The seed's weights; favorites and shares are not in its formula.
    fn default() -> Self {
        WeightedParams {
            pv: 0.35,
            uv: 0.25,
            dwell: 0.25,
            dwell_cap_secs: 300.0,
            likes: 0.10,
            comments: 0.05,
            favorites: 0.0,
            shares: 0.0,
            age: 0.02,
        }
    }
}

impl WeightedParams {
    pub fn validate(&self) -> Result<(), String> {
        for (key, v) in [
            ("pv", self.pv),
            ("uv", self.uv),
            ("dwell", self.dwell),
            ("likes", self.likes),
            ("comments", self.comments),
            ("favorites", self.favorites),
            ("shares", self.shares),
            ("age", self.age),
        ] {
            check(&format!("models.weighted.{key}"), v, 0.0, 1e6)?;
        }
        check(
            "models.weighted.dwell_cap_secs",
            self.dwell_cap_secs,
            1.0,
            86_400.0,
        )
    }

    fn terms(
        &self,
        c: &Counters,
        published_at: Timestamp,
        now: Timestamp,
    ) -> [(&'static str, f64); 8] {
        let avg = c.avg_dwell_seconds().min(self.dwell_cap_secs);
        [
            ("pvTerm", self.pv * (c.pv as f64 + 1.0).ln()),
            ("uvTerm", self.uv * c.uv as f64),
            ("dwellTerm", self.dwell * avg / 60.0),
            ("likesTerm", self.likes * c.likes as f64),
            ("commentsTerm", self.comments * c.comments as f64),
            ("favoritesTerm", self.favorites * c.favorites as f64),
            ("sharesTerm", self.shares * c.shares as f64),
            ("agePenalty", -self.age * age_hours(published_at, now)),
        ]
    }

    /// The seed's sum, age penalty included; with `Decay::HalfLife(n)`
    /// the sum without the penalty divided by 2^(ageHours / n).
    pub fn score(&self, c: &Counters, published_at: Timestamp, now: Timestamp, d: Decay) -> f64 {
        let t = self.terms(c, published_at, now);
        match d {
            Decay::Model => t.iter().map(|(_, v)| v).sum(),
            Decay::HalfLife(n) => {
                positive(&t).map(|(_, v)| v).sum::<f64>() / halving(age_hours(published_at, now), n)
            }
        }
    }

    /// The score can rise with time alone in one way only: old dwell
    /// reports leave the window and the average changes. Counting the dwell
    /// term at its cap bounds every later score (with a half-life too: the
    /// other terms only fall, none is negative, and the divisor grows).
    pub fn upper_bound(
        &self,
        c: &Counters,
        published_at: Timestamp,
        now: Timestamp,
        d: Decay,
    ) -> f64 {
        let t = self.terms(c, published_at, now);
        let capped = |&(name, v): &(&str, f64)| {
            if name == "dwellTerm" {
                self.dwell * self.dwell_cap_secs / 60.0
            } else {
                v
            }
        };
        match d {
            Decay::Model => t.iter().map(capped).sum(),
            Decay::HalfLife(n) => {
                positive(&t).map(capped).sum::<f64>() / halving(age_hours(published_at, now), n)
            }
        }
    }

    pub fn explain(
        &self,
        c: &Counters,
        published_at: Timestamp,
        now: Timestamp,
        d: Decay,
    ) -> Explain {
        let t = self.terms(c, published_at, now);
        let age = age_hours(published_at, now);
        let mut terms: Vec<(&str, f64)> = match d {
            Decay::Model => t.to_vec(),
            Decay::HalfLife(_) => positive(&t).copied().collect(),
        };
        terms.push(("ageHours", age));
        terms.push(("avgDwellSeconds", c.avg_dwell_seconds()));
        if let Decay::HalfLife(n) = d {
            terms.push(("decay", halving(age, n)));
            terms.push(("halfLifeHours", f64::from(n)));
        }
        Explain(terms)
    }
}

/// The terms but the age penalty (a half-life divides instead).
fn positive<'a>(
    t: &'a [(&'static str, f64)],
) -> impl Iterator<Item = &'a (&'static str, f64)> + 'a {
    t.iter().filter(|(name, _)| *name != "agePenalty")
}
