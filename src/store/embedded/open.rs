//! Opening a data directory (the newest snapshot, then the log after it),
//! `hotrank repair` for a damaged log, and `hotrank import` into a new
//! directory.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use crate::store::StoreSettings;
use crate::store::snapshot::write_snapshot;
use crate::store::wal::{SalvageReport, Wal, WalConfig, WalError, salvage};

use super::durability::{Durability, SNAPSHOTS_KEPT, pipelined};
use super::error::OpenError;
use super::persist;
use super::state::Data;
use super::store::EmbeddedStore;

/// What `hotrank repair` kept, skipped and did.
#[derive(Debug, Clone)]
pub struct RepairReport {
    /// The snapshot the repair started from.
    pub snapshot_seq: Option<u64>,
    /// Records kept, damaged spans skipped, seqs missing.
    pub log: SalvageReport,
    /// The snapshot written (`None`: the log was not damaged; nothing changed).
    pub new_snapshot_seq: Option<u64>,
    /// Where the old segments were moved.
    pub moved_to: Option<PathBuf>,
}

/// Opening a data directory: how much was recovered.
#[derive(Debug, Clone, Default)]
pub struct RecoveryReport {
    pub snapshot_seq: Option<u64>,
    pub replayed_records: u64,
    /// Highest seq in snapshot and log: the last record recovered.
    pub last_seq: u64,
    pub truncated_bytes: u64,
    pub articles: usize,
    pub elapsed_ms: u128,
}

impl EmbeddedStore {
    /// Opens (or creates) a data directory: takes its lock, reads the newest
    /// valid snapshot, then every log record after it. Refuses (naming the
    /// file and byte offset) a log that is damaged anywhere but in a torn
    /// tail; see [`EmbeddedStore::repair`].
    pub fn open(
        d: Durability,
        settings: StoreSettings,
    ) -> Result<(Self, RecoveryReport), OpenError> {
        let started = Instant::now();
        let lock = d.lock()?;
        let (seq, mut data) = d.load_snapshot(&settings, true)?;
        let cfg = WalConfig {
            dir: d.wal_dir(),
            fsync: d.fsync,
            segment_bytes: d.segment_bytes,
            payload_version: persist::STATE_VERSION,
            storage: Arc::clone(&d.storage),
        };
        let (wal, stats) = pipelined(&mut data, |push| {
            Wal::open(cfg, seq.unwrap_or(0), |_, version, payload| {
                push(persist::decode_record(version, payload)?);
                Ok(())
            })
        })
        .map_err(|source| match source {
            WalError::Corrupt { .. } => OpenError::Damaged {
                wal_dir: d.wal_dir(),
                dir: d.dir.clone(),
                source,
            },
            source => OpenError::OpenLog {
                wal_dir: d.wal_dir(),
                source,
            },
        })?;
        let mut report = RecoveryReport {
            snapshot_seq: seq,
            replayed_records: stats.records,
            last_seq: wal.last_appended_seq(),
            truncated_bytes: stats.truncated_bytes,
            articles: data.articles.len(),
            elapsed_ms: 0,
        };
        let store = Self::assemble(data, Some(wal), Some(d), Some(lock), settings);
        *store.snapshot_seq.lock() = seq;
        report.elapsed_ms = started.elapsed().as_millis();
        Ok((store, report))
    }

    /// `hotrank repair`: rebuilds a data directory whose log is damaged.
    /// Reads the newest valid snapshot and every intact log record after it
    /// (skipping damaged bytes up to the next intact record), writes the
    /// result as a new snapshot, and moves the old segments aside into
    /// `wal-damaged-<unix time>/` (nothing is deleted). A log that is not
    /// damaged is left alone. Takes the directory's lock: stop the server
    /// first.
    pub fn repair(d: &Durability, settings: &StoreSettings) -> Result<RepairReport, OpenError> {
        let _lock = d.lock()?;
        let (seq, mut data) = d.load_snapshot(settings, true)?;
        let wal_dir = d.wal_dir();
        d.storage
            .create_dir_all(&wal_dir)
            .map_err(|source| OpenError::CreateDir {
                path: wal_dir.clone(),
                source,
            })?;
        let after = seq.unwrap_or(0);
        let log = salvage(&*d.storage, &wal_dir, after, |_, version, payload| {
            data.apply(&persist::decode_record(version, payload)?);
            Ok(())
        })
        .map_err(|source| OpenError::ReadLog {
            wal_dir: wal_dir.clone(),
            source,
        })?;
        let mut report = RepairReport {
            snapshot_seq: seq,
            log,
            new_snapshot_seq: None,
            moved_to: None,
        };
        if report.log.skipped.is_empty() && report.log.missing.is_empty() {
            return Ok(report);
        }
        let last = report.log.last_seq;
        let bytes = persist::encode_state(&data)?;
        let snap_dir = d.snapshot_dir();
        write_snapshot(
            &*d.storage,
            &snap_dir,
            last,
            persist::STATE_VERSION,
            &bytes,
            SNAPSHOTS_KEPT,
        )
        .map_err(|source| OpenError::WriteSnapshot {
            dir: snap_dir.clone(),
            source,
        })?;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |t| t.as_secs());
        let aside = d.dir.join(format!("wal-damaged-{stamp}"));
        let io = |source| OpenError::MoveAside {
            to: aside.clone(),
            source,
        };
        d.storage.create_dir_all(&aside).map_err(io)?;
        for name in d.storage.list(&wal_dir).map_err(io)? {
            d.storage
                .rename(&wal_dir.join(&name), &aside.join(&name))
                .map_err(io)?;
        }
        d.storage.sync_dir(&aside).map_err(io)?;
        d.storage.sync_dir(&wal_dir).map_err(io)?;
        report.new_snapshot_seq = Some(last);
        report.moved_to = Some(aside);
        Ok(report)
    }

    /// Writes dump records as the first snapshot of an empty data
    /// directory (`hotrank import`); open the store afterwards.
    pub fn import_into(
        d: &Durability,
        settings: &StoreSettings,
        records: &[crate::store::dump::Record],
    ) -> Result<u64, OpenError> {
        let _lock = d.lock()?;
        let snap_dir = d.snapshot_dir();
        let wal_dir = d.wal_dir();
        for dir in [&snap_dir, &wal_dir] {
            if d.storage.list(dir).is_ok_and(|names| !names.is_empty()) {
                return Err(OpenError::NotEmpty { dir: dir.clone() });
            }
        }
        let data = Data::import(records, settings)?;
        let n = data.articles.len() as u64;
        let bytes = persist::encode_state(&data)?;
        write_snapshot(
            &*d.storage,
            &snap_dir,
            0,
            persist::STATE_VERSION,
            &bytes,
            SNAPSHOTS_KEPT,
        )
        .map_err(|source| OpenError::WriteSnapshot {
            dir: snap_dir.clone(),
            source,
        })?;
        Ok(n)
    }
}
