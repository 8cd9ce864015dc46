//! Request-level guards that every route shares: the size of the request
//! head, and a panic in a handler. Both answer with the contract's JSON
//! error, so no failure leaves a client with an empty reply.

use std::any::Any;

use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};

use super::ApiError;
use crate::config::HttpConfig;

/// Refuses a request target longer than `http.max_uri_bytes` (414) and a
/// header section over `http.max_header_bytes` or `http.max_headers` (431).
/// The HTTP parser's own buffer is larger ([`crate::config::HttpConfig::parser_buffer_bytes`]),
/// so these answers, not the parser's bare ones, are what clients see.
///
/// The accept loop ([`crate::server`]) calls this before routing: a plain
/// call there costs nothing, where a middleware layer cost ~10 % of a
/// single view (it clones the inner service and boxes a future per request).
pub fn head_refusal(h: &HttpConfig, uri: &Uri, headers: &HeaderMap) -> Option<Response> {
    let target = uri.path_and_query().map_or(0, |p| p.as_str().len());
    if target > h.max_uri_bytes {
        return Some(
            ApiError::UriTooLong(format!(
                "the request target is {target} bytes; at most {} (http.max_uri_bytes)",
                h.max_uri_bytes
            ))
            .into_response(),
        );
    }
    let bytes: usize = headers
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum();
    if headers.len() > h.max_headers || bytes > h.max_header_bytes {
        return Some(ApiError::HeadersTooLarge(format!(
            "{} header lines, {bytes} bytes; at most {} lines (http.max_headers) and {} bytes (http.max_header_bytes)",
            headers.len(),
            h.max_headers,
            h.max_header_bytes
        ))
        .into_response());
    }
    None
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
