//! Per-client budgets of the HTTP layer: queries and admin calls per IP
//! block, posts and votes per IP block and per user. Each is "at most N in
//! any 60 s" ([`SlidingLimiter`]); over budget the request is refused with
//! 429, `Retry-After` and the JSON error, and nothing else happens.
//!
//! A refused request records nothing, so a flood cannot grow these tables:
//! their keys are bounded by the admitted requests of the last minute, and
//! [`Budgets::sweep`] forgets the rest.

use std::net::IpAddr;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use parking_lot::Mutex;

use super::extract::ClientIp;
use super::{ApiError, AppState};
use crate::config::LimitsConfig;
use crate::gate::{Identity, SlidingLimiter, ip_block};

const WINDOW_MS: i64 = 60_000;

/// What a request spends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spend {
    Query,
    Post,
    Vote,
    /// One widget `impression` or `click` event.
    Widget,
}

impl Spend {
    const ALL: [Spend; 4] = [Spend::Query, Spend::Post, Spend::Vote, Spend::Widget];

    fn as_str(self) -> &'static str {
        match self {
            Spend::Query => "query",
            Spend::Post => "post",
            Spend::Vote => "vote",
            Spend::Widget => "widget",
        }
    }
}

pub struct Budgets {
    v4_prefix: u8,
    v6_prefix: u8,
    queries_ip: Mutex<SlidingLimiter<u128>>,
    posts_ip: Mutex<SlidingLimiter<u128>>,
    posts_user: Mutex<SlidingLimiter<u128>>,
    votes_ip: Mutex<SlidingLimiter<u128>>,
    votes_user: Mutex<SlidingLimiter<u128>>,
    widget_ip: Mutex<SlidingLimiter<u128>>,
}

impl Budgets {
    /// Also starts each budget's refusal counter at 0, so that a rate of
    /// it (and an alert on it) works before the first refusal: call after
    /// the metrics recorder is installed.
    pub fn new(c: &LimitsConfig) -> Self {
        for what in Spend::ALL {
            metrics::counter!("hotrank_budget_refused_total", "budget" => what.as_str())
                .increment(0);
        }
        let l = |n| Mutex::new(SlidingLimiter::new(n, WINDOW_MS));
        Budgets {
            v4_prefix: c.ipv4_prefix,
            v6_prefix: c.ipv6_prefix,
            queries_ip: l(c.queries_per_minute_per_ip),
            posts_ip: l(c.posts_per_minute_per_ip),
            posts_user: l(c.posts_per_minute_per_user),
            votes_ip: l(c.votes_per_minute_per_ip),
            votes_user: l(c.votes_per_minute_per_user),
            widget_ip: l(c.widget_events_per_minute_per_ip),
        }
    }

    /// The block `ip` is budgeted by (`limits.ipv4_prefix`/`ipv6_prefix`).
    pub fn block(&self, ip: IpAddr) -> IpAddr {
        ip_block(ip, self.v4_prefix, self.v6_prefix)
    }

    /// Spends one unit of `what` for the client at `ip` (`None`: a trusted
    /// request, not budgeted by IP) and `user` (hashed), or refuses.
    pub fn spend(
        &self,
        what: Spend,
        identity: &Identity,
        ip: Option<IpAddr>,
        user: Option<u128>,
        now_ms: i64,
    ) -> Result<(), ApiError> {
        let ip_key = ip.map(|ip| u128::from(identity.ip(self.block(ip))));
        let (by_ip, by_user) = match what {
            Spend::Query => (&self.queries_ip, None),
            Spend::Post => (&self.posts_ip, Some(&self.posts_user)),
            Spend::Vote => (&self.votes_ip, Some(&self.votes_user)),
            Spend::Widget => (&self.widget_ip, None),
        };
        // Lock order: the IP table, then the user table.
        let mut ip_log = by_ip.lock();
        if let Some(k) = ip_key
            && let Some(wait) = ip_log.wait_ms(&k, now_ms)
        {
            return Err(refuse(what, "client IP", wait));
        }
        let mut user_log = by_user.map(|m| m.lock());
        if let (Some(log), Some(u)) = (user_log.as_deref(), user)
            && let Some(wait) = log.wait_ms(&u, now_ms)
        {
            return Err(refuse(what, "user", wait));
        }
        if let Some(k) = ip_key {
            ip_log.record(k, now_ms);
        }
        if let (Some(log), Some(u)) = (user_log.as_deref_mut(), user) {
            log.record(u, now_ms);
        }
        Ok(())
    }

    /// Forgets clients with nothing in the window; reports the table sizes.
    pub fn sweep(&self, now_ms: i64) {
        let mut keys = 0;
        for m in [
            &self.queries_ip,
            &self.posts_ip,
            &self.posts_user,
            &self.votes_ip,
            &self.votes_user,
            &self.widget_ip,
        ] {
            let mut l = m.lock();
            l.sweep(now_ms);
            keys += l.keys();
        }
        metrics::gauge!("hotrank_budget_clients").set(keys as f64);
    }
}

fn refuse(what: Spend, by: &str, wait_ms: i64) -> ApiError {
    metrics::counter!("hotrank_budget_refused_total", "budget" => what.as_str()).increment(1);
    let secs = (wait_ms as u64).div_ceil(1000).max(1);
    ApiError::TooManyRequests {
        code: "rate_limited",
        message: format!(
            "over the {} budget of this {by} (see the README, \"Limits and abuse\"); retry in {secs} s",
            what.as_str()
        ),
        retry_after_secs: secs,
    }
}

/// Extracting this spends one query from the client's budget (requests
/// carrying the ingest or admin token are not counted): put it first in
/// the arguments of query and admin handlers.
pub struct QueryBudget;

impl FromRequestParts<AppState> for QueryBudget {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if matches!(state.is_trusted(&parts.headers), Ok(true)) {
            return Ok(QueryBudget);
        }
        let ClientIp(ip) = ClientIp::from_request_parts(parts, state).await?;
        state.budgets.spend(
            Spend::Query,
            &state.identity,
            Some(ip),
            None,
            state.clock.now_ms(),
        )?;
        Ok(QueryBudget)
    }
}
