//! Writing dump records to the archive: batched upserts (`UNNEST` of one
//! array per column) that update a row only when a value differs.

use std::collections::HashSet;

use sqlx::{Postgres, Transaction};

use super::{Archive, ArchiveError, SourcePosition, Written};
use crate::model::ArticleId;
use crate::store::dump::{DumpBucket, DumpCounters, DumpVotes, Record, bytes_from_b64};

/// Gate entries per statement.
const GATE_CHUNK: usize = 5000;

/// The fields of one `Record::Article`.
pub(super) struct ArticleRef<'a> {
    pub id: &'a ArticleId,
    pub record: &'a Record,
    pub lifetime: &'a DumpCounters,
    pub hours: &'a [DumpBucket],
    pub days: &'a [DumpBucket],
    pub votes: &'a DumpVotes,
}

impl<'a> ArticleRef<'a> {
    pub fn of(r: &'a Record) -> Option<Self> {
        match r {
            Record::Article {
                id,
                lifetime,
                hours,
                days,
                votes,
                ..
            } => Some(ArticleRef {
                id,
                record: r,
                lifetime,
                hours,
                days,
                votes,
            }),
            _ => None,
        }
    }
}

fn count(v: u64, what: &str) -> Result<i64, ArchiveError> {
    i64::try_from(v).map_err(|_| ArchiveError::Invalid(format!("{what} = {v} exceeds 2^63-1")))
}

/// One array per column of `counters`.
#[derive(Default)]
struct CounterRows {
    article: Vec<String>,
    span: Vec<String>,
    at: Vec<i64>,
    /// pv, likes, comments, favorites, shares, dwell_s, dwell_n, q_dup,
    /// q_rl, q_bot, q_rep.
    n: [Vec<i64>; 11],
    uv: Vec<Option<Vec<u8>>>,
}

impl CounterRows {
    fn push(
        &mut self,
        id: &ArticleId,
        span: &str,
        at: i64,
        c: &DumpCounters,
    ) -> Result<(), ArchiveError> {
        let vals = [
            c.pv,
            c.likes,
            c.comments,
            c.favorites,
            c.shares,
            c.dwell_seconds,
            c.dwell_reports,
            c.quarantine[0],
            c.quarantine[1],
            c.quarantine[2],
            c.quarantine[3],
        ];
        for (col, v) in self.n.iter_mut().zip(vals) {
            col.push(count(v, &format!("article {id} counter"))?);
        }
        self.article.push(id.as_str().to_string());
        self.span.push(span.to_string());
        self.at.push(at);
        self.uv.push(if c.uv.is_empty() {
            None
        } else {
            Some(bytes_from_b64(&c.uv).map_err(|e| ArchiveError::Invalid(format!("{id}: {e}")))?)
        });
        Ok(())
    }
}

fn ids_of(rows: Vec<(String,)>) -> impl Iterator<Item = String> {
    rows.into_iter().map(|(s,)| s)
}

impl Archive {
    /// Upserts some articles' records (everything else is refused), in
    /// transactions of `batch_articles`, stamping changed articles with
    /// `at`. The incremental path: the pipeline's writer flushes the
    /// articles that changed since its last flush.
    pub async fn upsert_articles(
        &self,
        records: &[Record],
        at: &SourcePosition,
    ) -> Result<Written, ArchiveError> {
        let mut arts = Vec::with_capacity(records.len());
        for r in records {
            arts.push(ArticleRef::of(r).ok_or_else(|| {
                ArchiveError::Invalid("upsert_articles takes article records only".into())
            })?);
        }
        let mut total = Written::default();
        for chunk in arts.chunks(self.batch) {
            total.add(self.write_articles(chunk, at).await?);
        }
        Ok(total)
    }

    /// Writes a store's full state (the records of `hotrank export`):
    /// articles in batches, calling `progress` after each, then totals,
    /// then the gate state, which replaces the archived one. Articles the
    /// archive holds and the records do not (evicted ones, later) stay.
    pub async fn export(
        &self,
        records: &[Record],
        at: &SourcePosition,
        mut progress: impl FnMut(&Written),
    ) -> Result<Written, ArchiveError> {
        let arts: Vec<ArticleRef<'_>> = records.iter().filter_map(ArticleRef::of).collect();
        let mut total = Written::default();
        for chunk in arts.chunks(self.batch) {
            total.add(self.write_articles(chunk, at).await?);
            progress(&total);
        }
        let mut tx = self.pool.begin().await?;
        for r in records {
            if let Record::Totals {
                counted,
                quarantine,
                by_hour,
            } = r
            {
                total.add(write_totals(&mut tx, *counted, quarantine, by_hour, at).await?);
            }
        }
        total.add(replace_gate(&mut tx, records).await?);
        tx.commit().await?;
        progress(&total);
        Ok(total)
    }

