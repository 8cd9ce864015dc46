//! The peers' own sorts over an article's votes, for sites that move from
//! them: Reddit's `controversy` and "best" (`confidence`), the Hacker News
//! front page (`hn`) and Lemmy's `hot_rank` (`lemmy`).
//!
//! Each follows the peer's published function, constants and arithmetic
//! included, so that a site sees the order it saw before:
//! `tests/peers.rs` checks every one against reference values computed by
//! running the peer's own code (`tests/data/peers/README.md` says how).
//! The votes are the article's lifetime ups and downs, the poster's own
//! vote included (as Redis in Action's `post_article` records it).

use super::{Explain, age_hours};
use crate::model::{Counters, Timestamp};

/// Reddit's controversy: 0 unless the article has both ups and downs, else
/// `(ups + downs)^(min/max)`: many votes, evenly split, rank first.
pub fn controversy(c: &Counters) -> f64 {
    let (ups, downs) = (c.ups, c.downs);
    if ups == 0 || downs == 0 {
        return 0.0;
    }
    let magnitude = (ups + downs) as f64;
    let balance = if ups > downs {
        downs as f64 / ups as f64
    } else {
        ups as f64 / downs as f64
    };
    magnitude.powf(balance)
}

/// The z of Reddit's "best" sort (an 80 % one-sided interval).
pub const CONFIDENCE_Z: f64 = 1.281551565545;

/// Reddit's "best": the lower bound of the Wilson score interval of the
/// share of ups, at [`CONFIDENCE_Z`]; 0 with no votes.
///
/// Reddit keeps `n`, `z`, `p` and most intermediate values in single
/// precision (`cdef float` in its `_sorts.pyx`) while its constants are
/// doubles; the same steps here, each stored where Reddit's compiled code
/// stores it, give its values to the last bit, and so its order, ties
/// included.
pub fn confidence(c: &Counters) -> f64 {
    if c.ups + c.downs == 0 {
        return 0.0;
    }
    let n = (c.ups + c.downs) as f32;
    let (nd, z) = (f64::from(n), CONFIDENCE_Z as f32);
    let zd = f64::from(z);
    let p = (c.ups as f64 / nd) as f32;
    let pd = f64::from(p);
    let two_n = (2.0 * nd) as f32;
    let left = (pd + 1.0 / f64::from(two_n) * zd * zd) as f32;
    let p_q = (pd * (1.0 - pd)) as f32;
    let four_nn = (4.0 * nd * nd) as f32;
    let spread = p_q / n + z * z / four_nn;
    let right = zd * f64::from(spread).sqrt();
    let under = (1.0 + 1.0 / nd * zd * zd) as f32;
    (f64::from(left) - right) / f64::from(under)
}

/// Hacker News's front page (`frontpage-rank` in news.arc, without its
/// per-site penalties): `base / ((ageMinutes + 120)/60)^1.8`, where `base`
/// is `(votes − 1)^0.8` when `votes > 1`, else `votes − 1`; `votes` is
/// ups − downs. An article dated in the future is as old as one posted
/// now.
pub fn hn(c: &Counters, published_at: Timestamp, now: Timestamp) -> f64 {
    let (base, divisor) = hn_terms(c, published_at, now);
    base / divisor
}

fn hn_terms(c: &Counters, published_at: Timestamp, now: Timestamp) -> (f64, f64) {
    let votes = c.ups as f64 - c.downs as f64;
    let base = if votes - 1.0 > 0.0 {
        (votes - 1.0).powf(0.8)
    } else {
        votes - 1.0
    };
    // news.arc's age is exact (seconds / 60, a rational): (age + 120) / 60
    // hours is (seconds + 7200) / 3600, one rounding as there.
    let secs = (now - published_at).max(0);
    let hours = (secs + 7200) as f64 / 3600.0;
    (base, hours.powf(1.8))
}

/// Its bound at every later time: the score falls with age while `base` is
/// positive, and rises toward 0 while it is negative.
pub fn hn_upper_bound(c: &Counters, published_at: Timestamp, now: Timestamp) -> f64 {
    hn(c, published_at, now).max(0.0)
}

pub fn hn_explain(c: &Counters, published_at: Timestamp, now: Timestamp) -> Explain {
    let (base, divisor) = hn_terms(c, published_at, now);
    Explain(vec![
        ("ups", c.ups as f64),
        ("downs", c.downs as f64),
        ("base", base),
        ("ageHours", age_hours(published_at, now)),
        ("decay", divisor),
    ])
}

