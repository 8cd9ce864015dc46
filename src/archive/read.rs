//! Reading the archive back as dump records, in article id order (byte
//! order: the id columns are `COLLATE "C"`), so that `hotrank import`'s
//! loaders for either store restore from it.

use std::collections::HashMap;

use sqlx::Row;
use sqlx::postgres::PgRow;

use super::{Archive, ArchiveError};
use crate::model::{ArticleId, ArticleMeta};
use crate::store::StoreError;
use crate::store::dump::{
    ArticleRecords, ArticleSource, DUMP_VERSION, DumpBucket, DumpCounters, DumpVotes, Record,
};

impl ArticleSource for Archive {
    fn articles<'a>(&'a self, ids: &'a [ArticleId]) -> ArticleRecords<'a> {
        Box::pin(async move {
            Archive::articles(self, ids)
                .await
                .map_err(|e| StoreError::Unavailable(e.to_string()))
        })
    }
}

fn bad(e: impl std::fmt::Display) -> ArchiveError {
    ArchiveError::Invalid(e.to_string())
}

fn unsigned(v: i64) -> Result<u64, ArchiveError> {
    u64::try_from(v).map_err(|_| bad(format!("negative count {v}")))
}

fn counters_of(row: &PgRow) -> Result<DumpCounters, ArchiveError> {
    use base64::Engine;
    let n = |i: usize| -> Result<u64, ArchiveError> { unsigned(row.try_get::<i64, _>(i)?) };
    let uv: Option<Vec<u8>> = row.try_get(14)?;
    Ok(DumpCounters {
        pv: n(3)?,
        likes: n(4)?,
        comments: n(5)?,
        favorites: n(6)?,
        shares: n(7)?,
        dwell_seconds: n(8)?,
        dwell_reports: n(9)?,
        quarantine: [n(10)?, n(11)?, n(12)?, n(13)?],
        uv: uv.map_or_else(String::new, |b| {
            base64::engine::general_purpose::STANDARD.encode(b)
        }),
    })
}

