//! [`MemoryFs`]: a file system held in memory, for tests, fuzzing, benchmarks
//! and throw-away exports.
//!
//! # Layout
//!
//! - `table`: the inode table, a slab indexed by inode number. A handle is the
//!   inode number and the slot's generation (12 bytes); resolving one is an
//!   index into a vector. The generation changes when an object dies, so its
//!   handles become [`FsError::Stale`] and never alias the slot's next tenant.
//! - `inode`: an object's fixed identity (number, type, handle) and its state
//!   behind its own `RwLock`: attributes and contents.
//! - `dir`: entries by name and by READDIR cookie (two B-trees); cookies come
//!   from a per-directory counter and are never reused.
//! - `file`: sparse data in 64 KiB chunks; holes and extensions cost nothing.
//! - `perm`: POSIX mode-bit checks.
//!
//! # Lock order
//!
//! 1. `rename_lock`: every RENAME holds it throughout, so the shape of the tree
//!    (which directory is inside which) only changes under it.
//! 2. Inode state locks, in tree order: a directory before anything in it
//!    (parent before child). Two directories neither of which contains the
//!    other are only held together by RENAME, under `rename_lock`, taken in
//!    inode-number order. Non-directories come after every directory, and two
//!    of them in inode-number order.
//! 3. Leaf locks, under which nothing else is taken: the inode table and a
//!    directory's `parent` pointer.
//!
//! So LOOKUP of `..` and READDIR's `..` entry read the parent pointer and lock
//! the parent only after releasing the directory; RENAME decides whether one
//! directory contains the other by walking parent pointers (O(depth)) under
//! `rename_lock` before locking either.
//!
//! # Behaviour worth knowing
//!
//! - Memory is as durable as it gets for this process: every WRITE reports
//!   [`Stability::FileSync`] and COMMIT has nothing to do. The write verifier
//!   is random per instance.
//! - Data is charged against a byte budget ([`MemoryConfig::budget_bytes`]),
//!   together with a fixed cost per object and per name; past it, operations
//!   fail with [`FsError::NoSpc`]. FSSTAT reports the budget.
//! - Reads do not update atime (as with `noatime`), so READ takes only a
//!   shared lock.
//! - READ and WRITE allow the file's owner whatever the mode bits, like knfsd,
//!   so that a client can write a file it created read-only. ACCESS and every
//!   other check follow the mode bits strictly.
//! - An EXCLUSIVE create keeps its verifier with the file for the file's whole
//!   life (a later SETATTR does not clear it), so a retransmission always
//!   finds it.
//! - Timestamps come from the system clock but never repeat or go backwards
//!   within an instance: each change gets a later time than the one before.

mod dir;
mod file;
mod inode;
mod perm;
mod table;

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{
    Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak,
};
use std::time::{SystemTime, UNIX_EPOCH};

use self::dir::{DirData, DOTDOT_COOKIE, DOT_COOKIE};
use self::file::FileData;
use self::inode::{Body, Inode, Meta, State};
use self::perm::{is_root, may_access_data, may_delete, permits, R, S_ISGID, W, X};
use self::table::Table;
use crate::names::{check_name, NAME_MAX};
use crate::{
    access, Attr, BackendHandle, CookieVerifier, CreateHow, CreateVerifier, Created, Cred,
    DirEntry, FileType, Filesystem, FsError, FsInfo, FsResult, FsStat, ReadOk, ReaddirEnd, SetAttr,
    SetTime, SpecialNode, Stability, Time, Wcc, WccAttr, WriteOk, WriteVerifier,
};

/// Inode number of the root.
const ROOT_INO: u64 = 1;
/// Longest symlink target (PATH_MAX).
const MAX_SYMLINK: usize = 4096;
/// Most links to one object.
const MAX_LINK: u32 = 65_000;
/// Most bytes one READ returns (a server asks for far less).
const MAX_READ: u32 = 16 << 20;
/// Budget charged per object, beyond its data.
const INODE_COST: u64 = 256;
/// Budget charged per directory entry, beyond its name.
const ENTRY_COST: u64 = 64;

/// Limits and the root's ownership for a [`MemoryFs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryConfig {
    /// Bytes of data, names and objects the file system may hold (default 1 GiB).
    pub budget_bytes: u64,
    /// Most objects alive at once, the root included (default 2^20).
    pub max_files: u64,
    /// Largest file size (default 16 GiB); files are sparse, so this bounds
    /// offsets, not memory.
    pub max_file_size: u64,
    /// Owner of the root directory (default 0).
    pub root_uid: u32,
    /// Group of the root directory (default 0).
    pub root_gid: u32,
    /// Mode of the root directory (default 0o755).
    pub root_mode: u32,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            budget_bytes: 1 << 30,
            max_files: 1 << 20,
            max_file_size: 16 << 30,
            root_uid: 0,
            root_gid: 0,
            root_mode: 0o755,
        }
    }
}

/// A [`Filesystem`] in memory. See the [module docs](self) for its design.
pub struct MemoryFs {
    fsid: u64,
    config: MemoryConfig,
    root: BackendHandle,
    /// Live inodes; a leaf lock.
    table: RwLock<Table>,
    /// Serializes RENAMEs (see the lock order in the module docs).
    rename_lock: Mutex<()>,
    budget: Budget,
    clock: Clock,
    write_verifier: WriteVerifier,
    /// Mixed into every directory's cookie verifier.
    cookie_salt: u64,
}

impl std::fmt::Debug for MemoryFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryFs")
            .field("fsid", &self.fsid)
            .field("config", &self.config)
            .field("bytes_used", &self.budget.used())
            .finish_non_exhaustive()
    }
}

impl MemoryFs {
    /// An empty file system with the default [`MemoryConfig`]: the root is a
    /// directory owned by root with mode 0o755.
    pub fn new(fsid: u64) -> Self {
        Self::with_config(fsid, MemoryConfig::default())
    }

