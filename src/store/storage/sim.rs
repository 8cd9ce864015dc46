//! An in-memory [`Storage`] for tests that behaves like a disk that loses
//! power: [`SimDisk::crash`] keeps only what was made durable (file bytes up
//! to their last `sync_data`, names as of their directory's last
//! `sync_dir`), optionally plus a torn prefix of each file's unsynced
//! bytes. It can also run out of space ([`SimDisk::set_capacity`]) and crash
//! by itself at the n-th mutating operation ([`SimDisk::crash_at_op`]),
//! and hold every `sync_data` until told to go on ([`SimDisk::hold_syncs`],
//! a disk whose flush hangs).
//!
//! A crashed disk is dead: every later operation through it, or through a
//! file opened on it, fails. [`SimDisk::reboot`] gives the disk as it is
//! found after the crash, to open a store on again.
//!
//! Directories are always durable (the store creates its directories once,
//! before anything else); everything else follows the contract in
//! [`super`].

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::{self, Cursor, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};
use rand::{Rng, SeedableRng, rngs::StdRng};

use super::{DirLock, ReadFile, Storage, StorageFile};

/// The disk, shared by every handle (clones are the same disk).
#[derive(Clone, Default)]
pub struct SimDisk {
    state: Arc<Mutex<State>>,
    /// Wakes syncs held by [`SimDisk::hold_syncs`].
    released: Arc<Condvar>,
}

impl std::fmt::Debug for SimDisk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.state.lock();
        f.debug_struct("SimDisk")
            .field("files", &st.names.len())
            .field("alive", &st.image.is_none())
            .finish()
    }
}

/// What survives a crash: each durable name with its bytes.
#[derive(Clone, Debug, Default)]
struct Image {
    files: BTreeMap<PathBuf, Vec<u8>>,
    dirs: BTreeSet<PathBuf>,
}

#[derive(Default)]
struct Inode {
    data: Vec<u8>,
    /// Content as of the last sync.
    durable: Vec<u8>,
    /// `durable` is a prefix of `data` (appends only since the last sync).
    prefix: bool,
}

#[derive(Default)]
struct State {
    names: BTreeMap<PathBuf, u64>,
    durable_names: BTreeMap<PathBuf, u64>,
    inodes: HashMap<u64, Inode>,
    next_inode: u64,
    dirs: BTreeSet<PathBuf>,
    /// Set once crashed: what a reboot finds.
    image: Option<Image>,
    ops: u64,
    crash_at: Option<u64>,
    tear_seed: Option<u64>,
    capacity: Option<u64>,
    locks: HashSet<PathBuf>,
    syncs: u64,
    /// While set, `sync_data` waits (see [`SimDisk::hold_syncs`]).
    hold_syncs: bool,
    syncs_waiting: usize,
}

fn dead() -> io::Error {
    io::Error::other("simulated power loss: the disk is gone")
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file", path.display()),
    )
}

impl State {
    /// Counts one mutating operation; crashes the disk at the chosen one.
    fn op(&mut self) -> io::Result<()> {
        if self.image.is_some() {
            return Err(dead());
        }
        self.ops += 1;
        if self.crash_at == Some(self.ops) {
            self.image = Some(self.survivors());
            return Err(dead());
        }
        Ok(())
    }

    fn check_alive(&self) -> io::Result<()> {
        if self.image.is_some() {
            return Err(dead());
        }
        Ok(())
    }

    fn survivors(&self) -> Image {
        let mut rng = self.tear_seed.map(StdRng::seed_from_u64);
        let mut files = BTreeMap::new();
        for (path, ino) in &self.durable_names {
            let inode = &self.inodes[ino];
            let mut bytes = inode.durable.clone();
            if let Some(rng) = rng.as_mut()
                && inode.prefix
                && inode.data.len() > bytes.len()
            {
                // A torn write: some of the unsynced bytes made it.
                let extra = rng.random_range(0..=inode.data.len() - bytes.len());
                bytes.extend_from_slice(&inode.data[inode.durable.len()..][..extra]);
            }
            files.insert(path.clone(), bytes);
        }
        Image {
            files,
            dirs: self.dirs.clone(),
        }
    }

