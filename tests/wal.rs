//! Integration tests of the store's durability layer: the write-ahead log
//! (`hotrank::store::wal`) and snapshot files (`hotrank::store::snapshot`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{self, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hotrank::store::snapshot::{
    list_snapshots, read_latest_snapshot, read_snapshot, snapshot_file_name, write_snapshot,
    write_snapshot_with,
};
use hotrank::store::storage::Disk;
use hotrank::store::storage::sim::SimDisk;
use hotrank::store::wal::{
    FsyncPolicy, RECORD_HEADER_LEN, ReplayStats, SEGMENT_HEADER_LEN, Wal, WalConfig, WalError,
    encode_record,
};
use proptest::prelude::*;

fn cfg(dir: &Path, fsync: FsyncPolicy, segment_bytes: u64) -> WalConfig {
    WalConfig {
        fsync,
        segment_bytes,
        ..WalConfig::new(dir)
    }
}

/// The newest valid snapshot as (seq, payload).
fn latest(dir: &Path) -> Option<(u64, Vec<u8>)> {
    read_latest_snapshot(&Disk, dir)
        .unwrap()
        .map(|s| (s.seq, s.payload))
}

type Records = Vec<(u64, Vec<u8>)>;

fn open_collect(cfg: &WalConfig, after: u64) -> Result<(Wal, ReplayStats, Records), WalError> {
    let mut got = Vec::new();
    let (wal, stats) = Wal::open(cfg.clone(), after, |seq, _, payload| {
        got.push((seq, payload.to_vec()));
        Ok(())
    })?;
    Ok((wal, stats, got))
}

/// Deterministic payload of varying length (8..=107 bytes) for record `i`.
fn payload(i: u64) -> Vec<u8> {
    let len = 8 + (i * 37 % 100) as usize;
    let mut p = format!("rec-{i:08}-").into_bytes();
    p.resize(len, b'a' + (i % 26) as u8);
    p
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            name.starts_with("wal-") && name.ends_with(".log")
        })
        .collect();
    v.sort();
    v
}

fn first_seq_of(path: &Path) -> u64 {
    let name = path.file_name().unwrap().to_str().unwrap();
    name["wal-".len()..name.len() - ".log".len()]
        .parse()
        .unwrap()
}

/// Writes records 1..=n with `payload(i)` and closes the log.
fn write_log(c: &WalConfig, n: u64) {
    let (wal, _, _) = open_collect(c, 0).unwrap();
    let mut last = 0;
    for i in 1..=n {
        last = wal.append(&payload(i));
        assert_eq!(last, i);
    }
    wal.wait_durable_blocking(last).unwrap();
    wal.close().unwrap();
}

fn assert_records(got: &Records, from: u64, to: u64) {
    let seqs: Vec<u64> = got.iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs, (from..=to).collect::<Vec<_>>());
    for (seq, p) in got {
        assert_eq!(p, &payload(*seq), "payload of seq {seq}");
    }
}

/// Byte offset of the last record in a segment file (walks the framing).
fn last_record_offset(bytes: &[u8]) -> usize {
    let mut off = SEGMENT_HEADER_LEN;
    let mut last = off;
    while off < bytes.len() {
        last = off;
        let len = u32::from_le_bytes(bytes[off..off + 4].try_into().unwrap()) as usize;
        off += RECORD_HEADER_LEN + len;
    }
    assert_eq!(off, bytes.len());
    last
}

#[test]
fn round_trip_across_segments_and_after_seq() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), FsyncPolicy::Always, 1024);
    write_log(&c, 500);
    let segs = segments(dir.path());
    assert!(
        segs.len() >= 10,
        "expected many segments, got {}",
        segs.len()
    );
    for pair in segs.windows(2) {
        assert!(first_seq_of(&pair[0]) < first_seq_of(&pair[1]));
    }

    let (wal, stats, got) = open_collect(&c, 0).unwrap();
    assert_records(&got, 1, 500);
    assert_eq!(stats.records, 500);
    assert_eq!(stats.last_seq, 500);
    assert_eq!(stats.truncated_bytes, 0);
    assert_eq!(stats.segments, segs.len());
    let on_disk: u64 = segs.iter().map(|p| fs::metadata(p).unwrap().len()).sum();
    assert_eq!(wal.size_bytes(), on_disk);
    drop(wal);

    let (wal, stats, got) = open_collect(&c, 123).unwrap();
    assert_records(&got, 124, 500);
    assert_eq!(stats.records, 377);
    assert_eq!(stats.last_seq, 500);
    assert_eq!(wal.last_appended_seq(), 500);
    assert_eq!(wal.durable_seq(), 500);
    let seq = wal.append(&payload(501));
    assert_eq!(seq, 501);
    wal.wait_durable_blocking(seq).unwrap();
    drop(wal);

    let (_wal, _, got) = open_collect(&c, 499).unwrap();
    assert_records(&got, 500, 501);
}

