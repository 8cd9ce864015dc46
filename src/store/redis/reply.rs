//! Decoding Redis replies: numbers and strings out of `Value`s, counters
//! and verdicts out of script replies, and the error for a reply of the
//! wrong shape.

use redis::Value;

use crate::model::{ArticleId, Counters, Verdict};
use crate::store::StoreError;

/// Article ids from Redis members, sorted; members that are not ids are
/// dropped.
pub(crate) fn sorted_ids(members: &[String]) -> Vec<ArticleId> {
    let mut ids: Vec<ArticleId> = members
        .iter()
        .filter_map(|s| ArticleId::parse(s).ok())
        .collect();
    ids.sort();
    ids
}

pub(crate) fn v_i64(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        Value::SimpleString(s) => s.parse().ok(),
        Value::Double(d) => Some(*d as i64),
        _ => None,
    }
}

pub(crate) fn v_str(v: &Value) -> Option<&str> {
    match v {
        Value::BulkString(b) => std::str::from_utf8(b).ok(),
        Value::SimpleString(s) => Some(s),
        _ => None,
    }
}

pub(crate) fn bad_reply(what: &str) -> StoreError {
    StoreError::Internal(format!("redis: unexpected reply to {what}"))
}

/// Counters from the 10 integers `window.lua` returns.
pub(crate) fn counters_from(v: &[i64]) -> Counters {
    let g = |i: usize| v.get(i).copied().unwrap_or(0).max(0) as u64;
    Counters {
        pv: g(0),
        likes: g(1),
        comments: g(2),
        favorites: g(3),
        shares: g(4),
        dwell_seconds: g(5),
        dwell_reports: g(6),
        uv: g(7),
        ups: g(8),
        downs: g(9),
    }
}

pub(crate) fn verdict_of(code: i64) -> Option<Verdict> {
    Some(match code {
        0 => Verdict::Counted,
        1 => Verdict::Duplicate,
        2 => Verdict::RateLimited,
        3 | 7 | 8 => Verdict::Bot,
        4 => Verdict::Replayed,
        _ => return None,
    })
}
