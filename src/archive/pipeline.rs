//! The pipeline's disaster recovery state in the archive (docs/design.md,
//! "Disaster recovery"): the epoch its positions belong to and the
//! journal floor, written by the archive writer after each flush; and the
//! positions a restore replays the journal from.

use super::{Archive, ArchiveError};

/// The `pipeline` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineRow {
    pub epoch: String,
    /// Per partition, the oldest raw entry id a restore may still need.
    pub floor: Vec<String>,
}

/// The store totals as the archive writer read them in pipeline mode, with
/// the position they were read at (JSON, `IngestPipeline::totals_position`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineTotals {
    pub counted: u64,
    pub quarantine: [u64; 4],
    pub by_hour: Vec<(i64, [u64; 4])>,
    pub position: String,
}

impl Archive {
    /// The pipeline row, if a flush with a journal wrote one.
    pub async fn pipeline(&self) -> Result<Option<PipelineRow>, ArchiveError> {
        let row: Option<(String, String)> =
            sqlx::query_as("SELECT epoch, journal_floor FROM pipeline WHERE id = 1")
                .fetch_optional(&self.pool)
                .await?;
        row.map(|(epoch, floor)| {
            Ok(PipelineRow {
                epoch,
                floor: serde_json::from_str(&floor)
                    .map_err(|e| ArchiveError::Invalid(format!("pipeline.journal_floor: {e}")))?,
            })
        })
        .transpose()
    }

    /// Records the epoch and floor (after a flush). Refuses another epoch
    /// than the one recorded: that Redis is not the one this archive
    /// holds.
    pub async fn set_pipeline(&self, row: &PipelineRow, now: i64) -> Result<(), ArchiveError> {
        let floor =
            serde_json::to_string(&row.floor).map_err(|e| ArchiveError::Invalid(e.to_string()))?;
        let done = sqlx::query(
            "INSERT INTO pipeline (id, epoch, journal_floor, updated_at) VALUES (1, $1, $2, $3)
             ON CONFLICT (id) DO UPDATE SET journal_floor = EXCLUDED.journal_floor,
                 updated_at = EXCLUDED.updated_at
             WHERE pipeline.epoch = EXCLUDED.epoch",
        )
        .bind(&row.epoch)
        .bind(floor)
        .bind(now)
        .execute(&self.pool)
        .await?;
        if done.rows_affected() == 0 {
            return Err(ArchiveError::Invalid(format!(
                "the archive belongs to another pipeline epoch than Redis's ({}): \
                 this Redis is not the one the archive holds",
                row.epoch
            )));
        }
        Ok(())
    }

    /// Stores the totals (`totals`, `quarantine_hours`) with the position
    /// they were read at, in one transaction. Only the pipeline row's
    /// epoch's writer calls it (after `set_pipeline`).
    pub async fn set_pipeline_totals(
        &self,
        t: &PipelineTotals,
        now: i64,
    ) -> Result<(), ArchiveError> {
        let mut tx = self.pool.begin().await?;
        super::write::write_totals(
            &mut tx,
            t.counted,
            &t.quarantine,
            &t.by_hour,
            &super::SourcePosition::at(now),
        )
        .await?;
        sqlx::query("UPDATE pipeline SET totals_position = $1 WHERE id = 1")
            .bind(&t.position)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The position the archived totals were read at, if a pipeline flush
    /// stored them.
    pub async fn totals_position(&self) -> Result<Option<String>, ArchiveError> {
        let row: Option<(Option<String>,)> =
            sqlx::query_as("SELECT totals_position FROM pipeline WHERE id = 1")
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.and_then(|(p,)| p))
    }

    /// Every article's stored source position (those that have one).
    pub async fn positions(&self) -> Result<Vec<(String, String)>, ArchiveError> {
        Ok(sqlx::query_as(
            "SELECT id, source_position FROM articles WHERE source_position IS NOT NULL",
        )
        .fetch_all(&self.pool)
        .await?)
    }
}
