//! Extractors that fail with the contract's JSON errors instead of axum's
//! plain-text rejections.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::task::Poll;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};

use super::{ApiError, AppState};
use crate::config::cidr_contains;
use crate::model::ArticleId;

/// A request body that must be JSON and no larger than `max_body_bytes`.
pub struct JsonBody(pub Bytes);

impl FromRequest<AppState> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let media = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or("").trim())
            .unwrap_or("");
        let is_json = media.eq_ignore_ascii_case("application/json")
            || (starts_with_ignore_case(media, "application/")
                && ends_with_ignore_case(media, "+json"));
        // Beacons from `navigator.sendBeacon` cannot set a JSON content type
        // without a CORS preflight; they are sent as text/plain.
        let is_beacon_text = starts_with_ignore_case(media, "text/plain");
        if !is_json && !is_beacon_text {
            return Err(ApiError::UnsupportedMediaType(
                "send the body as Content-Type: application/json".into(),
            ));
        }
        let limit = state.config.max_body_bytes;
        if let Some(len) = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            && len > limit as u64
        {
            return Err(ApiError::PayloadTooLarge(limit));
        }
        let deadline = std::time::Duration::from_secs(state.config.http.body_timeout_secs);
        let mut read = std::pin::pin!(axum::body::to_bytes(req.into_body(), limit));
        // A small body has usually arrived with its head: read it without
        // arming a timer, which costs more than the read itself.
        let first = std::future::poll_fn(|cx| match read.as_mut().poll(cx) {
            Poll::Ready(r) => Poll::Ready(Some(r)),
            Poll::Pending => Poll::Ready(None),
        })
        .await;
        let body = match first {
            Some(r) => r,
            None => tokio::time::timeout(deadline, read).await.map_err(|_| {
                ApiError::RequestTimeout(format!(
                    "the body did not arrive within {} s (http.body_timeout_secs)",
                    deadline.as_secs()
                ))
            })?,
        }
        .map_err(|_| ApiError::PayloadTooLarge(limit))?;
        Ok(JsonBody(body))
    }
}

fn starts_with_ignore_case(s: &str, prefix: &str) -> bool {
    s.len() >= prefix.len() && s.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

fn ends_with_ignore_case(s: &str, suffix: &str) -> bool {
    s.len() >= suffix.len()
        && s.as_bytes()[s.len() - suffix.len()..].eq_ignore_ascii_case(suffix.as_bytes())
}

/// Deserializes a JSON object into `T`. serde would also fill a struct
/// from a JSON array, field by field; the contract's bodies are objects.
pub fn object<'a, T: serde::Deserialize<'a>>(json: &'a [u8]) -> Result<T, serde_json::Error> {
    expect_object(json)?;
    serde_json::from_slice(json)
}

/// [`object`] for text already known to be UTF-8 (a part of a parsed
/// body), which serde then does not check again string by string.
pub fn object_str<'a, T: serde::Deserialize<'a>>(json: &'a str) -> Result<T, serde_json::Error> {
    expect_object(json.as_bytes())?;
    serde_json::from_str(json)
}

fn expect_object(json: &[u8]) -> Result<(), serde_json::Error> {
    match json.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => Ok(()),
        _ => Err(serde::de::Error::custom("expected a JSON object")),
    }
}

/// Query parameters, each at most once, only the names a route knows.
pub struct Params(pub HashMap<String, String>);

impl Params {
    pub fn parse(query: Option<&str>, known: &[&str]) -> Result<Self, ApiError> {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query.unwrap_or(""))
            .map_err(|e| {
                ApiError::bad("invalid_parameter", format!("malformed query string: {e}"))
            })?;
        let mut map = HashMap::new();
        for (k, v) in pairs {
            if !known.contains(&k.as_str()) {
                return Err(ApiError::bad(
                    "invalid_parameter",
                    format!(
                        "unknown parameter {k:?}; this endpoint takes {}",
                        known.join(", ")
                    ),
                ));
            }
            if map.insert(k.clone(), v).is_some() {
                return Err(ApiError::bad(
                    "invalid_parameter",
                    format!("parameter {k:?} given twice"),
                ));
            }
        }
        Ok(Params(map))
    }

    pub fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(String::as_str)
    }

    /// An integer in `lo..=hi`, if present.
    pub fn int(&self, k: &str, lo: usize, hi: usize) -> Result<Option<usize>, ApiError> {
        let Some(v) = self.get(k) else {
            return Ok(None);
        };
        match v.parse::<usize>() {
            Ok(n) if (lo..=hi).contains(&n) => Ok(Some(n)),
            _ => Err(ApiError::bad(
                "invalid_parameter",
                format!("{k} must be an integer in {lo}..={hi}, got {v:?}"),
            )),
        }
    }

    pub fn bool(&self, k: &str) -> Result<bool, ApiError> {
        match self.get(k) {
            None | Some("false") | Some("0") => Ok(false),
            Some("true") | Some("1") | Some("") => Ok(true),
            Some(v) => Err(ApiError::bad(
                "invalid_parameter",
                format!("{k} must be true or false, got {v:?}"),
            )),
        }
    }

    /// A label filter (category, kind, group): 1–128 printable characters.
    pub fn label(&self, k: &str) -> Result<Option<String>, ApiError> {
        match self.get(k) {
            None => Ok(None),
            Some(v) if valid_label(v) => Ok(Some(v.to_string())),
            Some(v) => Err(ApiError::bad(
                "invalid_parameter",
                format!("{k} must be 1-128 printable characters, got {v:?}"),
            )),
        }
    }
}