    /// An empty file system with the given limits and root ownership.
    pub fn with_config(fsid: u64, config: MemoryConfig) -> Self {
        let salt = random_u64(fsid);
        let clock = Clock::default();
        let now = clock.now();
        let mut table = Table::new(salt as u32);
        let meta = Meta {
            mode: config.root_mode & 0o7777,
            nlink: 2,
            uid: config.root_uid,
            gid: config.root_gid,
            atime: now,
            mtime: now,
            ctime: now,
        };
        let root = table.insert(u64::MAX, |ino, generation| {
            let state = State {
                dead: false,
                meta,
                body: Body::Dir(DirData::new()),
            };
            Inode::new(ino, generation, FileType::Directory, Weak::new(), state)
        });
        // The first insert into an empty table takes slot 0 at `salt as u32`.
        let root = root.map_or_else(|_| table::encode(ROOT_INO, salt as u32), |r| r.handle);
        Self {
            fsid,
            config,
            root,
            table: RwLock::new(table),
            rename_lock: Mutex::new(()),
            budget: Budget {
                limit: config.budget_bytes,
                used: AtomicU64::new(0),
            },
            clock,
            write_verifier: random_u64(salt.rotate_left(17)).to_be_bytes(),
            cookie_salt: random_u64(salt.rotate_left(31)),
        }
    }

    /// The live inode behind `fh` (O(1)).
    fn resolve(&self, fh: &BackendHandle) -> FsResult<Arc<Inode>> {
        let (ino, generation) = table::decode(fh)?;
        read(&self.table).get(ino, generation)
    }

    fn attr(&self, inode: &Inode, state: &State) -> Attr {
        inode.attr(state, self.fsid)
    }

    fn wcc(&self, inode: &Inode, before: WccAttr, state: &State) -> Wcc {
        Wcc {
            before: Some(before),
            after: Some(self.attr(inode, state)),
        }
    }

    /// The wcc of a directory an operation failed on before changing it.
    fn unchanged_wcc(&self, fh: &BackendHandle) -> Wcc {
        let Ok(inode) = self.resolve(fh) else {
            return Wcc::default();
        };
        let Ok(state) = live_read(&inode) else {
            return Wcc::default();
        };
        self.wcc(&inode, state.wcc_attr(), &state)
    }

    /// Runs `op` on the live object `fh` under its write lock; returns its result
    /// with the object's wcc around it.
    fn update<T>(
        &self,
        fh: &BackendHandle,
        op: impl FnOnce(&Arc<Inode>, &mut State) -> FsResult<T>,
    ) -> Result<(T, Wcc), (FsError, Wcc)> {
        let inode = self.resolve(fh).map_err(|e| (e, Wcc::default()))?;
        let mut g = live_write(&inode).map_err(|e| (e, Wcc::default()))?;
        let before = g.wcc_attr();
        let res = op(&inode, &mut g);
        let wcc = self.wcc(&inode, before, &g);
        match res {
            Ok(value) => Ok((value, wcc)),
            Err(e) => Err((e, wcc)),
        }
    }

    /// Marks `inode` dead after its last link went: frees its contents, its
    /// budget and its table slot (its handles are stale from now on).
    fn kill(&self, inode: &Inode, state: &mut State) {
        state.dead = true;
        state.meta.nlink = 0;
        self.budget.release(INODE_COST + state.body.take_storage());
        write(&self.table).remove(inode.ino);
    }

    fn cookie_verifier(&self, dir: &Inode) -> CookieVerifier {
        let v = self.cookie_salt ^ dir.ino.rotate_left(32) ^ u64::from(dir.generation);
        v.max(1).to_be_bytes()
    }

    /// CREATE, MKDIR, SYMLINK and MKNOD: checks, locks `dir`, adds the entry.
    fn add_node(
        &self,
        cred: &Cred,
        dir: &BackendHandle,
        name: &[u8],
        node: NewNode<'_>,
        on_exist: OnExist<'_>,
    ) -> Result<Created, (FsError, Wcc)> {
        let ((handle, attr), dir_wcc) = self.update(dir, |d, g| {
            self.add_node_locked(cred, d, g, name, node, on_exist)
        })?;
        Ok(Created {
            handle,
            attr,
            dir_wcc,
        })
    }

    fn add_node_locked(
        &self,
        cred: &Cred,
        d: &Arc<Inode>,
        g: &mut State,
        name: &[u8],
        node: NewNode<'_>,
        on_exist: OnExist<'_>,
    ) -> FsResult<(BackendHandle, Attr)> {
        let State {
            meta: dir_meta,
            body,
            ..
        } = g;
        let Body::Dir(entries) = body else {
            return Err(FsError::NotDir);
        };
        check_name(name, FsError::Exist)?;
        if !permits(cred, dir_meta, true, X) {
            return Err(FsError::Access);
        }
        if let Some(existing) = entries.get(name) {
            let existing = Arc::clone(existing);
            return self.create_existing(cred, &existing, on_exist);
        }
        if !permits(cred, dir_meta, true, W | X) {
            return Err(FsError::Access);
        }
        let attr = node.attr;
        if !is_root(cred) {
            if node.needs_root || attr.uid.is_some_and(|uid| uid != cred.uid) {
                return Err(FsError::Perm);
            }
            if attr.gid.is_some_and(|gid| !cred.in_group(gid)) {
                return Err(FsError::Perm);
            }
        }
        if let Body::File(f) = &node.body {
            if f.size() > self.config.max_file_size {
                return Err(FsError::FBig);
            }
        }
        let is_dir = node.ftype == FileType::Directory;
        if is_dir && dir_meta.nlink >= MAX_LINK {
            return Err(FsError::MLink);
        }
        let inherit_gid = dir_meta.mode & S_ISGID != 0;
        let gid = attr
            .gid
            .unwrap_or(if inherit_gid { dir_meta.gid } else { cred.gid });
        let mut mode = node.mode & 0o7777;
        if is_dir && inherit_gid {
            mode |= S_ISGID;
        } else if !is_root(cred) && !cred.in_group(gid) {
            mode &= !S_ISGID;
        }
        let now = self.clock.now();
        let meta = Meta {
            mode,
            nlink: if is_dir { 2 } else { 1 },
            uid: attr.uid.unwrap_or(cred.uid),
            gid,
            atime: time_or(attr.atime, now),
            mtime: time_or(attr.mtime, now),
            ctime: now,
        };
        let cost = INODE_COST + entry_cost(name) + node.extra_cost;
        self.budget.charge(cost)?;
        let parent = if is_dir {
            Arc::downgrade(d)
        } else {
            Weak::new()
        };
        let inserted = write(&self.table).insert(self.config.max_files, |ino, generation| {
            let state = State {
                dead: false,
                meta,
                body: node.body,
            };
            Inode::new(ino, generation, node.ftype, parent, state)
        });
        let child = inserted.inspect_err(|_| self.budget.release(cost))?;
        let child_attr = self.attr(&child, &read(&child.state));
        entries.insert(name, Arc::clone(&child));
        if is_dir {
            dir_meta.nlink += 1;
        }
        touch(dir_meta, now);
        Ok((child.handle, child_attr))
    }

