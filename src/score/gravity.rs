//! Seed 000's time-decayed gravity score.

use serde::{Deserialize, Serialize};

use super::{Explain, age_hours, halving};
use crate::model::{Counters, Decay, Timestamp};

/// `score = (alpha·pv + beta·uv) / (hours_since_pub + base)^gamma`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GravityParams {
    pub alpha: f64,
    pub beta: f64,
    pub base: f64,
    pub gamma: f64,
}

impl Default for GravityParams {
    /// The seed's recommended values.
    fn default() -> Self {
        GravityParams {
            alpha: 1.0,
            beta: 1.2,
            base: 2.0,
            gamma: 1.5,
        }
    }
}

impl GravityParams {
    /// Rejects values that would make the score meaningless; returns
    /// warnings for values outside the seed's recommended range.
    pub fn validate(&self) -> Result<Vec<String>, String> {
        let checks = [
            ("models.gravity.alpha", self.alpha, "a finite number >= 0"),
            ("models.gravity.beta", self.beta, "a finite number >= 0"),
        ];
        for (key, v, range) in checks {
            if !v.is_finite() || v < 0.0 {
                return Err(format!("{key} = {v} is invalid: must be {range}"));
            }
        }
        if !self.base.is_finite() || self.base <= 0.0 {
            return Err(format!(
                "models.gravity.base = {} is invalid: must be a finite number > 0",
                self.base
            ));
        }
        if !self.gamma.is_finite() || self.gamma <= 0.0 || self.gamma > 10.0 {
            return Err(format!(
                "models.gravity.gamma = {} is invalid: must be a finite number in (0, 10]",
                self.gamma
            ));
        }
        let mut warnings = Vec::new();
        if !(1.3..=1.8).contains(&self.gamma) {
            warnings.push(format!(
                "models.gravity.gamma = {} is outside the seed's recommended range [1.3, 1.8]",
                self.gamma
            ));
        }
        Ok(warnings)
    }

    /// The seed's score, or with `Decay::HalfLife(n)` the same numerator
    /// divided by 2^(ageHours / n).
    pub fn score(&self, c: &Counters, published_at: Timestamp, now: Timestamp, d: Decay) -> f64 {
        let (pv_term, uv_term, _, decay) = self.terms(c, published_at, now, d);
        (pv_term + uv_term) / decay
    }

    pub fn explain(
        &self,
        c: &Counters,
        published_at: Timestamp,
        now: Timestamp,
        d: Decay,
    ) -> Explain {
        let (pv_term, uv_term, age, decay) = self.terms(c, published_at, now, d);
        let mut terms = vec![
            ("pvTerm", pv_term),
            ("uvTerm", uv_term),
            ("ageHours", age),
            ("decay", decay),
        ];
        if let Decay::HalfLife(n) = d {
            terms.push(("halfLifeHours", f64::from(n)));
        }
        Explain(terms)
    }

    fn terms(
        &self,
        c: &Counters,
        published_at: Timestamp,
        now: Timestamp,
        d: Decay,
    ) -> (f64, f64, f64, f64) {
        let age = age_hours(published_at, now);
        let decay = match d {
            Decay::Model => (age + self.base).powf(self.gamma),
            Decay::HalfLife(n) => halving(age, n),
        };
        (
            self.alpha * c.pv as f64,
            self.beta * c.uv as f64,
            age,
            decay,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_formula_by_hand() {
        let p = GravityParams::default();
        let c = Counters {
            pv: 120,
            uv: 97,
            ..Counters::default()
        };
        let published = 1_763_700_000;
        let now = published + 16 * 3600 + 42 * 60; // 16.7 h
        let hours: f64 = 16.7;
        let expected = (1.0 * 120.0 + 1.2 * 97.0) / (hours + 2.0).powf(1.5);
        assert!((p.score(&c, published, now, Decay::Model) - expected).abs() < 1e-12);
        let e = p.explain(&c, published, now, Decay::Model);
        let rebuilt =
            (e.get("pvTerm").unwrap() + e.get("uvTerm").unwrap()) / e.get("decay").unwrap();
        assert_eq!(rebuilt, p.score(&c, published, now, Decay::Model));
    }

    #[test]
    fn half_life_halves_the_score_every_n_hours() {
        let p = GravityParams::default();
        let c = Counters {
            pv: 100,
            uv: 50,
            ..Counters::default()
        };
        let d = Decay::HalfLife(6);
        let at = |h: i64| p.score(&c, 0, h * 3600, d);
        assert_eq!(at(0), 160.0);
        assert_eq!(at(6), 80.0);
        assert_eq!(at(18), 20.0);
        let e = p.explain(&c, 0, 6 * 3600, d);
        assert_eq!(e.get("decay"), Some(2.0));
        assert_eq!(e.get("halfLifeHours"), Some(6.0));
    }

    #[test]
    fn future_publication_counts_as_new() {
        let p = GravityParams::default();
        let c = Counters {
            pv: 1,
            ..Counters::default()
        };
        assert_eq!(p.score(&c, 1000, 500, Decay::Model), 1.0 / 2f64.powf(1.5));
    }

    #[test]
    fn validation() {
        assert_eq!(GravityParams::default().validate(), Ok(vec![]));
        let bad = [
            GravityParams {
                gamma: 0.0,
                ..Default::default()
            },
            GravityParams {
                gamma: -1.0,
                ..Default::default()
            },
            GravityParams {
                base: 0.0,
                ..Default::default()
            },
            GravityParams {
                alpha: f64::NAN,
                ..Default::default()
            },
            GravityParams {
                beta: f64::INFINITY,
                ..Default::default()
            },
        ];
        for p in bad {
            assert!(p.validate().is_err(), "{p:?}");
        }
        let warn = GravityParams {
            gamma: 2.0,
            ..Default::default()
        };
        assert_eq!(warn.validate().unwrap().len(), 1);
    }
}
