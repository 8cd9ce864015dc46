//! Unit tests of the log that look inside it (warnings, writer wake-ups).
use super::*;
use crate::store::storage::Disk;
use format::{SEGMENT_HEADER_LEN, segment_file_name, segment_header};
use std::fmt::Write as _;
use std::fs::{self, OpenOptions};
use std::io::Write as _;
use std::path::Path;

fn cfg(dir: &Path, fsync: FsyncPolicy, segment_bytes: u64) -> WalConfig {
    WalConfig {
        fsync,
        segment_bytes,
        ..WalConfig::new(dir)
    }
}

type Records = Vec<(u64, Vec<u8>)>;

fn open_collect(cfg: WalConfig, after: u64) -> Result<(Wal, ReplayStats, Records), WalError> {
    let mut got = Vec::new();
    let (wal, stats) = Wal::open(cfg, after, |seq, _, p| {
        got.push((seq, p.to_vec()));
        Ok(())
    })?;
    Ok((wal, stats, got))
}

fn segment_paths(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(format::parse_segment_file_name)
                .is_some()
        })
        .collect();
    paths.sort();
    paths
}

/// Collects the fields of WARN events emitted on this thread.
struct WarnCapture(Arc<Mutex<Vec<String>>>);

struct FieldText<'a>(&'a mut String);

impl tracing::field::Visit for FieldText<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, "{}={:?} ", field.name(), value);
    }
}

impl tracing::Subscriber for WarnCapture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() == tracing::Level::WARN {
            let mut text = String::new();
            event.record(&mut FieldText(&mut text));
            self.0.lock().push(text);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

fn with_warnings<T>(f: impl FnOnce() -> T) -> (T, Vec<String>) {
    let warnings = Arc::new(Mutex::new(Vec::new()));
    let out = tracing::subscriber::with_default(WarnCapture(Arc::clone(&warnings)), f);
    let warnings = warnings.lock().clone();
    (out, warnings)
}

#[test]
fn wal_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Wal>();
}

#[test]
fn torn_tail_is_truncated_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), FsyncPolicy::Never, DEFAULT_SEGMENT_BYTES);
    let (wal, _, _) = open_collect(c.clone(), 0).unwrap();
    for i in 0..10u8 {
        wal.append(&[i; 40]);
    }
    wal.close().unwrap();
    drop(wal);
    let path = segment_paths(dir.path()).pop().unwrap();
    let len = fs::metadata(&path).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 7)
        .unwrap();

    let (opened, warnings) = with_warnings(|| open_collect(c.clone(), 0));
    let (wal, stats, got) = opened.unwrap();
    assert_eq!(got.len(), 9);
    assert_eq!(stats.truncated_bytes, (RECORD_HEADER_LEN + 40 - 7) as u64);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let w = &warnings[0];
    assert!(w.contains(&path.display().to_string()), "{w}");
    assert!(
        w.contains(&format!("offset={}", len - (RECORD_HEADER_LEN + 40) as u64)),
        "{w}"
    );
    assert!(
        w.contains(&format!("dropped_bytes={}", RECORD_HEADER_LEN + 40 - 7)),
        "{w}"
    );
    assert_eq!(wal.append(b"next"), 10);
    wal.close().unwrap();
    assert_eq!(fs::metadata(&path).unwrap().len(), len - 40 + 4);
}

#[test]
fn absurd_length_is_rejected_without_allocating() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), FsyncPolicy::Never, DEFAULT_SEGMENT_BYTES);
    let (wal, _, _) = open_collect(c.clone(), 0).unwrap();
    wal.append(b"one");
    drop(wal);
    let path = segment_paths(dir.path()).pop().unwrap();
    let mut f = OpenOptions::new().append(true).open(&path).unwrap();
    let mut rec = Vec::new();
    rec.extend_from_slice(&u32::MAX.to_le_bytes());
    rec.extend_from_slice(&[1, 2, 3, 4]);
    rec.extend_from_slice(&2u64.to_le_bytes());
    f.write_all(&rec).unwrap();
    drop(f);
    let (opened, warnings) = with_warnings(|| open_collect(c.clone(), 0));
    let (_wal, stats, got) = opened.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(stats.truncated_bytes, 16);
    assert!(
        warnings[0].contains("exceeds the maximum"),
        "{}",
        warnings[0]
    );
}