    /// CREATE of a name that exists (the directory is locked).
    fn create_existing(
        &self,
        cred: &Cred,
        existing: &Arc<Inode>,
        on_exist: OnExist<'_>,
    ) -> FsResult<(BackendHandle, Attr)> {
        match on_exist {
            OnExist::Fail => Err(FsError::Exist),
            OnExist::Exclusive(verifier) => {
                let g = read(&existing.state);
                match &g.body {
                    Body::File(f) if f.verifier == Some(verifier) => {
                        Ok((existing.handle, self.attr(existing, &g)))
                    }
                    _ => Err(FsError::Exist),
                }
            }
            OnExist::Unchecked(set) => {
                if existing.ftype != FileType::Regular {
                    return Err(FsError::Exist);
                }
                let mut g = write(&existing.state);
                if let Some(size) = set.size {
                    if !may_access_data(cred, &g.meta, W) {
                        return Err(FsError::Access);
                    }
                    self.truncate(cred, &mut g, size)?;
                }
                Ok((existing.handle, self.attr(existing, &g)))
            }
        }
    }

    /// Sets a regular file's size (permission already checked).
    fn truncate(&self, cred: &Cred, g: &mut State, size: u64) -> FsResult<()> {
        if size > self.config.max_file_size {
            return Err(FsError::FBig);
        }
        let Body::File(f) = &mut g.body else {
            return Err(FsError::Inval);
        };
        self.budget.release(f.set_size(size));
        let now = self.clock.now();
        g.meta.mtime = now;
        g.meta.ctime = now;
        g.meta.mode = perm::strip_on_write(cred, g.meta.mode);
        Ok(())
    }

    fn setattr_locked(
        &self,
        cred: &Cred,
        inode: &Inode,
        g: &mut State,
        set: &SetAttr,
        guard: Option<Time>,
    ) -> FsResult<()> {
        if guard.is_some_and(|ctime| ctime != g.meta.ctime) {
            return Err(FsError::NotSync);
        }
        let root = is_root(cred);
        let is_owner = cred.uid == g.meta.uid;
        let is_dir = inode.ftype == FileType::Directory;
        // Every check first: a SETATTR applies completely or not at all.
        if set.mode.is_some() && !(root || is_owner) {
            return Err(FsError::Perm);
        }
        if set
            .uid
            .is_some_and(|uid| !(root || (is_owner && uid == g.meta.uid)))
        {
            return Err(FsError::Perm);
        }
        if set
            .gid
            .is_some_and(|gid| !(root || (is_owner && (gid == g.meta.gid || cred.in_group(gid)))))
        {
            return Err(FsError::Perm);
        }
        if let Some(size) = set.size {
            match g.body {
                Body::File(_) => {}
                Body::Dir(_) => return Err(FsError::IsDir),
                _ => return Err(FsError::Inval),
            }
            if !may_access_data(cred, &g.meta, W) {
                return Err(FsError::Access);
            }
            if size > self.config.max_file_size {
                return Err(FsError::FBig);
            }
        }
        let client_time = |t| matches!(t, SetTime::ClientTime(_));
        if (client_time(set.atime) || client_time(set.mtime)) && !(root || is_owner) {
            return Err(FsError::Perm);
        }
        let server_time = |t| matches!(t, SetTime::ServerTime);
        if (server_time(set.atime) || server_time(set.mtime))
            && !(root || is_owner || permits(cred, &g.meta, is_dir, W))
        {
            return Err(FsError::Access);
        }

        let now = self.clock.now();
        let mut changed = false;
        let chown = set.uid.is_some() || set.gid.is_some();
        if chown {
            g.meta.uid = set.uid.unwrap_or(g.meta.uid);
            g.meta.gid = set.gid.unwrap_or(g.meta.gid);
            changed = true;
        }
        if let Some(mode) = set.mode {
            let mut mode = mode & 0o7777;
            if !root && !cred.in_group(g.meta.gid) {
                mode &= !S_ISGID;
            }
            g.meta.mode = mode;
            changed = true;
        }
        // As knfsd: a change of owner drops setuid (and executable setgid).
        if chown && !is_dir {
            g.meta.mode = perm::strip_suid(g.meta.mode);
        }
        if let Some(size) = set.size {
            self.truncate(cred, g, size)?;
            changed = true;
        }
        for (how, time) in [
            (set.atime, &mut g.meta.atime),
            (set.mtime, &mut g.meta.mtime),
        ] {
            match how {
                SetTime::DontChange => {}
                SetTime::ServerTime => *time = now,
                SetTime::ClientTime(t) => *time = t,
            }
            changed |= how != SetTime::DontChange;
        }
        if changed {
            g.meta.ctime = g.meta.ctime.max(now);
        }
        Ok(())
    }

    fn write_locked(&self, cred: &Cred, g: &mut State, offset: u64, data: &[u8]) -> FsResult<u32> {
        let State { meta, body, .. } = g;
        let f = match body {
            Body::File(f) => f,
            Body::Dir(_) => return Err(FsError::IsDir),
            _ => return Err(FsError::Inval),
        };
        if !may_access_data(cred, meta, W) {
            return Err(FsError::Access);
        }
        let count = u32::try_from(data.len()).map_err(|_| FsError::FBig)?;
        let len = u64::from(count);
        if offset
            .checked_add(len)
            .is_none_or(|end| end > self.config.max_file_size)
        {
            return Err(FsError::FBig);
        }
        if count == 0 {
            return Ok(0);
        }
        self.budget.charge(f.growth(offset, len))?;
        f.write(offset, data);
        let now = self.clock.now();
        meta.mtime = now;
        meta.ctime = now;
        meta.mode = perm::strip_on_write(cred, meta.mode);
        Ok(count)
    }

