//! Every metric family this server exports, in one place: its name, type,
//! unit and HELP text. [`describe`] hands them to the installed recorder at
//! startup, so `/metrics` carries `# HELP` and `# TYPE` for each family
//! (`promtool check metrics` is clean; tests/metrics.rs checks it).
//!
//! Conventions: units in names (`_seconds`, `_bytes`), counters end in
//! `_total`, one name per concept whichever store runs (the embedded and
//! the Redis store emit the same families where they share a concept).
//! Emission sites use the names below; a new family is added here first
//! (tests/metrics.rs fails on an exported family this list lacks). Some
//! families are emitted by features that land on other branches; listing
//! them early costs nothing (a description is only shown beside values).

use ::metrics::Unit;

/// A family's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// One metric family.
#[derive(Debug, Clone, Copy)]
pub struct Family {
    pub name: &'static str,
    pub kind: Kind,
    pub unit: Option<Unit>,
    pub help: &'static str,
}

const fn family(name: &'static str, kind: Kind, unit: Option<Unit>, help: &'static str) -> Family {
    Family {
        name,
        kind,
        unit,
        help,
    }
}

use Kind::{Counter, Gauge, Histogram};

const SECONDS: Option<Unit> = Some(Unit::Seconds);
const BYTES: Option<Unit> = Some(Unit::Bytes);
const COUNT: Option<Unit> = Some(Unit::Count);

