//! `GET /feeds/hot.rss`, `/feeds/hot.atom` and `/feeds/hot.json`: the
//! ranking `GET /api/hot` answers for the same parameters, as RSS 2.0,
//! Atom 1.0 and JSON Feed 1.1.
//!
//! Made for caches: a feed's body depends only on its query and the items
//! listed (their order, title, link, summary, date, author, category), not
//! on when it was asked, so its `ETag`, a hash of the body, stays while the
//! list does and a revalidation (`If-None-Match`) gets `304`.
//! `Cache-Control: public, max-age=feeds.max_age_secs` on every answer.

use std::fmt::Write as _;
use std::hash::Hasher;

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use super::budget::QueryBudget;
use super::rankings;
use super::{ApiError, AppState};
use crate::model::{HotPage, HotQuery, RankedItem, Timestamp};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/feeds/hot.rss", get(rss))
        .route("/feeds/hot.atom", get(atom))
        .route("/feeds/hot.json", get(json_feed))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Rss,
    Atom,
    Json,
}

impl Format {
    fn path(self) -> &'static str {
        match self {
            Format::Rss => "/feeds/hot.rss",
            Format::Atom => "/feeds/hot.atom",
            Format::Json => "/feeds/hot.json",
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Format::Rss => "application/rss+xml; charset=utf-8",
            Format::Atom => "application/atom+xml; charset=utf-8",
            Format::Json => "application/feed+json; charset=utf-8",
        }
    }
}

async fn rss(
    _: QueryBudget,
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    answer(&state, raw.as_deref(), &headers, Format::Rss).await
}

async fn atom(
    _: QueryBudget,
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    answer(&state, raw.as_deref(), &headers, Format::Atom).await
}

async fn json_feed(
    _: QueryBudget,
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    answer(&state, raw.as_deref(), &headers, Format::Json).await
}

async fn answer(
    state: &AppState,
    raw: Option<&str>,
    headers: &HeaderMap,
    format: Format,
) -> Result<Response, ApiError> {
    let (q, range_text) = rankings::parse_query(raw, rankings::Limits::of(&state.config))?;
    let page = rankings::hot(state, &q).await?;
    let feed = Feed::new(state, headers, raw, format, &q, &range_text, &page);
    let body = match format {
        Format::Rss => feed.rss(),
        Format::Atom => feed.atom(),
        Format::Json => feed.json(),
    };
    let etag = etag_of(body.as_bytes());
    Ok(cached(
        headers,
        &etag,
        state.config.feeds.max_age_secs,
        format.content_type(),
        body,
    ))
}