#[test]
fn header_only_last_segment_is_reused_and_zero_header_removed() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), FsyncPolicy::Never, DEFAULT_SEGMENT_BYTES);
    let (wal, _, _) = open_collect(c.clone(), 0).unwrap();
    wal.append(b"a");
    wal.append(b"b");
    drop(wal);
    // A segment that was created but never received records.
    fs::write(dir.path().join(segment_file_name(3)), segment_header(3, 0)).unwrap();
    let (wal, stats, got) = open_collect(c.clone(), 0).unwrap();
    assert_eq!((got.len(), stats.segments, stats.last_seq), (2, 2, 2));
    assert_eq!(wal.append(b"c"), 3);
    drop(wal);
    assert_eq!(segment_paths(dir.path()).len(), 2);

    // A zero-filled header in the last segment counts as torn: removed.
    fs::write(dir.path().join(segment_file_name(4)), [0u8; 100]).unwrap();
    let (wal, stats, got) = open_collect(c.clone(), 0).unwrap();
    assert_eq!(
        (got.len(), stats.segments, stats.truncated_bytes),
        (3, 2, 100)
    );
    assert_eq!(wal.append(b"d"), 4);
    drop(wal);
    let (_wal, _, got) = open_collect(c.clone(), 0).unwrap();
    assert_eq!(got.last().unwrap(), &(4, b"d".to_vec()));
}

#[test]
fn garbage_header_in_last_segment_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), FsyncPolicy::Never, DEFAULT_SEGMENT_BYTES);
    fs::write(dir.path().join(segment_file_name(1)), [0x55u8; 64]).unwrap();
    let err = open_collect(c, 0).err().unwrap();
    assert!(matches!(err, WalError::Corrupt { .. }), "{err}");
}

#[test]
fn leftover_temp_segment_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join(format!("{}.tmp", segment_file_name(1)));
    fs::write(&tmp, [1, 2, 3]).unwrap();
    fs::write(dir.path().join("unrelated.txt"), b"x").unwrap();
    let c = cfg(dir.path(), FsyncPolicy::Never, DEFAULT_SEGMENT_BYTES);
    let (_wal, stats, _) = open_collect(c, 0).unwrap();
    assert_eq!(stats, ReplayStats::default());
    assert!(!tmp.exists());
    assert!(dir.path().join("unrelated.txt").exists());
}

#[test]
fn batch_splits_across_segments_at_record_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    // Tiny segments: every record passes the limit, so one record per segment.
    let c = cfg(dir.path(), FsyncPolicy::Never, 1);
    let (wal, _, _) = open_collect(c.clone(), 0).unwrap();
    for i in 0..5u8 {
        wal.append(&[i; 3]);
    }
    wal.close().unwrap();
    assert_eq!(wal.segment_count(), 5);
    let expected = 5 * (SEGMENT_HEADER_LEN + RECORD_HEADER_LEN + 3) as u64;
    assert_eq!(wal.size_bytes(), expected);
    drop(wal);
    let (wal, stats, got) = open_collect(c, 0).unwrap();
    assert_eq!(stats.segments, 5);
    assert_eq!(wal.size_bytes(), expected);
    assert_eq!(
        got.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 5]
    );
}

#[test]
fn idle_writer_picks_up_records_nobody_waits_for() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), FsyncPolicy::Never, DEFAULT_SEGMENT_BYTES);
    let (wal, _, _) = open_collect(c, 0).unwrap();
    let seq = wal.append(b"lonely");
    let mut rx = wal.shared.progress.subscribe();
    // No kick: the writer's idle poll must write it.
    block_on(async {
        while wal.durable_seq() < seq {
            rx.changed().await.unwrap();
        }
    });
    assert_eq!(wal.durable_seq(), seq);
}

#[test]
fn replay_callback_error_aborts_open() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), FsyncPolicy::Never, DEFAULT_SEGMENT_BYTES);
    let (wal, _, _) = open_collect(c.clone(), 0).unwrap();
    wal.append(b"a");
    wal.append(b"b");
    drop(wal);
    let err = Wal::open(
        c,
        0,
        |seq, _, _| if seq == 2 { Err("boom".into()) } else { Ok(()) },
    )
    .err()
    .unwrap();
    assert!(
        matches!(err, WalError::Replay { seq: 2, ref source } if source.to_string() == "boom"),
        "{err}"
    );
}

