//! The archive's schema: versioned SQL files compiled into the binary and
//! applied in order at connect, each once, recorded in
//! `archive_migrations`. A migration is never edited once released; a
//! change is a new file.

use sqlx::{PgPool, Postgres, Transaction};

use super::ArchiveError;

/// (version, name, SQL), in order.
const MIGRATIONS: &[(i32, &str, &str)] = &[
    (1, "articles", include_str!("migrations/0001_articles.sql")),
    (2, "pipeline", include_str!("migrations/0002_pipeline.sql")),
    (
        3,
        "pipeline_totals",
        include_str!("migrations/0003_pipeline_totals.sql"),
    ),
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i32 = MIGRATIONS[MIGRATIONS.len() - 1].0;

/// Creates the schema when missing and applies the migrations it lacks,
/// in one transaction under an advisory lock (concurrent starts wait).
pub async fn migrate(pool: &PgPool, schema: &str) -> Result<(), ArchiveError> {
    let mut tx = pool.begin().await?;
    match apply(&mut tx, schema).await {
        Ok(()) => Ok(tx.commit().await?),
        Err(e) => {
            // Now, not lazily: an open transaction would hold its locks.
            let _ = tx.rollback().await;
            Err(e)
        }
    }
}

async fn apply(tx: &mut Transaction<'_, Postgres>, schema: &str) -> Result<(), ArchiveError> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
        .bind(format!("hotrank archive {schema}"))
        .execute(&mut **tx)
        .await?;
    // The name is validated ([a-z0-9_], see config::valid_archive_schema).
    let create = format!("CREATE SCHEMA IF NOT EXISTS {schema}");
    sqlx::raw_sql(&create).execute(&mut **tx).await?;
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS archive_migrations (
            version    INT PRIMARY KEY,
            name       TEXT NOT NULL,
            applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
        )",
    )
    .execute(&mut **tx)
    .await?;
    let applied: Vec<i32> =
        sqlx::query_scalar("SELECT version FROM archive_migrations ORDER BY version")
            .fetch_all(&mut **tx)
            .await?;
    if let Some(&newest) = applied.last()
        && newest > SCHEMA_VERSION
    {
        return Err(ArchiveError::Invalid(format!(
            "schema {schema} is at version {newest}, newer than this hotrank knows \
             ({SCHEMA_VERSION}): upgrade hotrank"
        )));
    }
    for &(version, name, sql) in MIGRATIONS {
        if applied.contains(&version) {
            continue;
        }
        sqlx::raw_sql(sql).execute(&mut **tx).await?;
        sqlx::query("INSERT INTO archive_migrations (version, name) VALUES ($1, $2)")
            .bind(version)
            .bind(name)
            .execute(&mut **tx)
            .await?;
        tracing::info!(schema, version, name, "archive migration applied");
    }
    Ok(())
}