#[test]
fn after_seq_beyond_the_log_starts_a_new_segment_and_gaps_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), FsyncPolicy::Always, 1 << 20);
    write_log(&c, 50);
    // A snapshot recorded seq 80 although the log only reached 50 before a crash.
    let (wal, stats, got) = open_collect(&c, 80).unwrap();
    assert!(got.is_empty());
    assert_eq!(stats.last_seq, 50);
    assert_eq!(wal.append(&payload(81)), 81);
    assert_eq!(wal.append(&payload(82)), 82);
    wal.close().unwrap();
    drop(wal);
    assert_eq!(segments(dir.path()).len(), 2);

    let (_wal, _, got) = open_collect(&c, 80).unwrap();
    assert_records(&got, 81, 82);
    drop(_wal);
    // Replaying from an older snapshot would miss 51..=80: refuse.
    let err = open_collect(&c, 40).err().unwrap();
    match err {
        WalError::Corrupt { reason, .. } => assert!(reason.contains("51..=80"), "{reason}"),
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn missing_leading_segments_not_covered_by_snapshot_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), FsyncPolicy::Never, 512);
    write_log(&c, 100);
    let segs = segments(dir.path());
    fs::remove_file(&segs[0]).unwrap();
    let second = first_seq_of(&segs[1]);
    assert!(matches!(open_collect(&c, 0), Err(WalError::Corrupt { .. })));
    let (_wal, _, got) = open_collect(&c, second - 1).unwrap();
    assert_records(&got, second, 100);
}

#[test]
fn torn_tail_at_every_offset_of_the_last_record() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), FsyncPolicy::Never, 2048);
    write_log(&c, 120);
    let last = segments(dir.path()).pop().unwrap();
    let original = fs::read(&last).unwrap();
    let start = last_record_offset(&original);
    let n = 120;

    for cut in start..original.len() {
        fs::write(&last, &original[..cut]).unwrap();
        let (wal, stats, got) = open_collect(&c, 0).unwrap();
        assert_records(&got, 1, n - 1);
        assert_eq!(stats.last_seq, n - 1);
        assert_eq!(stats.truncated_bytes, (cut - start) as u64, "cut at {cut}");
        assert_eq!(fs::metadata(&last).unwrap().len(), start as u64);
        // Appending continues with the dropped seq.
        let seq = wal.append(&payload(n));
        assert_eq!(seq, n);
        wal.wait_durable_blocking(seq).unwrap();
        drop(wal);
        assert_eq!(fs::read(&last).unwrap(), original, "cut at {cut}");
    }
    let (_wal, stats, got) = open_collect(&c, 0).unwrap();
    assert_records(&got, 1, n);
    assert_eq!(stats.truncated_bytes, 0);
}

#[test]
fn garbage_and_zeros_after_the_last_record_are_truncated() {
    let tails: Vec<Vec<u8>> = vec![
        vec![0u8; 4096],
        vec![0u8; 5],
        (0..1000u32).map(|i| (i * 7919 % 251) as u8).collect(),
        vec![0xff; 33],
    ];
    for tail in tails {
        let dir = tempfile::tempdir().unwrap();
        let c = cfg(dir.path(), FsyncPolicy::Never, 2048);
        write_log(&c, 60);
        let last = segments(dir.path()).pop().unwrap();
        let clean_len = fs::metadata(&last).unwrap().len();
        OpenOptions::new()
            .append(true)
            .open(&last)
            .unwrap()
            .write_all(&tail)
            .unwrap();

        let (wal, stats, got) = open_collect(&c, 0).unwrap();
        assert_records(&got, 1, 60);
        assert_eq!(stats.truncated_bytes, tail.len() as u64);
        assert_eq!(fs::metadata(&last).unwrap().len(), clean_len);
        assert_eq!(wal.append(&payload(61)), 61);
        drop(wal);
        let (_wal, stats, got) = open_collect(&c, 0).unwrap();
        assert_records(&got, 1, 61);
        assert_eq!(stats.truncated_bytes, 0);
    }
}

#[test]
fn flipped_byte_in_the_last_record_truncates_there() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), FsyncPolicy::Never, 2048);
    write_log(&c, 80);
    let last = segments(dir.path()).pop().unwrap();
    let original = fs::read(&last).unwrap();
    let start = last_record_offset(&original);
    // Every byte of the header, and a sample of the payload.
    let positions: Vec<usize> = (start..start + RECORD_HEADER_LEN)
        .chain((start + RECORD_HEADER_LEN..original.len()).step_by(5))
        .chain([original.len() - 1])
        .collect();
    for pos in positions {
        let mut bytes = original.clone();
        bytes[pos] ^= 0x5a;
        fs::write(&last, &bytes).unwrap();
        let (wal, stats, got) = open_collect(&c, 0).unwrap();
        assert_records(&got, 1, 79);
        assert_eq!(
            stats.truncated_bytes,
            (original.len() - start) as u64,
            "flip at {pos}"
        );
        assert_eq!(wal.append(&payload(80)), 80);
        drop(wal);
        assert_eq!(fs::read(&last).unwrap(), original);
    }
}

