//! What browsers load: the page tracker (`/tracker.js`), the dashboard
//! (`/`, `/dashboard.js`, `/dashboard.css`), all embedded in the binary and
//! served with an `ETag`; CORS for the ingest endpoints, so that pages
//! on the configured site origins may post events; and the open CORS of
//! public reads ([`PublicRead`]).

use std::hash::Hasher;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::AppState;
use super::around::Hooks;
use crate::config::Config;
use crate::log_limit::LogLimit;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(dashboard))
        .route("/dashboard.js", get(dashboard_js))
        .route("/dashboard.css", get(dashboard_css))
        .route("/tracker.js", get(tracker))
}

/// An embedded file with its content type, cache lifetime and `ETag`.
pub(super) struct Asset {
    body: &'static str,
    content_type: &'static str,
    max_age: u32,
    etag: OnceLock<String>,
}

impl Asset {
    pub(super) const fn new(body: &'static str, content_type: &'static str, max_age: u32) -> Self {
        Asset {
            body,
            content_type,
            max_age,
            etag: OnceLock::new(),
        }
    }

    fn etag(&self) -> &str {
        self.etag.get_or_init(|| {
            // A content hash: the tag changes when the file does.
            let mut h = std::hash::DefaultHasher::new();
            h.write(self.body.as_bytes());
            format!("\"{:016x}-{:x}\"", h.finish(), self.body.len())
        })
    }

    pub(super) fn serve(&self, headers: &HeaderMap) -> Response {
        let etag = self.etag();
        let cache = format!("public, max-age={}", self.max_age);
        let matches = headers
            .get_all(header::IF_NONE_MATCH)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|t| t.trim().trim_start_matches("W/"))
            .any(|t| t == etag || t == "*");
        let common = [
            (header::ETAG, etag.to_string()),
            (header::CACHE_CONTROL, cache),
        ];
        if matches {
            return (StatusCode::NOT_MODIFIED, common).into_response();
        }
        (
            common,
            [
                (header::CONTENT_TYPE, self.content_type),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            self.body,
        )
            .into_response()
    }
}

static TRACKER: Asset = Asset::new(
    include_str!("web/tracker.js"),
    "text/javascript; charset=utf-8",
    3600,
);
static DASHBOARD_HTML: Asset = Asset::new(
    include_str!("web/dashboard.html"),
    "text/html; charset=utf-8",
    60,
);
static DASHBOARD_JS: Asset = Asset::new(
    include_str!("web/dashboard.js"),
    "text/javascript; charset=utf-8",
    60,
);
static DASHBOARD_CSS: Asset = Asset::new(
    include_str!("web/dashboard.css"),
    "text/css; charset=utf-8",
    60,
);

/// The dashboard loads nothing but its own files and this server's API.
const DASHBOARD_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

async fn dashboard(headers: HeaderMap) -> Response {
    html_page(&DASHBOARD_HTML, &headers)
}

/// A page of the dashboard (`/`, `/review`): its own files and this
/// server's API only, never in a frame.
pub(super) fn html_page(page: &Asset, headers: &HeaderMap) -> Response {
    let mut resp = page.serve(headers);
    resp.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(DASHBOARD_CSP),
    );
    resp.headers_mut()
        .insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    resp
}

async fn dashboard_js(headers: HeaderMap) -> Response {
    DASHBOARD_JS.serve(&headers)
}

async fn dashboard_css(headers: HeaderMap) -> Response {
    DASHBOARD_CSS.serve(&headers)
}

async fn tracker(headers: HeaderMap) -> Response {
    let mut resp = TRACKER.serve(&headers);
    // Sites load the tracker from another origin; let any page do so.
    resp.headers_mut().insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    resp
}

/// The request's `Origin` if `cors_origins` allows it.
fn allowed_origin(config: &Config, headers: &HeaderMap) -> Option<HeaderValue> {
    let origin = headers.get(header::ORIGIN)?;
    let text = origin.to_str().ok()?;
    config
        .cors_origins
        .iter()
        .any(|o| o == "*" || o.eq_ignore_ascii_case(text))
        .then(|| origin.clone())
}