    async fn write_articles(
        &self,
        arts: &[ArticleRef<'_>],
        at: &SourcePosition,
    ) -> Result<Written, ArchiveError> {
        let mut seen = HashSet::with_capacity(arts.len());
        let mut ids = Vec::with_capacity(arts.len());
        let mut published = Vec::with_capacity(arts.len());
        let mut metas = Vec::with_capacity(arts.len());
        let mut known = Vec::with_capacity(arts.len());
        let mut deleted = Vec::with_capacity(arts.len());
        let mut ups = Vec::with_capacity(arts.len());
        let mut downs = Vec::with_capacity(arts.len());
        let mut voters = Vec::with_capacity(arts.len());
        let mut positions = Vec::with_capacity(arts.len());
        let mut rows = CounterRows::default();
        for a in arts {
            if !seen.insert(a.id) {
                return Err(ArchiveError::Invalid(format!(
                    "article {} appears twice",
                    a.id
                )));
            }
            let Record::Article {
                meta,
                known: k,
                deleted: d,
                ..
            } = a.record
            else {
                unreachable!("ArticleRef holds an article record");
            };
            ids.push(a.id.as_str().to_string());
            positions.push(at.of(a.id));
            published.push(meta.published_at);
            metas.push(
                serde_json::to_string(meta)
                    .map_err(|e| ArchiveError::Invalid(format!("{}: {e}", a.id)))?,
            );
            known.push(*k);
            deleted.push(*d);
            ups.push(count(a.votes.ups, "ups")?);
            downs.push(count(a.votes.downs, "downs")?);
            if let Some(v) = a.votes.voters.iter().find(|v| v.contains(',')) {
                return Err(ArchiveError::Invalid(format!("{}: voter {v:?}", a.id)));
            }
            voters.push(a.votes.voters.join(","));
            rows.push(a.id, "l", 0, a.lifetime)?;
            for b in a.hours {
                rows.push(a.id, "h", b.at, &b.c)?;
            }
            for b in a.days {
                rows.push(a.id, "d", b.at, &b.c)?;
            }
        }
        let offered = (ids.len() * 2 + rows.article.len()) as u64;
        let mut tx = self.pool.begin().await?;
        let changed: Vec<(String,)> = sqlx::query_as(
            "INSERT INTO articles AS t (id, published_at, meta, known, deleted, as_of, source_position)
             SELECT u.id, u.published_at, u.meta::jsonb, u.known, u.deleted, $6, u.pos
             FROM UNNEST($1::text[], $2::int8[], $3::text[], $4::bool[], $5::bool[], $7::text[])
                  AS u(id, published_at, meta, known, deleted, pos)
             ON CONFLICT (id) DO UPDATE SET
                published_at = EXCLUDED.published_at, meta = EXCLUDED.meta,
                known = EXCLUDED.known, deleted = EXCLUDED.deleted, as_of = EXCLUDED.as_of,
                source_position = COALESCE(EXCLUDED.source_position, t.source_position)
             WHERE (t.published_at, t.meta, t.known, t.deleted)
                   IS DISTINCT FROM
                   (EXCLUDED.published_at, EXCLUDED.meta, EXCLUDED.known, EXCLUDED.deleted)
                OR (EXCLUDED.source_position IS NOT NULL
                    AND EXCLUDED.source_position IS DISTINCT FROM t.source_position)
             RETURNING t.id",
        )
        .bind(&ids)
        .bind(&published)
        .bind(&metas)
        .bind(&known)
        .bind(&deleted)
        .bind(at.as_of)
        .bind(&positions)
        .fetch_all(&mut *tx)
        .await?;
        let mut rows_changed = changed.len() as u64;
        let meta_changed: HashSet<String> = ids_of(changed).collect();
        let c: Vec<(String,)> = sqlx::query_as(
            "INSERT INTO counters AS t (article, span, at, pv, likes, comments, favorites,
                 shares, dwell_s, dwell_n, q_dup, q_rl, q_bot, q_rep, uv)
             SELECT * FROM UNNEST($1::text[], $2::text[], $3::int8[], $4::int8[], $5::int8[],
                 $6::int8[], $7::int8[], $8::int8[], $9::int8[], $10::int8[], $11::int8[],
                 $12::int8[], $13::int8[], $14::int8[], $15::bytea[])
             ON CONFLICT (article, span, at) DO UPDATE SET
                pv = EXCLUDED.pv, likes = EXCLUDED.likes, comments = EXCLUDED.comments,
                favorites = EXCLUDED.favorites, shares = EXCLUDED.shares,
                dwell_s = EXCLUDED.dwell_s, dwell_n = EXCLUDED.dwell_n,
                q_dup = EXCLUDED.q_dup, q_rl = EXCLUDED.q_rl, q_bot = EXCLUDED.q_bot,
                q_rep = EXCLUDED.q_rep, uv = EXCLUDED.uv
             WHERE (t.pv, t.likes, t.comments, t.favorites, t.shares, t.dwell_s, t.dwell_n,
                    t.q_dup, t.q_rl, t.q_bot, t.q_rep, t.uv)
                   IS DISTINCT FROM
                   (EXCLUDED.pv, EXCLUDED.likes, EXCLUDED.comments, EXCLUDED.favorites,
                    EXCLUDED.shares, EXCLUDED.dwell_s, EXCLUDED.dwell_n, EXCLUDED.q_dup,
                    EXCLUDED.q_rl, EXCLUDED.q_bot, EXCLUDED.q_rep, EXCLUDED.uv)
             RETURNING t.article",
        )
        .bind(&rows.article)
        .bind(&rows.span)
        .bind(&rows.at)
        .bind(&rows.n[0])
        .bind(&rows.n[1])
        .bind(&rows.n[2])
        .bind(&rows.n[3])
        .bind(&rows.n[4])
        .bind(&rows.n[5])
        .bind(&rows.n[6])
        .bind(&rows.n[7])
        .bind(&rows.n[8])
        .bind(&rows.n[9])
        .bind(&rows.n[10])
        .bind(&rows.uv)
        .fetch_all(&mut *tx)
        .await?;
        rows_changed += c.len() as u64;
        let v: Vec<(String,)> = sqlx::query_as(
            "INSERT INTO votes AS t (article, ups, downs, voters)
             SELECT u.article, u.ups, u.downs, string_to_array(u.voters, ',')
             FROM UNNEST($1::text[], $2::int8[], $3::int8[], $4::text[])
                  AS u(article, ups, downs, voters)
             ON CONFLICT (article) DO UPDATE SET
                ups = EXCLUDED.ups, downs = EXCLUDED.downs, voters = EXCLUDED.voters
             WHERE (t.ups, t.downs, t.voters)
                   IS DISTINCT FROM (EXCLUDED.ups, EXCLUDED.downs, EXCLUDED.voters)
             RETURNING t.article",
        )
        .bind(&ids)
        .bind(&ups)
        .bind(&downs)
        .bind(&voters)
        .fetch_all(&mut *tx)
        .await?;
        rows_changed += v.len() as u64;
        // Articles whose counters or votes changed but not their meta row:
        // stamp them too, so as_of says which source state a row reflects.
        let mut stamp: Vec<String> = ids_of(c)
            .chain(ids_of(v))
            .filter(|id| !meta_changed.contains(id))
            .collect();
        stamp.sort();
        stamp.dedup();
        if !stamp.is_empty() {
            let pos_of: std::collections::HashMap<&str, &Option<String>> =
                ids.iter().map(String::as_str).zip(&positions).collect();
            let stamp_pos: Vec<Option<String>> = stamp
                .iter()
                .map(|id| pos_of.get(id.as_str()).and_then(|p| (*p).clone()))
                .collect();
            sqlx::query(
                "UPDATE articles AS a SET as_of = $2,
                    source_position = COALESCE(u.pos, a.source_position)
                 FROM UNNEST($1::text[], $3::text[]) AS u(id, pos)
                 WHERE a.id = u.id",
            )
            .bind(&stamp)
            .bind(at.as_of)
            .bind(&stamp_pos)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(Written {
            articles: ids.len() as u64,
            articles_changed: (meta_changed.len() + stamp.len()) as u64,
            rows: offered,
            rows_changed,
        })
    }
}

pub(super) async fn write_totals(
    tx: &mut Transaction<'_, Postgres>,
    counted: u64,
    q: &[u64; 4],
    by_hour: &[(i64, [u64; 4])],
    at: &SourcePosition,
) -> Result<Written, ArchiveError> {
    let r = sqlx::query(
        "INSERT INTO totals AS t (id, counted, q_dup, q_rl, q_bot, q_rep, as_of)
         VALUES (1, $1, $2, $3, $4, $5, $6)
         ON CONFLICT (id) DO UPDATE SET counted = EXCLUDED.counted, q_dup = EXCLUDED.q_dup,
            q_rl = EXCLUDED.q_rl, q_bot = EXCLUDED.q_bot, q_rep = EXCLUDED.q_rep,
            as_of = EXCLUDED.as_of
         WHERE (t.counted, t.q_dup, t.q_rl, t.q_bot, t.q_rep)
               IS DISTINCT FROM
               (EXCLUDED.counted, EXCLUDED.q_dup, EXCLUDED.q_rl, EXCLUDED.q_bot, EXCLUDED.q_rep)",
    )
    .bind(count(counted, "counted")?)
    .bind(count(q[0], "quarantine")?)
    .bind(count(q[1], "quarantine")?)
    .bind(count(q[2], "quarantine")?)
    .bind(count(q[3], "quarantine")?)
    .bind(at.as_of)
    .execute(&mut **tx)
    .await?;
    let mut changed = r.rows_affected();
    let hours: Vec<i64> = by_hour.iter().map(|(h, _)| *h).collect();
    let mut cols: [Vec<i64>; 4] = Default::default();
    for (_, q) in by_hour {
        for (col, v) in cols.iter_mut().zip(q) {
            col.push(count(*v, "quarantine")?);
        }
    }
    let r = sqlx::query(
        "INSERT INTO quarantine_hours AS t (hour, q_dup, q_rl, q_bot, q_rep)
         SELECT * FROM UNNEST($1::int8[], $2::int8[], $3::int8[], $4::int8[], $5::int8[])
         ON CONFLICT (hour) DO UPDATE SET q_dup = EXCLUDED.q_dup, q_rl = EXCLUDED.q_rl,
            q_bot = EXCLUDED.q_bot, q_rep = EXCLUDED.q_rep
         WHERE (t.q_dup, t.q_rl, t.q_bot, t.q_rep)
               IS DISTINCT FROM (EXCLUDED.q_dup, EXCLUDED.q_rl, EXCLUDED.q_bot, EXCLUDED.q_rep)",
    )
    .bind(&hours)
    .bind(&cols[0])
    .bind(&cols[1])
    .bind(&cols[2])
    .bind(&cols[3])
    .execute(&mut **tx)
    .await?;
    changed += r.rows_affected();
    Ok(Written {
        rows: 1 + hours.len() as u64,
        rows_changed: changed,
        ..Written::default()
    })
}

/// The gate key of a record: (kind, key), unique per entry.
fn gate_key(r: &Record) -> Option<(&'static str, String)> {
    Some(match r {
        Record::Dedupe {
            article,
            kind,
            visitor,
            ..
        } => ("dedupe", format!("{article} {kind} {visitor}")),
        Record::EventId { key, .. } => ("event_id", key.clone()),
        Record::Rate { scope, key, .. } => ("rate", format!("{scope:?} {key}")),
        _ => return None,
    })
}

/// Makes the `gate` table hold exactly the records' gate entries.
async fn replace_gate(
    tx: &mut Transaction<'_, Postgres>,
    records: &[Record],
) -> Result<Written, ArchiveError> {
    let mut kinds = Vec::new();
    let mut keys = Vec::new();
    let mut bodies = Vec::new();
    for r in records {
        if let Some((kind, key)) = gate_key(r) {
            kinds.push(kind.to_string());
            keys.push(key);
            bodies
                .push(serde_json::to_string(r).map_err(|e| ArchiveError::Invalid(e.to_string()))?);
        }
    }
    let mut changed = 0;
    for start in (0..kinds.len()).step_by(GATE_CHUNK) {
        let end = (start + GATE_CHUNK).min(kinds.len());
        let r = sqlx::query(
            "INSERT INTO gate AS t (kind, key, record)
             SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[])
             ON CONFLICT (kind, key) DO UPDATE SET record = EXCLUDED.record
             WHERE t.record IS DISTINCT FROM EXCLUDED.record",
        )
        .bind(&kinds[start..end])
        .bind(&keys[start..end])
        .bind(&bodies[start..end])
        .execute(&mut **tx)
        .await?;
        changed += r.rows_affected();
    }
    let r = sqlx::query(
        "DELETE FROM gate g WHERE NOT EXISTS (
            SELECT 1 FROM UNNEST($1::text[], $2::text[]) AS u(kind, key)
            WHERE u.kind = g.kind AND u.key = g.key)",
    )
    .bind(&kinds)
    .bind(&keys)
    .execute(&mut **tx)
    .await?;
    changed += r.rows_affected();
    Ok(Written {
        rows: kinds.len() as u64,
        rows_changed: changed,
        ..Written::default()
    })
}
