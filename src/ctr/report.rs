//! Click-through by position per model, corrected for position bias.
//!
//! A reader clicks an item if they look at its position and like what
//! they see there: P(click at p) = θ_p · r, with θ_p the chance position p
//! is looked at (its *examination propensity*) and r the item's appeal.
//! Raw click-through mixes the two, so a model shown in long lists looks
//! worse than the same model in short ones. Here θ_p is estimated from
//! every list pooled: θ_p = CTR_p / CTR_1 (position 1 is looked at by
//! everyone who sees the list), kept within [[`MIN_PROPENSITY`], 1]; a
//! position with no impressions, or a site with no click at position 1
//! yet, gets θ = 1 (no correction). A model's inverse-propensity-weighted
//! CTR is Σ_p clicks_p/θ_p over Σ_p impressions_p: the click-through its
//! lists would have if every position were looked at like the first.
//!
//! The estimate assumes that, pooled over every list, what sits at a
//! position is about as appealing as what sits at the first; rankings put
//! their best first, so θ_p is somewhat underestimated below the top and
//! the correction is an upper bound. It is the same for every model, so
//! it ranks models fairly; a randomized swap experiment would measure θ
//! exactly (docs/api.md, `GET /api/ctr`).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Counts, MAX_POSITION, Tally, model_of};

/// The smallest propensity used: bounds any click's weight at 20.
pub const MIN_PROPENSITY: f64 = 0.05;

/// Per-position propensities, index 0 for position 1.
pub fn propensities(pooled: &BTreeMap<u32, Tally>) -> Vec<f64> {
    let ctr = |t: &Tally| (t.impressions > 0).then(|| t.clicks as f64 / t.impressions as f64);
    let top = pooled.get(&1).and_then(ctr).filter(|c| *c > 0.0);
    (1..=MAX_POSITION)
        .map(|p| match (top, pooled.get(&p).and_then(ctr)) {
            (Some(top), Some(c)) => (c / top).clamp(MIN_PROPENSITY, 1.0),
            _ => 1.0,
        })
        .collect()
}

fn ratio(num: f64, den: u64) -> Option<f64> {
    (den > 0).then(|| num / den as f64)
}

/// Totals, raw CTR and weighted CTR of a set of positions.
fn summary(rows: &BTreeMap<u32, Tally>, theta: &[f64]) -> Value {
    let impressions: u64 = rows.values().map(|t| t.impressions).sum();
    let clicks: u64 = rows.values().map(|t| t.clicks).sum();
    let weighted: f64 = rows
        .iter()
        .map(|(p, t)| t.clicks as f64 / theta[*p as usize - 1])
        .sum();
    json!({
        "impressions": impressions,
        "clicks": clicks,
        "ctr": ratio(clicks as f64, impressions),
        "ipwCtr": ratio(weighted, impressions),
    })
}

fn positions_json(rows: &BTreeMap<u32, Tally>, theta: Option<&[f64]>) -> Vec<Value> {
    rows.iter()
        .map(|(p, t)| {
            let mut v = json!({
                "position": p,
                "impressions": t.impressions,
                "clicks": t.clicks,
                "ctr": ratio(t.clicks as f64, t.impressions),
            });
            if let Some(theta) = theta {
                v["propensity"] = json!(theta[*p as usize - 1]);
            }
            v
        })
        .collect()
}

fn add_rows(into: &mut BTreeMap<u32, Tally>, from: &BTreeMap<u32, Tally>) {
    for (p, t) in from {
        let e = into.entry(*p).or_default();
        e.impressions = e.impressions.saturating_add(t.impressions);
        e.clicks = e.clicks.saturating_add(t.clicks);
    }
}

/// `GET /api/ctr`'s answer: the pooled positions with their propensities,
/// each model (only `model` when given) and each of its lists.
pub fn report(counts: &Counts, model: Option<&str>) -> Value {
    let mut pooled = BTreeMap::new();
    let mut by_model: BTreeMap<&str, (BTreeMap<u32, Tally>, Vec<&str>)> = BTreeMap::new();
    for (list, rows) in counts {
        add_rows(&mut pooled, rows);
        let Some(m) = model_of(list) else { continue };
        let entry = by_model.entry(m.as_str()).or_default();
        add_rows(&mut entry.0, rows);
        entry.1.push(list);
    }
    let theta = propensities(&pooled);
    let models: Vec<Value> = by_model
        .iter()
        .filter(|(m, _)| model.is_none_or(|want| want == **m))
        .map(|(m, (rows, lists))| {
            let mut v = summary(rows, &theta);
            v["model"] = json!(m);
            v["positions"] = json!(positions_json(rows, None));
            v["lists"] = json!(
                lists
                    .iter()
                    .map(|l| {
                        let mut lv = summary(&counts[*l], &theta);
                        lv["list"] = json!(l);
                        lv
                    })
                    .collect::<Vec<_>>()
            );
            v
        })
        .collect();
    json!({
        "positions": positions_json(&pooled, Some(&theta)),
        "models": models,
        "minPropensity": MIN_PROPENSITY,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Clicks where position p is looked at with chance 1/p.
    fn list(appeal: f64, shown: u32, impressions: u64) -> BTreeMap<u32, Tally> {
        (1..=shown)
            .map(|p| {
                let clicks = (impressions as f64 * appeal / f64::from(p)).round() as u64;
                (
                    p,
                    Tally {
                        impressions,
                        clicks,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn weighting_undoes_the_position_bias_raw_ctr_suffers() {
        // gravity is more appealing (0.2) but shown 10 deep; votes (0.15)
        // only 3 deep, so its raw CTR looks better.
        let mut c = Counts::new();
        c.insert("gravity:24h".into(), list(0.2, 10, 10_000));
        c.insert("votes:all".into(), list(0.15, 3, 10_000));
        let r = report(&c, None);
        let m = |name: &str| {
            r["models"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["model"] == name)
                .unwrap()
                .clone()
        };
        let (g, v) = (m("gravity"), m("votes"));
        let f = |x: &Value, k: &str| x[k].as_f64().unwrap();
        assert!(f(&g, "ctr") < f(&v, "ctr"), "{g} {v}");
        assert!(f(&g, "ipwCtr") > f(&v, "ipwCtr"), "{g} {v}");
        // Where both lists are shown the propensity is exactly 1/p.
        let p2 = &r["positions"][1];
        assert!((f(p2, "propensity") - 0.5).abs() < 1e-3, "{p2}");
        // votes' corrected CTR is its appeal.
        assert!((f(&v, "ipwCtr") - 0.15).abs() < 1e-3, "{v}");
        assert_eq!(
            report(&c, Some("votes"))["models"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn no_clicks_no_correction() {
        let mut c = Counts::new();
        c.insert("gravity:24h".into(), list(0.0, 3, 10));
        let r = report(&c, None);
        assert_eq!(r["models"][0]["ctr"], 0.0);
        assert_eq!(r["positions"][2]["propensity"], 1.0);
        assert_eq!(report(&Counts::new(), None)["models"], json!([]));
    }
}