/// Every family, grouped by area.
pub const FAMILIES: &[Family] = &[
    family(
        "hotrank_build_info",
        Gauge,
        None,
        "Always 1; its version label is the running build's version.",
    ),
    // HTTP (src/api)
    family(
        "hotrank_http_requests_total",
        Counter,
        COUNT,
        "HTTP requests answered, by matched route and status code.",
    ),
    family(
        "hotrank_http_request_seconds",
        Histogram,
        SECONDS,
        "Time to answer an HTTP request, by matched route.",
    ),
    family(
        "hotrank_ingest_seconds",
        Histogram,
        SECONDS,
        "Time to gate and store one ingest request, by endpoint (views, events).",
    ),
    family(
        "hotrank_query_seconds",
        Histogram,
        SECONDS,
        "Time to answer a ranking query, by endpoint (hot, new, overview, compare).",
    ),
    family(
        "hotrank_events_total",
        Counter,
        COUNT,
        "Events received, by verdict: counted, or quarantined with the reason (duplicate, rate_limited, bot, replayed).",
    ),
    family(
        "hotrank_events_invalid_total",
        Counter,
        COUNT,
        "Events refused as invalid (bad fields, unknown article when required).",
    ),
    // Live streams (src/api/stream.rs)
    family(
        "hotrank_streams_open",
        Gauge,
        COUNT,
        "Live ranking streams (GET /api/stream) open now, at most feeds.max_streams.",
    ),
    family(
        "hotrank_streams_refused_total",
        Counter,
        COUNT,
        "Live stream requests answered 503 too_many_streams because feeds.max_streams were open.",
    ),
    family(
        "hotrank_stream_queries",
        Gauge,
        COUNT,
        "Distinct ranking queries the live streams follow; each is read from the store once every feeds.stream_poll_ms.",
    ),
    family(
        "hotrank_stream_events_total",
        Counter,
        COUNT,
        "Ranking events sent on live streams (one per stream per change of its list).",
    ),
    // Webhooks (src/webhooks)
    family(
        "hotrank_webhook_transitions_total",
        Counter,
        COUNT,
        "Webhook transitions decided and committed to the outbox, by event (entered, left, rising, held).",
    ),
    family(
        "hotrank_webhook_deliveries_total",
        Counter,
        COUNT,
        "Webhook delivery attempts by outcome: delivered (2xx), retry (failed, tried again), failed (given up after webhooks.max_attempts), dropped (subscription deleted).",
    ),
    family(
        "hotrank_webhook_retries_total",
        Counter,
        COUNT,
        "Webhook delivery attempts that failed and were scheduled again with backoff.",
    ),
    family(
        "hotrank_webhook_outbox_pending",
        Gauge,
        COUNT,
        "Webhook transitions decided but not yet delivered or given up (the outbox), as the sender last read it.",
    ),
    family(
        "hotrank_webhook_subscriptions",
        Gauge,
        COUNT,
        "Webhook subscriptions, as the evaluator last read them.",
    ),
    family(
        "hotrank_webhook_delivery_latency_seconds",
        Histogram,
        SECONDS,
        "Time from a webhook transition being decided to its successful delivery (retries included).",
    ),
    // Curation (src/curation)
    family(
        "hotrank_curation_held_total",
        Counter,
        COUNT,
        "Articles held for review ([review] mode = new_entries or suspicious) when a public ranking would have served them.",
    ),
    family(
        "hotrank_review_holds_total",
        Counter,
        COUNT,
        "Articles held for review by reason: new_entry (mode new_entries), narrow_network (few distinct /24 or /64 blocks against unique visitors in review.window_hours), held_back (the gate held back at least review.max_held_share of the article's events).",
    ),
    // Server upkeep
    family(
        "hotrank_store_up",
        Gauge,
        None,
        "1 when the store answered the last readiness check, 0 when it did not.",
    ),
    family(
        "hotrank_maintenance_seconds",
        Histogram,
        SECONDS,
        "Time of one periodic upkeep pass of the store (retention, expiry, snapshots).",
    ),
    // Store contents (both stores)
    family(
        "hotrank_articles",
        Gauge,
        COUNT,
        "Live (not deleted) articles in the store.",
    ),
    family(
        "hotrank_rankings",
        Gauge,
        COUNT,
        "Materialized rankings (one per model, range and filter queried recently).",
    ),
    family(
        "hotrank_ranking_entries",
        Gauge,
        COUNT,
        "Entries held in all materialized rankings together.",
    ),
    family(
        "hotrank_ranking_rebuilds_total",
        Counter,
        COUNT,
        "Full rebuilds of a ranking from the counters (as opposed to incremental updates).",
    ),
    family(
        "hotrank_ranking_refreshes_total",
        Counter,
        COUNT,
        "Rankings brought up to date in the background because they were queried lately (Redis store).",
    ),
    family(
        "hotrank_ranking_evictions_total",
        Counter,
        COUNT,
        "Rankings dropped because more than rankings.max_live were indexed, or they held more than rankings.max_bytes (least recently used first).",
    ),
    family(
        "hotrank_ranking_bytes",
        Gauge,
        BYTES,
        "Memory held by the embedded store's rankings and window caches together, estimated (kept within rankings.max_bytes).",
    ),
    family(
        "hotrank_window_cache_bytes",
        Gauge,
        BYTES,
        "Memory held by the articles' cached window counters (embedded store).",
    ),
    family(
        "hotrank_ranking_seconds",
        Histogram,
        SECONDS,
        "Time to bring a ranking up to date for a query.",
    ),
    family(
        "hotrank_lock_hold_seconds",
        Histogram,
        SECONDS,
        "Embedded store: one hold of the state lock by a background step (what=build: scoring a chunk of a new ranking; catch_up: installing it or re-scoring the articles changed meanwhile; upkeep: the background re-scoring of changed articles; query_catch_up: a query re-scoring many changed articles before its walk; retention: a chunk of the retention walk over the articles; dedupe_retention: a chunk of it over the shards of the dedupe and behaviour tables; ranked_at: a chunk of the scan that computes an earlier ranking for movement).",
    ),
    family(
        "hotrank_movement_scan_seconds",
        Histogram,
        SECONDS,
        "Time to compute one earlier ranking for movement (every candidate scored at the hour mark; once per ranking and hour).",
    ),
    family(
        "hotrank_ingest_lock_wait_seconds",
        Histogram,
        SECONDS,
        "Embedded store: how long one ingest call waited for the state lock before applying its first event (a ranking build, upkeep, retention or query holding it; the log write and fsync come after and are not in it).",
    ),
    family(
        "hotrank_dedupe_entries",
        Gauge,
        COUNT,
        "Entries in the dedupe window (article, visitor, event type).",
    ),
    family(
        "hotrank_event_ids",
        Gauge,
        COUNT,
        "Event ids remembered to refuse replays.",
    ),
    family(
        "hotrank_rate_limit_keys",
        Gauge,
        COUNT,
        "Visitors and IPs with a live rate-limit window.",
    ),
    family(
        "hotrank_articles_refused_total",
        Counter,
        COUNT,
        "Events refused because the store holds as many articles as it may.",
    ),
    family(
        "hotrank_behaviour_bot_events_total",
        Counter,
        COUNT,
        "Events quarantined as bot by the behaviour rule (not by user agent).",
    ),
    family(
        "hotrank_behaviour_bots_total",
        Counter,
        COUNT,
        "Visitors newly quarantined by the behaviour rule.",
    ),
    family(
        "hotrank_bot_operator_patterns",
        Gauge,
        COUNT,
        "User-agent patterns the operator's bot list holds now (config and file).",
    ),
    family(
        "hotrank_bot_pattern_reloads_total",
        Counter,
        COUNT,
        "Reloads of the operator's bot list, by result (ok, error).",
    ),
    // Connections and per-client budgets
    family(
        "hotrank_http_connections",
        Gauge,
        COUNT,
        "Open HTTP connections (at most http.max_connections, within the descriptor limit).",
    ),
    family(
        "hotrank_http_connections_refused_total",
        Counter,
        COUNT,
        "Connections closed as soon as accepted: the cap was reached and every open connection had a request in flight.",
    ),
    family(
        "hotrank_http_connections_shed_total",
        Counter,
        COUNT,
        "Idle connections closed to admit a new one at the cap (http.max_connections, within the descriptor limit).",
    ),
    family(
        "hotrank_http_panics_total",
        Counter,
        COUNT,
        "Requests whose handler panicked; each was answered 500 with the JSON error.",
    ),
    family(
        "hotrank_budget_clients",
        Gauge,
        COUNT,
        "Clients (IP blocks and users) with admissions inside the last minute, over every budget.",
    ),
    family(
        "hotrank_budget_refused_total",
        Counter,
        COUNT,
        "Requests refused with 429 because a per-client budget was spent, by budget (query, post, vote); widget events past their budget (widget), which are answered rate_limited.",
    ),
    // Embedded store durability
    family(
        "hotrank_snapshot_seconds",
        Histogram,
        SECONDS,
        "Time to build and write one snapshot of the embedded store (built off the state lock: ingest does not wait for it).",
    ),
    family(
        "hotrank_snapshot_fallbacks_total",
        Counter,
        COUNT,
        "Snapshots that could not be rebuilt from the previous snapshot and the log and were encoded under the state lock instead (ingest waited).",
    ),
    family(
        "hotrank_snapshot_bytes",
        Gauge,
        BYTES,
        "Size of the last snapshot written.",
    ),
    family(
        "hotrank_wal_bytes",
        Gauge,
        BYTES,
        "Bytes in the write-ahead log since the last snapshot.",
    ),
    family(
        crate::store::wal::METRIC_BYTES_WRITTEN,
        Counter,
        BYTES,
        "Bytes appended to the write-ahead log.",
    ),
    family(
        crate::store::wal::METRIC_RECORDS,
        Counter,
        COUNT,
        "Records appended to the write-ahead log.",
    ),
    family(
        crate::store::wal::METRIC_FSYNC_SECONDS,
        Histogram,
        SECONDS,
        "Time of one fsync of the write-ahead log.",
    ),
    family(
        crate::store::wal::METRIC_SEGMENTS,
        Gauge,
        COUNT,
        "Segment files of the write-ahead log on disk.",
    ),
    family(
        "hotrank_wal_stalled",
        Gauge,
        None,
        "1 while the write-ahead log cannot write (disk full, I/O error) and is retrying; writes answer 503 meanwhile.",
    ),
    family(
        "hotrank_wal_write_errors_total",
        Counter,
        COUNT,
        "Failed writes, syncs or segment creations of the write-ahead log.",
    ),
    // The ingest pipeline (src/store/redis/pipeline.rs)
    family(
        "hotrank_events_queued_total",
        Counter,
        COUNT,
        "Events an API node appended to the pipeline's raw streams (answered queued).",
    ),
    family(
        "hotrank_pipeline_refused_total",
        Counter,
        COUNT,
        "Events refused with 503 because a partition's backlog was at pipeline.max_backlog.",
    ),
    family(
        "hotrank_pipeline_processed_total",
        Counter,
        COUNT,
        "Stream entries a worker decided (group filter) or applied (group count).",
    ),
    family(
        "hotrank_pipeline_skipped_total",
        Counter,
        COUNT,
        "Stream entries a worker skipped because another call had already processed them (redeliveries), by group.",
    ),
    family(
        "hotrank_pipeline_claimed_total",
        Counter,
        COUNT,
        "Pending entries a worker took over from an idle or crashed one (XAUTOCLAIM), by group.",
    ),
    family(
        "hotrank_pipeline_journaled_total",
        Counter,
        COUNT,
        "Raw entries an API node appended to the journal (pipeline.log_url) before answering queued.",
    ),
    family(
        "hotrank_pipeline_journal_errors_total",
        Counter,
        COUNT,
        "Requests answered 503 because the journal refused the append or Redis lost its pipeline epoch (it must be restored).",
    ),
    family(
        "hotrank_pipeline_unjournaled_total",
        Counter,
        COUNT,
        "Raw entries the journal refused that a filter worker had already read, and article operations (PUT, post, vote, delete) that took effect but the journal refused (answered 503): they count but a restore would not replay them.",
    ),
    family(
        "hotrank_pipeline_ops_journaled_total",
        Counter,
        COUNT,
        "Article operations (PUT, post, vote, delete) an API node appended to the journal (pipeline.log_url) before answering.",
    ),
    family(
        "hotrank_pipeline_ops_replayed_total",
        Counter,
        COUNT,
        "Journaled article operations a disaster recovery restore ran again (those past their article's archived number).",
    ),
    family(
        "hotrank_pipeline_journal_trimmed_total",
        Counter,
        COUNT,
        "Journal entries the archive writer trimmed (older than pipeline.journal_keep_secs and below the archive's floor).",
    ),
    family(
        "hotrank_pipeline_replayed_total",
        Counter,
        COUNT,
        "Journal entries a disaster recovery restore gated again (hotrank archive restore --replay).",
    ),
    family(
        "hotrank_pipeline_lag",
        Gauge,
        COUNT,
        "Entries of a partition's stream its group has not acknowledged (pending + unread), by partition and group.",
    ),
    // The archive writer (src/pipeline/archiver.rs)
    family(
        "hotrank_archive_flushed_total",
        Counter,
        COUNT,
        "Articles the archive writer upserted to PostgreSQL (each at most once per flush).",
    ),
    family(
        "hotrank_archive_flush_seconds",
        Histogram,
        SECONDS,
        "Time of one successful archive flush: take the changed ids, read them from Redis, upsert.",
    ),
    family(
        "hotrank_archive_age_seconds",
        Gauge,
        SECONDS,
        "Seconds since this node's archive writer last flushed successfully (or since it started).",
    ),
    family(
        "hotrank_archive_flush_failures_total",
        Counter,
        COUNT,
        "Archive flushes that failed (their ids went back to the changed set).",
    ),
    family(
        "hotrank_archive_evicted_total",
        Counter,
        COUNT,
        "Articles the archive writer dropped from Redis after archiving them whole (unchanged for archive.evict_after_secs).",
    ),
    family(
        "hotrank_archive_restored_total",
        Counter,
        COUNT,
        "Evicted articles this node put back into Redis from the archive (an event, vote, read or ranking needed one).",
    ),
    family(
        "hotrank_archive_restore_seconds",
        Histogram,
        SECONDS,
        "Time to restore one evicted article: read its archived record, write it back with restore.lua.",
    ),
    // The access log and CORS (src/api/access.rs, src/api/web.rs)
    family(
        "hotrank_access_log_dropped_total",
        Counter,
        COUNT,
        "Requests left out of the access log because it wrote its most lines that second.",
    ),
    family(
        "hotrank_cors_refused_total",
        Counter,
        COUNT,
        "Requests to the ingest endpoints from a browser origin not in cors_origins (answered without CORS headers); text/plain beacons, whose answer is never read, are not counted.",
    ),
    // The widget (src/ctr, src/api/ctr.rs)
    family(
        "hotrank_widget_events_total",
        Counter,
        COUNT,
        "Widget impression and click events counted (apart from views), by type.",
    ),
    family(
        "hotrank_ctr_flush_failures_total",
        Counter,
        COUNT,
        "Failed writes of the click-through counts to ctr.json (embedded store); retried every ctr.flush_secs.",
    ),
];

