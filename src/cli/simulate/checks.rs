//! Seed 001's edge checks over the looks at the ranking, each a PASS or
//! FAIL line with what it saw.

use std::collections::HashMap;

use super::SIM_START;
use super::drive::Look;
use super::traffic::{Article, Kind, Source};
use crate::cli::fmt_offset;
use crate::model::{ArticleId, ArticleMeta, Verdict};
use crate::score::{ModelKind, Models};
use crate::store::Store;
use crate::store::embedded::EmbeddedStore;

pub(super) struct Check {
    pub(super) name: &'static str,
    pub(super) pass: bool,
    pub(super) detail: String,
}

pub(super) fn rank_text(r: Option<usize>) -> String {
    r.map_or("unranked".into(), |r| format!("rank {r}"))
}

fn first_of(articles: &[Article], kind: Kind) -> usize {
    articles
        .iter()
        .position(|a| a.kind == kind)
        .expect("every kind is planned")
}

/// Seed 001: a dwell outlier (> 300 s) must not take over the list.
pub(super) fn check_long_dwell(
    articles: &[Article],
    looks: &[Look],
    models: &Models,
    model: ModelKind,
) -> Check {
    let dwellers: Vec<usize> = (0..articles.len())
        .filter(|&i| articles[i].kind == Kind::LongDwell)
        .collect();
    let best = |i: usize| looks.iter().filter_map(|l| l.rank(i)).min();
    let took_over: Vec<usize> = dwellers
        .iter()
        .copied()
        .filter(|&i| best(i) == Some(1))
        .collect();
    let i = dwellers[0];
    let last = looks.last().expect("looks");
    let mut detail = format!(
        "{} dwell outlier(s) never ranked #1 (best rank: {})",
        dwellers.len(),
        dwellers
            .iter()
            .take(5)
            .map(|&i| format!(
                "{} {}",
                articles[i].id,
                best(i).map_or("-".into(), |r| r.to_string())
            ))
            .collect::<Vec<_>>()
            .join(", ")
            + if dwellers.len() > 5 { ", ..." } else { "" }
    );
    if !took_over.is_empty() {
        detail = format!(
            "ranked #1: {}",
            took_over
                .iter()
                .map(|&i| articles[i].id.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if let Some(c) = last.counters(i) {
        let w = &models.weighted;
        detail += &format!(
            "; {} avg dwell {:.0} s counts as {:.0} s",
            articles[i].id,
            c.avg_dwell_seconds(),
            c.avg_dwell_seconds().min(w.dwell_cap_secs)
        );
        if model == ModelKind::Weighted {
            let meta = ArticleMeta {
                published_at: SIM_START + articles[i].published,
                ..ArticleMeta::default()
            };
            let mut uncapped = models.clone();
            uncapped.weighted.dwell_cap_secs = 86_400.0;
            let now = SIM_START + last.offset;
            let p = Default::default();
            let s = uncapped.score(ModelKind::Weighted, &p, &c, &meta, None, now);
            let rank = 1 + last.ranked.iter().filter(|r| r.0 != i && r.1 > s).count();
            detail += &format!(
                " (score {:.2}; without the cap it would score {s:.2}, rank {rank})",
                last.score(i).unwrap_or(f64::NAN)
            );
        }
    }
    Check {
        name: "dwell outliers do not take over",
        pass: took_over.is_empty(),
        detail,
    }
}

/// Seed 001: an old article with no new activity drifts down.
pub(super) fn check_old_drifts(articles: &[Article], looks: &[Look], after: &[Look]) -> Check {
    let i = first_of(articles, Kind::Old);
    let a = &articles[i];
    let quiet_from = a.last_event.unwrap_or(0);
    let ranks: Vec<Option<usize>> = looks.iter().map(|l| l.rank(i)).collect();
    let best = ranks.iter().flatten().min().copied();
    let last = looks.last().expect("looks");
    let idle: Vec<f64> = looks
        .iter()
        .filter(|l| l.offset > quiet_from)
        .filter_map(|l| l.score(i))
        .collect();
    let never_rises = idle.windows(2).all(|w| w[1] <= w[0] + 1e-12);
    let end_score = last.score(i);
    let later: Vec<Option<f64>> = after.iter().map(|l| l.score(i)).collect();
    let keeps_falling = match (end_score, later.last()) {
        (Some(e), Some(Some(l))) => *l < e,
        // Dropped out of the range entirely: it fell off the list.
        (Some(_), Some(None)) => true,
        _ => false,
    };
    let slid = matches!((best, last.rank(i)), (Some(b), Some(r)) if r > b)
        || (best.is_some() && last.rank(i).is_none());
    let fmt = |s: Option<f64>| s.map_or("off the list".into(), |s| format!("{s:.2}"));
    Check {
        name: "an old article with no new activity drifts down",
        pass: never_rises && keeps_falling && slid && !idle.is_empty(),
        detail: format!(
            "{} (published {} h before the run, no reader after {}): best rank {}, {} at the end; score {} over {} idle steps; then with no events at all, score {} at the end, {} at +24h, {} at +48h, {} at +72h",
            a.id,
            -a.published / 3600,
            fmt_offset(quiet_from),
            best.map_or("-".into(), |b| b.to_string()),
            rank_text(last.rank(i)),
            if never_rises { "never rose" } else { "rose" },
            idle.len(),
            fmt(end_score),
            fmt(later[0]),
            fmt(later[1]),
            fmt(later[2]),
        ),
    }
}

/// Seed 001: high UV with long dwell beats high early PV with short dwell.
pub(super) fn check_uv_beats_pv(articles: &[Article], looks: &[Look]) -> Check {
    let b = first_of(articles, Kind::ProbeBurst);
    let s = first_of(articles, Kind::ProbeSteady);
    let last = looks.last().expect("looks");
    let led_until = looks
        .iter()
        .filter(|l| match (l.score(b), l.score(s)) {
            (Some(sb), Some(ss)) => sb > ss,
            (Some(_), None) => true,
            _ => false,
        })
        .map(|l| l.offset)
        .max();
    let describe = |i: usize| {
        let c = last.counters(i).unwrap_or_default();
        format!(
            "{} ({} view requests, PV {}, UV {}, avg dwell {:.0} s) {} score {}",
            articles[i].id,
            articles[i].view_requests,
            c.pv,
            c.uv,
            c.avg_dwell_seconds(),
            rank_text(last.rank(i)),
            last.score(i).map_or("-".into(), |x| format!("{x:.2}"))
        )
    };
    let pass = match (last.score(s), last.score(b)) {
        (Some(ss), Some(sb)) => ss > sb,
        (Some(_), None) => true,
        _ => false,
    };
    Check {
        name: "high UV + long dwell beats high early PV + short dwell",
        pass,
        detail: format!(
            "{} {} {}{}",
            describe(s),
            if pass { "beats" } else { "does not beat" },
            describe(b),
            led_until.map_or(String::new(), |t| format!(
                "; the burst led until {}",
                fmt_offset(t)
            ))
        ),
    }
}

/// Bot and flood traffic is quarantined and never reaches the top N.
pub(super) fn check_quarantine(
    articles: &[Article],
    tops: &[Vec<usize>],
    verdicts: &HashMap<(Source, Verdict), u64>,
    rt: &tokio::runtime::Runtime,
    store: &EmbeddedStore,
    duration: i64,
) -> Result<Check, String> {
    let get = |s, v| verdicts.get(&(s, v)).copied().unwrap_or(0);
    let bot_total: u64 = Verdict::ALL.iter().map(|&v| get(Source::Bot, v)).sum();
    let flood_total: u64 = Verdict::ALL.iter().map(|&v| get(Source::Flood, v)).sum();
    let flood_counted = get(Source::Flood, Verdict::Counted);
    let bot_target = ArticleId::parse("bot-target").expect("valid id");
    let exists = rt
        .block_on(store.article(&bot_target, SIM_START + duration))
        .map_err(|e| e.to_string())?
        .is_some();
    // The two flood targets: the articles the floods hit.
    let targets: Vec<usize> = articles
        .iter()
        .enumerate()
        .filter(|(_, a)| a.kind == Kind::Tail)
        .map(|(i, _)| i)
        .chain((0..articles.len()).rev())
        .take(2)
        .collect();
    let in_top: Vec<usize> = targets
        .iter()
        .copied()
        .filter(|t| articles[*t].kind == Kind::Tail && tops.iter().any(|top| top.contains(t)))
        .collect();
    // Each flood source is one visitor: at most one counted view per
    // dedupe window, i.e. a handful over the run.
    let pass = get(Source::Bot, Verdict::Bot) == bot_total
        && bot_total > 0
        && !exists
        && flood_counted * 100 <= flood_total.max(1)
        && in_top.is_empty();
    Ok(Check {
        name: "bots and floods are quarantined",
        pass,
        detail: format!(
            "bots: {} of {bot_total} events quarantined as bot, bot-only article {}; floods: {flood_counted} of {flood_total} events counted (rate_limited {}, duplicate {}), flood targets {} the top list",
            get(Source::Bot, Verdict::Bot),
            if exists {
                "was created"
            } else {
                "never created"
            },
            get(Source::Flood, Verdict::RateLimited),
            get(Source::Flood, Verdict::Duplicate),
            if in_top.is_empty() {
                "never in"
            } else {
                "reached"
            },
        ),
    })
}