/// `body` with its `ETag` and `Cache-Control: public, max-age=<max_age>`,
/// or `304` with those headers when `If-None-Match` names the tag.
pub(super) fn cached(
    headers: &HeaderMap,
    etag: &str,
    max_age: u32,
    content_type: &'static str,
    body: String,
) -> Response {
    let cache = format!("public, max-age={max_age}");
    let common = [
        (header::ETAG, etag.to_string()),
        (header::CACHE_CONTROL, cache),
    ];
    if if_none_match(headers, etag) {
        return (StatusCode::NOT_MODIFIED, common).into_response();
    }
    (
        common,
        [
            (header::CONTENT_TYPE, content_type),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

/// A strong `ETag`: a 128-bit hash of the body and its length.
pub(super) fn etag_of(body: &[u8]) -> String {
    let mut h = siphasher::sip128::SipHasher13::new();
    h.write(body);
    let hash = siphasher::sip128::Hasher128::finish128(&h).as_u128();
    format!("\"{hash:032x}-{:x}\"", body.len())
}

/// Whether `If-None-Match` names `etag` (or is `*`). The comparison is the
/// weak one RFC 9110 prescribes for this header: a `W/` prefix is ignored.
pub(super) fn if_none_match(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == etag || t == "*")
}

/// What every format says, gathered once.
struct Feed<'a> {
    /// This server's public address, no trailing slash.
    base: String,
    /// The feed's own address (its query included).
    self_url: String,
    title: String,
    description: String,
    /// The newest item's date; the answer's time for an empty list.
    updated: Timestamp,
    items: &'a [RankedItem],
}

impl<'a> Feed<'a> {
    fn new(
        state: &AppState,
        headers: &HeaderMap,
        raw: Option<&str>,
        format: Format,
        q: &HotQuery,
        range_text: &str,
        page: &'a HotPage,
    ) -> Self {
        let base = public_base(state, headers);
        let mut self_url = format!("{base}{}", format.path());
        if let Some(raw) = raw.filter(|r| !r.is_empty()) {
            self_url.push('?');
            self_url.push_str(raw);
        }
        let mut title = format!("Hot: {}, {range_text}", q.model.as_str());
        for (name, v) in [
            ("category", &q.category),
            ("kind", &q.kind),
            ("group", &q.group),
        ] {
            if let Some(v) = v {
                let _ = write!(title, ", {name} {v}");
            }
        }
        let description = format!(
            "The hot ranking by the {} model over {range_text}, best first.",
            q.model.as_str()
        );
        let updated = page
            .items
            .iter()
            .map(|i| i.meta.published_at)
            .max()
            .unwrap_or(page.generated_at);
        Feed {
            base,
            self_url,
            title,
            description,
            updated,
            items: &page.items,
        }
    }

    /// An item's permanent id: its article's address on this server.
    fn item_id(&self, it: &RankedItem) -> String {
        format!("{}/api/articles/{}", self.base, it.id.as_str())
    }

    fn rss(&self) -> String {
        let mut o = String::with_capacity(1024 + 512 * self.items.len());
        o.push_str(concat!(
            "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n",
            "<rss version=\"2.0\" xmlns:atom=\"http://www.w3.org/2005/Atom\" ",
            "xmlns:dc=\"http://purl.org/dc/elements/1.1/\">\n<channel>\n"
        ));
        element(&mut o, "title", &self.title);
        element(&mut o, "link", &format!("{}/", self.base));
        element(&mut o, "description", &self.description);
        o.push_str("<atom:link rel=\"self\" type=\"application/rss+xml\" href=\"");
        xml_escape(&mut o, &self.self_url);
        o.push_str("\"/>\n<generator>hotrank</generator>\n");
        for it in self.items {
            let m = &it.meta;
            o.push_str("<item>\n");
            element(&mut o, "title", &item_title(it));
            if let Some(url) = &m.url {
                element(&mut o, "link", url);
            }
            // RSS's description is HTML; the summary is plain text.
            if let Some(s) = &m.summary {
                element(&mut o, "description", &html_escape(s));
            }
            o.push_str("<guid isPermaLink=\"false\">");
            xml_escape(&mut o, &self.item_id(it));
            o.push_str("</guid>\n");
            element(&mut o, "pubDate", &rfc822(m.published_at));
            if let Some(a) = &m.author {
                element(&mut o, "dc:creator", a);
            }
            if let Some(c) = &m.category {
                element(&mut o, "category", c);
            }
            o.push_str("</item>\n");
        }
        o.push_str("</channel>\n</rss>\n");
        o
    }

    fn atom(&self) -> String {
        let mut o = String::with_capacity(1024 + 512 * self.items.len());
        o.push_str(concat!(
            "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n",
            "<feed xmlns=\"http://www.w3.org/2005/Atom\">\n"
        ));
        element(&mut o, "id", &self.self_url);
        text_element(&mut o, "title", &self.title);
        text_element(&mut o, "subtitle", &self.description);
        element(&mut o, "updated", &rfc3339(self.updated));
        link(&mut o, "self", Some("application/atom+xml"), &self.self_url);
        link(
            &mut o,
            "alternate",
            Some("text/html"),
            &format!("{}/", self.base),
        );
        o.push_str("<author><name>hotrank</name></author>\n<generator>hotrank</generator>\n");
        for it in self.items {
            let m = &it.meta;
            o.push_str("<entry>\n");
            element(&mut o, "id", &self.item_id(it));
            text_element(&mut o, "title", &item_title(it));
            match &m.url {
                Some(url) => link(&mut o, "alternate", None, url),
                // An entry without an alternate link must carry content.
                None => text_element(
                    &mut o,
                    "content",
                    m.summary.as_deref().unwrap_or(&item_title(it)),
                ),
            }
            element(&mut o, "published", &rfc3339(m.published_at));
            element(&mut o, "updated", &rfc3339(m.published_at));
            if let Some(s) = &m.summary {
                text_element(&mut o, "summary", s);
            }
            if let Some(a) = &m.author {
                o.push_str("<author>");
                element(&mut o, "name", a);
                o.push_str("</author>\n");
            }
            if let Some(c) = &m.category {
                o.push_str("<category term=\"");
                xml_escape(&mut o, c);
                o.push_str("\"/>\n");
            }
            o.push_str("</entry>\n");
        }
        o.push_str("</feed>\n");
        o
    }

    fn json(&self) -> String {
        let items: Vec<Value> = self
            .items
            .iter()
            .map(|it| {
                let m = &it.meta;
                let title = item_title(it);
                let mut v = json!({
                    "id": self.item_id(it),
                    "title": title,
                    // An item needs content_text or content_html.
                    "content_text": m.summary.as_deref().unwrap_or(&title),
                    "date_published": rfc3339(m.published_at),
                    "_hotrank": {"rank": it.rank, "articleId": it.id.as_str()},
                });
                if let Some(url) = &m.url {
                    v["url"] = json!(url);
                }
                if let Some(s) = &m.summary {
                    v["summary"] = json!(s);
                }
                if let Some(a) = &m.author {
                    v["authors"] = json!([{ "name": a }]);
                }
                if let Some(c) = &m.category {
                    v["tags"] = json!([c]);
                }
                v
            })
            .collect();
        let feed = json!({
            "version": "https://jsonfeed.org/version/1.1",
            "title": self.title,
            "home_page_url": format!("{}/", self.base),
            "feed_url": self.self_url,
            "description": self.description,
            "items": items,
        });
        let mut s = serde_json::to_string_pretty(&feed).expect("a JSON value serializes");
        s.push('\n');
        s
    }
}

/// `feeds.public_url`, else `http://` and the request's `Host` (when it is
/// a plausible host and port), else the address this server listens on.
fn public_base(state: &AppState, headers: &HeaderMap) -> String {
    let configured = &state.config.feeds.public_url;
    if !configured.is_empty() {
        return configured.clone();
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| {
            !h.is_empty()
                && h.len() <= 255
                && h.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-.:[]_".contains(&b))
        })
        .map_or_else(|| state.config.listen.to_string(), str::to_string);
    format!("http://{host}")
}

fn item_title(it: &RankedItem) -> String {
    it.meta
        .title
        .clone()
        .unwrap_or_else(|| format!("Article {}", it.id.as_str()))
}

/// `<name>text</name>` and a line break, the text escaped.
fn element(o: &mut String, name: &str, text: &str) {
    let _ = write!(o, "<{name}>");
    xml_escape(o, text);
    let _ = writeln!(o, "</{name}>");
}

/// An Atom text construct of type `text`: plain text, never markup.
fn text_element(o: &mut String, name: &str, text: &str) {
    let _ = write!(o, "<{name} type=\"text\">");
    xml_escape(o, text);
    let _ = writeln!(o, "</{name}>");
}

fn link(o: &mut String, rel: &str, media: Option<&str>, href: &str) {
    let _ = write!(o, "<link rel=\"{rel}\"");
    if let Some(t) = media {
        let _ = write!(o, " type=\"{t}\"");
    }
    o.push_str(" href=\"");
    xml_escape(o, href);
    o.push_str("\"/>\n");
}

/// Appends `s` as XML character data or an attribute value: the five
/// markup characters as entities, and the characters XML 1.0 does not
/// allow in a document (C0 controls but tab, line feed and carriage
/// return; U+FFFE, U+FFFF) left out, since no escape can carry them.
fn xml_escape(o: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            '\t' | '\n' | '\r' => o.push(c),
            c if c < ' ' || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => o.push(c),
        }
    }
}

