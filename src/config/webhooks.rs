//! Webhooks' settings (`[webhooks]`): how often subscriptions are
//! evaluated, what counts as a transition, and how deliveries are retried.

use serde::{Deserialize, Serialize};

/// Webhook subscriptions and their deliveries (`[webhooks]`; README,
/// "Webhooks").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebhooksConfig {
    /// Run the evaluator and the sender on this node (API nodes only; on
    /// Redis one node at a time holds the lease and does both).
    pub enabled: bool,
    /// How often every subscription's ranking is read and compared with
    /// its persisted membership.
    pub interval_ms: u64,
    /// An article in a subscription's list leaves only when it falls below
    /// `top + hysteresis` (or out of the ranking): an item on the border
    /// does not flap.
    pub hysteresis: u32,
    /// `rising`: a listed article whose views in the current hour exceed
    /// its mean hourly views of the 24 hours before by this z
    /// ((o − e) / √(e + 1)).
    pub rising_z: f64,
    /// `rising` also needs at least this many views in the current hour.
    pub rising_min_views: u64,
    /// Attempts of one delivery before it is given up.
    pub max_attempts: u32,
    /// The first retry waits this long; each next one twice as long ...
    pub retry_base_ms: u64,
    /// ... up to this.
    pub retry_max_ms: u64,
    /// Connecting (DNS, TCP and TLS) to a receiver fails after this long.
    pub connect_timeout_ms: u64,
    /// A receiver that has not answered this long after the request is a
    /// failed attempt.
    pub response_timeout_ms: u64,
    /// Deliveries sent at once.
    pub concurrency: usize,
    /// Most subscriptions (creating one more answers 409).
    pub max_subscriptions: usize,
    /// Allow receivers on loopback, private, link-local and other
    /// non-public addresses (checked when a subscription is created and on
    /// every address a delivery resolves to). Off by default: webhook URLs
    /// are not a way into the internal network (SSRF).
    pub allow_private: bool,
}

impl Default for WebhooksConfig {
    fn default() -> Self {
        WebhooksConfig {
            enabled: true,
            interval_ms: 1000,
            hysteresis: 2,
            rising_z: 3.0,
            rising_min_views: 5,
            max_attempts: 10,
            retry_base_ms: 1000,
            retry_max_ms: 300_000,
            connect_timeout_ms: 3000,
            response_timeout_ms: 10_000,
            concurrency: 16,
            max_subscriptions: 1000,
            allow_private: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn bad_values_are_refused_naming_their_key() {
        type Edit = fn(&mut super::WebhooksConfig);
        let cases: [(Edit, &str); 5] = [
            (|w| w.interval_ms = 0, "webhooks.interval_ms"),
            (|w| w.rising_z = f64::NAN, "webhooks.rising_z"),
            (|w| w.max_attempts = 0, "webhooks.max_attempts"),
            (
                |w| w.retry_max_ms = w.retry_base_ms - 1,
                "webhooks.retry_max_ms",
            ),
            (|w| w.concurrency = 0, "webhooks.concurrency"),
        ];
        for (edit, key) in cases {
            let mut c = Config::default();
            edit(&mut c.webhooks);
            let e = c.validate().unwrap_err();
            assert!(e.starts_with(key), "{e}");
        }
        let c: Config = toml::from_str("[webhooks]\nallow_private = true\n").unwrap();
        assert!(c.webhooks.allow_private && c.validate().is_ok());
        assert!(toml::from_str::<Config>("[webhooks]\nnope = 1\n").is_err());
    }
}
