//! The `rising` check, in one function so that it can switch to the
//! ranking's own `model=rising` where that has landed: a listed article
//! is rising when its views in the current hour are a spike against its
//! mean hourly views of the 24 hours before, z = (o − e) / √(e + 1) at or
//! above `webhooks.rising_z`, with at least `webhooks.rising_min_views`
//! views this hour.

use crate::config::WebhooksConfig;
use crate::model::{ArticleId, Timestamp};
use crate::store::{Store, StoreError};

/// Hours of the baseline the current hour is compared with.
const BASELINE_HOURS: u32 = 24;

/// Whether `article` is rising now (its hourly buckets from
/// [`Store::hourly`]); an unknown article is not.
pub async fn is_rising(
    store: &dyn Store,
    article: &str,
    now: Timestamp,
    cfg: &WebhooksConfig,
) -> Result<bool, StoreError> {
    let Ok(id) = ArticleId::parse(article) else {
        return Ok(false);
    };
    let Some(rows) = store.hourly(&id, now, BASELINE_HOURS + 1).await? else {
        return Ok(false);
    };
    let Some((current, past)) = rows.split_last() else {
        return Ok(false);
    };
    Ok(spike(current.pv, past.iter().map(|r| r.pv), cfg))
}

/// The spike rule on counts: `observed` this hour against `past` hours.
pub fn spike(observed: u64, past: impl Iterator<Item = u64>, cfg: &WebhooksConfig) -> bool {
    let (sum, n) = past.fold((0u64, 0u64), |(s, n), pv| (s + pv, n + 1));
    let expected = sum as f64 / n.max(1) as f64;
    let z = (observed as f64 - expected) / (expected + 1.0).sqrt();
    observed >= cfg.rising_min_views && z >= cfg.rising_z
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spike_against_its_own_past() {
        let cfg = WebhooksConfig::default(); // z >= 3, at least 5 views
        assert!(spike(20, [1u64; 24].into_iter(), &cfg));
        assert!(!spike(20, [20u64; 24].into_iter(), &cfg));
        assert!(!spike(4, [0u64; 24].into_iter(), &cfg));
        assert!(spike(5, [0u64; 24].into_iter(), &cfg));
    }
}