    /// REMOVE (`rmdir == false`) and RMDIR.
    fn unlink(
        &self,
        cred: &Cred,
        dir: &BackendHandle,
        name: &[u8],
        rmdir: bool,
    ) -> Result<Wcc, (FsError, Wcc)> {
        let ((), wcc) = self.update(dir, |_, g| self.unlink_locked(cred, g, name, rmdir))?;
        Ok(wcc)
    }

    fn unlink_locked(&self, cred: &Cred, g: &mut State, name: &[u8], rmdir: bool) -> FsResult<()> {
        let State {
            meta: dir_meta,
            body,
            ..
        } = g;
        let Body::Dir(entries) = body else {
            return Err(FsError::NotDir);
        };
        check_name(name, FsError::Inval)?;
        if !permits(cred, dir_meta, true, W | X) {
            return Err(FsError::Access);
        }
        let child = entries.get(name).cloned().ok_or(FsError::NoEnt)?;
        match (rmdir, child.ftype == FileType::Directory) {
            (false, true) => return Err(FsError::IsDir),
            (true, false) => return Err(FsError::NotDir),
            _ => {}
        }
        let mut cg = write(&child.state);
        if !may_delete(cred, dir_meta, &cg.meta) {
            return Err(FsError::Perm);
        }
        if cg.dir().is_some_and(|d| !d.is_empty()) {
            return Err(FsError::NotEmpty);
        }
        let now = self.clock.now();
        entries.remove(name);
        self.budget.release(entry_cost(name));
        if rmdir {
            cg.meta.nlink = 0;
            dir_meta.nlink = dir_meta.nlink.saturating_sub(1);
        } else {
            cg.meta.nlink = cg.meta.nlink.saturating_sub(1);
        }
        cg.meta.ctime = now;
        if cg.meta.nlink == 0 {
            self.kill(&child, &mut cg);
        }
        touch(dir_meta, now);
        Ok(())
    }

    /// RENAME with both directories locked (`rename_lock` held).
    fn rename_locked(
        &self,
        cred: &Cred,
        (d1, d2): (&Arc<Inode>, &Arc<Inode>),
        mut dirs: Dirs<'_>,
        from: &[u8],
        to: &[u8],
    ) -> FsResult<()> {
        check_name(from, FsError::Inval)?;
        check_name(to, FsError::Inval)?;
        let src_meta = dirs.src().meta;
        let dst_meta = dirs.dst().meta;
        if !permits(cred, &src_meta, true, W | X) || !permits(cred, &dst_meta, true, W | X) {
            return Err(FsError::Access);
        }
        let s = dirs
            .src()
            .dir()
            .ok_or(FsError::NotDir)?
            .get(from)
            .cloned()
            .ok_or(FsError::NoEnt)?;
        let t = dirs.dst().dir().ok_or(FsError::NotDir)?.get(to).cloned();
        if t.as_ref().is_some_and(|t| Arc::ptr_eq(&s, t)) {
            // Two links to one object (or one name): POSIX says do nothing.
            return Ok(());
        }
        let cross = dirs.cross();
        let s_is_dir = s.ftype == FileType::Directory;
        let t_is_dir = t.as_ref().map(|t| t.ftype == FileType::Directory);
        match (s_is_dir, t_is_dir) {
            (true, Some(false)) => return Err(FsError::NotDir),
            (false, Some(true)) => return Err(FsError::IsDir),
            _ => {}
        }
        // The tree's shape is fixed under `rename_lock`, so these walks are
        // exact; they also guarantee that `s` and `t` are not ancestors of the
        // locked directories, which makes locking them next safe.
        if s_is_dir && cross && is_ancestor_or_self(&s, d2) {
            return Err(FsError::Inval);
        }
        if let Some(t) = &t {
            if t_is_dir == Some(true) && cross && is_ancestor_or_self(t, d1) {
                return Err(FsError::NotEmpty);
            }
        }
        let (mut sg, mut tg) = lock_pair(&s, t.as_deref());
        if sg.dead || tg.as_ref().is_some_and(|g| g.dead) {
            return Err(FsError::Stale);
        }
        if !may_delete(cred, &src_meta, &sg.meta)
            || tg
                .as_ref()
                .is_some_and(|tg| !may_delete(cred, &dst_meta, &tg.meta))
        {
            return Err(FsError::Perm);
        }
        // Moving a directory rewrites its `..`.
        if s_is_dir && cross && !permits(cred, &sg.meta, true, W) {
            return Err(FsError::Access);
        }
        if tg
            .as_ref()
            .is_some_and(|tg| tg.dir().is_some_and(|d| !d.is_empty()))
        {
            return Err(FsError::NotEmpty);
        }
        if s_is_dir && cross && t.is_none() && dst_meta.nlink >= MAX_LINK {
            return Err(FsError::MLink);
        }
        // The entry's name changes from `from` to `to`; a replaced target's
        // entry (named `to`) is reused.
        let (from_cost, to_cost) = (entry_cost(from), entry_cost(to));
        let release = if t.is_some() {
            from_cost
        } else if to_cost > from_cost {
            self.budget.charge(to_cost - from_cost)?;
            0
        } else {
            from_cost - to_cost
        };

        // Nothing fails from here on.
        let now = self.clock.now();
        if let Some(entries) = dirs.src().dir_mut() {
            entries.remove(from);
        }
        if let (Some(t), Some(tg)) = (&t, tg.as_mut()) {
            if let Some(entries) = dirs.dst().dir_mut() {
                entries.remove(to);
            }
            if t_is_dir == Some(true) {
                tg.meta.nlink = 0;
                let dst = dirs.dst();
                dst.meta.nlink = dst.meta.nlink.saturating_sub(1);
            } else {
                tg.meta.nlink = tg.meta.nlink.saturating_sub(1);
            }
            tg.meta.ctime = now;
            if tg.meta.nlink == 0 {
                self.kill(t, tg);
            }
        }
        if let Some(entries) = dirs.dst().dir_mut() {
            entries.insert(to, Arc::clone(&s));
        }
        if s_is_dir && cross {
            let src = dirs.src();
            src.meta.nlink = src.meta.nlink.saturating_sub(1);
            dirs.dst().meta.nlink += 1;
            *lock(&s.parent) = Arc::downgrade(d2);
        }
        sg.meta.ctime = now;
        touch(&mut dirs.src().meta, now);
        touch(&mut dirs.dst().meta, now);
        self.budget.release(release);
        Ok(())
    }

