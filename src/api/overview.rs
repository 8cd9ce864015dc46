//! What the dashboard's first page and `hotrank top` read:
//! `GET /api/overview` (site totals, a chart, the hot list with trend lines
//! and rank movement) and `GET /api/compare` (two models side by side with
//! their overlap and Kendall's tau, the comparisons `hotrank replay` uses).
//!
//! Built from the public store methods only (`hot`, `hourly`, `stats`,
//! and `ranked_at` for movement: [`super::movement`]). The change on the
//! views total compares the range with the one before it (a ranking over
//! both, less the range's).

use std::time::{Duration, Instant};

use axum::extract::{RawQuery, State};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use super::budget::QueryBudget;
use super::extract::Params;
use super::ops::quarantine_json;
use super::rankings::{Limits, item_json, parse_query};
use super::{ApiError, AppState};
use crate::cli::metrics::{common_count, jaccard, kendall_tau, overlap};
use crate::model::{ArticleId, HotQuery, Quarantine, RangeSpec, Timestamp};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/overview", get(get_overview))
        .route("/api/compare", get(get_compare))
}

/// How long an overview waits for its ranking's earlier ranking (movement)
/// when it is not cached yet: a small site's is ready at once; a large
/// one's comes with a later refresh.
const MOVEMENT_WAIT: Duration = Duration::from_millis(250);

/// Articles whose hourly rows make the chart (the hottest in the range).
pub const SERIES_DEPTH: usize = 100;
/// The chart covers at most this many hours (the last 7 days).
pub const SERIES_MAX_HOURS: u32 = 168;

const OVERVIEW_PARAMS: &[&str] = &[
    "range", "model", "limit", "category", "kind", "group", "window", "baseline", "min", "decay",
    "halfLife", "scale",
];
const COMPARE_PARAMS: &[&str] = &["a", "b", "range", "limit", "category", "kind", "group"];

fn range_hours(r: RangeSpec) -> u32 {
    match r {
        RangeSpec::Hours(h) => h,
        RangeSpec::All => RangeSpec::MAX_HOURS,
    }
}

