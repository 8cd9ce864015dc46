//! Paging cursors, shared by every store so a cursor means the same thing
//! whichever store (or node) issued it. The text is base64url so clients
//! treat it as opaque:
//! - `h.<snapshot>.<offset>` continues a ranking snapshot;
//! - `n.<publishedAt>.<articleId>` continues `GET /api/new` after that item.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::StoreError;
use crate::model::{ArticleId, Timestamp};

/// A rankings snapshot and the offset of the next page in it.
pub fn snapshot(id: u64, offset: usize) -> String {
    URL_SAFE_NO_PAD.encode(format!("h.{id}.{offset}"))
}

/// The position after an item of `GET /api/new`.
pub fn newest(published_at: Timestamp, id: &ArticleId) -> String {
    URL_SAFE_NO_PAD.encode(format!("n.{published_at}.{id}"))
}

/// The `(kind, a, b)` fields of a cursor this server issued.
fn fields(c: &str) -> Option<(String, String, String)> {
    let text = String::from_utf8(URL_SAFE_NO_PAD.decode(c).ok()?).ok()?;
    let mut parts = text.splitn(3, '.');
    Some((
        parts.next()?.to_string(),
        parts.next()?.to_string(),
        parts.next()?.to_string(),
    ))
}

/// Parses a ranking cursor: (snapshot id, offset). A ranking is at most
/// `cap` deep, so no cursor this server issued points further: a larger
/// offset is forged (and near 2^64 it would overflow the page arithmetic).
pub fn parse_snapshot(c: &str, cap: usize) -> Result<(u64, usize), StoreError> {
    fields(c)
        .filter(|(kind, _, _)| kind == "h")
        .and_then(|(_, id, off)| Some((id.parse().ok()?, off.parse().ok()?)))
        .filter(|&(_, off)| off <= cap)
        .ok_or_else(|| StoreError::InvalidCursor("not a ranking cursor this server issued".into()))
}

/// Parses a `GET /api/new` cursor: (publishedAt, article id).
pub fn parse_newest(c: &str) -> Result<(Timestamp, ArticleId), StoreError> {
    fields(c)
        .filter(|(kind, _, _)| kind == "n")
        .and_then(|(_, p, id)| Some((p.parse().ok()?, ArticleId::parse(&id).ok()?)))
        .ok_or_else(|| StoreError::InvalidCursor("not a /api/new cursor this server issued".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refusals() {
        assert_eq!(parse_snapshot(&snapshot(42, 20), 1000), Ok((42, 20)));
        assert_eq!(parse_snapshot(&snapshot(42, 1000), 1000), Ok((42, 1000)));
        assert!(parse_snapshot(&snapshot(42, 1001), 1000).is_err());
        let forged = URL_SAFE_NO_PAD.encode(format!("h.42.{}", u64::MAX - 5));
        assert!(parse_snapshot(&forged, 1000).is_err());
        let id = ArticleId::parse("a-1").unwrap();
        assert_eq!(
            parse_newest(&newest(1_700_000_000, &id)),
            Ok((1_700_000_000, id.clone()))
        );
        assert!(parse_snapshot(&newest(1, &id), 1000).is_err());
        assert!(parse_newest(&snapshot(1, 2)).is_err());
        for bad in ["", "garbage", "!!!", &URL_SAFE_NO_PAD.encode("n.x.a{b}")] {
            assert!(
                parse_snapshot(bad, 1000).is_err() && parse_newest(bad).is_err(),
                "{bad}"
            );
        }
    }
}
