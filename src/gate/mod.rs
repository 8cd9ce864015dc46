//! The filter stage's building blocks: identity hashing, the bot check,
//! timestamp bounds and a sliding-window rate limiter.
//!
//! The stateless checks (validation, bot) run in the HTTP layer before an
//! event reaches a store. The stateful ones (replay, rate limit, dedupe
//! window) need state that every API node shares, so each store applies
//! them atomically with the counter update, in this order:
//! `replayed → bot → rate_limited → duplicate → counted`.

pub mod bots;
pub mod config;
mod limiter;

pub use bots::{BotDetector, reload_on_sighup};
pub use limiter::{AdmissionLog, SlidingLimiter, log_allows, log_record};

use std::net::IpAddr;

use siphasher::sip128::{Hasher128, SipHasher13};
use std::hash::Hasher;

use crate::model::Timestamp;

/// A hash map keyed by [`Identity`] outputs (visitor, IP and `eventId`
/// hashes, alone or in a tuple with our own small integers). Those keys
/// are SipHash values under the site's secret key, which no client can
/// steer into collisions, so the maps need no keyed hashing of their own:
/// a fast one saves a second SipHash per lookup on every event's path.
/// Maps keyed by client-chosen text (article ids) keep std's SipHash.
pub type KeyedMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// The set counterpart of [`KeyedMap`].
pub type KeyedSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

/// Turns raw identities (visitor ids, IPs, user agents, event ids) into
/// keyed hashes, so that none of them is ever stored in clear.
#[derive(Clone)]
pub struct Identity {
    k0: u64,
    k1: u64,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Identity(..)")
    }
}

impl Identity {
    /// `secret` keys every hash; all API nodes of one site must share it.
    pub fn new(secret: [u8; 16]) -> Self {
        let (a, b) = secret.split_at(8);
        Identity {
            k0: u64::from_le_bytes(a.try_into().expect("8 bytes")),
            k1: u64::from_le_bytes(b.try_into().expect("8 bytes")),
        }
    }

    fn hash128(&self, domain: u8, parts: &[&[u8]]) -> u128 {
        let mut h = SipHasher13::new_with_keys(self.k0, self.k1);
        h.write_u8(domain);
        for p in parts {
            // Length-prefix each part so ("ab","c") and ("a","bc") differ.
            h.write_u64(p.len() as u64);
            h.write(p);
        }
        h.finish128().as_u128()
    }

    /// A site-given visitor id (or user id).
    pub fn visitor(&self, visitor_id: &str) -> u128 {
        self.hash128(1, &[visitor_id.as_bytes()])
    }

    /// A cookie-less visitor: IP + User-Agent with a salt that rotates each
    /// UTC day, so the same reader maps to a new id tomorrow.
    pub fn anonymous_visitor(&self, ip: IpAddr, user_agent: &str, now: Timestamp) -> u128 {
        let day = now.div_euclid(86_400).to_le_bytes();
        let ip = ip_bytes(ip);
        self.hash128(2, &[&day, &ip, user_agent.as_bytes()])
    }

    /// The rate-limit key of a client IP (pass it through [`ip_block`]
    /// first, so that one network shares one budget).
    pub fn ip(&self, ip: IpAddr) -> u64 {
        self.hash128(3, &[&ip_bytes(ip)]) as u64
    }

    /// The idempotency key of an `eventId`.
    pub fn event_id(&self, event_id: &str) -> u128 {
        self.hash128(4, &[event_id.as_bytes()])
    }

    /// The review's network block of a client address ([`Event::net`]):
    /// the keyed hash of its /24 (IPv4, IPv4-mapped included) or /64
    /// (IPv6), whatever prefixes the rate limits use; never 0, which
    /// means unknown.
    ///
    /// [`Event::net`]: crate::model::Event::net
    pub fn net_block(&self, ip: IpAddr) -> u64 {
        let block = ip_block(ip, NET_V4_PREFIX, NET_V6_PREFIX);
        (self.hash128(5, &[&ip_bytes(block)]) as u64).max(1)
    }
}

/// The network block the review's evidence counts by (README, "Curation"):
/// fixed, unlike `limits.ipv4_prefix`.
pub const NET_V4_PREFIX: u8 = 24;
pub const NET_V6_PREFIX: u8 = 64;