    fn used(&self) -> u64 {
        self.inodes.values().map(|i| i.data.len() as u64).sum()
    }

    fn parent_exists(&self, path: &Path) -> io::Result<()> {
        match path.parent() {
            Some(p) if self.dirs.contains(p) => Ok(()),
            _ => Err(not_found(path)),
        }
    }

    fn inode(&self, path: &Path) -> io::Result<u64> {
        self.names.get(path).copied().ok_or_else(|| not_found(path))
    }

    fn sync_inode(&mut self, ino: u64) {
        let inode = self.inodes.get_mut(&ino).expect("live inode");
        if inode.prefix {
            let from = inode.durable.len();
            inode.durable.extend_from_slice(&inode.data[from..]);
        } else {
            inode.durable = inode.data.clone();
        }
        inode.prefix = true;
        self.syncs += 1;
    }

    fn gc(&mut self) {
        let live: HashSet<u64> = self
            .names
            .values()
            .chain(self.durable_names.values())
            .copied()
            .collect();
        self.inodes.retain(|ino, _| live.contains(ino));
    }
}

impl SimDisk {
    pub fn new() -> Self {
        Self::default()
    }

    /// The disk crashes by itself at its `n`-th mutating operation from now
    /// on (writes, syncs, creates, renames, removals, truncations); that
    /// operation fails and does not happen.
    pub fn crash_at_op(&self, n: u64) {
        let mut st = self.state.lock();
        st.crash_at = Some(st.ops + n);
    }

    /// A crash keeps a random prefix of every file's unsynced appended
    /// bytes (drawn from `seed`) instead of none of them.
    pub fn tear_writes(&self, seed: u64) {
        self.state.lock().tear_seed = Some(seed);
    }

    /// Writes fail with [`io::ErrorKind::StorageFull`] once the files hold
    /// `bytes` in total (`None`: unlimited). A write that does not fit
    /// writes what fits first, as a full disk does.
    pub fn set_capacity(&self, bytes: Option<u64>) {
        self.state.lock().capacity = bytes;
    }

    /// Cuts the power now (if the disk has not crashed by itself already).
    pub fn crash(&self) {
        let mut st = self.state.lock();
        if st.image.is_none() {
            st.image = Some(st.survivors());
        }
    }

    pub fn crashed(&self) -> bool {
        self.state.lock().image.is_some()
    }

    /// Mutating operations so far.
    pub fn ops(&self) -> u64 {
        self.state.lock().ops
    }

    /// Bytes the files hold now.
    pub fn used_bytes(&self) -> u64 {
        self.state.lock().used()
    }

    /// Successful `sync_data` calls so far.
    pub fn syncs(&self) -> u64 {
        self.state.lock().syncs
    }

    /// While `hold` is true, every `sync_data` waits (without completing)
    /// until it is set back to false: a disk whose flush hangs.
    pub fn hold_syncs(&self, hold: bool) {
        self.state.lock().hold_syncs = hold;
        self.released.notify_all();
    }

    /// `sync_data` calls waiting now because syncs are held.
    pub fn syncs_waiting(&self) -> usize {
        self.state.lock().syncs_waiting
    }

    /// The disk as found after the crash (crashing it now if needed): a
    /// new, live disk holding only what survived.
    pub fn reboot(&self) -> SimDisk {
        self.crash();
        let image = self.state.lock().image.clone().expect("crashed");
        let mut st = State {
            dirs: image.dirs,
            ..State::default()
        };
        for (path, bytes) in image.files {
            let ino = st.next_inode;
            st.next_inode += 1;
            st.inodes.insert(
                ino,
                Inode {
                    durable: bytes.clone(),
                    data: bytes,
                    prefix: true,
                },
            );
            st.names.insert(path.clone(), ino);
            st.durable_names.insert(path, ino);
        }
        SimDisk {
            state: Arc::new(Mutex::new(st)),
            released: Arc::new(Condvar::new()),
        }
    }