#[test]
fn read_records_never_modifies_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), FsyncPolicy::Never, 256);
    let (wal, _, _) = open_collect(c.clone(), 0).unwrap();
    for i in 0..40u32 {
        wal.append(format!("record-{i:03}").as_bytes());
    }
    wal.close().unwrap();
    drop(wal);
    let segs = segment_paths(dir.path());
    assert!(segs.len() > 3, "small segments rotate: {segs:?}");
    // A torn tail on the last segment and an unfinished segment file.
    let last = segs.last().unwrap().clone();
    OpenOptions::new()
        .append(true)
        .open(&last)
        .unwrap()
        .write_all(&[7u8; 11])
        .unwrap();
    let tmp = dir.path().join(format!("{}.tmp", segment_file_name(999)));
    fs::write(&tmp, b"partial").unwrap();
    let sizes = |paths: &[PathBuf]| -> Vec<u64> {
        paths
            .iter()
            .map(|p| fs::metadata(p).unwrap().len())
            .collect()
    };
    let before = sizes(&segs);

    let mut got = Vec::new();
    let stats = read_records(&Disk, dir.path(), 0, |seq, _, p| {
        got.push((seq, String::from_utf8(p.to_vec()).unwrap()));
        Ok(())
    })
    .unwrap();
    assert_eq!(got.len(), 40);
    assert!(
        got.iter()
            .enumerate()
            .all(|(i, (seq, text))| *seq == i as u64 + 1 && *text == format!("record-{i:03}"))
    );
    assert_eq!(stats.records, 40);
    assert_eq!(stats.first_seq, Some(1));
    assert_eq!(stats.last_seq, 40);
    assert_eq!(stats.torn_tail_bytes, 11);
    assert_eq!(stats.segments, segs.len());
    assert_eq!(sizes(&segs), before, "nothing truncated");
    assert!(tmp.exists(), "unfinished segment left alone");

    // after_seq skips records; a trimmed log starts later.
    let mut seqs = Vec::new();
    read_records(&Disk, dir.path(), 30, |seq, _, _| {
        seqs.push(seq);
        Ok(())
    })
    .unwrap();
    assert_eq!(seqs, (31..=40).collect::<Vec<_>>());
    fs::remove_file(&segs[0]).unwrap();
    let mut seqs = Vec::new();
    let stats = read_records(&Disk, dir.path(), 0, |seq, _, _| {
        seqs.push(seq);
        Ok(())
    })
    .unwrap();
    assert_eq!(stats.first_seq, Some(seqs[0]));
    assert!(seqs[0] > 1 && *seqs.last().unwrap() == 40);

    // A gap in the middle is corruption; a callback error aborts.
    fs::remove_file(&segs[2]).unwrap();
    assert!(matches!(
        read_records(&Disk, dir.path(), 0, |_, _, _| Ok(())),
        Err(WalError::Corrupt { .. })
    ));
    let err = read_records(&Disk, dir.path(), 0, |_, _, _| Err("stop".into())).unwrap_err();
    assert!(matches!(err, WalError::Replay { .. }), "{err}");
}

#[test]
fn records_are_replayed_with_their_segment_payload_version_and_old_segments_are_not_extended() {
    let dir = tempfile::tempdir().unwrap();
    let old = cfg(dir.path(), FsyncPolicy::Never, DEFAULT_SEGMENT_BYTES);
    let (wal, _, _) = open_collect(old.clone(), 0).unwrap();
    wal.append(b"old");
    wal.close().unwrap();
    drop(wal);
    let new = WalConfig {
        payload_version: 7,
        ..old
    };
    let (wal, _) = Wal::open(new.clone(), 0, |_, _, _| Ok(())).unwrap();
    assert_eq!(wal.append(b"new"), 2);
    wal.close().unwrap();
    drop(wal);
    assert_eq!(
        segment_paths(dir.path()).len(),
        2,
        "a new segment for the new version"
    );
    let mut got = Vec::new();
    Wal::open(new, 0, |seq, version, p| {
        got.push((seq, version, p.to_vec()));
        Ok(())
    })
    .unwrap();
    assert_eq!(got, vec![(1, 0, b"old".to_vec()), (2, 7, b"new".to_vec())]);
}