    fn link_locked(
        &self,
        cred: &Cred,
        f: &Arc<Inode>,
        g: &mut State,
        name: &[u8],
    ) -> FsResult<Attr> {
        let State {
            meta: dir_meta,
            body,
            ..
        } = g;
        let Body::Dir(entries) = body else {
            return Err(FsError::NotDir);
        };
        check_name(name, FsError::Exist)?;
        if !permits(cred, dir_meta, true, W | X) {
            return Err(FsError::Access);
        }
        if entries.get(name).is_some() {
            return Err(FsError::Exist);
        }
        // `f` is not a directory: a leaf in the lock order.
        let mut fg = live_write(f)?;
        if fg.meta.nlink >= MAX_LINK {
            return Err(FsError::MLink);
        }
        self.budget.charge(entry_cost(name))?;
        let now = self.clock.now();
        entries.insert(name, Arc::clone(f));
        fg.meta.nlink += 1;
        fg.meta.ctime = now;
        touch(dir_meta, now);
        Ok(self.attr(f, &fg))
    }
}

impl Filesystem for MemoryFs {
    fn root(&self) -> BackendHandle {
        self.root
    }

    fn getattr(&self, _cred: &Cred, fh: &BackendHandle) -> FsResult<Attr> {
        let inode = self.resolve(fh)?;
        let g = live_read(&inode)?;
        Ok(self.attr(&inode, &g))
    }

    fn setattr(
        &self,
        cred: &Cred,
        fh: &BackendHandle,
        set: &SetAttr,
        guard: Option<Time>,
    ) -> Result<Wcc, (FsError, Wcc)> {
        let ((), wcc) = self.update(fh, |inode, g| {
            self.setattr_locked(cred, inode, g, set, guard)
        })?;
        Ok(wcc)
    }

    fn lookup(
        &self,
        cred: &Cred,
        dir: &BackendHandle,
        name: &[u8],
    ) -> Result<(BackendHandle, Attr, Option<Attr>), (FsError, Option<Attr>)> {
        let d = self.resolve(dir).map_err(|e| (e, None))?;
        let g = live_read(&d).map_err(|e| (e, None))?;
        let dir_attr = self.attr(&d, &g);
        let fail = |e| Err((e, Some(dir_attr)));
        let Some(entries) = g.dir() else {
            return fail(FsError::NotDir);
        };
        if !permits(cred, &g.meta, true, X) {
            return fail(FsError::Access);
        }
        if name.len() > NAME_MAX {
            return fail(FsError::NameTooLong);
        }
        match name {
            b"." => Ok((d.handle, dir_attr, Some(dir_attr))),
            b".." => {
                let parent = parent_of(&d);
                // Lock order: never lock a parent while holding its child.
                drop(g);
                let parent = match parent {
                    Ok(p) if Arc::ptr_eq(&p, &d) => {
                        return Ok((d.handle, dir_attr, Some(dir_attr)))
                    }
                    Ok(p) => p,
                    Err(e) => return fail(e),
                };
                let found = match live_read(&parent) {
                    Ok(pg) => Ok((parent.handle, self.attr(&parent, &pg), Some(dir_attr))),
                    Err(_) => fail(FsError::NoEnt),
                };
                found
            }
            _ => {
                let Some(child) = entries.get(name) else {
                    return fail(FsError::NoEnt);
                };
                let cg = read(&child.state);
                Ok((child.handle, self.attr(child, &cg), Some(dir_attr)))
            }
        }
    }

    fn access(&self, cred: &Cred, fh: &BackendHandle, mask: u32) -> FsResult<(u32, Attr)> {
        let inode = self.resolve(fh)?;
        let g = live_read(&inode)?;
        let is_dir = inode.ftype == FileType::Directory;
        let can = |want| permits(cred, &g.meta, is_dir, want);
        let mut granted = 0;
        if can(R) {
            granted |= access::READ;
        }
        if is_dir {
            if can(X) {
                granted |= access::LOOKUP;
            }
            if can(W | X) {
                granted |= access::MODIFY | access::EXTEND | access::DELETE;
            }
        } else {
            if can(W) {
                granted |= access::MODIFY | access::EXTEND;
            }
            if can(X) {
                granted |= access::EXECUTE;
            }
        }
        Ok((granted & mask, self.attr(&inode, &g)))
    }

    fn readlink(&self, _cred: &Cred, fh: &BackendHandle, out: &mut Vec<u8>) -> FsResult<Attr> {
        let inode = self.resolve(fh)?;
        let g = live_read(&inode)?;
        let Body::Symlink(target) = &g.body else {
            return Err(FsError::Inval);
        };
        out.extend_from_slice(target);
        Ok(self.attr(&inode, &g))
    }

    fn read(
        &self,
        cred: &Cred,
        fh: &BackendHandle,
        offset: u64,
        count: u32,
        out: &mut Vec<u8>,
    ) -> FsResult<ReadOk> {
        let inode = self.resolve(fh)?;
        let g = live_read(&inode)?;
        let f = match &g.body {
            Body::File(f) => f,
            Body::Dir(_) => return Err(FsError::IsDir),
            _ => return Err(FsError::Inval),
        };
        if !may_access_data(cred, &g.meta, R) {
            return Err(FsError::Access);
        }
        let (count, eof) = f.read(offset, count.min(MAX_READ), out);
        Ok(ReadOk {
            count,
            eof,
            attr: Some(self.attr(&inode, &g)),
        })
    }

