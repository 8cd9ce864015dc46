//! The `rising` check, in one function: a listed article is rising when
//! the ranking's own `model=rising` score ([`crate::score::rising`]: views
//! of the current hour against its 24 hours before, z = (o − e) / √(e + 1))
//! reaches `webhooks.rising_z`, with at least `webhooks.rising_min_views`
//! views this hour.

use crate::config::WebhooksConfig;
use crate::model::{ArticleId, RisingSpec, Timestamp};
use crate::score::rising;
use crate::store::{Store, StoreError};

/// The window and baseline of the check (`model=rising`'s defaults).
fn spec(cfg: &WebhooksConfig) -> RisingSpec {
    RisingSpec {
        min: cfg.rising_min_views,
        ..RisingSpec::default()
    }
}

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
    let spec = spec(cfg);
    let Some(rows) = store.hourly(&id, now, spec.span()).await? else {
        return Ok(false);
    };
    let series: Vec<u64> = rows.iter().map(|r| r.pv).collect();
    Ok(spike(&series, cfg))
}

/// The rule on per-hour views, oldest first, the current hour last
/// (`window + baseline` of them; fewer, and it is not rising).
pub fn spike(series: &[u64], cfg: &WebhooksConfig) -> bool {
    let spec = spec(cfg);
    if series.len() != spec.span() as usize {
        return false;
    }
    let r = rising::evaluate(series, spec);
    r.trend.observed >= spec.min && r.z >= cfg.rising_z
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(past: u64, now: u64) -> Vec<u64> {
        let mut s = vec![past; 24];
        s.push(now);
        s
    }

    #[test]
    fn a_spike_against_its_own_past() {
        let cfg = WebhooksConfig::default(); // z >= 3, at least 5 views
        assert!(spike(&series(1, 20), &cfg));
        assert!(!spike(&series(20, 20), &cfg));
        assert!(!spike(&series(0, 4), &cfg));
        assert!(spike(&series(0, 5), &cfg));
        assert!(!spike(&[5], &cfg));
    }
}