/// Lemmy stops ranking a post this old (`hot_rank` is 0 from then on).
const LEMMY_MAX_AGE_SECS: i64 = 7 * 86_400;

/// Lemmy's `hot_rank`: `log10(max(2, score + 2)) / (ageHours + 2)^1.8`
/// while the article is older than 0 and younger than a week, else 0;
/// `score` is ups − downs.
pub fn lemmy(c: &Counters, published_at: Timestamp, now: Timestamp) -> f64 {
    let age = now - published_at;
    if age <= 0 || age >= LEMMY_MAX_AGE_SECS {
        return 0.0;
    }
    lemmy_order(c) / lemmy_decay(age)
}

fn lemmy_order(c: &Counters) -> f64 {
    (c.ups as f64 - c.downs as f64 + 2.0).max(2.0).log10()
}

fn lemmy_decay(age_secs: i64) -> f64 {
    (age_secs as f64 / 3600.0 + 2.0).powf(1.8)
}

/// Its bound at every later time: a post of age 0 (or dated ahead) scores
/// 0 now and its most a moment later; a week later it is 0 for good.
pub fn lemmy_upper_bound(c: &Counters, published_at: Timestamp, now: Timestamp) -> f64 {
    let age = now - published_at;
    if age <= 0 {
        lemmy_order(c) / lemmy_decay(0)
    } else {
        lemmy(c, published_at, now)
    }
}

/// `listed` is 1 while the article is younger than a week (and older than
/// 0), else 0: the score is `order / decay · listed`.
pub fn lemmy_explain(c: &Counters, published_at: Timestamp, now: Timestamp) -> Explain {
    let age = now - published_at;
    let listed = age > 0 && age < LEMMY_MAX_AGE_SECS;
    Explain(vec![
        ("ups", c.ups as f64),
        ("downs", c.downs as f64),
        ("order", lemmy_order(c)),
        ("ageHours", age_hours(published_at, now)),
        ("decay", lemmy_decay(age.max(0))),
        ("listed", if listed { 1.0 } else { 0.0 }),
    ])
}

pub fn votes_explain(c: &Counters, name: &'static str, score: f64) -> Explain {
    Explain(vec![
        ("ups", c.ups as f64),
        ("downs", c.downs as f64),
        (name, score),
    ])
}

/// Rounds to 7 decimals as Python's `round(x, 7)` does (the nearest
/// decimal with 7 digits after the point, read back as the nearest `f64`),
/// which Reddit applies to its hot score.
pub fn round7(x: f64) -> f64 {
    if !x.is_finite() {
        return x;
    }
    format!("{x:.7}").parse().unwrap_or(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn votes(ups: u64, downs: u64) -> Counters {
        Counters {
            ups,
            downs,
            ..Counters::default()
        }
    }

    #[test]
    fn controversy_needs_both_sides() {
        assert_eq!(controversy(&votes(10, 0)), 0.0);
        assert_eq!(controversy(&votes(0, 3)), 0.0);
        assert_eq!(controversy(&votes(5, 5)), 10.0);
        // 5,000 against 4,800 beats 100,000 against 100.
        assert!(controversy(&votes(5000, 4800)) > controversy(&votes(100_000, 100)));
    }

    #[test]
    fn confidence_orders_by_evidence() {
        assert_eq!(confidence(&votes(0, 0)), 0.0);
        assert!(confidence(&votes(100, 1)) > confidence(&votes(1, 0)));
        let c = confidence(&votes(10, 2));
        assert!(c > 0.0 && c < 10.0 / 12.0);
    }

    #[test]
    fn hn_and_lemmy_bounds_hold_later() {
        let now = 1_763_760_000;
        for (ups, downs) in [(0, 0), (0, 3), (1, 0), (2, 0), (40, 3)] {
            let c = votes(ups, downs);
            for published in [now + 600, now, now - 1, now - 3600, now - 7 * 86_400 + 5] {
                let hb = hn_upper_bound(&c, published, now);
                let lb = lemmy_upper_bound(&c, published, now);
                for later in [0, 1, 60, 3600, 86_400, 30 * 86_400] {
                    assert!(hn(&c, published, now + later) <= hb, "hn {ups} {downs}");
                    assert!(
                        lemmy(&c, published, now + later) <= lb,
                        "lemmy {ups} {downs}"
                    );
                }
            }
        }
    }

    #[test]
    fn round7_rounds_like_python() {
        assert_eq!(round7(14033.23456789), 14033.2345679);
        assert_eq!(round7(-0.00000004), -0.0);
        assert_eq!(round7(1.0), 1.0);
    }
}
