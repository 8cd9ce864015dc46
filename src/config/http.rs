//! The HTTP layer's settings (`[http]`, `[limits]`) and the client
//! addresses and origins it trusts.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

/// Connection-level limits of the HTTP server (`[http]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// A connection must deliver a complete request head within this many
    /// seconds of connecting or of its previous answer, else it is closed:
    /// slowly dribbled headers and idle keep-alive connections alike.
    pub header_timeout_secs: u64,
    /// A request body must arrive in full within this many seconds
    /// (408 `request_timeout`).
    pub body_timeout_secs: u64,
    /// Most open connections. At the cap, a new connection takes the place
    /// of the one idle longest; it is refused only when every one has a
    /// request in flight. Never more than the descriptor limit (`ulimit
    /// -n`) leaves after `reserved_fds`.
    pub max_connections: usize,
    /// Descriptors kept free of connections for everything else: the
    /// store's files and connections, the archive's pool, the listener.
    pub reserved_fds: usize,
    /// Longest request target (path and query); longer: 414 `uri_too_long`.
    pub max_uri_bytes: usize,
    /// Largest header section (names, values, 4 bytes per line); larger, or
    /// more than `max_headers` lines: 431 `headers_too_large`.
    pub max_header_bytes: usize,
    pub max_headers: usize,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            header_timeout_secs: 10,
            body_timeout_secs: 30,
            max_connections: 512,
            reserved_fds: 128,
            max_uri_bytes: 8192,
            max_header_bytes: 16384,
            max_headers: 64,
        }
    }
}

impl HttpConfig {
    /// hyper's own read buffer: room for the largest head we answer
    /// ourselves; a head beyond it is cut off by the parser.
    pub fn parser_buffer_bytes(&self) -> usize {
        (self.max_uri_bytes + self.max_header_bytes + 16 * 1024).max(8192)
    }

    /// hyper's own header-line limit, `None` for its built-in 100. Above
    /// `max_headers` so that we, not the parser, answer the usual excess.
    /// hyper's built-in limit lives on the stack; any other allocates and
    /// fills a table of that size for every request it parses (about 5 %
    /// of a single view's cost at 200), so it is set only when
    /// `max_headers` is 100 or more.
    pub fn parser_max_headers(&self) -> Option<usize> {
        const HYPER_DEFAULT: usize = 100;
        (self.max_headers >= HYPER_DEFAULT).then_some(2 * self.max_headers)
    }
}

/// Per-client budgets of the HTTP layer (`[limits]`): each is "at most N in
/// any 60 s", bursts included; 0 turns one off. Over budget: 429 with
/// `Retry-After`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// IPv4 clients share a budget per block of this prefix length (32: per address).
    pub ipv4_prefix: u8,
    /// IPv6 clients share a budget per block of this prefix length (64: one
    /// customer's network).
    pub ipv6_prefix: u8,
    /// Query and admin requests per client IP block (requests carrying the
    /// admin or ingest token are not counted).
    pub queries_per_minute_per_ip: u32,
    /// `POST /api/articles` per client IP block (untrusted requests only).
    pub posts_per_minute_per_ip: u32,
    /// `POST /api/articles` per poster.
    pub posts_per_minute_per_user: u32,
    /// Votes per client IP block (untrusted requests only).
    pub votes_per_minute_per_ip: u32,
    /// Votes per `userId`.
    pub votes_per_minute_per_user: u32,
    /// Widget `impression` and `click` events per client IP block
    /// (untrusted requests only); past it they are `rate_limited`.
    pub widget_events_per_minute_per_ip: u32,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            ipv4_prefix: 32,
            ipv6_prefix: 64,
            queries_per_minute_per_ip: 600,
            posts_per_minute_per_ip: 10,
            posts_per_minute_per_user: 5,
            votes_per_minute_per_ip: 60,
            votes_per_minute_per_user: 30,
            widget_events_per_minute_per_ip: 300,
        }
    }
}

/// `*`, or `scheme://host[:port]` as browsers send it in `Origin`.
pub(super) fn valid_origin(o: &str) -> bool {
    if o == "*" {
        return true;
    }
    let Some((scheme, rest)) = o.split_once("://") else {
        return false;
    };
    let scheme_ok = !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    let rest_ok = !rest.is_empty()
        && rest
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']' | '_'));
    scheme_ok && rest_ok
}

/// Parses `1.2.3.4`, `1.2.3.0/24`, `::1` or `fd00::/8` into (network, prefix).
pub fn parse_cidr(s: &str) -> Option<(IpAddr, u8)> {
    let (addr, len) = match s.split_once('/') {
        Some((a, l)) => (a.parse::<IpAddr>().ok()?, Some(l.parse::<u8>().ok()?)),
        None => (s.parse::<IpAddr>().ok()?, None),
    };
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = len.unwrap_or(max);
    (len <= max).then_some((addr, len))
}

/// Whether `ip` lies in the block `(net, len)`.
pub fn cidr_contains((net, len): (IpAddr, u8), ip: IpAddr) -> bool {
    let ip = match (net, ip) {
        (IpAddr::V4(_), IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => return false,
        },
        _ => ip,
    };
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(a)) => {
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            (u32::from(n) & mask) == (u32::from(a) & mask)
        }
        (IpAddr::V6(n), IpAddr::V6(a)) => {
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len)
            };
            (u128::from(n) & mask) == (u128::from(a) & mask)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs() {
        let net = parse_cidr("10.1.0.0/16").unwrap();
        assert!(cidr_contains(net, "10.1.2.3".parse().unwrap()));
        assert!(!cidr_contains(net, "10.2.0.1".parse().unwrap()));
        assert!(cidr_contains(net, "::ffff:10.1.0.9".parse().unwrap()));
        let one = parse_cidr("127.0.0.1").unwrap();
        assert!(cidr_contains(one, "127.0.0.1".parse().unwrap()));
        assert!(!cidr_contains(one, "127.0.0.2".parse().unwrap()));
        assert!(cidr_contains(
            parse_cidr("::1").unwrap(),
            "::1".parse().unwrap()
        ));
    }
}