/// Polls `done` every millisecond for up to 10 s.
fn eventually(what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Appends `payload` and waits (on a thread of its own) for it to be
/// durable; the receiver gets the outcome.
fn append_and_wait(
    wal: &Arc<Wal>,
    payload: &'static [u8],
) -> (u64, std::sync::mpsc::Receiver<Result<(), WalError>>) {
    let seq = wal.append(payload);
    let (tx, rx) = std::sync::mpsc::channel();
    let wal = Arc::clone(wal);
    std::thread::spawn(move || {
        let _ = tx.send(wal.wait_durable_blocking(seq));
    });
    (seq, rx)
}

/// Lets held syncs go when dropped, so that a failed check does not leave
/// the log's threads waiting for ever.
struct Release(crate::store::storage::sim::SimDisk);

impl Drop for Release {
    fn drop(&mut self) {
        self.0.hold_syncs(false);
    }
}

#[test]
fn interval_acknowledges_while_a_sync_hangs() {
    use crate::store::storage::sim::SimDisk;
    let open = |disk: &SimDisk, fsync| {
        let cfg = WalConfig {
            fsync,
            storage: Arc::new(disk.clone()),
            ..WalConfig::new("/data/wal")
        };
        Arc::new(Wal::open(cfg, 0, |_, _, _| Ok(())).unwrap().0)
    };
    let ten_s = Duration::from_secs(10);

    let disk = SimDisk::new();
    let wal = open(&disk, FsyncPolicy::Interval(Duration::from_millis(1)));
    // Declared after the log: dropped (and the syncs let go) before it.
    let _release = Release(disk.clone());
    // The first record creates the segment (whose header is synced at once).
    let (_, first) = append_and_wait(&wal, b"zero");
    first.recv_timeout(ten_s).unwrap().unwrap();
    disk.hold_syncs(true);
    let (one, acked) = append_and_wait(&wal, b"one");
    acked.recv_timeout(ten_s).unwrap().unwrap();
    eventually("the interval's sync starts", || disk.syncs_waiting() > 0);
    // The sync hangs; a record appended now is still written and acknowledged.
    let (two, acked) = append_and_wait(&wal, b"two");
    acked.recv_timeout(ten_s).unwrap().unwrap();
    assert!(wal.durable_seq() >= two);
    assert!(wal.synced_seq() < one, "nothing is synced while syncs hang");
    disk.hold_syncs(false);
    eventually("the records are synced", || wal.synced_seq() >= two);
    wal.close().unwrap();
    let after = disk.reboot();
    let cfg = WalConfig {
        storage: Arc::new(after),
        ..WalConfig::new("/data/wal")
    };
    let (_, stats, got) = open_collect(cfg, 0).unwrap();
    assert_eq!(stats.last_seq, two);
    assert_eq!(got[2], (two, b"two".to_vec()));

    // Under `always` an acknowledgement waits for its sync.
    let disk = SimDisk::new();
    let wal = open(&disk, FsyncPolicy::Always);
    // Declared after the log: dropped (and the syncs let go) before it.
    let _release = Release(disk.clone());
    let (_, first) = append_and_wait(&wal, b"zero");
    first.recv_timeout(ten_s).unwrap().unwrap();
    disk.hold_syncs(true);
    let (one, acked) = append_and_wait(&wal, b"one");
    eventually("the record's sync starts", || disk.syncs_waiting() > 0);
    assert!(wal.durable_seq() < one, "durable before its sync");
    assert!(acked.try_recv().is_err(), "acknowledged before its sync");
    disk.hold_syncs(false);
    acked.recv_timeout(ten_s).unwrap().unwrap();
    assert!(wal.synced_seq() >= one);
    wal.close().unwrap();
}

/// A [`SimDisk`](crate::store::storage::sim::SimDisk) that notes which
/// thread makes each write to a log file (failed attempts included).
#[derive(Debug, Clone)]
struct WhoWrites {
    disk: crate::store::storage::sim::SimDisk,
    writers: Arc<Mutex<Vec<String>>>,
}

struct WhoWritesFile {
    file: Box<dyn crate::store::storage::StorageFile>,
    writers: Arc<Mutex<Vec<String>>>,
}

impl std::io::Write for WhoWritesFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let name = std::thread::current().name().unwrap_or("").to_string();
        self.writers.lock().push(name);
        self.file.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl crate::store::storage::StorageFile for WhoWritesFile {
    fn sync_data(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn try_clone(&self) -> io::Result<Box<dyn crate::store::storage::StorageFile>> {
        self.file.try_clone()
    }
}

impl WhoWrites {
    fn new() -> Self {
        WhoWrites {
            disk: crate::store::storage::sim::SimDisk::new(),
            writers: Arc::default(),
        }
    }

    fn wrap(
        &self,
        file: io::Result<Box<dyn crate::store::storage::StorageFile>>,
    ) -> io::Result<Box<dyn crate::store::storage::StorageFile>> {
        Ok(Box::new(WhoWritesFile {
            file: file?,
            writers: Arc::clone(&self.writers),
        }))
    }

    /// Names of the threads that wrote since the last call.
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.writers.lock())
    }
}

