//! The peers' sorts against values computed by the peers' own code
//! (`tests/data/peers/README.md` says which code and how).

use hotrank::model::{ArticleMeta, Counters, ModelKind};
use hotrank::score::Models;

const NOW: i64 = 1_763_760_000;

fn data(name: &str) -> String {
    let path = format!("{}/tests/data/peers/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The rows of a CSV file of numbers, header skipped (read with Rust's
/// own correctly rounded parser: the values are compared to the last bit).
fn csv(name: &str) -> Vec<Vec<f64>> {
    data(name)
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
        .collect()
}

/// hotrank's score for an article with these lifetime votes, published at
/// `published_at`, at `now`.
fn score(model: ModelKind, ups: i64, downs: i64, published_at: i64, now: i64) -> f64 {
    let c = Counters {
        ups: ups as u64,
        downs: downs as u64,
        ..Counters::default()
    };
    let meta = ArticleMeta {
        published_at,
        ..ArticleMeta::default()
    };
    Models::default().score(model, &Default::default(), &c, &meta, None, now)
}

/// A net score as ups and downs (the peers' functions take the net).
fn split(net: i64) -> (i64, i64) {
    if net >= 0 { (net, 0) } else { (0, -net) }
}

#[test]
fn reddit_hot_is_reddits_to_the_last_bit() {
    let rows = csv("reddit_hot.csv");
    assert!(rows.len() > 1000);
    for r in rows {
        let (ups, downs, date, want) = (r[0] as i64, r[1] as i64, r[2] as i64, r[3]);
        let got = score(ModelKind::Reddit, ups, downs, date, NOW);
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "hot({ups}, {downs}, {date}): {got} vs {want}"
        );
    }
}

#[test]
fn controversy_and_confidence_are_reddits_to_the_last_bit() {
    let rows = csv("reddit_votes.csv");
    assert!(rows.len() > 500);
    for r in rows {
        let (ups, downs) = (r[0] as i64, r[1] as i64);
        for (model, want) in [
            (ModelKind::Controversy, r[2]),
            (ModelKind::Confidence, r[3]),
        ] {
            let got = score(model, ups, downs, NOW - 3600, NOW);
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{model:?}({ups}, {downs}): {got} vs {want}"
            );
        }
    }
}

#[test]
fn lemmys_controversy_rank_is_the_same_function() {
    for r in csv("lemmy_controversy.csv") {
        let (ups, downs, want) = (r[0] as i64, r[1] as i64, r[2]);
        let got = score(ModelKind::Controversy, ups, downs, NOW, NOW);
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "controversy_rank({ups}, {downs}): {got} vs {want}"
        );
    }
}

#[test]
fn hn_is_news_arcs_frontpage_rank_to_the_last_bit() {
    let rows = csv("hn.csv");
    assert!(rows.len() > 100);
    for r in rows {
        let (net, age, want) = (r[0] as i64, r[1] as i64, r[2]);
        let (ups, downs) = split(net);
        let got = score(ModelKind::Hn, ups, downs, NOW - age, NOW);
        // Arc's exact 0 (a base of 0 over any age) is hotrank's 0.0.
        let same = got.to_bits() == want.to_bits() || (got == 0.0 && want == 0.0);
        assert!(
            same,
            "frontpage-rank(score {net}, {age} s old): {got} vs {want}"
        );
    }
}

#[test]
fn lemmy_is_lemmys_hot_rank() {
    let rows = csv("lemmy_hot.csv");
    assert!(rows.len() > 200);
    for r in rows {
        let (net, age, want) = (r[0] as i64, r[1] as i64, r[2]);
        let (ups, downs) = split(net);
        let got = score(ModelKind::Lemmy, ups, downs, NOW - age, NOW);
        // PostgreSQL computes in numeric and rounds once: a few ulps apart.
        let close = (got - want).abs() <= 1e-14 * want.abs();
        assert!(close, "hot_rank(score {net}, {age} s old): {got} vs {want}");
    }
}