/// Which articles [`Archive::articles_where`] reads.
#[derive(Clone, Copy)]
enum Cond<'a> {
    /// Ids after this one (paging).
    After(&'a str),
    /// These ids.
    Any(&'a [String]),
}

#[derive(Default)]
struct Spans {
    lifetime: DumpCounters,
    hours: Vec<DumpBucket>,
    days: Vec<DumpBucket>,
}

impl Archive {
    /// One article's record (restore one article), or `None` when the
    /// archive does not hold it.
    pub async fn article(&self, id: &ArticleId) -> Result<Option<Record>, ArchiveError> {
        Ok(self.articles(std::slice::from_ref(id)).await?.pop())
    }

    /// The records of `ids` the archive holds, in id order, read with one
    /// query per table (restore of many evicted articles at once).
    pub async fn articles(&self, ids: &[ArticleId]) -> Result<Vec<Record>, ArchiveError> {
        let ids: Vec<String> = ids.iter().map(|i| i.as_str().to_string()).collect();
        self.articles_where(Cond::Any(&ids), ids.len().max(1)).await
    }

    /// Everything the archive holds, as the records `hotrank import` reads:
    /// a header, articles in id order (read in pages of `batch_articles`,
    /// `progress` called with the count so far), totals, gate entries.
    pub async fn records(
        &self,
        mut progress: impl FnMut(u64),
    ) -> Result<Vec<Record>, ArchiveError> {
        let mut out = vec![Record::Header {
            version: DUMP_VERSION,
            source: "archive".into(),
        }];
        let mut after = String::new();
        let mut n = 0u64;
        loop {
            let page = self.articles_where(Cond::After(&after), self.batch).await?;
            let Some(Record::Article { id, .. }) = page.last() else {
                break;
            };
            after = id.as_str().to_string();
            n += page.len() as u64;
            let full = page.len() == self.batch;
            out.extend(page);
            progress(n);
            if !full {
                break;
            }
        }
        let totals = sqlx::query("SELECT counted, q_dup, q_rl, q_bot, q_rep FROM totals")
            .fetch_optional(&self.pool)
            .await?;
        if let Some(t) = totals {
            let n = |i: usize| -> Result<u64, ArchiveError> { unsigned(t.try_get::<i64, _>(i)?) };
            let hours = sqlx::query(
                "SELECT hour, q_dup, q_rl, q_bot, q_rep FROM quarantine_hours ORDER BY hour",
            )
            .fetch_all(&self.pool)
            .await?;
            let mut by_hour = Vec::with_capacity(hours.len());
            for h in &hours {
                let q =
                    |i: usize| -> Result<u64, ArchiveError> { unsigned(h.try_get::<i64, _>(i)?) };
                by_hour.push((h.try_get::<i64, _>(0)?, [q(1)?, q(2)?, q(3)?, q(4)?]));
            }
            out.push(Record::Totals {
                counted: n(0)?,
                quarantine: [n(1)?, n(2)?, n(3)?, n(4)?],
                by_hour,
            });
        }
        let gate: Vec<(String,)> = sqlx::query_as("SELECT record FROM gate ORDER BY kind, key")
            .fetch_all(&self.pool)
            .await?;
        for (body,) in gate {
            out.push(serde_json::from_str(&body).map_err(bad)?);
        }
        Ok(out)
    }

    /// Up to `limit` articles matching `cond`, in id order, with their
    /// counters and votes.
    async fn articles_where(
        &self,
        cond: Cond<'_>,
        limit: usize,
    ) -> Result<Vec<Record>, ArchiveError> {
        let filter = match cond {
            Cond::After(_) => "id > $1",
            Cond::Any(_) => "id = ANY($1)",
        };
        let sql = format!(
            "SELECT id, meta::text, known, deleted FROM articles WHERE {filter} ORDER BY id LIMIT {limit}"
        );
        let query = sqlx::query(&sql);
        let query = match cond {
            Cond::After(after) => query.bind(after),
            Cond::Any(ids) => query.bind(ids),
        };
        let rows = query.fetch_all(&self.pool).await?;
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<String> = rows
            .iter()
            .map(|r| r.try_get::<String, _>(0))
            .collect::<Result<_, _>>()?;
        let counter_rows = sqlx::query(
            "SELECT article, span, at, pv, likes, comments, favorites, shares, dwell_s,
                    dwell_n, q_dup, q_rl, q_bot, q_rep, uv
             FROM counters WHERE article = ANY($1) ORDER BY article, span, at",
        )
        .bind(&ids)
        .fetch_all(&self.pool)
        .await?;
        let mut spans: HashMap<String, Spans> = HashMap::new();
        for r in &counter_rows {
            let article: String = r.try_get(0)?;
            let span: String = r.try_get(1)?;
            let at: i64 = r.try_get(2)?;
            let c = counters_of(r)?;
            let s = spans.entry(article).or_default();
            match span.as_str() {
                "l" => s.lifetime = c,
                "h" => s.hours.push(DumpBucket { at, c }),
                "d" => s.days.push(DumpBucket { at, c }),
                other => return Err(bad(format!("unknown counter span {other:?}"))),
            }
        }
        let vote_rows: Vec<(String, i64, i64, Vec<String>)> =
            sqlx::query_as("SELECT article, ups, downs, voters FROM votes WHERE article = ANY($1)")
                .bind(&ids)
                .fetch_all(&self.pool)
                .await?;
        let mut votes: HashMap<String, DumpVotes> = HashMap::new();
        for (a, ups, downs, voters) in vote_rows {
            votes.insert(
                a,
                DumpVotes {
                    ups: unsigned(ups)?,
                    downs: unsigned(downs)?,
                    voters,
                },
            );
        }
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let id: String = r.try_get(0)?;
            let meta: String = r.try_get(1)?;
            let meta: ArticleMeta = serde_json::from_str(&meta).map_err(bad)?;
            let s = spans.remove(&id).unwrap_or_default();
            out.push(Record::Article {
                votes: votes.remove(&id).unwrap_or_default(),
                id: ArticleId::parse(&id).map_err(|_| bad(format!("bad article id {id:?}")))?,
                meta,
                known: r.try_get(2)?,
                deleted: r.try_get(3)?,
                lifetime: s.lifetime,
                hours: s.hours,
                days: s.days,
            });
        }
        Ok(out)
    }
}
