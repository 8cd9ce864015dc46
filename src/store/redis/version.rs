//! The oldest Redis hotrank runs on: 6.2 (ingest.lua reads a batch's
//! articles with `ZMSCORE`, new in 6.2). An older server fails `ready()`
//! with a message that names both versions, instead of failing every
//! ingest with "unknown command".

use redis::Value;

use super::{Con, store_err};
use crate::store::StoreError;

/// The oldest supported server, as (major, minor).
pub const MIN: (u32, u32) = (6, 2);

/// Checks every server `INFO server` reaches (each primary on a cluster).
pub(crate) async fn check(mut con: Con) -> Result<(), StoreError> {
    let reply: Value = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut con)
        .await
        .map_err(store_err)?;
    let mut texts = Vec::new();
    collect_text(&reply, &mut texts);
    let oldest = texts.iter().filter_map(|t| version_in(t)).min();
    match oldest {
        Some(v) if (v.0, v.1) < MIN => Err(StoreError::Unavailable(format!(
            "Redis {}.{}.{} is too old: hotrank needs Redis {}.{} or newer",
            v.0, v.1, v.2, MIN.0, MIN.1
        ))),
        Some(_) => Ok(()),
        None => Err(StoreError::Internal(
            "INFO server named no redis_version".into(),
        )),
    }
}

/// Every string in a reply (a cluster answers with one per node).
fn collect_text(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::BulkString(b) => out.push(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) | Value::VerbatimString { text: s, .. } => out.push(s.clone()),
        Value::Array(items) | Value::Set(items) => {
            items.iter().for_each(|i| collect_text(i, out));
        }
        Value::Map(pairs) => pairs.iter().for_each(|(k, v)| {
            collect_text(k, out);
            collect_text(v, out);
        }),
        _ => {}
    }
}

/// The oldest `redis_version:X.Y.Z` line in one `INFO` text.
fn version_in(info: &str) -> Option<(u32, u32, u32)> {
    info.lines()
        .filter_map(|l| l.trim().strip_prefix("redis_version:"))
        .filter_map(|v| {
            let mut parts = v.split('.').map(|p| p.parse::<u32>().ok());
            Some((
                parts.next()??,
                parts.next()??,
                parts.next().flatten().unwrap_or(0),
            ))
        })
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_version_line() {
        let info = "# Server\r\nredis_version:6.2.14\r\nredis_git_sha1:0\r\n";
        assert_eq!(version_in(info), Some((6, 2, 14)));
        assert_eq!(version_in("redis_version:7.0.15\n"), Some((7, 0, 15)));
        assert_eq!(version_in("redis_version:6.0.16\n"), Some((6, 0, 16)));
        assert!(version_in("redis_version:6.0.16\n").unwrap() < (MIN.0, MIN.1, 0));
        assert_eq!(version_in("no version here"), None);
    }
}
