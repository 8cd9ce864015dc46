//! `model=rising`: what is taking off now against the article's own past.
//!
//! `o` = counted views in the last `window` hour buckets (the current,
//! partial hour included), `e` = counted views in the `baseline` buckets
//! before those × window / baseline, score `z = (o − e) / √(e + 1)`; an
//! article is listed while `o >= min`. Every store reads the same per-hour
//! view counts ([`evaluate`]'s `series`) and hands them here.
//!
//! **The bound.** Rankings keep, per article, a bound of its score at the
//! query time and every later time while no event arrives
//! ([`crate::rank`]). Rising's score can grow with time alone: at an hour
//! turn a busy baseline hour slides out, `e` falls and `z` rises. With no
//! new event the buckets after the current hour `H` stay empty, so the
//! score at every later hour `H + s` is known now: for `s < window` from
//! the same series, and from `s = window` on `o = 0 < min` (never listed).
//! Within an hour nothing moves (whole buckets). [`evaluate`] returns the
//! largest listed score over `s = 0..window`: exact, not a guess.

use super::Explain;
use crate::model::{RisingSpec, Trend};

/// One article's rising score at the hour its series ends with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rising {
    pub trend: Trend,
    pub z: f64,
    /// The largest score while listed, from now on with no new event;
    /// `None` when it is not listed now (then never again without one).
    pub bound: Option<f64>,
}

/// `z` of observed `o` against expected `e`.
pub fn z(t: &Trend) -> f64 {
    (t.observed as f64 - t.expected) / (t.expected + 1.0).sqrt()
}

/// The trend at `s` hours after the series' last hour, no event since.
/// `series` holds the views of `spec.span()` hours, oldest first.
fn trend_at(series: &[u64], spec: RisingSpec, s: usize) -> Trend {
    let span = spec.span() as usize;
    let w = spec.window as usize;
    let observed: u64 = series[span - w + s..].iter().sum();
    let base: u64 = series[s..span - w + s].iter().sum();
    Trend {
        observed,
        expected: expected(base, spec),
    }
}

/// Views a baseline holding `base` views expects in the window.
pub fn expected(base: u64, spec: RisingSpec) -> f64 {
    base as f64 * f64::from(spec.window) / f64::from(spec.baseline)
}

/// The score of `series` (per-hour counted views over
/// [`RisingSpec::hours`], oldest first, the last the current hour) and
/// its bound (module docs).
pub fn evaluate(series: &[u64], spec: RisingSpec) -> Rising {
    assert_eq!(
        series.len(),
        spec.span() as usize,
        "a rising series holds window + baseline hours"
    );
    let trend = trend_at(series, spec, 0);
    let bound = (0..spec.window as usize)
        .map(|s| trend_at(series, spec, s))
        .take_while(|t| t.observed >= spec.min)
        .map(|t| z(&t))
        .reduce(f64::max);
    Rising {
        trend,
        z: z(&trend),
        bound,
    }
}

/// Counts up to this are given the exact (Garwood) interval; above it
/// the Wilson–Hilferty approximation, within 0.1 % of it there.
pub const EXACT_INTERVAL_UP_TO: u64 = 200;

/// The two-sided 95 % interval: z of the normal quantile 0.975.
const Z95: f64 = 1.959_963_984_540_054;

/// A 95 % confidence interval for the rate behind `o` counted events
/// (Poisson), and whether it is the exact one.
pub fn poisson_interval(o: u64) -> (f64, f64, bool) {
    if o > EXACT_INTERVAL_UP_TO {
        let wh = |n: f64, z: f64| n * (1.0 - 1.0 / (9.0 * n) + z / (3.0 * n.sqrt())).powi(3);
        let n = o as f64;
        return (wh(n, -Z95), wh(n + 1.0, Z95), false);
    }
    // Garwood: P(X >= o | low) = 0.025, P(X <= o | high) = 0.025.
    let low = if o == 0 {
        0.0
    } else {
        solve(|mu| 1.0 - poisson_cdf(o - 1, mu) - 0.025, o as f64)
    };
    let high = solve(|mu| 0.025 - poisson_cdf(o, mu), o as f64 + 1.0);
    (low, high, true)
}

/// P(X <= k) for X ~ Poisson(mu), summed in log space.
fn poisson_cdf(k: u64, mu: f64) -> f64 {
    if mu <= 0.0 {
        return 1.0;
    }
    let mut log_term = -mu;
    let mut sum = log_term.exp();
    for i in 1..=k {
        log_term += mu.ln() - (i as f64).ln();
        sum += log_term.exp();
    }
    sum.min(1.0)
}