    /// Current content of a file (for tests that inspect or damage it).
    pub fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let st = self.state.lock();
        Ok(st.inodes[&st.inode(path)?].data.clone())
    }

    /// Replaces a file's content, durably (to simulate damage).
    pub fn overwrite(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let mut st = self.state.lock();
        let ino = st.inode(path)?;
        let inode = st.inodes.get_mut(&ino).expect("live inode");
        inode.data = bytes.to_vec();
        inode.durable = bytes.to_vec();
        inode.prefix = true;
        Ok(())
    }
}

struct SimFile {
    state: Arc<Mutex<State>>,
    released: Arc<Condvar>,
    ino: u64,
}

impl Write for SimFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut st = self.state.lock();
        st.op()?;
        let room = match st.capacity {
            Some(cap) => cap.saturating_sub(st.used()).min(buf.len() as u64) as usize,
            None => buf.len(),
        };
        if room == 0 && !buf.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                "simulated disk full",
            ));
        }
        let inode = st.inodes.get_mut(&self.ino).ok_or_else(dead)?;
        inode.data.extend_from_slice(&buf[..room]);
        Ok(room)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl StorageFile for SimFile {
    fn sync_data(&mut self) -> io::Result<()> {
        let mut st = self.state.lock();
        while st.hold_syncs {
            st.syncs_waiting += 1;
            self.released.wait(&mut st);
            st.syncs_waiting -= 1;
        }
        st.op()?;
        if !st.inodes.contains_key(&self.ino) {
            return Err(dead());
        }
        st.sync_inode(self.ino);
        Ok(())
    }

    fn try_clone(&self) -> io::Result<Box<dyn StorageFile>> {
        self.state.lock().check_alive()?;
        Ok(Box::new(SimFile {
            state: Arc::clone(&self.state),
            released: Arc::clone(&self.released),
            ino: self.ino,
        }))
    }
}

struct SimLock {
    state: Arc<Mutex<State>>,
    path: PathBuf,
}

impl Drop for SimLock {
    fn drop(&mut self) {
        self.state.lock().locks.remove(&self.path);
    }
}

impl SimDisk {
    fn file(&self, ino: u64) -> SimFile {
        SimFile {
            state: Arc::clone(&self.state),
            released: Arc::clone(&self.released),
            ino,
        }
    }
}