impl Storage for WhoWrites {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.disk.create_dir_all(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.disk.list(dir)
    }
    fn len(&self, path: &Path) -> io::Result<u64> {
        self.disk.len(path)
    }
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn crate::store::storage::ReadFile>> {
        self.disk.open_read(path)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn crate::store::storage::StorageFile>> {
        self.wrap(self.disk.create(path))
    }
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn crate::store::storage::StorageFile>> {
        self.wrap(self.disk.open_append(path))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.disk.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.disk.remove(path)
    }
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        self.disk.truncate(path, len)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.disk.sync_dir(dir)
    }
    fn lock(&self, path: &Path) -> io::Result<crate::store::storage::DirLock> {
        self.disk.lock(path)
    }
}

fn who_writes_wal(disk: &WhoWrites, fsync: FsyncPolicy, segment_bytes: u64) -> Arc<Wal> {
    let cfg = WalConfig {
        fsync,
        segment_bytes,
        storage: Arc::new(disk.clone()),
        ..WalConfig::new("/data/wal")
    };
    Arc::new(Wal::open(cfg, 0, |_, _, _| Ok(())).unwrap().0)
}

/// Every record in the log at `/data/wal` of `disk`, read back by a new
/// instance.
fn reopen_records(disk: &WhoWrites) -> Records {
    let cfg = WalConfig {
        storage: Arc::new(disk.disk.clone()),
        ..WalConfig::new("/data/wal")
    };
    open_collect(cfg, 0).unwrap().2
}

/// Runs `f` on a thread named `appender` and returns its result.
fn on_appender<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .name("appender".into())
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

#[test]
fn interval_and_never_write_on_the_waiting_thread_always_on_the_writer_thread() {
    for policy in [
        FsyncPolicy::Interval(Duration::from_secs(60)),
        FsyncPolicy::Never,
        FsyncPolicy::Always,
    ] {
        let disk = WhoWrites::new();
        let wal = who_writes_wal(&disk, policy, DEFAULT_SEGMENT_BYTES);
        // The first record creates the segment: the writer thread's job.
        let seq = wal.append(b"zero");
        wal.wait_durable_blocking(seq).unwrap();
        // The writer thread wakes every 10 ms and may take a record first,
        // more often when the machine is busy and the appender is
        // descheduled between its append and its wait: a round where it
        // took most of them says nothing about the waiting thread, so up
        // to 5 rounds are run (a waiting thread that never writes fails
        // every one).
        let mut rounds = 0;
        let mut most = 0;
        while rounds < 5 {
            rounds += 1;
            disk.take();
            let theirs = Arc::clone(&wal);
            on_appender(move || {
                for i in 0..20u32 {
                    let seq = theirs.append(&i.to_le_bytes());
                    theirs.wait_durable_blocking(seq).unwrap();
                }
            });
            let writers = disk.take();
            let inline = writers.iter().filter(|w| *w == "appender").count();
            if policy == FsyncPolicy::Always {
                assert_eq!(inline, 0, "{policy:?}: {writers:?}");
                break;
            }
            most = most.max(inline);
            if inline >= 10 {
                break;
            }
        }
        if policy != FsyncPolicy::Always {
            assert!(
                most >= 10,
                "{policy:?}: at most {most} of 20 written inline"
            );
        }
        wal.close().unwrap();
        let got = reopen_records(&disk);
        assert_eq!(got.len(), 1 + 20 * rounds, "{policy:?}");
        for (i, (seq, payload)) in got[1..].iter().enumerate() {
            assert_eq!(
                (*seq, payload.as_slice()),
                (i as u64 + 2, &((i % 20) as u32).to_le_bytes()[..])
            );
        }
    }
}