    /// Everything is in memory: always answers.
    fn read_cached(
        &self,
        cred: &Cred,
        fh: &BackendHandle,
        offset: u64,
        count: u32,
        out: &mut Vec<u8>,
    ) -> FsResult<Option<ReadOk>> {
        self.read(cred, fh, offset, count, out).map(Some)
    }

    fn write(
        &self,
        cred: &Cred,
        fh: &BackendHandle,
        offset: u64,
        data: &[u8],
        _stable: Stability,
    ) -> Result<WriteOk, (FsError, Wcc)> {
        let (count, wcc) = self.update(fh, |_, g| self.write_locked(cred, g, offset, data))?;
        Ok(WriteOk {
            count,
            committed: Stability::FileSync,
            wcc,
        })
    }

    fn create(
        &self,
        cred: &Cred,
        dir: &BackendHandle,
        name: &[u8],
        how: &CreateHow,
    ) -> Result<Created, (FsError, Wcc)> {
        const EXCLUSIVE_ATTR: SetAttr = SetAttr {
            mode: Some(0o600),
            uid: None,
            gid: None,
            size: None,
            atime: SetTime::DontChange,
            mtime: SetTime::DontChange,
        };
        let (attr, verifier, on_exist) = match how {
            CreateHow::Unchecked(attr) => (attr, None, OnExist::Unchecked(attr)),
            CreateHow::Guarded(attr) => (attr, None, OnExist::Fail),
            CreateHow::Exclusive(v) => (&EXCLUSIVE_ATTR, Some(*v), OnExist::Exclusive(*v)),
        };
        let node = NewNode {
            ftype: FileType::Regular,
            mode: attr.mode.unwrap_or(0o644),
            attr,
            body: Body::File(FileData::with_size(attr.size.unwrap_or(0), verifier)),
            extra_cost: 0,
            needs_root: false,
        };
        self.add_node(cred, dir, name, node, on_exist)
    }

    fn mkdir(
        &self,
        cred: &Cred,
        dir: &BackendHandle,
        name: &[u8],
        attr: &SetAttr,
    ) -> Result<Created, (FsError, Wcc)> {
        let node = NewNode {
            ftype: FileType::Directory,
            mode: attr.mode.unwrap_or(0o755),
            attr,
            body: Body::Dir(DirData::new()),
            extra_cost: 0,
            needs_root: false,
        };
        self.add_node(cred, dir, name, node, OnExist::Fail)
    }

    fn symlink(
        &self,
        cred: &Cred,
        dir: &BackendHandle,
        name: &[u8],
        target: &[u8],
        attr: &SetAttr,
    ) -> Result<Created, (FsError, Wcc)> {
        // As symlink(2): an empty target is NoEnt, a long one NameTooLong.
        if target.is_empty() || target.len() > MAX_SYMLINK {
            let e = if target.is_empty() {
                FsError::NoEnt
            } else {
                FsError::NameTooLong
            };
            return Err((e, self.unchanged_wcc(dir)));
        }
        let node = NewNode {
            ftype: FileType::Symlink,
            mode: 0o777,
            attr,
            body: Body::Symlink(target.into()),
            extra_cost: target.len() as u64,
            needs_root: false,
        };
        self.add_node(cred, dir, name, node, OnExist::Fail)
    }

    fn mknod(
        &self,
        cred: &Cred,
        dir: &BackendHandle,
        name: &[u8],
        node: &SpecialNode,
        attr: &SetAttr,
    ) -> Result<Created, (FsError, Wcc)> {
        let (ftype, rdev) = match *node {
            SpecialNode::Char(major, minor) => (FileType::CharDevice, (major, minor)),
            SpecialNode::Block(major, minor) => (FileType::BlockDevice, (major, minor)),
            SpecialNode::Socket => (FileType::Socket, (0, 0)),
            SpecialNode::Fifo => (FileType::Fifo, (0, 0)),
        };
        let node = NewNode {
            ftype,
            mode: attr.mode.unwrap_or(0o644),
            attr,
            body: Body::Special(rdev),
            extra_cost: 0,
            needs_root: matches!(ftype, FileType::CharDevice | FileType::BlockDevice),
        };
        self.add_node(cred, dir, name, node, OnExist::Fail)
    }

    fn remove(&self, cred: &Cred, dir: &BackendHandle, name: &[u8]) -> Result<Wcc, (FsError, Wcc)> {
        self.unlink(cred, dir, name, false)
    }

    fn rmdir(&self, cred: &Cred, dir: &BackendHandle, name: &[u8]) -> Result<Wcc, (FsError, Wcc)> {
        self.unlink(cred, dir, name, true)
    }

    fn rename(
        &self,
        cred: &Cred,
        from_dir: &BackendHandle,
        from_name: &[u8],
        to_dir: &BackendHandle,
        to_name: &[u8],
    ) -> Result<(Wcc, Wcc), (FsError, Wcc, Wcc)> {
        let bare = |e| (e, Wcc::default(), Wcc::default());
        let d1 = self.resolve(from_dir).map_err(bare)?;
        let d2 = self.resolve(to_dir).map_err(bare)?;
        if d1.ftype != FileType::Directory || d2.ftype != FileType::Directory {
            return Err(bare(FsError::NotDir));
        }
        let _serial = lock(&self.rename_lock);
        if Arc::ptr_eq(&d1, &d2) {
            let mut g = live_write(&d1).map_err(bare)?;
            let before = g.wcc_attr();
            let res = self.rename_locked(cred, (&d1, &d2), Dirs::Same(&mut g), from_name, to_name);
            let wcc = self.wcc(&d1, before, &g);
            return res.map(|()| (wcc, wcc)).map_err(|e| (e, wcc, wcc));
        }
        // Ancestor first; unrelated directories by inode number.
        let d1_first = if is_ancestor_or_self(&d1, &d2) {
            true
        } else if is_ancestor_or_self(&d2, &d1) {
            false
        } else {
            d1.ino < d2.ino
        };
        let (mut g1, mut g2) = if d1_first {
            let g1 = write(&d1.state);
            (g1, write(&d2.state))
        } else {
            let g2 = write(&d2.state);
            (write(&d1.state), g2)
        };
        if g1.dead || g2.dead {
            return Err(bare(FsError::Stale));
        }
        let (b1, b2) = (g1.wcc_attr(), g2.wcc_attr());
        let res = self.rename_locked(
            cred,
            (&d1, &d2),
            Dirs::Two(&mut g1, &mut g2),
            from_name,
            to_name,
        );
        let (w1, w2) = (self.wcc(&d1, b1, &g1), self.wcc(&d2, b2, &g2));
        res.map(|()| (w1, w2)).map_err(|e| (e, w1, w2))
    }