async fn get_overview(
    State(state): State<AppState>,
    _: QueryBudget,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let started = Instant::now();
    Params::parse(raw.as_deref(), OVERVIEW_PARAMS)?;
    let cap = state.config.retention.ranking_cap;
    let (q, range_text) = parse_query(raw.as_deref(), Limits::of(&state.config))?;
    let now = state.clock.now();
    // The whole ranking (as deep as it goes) for the totals.
    let whole = HotQuery {
        offset: 0,
        limit: cap,
        cursor: None,
        // The dashboard shows a score's terms on demand.
        explain: true,
        per_author: None,
        ..q.clone()
    };
    let ranked = state.store.hot(&whole, now).await?.items;
    let hours = range_hours(q.range);
    let chart_hours = hours.min(SERIES_MAX_HOURS);
    // A range that fits the chart is compared with the one before it.
    let compared = matches!(q.range, RangeSpec::Hours(h) if h <= SERIES_MAX_HOURS);
    let last_hour = now.div_euclid(3600);
    let first_hour = last_hour - i64::from(chart_hours) + 1;
    let stats = state
        .store
        .stats(now, if compared { hours * 2 } else { hours })
        .await?;

    let mut pv = 0u64;
    let mut uv_sum = 0u64;
    let mut counted = 0u64;
    for it in &ranked {
        let c = &it.counters;
        pv += c.pv;
        uv_sum += c.uv;
        counted += c.pv + c.likes + c.comments + c.favorites + c.shares + c.dwell_reports;
    }
    let mut before = PeriodSums::default();
    // The period before the range: a ranking over twice the range holds
    // every article's views in both, so less the range's own it leaves
    // the previous period's, exactly (views add up). Visitors do not add
    // up across periods, so their change is not given.
    if compared {
        let twice = HotQuery {
            range: RangeSpec::Hours(hours * 2),
            explain: false,
            ..whole.clone()
        };
        let both: u64 = state
            .store
            .hot(&twice, now)
            .await?
            .items
            .iter()
            .map(|it| it.counters.pv)
            .sum();
        before.pv = both.saturating_sub(pv);
    }
    // Site-wide visitors of the range (a union of hourly sketches) and
    // the last hour's views by minute.
    let traffic = state.store.site_traffic(now, hours).await?;
    let quarantined = match q.range {
        RangeSpec::All => stats.quarantined,
        RangeSpec::Hours(h) => {
            let mut total = Quarantine::default();
            for (hour, qh) in &stats.quarantine_by_hour {
                if *hour > last_hour - i64::from(h) {
                    total.merge(qh);
                } else if compared {
                    before.quarantined += qh.total();
                }
            }
            total
        }
    };

    // The chart and the trend lines: hourly rows of the hottest articles.
    let mut series_pv = vec![0u64; chart_hours as usize];
    let mut series_uv = vec![0u64; chart_hours as usize];
    let mut trends: Vec<Vec<u64>> = Vec::new();
    let covered = ranked.len().min(SERIES_DEPTH);
    for (i, it) in ranked.iter().take(SERIES_DEPTH).enumerate() {
        let rows = state
            .store
            .hourly(&it.id, now, chart_hours)
            .await?
            .unwrap_or_default();
        let mut trend = vec![0u64; chart_hours as usize];
        for r in rows {
            if r.hour < first_hour {
                continue;
            }
            let Some(slot) = usize::try_from(r.hour - first_hour)
                .ok()
                .filter(|&s| s < trend.len())
            else {
                continue;
            };
            trend[slot] = r.pv;
            series_pv[slot] += r.pv;
            series_uv[slot] += r.uv;
        }
        if i < q.limit {
            trends.push(trend);
        }
    }
    let quarantine_by_hour: std::collections::HashMap<i64, &Quarantine> = stats
        .quarantine_by_hour
        .iter()
        .map(|(h, qh)| (*h, qh))
        .collect();
    let series: Vec<Value> = (0..chart_hours as usize)
        .map(|i| {
            let hour = first_hour + i as i64;
            let qh = quarantine_by_hour
                .get(&hour)
                .copied()
                .copied()
                .unwrap_or_default();
            json!({
                "hour": hour * 3600,
                "pv": series_pv[i],
                "uvSum": series_uv[i],
                "quarantined": qh.total(),
            })
        })
        .collect();

    let shown = &ranked[..ranked.len().min(q.limit)];
    let mut items: Vec<Value> = shown
        .iter()
        .zip(trends.into_iter().chain(std::iter::repeat(Vec::new())))
        .map(|(it, trend)| {
            let mut v = item_json(it, &q, now);
            // Views in the current clock hour (hotrank counts by the hour).
            v["lastHour"] = json!(trend.last().copied().unwrap_or(0));
            v["trend"] = json!(trend);
            v
        })
        .collect();
    let movement_since = (state.movements)
        .annotate(
            &state.store,
            &whole,
            now,
            MOVEMENT_WAIT,
            None,
            shown,
            &mut items,
        )
        .await;

    metrics::histogram!("hotrank_query_seconds", "endpoint" => "overview")
        .record(started.elapsed().as_secs_f64());
    Ok(Json(json!({
        "model": q.model.as_str(),
        "range": range_text,
        "generatedAt": now,
        "totals": {
            "pv": pv,
            "uvSum": uv_sum,
            "visitors": traffic.visitors,
            "counted": counted,
            "quarantined": quarantine_json(&quarantined),
            "quarantinedTotal": quarantined.total(),
            "articles": ranked.len(),
            "complete": ranked.len() < cap,
            "previous": compared.then(|| json!({
                "hours": hours,
                "pv": before.pv,
                "quarantinedTotal": before.quarantined,
            })),
            "change": compared.then(|| json!({
                "pv": change(pv, before.pv),
                "quarantinedTotal": change(quarantined.total(), before.quarantined),
            })),
        },
        "series": {
            "hours": chart_hours,
            "articles": covered,
            "points": series,
        },
        "realtime": realtime_json(&traffic.views_by_minute),
        "movementSince": movement_since,
        "items": items,
    })))
}