#[test]
fn a_failed_inline_write_stalls_as_the_writer_threads_does() {
    let disk = WhoWrites::new();
    let wal = who_writes_wal(&disk, FsyncPolicy::Never, DEFAULT_SEGMENT_BYTES);
    for i in 1..=5u64 {
        let seq = wal.append(&i.to_le_bytes());
        wal.wait_durable_blocking(seq).unwrap();
    }
    // The disk fills up: the appender's own write fails. On a busy
    // machine the writer thread may wake between the append and the
    // waiter's write and fail first: that round says nothing about the
    // inline path, so the disk gets its room back and the round is tried
    // again (with the inline write gone, every round is the writer's).
    let mut n = 6u64;
    for round in 1.. {
        disk.take();
        disk.disk.set_capacity(Some(disk.disk.used_bytes()));
        let theirs = Arc::clone(&wal);
        let err = on_appender(move || {
            let seq = theirs.append(&n.to_le_bytes());
            theirs.wait_durable_blocking(seq)
        })
        .unwrap_err();
        assert!(matches!(err, WalError::Stalled(_)), "{err}");
        if disk.take().first().map(String::as_str) == Some("appender") {
            break;
        }
        assert!(round < 20, "the writer thread wrote first in 20 rounds");
        disk.disk.set_capacity(None);
        eventually("the log writes again", || wal.writable().is_ok());
        wal.wait_durable_blocking(n).unwrap();
        n += 1;
    }
    assert!(matches!(wal.writable(), Err(WalError::Stalled(_))));
    assert!(matches!(wal.try_append(b"x"), Err(WalError::Stalled(_))));
    assert_eq!(
        wal.durable_seq(),
        n - 1,
        "records durable before stay durable"
    );
    // Appended while stalled: kept, not written by the waiter (it gets the
    // error at once), written by the writer thread once the disk has room.
    let kept = wal.append(&(n + 1).to_le_bytes());
    assert!(matches!(
        wal.wait_durable_blocking(kept),
        Err(WalError::Stalled(_))
    ));
    disk.disk.set_capacity(None);
    eventually("the log writes again", || wal.writable().is_ok());
    wal.wait_durable_blocking(kept).unwrap();
    let last = wal.append(&(n + 2).to_le_bytes());
    wal.wait_durable_blocking(last).unwrap();
    wal.close().unwrap();
    let got = reopen_records(&disk);
    let want: Records = (1..=n + 2).map(|i| (i, i.to_le_bytes().to_vec())).collect();
    assert_eq!(got, want);
}

#[test]
fn concurrent_inline_writers_never_interleave_or_reorder_records() {
    // Small segments: rotations (the writer thread's) mix with inline writes.
    for policy in [
        FsyncPolicy::Interval(Duration::from_millis(1)),
        FsyncPolicy::Never,
    ] {
        let disk = WhoWrites::new();
        let wal = who_writes_wal(&disk, policy, 2048);
        let threads: Vec<_> = (0..8u64)
            .map(|t| {
                let wal = Arc::clone(&wal);
                std::thread::Builder::new()
                    .name("appender".into())
                    .spawn(move || {
                        let mut mine = Vec::new();
                        for i in 0..300u64 {
                            // Lengths vary so that a torn or interleaved
                            // write cannot line up by chance.
                            let payload = vec![t as u8; 1 + ((t * 300 + i) % 37) as usize];
                            let seq = wal.append(&payload);
                            wal.wait_durable_blocking(seq).unwrap();
                            mine.push((seq, payload));
                        }
                        mine
                    })
                    .unwrap()
            })
            .collect();
        let mut want: Records = threads
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        want.sort();
        let writers = disk.take();
        assert!(
            writers.iter().any(|w| w == "appender"),
            "{policy:?}: no inline write"
        );
        assert!(
            writers.iter().any(|w| w == "hotrank-wal"),
            "{policy:?}: no rotation"
        );
        wal.close().unwrap();
        let got = reopen_records(&disk);
        assert_eq!(got.len(), 2400, "{policy:?}");
        assert_eq!(got, want, "{policy:?}");
    }
}