impl Storage for SimDisk {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.check_alive()?;
        for d in dir.ancestors() {
            if !d.as_os_str().is_empty() {
                st.dirs.insert(d.to_path_buf());
            }
        }
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let st = self.state.lock();
        st.check_alive()?;
        if !st.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        let children = st.names.keys().chain(st.dirs.iter());
        Ok(children
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name()?.to_str().map(str::to_string))
            .collect())
    }

    fn len(&self, path: &Path) -> io::Result<u64> {
        let st = self.state.lock();
        st.check_alive()?;
        Ok(st.inodes[&st.inode(path)?].data.len() as u64)
    }

    fn open_read(&self, path: &Path) -> io::Result<Box<dyn ReadFile>> {
        let st = self.state.lock();
        st.check_alive()?;
        let data = st.inodes[&st.inode(path)?].data.clone();
        Ok(Box::new(Cursor::new(data)))
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        let mut st = self.state.lock();
        st.op()?;
        st.parent_exists(path)?;
        let ino = match st.names.get(path) {
            Some(&ino) => {
                let inode = st.inodes.get_mut(&ino).expect("live inode");
                inode.data.clear();
                inode.prefix = inode.durable.is_empty();
                ino
            }
            None => {
                let ino = st.next_inode;
                st.next_inode += 1;
                st.inodes.insert(
                    ino,
                    Inode {
                        prefix: true,
                        ..Inode::default()
                    },
                );
                st.names.insert(path.to_path_buf(), ino);
                ino
            }
        };
        Ok(Box::new(self.file(ino)))
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        let st = self.state.lock();
        st.check_alive()?;
        let ino = st.inode(path)?;
        Ok(Box::new(self.file(ino)))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.op()?;
        st.parent_exists(to)?;
        let ino = st.inode(from)?;
        st.names.remove(from);
        st.names.insert(to.to_path_buf(), ino);
        st.gc();
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.op()?;
        st.inode(path)?;
        st.names.remove(path);
        st.gc();
        Ok(())
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let mut st = self.state.lock();
        st.op()?;
        let ino = st.inode(path)?;
        let inode = st.inodes.get_mut(&ino).expect("live inode");
        inode.data.truncate(len as usize);
        inode.prefix = false;
        st.sync_inode(ino);
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.op()?;
        let in_dir = |p: &PathBuf| p.parent() == Some(dir);
        st.durable_names.retain(|p, _| !in_dir(p));
        let current: Vec<(PathBuf, u64)> = st
            .names
            .iter()
            .filter(|(p, _)| in_dir(p))
            .map(|(p, i)| (p.clone(), *i))
            .collect();
        st.durable_names.extend(current);
        st.gc();
        Ok(())
    }

    fn lock(&self, path: &Path) -> io::Result<DirLock> {
        let mut st = self.state.lock();
        st.check_alive()?;
        if !st.locks.insert(path.to_path_buf()) {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{} is locked", path.display()),
            ));
        }
        Ok(Box::new(SimLock {
            state: Arc::clone(&self.state),
            path: path.to_path_buf(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_keeps_only_what_was_synced() {
        let disk = SimDisk::new();
        let dir = Path::new("/d");
        disk.create_dir_all(dir).unwrap();
        let a = dir.join("a");
        let mut f = disk.create(&a).unwrap();
        f.write_all(b"hello").unwrap();
        f.sync_data().unwrap();
        f.write_all(b" world").unwrap();
        // The name was never made durable: nothing survives.
        assert!(disk.reboot().list(dir).unwrap().is_empty());

        let disk = SimDisk::new();
        disk.create_dir_all(dir).unwrap();
        let mut f = disk.create(&a).unwrap();
        f.write_all(b"hello").unwrap();
        f.sync_data().unwrap();
        disk.sync_dir(dir).unwrap();
        f.write_all(b" world").unwrap();
        let after = disk.reboot();
        assert_eq!(after.read(&a).unwrap(), b"hello");
        assert!(f.write_all(b"!").is_err(), "the old disk is dead");

        // Renames need a directory sync too.
        after.rename(&a, &dir.join("b")).unwrap();
        let again = after.reboot();
        assert_eq!(again.list(dir).unwrap(), vec!["a".to_string()]);
    }

    #[test]
    fn torn_writes_keep_a_prefix_and_full_disks_refuse() {
        let disk = SimDisk::new();
        let dir = Path::new("/d");
        disk.create_dir_all(dir).unwrap();
        let a = dir.join("a");
        let mut f = disk.create(&a).unwrap();
        f.sync_data().unwrap();
        disk.sync_dir(dir).unwrap();
        f.write_all(&[7; 1000]).unwrap();
        disk.tear_writes(3);
        let got = disk.reboot().read(&a).unwrap();
        assert!(got.len() <= 1000 && got.iter().all(|&b| b == 7));

        let disk = SimDisk::new();
        disk.create_dir_all(dir).unwrap();
        disk.set_capacity(Some(10));
        let mut f = disk.create(&a).unwrap();
        let err = f.write_all(&[1; 12]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::StorageFull);
        assert_eq!(disk.len(&a).unwrap(), 10, "what fits is written");
        disk.set_capacity(None);
        f.write_all(&[1; 2]).unwrap();
    }

    #[test]
    fn crash_at_op_fails_that_op_and_everything_after() {
        let disk = SimDisk::new();
        let dir = Path::new("/d");
        disk.create_dir_all(dir).unwrap();
        disk.crash_at_op(2);
        let mut f = disk.create(&dir.join("a")).unwrap();
        assert!(f.write_all(b"x").is_err());
        assert!(disk.crashed());
        assert!(disk.sync_dir(dir).is_err());
    }
}
