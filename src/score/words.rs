//! "Why" in words: one sentence per ranked item, built from the same terms
//! [`super::Models::explain`] returns, so that a reader can trust a score
//! without reading its formula ("120 views from 97 visitors in 72 h,
//! 16 h old: divided by 79 for age").

use crate::model::{Counters, Explain, ModelKind, RangeSpec, Timestamp};

/// What a sentence is made from: the item's terms and counters, the range
/// they cover, and when it was scored.
pub struct Scored<'a> {
    pub model: ModelKind,
    pub explain: &'a Explain,
    pub counters: &'a Counters,
    pub range: RangeSpec,
    pub published_at: Timestamp,
    pub now: Timestamp,
}

/// The sentence for one item; a score scaled by category says so last
/// ("...; divided by 3.2 for its category's 1,580 events in 30 days").
pub fn why(s: &Scored<'_>) -> String {
    let base = model_why(s);
    match (
        s.explain.get("categoryScale"),
        s.explain.get("categoryEvents"),
    ) {
        (Some(by), Some(events)) => format!(
            "{base}; divided by {} for its category's {} in {} days",
            num(by, 1),
            count(events as u64, "event"),
            crate::model::CATEGORY_DAYS
        ),
        _ => base,
    }
}

/// The sentence of the model's own terms.
fn model_why(s: &Scored<'_>) -> String {
    let c = s.counters;
    let e = |name: &str| s.explain.get(name).unwrap_or(0.0);
    let age = age(s.now - s.published_at);
    match s.model {
        ModelKind::Gravity => format!(
            "{} in {}, {age}: divided by {} for age{}",
            views(c),
            range(s.range),
            num(e("decay"), 1),
            half_life(s.explain)
        ),
        ModelKind::Weighted => {
            let mut parts = vec![views(c)];
            let dwell = c.avg_dwell_seconds();
            if dwell > 0.0 {
                parts.push(format!("{} s average read", num(dwell, 0)));
            }
            parts.extend(signals(c, &["likes", "comments", "favorites", "shares"]));
            if s.explain.get("halfLifeHours").is_some() {
                return format!(
                    "{} in {}; divided by {} for being {age}{}",
                    list(&parts),
                    range(s.range),
                    num(e("decay"), 1),
                    half_life(s.explain)
                );
            }
            format!(
                "{} in {}; minus {} for being {age}",
                list(&parts),
                range(s.range),
                num(-e("agePenalty"), 2)
            )
        }
        ModelKind::Rising => {
            let window = RangeSpec::Hours(e("windowHours") as u32);
            let baseline = RangeSpec::Hours(e("baselineHours") as u32);
            let observed = format!(
                "{} in the last {}",
                count(e("observed") as u64, "view"),
                range(window)
            );
            match s.explain.get("ratio") {
                None => format!("{observed}, none in the {} before", range(baseline)),
                Some(r) => format!(
                    "{observed}, {}× its usual rate (95 %: {}–{}×, from the {} before)",
                    num(r, 1),
                    num(e("ratioLow"), 1),
                    num(e("ratioHigh"), 1),
                    range(baseline)
                ),
            }
        }
        ModelKind::Window => {
            let mut parts = vec![count(c.pv, "view")];
            parts.extend(signals(c, &["likes", "favorites", "comments", "shares"]));
            format!("{} in {}", list(&parts), range(s.range))
        }
        ModelKind::Votes => format!(
            "{}, posted {age}: each vote adds {} to the posting time",
            votes(c),
            duration(e("perVote"))
        ),
        ModelKind::Reddit => format!(
            "{}, posted {age}: {} for the votes' order of magnitude, newer posts rank higher",
            votes(c),
            signed(e("orderTerm"), 2)
        ),
        ModelKind::Controversy => {
            if c.ups == 0 || c.downs == 0 {
                format!("{}: controversy needs votes both ways", votes(c))
            } else {
                let balance = c.ups.min(c.downs) as f64 / c.ups.max(c.downs) as f64;
                format!(
                    "{}: split {} %, weighing {} votes",
                    votes(c),
                    num(balance * 100.0, 0),
                    num((c.ups + c.downs) as f64, 0)
                )
            }
        }
        ModelKind::Confidence => {
            let n = c.ups + c.downs;
            if n == 0 {
                "no votes yet".to_string()
            } else {
                format!(
                    "{} of {} up: at least {} % up, with 80 % confidence",
                    num(c.ups as f64, 0),
                    count(n, "vote"),
                    num(e("lowerBound") * 100.0, 0)
                )
            }
        }
        ModelKind::Hn => format!(
            "{}, {age}: {} divided by {} for age",
            votes(c),
            num(e("base"), 2),
            num(e("decay"), 1)
        ),
        ModelKind::Lemmy => {
            if e("listed") == 0.0 {
                if s.now <= s.published_at {
                    format!("{}: not yet published, so not ranked", votes(c))
                } else {
                    format!(
                        "{}, {age}: older than a week, so no longer ranked",
                        votes(c)
                    )
                }
            } else {
                format!(
                    "{}, {age}: {} divided by {} for age",
                    votes(c),
                    num(e("order"), 2),
                    num(e("decay"), 1)
                )
            }
        }
    }
}

