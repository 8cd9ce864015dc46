//! Webhooks: subscriptions to a ranking query's top N, told when an
//! article enters or leaves it, rises, or is held for review (README,
//! "Webhooks"; the routes are src/api/webhooks.rs).
//!
//! How a transition travels:
//!
//! 1. The **evaluator** ([`Webhooks`]'s loop, every `webhooks.interval_ms`)
//!    reads each subscription's public list through the [`PublicRanking`]
//!    the composition root gives it ([`Webhooks::read_public`]: the
//!    curated page exactly as `GET /api/hot` serves it, so excluded, held
//!    and denied articles never enter and pins do) and compares it with
//!    the membership it persisted ([`decide`]).
//! 2. The new membership and the outbox entries of the transitions (with
//!    delivery ids numbered from the subscription's persisted count) are
//!    **committed atomically** to the [`Outbox`] before anything is sent:
//!    a transition is decided once, and a crash after the commit leaves
//!    it in the outbox for the next start.
//! 3. The **sender** ([`send`]) posts each entry, signed, until a 2xx
//!    answer or `max_attempts`, under the same delivery id.
//!
//! A `held` is decided the same way: each evaluation reads the articles
//! held for review now ([`Webhooks::read_held`]) and tells each
//! subscription of those held since it was created that it was not yet
//! told of, in the same commit as its list. A hold is recorded first
//! (curation), told after: a crash or an outage between the two delays the
//! `held`, never loses it. A hold wakes the evaluator at once
//! ([`Webhooks::held_changed`]).
//!
//! On Redis, any number of nodes run this, but only the holder of a lease
//! (`SET NX PX`, renewed every interval) decides and sends; its commits
//! check the lease in the same script, so a node that lost it cannot
//! decide a transition twice.
//!
//! Files: `model.rs` (the data), `target.rs` (receiver URLs and the SSRF
//! rule), `decide.rs` (transitions), `rising.rs` (the spike check),
//! `outbox.rs` (the trait), `embedded_outbox.rs`, `redis_outbox.rs`,
//! `sign.rs` (body and signature), `post.rs` (the HTTP client), `send.rs`
//! (retries and the delivery log).

mod decide;
mod embedded_outbox;
pub mod model;
mod outbox;
mod post;
mod redis_outbox;
mod rising;
mod send;
mod sign;
pub mod target;

pub use embedded_outbox::EmbeddedOutbox;
pub use outbox::Outbox;
pub use redis_outbox::RedisOutbox;
pub use sign::signature;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;

use crate::clock::Clock;
use crate::config::{Config, WebhooksConfig};
use crate::model::{HotPage, HotQuery, Timestamp};
use crate::store::{Store, StoreError};
use model::{Attempt, EventKind, SubState, Subscription, now_ms};

/// The metric families webhooks emit (described in src/metrics.rs).
pub mod metrics_names {
    pub const TRANSITIONS: &str = "hotrank_webhook_transitions_total";
    pub const DELIVERIES: &str = "hotrank_webhook_deliveries_total";
    pub const RETRIES: &str = "hotrank_webhook_retries_total";
    pub const PENDING: &str = "hotrank_webhook_outbox_pending";
    pub const SUBSCRIPTIONS: &str = "hotrank_webhook_subscriptions";
    pub const LATENCY: &str = "hotrank_webhook_delivery_latency_seconds";
    /// The `outcome` label's values.
    pub const OUTCOMES: [&str; 4] = ["delivered", "retry", "failed", "dropped"];
}
use metrics_names as m;

/// Turns a subscription's stored ranking parameters into the query it
/// reads (under the configuration's limits). The composition root passes
/// the API's own parser (`GET /api/hot`'s rules, one place), so this
/// module does not depend on the API, which depends on it.
pub type QueryParser = fn(&BTreeMap<String, String>, &Config) -> Result<HotQuery, String>;

/// Reads a page of the public ranking `q` asks for at `now`: the list
/// readers see (curation applied), with the public list's ranks. The
/// composition root passes the API's (src/api/curated.rs), as with
/// [`QueryParser`], since the API depends on this module.
pub type PublicRanking = Arc<
    dyn Fn(
            HotQuery,
            Timestamp,
        ) -> std::pin::Pin<Box<dyn Future<Output = Result<HotPage, StoreError>> + Send>>
        + Send
        + Sync,
>;

/// Reads the articles held for review now, each with when it was held
/// (Unix seconds): the curation's (src/api/curated.rs), passed by the
/// composition root as [`PublicRanking`] is.
pub type HeldArticles = Arc<
    dyn Fn() -> Pin<Box<dyn Future<Output = Result<BTreeMap<String, i64>, StoreError>> + Send>>
        + Send
        + Sync,
>;