/// Minutes the realtime panel's headline sums (`lastMinutes`).
pub const REALTIME_HEADLINE_MINUTES: usize = 5;

/// The realtime panel: counted views a minute over the last hour, oldest
/// first, the current minute last, and the sum of the last five.
fn realtime_json(minutes: &[u64]) -> Value {
    let recent = minutes.len().saturating_sub(REALTIME_HEADLINE_MINUTES);
    json!({
        "minutes": minutes,
        "lastMinutes": REALTIME_HEADLINE_MINUTES,
        "lastMinutesViews": minutes[recent..].iter().sum::<u64>(),
    })
}

/// Sums over the period before the range, for the change on each total.
#[derive(Default)]
struct PeriodSums {
    pv: u64,
    quarantined: u64,
}

/// Relative change from `before` to `now` (0.12 is +12%); `None` when
/// there was nothing before to compare with.
fn change(now: u64, before: u64) -> Option<f64> {
    (before > 0).then(|| (now as f64 - before as f64) / before as f64)
}

/// One side of a comparison: the model's page with each item's rank in
/// the other list (`null` when it is not there).
fn side(
    q: &HotQuery,
    now: Timestamp,
    page: &[crate::model::RankedItem],
    other: &[ArticleId],
) -> Value {
    let items: Vec<Value> = page
        .iter()
        .map(|it| {
            let mut v = item_json(it, q, now);
            v["rankInOther"] = json!(other.iter().position(|x| *x == it.id).map(|p| p + 1));
            v
        })
        .collect();
    json!({"model": q.model.as_str(), "items": items})
}

async fn get_compare(
    State(state): State<AppState>,
    _: QueryBudget,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let started = Instant::now();
    let p = Params::parse(raw.as_deref(), COMPARE_PARAMS)?;
    let (Some(a), Some(b)) = (p.get("a"), p.get("b")) else {
        return Err(ApiError::bad(
            "invalid_parameter",
            "compare needs two models: a=MODEL&b=MODEL",
        ));
    };
    // Each side is an ordinary ranking query: the same checks as /api/hot.
    let query_for = |model: &str| -> Result<(HotQuery, String), ApiError> {
        let mut pairs: Vec<(&str, &str)> =
            p.0.iter()
                .filter(|(k, _)| k.as_str() != "a" && k.as_str() != "b")
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
        pairs.push(("model", model));
        let raw = serde_urlencoded::to_string(&pairs)
            .map_err(|e| ApiError::bad("invalid_parameter", e.to_string()))?;
        parse_query(Some(&raw), Limits::of(&state.config))
    };
    let (qa, range_text) = query_for(a)?;
    let (qb, _) = query_for(b)?;
    let now: Timestamp = state.clock.now();
    let pa = state.store.hot(&qa, now).await?.items;
    let pb = state.store.hot(&qb, now).await?.items;
    let ids_a: Vec<ArticleId> = pa.iter().map(|it| it.id.clone()).collect();
    let ids_b: Vec<ArticleId> = pb.iter().map(|it| it.id.clone()).collect();
    let common = common_count(&ids_a, &ids_b);
    metrics::histogram!("hotrank_query_seconds", "endpoint" => "compare")
        .record(started.elapsed().as_secs_f64());
    Ok(Json(json!({
        "range": range_text,
        "limit": qa.limit,
        "generatedAt": now,
        "a": side(&qa, now, &pa, &ids_b),
        "b": side(&qb, now, &pb, &ids_a),
        "common": common,
        "overlap": overlap(&ids_a, &ids_b),
        "jaccard": jaccard(&ids_a, &ids_b),
        "kendallTau": kendall_tau(&ids_a, &ids_b),
    })))
}