/// " (half-life 6 h)" when the age divisor is a half-life.
fn half_life(e: &Explain) -> String {
    e.get("halfLifeHours")
        .map(|n| format!(" (half-life {})", duration(n * 3600.0)))
        .unwrap_or_default()
}

/// "26 views from 26 visitors": visitors are an estimate, never shown
/// above views.
fn views(c: &Counters) -> String {
    let visitors = c.uv.min(c.pv);
    format!(
        "{} from {}",
        count(c.pv, "view"),
        count(visitors, "visitor")
    )
}

fn votes(c: &Counters) -> String {
    let net = c.ups as i64 - c.downs as i64;
    let net = if net > 0 {
        format!("+{}", num(net as f64, 0))
    } else {
        num(net as f64, 0)
    };
    format!(
        "{net} votes ({} up, {} down)",
        num(c.ups as f64, 0),
        num(c.downs as f64, 0)
    )
}

/// The nonzero ones of these signals, counted.
fn signals(c: &Counters, names: &[&str]) -> Vec<String> {
    names
        .iter()
        .filter_map(|&name| {
            let (n, one) = match name {
                "likes" => (c.likes, "like"),
                "comments" => (c.comments, "comment"),
                "favorites" => (c.favorites, "favorite"),
                "shares" => (c.shares, "share"),
                _ => return None,
            };
            (n > 0).then(|| count(n, one))
        })
        .collect()
}

