//! File I/O of the write-ahead log and the snapshots, behind one small
//! trait so that tests can swap the disk for one that loses what was not
//! synced ([`sim::SimDisk`]) or runs out of space.
//!
//! The trait has exactly the operations the log and the snapshots use, with
//! the durability contract of a POSIX file system spelled out:
//! - bytes written to a file survive a power loss only once
//!   [`StorageFile::sync_data`] has returned for that file;
//! - a created, renamed or removed name survives only once
//!   [`Storage::sync_dir`] has returned for its directory;
//! - [`Storage::truncate`] returns after the new length is synced.
//!
//! [`Disk`] is the real file system. Every path is absolute or relative to
//! the process's working directory, as with `std::fs`.

pub mod sim;

use std::fmt::Debug;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::path::Path;

/// A file opened for reading.
pub trait ReadFile: Read + Seek + Send {}
impl<T: Read + Seek + Send> ReadFile for T {}

/// A file opened for writing at its end.
pub trait StorageFile: Write + Send {
    /// Makes every byte written so far durable (`fdatasync`).
    fn sync_data(&mut self) -> io::Result<()>;
    /// Writes the `len` bytes at `offset` out to the disk and waits until
    /// they are, without a journal commit or a cache flush (Linux
    /// `sync_file_range`): it bounds how much of a file the kernel holds
    /// unwritten, and promises no durability (`sync_data` does). Elsewhere,
    /// and by default, nothing.
    fn write_out(&mut self, _offset: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }
    /// A second handle on the same open file (`dup`): syncing either makes
    /// the bytes written through both durable, so one thread can sync while
    /// another goes on writing.
    fn try_clone(&self) -> io::Result<Box<dyn StorageFile>>;
}

/// Held for as long as a data directory is in use; dropping it releases it.
pub type DirLock = Box<dyn Send + Sync>;

/// The file operations of the log and the snapshots.
pub trait Storage: Debug + Send + Sync {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Names of the entries of `dir`, in no particular order.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    fn len(&self, path: &Path) -> io::Result<u64>;
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn ReadFile>>;
    /// Creates `path` (or empties it) for writing.
    fn create(&self, path: &Path) -> io::Result<Box<dyn StorageFile>>;
    /// Opens an existing file for writing after its last byte.
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn StorageFile>>;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Cuts `path` to `len` bytes and syncs it.
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()>;
    /// Makes the names in `dir` durable (`fsync` of the directory).
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Takes an exclusive advisory lock on the file `path` (created if
    /// missing) without waiting: [`io::ErrorKind::WouldBlock`] if another
    /// process (or another open store) holds it.
    fn lock(&self, path: &Path) -> io::Result<DirLock>;
}

/// The real file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct Disk;

impl Disk {
    /// The real disk as a shared [`Storage`].
    pub fn shared() -> std::sync::Arc<dyn Storage> {
        std::sync::Arc::new(Disk)
    }
}

impl StorageFile for File {
    fn sync_data(&mut self) -> io::Result<()> {
        File::sync_data(self)
    }

    #[cfg(target_os = "linux")]
    fn write_out(&mut self, offset: u64, len: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
            | libc::SYNC_FILE_RANGE_WRITE
            | libc::SYNC_FILE_RANGE_WAIT_AFTER;
        let (offset, len) = (
            i64::try_from(offset).map_err(io::Error::other)?,
            i64::try_from(len).map_err(io::Error::other)?,
        );
        // SAFETY: the descriptor is this open file's, valid while `self`
        // lives; the call reads no memory of ours.
        let r = unsafe { libc::sync_file_range(self.as_raw_fd(), offset, len, flags) };
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            _ if r == 0 => Ok(()),
            // A file system or file it does not apply to: nothing to do.
            Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP | libc::ESPIPE) => Ok(()),
            // A write error (EIO, ENOSPC): the caller must see it, as this
            // call took it from the file's error state and a later sync
            // would not report it again.
            _ => Err(e),
        }
    }

    fn try_clone(&self) -> io::Result<Box<dyn StorageFile>> {
        Ok(Box::new(File::try_clone(self)?))
    }
}

impl Storage for Disk {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir)? {
            if let Ok(name) = entry?.file_name().into_string() {
                names.push(name);
            }
        }
        Ok(names)
    }

    fn len(&self, path: &Path) -> io::Result<u64> {
        Ok(fs::metadata(path)?.len())
    }

    fn open_read(&self, path: &Path) -> io::Result<Box<dyn ReadFile>> {
        Ok(Box::new(File::open(path)?))
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        Ok(Box::new(file))
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        Ok(Box::new(OpenOptions::new().append(true).open(path)?))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let file = OpenOptions::new().write(true).open(path)?;
        file.set_len(len)?;
        file.sync_all()
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn lock(&self, path: &Path) -> io::Result<DirLock> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        match file.try_lock() {
            Ok(()) => Ok(Box::new(HeldLock(file))),
            Err(fs::TryLockError::WouldBlock) => Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{} is locked by another process", path.display()),
            )),
            Err(fs::TryLockError::Error(e)) => Err(e),
        }
    }
}

/// A data directory's `flock`, released explicitly when dropped. Closing
/// the file alone is not enough: a child process forked at that moment
/// (another thread spawning a program) shares the open file until its
/// `exec` closes it, and the lock would stay taken until then. Unlocking
/// releases it for every holder of the open file at once.
struct HeldLock(File);

impl Drop for HeldLock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

/// Reads a whole file through `storage`.
pub fn read_all(storage: &dyn Storage, path: &Path) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    storage.open_read(path)?.read_to_end(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `write_out` on real files, on the disk and on tmpfs, answers Ok and
    /// leaves the bytes as written.
    #[test]
    fn write_out_works_on_real_files() {
        let shm = std::path::Path::new("/dev/shm");
        let dirs = [
            // The file system the checkout is on, and tmpfs.
            Some(tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap()),
            shm.is_dir().then(|| tempfile::tempdir_in(shm).unwrap()),
        ];
        for dir in dirs.iter().flatten() {
            let path = dir.path().join("f");
            let mut f = Disk.create(&path).unwrap();
            let bytes: Vec<u8> = (0..3 << 20).map(|i| (i % 251) as u8).collect();
            f.write_all(&bytes).unwrap();
            f.write_out(0, 2 << 20).unwrap();
            f.write_out(2 << 20, 1 << 20).unwrap();
            f.sync_data().unwrap();
            assert_eq!(fs::read(&path).unwrap(), bytes);
        }
    }

    /// A data directory's lock is free again once its holder is dropped,
    /// even while another handle on the same open file lives on (what a
    /// child forked at that moment holds until its `exec`; `try_clone` is
    /// the same `dup` within this process).
    #[test]
    fn a_dropped_lock_is_free_while_a_shared_handle_lives() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let held = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .unwrap();
        held.try_lock().unwrap();
        let shared = held.try_clone().unwrap();
        let lock: DirLock = Box::new(HeldLock(held));
        let err = Disk.lock(&path).err().expect("taken while held");
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        drop(lock);
        Disk.lock(&path).expect("free once dropped");
        drop(shared);
    }
}
