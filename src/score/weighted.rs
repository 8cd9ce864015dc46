//! Seed 001's weighted multi-signal score.

use serde::{Deserialize, Serialize};

use super::{Explain, age_hours, check};
use crate::model::{Counters, Timestamp};

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

    pub fn score(&self, c: &Counters, published_at: Timestamp, now: Timestamp) -> f64 {
        self.terms(c, published_at, now)
            .iter()
            .map(|(_, v)| v)
            .sum()
    }

    /// The score can rise with time alone in one way only: old dwell
    /// reports leave the window and the average changes. Counting the dwell
    /// term at its cap bounds every later score.
    pub fn upper_bound(&self, c: &Counters, published_at: Timestamp, now: Timestamp) -> f64 {
        let t = self.terms(c, published_at, now);
        t.iter()
            .map(|&(name, v)| {
                if name == "dwellTerm" {
                    self.dwell * self.dwell_cap_secs / 60.0
                } else {
                    v
                }
            })
            .sum()
    }

    pub fn explain(&self, c: &Counters, published_at: Timestamp, now: Timestamp) -> Explain {
        let mut terms = self.terms(c, published_at, now).to_vec();
        terms.push(("ageHours", age_hours(published_at, now)));
        terms.push(("avgDwellSeconds", c.avg_dwell_seconds()));
        Explain(terms)
    }
}
