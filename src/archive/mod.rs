//! The PostgreSQL archive: every article's meta, lifetime counters, hourly
//! and daily buckets, UV sketches (the exact bytes Redis holds, `bytea`)
//! and votes, plus store totals and gate state, for either store.
//!
//! It speaks the store-neutral dump of [`crate::store::dump`]: a store's
//! state goes in as the records `hotrank export` would write
//! ([`Archive::export`], or [`Archive::upsert_articles`] for a few
//! articles), and comes out as records `hotrank import` would read
//! ([`Archive::records`], or [`Archive::article`] for one). Writes are
//! upserts that touch a row only when its value differs, so writing the
//! same state twice changes nothing. Seed 002's Abacus does the same with
//! Cassandra: write every post's count and sketch in batches, `SET` a
//! sketch back into Redis when it is missing.
//!
//! Tables and what the later pipeline adds: docs/design.md, "Archive".
//! The schema is versioned SQL embedded in the binary ([`schema`]), applied
//! at connect.

mod pipeline;
mod read;
mod schema;
mod write;

use std::collections::HashMap;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use crate::config::{ArchiveConfig, valid_archive_schema};
use crate::model::{ArticleId, Timestamp};

pub use pipeline::{PipelineRow, PipelineTotals};
pub use schema::SCHEMA_VERSION;

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("archive database: {0}")]
    Db(#[from] sqlx::Error),
    #[error("archive: {0}")]
    Invalid(String),
}

/// How to reach the archive.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchiveOptions {
    /// `postgres://…`
    pub url: String,
    /// The schema holding the tables (created when missing).
    pub schema: String,
    /// Articles per transaction (and per read page).
    pub batch_articles: usize,
    pub max_connections: u32,
    pub connect_timeout: Duration,
}

impl ArchiveOptions {
    pub fn from_config(c: &ArchiveConfig) -> Self {
        ArchiveOptions {
            url: c.url.clone(),
            schema: c.schema.clone(),
            batch_articles: c.batch_articles,
            max_connections: c.max_connections,
            connect_timeout: Duration::from_millis(c.connect_timeout_ms),
        }
    }
}

/// Each article's own position in its source (JSON of the pipeline's
/// `ArticlePosition`), by article.
pub type ArticlePositions = HashMap<ArticleId, String>;

/// Where the state being written stands in its source: `as_of` is the
/// source's time (unix seconds) and `position` an opaque marker of what it
/// includes (`None` keeps the one stored); `per_article` overrides it for
/// the articles it names (the pipeline's
/// `ArticlePosition`s, `crate::pipeline`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourcePosition {
    pub as_of: Timestamp,
    pub position: Option<String>,
    pub per_article: ArticlePositions,
}

impl SourcePosition {
    pub fn at(as_of: Timestamp) -> Self {
        SourcePosition {
            as_of,
            ..Default::default()
        }
    }

    /// The position stamped on article `id`.
    fn of(&self, id: &ArticleId) -> Option<String> {
        self.per_article
            .get(id)
            .cloned()
            .or_else(|| self.position.clone())
    }
}

/// What a write did. `rows` counts every row offered (articles, counter
/// rows, votes, totals, quarantine hours, gate entries); `rows_changed`
/// those inserted, updated or deleted. A write of unchanged state has
/// `rows_changed == 0`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    pub articles: u64,
    pub articles_changed: u64,
    pub rows: u64,
    pub rows_changed: u64,
}

impl Written {
    fn add(&mut self, o: Written) {
        self.articles += o.articles;
        self.articles_changed += o.articles_changed;
        self.rows += o.rows;
        self.rows_changed += o.rows_changed;
    }
}

/// A connection pool to one archive schema.
#[derive(Clone)]
pub struct Archive {
    pool: PgPool,
    schema: String,
    batch: usize,
}

impl Archive {
    /// Connects and brings the schema to [`SCHEMA_VERSION`] (creating it
    /// when missing). Refuses a schema written by a newer hotrank.
    pub async fn connect(o: &ArchiveOptions) -> Result<Archive, ArchiveError> {
        if !valid_archive_schema(&o.schema) {
            return Err(ArchiveError::Invalid(format!(
                "schema {:?} is invalid: use 1-63 of [a-z0-9_], not starting with a digit",
                o.schema
            )));
        }
        if o.batch_articles == 0 {
            return Err(ArchiveError::Invalid("batch_articles must be > 0".into()));
        }
        let opts: PgConnectOptions = o.url.parse()?;
        let opts = opts
            .application_name("hotrank")
            .options([("search_path", o.schema.as_str())]);
        let pool = PgPoolOptions::new()
            .max_connections(o.max_connections.max(1))
            .acquire_timeout(o.connect_timeout)
            .connect_with(opts)
            .await?;
        if let Err(e) = schema::migrate(&pool, &o.schema).await {
            pool.close().await;
            return Err(e);
        }
        Ok(Archive {
            pool,
            schema: o.schema.clone(),
            batch: o.batch_articles,
        })
    }

    /// The schema this archive's tables live in.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The pool, for callers that query the tables directly.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Closes every connection.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}
