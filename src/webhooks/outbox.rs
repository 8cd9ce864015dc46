//! Where webhooks keep their state, "in the store": subscriptions, each
//! one's membership, the outbox of decided transitions not yet delivered,
//! and the delivery log. Two implementations: a log file of its own in the
//! embedded store's data directory ([`super::embedded_outbox`]) and keys
//! beside the Redis store's ([`super::redis_outbox`]).
//!
//! The promise both keep: [`Outbox::commit`] writes a subscription's new
//! membership and the entries of the transitions that produced it in one
//! atomic step, before anything is sent, so a transition is decided once
//! and survives a crash of the sender until [`Outbox::finish`] removes it.

use async_trait::async_trait;

use super::model::{Attempt, Entry, SubState, Subscription};
use crate::store::StoreError;

#[async_trait]
pub trait Outbox: Send + Sync + 'static {
    /// Adds a subscription (its state starts empty).
    async fn put_subscription(&self, s: &Subscription) -> Result<(), StoreError>;

    /// Removes a subscription, its state and its delivery log; `false` if
    /// it did not exist. Its pending entries are dropped by the sender.
    async fn delete_subscription(&self, id: &str) -> Result<bool, StoreError>;

    async fn subscriptions(&self) -> Result<Vec<Subscription>, StoreError>;

    /// A subscription's decided state (empty before its first commit).
    async fn state(&self, id: &str) -> Result<SubState, StoreError>;

    /// Atomically: the subscription's new state, and `entries` added to
    /// the outbox. With `lease`, only while this node holds the deciding
    /// lease (`Ok(false)` and nothing written otherwise).
    async fn commit(
        &self,
        id: &str,
        state: &SubState,
        entries: &[Entry],
        lease: bool,
    ) -> Result<bool, StoreError>;

    /// Every entry not yet finished, oldest first.
    async fn pending(&self) -> Result<Vec<Entry>, StoreError>;

    /// Records an attempt; with an outcome other than `retry`, the entry
    /// leaves the outbox in the same step (a `dropped` one, whose
    /// subscription is gone, is not logged).
    async fn record(&self, a: &Attempt) -> Result<(), StoreError>;

    /// A subscription's most recent attempts, newest first.
    async fn attempts(&self, id: &str) -> Result<Vec<Attempt>, StoreError>;

    /// Takes or renews the lease that lets one node decide and send at a
    /// time (Redis: `SET NX PX`, renewed); `true` while this node holds it.
    /// The embedded store has one node: always `true`.
    async fn lease(&self, ttl_ms: u64) -> Result<bool, StoreError>;

    /// Gives the lease back (at shutdown).
    async fn release(&self) {}
}