#[test]
fn flipped_byte_in_an_earlier_segment_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), FsyncPolicy::Never, 1024);
    write_log(&c, 100);
    let segs = segments(dir.path());
    assert!(segs.len() >= 3);
    let victim = &segs[1];
    let mut bytes = fs::read(victim).unwrap();
    let pos = SEGMENT_HEADER_LEN + RECORD_HEADER_LEN + 3;
    bytes[pos] ^= 1;
    fs::write(victim, &bytes).unwrap();

    let err = open_collect(&c, 0).err().expect("open must fail");
    match &err {
        WalError::Corrupt {
            path,
            offset,
            reason,
        } => {
            assert_eq!(path, victim);
            assert_eq!(*offset, SEGMENT_HEADER_LEN as u64);
            assert!(reason.contains("checksum"), "{reason}");
        }
        other => panic!("unexpected error {other}"),
    }
    let msg = err.to_string();
    assert!(msg.contains(&victim.display().to_string()), "{msg}");
    // The damaged segment is still there: nothing was silently dropped.
    assert_eq!(fs::read(victim).unwrap(), bytes);

    // Truncating an earlier segment is an error too.
    bytes[pos] ^= 1;
    fs::write(victim, &bytes[..bytes.len() - 3]).unwrap();
    assert!(matches!(open_collect(&c, 0), Err(WalError::Corrupt { .. })));

    // Once a snapshot covers the damaged segment, it is not even read.
    let covered_through = first_seq_of(&segs[2]) - 1;
    let (_wal, _, got) = open_collect(&c, covered_through).unwrap();
    assert_records(&got, covered_through + 1, 100);
}

#[test]
fn remove_through_deletes_only_fully_covered_segments() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), FsyncPolicy::Always, 1024);
    let (wal, _, _) = open_collect(&c, 0).unwrap();
    for i in 1..=300 {
        wal.append(&payload(i));
    }
    wal.wait_durable_blocking(300).unwrap();
    let segs = segments(dir.path());
    assert!(segs.len() >= 5);
    let firsts: Vec<u64> = segs.iter().map(|p| first_seq_of(p)).collect();
    let size_before = wal.size_bytes();
    let size_of_first_two: u64 = segs[..2]
        .iter()
        .map(|p| fs::metadata(p).unwrap().len())
        .sum();

    // One seq short of covering segment 2 completely: only segments 0 and 1 go.
    let through = firsts[3] - 2;
    wal.remove_through(through).unwrap();
    let left = segments(dir.path());
    assert_eq!(left, segs[2..].to_vec());
    assert_eq!(wal.size_bytes(), size_before - size_of_first_two);
    let on_disk: u64 = left.iter().map(|p| fs::metadata(p).unwrap().len()).sum();
    assert_eq!(wal.size_bytes(), on_disk);

    // Nothing changes when no further segment is fully covered.
    wal.remove_through(through).unwrap();
    assert_eq!(segments(dir.path()), left);

    // Everything covered: all but the active segment go.
    wal.remove_through(u64::MAX).unwrap();
    assert_eq!(segments(dir.path()), vec![segs.last().unwrap().clone()]);
    // The log keeps working after the removal.
    let seq = wal.append(&payload(301));
    wal.wait_durable_blocking(seq).unwrap();
    drop(wal);

    let (_wal, _, got) = open_collect(&c, 300).unwrap();
    assert_records(&got, 301, 301);
}

#[test]
fn always_policy_acknowledges_only_after_fsync() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), FsyncPolicy::Always, 4096);
    let (wal, _, _) = open_collect(&c, 0).unwrap();
    let wal = Arc::new(wal);
    // An observer checks the invariant durable <= synced while the log is busy.
    let stop = Arc::new(AtomicBool::new(false));
    let observer = {
        let (wal, stop) = (Arc::clone(&wal), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut checks = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let durable = wal.durable_seq();
                let synced = wal.synced_seq();
                assert!(durable <= synced, "durable {durable} > synced {synced}");
                checks += 1;
            }
            checks
        })
    };
    assert_eq!(wal.fsync_count(), 0);
    for i in 1..=200 {
        let seq = wal.append(&payload(i));
        wal.wait_durable_blocking(seq).unwrap();
        assert!(wal.synced_seq() >= seq);
        assert!(wal.fsync_count() >= 1);
    }
    stop.store(true, Ordering::Relaxed);
    assert!(observer.join().unwrap() > 0);

    // Under Interval, acknowledgement comes before the fsync.
    let dir2 = tempfile::tempdir().unwrap();
    let c2 = cfg(
        dir2.path(),
        FsyncPolicy::Interval(Duration::from_secs(3600)),
        4096,
    );
    let (wal2, _, _) = open_collect(&c2, 0).unwrap();
    let seq = wal2.append(b"x");
    wal2.wait_durable_blocking(seq).unwrap();
    assert_eq!(wal2.durable_seq(), seq);
    assert_eq!(wal2.synced_seq(), 0);
    assert_eq!(wal2.fsync_count(), 0);
    wal2.close().unwrap();
    assert_eq!(wal2.synced_seq(), seq);
    assert_eq!(wal2.fsync_count(), 1);
}