    fn link(
        &self,
        cred: &Cred,
        fh: &BackendHandle,
        dir: &BackendHandle,
        name: &[u8],
    ) -> Result<(Option<Attr>, Wcc), (FsError, Option<Attr>, Wcc)> {
        let f = self.resolve(fh).map_err(|e| (e, None, Wcc::default()))?;
        let d = self.resolve(dir).map_err(|e| (e, None, Wcc::default()))?;
        if f.ftype == FileType::Directory {
            // Not locked: it may be an ancestor of `dir`.
            return Err((FsError::Perm, None, self.unchanged_wcc(dir)));
        }
        if d.ftype != FileType::Directory {
            // Refused before locking `d`: it may be `f` itself, whose
            // attributes the error carries (a read lock under its own write
            // lock never returns).
            let attr = live_read(&f).ok().map(|fg| self.attr(&f, &fg));
            return Err((FsError::NotDir, attr, self.unchanged_wcc(dir)));
        }
        let mut g = live_write(&d).map_err(|e| (e, None, Wcc::default()))?;
        let before = g.wcc_attr();
        let res = self.link_locked(cred, &f, &mut g, name);
        let wcc = self.wcc(&d, before, &g);
        match res {
            Ok(attr) => Ok((Some(attr), wcc)),
            Err(e) => {
                let attr = live_read(&f).ok().map(|fg| self.attr(&f, &fg));
                Err((e, attr, wcc))
            }
        }
    }

    fn readdir(
        &self,
        cred: &Cred,
        dir: &BackendHandle,
        cookie: u64,
        verifier: CookieVerifier,
        plus: bool,
        sink: &mut dyn FnMut(DirEntry<'_>) -> bool,
    ) -> Result<ReaddirEnd, (FsError, Option<Attr>)> {
        let d = self.resolve(dir).map_err(|e| (e, None))?;
        if d.ftype != FileType::Directory {
            let attr = live_read(&d).ok().map(|g| self.attr(&d, &g));
            return Err((FsError::NotDir, attr));
        }
        let g = live_read(&d).map_err(|e| (e, None))?;
        let dir_attr = self.attr(&d, &g);
        let Some(entries) = g.dir() else {
            return Err((FsError::NotDir, Some(dir_attr)));
        };
        if !permits(cred, &g.meta, true, R) {
            return Err((FsError::Access, Some(dir_attr)));
        }
        let our_verifier = self.cookie_verifier(&d);
        if cookie != 0
            && ((verifier != [0; 8] && verifier != our_verifier) || !entries.issued(cookie))
        {
            return Err((FsError::BadCookie, Some(dir_attr)));
        }
        let end = |eof| {
            Ok(ReaddirEnd {
                dir_attr: Some(dir_attr),
                verifier: our_verifier,
                eof,
            })
        };
        if cookie < DOT_COOKIE {
            let entry = DirEntry {
                fileid: d.ino,
                name: b".",
                cookie: DOT_COOKIE,
                plus: plus.then_some((d.handle, dir_attr)),
            };
            if !sink(entry) {
                return end(false);
            }
        }
        if cookie < DOTDOT_COOKIE {
            // The parent cannot change while `d` is locked (RENAME locks the
            // directory it moves). Its file id only, READDIRPLUS too: `..`
            // carries no handle or attributes in any backend (the local one
            // would have to walk up to the export root for them, see
            // `Filesystem::readdir`).
            let fileid = parent_of(&d).map_or(d.ino, |p| p.ino);
            let entry = DirEntry {
                fileid,
                name: b"..",
                cookie: DOTDOT_COOKIE,
                plus: None,
            };
            if !sink(entry) {
                return end(false);
            }
        }
        for (c, entry) in entries.after(cookie.max(DOTDOT_COOKIE)) {
            let child = &entry.inode;
            let child_plus = if plus {
                let cg = read(&child.state);
                (!cg.dead).then(|| (child.handle, self.attr(child, &cg)))
            } else {
                None
            };
            let entry = DirEntry {
                fileid: child.ino,
                name: &entry.name,
                cookie: c,
                plus: child_plus,
            };
            if !sink(entry) {
                return end(false);
            }
        }
        end(true)
    }

    fn fsstat(&self, _cred: &Cred, fh: &BackendHandle) -> FsResult<(FsStat, Attr)> {
        let inode = self.resolve(fh)?;
        let attr = {
            let g = live_read(&inode)?;
            self.attr(&inode, &g)
        };
        let free_bytes = self.budget.limit.saturating_sub(self.budget.used());
        let free_files = self
            .config
            .max_files
            .saturating_sub(read(&self.table).live());
        let stat = FsStat {
            total_bytes: self.budget.limit,
            free_bytes,
            avail_bytes: free_bytes,
            total_files: self.config.max_files,
            free_files,
            avail_files: free_files,
        };
        Ok((stat, attr))
    }

    fn info(&self) -> FsInfo {
        FsInfo {
            max_file_size: self.config.max_file_size,
            time_delta: Time { secs: 0, nsecs: 1 },
            link: true,
            symlink: true,
            max_link: MAX_LINK,
            max_name: NAME_MAX as u32,
            case_insensitive: false,
            case_preserving: true,
            chown_restricted: true,
            no_trunc: true,
        }
    }

    fn commit(
        &self,
        _cred: &Cred,
        fh: &BackendHandle,
        _offset: u64,
        _count: u32,
    ) -> Result<Wcc, (FsError, Wcc)> {
        let inode = self.resolve(fh).map_err(|e| (e, Wcc::default()))?;
        let g = live_read(&inode).map_err(|e| (e, Wcc::default()))?;
        let wcc = self.wcc(&inode, g.wcc_attr(), &g);
        match g.body {
            Body::File(_) => Ok(wcc),
            Body::Dir(_) => Err((FsError::IsDir, wcc)),
            _ => Err((FsError::Inval, wcc)),
        }
    }

    fn write_verifier(&self) -> WriteVerifier {
        self.write_verifier
    }
}

/// What CREATE, MKDIR, SYMLINK and MKNOD make.
struct NewNode<'a> {
    ftype: FileType,
    /// Requested mode (before setgid inheritance and `& 0o7777`).
    mode: u32,
    /// Owner, group and times to set (size is already in `body`).
    attr: &'a SetAttr,
    body: Body,
    /// Budget beyond the object and its name (a symlink's target).
    extra_cost: u64,
    /// Only root may make it (device nodes).
    needs_root: bool,
}

