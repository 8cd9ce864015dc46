//! Seed 004's windowed lists: a weighted sum of signals over the buckets
//! inside the range (the seed's `ZUNIONSTORE` of daily sets, with weights as
//! its "possible improvements" asks).

use serde::{Deserialize, Serialize};

use super::{Explain, check};
use crate::model::Counters;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WindowParams {
    /// Weight of a counted view (a click).
    pub clicks: f64,
    pub likes: f64,
    pub favorites: f64,
    pub comments: f64,
    pub shares: f64,
}

impl Default for WindowParams {
    /// Clicks only, as in the seed.
    fn default() -> Self {
        WindowParams {
            clicks: 1.0,
            likes: 0.0,
            favorites: 0.0,
            comments: 0.0,
            shares: 0.0,
        }
    }
}

impl WindowParams {
    pub fn validate(&self) -> Result<(), String> {
        for (key, v) in [
            ("clicks", self.clicks),
            ("likes", self.likes),
            ("favorites", self.favorites),
            ("comments", self.comments),
            ("shares", self.shares),
        ] {
            check(&format!("models.window.{key}"), v, 0.0, 1e6)?;
        }
        Ok(())
    }

    fn terms(&self, c: &Counters) -> [(&'static str, f64); 5] {
        [
            ("clicksTerm", self.clicks * c.pv as f64),
            ("likesTerm", self.likes * c.likes as f64),
            ("favoritesTerm", self.favorites * c.favorites as f64),
            ("commentsTerm", self.comments * c.comments as f64),
            ("sharesTerm", self.shares * c.shares as f64),
        ]
    }

    pub fn score(&self, c: &Counters) -> f64 {
        self.terms(c).iter().map(|(_, v)| v).sum()
    }

    pub fn explain(&self, c: &Counters) -> Explain {
        Explain(self.terms(c).to_vec())
    }
}