#[test]
fn interval_policy_fsyncs_within_the_interval() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(
        dir.path(),
        FsyncPolicy::Interval(Duration::from_millis(20)),
        1 << 20,
    );
    let (wal, _, _) = open_collect(&c, 0).unwrap();
    let seq = wal.append(b"x");
    wal.wait_durable_blocking(seq).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while wal.synced_seq() < seq {
        assert!(Instant::now() < deadline, "no fsync within 10 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(wal.fsync_count(), 1);
}

#[test]
fn never_policy_fsyncs_only_at_rotation_and_close() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), FsyncPolicy::Never, 256);
    let (wal, _, _) = open_collect(&c, 0).unwrap();
    let seq = wal.append(&[1; 100]);
    wal.wait_durable_blocking(seq).unwrap();
    assert_eq!(wal.fsync_count(), 0);
    for _ in 0..3 {
        let seq = wal.append(&[1; 100]);
        wal.wait_durable_blocking(seq).unwrap();
    }
    assert!(
        wal.fsync_count() >= 1,
        "rotation must fsync the old segment"
    );
    let before = wal.fsync_count();
    wal.close().unwrap();
    assert_eq!(wal.fsync_count(), before + 1);
}

#[test]
fn concurrent_tasks_group_commit_and_survive_reopen() {
    const TASKS: u64 = 64;
    const PER_TASK: u64 = 100;
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), FsyncPolicy::Always, 16 << 10);
    let (wal, _, _) = open_collect(&c, 0).unwrap();
    let wal = Arc::new(wal);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let acked: Vec<(u64, Vec<u8>)> = rt.block_on(async {
        let mut handles = Vec::new();
        for t in 0..TASKS {
            let wal = Arc::clone(&wal);
            handles.push(tokio::spawn(async move {
                let mut mine = Vec::new();
                for i in 0..PER_TASK {
                    let p = format!("task{t}-{i}").into_bytes();
                    let seq = wal.append(&p);
                    wal.wait_durable(seq).await.unwrap();
                    assert!(wal.durable_seq() >= seq);
                    mine.push((seq, p));
                }
                mine
            }));
        }
        let mut all = Vec::new();
        for h in handles {
            all.extend(h.await.unwrap());
        }
        all
    });
    let total = TASKS * PER_TASK;
    assert_eq!(acked.len() as u64, total);
    let seqs: HashSet<u64> = acked.iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs.len() as u64, total);
    assert_eq!(wal.durable_seq(), total);
    let fsyncs = wal.fsync_count();
    assert!(
        fsyncs < total,
        "no group commit: {fsyncs} fsyncs for {total} records"
    );
    wal.close().unwrap();
    drop(wal);

    let (_wal, stats, got) = open_collect(&c, 0).unwrap();
    assert_eq!(stats.records, total);
    let on_disk: HashMap<u64, Vec<u8>> = got.into_iter().collect();
    for (seq, p) in &acked {
        assert_eq!(on_disk.get(seq), Some(p), "seq {seq}");
    }
}

/// A log on a simulated disk of `capacity` bytes.
fn sim_cfg(disk: &SimDisk, fsync: FsyncPolicy, segment_bytes: u64) -> WalConfig {
    WalConfig {
        fsync,
        segment_bytes,
        storage: Arc::new(disk.clone()),
        ..WalConfig::new("/data/wal")
    }
}

fn sim_records(disk: &SimDisk) -> Records {
    let c = sim_cfg(disk, FsyncPolicy::Always, 1 << 20);
    let mut got = Vec::new();
    hotrank::store::wal::read_records(&*c.storage, &c.dir, 0, |seq, _, p| {
        got.push((seq, p.to_vec()));
        Ok(())
    })
    .unwrap();
    got
}

#[test]
fn a_full_disk_stalls_the_log_which_keeps_its_records_and_recovers_by_itself() {
    for policy in [
        FsyncPolicy::Always,
        FsyncPolicy::Interval(Duration::from_millis(5)),
    ] {
        let disk = SimDisk::new();
        let c = sim_cfg(&disk, policy, 600);
        let (wal, _) = Wal::open(c.clone(), 0, |_, _, _| Ok(())).unwrap();
        for i in 1..=20 {
            wal.append(&payload(i));
        }
        wal.wait_durable_blocking(20).unwrap();
        assert!(wal.writable().is_ok());

        // The disk fills up: the next group cannot be written.
        disk.set_capacity(Some(disk.used_bytes()));
        for i in 21..=40 {
            wal.append(&payload(i));
        }
        let err = wal.wait_durable_blocking(40).unwrap_err();
        assert!(matches!(err, WalError::Stalled(_)), "{err}");
        assert!(matches!(wal.writable(), Err(WalError::Stalled(_))));
        assert!(matches!(wal.health(), Err(WalError::Stalled(_))));
        assert!(matches!(wal.try_append(b"x"), Err(WalError::Stalled(_))));
        // Records durable before the failure stay durable.
        wal.wait_durable_blocking(20).unwrap();
        // Still stalled after several retries.
        std::thread::sleep(Duration::from_millis(200));
        assert!(matches!(wal.writable(), Err(WalError::Stalled(_))));

        // Room again: the log writes what it kept and opens by itself.
        disk.set_capacity(None);
        let deadline = Instant::now() + Duration::from_secs(20);
        while wal.writable().is_err() {
            assert!(Instant::now() < deadline, "the log never recovered");
            std::thread::sleep(Duration::from_millis(20));
        }
        wal.wait_durable_blocking(40).unwrap();
        let seq = wal.append(&payload(41));
        assert_eq!(seq, 41);
        wal.wait_durable_blocking(41).unwrap();
        wal.close().unwrap();
        drop(wal);

        // Every record, once, in order: the log reopens cleanly.
        let got = sim_records(&disk);
        assert_records(&got, 1, 41);
        let (_wal, stats) = Wal::open(c, 0, |_, _, _| Ok(())).unwrap();
        assert_eq!((stats.last_seq, stats.truncated_bytes), (41, 0));
    }
}

