//! The sender: delivers the outbox's entries, each under its delivery id,
//! until a 2xx answer; otherwise again after `retry_base_ms · 2^(n−1)`
//! (at most `retry_max_ms`), up to `max_attempts`. Every attempt is
//! recorded; the last one (delivered, failed, or dropped because its
//! subscription was deleted) takes the entry out of the outbox in the
//! same step.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::task::JoinSet;

use super::model::{Attempt, Entry, Subscription, now_ms};
use super::outbox::Outbox;
use super::post::Poster;
use super::{metrics_names as m, sign};
use crate::config::WebhooksConfig;

/// While the store is down every read fails: one line in 10 s says so.
static OUTBOX_LOG: crate::log_limit::LogLimit =
    crate::log_limit::LogLimit::new(Duration::from_secs(10), 1);

/// When an entry is tried next, and which attempt that is.
#[derive(Debug, Clone, Copy)]
struct Retry {
    attempt: u32,
    due: Instant,
}

pub struct Sender {
    outbox: Arc<dyn Outbox>,
    poster: Poster,
    cfg: WebhooksConfig,
    retries: Mutex<HashMap<String, Retry>>,
}

impl Sender {
    pub fn new(outbox: Arc<dyn Outbox>, cfg: &WebhooksConfig) -> Result<Self, String> {
        Ok(Sender {
            outbox,
            poster: Poster::new(cfg)?,
            cfg: cfg.clone(),
            retries: Mutex::new(HashMap::new()),
        })
    }

    /// Starts the deliveries that are due and not in flight (at most
    /// `concurrency` in flight), in `set`.
    pub async fn schedule(self: &Arc<Self>, set: &mut JoinSet<String>, inflight: &mut Vec<String>) {
        let (pending, subs) = match (
            self.outbox.pending().await,
            self.outbox.subscriptions().await,
        ) {
            (Ok(p), Ok(s)) => (p, s),
            (Err(e), _) | (_, Err(e)) => {
                if let Some(held_back) = OUTBOX_LOG.allow() {
                    tracing::warn!(error = %e, held_back, "webhooks: cannot read the outbox");
                }
                return;
            }
        };
        metrics::gauge!(m::PENDING).set(pending.len() as f64);
        let subs: HashMap<String, Subscription> =
            subs.into_iter().map(|s| (s.id.clone(), s)).collect();
        let now = Instant::now();
        for entry in pending {
            if inflight.len() >= self.cfg.concurrency {
                break;
            }
            if inflight.contains(&entry.delivery) {
                continue;
            }
            let due = self.retries.lock().get(&entry.delivery).copied();
            let sub = subs.get(&entry.subscription).cloned();
            // A deleted subscription's entries are dropped at once.
            if sub.is_some() && due.is_some_and(|r| r.due > now) {
                continue;
            }
            let attempt = match due {
                Some(r) => r.attempt,
                None => self.attempts_so_far(&entry).await + 1,
            };
            inflight.push(entry.delivery.clone());
            let me = self.clone();
            set.spawn(async move {
                let id = entry.delivery.clone();
                me.deliver(entry, sub, attempt).await;
                id
            });
        }
    }

    /// Attempts recorded for `entry` before this process saw it (a
    /// restart continues the count).
    async fn attempts_so_far(&self, entry: &Entry) -> u32 {
        self.outbox
            .attempts(&entry.subscription)
            .await
            .map(|a| a.iter().filter(|a| a.delivery == entry.delivery).count() as u32)
            .unwrap_or(0)
    }

    /// One attempt at `entry`, recorded; the next one scheduled if it failed.
    async fn deliver(&self, entry: Entry, sub: Option<Subscription>, attempt: u32) {
        let started = Instant::now();
        let at_ms = now_ms();
        let (status, error, outcome) = match &sub {
            None => (None, Some("subscription deleted".to_string()), "dropped"),
            Some(sub) => {
                let body = sign::body(&entry, sub);
                let headers = [
                    ("x-hotrank-delivery", entry.delivery.clone()),
                    ("x-hotrank-event", entry.event.as_str().to_string()),
                    ("x-hotrank-signature", sign::signature(&sub.secret, &body)),
                ];
                match self.poster.post(&sub.url, &headers, body).await {
                    Ok(s) if (200..300).contains(&s) => (Some(s), None, "delivered"),
                    Ok(s) => (Some(s), Some(format!("answered {s}")), self.failed(attempt)),
                    Err(e) => (None, Some(e), self.failed(attempt)),
                }
            }
        };
        let a = Attempt {
            delivery: entry.delivery.clone(),
            subscription: entry.subscription.clone(),
            event: entry.event,
            article_id: entry.article_id.clone(),
            attempt,
            status,
            error: error.clone(),
            outcome: outcome.to_string(),
            at_ms,
            decided_ms: entry.decided_ms,
            duration_ms: started.elapsed().as_millis() as u64,
        };
        if let Err(e) = self.outbox.record(&a).await {
            // Not recorded: the entry stays in the outbox and is sent
            // again (same id) once the store is back.
            tracing::warn!(error = %e, delivery = %a.delivery, "webhooks: attempt not recorded");
        }
        metrics::counter!(m::DELIVERIES, "outcome" => outcome).increment(1);
        match outcome {
            "delivered" => {
                self.retries.lock().remove(&entry.delivery);
                let latency = (now_ms() - entry.decided_ms).max(0) as f64 / 1000.0;
                metrics::histogram!(m::LATENCY).record(latency);
                tracing::info!(
                    delivery = %entry.delivery, event = entry.event.as_str(),
                    article = %entry.article_id, attempt, status, latency_s = latency,
                    "webhook delivered"
                );
            }
            "retry" => {
                metrics::counter!(m::RETRIES).increment(1);
                let wait = self.backoff(attempt);
                self.retries.lock().insert(
                    entry.delivery.clone(),
                    Retry {
                        attempt: attempt + 1,
                        due: Instant::now() + wait,
                    },
                );
                tracing::info!(
                    delivery = %entry.delivery, attempt, status, error = error.as_deref(),
                    retry_in_ms = wait.as_millis() as u64, "webhook attempt failed"
                );
            }
            _ => {
                self.retries.lock().remove(&entry.delivery);
                tracing::warn!(
                    delivery = %entry.delivery, attempt, outcome, error = error.as_deref(),
                    "webhook delivery ended without success"
                );
            }
        }
    }

    fn failed(&self, attempt: u32) -> &'static str {
        if attempt >= self.cfg.max_attempts {
            "failed"
        } else {
            "retry"
        }
    }

    /// The wait after failed attempt `attempt` (from 1).
    fn backoff(&self, attempt: u32) -> Duration {
        let factor = 1u64 << attempt.saturating_sub(1).min(30);
        Duration::from_millis(
            self.cfg
                .retry_base_ms
                .saturating_mul(factor)
                .min(self.cfg.retry_max_ms),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let outbox = Arc::new(super::super::EmbeddedOutbox::open(dir.path()).unwrap());
        let cfg = WebhooksConfig {
            retry_base_ms: 100,
            retry_max_ms: 1000,
            ..WebhooksConfig::default()
        };
        let s = Sender::new(outbox, &cfg).unwrap();
        let ms: Vec<u128> = (1..=6).map(|a| s.backoff(a).as_millis()).collect();
        assert_eq!(ms, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(s.failed(9), "retry");
        assert_eq!(s.failed(10), "failed");
    }
}