/// Counts a request from an origin `cors_origins` does not list, and
/// names the origin in a warning (at most [`REFUSED_LINES`] a minute:
/// the counter has them all).
fn refused(origin: &HeaderValue, path: &str) {
    static LOG: LogLimit = LogLimit::new(Duration::from_secs(60), REFUSED_LINES);
    metrics::counter!("hotrank_cors_refused_total").increment(1);
    if let Some(suppressed) = LOG.allow() {
        // The header is the client's: shown escaped and cut short.
        let shown: String = String::from_utf8_lossy(origin.as_bytes())
            .chars()
            .take(200)
            .collect();
        tracing::warn!(
            origin = ?shown,
            path,
            suppressed,
            "refused a CORS origin missing from cors_origins: its pages cannot read the answers \
             (add it to cors_origins if it is one of your sites)"
        );
    }
}

/// A `text/plain` POST (`navigator.sendBeacon`: the widget on any site,
/// the tracker's dwell reports): applied whatever its origin, and its
/// sender never reads the answer, so a missing CORS header is no refusal.
fn is_beacon(req: &Request) -> bool {
    req.method() == Method::POST
        && req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.trim_start()
                    .to_ascii_lowercase()
                    .starts_with("text/plain")
            })
}

/// The most refused-origin warnings a minute.
const REFUSED_LINES: u32 = 5;

/// How long a browser may cache a preflight answer.
const PREFLIGHT_MAX_AGE: &str = "86400";

/// `OPTIONS` on an ingest endpoint: a CORS preflight. An allowed origin
/// gets the methods and headers it may use (the origin itself is added by
/// [`cors`]); any other request gets `204` and no CORS headers, which the
/// browser reads as a refusal.
pub async fn preflight(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let mut resp = StatusCode::NO_CONTENT.into_response();
    let h = resp.headers_mut();
    h.insert(header::ALLOW, HeaderValue::from_static("POST, OPTIONS"));
    if allowed_origin(&state.config, &headers).is_some() {
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("POST"),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("Content-Type"),
        );
        h.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static(PREFLIGHT_MAX_AGE),
        );
    }
    resp
}

/// Adds `Access-Control-Allow-Origin` (the request's origin, when allowed)
/// and `Vary: Origin` to every answer of the routes it wraps (an
/// [`Around`](super::around::Around) layer).
#[derive(Clone)]
pub struct Cors(pub Arc<Config>);

impl Hooks for Cors {
    /// The allowed origin, and whether the request is a preflight.
    type Seen = (Option<HeaderValue>, bool);

    fn before(&self, req: &Request) -> Self::Seen {
        let allowed = allowed_origin(&self.0, req.headers());
        if allowed.is_none()
            && !is_beacon(req)
            && let Some(origin) = req.headers().get(header::ORIGIN)
        {
            refused(origin, req.uri().path());
        }
        (allowed, req.method() == Method::OPTIONS)
    }

    fn after<B>((allowed, is_options): Self::Seen, resp: &mut axum::http::Response<B>) {
        let h = resp.headers_mut();
        h.append(header::VARY, HeaderValue::from_static("Origin"));
        if let Some(origin) = allowed {
            h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
            if !is_options {
                h.insert(
                    header::ACCESS_CONTROL_EXPOSE_HEADERS,
                    HeaderValue::from_static("Retry-After"),
                );
            }
        }
    }
}

/// `Access-Control-Allow-Origin: *` on every answer of the routes it
/// wraps: public rankings, feeds and streams, which any page may read
/// from the browser. Without credentials: a request carrying a token is
/// answered as any other, but a browser does not send one cross-origin
/// unless the page asks (and then it preflights, which these routes do
/// not answer).
#[derive(Clone)]
pub struct PublicRead;

impl Hooks for PublicRead {
    type Seen = ();

    fn before(&self, _: &Request) {}

    fn after<B>((): (), resp: &mut axum::http::Response<B>) {
        let h = resp.headers_mut();
        h.insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        );
        h.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("Retry-After, ETag"),
        );
    }
}