#[test]
fn a_failing_sync_is_never_trusted_the_records_are_written_again() {
    // The disk dies on the next sync: what was written since the last good
    // sync must be rewritten elsewhere, not synced in place again.
    let disk = SimDisk::new();
    let c = sim_cfg(&disk, FsyncPolicy::Always, 1 << 20);
    let (wal, _) = Wal::open(c.clone(), 0, |_, _, _| Ok(())).unwrap();
    wal.append(b"one");
    wal.wait_durable_blocking(1).unwrap();
    disk.set_capacity(Some(disk.used_bytes() + 5));
    wal.append(b"two-two-two");
    assert!(matches!(
        wal.wait_durable_blocking(2),
        Err(WalError::Stalled(_))
    ));
    disk.set_capacity(None);
    let deadline = Instant::now() + Duration::from_secs(20);
    while wal.durable_seq() < 2 {
        assert!(Instant::now() < deadline, "never recovered");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(wal);
    let got = sim_records(&disk);
    assert_eq!(
        got,
        vec![(1, b"one".to_vec()), (2, b"two-two-two".to_vec())]
    );
    // The partial write was cut off: a power loss now loses nothing.
    let got = sim_records(&disk.reboot());
    assert_eq!(got.len(), 2);
}

#[test]
fn closing_while_stalled_fails_and_keeps_what_was_durable() {
    let disk = SimDisk::new();
    let c = sim_cfg(&disk, FsyncPolicy::Always, 1 << 20);
    let (wal, _) = Wal::open(c.clone(), 0, |_, _, _| Ok(())).unwrap();
    wal.append(b"kept");
    wal.wait_durable_blocking(1).unwrap();
    disk.set_capacity(Some(disk.used_bytes()));
    wal.append(b"never");
    assert!(wal.wait_durable_blocking(2).is_err());
    assert!(matches!(wal.close(), Err(WalError::Failed(_))));
    drop(wal);
    disk.set_capacity(None);
    assert_eq!(sim_records(&disk), vec![(1, b"kept".to_vec())]);
}

#[test]
fn damage_followed_by_intact_records_refuses_to_open_and_salvage_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), FsyncPolicy::Never, 1 << 20);
    write_log(&c, 200);
    let last = segments(dir.path()).pop().unwrap();
    let original = fs::read(&last).unwrap();
    // Flip one byte of record 100's payload, in the middle of the newest segment.
    let mut off = SEGMENT_HEADER_LEN;
    for _ in 1..100 {
        let len = u32::from_le_bytes(original[off..off + 4].try_into().unwrap()) as usize;
        off += RECORD_HEADER_LEN + len;
    }
    let mut bytes = original.clone();
    bytes[off + RECORD_HEADER_LEN + 2] ^= 0x10;
    fs::write(&last, &bytes).unwrap();

    let err = open_collect(&c, 0).err().expect("must refuse");
    match &err {
        WalError::Corrupt {
            path,
            offset,
            reason,
        } => {
            assert_eq!(path, &last);
            assert_eq!(*offset, off as u64);
            assert!(reason.contains("100 intact records follow"), "{reason}");
            assert!(reason.contains("hotrank repair"), "{reason}");
        }
        other => panic!("unexpected {other}"),
    }
    assert_eq!(fs::read(&last).unwrap(), bytes, "nothing was changed");
    // Reading refuses too: it would silently stop at the damage.
    assert!(matches!(
        hotrank::store::wal::read_records(&Disk, dir.path(), 0, |_, _, _| Ok(())),
        Err(WalError::Corrupt { .. })
    ));

    let mut kept = Vec::new();
    let report = hotrank::store::wal::salvage(&Disk, dir.path(), 0, |seq, _, p| {
        kept.push((seq, p.to_vec()));
        Ok(())
    })
    .unwrap();
    let want: Vec<u64> = (1..=200).filter(|&s| s != 100).collect();
    assert_eq!(kept.iter().map(|r| r.0).collect::<Vec<_>>(), want);
    for (seq, p) in &kept {
        assert_eq!(p, &payload(*seq));
    }
    assert_eq!(report.missing, vec![(100, 100)]);
    assert_eq!(report.skipped.len(), 1);
    assert_eq!(report.skipped[0].offset, off as u64);
    assert_eq!(report.last_seq, 200);
    assert_eq!(fs::read(&last).unwrap(), bytes, "salvage changes nothing");
}

