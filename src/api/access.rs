//! The access log: one line per answered request, under the target
//! `hotrank::access`, with the method, the matched route (the router's
//! pattern, `/api/articles/{id}`, never the raw path), the status, the
//! time taken and the client's block (its address cut to a /24 or a /64,
//! as derived through `trusted_proxies`: never a whole address).
//!
//! Levels: a 5xx or an answer slower than a second at WARN, any other
//! 4xx at INFO, the rest at DEBUG (`RUST_LOG=info,hotrank::access=debug`
//! shows every request). At most [`LINES_PER_SEC`] lines a second are
//! written at each of WARN and below, so a storm of 401s cannot flood the
//! log: the rest are counted in `hotrank_access_log_dropped_total`, and
//! the next line written says how many it follows (`suppressed`).

use std::net::IpAddr;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use tracing::Level;

use crate::log_limit::LogLimit;

/// The log target of access lines.
pub const TARGET: &str = "hotrank::access";

/// The most access lines written per second (each for failures, WARN, and
/// for the rest).
pub const LINES_PER_SEC: u32 = 20;

/// The prefixes a client's address is cut to.
const V4_PREFIX: u8 = 24;
const V6_PREFIX: u8 = 64;

/// Slower than this, an answer is logged at WARN.
const SLOW: Duration = Duration::from_secs(1);

static FAILED: LogLimit = LogLimit::new(Duration::from_secs(1), LINES_PER_SEC);
static OTHERS: LogLimit = LogLimit::new(Duration::from_secs(1), LINES_PER_SEC);

/// Writes the access line of one answered request, if its level is on and
/// the limit allows; counts it as dropped if the limit does not.
pub fn log(route: &str, method: &Method, status: StatusCode, elapsed: Duration, client: IpAddr) {
    let level = level_of(route, status, elapsed);
    let (on, limit) = match level {
        Level::WARN => (tracing::enabled!(target: TARGET, Level::WARN), &FAILED),
        Level::INFO => (tracing::enabled!(target: TARGET, Level::INFO), &OTHERS),
        _ => (tracing::enabled!(target: TARGET, Level::DEBUG), &OTHERS),
    };
    if !on {
        return;
    }
    let Some(suppressed) = limit.allow() else {
        metrics::counter!("hotrank_access_log_dropped_total").increment(1);
        return;
    };
    let client = client_block(client);
    let status = status.as_u16();
    // Microseconds, shown in milliseconds.
    let duration_ms = elapsed.as_micros() as f64 / 1000.0;
    macro_rules! line {
        ($level:expr) => {
            tracing::event!(
                target: TARGET,
                $level,
                %method,
                route,
                status,
                duration_ms,
                %client,
                suppressed,
                "request"
            )
        };
    }
    match level {
        Level::WARN => line!(Level::WARN),
        Level::INFO => line!(Level::INFO),
        _ => line!(Level::DEBUG),
    }
}

/// A line's level: WARN for a failure or a slow answer, INFO for a
/// client error, DEBUG for the rest. `/readyz` answering 503 is a node
/// warming up or cut off from its store, which the probe is there to ask
/// and the store's own errors already report at WARN: INFO, so that an
/// orchestrator probing a warming node every second does not fill the
/// warnings.
fn level_of(route: &str, status: StatusCode, elapsed: Duration) -> Level {
    if route == "/readyz" && status == StatusCode::SERVICE_UNAVAILABLE && elapsed <= SLOW {
        Level::INFO
    } else if status.is_server_error() || elapsed > SLOW {
        Level::WARN
    } else if status.is_client_error() {
        Level::INFO
    } else {
        Level::DEBUG
    }
}

/// `192.0.2.0/24`, `2001:db8:1:2::/64`.
pub fn client_block(ip: IpAddr) -> String {
    let block = crate::gate::ip_block(ip, V4_PREFIX, V6_PREFIX);
    let prefix = if block.is_ipv4() {
        V4_PREFIX
    } else {
        V6_PREFIX
    };
    format!("{block}/{prefix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels() {
        let fast = Duration::from_millis(3);
        let unavailable = StatusCode::SERVICE_UNAVAILABLE;
        assert_eq!(level_of("/readyz", unavailable, fast), Level::INFO);
        assert_eq!(level_of("/readyz", unavailable, SLOW * 2), Level::WARN);
        assert_eq!(level_of("/api/hot", unavailable, fast), Level::WARN);
        assert_eq!(
            level_of("/api/hot", StatusCode::UNAUTHORIZED, fast),
            Level::INFO
        );
        assert_eq!(level_of("/api/hot", StatusCode::OK, fast), Level::DEBUG);
        assert_eq!(level_of("/api/hot", StatusCode::OK, SLOW * 2), Level::WARN);
    }

    #[test]
    fn client_blocks() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(client_block(ip("192.0.2.77")), "192.0.2.0/24");
        assert_eq!(
            client_block(ip("2001:db8:1:2:3:4:5:6")),
            "2001:db8:1:2::/64"
        );
    }
}