/// The root of `f` (increasing in `mu`) on `[0, ∞)`, by bisection.
fn solve(f: impl Fn(f64) -> f64, guess: f64) -> f64 {
    let (mut lo, mut hi) = (0.0, guess.max(1.0));
    while f(hi) < 0.0 {
        hi *= 2.0;
    }
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if f(mid) < 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// The terms of a rising score: the contract's (`observed`, `expected`,
/// `z`, `windowHours`, `baselineHours`), and a 95 % interval a reader can
/// trust at small counts: `observedLow`..`observedHigh` for the rate
/// behind `observed` (`intervalExact` 1 when exact, 0 when approximate:
/// [`poisson_interval`]) and, when the baseline saw views, `ratio` =
/// observed / expected with `ratioLow`..`ratioHigh` (the interval over
/// `expected`).
pub fn explain(t: &Trend, spec: RisingSpec) -> Explain {
    let (low, high, exact) = poisson_interval(t.observed);
    let mut terms = vec![
        ("observed", t.observed as f64),
        ("expected", t.expected),
        ("z", z(t)),
        ("windowHours", f64::from(spec.window)),
        ("baselineHours", f64::from(spec.baseline)),
        ("observedLow", low),
        ("observedHigh", high),
        ("intervalExact", if exact { 1.0 } else { 0.0 }),
    ];
    if t.expected > 0.0 {
        terms.extend([
            ("ratio", t.observed as f64 / t.expected),
            ("ratioLow", low / t.expected),
            ("ratioHigh", high / t.expected),
        ]);
    }
    Explain(terms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn spec(window: u32, baseline: u32, min: u64) -> RisingSpec {
        RisingSpec {
            window,
            baseline,
            min,
        }
    }

    #[test]
    fn the_formula_by_hand() {
        // 24 h of 2 views each hour, then 26 in the current one.
        let mut series = vec![2; 24];
        series.push(26);
        let r = evaluate(&series, RisingSpec::default());
        assert_eq!(r.trend.observed, 26);
        assert_eq!(r.trend.expected, 2.0);
        assert_eq!(r.z, 24.0 / 3f64.sqrt());
        // A one-hour window: the bound is the score now.
        assert_eq!(r.bound, Some(r.z));
        // Below `min`: not listed.
        let mut quiet = vec![0; 24];
        quiet.push(4);
        assert_eq!(evaluate(&quiet, RisingSpec::default()).bound, None);
    }

    /// A three-hour window whose baseline ends in a busy hour: the score
    /// rises at the next hour turn (that hour leaves the baseline), and
    /// the bound is that later score, not the score now.
    #[test]
    fn the_bound_sees_a_busy_hour_leave_the_baseline() {
        let s = spec(3, 2, 5);
        let series = [40, 0, 5, 5, 5];
        let r = evaluate(&series, s);
        let now = z(&Trend {
            observed: 15,
            expected: 60.0,
        });
        let next = z(&Trend {
            observed: 10,
            expected: 7.5,
        });
        assert_eq!(r.z, now);
        assert!(next > now);
        assert_eq!(r.bound, Some(next));
    }

    /// The z, one hour after another with no event, by brute force: the
    /// series shifted with empty hours.
    fn later(series: &[u64], s: RisingSpec, hours: usize) -> Option<f64> {
        let mut v = series[hours.min(series.len())..].to_vec();
        v.resize(series.len(), 0);
        let r = evaluate(&v, s);
        (r.trend.observed >= s.min).then_some(r.z)
    }

    proptest! {
        /// The bound is at least the score at every later hour while listed,
        /// and is one of those scores (the least such bound).
        #[test]
        fn the_bound_holds_at_every_later_hour(
            window in 1u32..6,
            baseline in 1u32..8,
            min in 1u64..8,
            raw in proptest::collection::vec(0u64..30, 13),
        ) {
            let s = spec(window, baseline, min);
            let series = &raw[..s.span() as usize];
            let r = evaluate(series, s);
            let later: Vec<f64> = (0..=s.span() as usize + 1)
                .filter_map(|h| later(series, s, h))
                .collect();
            match r.bound {
                None => prop_assert!(later.is_empty()),
                Some(b) => {
                    for z in &later {
                        prop_assert!(*z <= b, "{z} above {b}");
                    }
                    prop_assert!(later.contains(&b));
                }
            }
        }
    }

    #[test]
    fn intervals() {
        // Garwood's table: 0 -> (0, 3.689), 1 -> (0.0253, 5.572),
        // 10 -> (4.795, 18.390).
        let close = |a: f64, b: f64| (a - b).abs() < 1e-3;
        let (l, h, exact) = poisson_interval(0);
        assert!(exact && l == 0.0 && close(h, 3.689), "{l} {h}");
        let (l, h, _) = poisson_interval(1);
        assert!(close(l, 0.0253) && close(h, 5.572), "{l} {h}");
        let (l, h, _) = poisson_interval(10);
        assert!(close(l, 4.795) && close(h, 18.390), "{l} {h}");
        // The approximation meets the exact interval where they hand over.
        let (el, eh, _) = poisson_interval(EXACT_INTERVAL_UP_TO);
        let wh = |n: f64, z: f64| n * (1.0 - 1.0 / (9.0 * n) + z / (3.0 * n.sqrt())).powi(3);
        let n = EXACT_INTERVAL_UP_TO as f64;
        assert!((wh(n, -Z95) / el - 1.0).abs() < 1e-3);
        assert!((wh(n + 1.0, Z95) / eh - 1.0).abs() < 1e-3);
        let (_, _, exact) = poisson_interval(EXACT_INTERVAL_UP_TO + 1);
        assert!(!exact);
    }

    #[test]
    fn explain_terms() {
        let t = Trend {
            observed: 26,
            expected: 4.0,
        };
        let e = explain(&t, RisingSpec::default());
        assert_eq!(e.get("z"), Some(22.0 / 5f64.sqrt()));
        assert_eq!(e.get("ratio"), Some(6.5));
        assert_eq!(e.get("windowHours"), Some(1.0));
        assert!(e.get("ratioLow").unwrap() < 6.5 && e.get("ratioHigh").unwrap() > 6.5);
        let fresh = explain(
            &Trend {
                observed: 5,
                expected: 0.0,
            },
            RisingSpec::default(),
        );
        assert_eq!(fresh.get("ratio"), None);
    }
}
