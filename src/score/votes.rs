//! Seed 003's voting site, and Reddit's hot formula over the same votes.

use serde::{Deserialize, Serialize};

use super::{Explain, check};
use crate::model::{Counters, Timestamp};

/// `score = publishedAt + per_vote·(ups − downs)`; 432 = 86400 / 200: two
/// hundred votes buy a day.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VotesParams {
    pub per_vote: f64,
    /// Votes are taken for this many days after publication; then the score
    /// is frozen and the voter set freed.
    pub voting_window_days: u32,
    /// Whether `direction = "down"` is accepted.
    pub allow_down_votes: bool,
}

impl Default for VotesParams {
    fn default() -> Self {
        VotesParams {
            per_vote: 432.0,
            voting_window_days: 7,
            allow_down_votes: false,
        }
    }
}

impl VotesParams {
    pub fn validate(&self) -> Result<(), String> {
        check("models.votes.per_vote", self.per_vote, 0.0, 1e9)?;
        if !(1..=3650).contains(&self.voting_window_days) {
            return Err(format!(
                "models.votes.voting_window_days = {} is invalid: must be in 1..=3650",
                self.voting_window_days
            ));
        }
        Ok(())
    }

    pub fn window_secs(&self) -> i64 {
        i64::from(self.voting_window_days) * 86_400
    }

    pub fn score(&self, c: &Counters, published_at: Timestamp) -> f64 {
        published_at as f64 + self.per_vote * net(c)
    }

    pub fn explain(&self, c: &Counters, published_at: Timestamp) -> Explain {
        Explain(vec![
            ("publishedAt", published_at as f64),
            ("votes", net(c)),
            ("perVote", self.per_vote),
            ("voteTerm", self.per_vote * net(c)),
        ])
    }
}

fn net(c: &Counters) -> f64 {
    c.ups as f64 - c.downs as f64
}

/// `sign(s)·log10(max(|s|, 1)) + (publishedAt − epoch)/divisor`, `s = ups − downs`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RedditParams {
    pub epoch: i64,
    pub divisor: f64,
}

impl Default for RedditParams {
    fn default() -> Self {
        RedditParams {
            epoch: 1_134_028_003,
            divisor: 45_000.0,
        }
    }
}

impl RedditParams {
    pub fn validate(&self) -> Result<(), String> {
        check("models.reddit.divisor", self.divisor, 1.0, 1e12)
    }

    fn terms(&self, c: &Counters, published_at: Timestamp) -> (f64, f64) {
        let s = net(c);
        // log10(max(|s|, 1)) is 0 when s is 0, whatever the sign.
        let order = s.signum() * s.abs().max(1.0).log10();
        (order, (published_at - self.epoch) as f64 / self.divisor)
    }

    /// Rounded to 7 decimals, as Reddit's `_hot` returns it (so ties fall
    /// as they do there).
    pub fn score(&self, c: &Counters, published_at: Timestamp) -> f64 {
        let (order, time) = self.terms(c, published_at);
        super::peers::round7(order + time)
    }

    pub fn explain(&self, c: &Counters, published_at: Timestamp) -> Explain {
        let (order, time) = self.terms(c, published_at);
        Explain(vec![
            ("ups", c.ups as f64),
            ("downs", c.downs as f64),
            ("orderTerm", order),
            ("timeTerm", time),
        ])
    }
}