/// The block a client address is budgeted by: its first `v4_prefix` bits
/// for IPv4 (IPv4-mapped IPv6 included), its first `v6_prefix` bits for
/// IPv6, the rest zeroed. With /64 one customer's IPv6 network, which holds
/// 2^64 addresses, is one client, as an IPv4 address is.
pub fn ip_block(ip: IpAddr, v4_prefix: u8, v6_prefix: u8) -> IpAddr {
    fn mask(bits: u32, len: u8) -> u32 {
        if len == 0 {
            0
        } else {
            bits & (u32::MAX << (32 - u32::from(len.min(32))))
        }
    }
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(mask(u32::from(v4), v4_prefix).into()),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(mask(u32::from(v4), v4_prefix).into()),
            None => {
                let len = u32::from(v6_prefix.min(128));
                let bits = u128::from(v6);
                let masked = if len == 0 {
                    0
                } else {
                    bits & (u128::MAX << (128 - len))
                };
                IpAddr::V6(masked.into())
            }
        },
    }
}

fn ip_bytes(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// Why an event time is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TsError {
    TooOld,
    InFuture,
}

/// Events older than the retention or more than `max_future` seconds ahead
/// of `now` are refused.
pub fn check_ts(
    ts: Timestamp,
    now: Timestamp,
    retention_secs: i64,
    max_future: i64,
) -> Result<(), TsError> {
    if ts > now + max_future {
        Err(TsError::InFuture)
    } else if ts <= now - retention_secs {
        Err(TsError::TooOld)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_keyed_and_separated() {
        let a = Identity::new([1; 16]);
        let b = Identity::new([2; 16]);
        assert_ne!(a.visitor("x"), b.visitor("x"));
        assert_eq!(a.visitor("x"), a.visitor("x"));
        assert_ne!(a.visitor("x"), a.event_id("x"));
        let ip: IpAddr = "1.2.3.4".parse().unwrap();
        let d0 = a.anonymous_visitor(ip, "ua", 0);
        assert_eq!(d0, a.anonymous_visitor(ip, "ua", 86_399));
        assert_ne!(d0, a.anonymous_visitor(ip, "ua", 86_400));
        assert_ne!(d0, a.anonymous_visitor(ip, "ub", 0));
    }

    #[test]
    fn ipv6_clients_share_a_budget_per_prefix() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let id = Identity::new([7; 16]);
        let key = |s: &str, v6: u8| id.ip(ip_block(ip(s), 32, v6));
        // Two addresses of one /64 are one client; the next /64 is another.
        assert_eq!(
            key("2001:db8:1:2::1", 64),
            key("2001:db8:1:2:ffff:ffff:ffff:ffff", 64)
        );
        assert_ne!(key("2001:db8:1:2::1", 64), key("2001:db8:1:3::1", 64));
        // A /48 prefix merges those two /64s; /128 keys every address.
        assert_eq!(key("2001:db8:1:2::1", 48), key("2001:db8:1:3::1", 48));
        assert_ne!(key("2001:db8:1:2::1", 128), key("2001:db8:1:2::2", 128));
        // IPv4 is keyed per address by default, per block when asked, and
        // an IPv4-mapped IPv6 address is the IPv4 address.
        assert_ne!(key("192.0.2.1", 64), key("192.0.2.2", 64));
        assert_eq!(key("192.0.2.1", 64), key("::ffff:192.0.2.1", 64));
        assert_eq!(ip_block(ip("192.0.2.77"), 24, 64), ip("192.0.2.0"));
        assert_eq!(
            ip_block(ip("2001:db8:aa:bb:cc:dd:ee:ff"), 32, 64),
            ip("2001:db8:aa:bb::")
        );
    }

    #[test]
    fn net_blocks_are_slash_24_and_slash_64() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let id = Identity::new([7; 16]);
        let net = |s: &str| id.net_block(ip(s));
        assert_eq!(net("192.0.2.1"), net("192.0.2.254"));
        assert_eq!(net("192.0.2.1"), net("::ffff:192.0.2.9"));
        assert_ne!(net("192.0.2.1"), net("192.0.3.1"));
        assert_eq!(net("2001:db8:1:2::1"), net("2001:db8:1:2:ffff::7"));
        assert_ne!(net("2001:db8:1:2::1"), net("2001:db8:1:3::1"));
        assert_ne!(net("192.0.2.1"), 0);
        assert_ne!(
            net("192.0.2.1"),
            Identity::new([8; 16]).net_block(ip("192.0.2.1"))
        );
        // Not the rate-limit key of the same block.
        assert_ne!(net("192.0.2.1"), id.ip(ip("192.0.2.0")));
    }

    #[test]
    fn ts_bounds() {
        assert_eq!(check_ts(100, 100, 50, 10), Ok(()));
        assert_eq!(check_ts(110, 100, 50, 10), Ok(()));
        assert_eq!(check_ts(111, 100, 50, 10), Err(TsError::InFuture));
        assert_eq!(check_ts(50, 100, 50, 10), Err(TsError::TooOld));
        assert_eq!(check_ts(51, 100, 50, 10), Ok(()));
    }
}
