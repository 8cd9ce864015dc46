//! hotrank: a self-hosted hot/trending content engine.
//!
//! Events flow one way:
//!
//! ```text
//! HTTP (api) ──► gate: validate, bot check ──► store: replay, rate limit,
//!                                              dedupe, count ──► rankings
//! ```
//!
//! A tour of the modules:
//! - [`model`]: validated ids, events, verdicts, queries — the vocabulary.
//! - [`sketch`]: a HyperLogLog byte-compatible with Redis, for UV.
//! - [`gate`]: identity hashing, bot detection, timestamp bounds, the
//!   sliding-window rate limiter.
//! - [`score`]: the ranking models, pure functions of counters and `now`.
//! - [`rank`]: the ranking core both stores share: the exact threshold
//!   walk over upper bounds, and the snapshots cursors page through.
//! - [`store`]: the [`store::Store`] trait and its implementations (the
//!   embedded store with its write-ahead log and snapshots; the Redis store
//!   shared by many API nodes, docs/redis-keys.md), and the dumps that
//!   move state between them.
//! - [`pipeline`]: the queued ingest path on the Redis store (seed 002):
//!   streams, filter and count workers, the journal and disaster recovery.
//! - [`archive`]: the PostgreSQL archive of either store's state (seed
//!   002's Cassandra), written and read as dump records.
//! - [`api`]: the axum routers, one per area, and the error type.
//! - [`app`]: the composition root: which store, pipeline, workers and
//!   archive writer the configuration asks for; `main.rs` and every tool
//!   ask it.
//! - [`webhooks`]: subscriptions to a ranking's top N: transitions
//!   decided once into an outbox in the store, signed deliveries, retries.
//! - [`server`]: state, upkeep, and `run(listener, state, shutdown)`.
//! - [`ctr`]: the widget's impressions and clicks per list and position,
//!   apart from views, and click-through per model corrected for position
//!   bias.
//! - [`secrets`]: the admin token and identity key in the data dir.
//! - [`config`]: the TOML configuration and its validation.
//! - [`metrics`]: every exported metric family with its HELP text.
//! - [`log_limit`]: log lines rate-limited under floods.
//! - [`clock`]: where "now" comes from (system or manual, for tests).
//! - [`tls`]: the TLS client configuration of outgoing https.
//! - [`time`]: hour and day buckets and the hours a window covers, the
//!   same for both stores.
//! - [`loadgen`]: `hotrank bench`, the load generator.
//! - [`cli`]: the offline tools `hotrank simulate` and `hotrank replay`.
//!
//! docs/design.md explains the data model, freshness and durability.

pub mod api;
pub mod app;
pub mod archive;
pub mod cli;
pub mod clock;
pub mod config;
pub mod crawler;
pub mod ctr;
pub mod curation;
pub mod gate;
pub mod loadgen;
pub mod log_limit;
pub mod metrics;
pub mod model;
pub mod pipeline;
pub mod rank;
pub mod score;
pub mod secrets;
pub mod server;
pub mod sketch;
pub mod store;
pub mod time;
pub mod tls;
pub mod webhooks;