/// "a, b and c".
fn list(parts: &[String]) -> String {
    match parts {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

fn count(n: u64, one: &str) -> String {
    let n_text = num(n as f64, 0);
    if n == 1 {
        format!("{n_text} {one}")
    } else {
        format!("{n_text} {one}s")
    }
}

fn range(r: RangeSpec) -> String {
    match r {
        RangeSpec::All => "all time".to_string(),
        RangeSpec::Hours(h) if h % 24 == 0 && h >= 48 => format!("{} d", h / 24),
        RangeSpec::Hours(h) => format!("{h} h"),
    }
}

/// "posted now", "45 min old", "16 h old", "3 d old".
fn age(secs: i64) -> String {
    if secs <= 0 {
        return "just posted".to_string();
    }
    format!("{} old", duration(secs as f64))
}

fn duration(secs: f64) -> String {
    let secs = secs.max(0.0);
    if secs < 60.0 {
        format!("{} s", num(secs, 0))
    } else if secs < 3600.0 {
        format!("{} min", num(secs / 60.0, 0))
    } else if secs < 48.0 * 3600.0 {
        format!(
            "{} h",
            num(secs / 3600.0, if secs < 10.0 * 3600.0 { 1 } else { 0 })
        )
    } else {
        format!("{} d", num(secs / 86_400.0, 0))
    }
}

fn signed(x: f64, decimals: usize) -> String {
    if x > 0.0 {
        format!("+{}", num(x, decimals))
    } else {
        num(x, decimals)
    }
}

/// A number as a person reads it: thousands grouped with commas, at most
/// `decimals` decimals and no trailing zeros ("1,848", "79", "6.3").
fn num(x: f64, decimals: usize) -> String {
    if !x.is_finite() {
        return "∞".to_string();
    }
    let text = format!("{:.*}", decimals, x.abs());
    let (int, frac) = match text.split_once('.') {
        Some((i, f)) => (i, f.trim_end_matches('0')),
        None => (text.as_str(), ""),
    };
    let mut grouped = String::new();
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(ch);
    }
    let negative = x < 0.0 && (grouped != "0" || !frac.is_empty());
    format!(
        "{}{grouped}{}{frac}",
        if negative { "-" } else { "" },
        if frac.is_empty() { "" } else { "." }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ArticleMeta;
    use crate::score::Models;

    const NOW: i64 = 1_763_760_000;

    fn sentence(model: ModelKind, c: &Counters, range: RangeSpec, published_at: i64) -> String {
        let meta = ArticleMeta {
            published_at,
            ..ArticleMeta::default()
        };
        let explain = Models::default().explain(model, &Default::default(), c, &meta, None, NOW);
        why(&Scored {
            model,
            explain: &explain,
            counters: c,
            range,
            published_at,
            now: NOW,
        })
    }

    #[test]
    fn numbers_read_as_people_write_them() {
        assert_eq!(num(1848.0, 0), "1,848");
        assert_eq!(num(1_234_567.0, 0), "1,234,567");
        assert_eq!(num(79.26, 0), "79");
        assert_eq!(num(6.30, 1), "6.3");
        assert_eq!(num(-4.0, 0), "-4");
        assert_eq!(num(-0.001, 2), "0");
        assert_eq!(duration(16.0 * 3600.0 + 700.0), "16 h");
        assert_eq!(duration(2.0 * 3600.0 + 1800.0), "2.5 h");
        assert_eq!(range(RangeSpec::Hours(72)), "3 d");
        assert_eq!(range(RangeSpec::Hours(24)), "24 h");
    }

    #[test]
    fn gravity_says_views_age_and_the_divisor() {
        let c = Counters {
            pv: 120,
            uv: 97,
            ..Counters::default()
        };
        let s = sentence(
            ModelKind::Gravity,
            &c,
            RangeSpec::Hours(72),
            NOW - 16 * 3600,
        );
        // (16 + 2)^1.5 = 76.4
        assert_eq!(
            s,
            "120 views from 97 visitors in 3 d, 16 h old: divided by 76.4 for age"
        );
    }

    #[test]
    fn rising_says_the_views_and_the_rate() {
        let models = Models::default();
        let meta = ArticleMeta::default();
        let say = |observed: u64, expected: f64| {
            let t = crate::model::Trend { observed, expected };
            let p = crate::model::ModelParams::default();
            let c = Counters::default();
            let explain = models.explain(ModelKind::Rising, &p, &c, &meta, Some(&t), NOW);
            why(&Scored {
                model: ModelKind::Rising,
                explain: &explain,
                counters: &c,
                range: RangeSpec::Hours(1),
                published_at: 0,
                now: NOW,
            })
        };
        let s = say(26, 26.0 * 24.0 / 24.0 / 6.5);
        assert!(
            s.starts_with("26 views in the last 1 h, 6.5× its usual rate (95 %: "),
            "{s}"
        );
        assert!(s.ends_with("×, from the 24 h before)"), "{s}");
        assert_eq!(
            say(5, 0.0),
            "5 views in the last 1 h, none in the 24 h before"
        );
    }

    /// 120 views from 97 visitors of an article 12 hours old.
    fn twelve_hours_old() -> (Counters, ArticleMeta) {
        let c = Counters {
            pv: 120,
            uv: 97,
            ..Counters::default()
        };
        let meta = ArticleMeta {
            published_at: NOW - 12 * 3600,
            ..ArticleMeta::default()
        };
        (c, meta)
    }

    /// The sentence of terms over 24 h at `NOW`.
    fn why_24h(model: ModelKind, explain: &Explain, c: &Counters, meta: &ArticleMeta) -> String {
        why(&Scored {
            model,
            explain,
            counters: c,
            range: RangeSpec::Hours(24),
            published_at: meta.published_at,
            now: NOW,
        })
    }

    #[test]
    fn half_life_says_its_divisor() {
        let (c, meta) = twelve_hours_old();
        let p = crate::model::ModelParams {
            decay: crate::model::Decay::HalfLife(6),
            ..Default::default()
        };
        for model in [ModelKind::Gravity, ModelKind::Weighted] {
            let explain = Models::default().explain(model, &p, &c, &meta, None, NOW);
            let s = why_24h(model, &explain, &c, &meta);
            assert!(
                s.ends_with("12 h old: divided by 4 for age (half-life 6 h)")
                    || s.ends_with("divided by 4 for being 12 h old (half-life 6 h)"),
                "{model:?}: {s}"
            );
        }
    }

    #[test]
    fn a_category_scale_says_its_divisor_and_events() {
        let (c, meta) = twelve_hours_old();
        let p = crate::model::ModelParams::default();
        let explain = Models::default().explain(ModelKind::Gravity, &p, &c, &meta, None, NOW);
        let scale = crate::score::CategoryScale { events: 1580 };
        let explain = scale.explain(explain);
        assert_eq!(explain.get("categoryEvents"), Some(1580.0));
        let s = why_24h(ModelKind::Gravity, &explain, &c, &meta);
        assert!(
            s.ends_with("; divided by 3.2 for its category's 1,580 events in 30 days"),
            "{s}"
        );
    }

    #[test]
    fn visitors_never_read_above_views() {
        let c = Counters {
            pv: 838,
            uv: 840,
            ..Counters::default()
        };
        let s = sentence(ModelKind::Gravity, &c, RangeSpec::Hours(24), NOW - 3600);
        assert!(s.starts_with("838 views from 838 visitors in 24 h"), "{s}");
    }

    #[test]
    fn vote_models_say_the_votes() {
        let c = Counters {
            ups: 60,
            downs: 40,
            ..Counters::default()
        };
        assert_eq!(
            sentence(ModelKind::Controversy, &c, RangeSpec::All, NOW),
            "+20 votes (60 up, 40 down): split 67 %, weighing 100 votes"
        );
        assert_eq!(
            sentence(ModelKind::Confidence, &c, RangeSpec::All, NOW),
            "60 of 100 votes up: at least 54 % up, with 80 % confidence"
        );
        let old = sentence(ModelKind::Lemmy, &c, RangeSpec::All, NOW - 8 * 86_400);
        assert!(
            old.ends_with("older than a week, so no longer ranked"),
            "{old}"
        );
        let hn = sentence(ModelKind::Hn, &c, RangeSpec::All, NOW - 3 * 3600);
        assert!(
            hn.starts_with("+20 votes (60 up, 40 down), 3 h old: 10.54 divided by"),
            "{hn}"
        );
    }

    #[test]
    fn every_model_has_a_sentence() {
        let c = Counters {
            pv: 3,
            uv: 2,
            likes: 1,
            ups: 1,
            ..Counters::default()
        };
        for model in ModelKind::ALL {
            let s = sentence(model, &c, RangeSpec::Hours(24), NOW - 7200);
            assert!(!s.is_empty() && !s.contains("NaN"), "{model:?}: {s}");
        }
    }
}