#[test]
fn close_is_idempotent_and_later_appends_fail() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), FsyncPolicy::Never, 1 << 20);
    let (wal, _, _) = open_collect(&c, 0).unwrap();
    let a = wal.append(b"a");
    wal.close().unwrap();
    wal.close().unwrap();
    assert_eq!(wal.durable_seq(), a);
    wal.wait_durable_blocking(a).unwrap();
    let b = wal.append(b"b");
    assert_eq!(b, a + 1);
    assert!(matches!(
        wal.wait_durable_blocking(b),
        Err(WalError::Closed)
    ));
    assert!(matches!(wal.try_append(b"c"), Err(WalError::Closed)));
    assert!(matches!(
        wal.wait_durable_blocking(b + 10),
        Err(WalError::NotAppended { .. })
    ));
    drop(wal);
    let (_wal, _, got) = open_collect(&c, 0).unwrap();
    assert_eq!(got, vec![(1, b"a".to_vec())]);
}

#[test]
fn oversized_payload_is_rejected_by_try_append() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), FsyncPolicy::Never, 1 << 20);
    let (wal, _, _) = open_collect(&c, 0).unwrap();
    let big = vec![0u8; hotrank::store::wal::MAX_RECORD_BYTES + 1];
    assert!(matches!(
        wal.try_append(&big),
        Err(WalError::TooLarge { .. })
    ));
    assert_eq!(wal.try_append(b"fine").unwrap(), 1);
}

// ---------------------------------------------------------------------------
// Process crash: a child process (this test binary, re-invoked) appends
// under policy Always from several threads and prints every acknowledged seq;
// the parent SIGKILLs it mid-run, reopens the log and checks that every
// acknowledged record is there exactly once.
//
// What this proves and what it does not: a killed process leaves its writes
// in the page cache, so this checks acknowledgement order, seq handling and
// recovery after a process crash — and would pass with no fsync at all. That
// acknowledged records survive a *power loss* is proved by tests/crash.rs,
// whose simulated disk drops every byte not synced (and fails if the log
// acknowledges before its sync returns).

const CRASH_DIR_ENV: &str = "HOTRANK_WAL_CRASH_DIR";
const CRASH_ROUND_ENV: &str = "HOTRANK_WAL_CRASH_ROUND";

