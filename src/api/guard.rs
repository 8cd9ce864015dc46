//! Request-level guards that every route shares: the size of the request
//! head, and a panic in a handler. Both answer with the contract's JSON
//! error, so no failure leaves a client with an empty reply.

use std::any::Any;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{ApiError, AppState};

/// Refuses a request target longer than `http.max_uri_bytes` (414) and a
/// header section over `http.max_header_bytes` or `http.max_headers` (431).
/// The HTTP parser's own buffer is larger ([`crate::config::HttpConfig::parser_buffer_bytes`]),
/// so these answers, not the parser's bare ones, are what clients see.
pub async fn head_limits(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let h = &state.config.http;
    let target = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    if target > h.max_uri_bytes {
        return ApiError::UriTooLong(format!(
            "the request target is {target} bytes; at most {} (http.max_uri_bytes)",
            h.max_uri_bytes
        ))
        .into_response();
    }
    let headers = req.headers();
    let bytes: usize = headers
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum();
    if headers.len() > h.max_headers || bytes > h.max_header_bytes {
        return ApiError::HeadersTooLarge(format!(
            "{} header lines, {bytes} bytes; at most {} lines (http.max_headers) and {} bytes (http.max_header_bytes)",
            headers.len(),
            h.max_headers,
            h.max_header_bytes
        ))
        .into_response();
    }
    next.run(req).await
}

/// The answer to a request whose handler panicked (`tower_http`'s
/// `CatchPanicLayer`): the JSON 500, the panic logged and counted.
pub fn panic_response(panic: Box<dyn Any + Send + 'static>) -> Response {
    let what = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("(no message)");
    metrics::counter!("hotrank_http_panics_total").increment(1);
    ApiError::Internal(format!("a handler panicked: {what}")).into_response()
}