pub fn valid_label(v: &str) -> bool {
    !v.is_empty() && v.chars().count() <= 128 && !v.chars().any(char::is_control)
}

/// The `{id}` path segment, validated as an article id.
pub struct ArticlePath(pub ArticleId);

impl FromRequestParts<AppState> for ArticlePath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let axum::extract::Path(raw) =
            axum::extract::Path::<String>::from_request_parts(parts, state)
                .await
                .map_err(|e| ApiError::bad("invalid_article_id", e.to_string()))?;
        ArticleId::parse(&raw)
            .map(ArticlePath)
            .map_err(|e| ApiError::bad("invalid_article_id", e.to_string()))
    }
}

/// The client's address: the peer, or the first untrusted address of
/// `X-Forwarded-For` when the peer is a trusted proxy ([`client_ip`]).
pub struct ClientIp(pub IpAddr);

impl FromRequestParts<AppState> for ClientIp {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        Ok(ClientIp(request_client(
            &parts.extensions,
            &parts.headers,
            &state.trusted_proxies,
        )))
    }
}

/// The client's address of a request (its peer from `ConnectInfo`, through
/// [`client_ip`]): what [`ClientIp`] extracts, and what the access log
/// shows.
pub fn request_client(
    extensions: &axum::http::Extensions,
    headers: &HeaderMap,
    trusted: &[(IpAddr, u8)],
) -> IpAddr {
    let peer = extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip())
        .unwrap_or(IpAddr::from([127, 0, 0, 1]));
    client_ip(peer, headers, trusted)
}

/// Walks `X-Forwarded-For` right to left from a trusted peer: the
/// rightmost address a trusted proxy did not add itself is the client.
/// Entries may carry a port, as some proxies write them (`1.2.3.4:5678`,
/// `[2001:db8::1]:443`). The walk stops at an entry that is not an
/// address: what lies to its left was not written by a proxy we trust, so
/// the client is the last address read (a trusted one).
fn client_ip(peer: IpAddr, headers: &HeaderMap, trusted: &[(IpAddr, u8)]) -> IpAddr {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|&net| cidr_contains(net, ip));
    if !is_trusted(peer) {
        return peer;
    }
    let mut client = peer;
    let chain: Vec<Option<IpAddr>> = headers
        .get_all("x-forwarded-for")
        .iter()
        .flat_map(|v| match v.to_str() {
            Ok(v) => v.split(',').map(forwarded_addr).collect(),
            Err(_) => vec![None],
        })
        .collect();
    for entry in chain.into_iter().rev() {
        let Some(ip) = entry else { break };
        client = ip;
        if !is_trusted(ip) {
            break;
        }
    }
    client
}

/// One `X-Forwarded-For` entry: an address, optionally with a port
/// (`ip:port`, `[v6]:port`, `[v6]`).
fn forwarded_addr(entry: &str) -> Option<IpAddr> {
    let entry = entry.trim();
    if let Ok(ip) = entry.parse() {
        return Some(ip);
    }
    let is_port = |p: &str| !p.is_empty() && p.len() <= 5 && p.parse::<u16>().is_ok();
    if let Some(rest) = entry.strip_prefix('[') {
        let (ip, after) = rest.split_once(']')?;
        if !after.is_empty() && !after.strip_prefix(':').is_some_and(is_port) {
            return None;
        }
        return ip.parse::<Ipv6Addr>().ok().map(IpAddr::V6);
    }
    let (ip, port) = entry.split_once(':')?;
    is_port(port).then_some(())?;
    ip.parse::<Ipv4Addr>().ok().map(IpAddr::V4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_cidr;

    #[test]
    fn forwarded_for_only_from_trusted_proxies() {
        let trusted = [parse_cidr("10.0.0.0/8").unwrap()];
        let mut h = HeaderMap::new();
        h.insert(
            "x-forwarded-for",
            "1.1.1.1, 2.2.2.2, 10.0.0.5".parse().unwrap(),
        );
        let proxy: IpAddr = "10.0.0.1".parse().unwrap();
        assert_eq!(
            client_ip(proxy, &h, &trusted),
            "2.2.2.2".parse::<IpAddr>().unwrap()
        );
        let stranger: IpAddr = "8.8.8.8".parse().unwrap();
        assert_eq!(client_ip(stranger, &h, &trusted), stranger);
        assert_eq!(client_ip(proxy, &HeaderMap::new(), &trusted), proxy);
        // Ports, as some proxies write them, are stripped.
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        for (header, client) in [
            ("9.9.9.9, 1.1.1.1:5678", "1.1.1.1"),
            ("9.9.9.9, [2001:db8::7]:443, 10.0.0.5:80", "2001:db8::7"),
            ("[2001:db8::8]", "2001:db8::8"),
            // An entry that is no address ends the walk: the client is the
            // last address a trusted proxy wrote.
            ("9.9.9.9, garbage, 10.0.0.5", "10.0.0.5"),
            ("9.9.9.9, 1.1.1.1:99999", "10.0.0.1"),
            ("9.9.9.9, [::1]x", "10.0.0.1"),
        ] {
            let mut h = HeaderMap::new();
            h.insert("x-forwarded-for", header.parse().unwrap());
            assert_eq!(client_ip(proxy, &h, &trusted), ip(client), "{header}");
        }
    }

    #[test]
    fn params() {
        assert!(Params::parse(Some("a=1&a=2"), &["a"]).is_err());
        assert!(Params::parse(Some("b=1"), &["a"]).is_err());
        let p = Params::parse(Some("a=5"), &["a"]).unwrap();
        assert_eq!(p.int("a", 1, 10).unwrap(), Some(5));
        assert!(p.int("a", 6, 10).is_err());
    }
}