/// Counters every series of which carries labels: no label-less series of
/// them starts at 0. Those whose label values are known in advance start at
/// 0 per value where their owner knows them ([`start`] for verdicts, the
/// budgets for theirs); the others (routes, pipeline stages) appear with
/// their first value.
pub const LABELLED_COUNTERS: &[&str] = &[
    "hotrank_http_requests_total",
    "hotrank_events_total",
    "hotrank_budget_refused_total",
    "hotrank_widget_events_total",
    "hotrank_pipeline_processed_total",
    "hotrank_pipeline_skipped_total",
    "hotrank_pipeline_claimed_total",
    "hotrank_webhook_transitions_total",
    "hotrank_webhook_deliveries_total",
];

/// The build's version, exported as `hotrank_build_info{version} 1` and on
/// `/healthz`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Describes every family ([`describe`]), starts every counter at 0 (each
/// label-less one, and `hotrank_events_total` per verdict), so a rate or an
/// alert works before the first event, sets `hotrank_build_info`, and
/// starts the process metrics (CPU, memory, descriptors: refreshed by
/// [`refresh_process`]). Call once, after the recorder is installed.
pub fn start() {
    describe();
    for f in FAMILIES {
        if f.kind == Counter && !LABELLED_COUNTERS.contains(&f.name) {
            ::metrics::counter!(f.name).increment(0);
        }
    }
    for v in crate::model::Verdict::ALL {
        ::metrics::counter!("hotrank_events_total", "verdict" => v.as_str()).increment(0);
    }
    for t in ["impression", "click"] {
        ::metrics::counter!("hotrank_widget_events_total", "type" => t).increment(0);
    }
    ::metrics::gauge!("hotrank_build_info", "version" => VERSION).set(1.0);
    process_collector().describe();
    refresh_process();
}

