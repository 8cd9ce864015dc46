//! The embeddable list: `GET /widget.js` (a script that renders a ranking
//! where its tag is, in a shadow root), `GET /widget.css` (its styles,
//! for browsers without constructed stylesheets, and for `/embed`) and
//! `GET /embed?<ranking parameters>` (the list as a small page for an
//! iframe, rendered here: no script at all, its own strict CSP).
//!
//! Every answer has an `ETag` and `Cache-Control` ([`super::feeds::cached`]);
//! `If-None-Match` gets `304`.

use std::fmt::Write as _;
use std::sync::OnceLock;

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderName, header};
use axum::response::Response;
use axum::routing::get;

use super::budget::QueryBudget;
use super::extract::Params;
use super::feeds::{cached as feeds_cached, etag_of, html_escape};
use super::{ApiError, AppState, rankings};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/widget.js", get(widget_js))
        .route("/widget.css", get(widget_css))
        .route("/embed", get(embed))
}

const CSS: &str = include_str!("web/widget.css");
const JS_TEMPLATE: &str = include_str!("web/widget.js");

/// How long a browser or CDN may keep `widget.js` and `widget.css`
/// without asking (then the `ETag` makes asking cheap).
const ASSET_MAX_AGE: u32 = 3600;

/// `/embed`'s parameters: a ranking's (no paging beyond `limit`), and the
/// heading.
const EMBED_PARAMS: &[&str] = &[
    "range", "model", "limit", "category", "kind", "group", "title", "window", "baseline", "min",
    "decay", "halfLife", "scale",
];

/// The embed page runs no script, loads nothing but its stylesheet, and
/// may be framed by any site.
const EMBED_CSP: &str = "default-src 'none'; style-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors *";

/// `widget.js` with the stylesheet compiled in (one request, and a host
/// page's `style-src` need not allow anything).
fn widget_body() -> &'static (String, String) {
    static BODY: OnceLock<(String, String)> = OnceLock::new();
    BODY.get_or_init(|| {
        let css = serde_json::to_string(CSS).expect("a string serializes");
        let js = JS_TEMPLATE.replacen("__CSS__", &css, 1);
        let tag = etag_of(js.as_bytes());
        (js, tag)
    })
}

fn css_etag() -> &'static str {
    static TAG: OnceLock<String> = OnceLock::new();
    TAG.get_or_init(|| etag_of(CSS.as_bytes()))
}

/// [`feeds_cached`], with `extra` headers.
fn cached(
    headers: &HeaderMap,
    etag: &str,
    max_age: u32,
    content_type: &'static str,
    extra: &[(&'static str, &'static str)],
    body: String,
) -> Response {
    let mut resp = feeds_cached(headers, etag, max_age, content_type, body);
    for (name, value) in extra {
        resp.headers_mut().insert(
            HeaderName::from_static(name),
            header::HeaderValue::from_static(value),
        );
    }
    resp
}

/// Loaded by other sites' pages: any origin may, including pages that
/// require `Cross-Origin-Resource-Policy` of what they embed.
const SHARED: &[(&str, &str)] = &[
    ("access-control-allow-origin", "*"),
    ("cross-origin-resource-policy", "cross-origin"),
];

async fn widget_js(headers: HeaderMap) -> Response {
    let (js, tag) = widget_body();
    cached(
        &headers,
        tag,
        ASSET_MAX_AGE,
        "text/javascript; charset=utf-8",
        SHARED,
        js.clone(),
    )
}

async fn widget_css(headers: HeaderMap) -> Response {
    cached(
        &headers,
        css_etag(),
        ASSET_MAX_AGE,
        "text/css; charset=utf-8",
        SHARED,
        CSS.to_string(),
    )
}

/// `GET /embed`: the ranking `GET /api/hot` gives for the same parameters
/// (`limit` 5 unless given), as a page of links.
async fn embed(
    _: QueryBudget,
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let p = Params::parse(raw.as_deref(), EMBED_PARAMS)?;
    let (mut q, _) = rankings::query_from(&p, rankings::Limits::of(&state.config))?;
    if p.get("limit").is_none() {
        q.limit = q.limit.min(DEFAULT_LIMIT);
    }
    let title = match p.get("title") {
        Some(t) if t.chars().count() > 100 => {
            return Err(ApiError::bad(
                "invalid_parameter",
                "title must be at most 100 characters",
            ));
        }
        Some(t) => t.to_string(),
        None => "Popular now".to_string(),
    };
    let page = rankings::hot(&state, &q).await?;
    let mut items = String::new();
    for it in &page.items {
        let text = it
            .meta
            .title
            .clone()
            .unwrap_or_else(|| format!("Article {}", it.id.as_str()));
        let text = html_escape(&text);
        match it.meta.url.as_deref().filter(|u| web_url(u)) {
            Some(url) => {
                let _ = writeln!(
                    items,
                    "<li><a href=\"{}\" target=\"_top\">{text}</a></li>",
                    html_escape(url)
                );
            }
            None => {
                let _ = writeln!(items, "<li><span>{text}</span></li>");
            }
        }
    }
    let list = if items.is_empty() {
        "<p>Nothing yet.</p>".to_string()
    } else {
        format!("<ol>\n{items}</ol>")
    };
    let title = html_escape(&title);
    let body = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title}</title>\n<link rel=\"stylesheet\" href=\"/widget.css\">\n\
         </head><body>\n<section class=\"hr\" aria-labelledby=\"hr-title\">\
         <h2 id=\"hr-title\">{title}</h2>\n{list}\n</section>\n</body></html>\n"
    );
    let tag = etag_of(body.as_bytes());
    Ok(cached(
        &headers,
        &tag,
        state.config.feeds.max_age_secs,
        "text/html; charset=utf-8",
        &[
            ("content-security-policy", EMBED_CSP),
            ("referrer-policy", "strict-origin-when-cross-origin"),
        ],
        body,
    ))
}

/// Items `/embed` shows without `limit`.
const DEFAULT_LIMIT: usize = 5;

/// Only `http:` and `https:` addresses become links (an article's `url`
/// is whatever its author gave).
fn web_url(u: &str) -> bool {
    let lower = u.get(..8).unwrap_or(u).to_ascii_lowercase();
    lower.starts_with("https://") || lower.starts_with("http://")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stylesheet_is_compiled_in_once() {
        let (js, tag) = widget_body();
        assert!(!js.contains("__CSS__"));
        assert!(js.contains("prefers-color-scheme"));
        assert_eq!(*tag, etag_of(js.as_bytes()));
        assert!(web_url("HTTPS://x.example/a") && web_url("http://x"));
        assert!(!web_url("javascript:alert(1)") && !web_url("data:text/html,x"));
    }
}