/// Plain text as HTML (for RSS's `description`): the markup characters as
/// entities; the XML escaping comes on top.
pub(super) fn html_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// The civil date and time (UTC) of a Unix time.
fn civil(ts: Timestamp) -> (i64, u32, u32, i64, i64, i64) {
    let day = crate::time::day_of(ts);
    let (y, m, d) = crate::time::civil_from_days(day);
    let secs = ts.rem_euclid(crate::time::DAY);
    (y, m, d, secs / 3600, secs / 60 % 60, secs % 60)
}

/// RFC 3339 in UTC (Atom, JSON Feed): `2025-11-21T21:20:00Z`.
fn rfc3339(ts: Timestamp) -> String {
    let (y, mo, d, h, mi, s) = civil(ts);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// RFC 822 as RSS 2.0 writes it, four-digit year: `Fri, 21 Nov 2025 21:20:00 +0000`.
fn rfc822(ts: Timestamp) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (y, mo, d, h, mi, s) = civil(ts);
    // 1970-01-01 was a Thursday.
    let weekday = DAYS[crate::time::day_of(ts).rem_euclid(7) as usize];
    let month = MONTHS[mo as usize - 1];
    format!("{weekday}, {d:02} {month} {y:04} {h:02}:{mi:02}:{s:02} +0000")
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn dates() {
        // 2025-11-21 21:20:00 UTC, a Friday.
        assert_eq!(rfc3339(1_763_760_000), "2025-11-21T21:20:00Z");
        assert_eq!(rfc822(1_763_760_000), "Fri, 21 Nov 2025 21:20:00 +0000");
        assert_eq!(rfc822(0), "Thu, 01 Jan 1970 00:00:00 +0000");
        assert_eq!(rfc3339(-1), "1969-12-31T23:59:59Z");
        assert_eq!(rfc822(951_782_400), "Tue, 29 Feb 2000 00:00:00 +0000");
    }

    #[test]
    fn escaping() {
        let mut o = String::new();
        xml_escape(&mut o, "a<b>&\"c'\u{1}\td\u{FFFF}é");
        assert_eq!(o, "a&lt;b&gt;&amp;&quot;c&apos;\td\u{e9}");
        assert_eq!(html_escape("<b>&"), "&lt;b&gt;&amp;");
    }

    #[test]
    fn revalidation() {
        let mut h = HeaderMap::new();
        let tag = etag_of(b"body");
        assert!(!if_none_match(&h, &tag));
        h.insert(
            header::IF_NONE_MATCH,
            HeaderValue::from_str(&format!("\"x\", W/{tag}")).unwrap(),
        );
        assert!(if_none_match(&h, &tag));
        assert!(!if_none_match(&h, &etag_of(b"other")));
    }
}