fn process_collector() -> &'static metrics_process::Collector {
    static COLLECTOR: std::sync::OnceLock<metrics_process::Collector> = std::sync::OnceLock::new();
    COLLECTOR.get_or_init(metrics_process::Collector::default)
}

/// Reads the process's CPU time, memory, open descriptors and threads into
/// the `process_*` families (Prometheus's standard names): before every
/// scrape of `/metrics`.
pub fn refresh_process() {
    process_collector().collect();
}

/// Gives every family its HELP text and unit. Call once, after the
/// recorder is installed (descriptions sent before are lost).
pub fn describe() {
    for f in FAMILIES {
        match (f.kind, f.unit) {
            (Counter, Some(u)) => ::metrics::describe_counter!(f.name, u, f.help),
            (Counter, None) => ::metrics::describe_counter!(f.name, f.help),
            (Gauge, Some(u)) => ::metrics::describe_gauge!(f.name, u, f.help),
            (Gauge, None) => ::metrics::describe_gauge!(f.name, f.help),
            (Histogram, Some(u)) => ::metrics::describe_histogram!(f.name, u, f.help),
            (Histogram, None) => ::metrics::describe_histogram!(f.name, f.help),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_conventions() {
        let mut seen = std::collections::HashSet::new();
        for f in FAMILIES {
            assert!(seen.insert(f.name), "{} listed twice", f.name);
            assert!(f.name.starts_with("hotrank_"), "{}", f.name);
            assert!(!f.help.is_empty(), "{} has no help", f.name);
            assert_eq!(
                f.kind == Counter,
                f.name.ends_with("_total"),
                "{}: counters and only counters end in _total",
                f.name
            );
            match f.unit {
                Some(Unit::Seconds) => assert!(f.name.contains("_seconds"), "{}", f.name),
                Some(Unit::Bytes) => assert!(f.name.contains("_bytes"), "{}", f.name),
                _ => {}
            }
        }
    }
}