/// The running webhooks of one node.
pub struct Webhooks {
    outbox: Arc<dyn Outbox>,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    cfg: WebhooksConfig,
    /// The server's configuration, for the query parser's limits.
    config: Config,
    ranking_cap: usize,
    parse: QueryParser,
    /// The public list each subscription reads; until it is set
    /// ([`Webhooks::read_public`]) nothing is evaluated.
    ranking: OnceLock<PublicRanking>,
    /// The held articles (none set: no `held` is decided).
    held: OnceLock<HeldArticles>,
    /// Serializes this node's decisions.
    deciding: tokio::sync::Mutex<()>,
    /// Runs an evaluation before the next interval (a hold was recorded).
    evaluate_now: Notify,
    /// Whether this node holds the lease (it then also sends).
    leader: AtomicBool,
    wake: Notify,
    stop: watch::Sender<bool>,
    tasks: parking_lot::Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Webhooks {
    /// Starts the evaluator and the sender over `outbox`. Inside a tokio
    /// runtime.
    pub fn start(
        config: &Config,
        store: Arc<dyn Store>,
        outbox: Arc<dyn Outbox>,
        clock: Arc<dyn Clock>,
        parse: QueryParser,
    ) -> Result<Arc<Webhooks>, String> {
        for o in m::OUTCOMES {
            metrics::counter!(m::DELIVERIES, "outcome" => o).increment(0);
        }
        for k in EventKind::ALL {
            metrics::counter!(m::TRANSITIONS, "event" => k.as_str()).increment(0);
        }
        let sender = Arc::new(send::Sender::new(outbox.clone(), &config.webhooks)?);
        let w = Arc::new(Webhooks {
            outbox,
            store,
            clock,
            cfg: config.webhooks.clone(),
            config: config.clone(),
            ranking_cap: config.retention.ranking_cap,
            parse,
            ranking: OnceLock::new(),
            held: OnceLock::new(),
            deciding: tokio::sync::Mutex::new(()),
            evaluate_now: Notify::new(),
            leader: AtomicBool::new(false),
            wake: Notify::new(),
            stop: watch::Sender::new(false),
            tasks: parking_lot::Mutex::new(Vec::new()),
        });
        let evaluator = tokio::spawn(w.clone().evaluate_loop());
        let sending = tokio::spawn(w.clone().send_loop(sender));
        w.tasks.lock().extend([evaluator, sending]);
        tracing::info!(
            interval_ms = w.cfg.interval_ms,
            allow_private = w.cfg.allow_private,
            "webhooks started"
        );
        Ok(w)
    }

    /// Gives the evaluator the public list to read (once; later calls are
    /// ignored). Until then it decides nothing, so no transition comes
    /// from the uncurated ranking.
    pub fn read_public(&self, ranking: PublicRanking) {
        if self.ranking.set(ranking).is_ok() {
            self.wake.notify_one();
        }
    }

    pub fn config(&self) -> &WebhooksConfig {
        &self.cfg
    }

    /// Stops both loops (deliveries in flight are cut: their entries stay
    /// in the outbox and go out again after a restart, same ids) and gives
    /// the lease back.
    pub async fn stop(&self) {
        self.stop.send_replace(true);
        let tasks: Vec<_> = std::mem::take(&mut *self.tasks.lock());
        for t in tasks {
            let _ = t.await;
        }
        self.outbox.release().await;
    }

    /// Adds a subscription (validated by the caller).
    pub async fn create(&self, s: &Subscription) -> Result<(), StoreError> {
        self.outbox.put_subscription(s).await?;
        tracing::info!(id = %s.id, url = %s.url, top = s.top, "webhook subscription created");
        self.wake.notify_one();
        Ok(())
    }

    pub async fn list(&self) -> Result<Vec<Subscription>, StoreError> {
        self.outbox.subscriptions().await
    }

    pub async fn delete(&self, id: &str) -> Result<bool, StoreError> {
        let gone = self.outbox.delete_subscription(id).await?;
        if gone {
            tracing::info!(id, "webhook subscription deleted");
        }
        Ok(gone)
    }

    /// A subscription's recent attempts, newest first.
    pub async fn deliveries(&self, id: &str) -> Result<Vec<Attempt>, StoreError> {
        self.outbox.attempts(id).await
    }

    /// Gives the evaluator the held articles to read (once; later calls
    /// are ignored).
    pub fn read_held(&self, held: HeldArticles) {
        if self.held.set(held).is_ok() {
            self.evaluate_now.notify_one();
        }
    }

    /// **The curation hook**: an article was held for review. The
    /// evaluator runs now rather than at its next interval (on the node
    /// holding the lease; another node's evaluator sees the hold within
    /// `webhooks.interval_ms` plus the curation cache's second).
    pub fn held_changed(&self) {
        self.evaluate_now.notify_one();
    }

    async fn evaluate_loop(self: Arc<Self>) {
        let mut stop = self.stop.subscribe();
        let mut tick = tokio::time::interval(Duration::from_millis(self.cfg.interval_ms));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let lease_ms = (self.cfg.interval_ms * 3).max(3000);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = self.evaluate_now.notified() => {}
                _ = stop.changed() => return,
            }
            let held = match self.outbox.lease(lease_ms).await {
                Ok(h) => h,
                Err(e) => {
                    if let Some(held_back) = OUTAGE_LOG.allow() {
                        tracing::warn!(error = %e, held_back, "webhooks: lease not renewed");
                    }
                    false
                }
            };
            if self.leader.swap(held, Ordering::Relaxed) != held {
                tracing::info!(held, "webhooks: deciding lease");
            }
            if held
                && let Err(e) = self.evaluate_all().await
                && let Some(held_back) = OUTAGE_LOG.allow()
            {
                tracing::warn!(error = %e, held_back, "webhooks: evaluation failed; retried next interval");
            }
        }
    }

    async fn evaluate_all(&self) -> Result<(), StoreError> {
        let Some(ranking) = self.ranking.get() else {
            return Ok(());
        };
        let _one = self.deciding.lock().await;
        let subs = self.outbox.subscriptions().await?;
        metrics::gauge!(m::SUBSCRIPTIONS).set(subs.len() as f64);
        // Read before the lists: a hold the lists' reads record is told
        // at the next evaluation (which it wakes).
        let now_held = match self.held.get() {
            Some(read) if subs.iter().any(|s| s.wants(EventKind::Held)) => Some(read().await?),
            _ => None,
        };
        let mut committed = false;
        for sub in subs {
            committed |= self.evaluate(&sub, ranking, now_held.as_ref()).await?;
        }
        if committed {
            self.wake.notify_one();
        }
        Ok(())
    }

    /// Decides `sub`'s transitions now and commits them; whether anything
    /// was committed.
    async fn evaluate(
        &self,
        sub: &Subscription,
        ranking: &PublicRanking,
        now_held: Option<&BTreeMap<String, i64>>,
    ) -> Result<bool, StoreError> {
        let mut q = match (self.parse)(&sub.query, &self.config) {
            Ok(q) => q,
            Err(e) => {
                tracing::warn!(id = %sub.id, error = %e, "webhooks: a stored query no longer parses");
                return Ok(false);
            }
        };
        let depth = sub.top + self.cfg.hysteresis + 5;
        q.offset = 0;
        q.limit = (depth as usize).min(self.ranking_cap);
        q.cursor = None;
        q.explain = false;
        let now = self.clock.now();
        let page = ranking(q, now).await?;
        let ranking: Vec<(String, u32)> = page
            .items
            .iter()
            .map(|it| (it.id.as_str().to_string(), it.rank as u32))
            .collect();
        let prev = self.outbox.state(&sub.id).await?;
        let (mut members, mut changes) =
            decide::membership(&prev, &ranking, sub.top, self.cfg.hysteresis);
        if sub.wants(EventKind::Rising) {
            let mut now_rising = HashMap::new();
            for article in members.keys() {
                let r = rising::is_rising(&*self.store, article, now, &self.cfg).await?;
                now_rising.insert(article.clone(), r);
            }
            changes.extend(decide::rising(&mut members, &now_rising));
        }
        let mut told = prev.held.clone();
        if let Some(now_held) = now_held.filter(|_| sub.wants(EventKind::Held)) {
            let (keep, held) = decide::held(&prev.held, now_held, sub.created_at, &members);
            told = keep;
            changes.extend(held);
        }
        let mut next = SubState {
            members,
            seq: prev.seq,
            evaluated: true,
            held: told,
        };
        let for_metrics: Vec<EventKind> = changes.iter().map(|c| c.event).collect();
        let entries = decide::entries(sub, &mut next, changes, now, now_ms());
        if next == prev {
            return Ok(false);
        }
        if !self.outbox.commit(&sub.id, &next, &entries, true).await? {
            // The lease moved to another node between the renewal and
            // the commit: it decides from here on.
            self.leader.store(false, Ordering::Relaxed);
            return Ok(false);
        }
        for k in for_metrics {
            metrics::counter!(m::TRANSITIONS, "event" => k.as_str()).increment(1);
        }
        for e in &entries {
            tracing::info!(
                delivery = %e.delivery, event = e.event.as_str(), article = %e.article_id,
                rank = e.rank, "webhook transition decided"
            );
        }
        Ok(!entries.is_empty())
    }

    async fn send_loop(self: Arc<Self>, sender: Arc<send::Sender>) {
        let mut stop = self.stop.subscribe();
        let mut set: JoinSet<String> = JoinSet::new();
        let mut inflight: Vec<String> = Vec::new();
        loop {
            tokio::select! {
                _ = stop.changed() => break,
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                Some(done) = set.join_next(), if !set.is_empty() => {
                    if let Ok(id) = done {
                        inflight.retain(|d| *d != id);
                    }
                    continue;
                }
            }
            if self.leader.load(Ordering::Relaxed) {
                sender.schedule(&mut set, &mut inflight).await;
            }
        }
        set.abort_all();
        while set.join_next().await.is_some() {}
    }
}

/// While the store is down every interval fails: one line in 10 s says so.
static OUTAGE_LOG: crate::log_limit::LogLimit =
    crate::log_limit::LogLimit::new(Duration::from_secs(10), 1);

/// A new subscription id: 16 random hex digits.
pub fn new_id() -> String {
    format!("wh{}", crate::secrets::random_hex(8))
}