#[test]
#[ignore = "helper process for crash_recovery_after_sigkill; does nothing on its own"]
fn crash_child() {
    let Ok(dir) = std::env::var(CRASH_DIR_ENV) else {
        return;
    };
    let round: u32 = std::env::var(CRASH_ROUND_ENV).unwrap().parse().unwrap();
    let (wal, _) = Wal::open(
        cfg(Path::new(&dir), FsyncPolicy::Always, 8 << 10),
        0,
        |_, _, _| Ok(()),
    )
    .unwrap();
    let wal = Arc::new(wal);
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let started = Instant::now();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (wal, out) = (Arc::clone(&wal), Arc::clone(&out));
            std::thread::spawn(move || {
                // Bounded in case the parent never kills us.
                for i in 0..200_000u64 {
                    if started.elapsed() > Duration::from_secs(20) {
                        break;
                    }
                    let p = format!("r{round}-t{t}-{i}");
                    let seq = wal.append(p.as_bytes());
                    wal.wait_durable_blocking(seq).unwrap();
                    let mut out = out.lock().unwrap();
                    writeln!(out, "ACK {seq} {p}").unwrap();
                    out.flush().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn crash_recovery_after_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    // seq -> payload for everything acknowledged, over all rounds.
    let mut acked: BTreeMap<u64, String> = BTreeMap::new();
    for round in 0..3u32 {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "crash_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CRASH_DIR_ENV, dir.path())
            .env(CRASH_ROUND_ENV, round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut this_round = 0;
        let mut killed = false;
        let kill_after = 300 + 150 * round as usize;
        for line in stdout.lines() {
            let Ok(line) = line else { break };
            let mut parts = line.split(' ');
            if parts.next() != Some("ACK") {
                continue;
            }
            let (Some(seq), Some(p)) = (parts.next(), parts.next()) else {
                continue; // a line cut short by the kill
            };
            let seq: u64 = seq.parse().unwrap();
            let prev = acked.insert(seq, p.to_string());
            assert!(prev.is_none(), "seq {seq} acknowledged twice");
            this_round += 1;
            if this_round == kill_after && !killed {
                child.kill().unwrap(); // SIGKILL
                killed = true;
            }
        }
        let status = child.wait().unwrap();
        assert!(
            killed,
            "child exited on its own ({status}) after {this_round} acks"
        );
        assert!(!status.success());

        let (wal, stats, got) =
            open_collect(&cfg(dir.path(), FsyncPolicy::Always, 8 << 10), 0).unwrap();
        drop(wal);
        eprintln!(
            "round {round}: {this_round} acks seen, {} records on disk, {} segments, {} torn bytes truncated",
            got.len(),
            stats.segments,
            stats.truncated_bytes
        );
        let mut seen_payloads = HashSet::new();
        for (seq, p) in &got {
            assert!(
                seen_payloads.insert(p.clone()),
                "payload {} logged twice",
                String::from_utf8_lossy(p)
            );
            if let Some(expected) = acked.get(seq) {
                assert_eq!(p, expected.as_bytes(), "seq {seq}");
            }
        }
        let on_disk: HashSet<u64> = got.iter().map(|(s, _)| *s).collect();
        let missing: Vec<u64> = acked
            .keys()
            .filter(|s| !on_disk.contains(s))
            .copied()
            .collect();
        assert!(missing.is_empty(), "acknowledged but lost: {missing:?}");
    }
}

// ---------------------------------------------------------------------------
// Snapshots

#[test]
fn snapshot_round_trip_and_keep() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(latest(dir.path()), None);
    assert_eq!(latest(&dir.path().join("missing")), None);

    let p1 = write_snapshot(&Disk, dir.path(), 10, 0, b"state at ten", 2).unwrap();
    assert_eq!(p1, dir.path().join(snapshot_file_name(10)));
    assert_eq!(p1.file_name().unwrap(), "snapshot-00000000000000000010.bin");
    assert_eq!(latest(dir.path()), Some((10, b"state at ten".to_vec())));
    write_snapshot(&Disk, dir.path(), 20, 0, b"", 2).unwrap();
    assert_eq!(latest(dir.path()), Some((20, Vec::new())));
    write_snapshot(&Disk, dir.path(), 30, 0, &vec![7u8; 300_000], 2).unwrap();
    let seqs: Vec<u64> = list_snapshots(&Disk, dir.path())
        .unwrap()
        .iter()
        .map(|(s, _)| *s)
        .collect();
    assert_eq!(seqs, vec![30, 20]);
    assert_eq!(latest(dir.path()), Some((30, vec![7u8; 300_000])));
    // keep = 0 is treated as 1.
    write_snapshot(&Disk, dir.path(), 40, 0, b"forty", 0).unwrap();
    let seqs: Vec<u64> = list_snapshots(&Disk, dir.path())
        .unwrap()
        .iter()
        .map(|(s, _)| *s)
        .collect();
    assert_eq!(seqs, vec![40]);
    let names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, vec![snapshot_file_name(40)]);
}

#[test]
fn snapshot_streaming_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_snapshot_with(&Disk, dir.path(), 5, 0, 3, |w| {
        for i in 0..1000u32 {
            w.write_all(&i.to_le_bytes())?;
        }
        Ok(())
    })
    .unwrap();
    let expected: Vec<u8> = (0..1000u32).flat_map(|i| i.to_le_bytes()).collect();
    let snap = read_snapshot(&Disk, &path).unwrap();
    assert_eq!((snap.seq, snap.version, snap.payload), (5, 0, expected));

    // A failing writer leaves nothing behind and keeps the old snapshot.
    let err = write_snapshot_with(&Disk, dir.path(), 6, 0, 3, |w| {
        w.write_all(b"partial")?;
        Err(std::io::Error::other("serialisation failed"))
    })
    .unwrap_err();
    assert_eq!(err.to_string(), "serialisation failed");
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    assert_eq!(latest(dir.path()).unwrap().0, 5);
}

#[test]
fn snapshot_falls_back_when_newest_is_corrupt_or_truncated() {
    let dir = tempfile::tempdir().unwrap();
    write_snapshot(&Disk, dir.path(), 1, 0, b"one", 5).unwrap();
    write_snapshot(&Disk, dir.path(), 2, 0, b"two two", 5).unwrap();
    let p3 = write_snapshot(&Disk, dir.path(), 3, 0, b"three three three", 5).unwrap();
    let p4 = write_snapshot(&Disk, dir.path(), 4, 0, b"four four four four", 5).unwrap();
    let good4 = fs::read(&p4).unwrap();

    // Every single flipped byte of the newest file is detected.
    for pos in 0..good4.len() {
        let mut bytes = good4.clone();
        bytes[pos] ^= 0x01;
        fs::write(&p4, &bytes).unwrap();
        assert_eq!(
            latest(dir.path()),
            Some((3, b"three three three".to_vec())),
            "flip at {pos}"
        );
    }
    // Every truncation too, and extension.
    for len in 0..good4.len() {
        fs::write(&p4, &good4[..len]).unwrap();
        assert_eq!(latest(dir.path()).unwrap().0, 3, "len {len}");
    }
    let mut longer = good4.clone();
    longer.push(0);
    fs::write(&p4, &longer).unwrap();
    assert_eq!(latest(dir.path()).unwrap().0, 3);

    // Two bad ones: falls back further.
    fs::write(&p3, b"garbage").unwrap();
    assert_eq!(latest(dir.path()), Some((2, b"two two".to_vec())));
    // A file renamed to the wrong seq is rejected.
    fs::write(&p4, &good4).unwrap();
    fs::rename(&p4, dir.path().join(snapshot_file_name(9))).unwrap();
    assert_eq!(latest(dir.path()).unwrap().0, 2);
}

#[test]
fn snapshot_temp_files_are_ignored_and_cleaned_up() {
    let dir = tempfile::tempdir().unwrap();
    write_snapshot(&Disk, dir.path(), 7, 0, b"seven", 2).unwrap();
    // A crashed writer's unfinished file with a higher seq.
    let stale = dir
        .path()
        .join(format!("{}.tmp-999999-0", snapshot_file_name(8)));
    fs::write(&stale, b"HRKSNAP\0 unfinished").unwrap();
    fs::write(dir.path().join("notes.txt"), b"unrelated").unwrap();
    assert_eq!(latest(dir.path()), Some((7, b"seven".to_vec())));
    write_snapshot(&Disk, dir.path(), 9, 0, b"nine", 2).unwrap();
    assert!(!stale.exists());
    assert!(dir.path().join("notes.txt").exists());
    let seqs: Vec<u64> = list_snapshots(&Disk, dir.path())
        .unwrap()
        .iter()
        .map(|(s, _)| *s)
        .collect();
    assert_eq!(seqs, vec![9, 7]);
}

// ---------------------------------------------------------------------------
// Property: any prefix of a valid log recovers exactly the records that are
// complete in it.

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn any_cut_recovers_the_complete_prefix(
        sizes in proptest::collection::vec(0usize..200, 1..40),
        cut_frac in 0.0f64..1.0,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let first = 1u64;
        let mut bytes = hotrank::store::wal::segment_header(first, 0).to_vec();
        let mut ends = Vec::new();
        for (i, size) in sizes.iter().enumerate() {
            encode_record(&mut bytes, first + i as u64, &vec![i as u8; *size]);
            ends.push(bytes.len());
        }
        let cut = SEGMENT_HEADER_LEN + ((bytes.len() - SEGMENT_HEADER_LEN) as f64 * cut_frac) as usize;
        let path = dir.path().join(hotrank::store::wal::segment_file_name(first));
        fs::write(&path, &bytes[..cut]).unwrap();
        let complete = ends.iter().filter(|&&e| e <= cut).count();
        let valid_len = if complete == 0 { SEGMENT_HEADER_LEN } else { ends[complete - 1] };

        let c = cfg(dir.path(), FsyncPolicy::Never, 1 << 20);
        let (wal, stats, got) = open_collect(&c, 0).unwrap();
        prop_assert_eq!(got.len(), complete);
        for (i, (seq, p)) in got.iter().enumerate() {
            prop_assert_eq!(*seq, first + i as u64);
            prop_assert_eq!(p, &vec![i as u8; sizes[i]]);
        }
        prop_assert_eq!(stats.truncated_bytes, (cut - valid_len) as u64);
        prop_assert_eq!(wal.append(b"next"), complete as u64 + 1);
    }
}

