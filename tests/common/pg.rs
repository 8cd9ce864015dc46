//! The real PostgreSQL the archive suites use (127.0.0.1:5432, user
//! postgres, db test; `HOTRANK_TEST_PG_URL` overrides): a schema of each
//! test's own, dropped at the end.

use std::sync::atomic::{AtomicU32, Ordering};

use sqlx::Connection;

use hotrank::archive::{Archive, ArchiveOptions};

pub fn pg_url() -> String {
    std::env::var("HOTRANK_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// A schema of this test's own, dropped (with everything in it) on drop.
pub struct Schema {
    pub name: String,
}

impl Schema {
    pub fn new() -> Schema {
        static N: AtomicU32 = AtomicU32::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        Schema {
            name: format!(
                "hrtest_{}_{}_{nanos}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ),
        }
    }

    /// Small batches, so that exports and reads take several.
    pub fn options(&self) -> ArchiveOptions {
        ArchiveOptions {
            url: pg_url(),
            schema: self.name.clone(),
            batch_articles: 7,
            max_connections: 2,
            connect_timeout: std::time::Duration::from_secs(10),
        }
    }

    pub async fn archive(&self) -> Archive {
        Archive::connect(&self.options())
            .await
            .expect("connect to PostgreSQL at 127.0.0.1:5432 (see tests/archive.rs)")
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name);
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                if let Ok(mut c) = sqlx::PgConnection::connect(&pg_url()).await {
                    let _ = sqlx::raw_sql(&sql).execute(&mut c).await;
                }
            });
        })
        .join();
    }
}