/// What CREATE does when the name exists.
enum OnExist<'a> {
    /// Exist.
    Fail,
    /// Open a regular file, applying the size if set.
    Unchecked(&'a SetAttr),
    /// Succeed if the file was made by an exclusive create with this verifier.
    Exclusive(CreateVerifier),
}

/// The locked directories of a RENAME: one, or source and target.
enum Dirs<'a> {
    Same(&'a mut State),
    Two(&'a mut State, &'a mut State),
}

impl Dirs<'_> {
    fn src(&mut self) -> &mut State {
        match self {
            Self::Same(s) | Self::Two(s, _) => s,
        }
    }

    fn dst(&mut self) -> &mut State {
        match self {
            Self::Same(d) | Self::Two(_, d) => d,
        }
    }

    fn cross(&self) -> bool {
        matches!(self, Self::Two(..))
    }
}

/// Bytes charged to the budget, and the limit.
struct Budget {
    limit: u64,
    used: AtomicU64,
}

impl Budget {
    fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Takes `n` bytes, or `NoSpc` if that would pass the limit.
    fn charge(&self, n: u64) -> FsResult<()> {
        // One atomic read-modify-write: no other memory depends on it.
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(n).filter(|&total| total <= self.limit)
            })
            .map(drop)
            .map_err(|_| FsError::NoSpc)
    }

    fn release(&self, n: u64) {
        self.used.fetch_sub(n, Ordering::Relaxed);
    }
}

/// Nanosecond timestamps that never repeat or go backwards within an
/// instance, even if the system clock does.
#[derive(Default)]
struct Clock {
    /// Nanoseconds since the epoch of the last time handed out.
    last: AtomicU64,
}

impl Clock {
    fn now(&self) -> Time {
        const NANOS: u64 = 1_000_000_000;
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let next = |last: u64| wall.max(last.saturating_add(1));
        // The closure always returns Some; both arms hold the previous value.
        let prev = self
            .last
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| {
                Some(next(last))
            })
            .unwrap_or_else(|last| last);
        let ns = next(prev);
        Time {
            secs: i64::try_from(ns / NANOS).unwrap_or(i64::MAX),
            nsecs: (ns % NANOS) as u32,
        }
    }
}

/// The budget a directory entry named `name` costs.
fn entry_cost(name: &[u8]) -> u64 {
    name.len() as u64 + ENTRY_COST
}

/// A directory's entries changed at `now`.
fn touch(meta: &mut Meta, now: Time) {
    meta.mtime = now;
    meta.ctime = now;
}

fn time_or(set: SetTime, now: Time) -> Time {
    match set {
        SetTime::ClientTime(t) => t,
        SetTime::DontChange | SetTime::ServerTime => now,
    }
}

/// The directory `..` names: the parent, or the root itself.
fn parent_of(dir: &Arc<Inode>) -> FsResult<Arc<Inode>> {
    if dir.ino == ROOT_INO {
        return Ok(Arc::clone(dir));
    }
    lock(&dir.parent).upgrade().ok_or(FsError::Stale)
}

/// Whether `ancestor` is `node` or contains it. Exact only under
/// `rename_lock`; O(depth).
fn is_ancestor_or_self(ancestor: &Inode, node: &Arc<Inode>) -> bool {
    let mut cur = Arc::clone(node);
    loop {
        if std::ptr::eq(&*cur, ancestor) {
            return true;
        }
        if cur.ino == ROOT_INO {
            return false;
        }
        let parent = lock(&cur.parent).upgrade();
        match parent {
            Some(p) => cur = p,
            None => return false,
        }
    }
}

/// Write-locks two distinct objects of a RENAME: directories before
/// non-directories, then by inode number.
fn lock_pair<'a>(
    s: &'a Inode,
    t: Option<&'a Inode>,
) -> (
    RwLockWriteGuard<'a, State>,
    Option<RwLockWriteGuard<'a, State>>,
) {
    let Some(t) = t else {
        return (write(&s.state), None);
    };
    let key = |i: &Inode| (i.ftype != FileType::Directory, i.ino);
    if key(s) < key(t) {
        let sg = write(&s.state);
        (sg, Some(write(&t.state)))
    } else {
        let tg = write(&t.state);
        (write(&s.state), Some(tg))
    }
}

/// A random number for verifiers and generations, without a dependency:
/// std's per-process random hash keys over the time and `extra`.
fn random_u64(extra: u64) -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u64(extra);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.write_u128(now);
    h.write_usize(&h as *const _ as usize);
    h.finish()
}

// Poisoned locks are taken anyway: a panic in one request must not wedge
// every later request on the same object.

fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The state of `inode`, read-locked, or `Stale` if it died.
fn live_read(inode: &Inode) -> FsResult<RwLockReadGuard<'_, State>> {
    let g = read(&inode.state);
    if g.dead {
        return Err(FsError::Stale);
    }
    Ok(g)
}

/// The state of `inode`, write-locked, or `Stale` if it died.
fn live_write(inode: &Inode) -> FsResult<RwLockWriteGuard<'_, State>> {
    let g = write(&inode.state);
    if g.dead {
        return Err(FsError::Stale);
    }
    Ok(g)
}