#[test]
fn a_crash_while_an_old_snapshot_is_cut_keeps_the_newer_ones() {
    use hotrank::store::snapshot::CUT_BYTES;
    use hotrank::store::storage::Storage;
    let dir = Path::new("/data/snapshots");
    let big: Vec<u8> = (0..3 * CUT_BYTES + 12345)
        .map(|i| (i % 251) as u8)
        .collect();
    let oldest = dir.join(snapshot_file_name(10));
    let mut cut_halfway = 0;
    let mut ops = 1;
    loop {
        let disk = SimDisk::new();
        write_snapshot(&disk, dir, 10, 2, &big, 2).unwrap();
        write_snapshot(&disk, dir, 20, 2, b"twenty", 2).unwrap();
        // The third write removes the first, a cut at a time; crash at its
        // `ops`-th operation.
        disk.crash_at_op(ops);
        // (Pruning errors are logged, not returned: ask the disk.)
        let _ = write_snapshot(&disk, dir, 30, 2, b"thirty", 2);
        let finished = !disk.crashed();
        let after = disk.reboot();
        let newest = read_latest_snapshot(&after, dir).unwrap().unwrap();
        assert!(
            (newest.seq, &newest.payload[..]) == (30, b"thirty")
                || (newest.seq, &newest.payload[..]) == (20, b"twenty"),
            "crash at op {ops}: newest is {}",
            newest.seq
        );
        assert_eq!(
            read_snapshot(&after, &dir.join(snapshot_file_name(20)))
                .unwrap()
                .payload,
            b"twenty",
            "crash at op {ops}: the snapshot before the newest is kept"
        );
        if let Ok(len) = after.len(&oldest) {
            match read_snapshot(&after, &oldest) {
                Ok(s) => assert_eq!(s.payload, big, "crash at op {ops}"),
                Err(e) => {
                    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData, "{e}");
                    assert!(len < big.len() as u64);
                    cut_halfway += 1;
                }
            }
            // The next write removes what is left of it.
            write_snapshot(&after, dir, 40, 2, b"forty", 2).unwrap();
            assert!(after.len(&oldest).is_err(), "crash at op {ops}");
        }
        if finished {
            break;
        }
        ops += 1;
    }
    assert!(
        cut_halfway >= 3,
        "only {cut_halfway} crashes found the oldest snapshot cut halfway"
    );
}
