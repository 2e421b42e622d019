//! The file system's operations, as blocking calls that return an errno on
//! failure. `fs.rs` runs them on the pool and turns the results into FUSE
//! replies.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use fuser::{FileAttr, TimeOrNow};
use rnfs_client::{Credential, DirtyBudget, IoConfig, NfsClient, NfsError, NfsFile, Session};
use rnfs_nfs3::{
    CookieVerf3, CreateHow3, Devicedata3, Fattr3, FileHandle, Ftype3, Mknoddata3, Nfsstat3, Sattr3,
    SetTime, Specdata3, WccData, ACCESS3_DELETE, ACCESS3_EXECUTE, ACCESS3_EXTEND, ACCESS3_LOOKUP,
    ACCESS3_MODIFY, ACCESS3_READ,
};

use crate::attr::{self, data_changed, decode_dev, to_fuse};
use crate::cred::Credentials;
use crate::data::OpenFile;
use crate::flusher::{self, FlushQueue, FlusherHandle};
use crate::inode::{InodeTable, OpenState, Silly, ROOT};
use crate::options::MountOptions;

/// An errno for a FUSE reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Errno(pub(crate) i32);

impl From<NfsError> for Errno {
    fn from(e: NfsError) -> Self {
        Self(e.errno())
    }
}

pub(crate) type OpResult<T> = Result<T, Errno>;

/// Open files whose fresh attributes showed another client's change, with
/// their handles: to revalidate ([`Core::revalidate`]) once the table is
/// unlocked.
pub(crate) type Changed = Vec<(FileHandle, Arc<OpenFile>)>;

/// A node for an entry reply: its attributes and how long the kernel may
/// trust them (and the name).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    pub(crate) attr: FileAttr,
    pub(crate) ttl: Duration,
}

/// One name of a directory page.
#[derive(Debug, Clone)]
pub(crate) struct DirItem {
    pub(crate) cookie: u64,
    pub(crate) name: Vec<u8>,
    pub(crate) fh: FileHandle,
    pub(crate) attr: Fattr3,
}

impl DirItem {
    /// `.` or `..`: listed, but not a lookup (the kernel does not count it).
    pub(crate) fn is_dot(&self) -> bool {
        self.name == b"." || self.name == b".."
    }
}

/// An open directory: the last READDIRPLUS page, kept so the kernel's small
/// reads do not each cost a call.
#[derive(Debug, Default)]
struct DirStream {
    verf: CookieVerf3,
    /// The cookie the page was read after.
    start: u64,
    page: Arc<Vec<DirItem>>,
    eof: bool,
    /// Where in `page` the last reply stopped: the kernel's next offset is
    /// the cookie of the entry before it, which is then found without
    /// scanning the page (whose entries a directory's listing would
    /// otherwise search once per reply: quadratic in the page).
    resume: usize,
}

/// The mounted export and everything known about it.
#[derive(Debug)]
pub(crate) struct Core {
    session: Session,
    nfs: NfsClient,
    root: FileHandle,
    table: Mutex<InodeTable>,
    dirs: Mutex<HashMap<u64, DirStream>>,
    next_dir: AtomicU64,
    /// The next FUSE file handle of an open: each open has its own, so that
    /// each learns of a write-back error at its fsync (`data.rs`).
    next_open: AtomicU64,
    silly: AtomicU64,
    /// Directory reads whose offset was searched for in the cached page.
    listing_searches: AtomicU64,
    pub(crate) opts: MountOptions,
    io: IoConfig,
    budget: Arc<DirtyBudget>,
    pub(crate) creds: Credentials,
    pub(crate) blksize: u32,
    dsize: u32,
    name_max: u32,
    /// Tells the kernel to drop what it cached of a node.
    notifier: OnceLock<fuser::Notifier>,
    /// Open files holding data, for the flusher thread.
    flush_queue: Arc<FlushQueue>,
    /// Stops the flusher thread with the core.
    _flusher: Option<FlusherHandle>,
}

/// READs one file's read-ahead window may hold.
const MAX_READ_AHEAD_CALLS: u32 = 8;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// `attr` if the server sent it, else a GETATTR.
fn attr_or_getattr(nfs: &NfsClient, fh: &FileHandle, attr: Option<Fattr3>) -> OpResult<Fattr3> {
    match attr {
        Some(a) => Ok(a),
        None => Ok(nfs.getattr(fh)?),
    }
}

/// The handle and attributes of `name` in `dir`, with what a listing gave.
fn described(
    nfs: &NfsClient,
    dir: &FileHandle,
    name: &[u8],
    handle: Option<FileHandle>,
    attr: Option<Fattr3>,
) -> Result<(FileHandle, Fattr3), NfsError> {
    let (fh, attr) = match handle {
        Some(fh) => (fh, attr),
        None => nfs.lookup(dir, name)?,
    };
    let attr = match attr {
        Some(a) => a,
        None => nfs.getattr(&fh)?,
    };
    Ok((fh, attr))
}

/// What a `..` listed without attributes stands for: a directory with its
/// file id. Nothing reads more: plain READDIR shows the type and node id
/// only, and the kernel takes nothing from the `.` and `..` of a
/// READDIRPLUS reply (`fuse_direntplus_link`), sent with no cache time.
fn dotdot_attr(fileid: u64) -> Fattr3 {
    Fattr3 {
        ftype: Ftype3::Dir,
        mode: 0o555,
        nlink: 2,
        uid: 0,
        gid: 0,
        size: 0,
        used: 0,
        rdev: Default::default(),
        fsid: 0,
        fileid,
        atime: Default::default(),
        mtime: Default::default(),
        ctime: Default::default(),
    }
}

fn sattr_mode(mode: u32) -> Sattr3 {
    Sattr3 {
        mode: Some(mode & 0o7777),
        ..Sattr3::default()
    }
}

fn set_time(t: Option<TimeOrNow>) -> OpResult<SetTime> {
    Ok(match t {
        None => SetTime::DontChange,
        Some(TimeOrNow::Now) => SetTime::SetToServerTime,
        Some(TimeOrNow::SpecificTime(t)) => {
            SetTime::SetToClientTime(attr::nfs_time(t).ok_or(Errno(libc::EINVAL))?)
        }
    })
}

impl Core {
    /// `session` mounted, `root`/`root_attr` the directory to show at the
    /// mount point.
    pub(crate) fn new(
        session: Session,
        root: FileHandle,
        root_attr: Fattr3,
        opts: MountOptions,
    ) -> Self {
        let mut io = IoConfig::for_session(&session);
        if let Some(r) = opts.rsize {
            io.rsize = r.min(io.rsize);
        }
        if let Some(n) = opts.wb_max_outstanding {
            io.max_outstanding_writes = n;
        }
        io.wsize = opts.write_size(io.wsize, io.max_outstanding_writes > 0);
        if let Some(b) = opts.wb_max_outstanding_bytes {
            io.max_outstanding_write_bytes = b;
        }
        if let Some(e) = opts.wb_expire {
            io.dirty_expire = e;
        }
        let flush_queue = Arc::new(FlushQueue::default());
        let flusher = flusher::spawn(Arc::clone(&flush_queue), io.dirty_expire)
            .inspect_err(|e| {
                tracing::warn!(
                    "no flusher thread ({e}): idle open files keep their data until used"
                )
            })
            .ok();
        // Each read-ahead READ holds a transport slot until it is read, and
        // NfsFile sends a whole window before collecting any: keep the window
        // to a few READs so small rsizes cannot use up the slot table.
        io.max_read_ahead = io
            .max_read_ahead
            .min(io.rsize.saturating_mul(MAX_READ_AHEAD_CALLS));
        let budget = DirtyBudget::new(opts.dirty_limit.unwrap_or(DirtyBudget::DEFAULT_MAX_BYTES));
        let name_max = session
            .nfs()
            .pathconf(&root)
            .map(|p| p.name_max)
            .unwrap_or(255);
        let dsize = session.dsize();
        let table = InodeTable::new(root, root_attr, Instant::now(), &opts.cache);
        Self {
            nfs: session.nfs().clone(),
            session,
            root,
            table: Mutex::new(table),
            dirs: Mutex::new(HashMap::new()),
            next_dir: AtomicU64::new(1),
            next_open: AtomicU64::new(1),
            silly: AtomicU64::new(0),
            listing_searches: AtomicU64::new(0),
            blksize: io.wsize,
            io,
            budget,
            creds: Credentials::new(),
            dsize,
            name_max,
            opts,
            notifier: OnceLock::new(),
            flush_queue,
            _flusher: flusher,
        }
    }

    /// Lets the core invalidate the kernel's caches.
    pub(crate) fn set_notifier(&self, notifier: fuser::Notifier) {
        let _ = self.notifier.set(notifier);
    }

    /// Drops the kernel's cached attributes and pages of `ino`.
    fn invalidate_kernel(&self, ino: u64) {
        if let Some(n) = self.notifier.get() {
            if let Err(e) = n.inval_inode(ino, 0, 0) {
                tracing::debug!("invalidating node {ino}: {e}");
            }
        }
    }

    /// Tells the kernel that `ino` is `size` bytes long, if it thought it
    /// shorter: stores the file's last byte (read as `nfs`), the only
    /// notification that sets the kernel's size (a store of no data does
    /// not), and the byte it stores is the file's.
    fn grow_kernel_size(&self, nfs: &NfsClient, ino: u64, fh: &FileHandle, size: u64) {
        let (Some(n), Some(last)) = (self.notifier.get(), size.checked_sub(1)) else {
            return;
        };
        let mut byte = [0; 1];
        match nfs.read(fh, last, &mut byte) {
            Ok(r) if r.count == 1 => {
                if let Err(e) = n.store(ino, last, &byte) {
                    tracing::debug!("telling the kernel the size of node {ino}: {e}");
                }
            }
            Ok(_) => {}
            Err(e) => tracing::debug!("reading the last byte of node {ino}: {e}"),
        }
    }

    /// The read and write sizes in use.
    pub(crate) fn io_sizes(&self) -> (u32, u32) {
        (self.io.rsize, self.io.wsize)
    }

    pub(crate) fn client(&self, cred: Credential) -> NfsClient {
        self.nfs.with_credential(cred)
    }

    fn table(&self) -> MutexGuard<'_, InodeTable> {
        lock(&self.table)
    }

    pub(crate) fn with_table<T>(&self, f: impl FnOnce(&mut InodeTable) -> T) -> T {
        f(&mut self.table())
    }

    fn fh(&self, ino: u64) -> OpResult<FileHandle> {
        self.table()
            .get(ino)
            .map(|n| n.fh)
            .ok_or(Errno(libc::ESTALE))
    }

    fn open_file(&self, ino: u64) -> OpResult<(FileHandle, Option<Arc<OpenFile>>)> {
        let t = self.table();
        let node = t.get(ino).ok_or(Errno(libc::ESTALE))?;
        Ok((node.fh, node.open.as_ref().map(|o| o.file.clone())))
    }

    /// `ino`'s attributes for the kernel, with the time they stay valid.
    fn reply_attr(&self, t: &InodeTable, ino: u64, now: Instant) -> OpResult<Entry> {
        let node = t.get(ino).ok_or(Errno(libc::ESTALE))?;
        let mut a = node.attr.attr;
        if let Some(o) = &node.open {
            o.file.patch(&mut a);
        }
        Ok(Entry {
            attr: to_fuse(ino, &a, self.blksize),
            ttl: t.ttl(ino, now),
        })
    }

    /// Counts a kernel lookup of `fh` and returns its entry.
    fn entry(&self, nfs: &NfsClient, fh: FileHandle, attr: Option<Fattr3>) -> OpResult<Entry> {
        let attr = attr_or_getattr(nfs, &fh, attr)?;
        let now = Instant::now();
        let mut t = self.table();
        let changed = t
            .ino_of(&fh)
            .and_then(|ino| t.note_server_attr(ino, &attr, false));
        let ino = t.reference(fh, attr, now, &self.opts.cache);
        let entry = self.reply_attr(&t, ino, now);
        drop(t);
        if let Some(f) = changed {
            self.revalidate(nfs, &fh, &f);
        }
        entry
    }

    /// Another client changed open file `f` (handle `fh`), as attributes
    /// fetched by some other call showed: its read-ahead may hold the old
    /// bytes and its size is stale, so reads on descriptors held since
    /// would return old data or stop at the old end. Drops the read-ahead
    /// and takes the size of a GETATTR sent now (the attributes that showed
    /// the change may predate a WRITE or truncate of ours, see
    /// `NfsFile::set_server_size`).
    fn revalidate(&self, nfs: &NfsClient, fh: &FileHandle, f: &OpenFile) {
        f.drop_read_ahead();
        let sent_at = f.size_generation();
        match nfs.getattr(fh) {
            Ok(a) => {
                f.set_server_size(sent_at, a.size);
            }
            Err(e) => tracing::debug!("revalidating a changed open file: {e}"),
        }
    }

    fn dir_changed(&self, dir: &FileHandle, wcc: &WccData) {
        let mut t = self.table();
        match wcc.after {
            Some(a) => t.update_by_handle(dir, Some(a), Instant::now(), &self.opts.cache),
            None => {
                if let Some(ino) = t.ino_of(dir) {
                    t.expire(ino);
                }
            }
        }
    }

    fn check_name(&self, name: &OsStr) -> OpResult<()> {
        if name.len() > self.name_max as usize {
            return Err(Errno(libc::ENAMETOOLONG));
        }
        Ok(())
    }

    // ----- attributes -----

    /// Cached attributes, if fresh and not hidden by unwritten data.
    pub(crate) fn cached_attr(&self, ino: u64) -> Option<Entry> {
        let now = Instant::now();
        let t = self.table();
        let node = t.get(ino)?;
        if node.open.as_ref().is_some_and(|o| o.file.is_dirty()) || !t.is_fresh(ino, now) {
            return None;
        }
        self.reply_attr(&t, ino, now).ok()
    }

    pub(crate) fn getattr(&self, ino: u64, cred: Credential) -> OpResult<Entry> {
        let (fh, open) = self.open_file(ino)?;
        if let Some(f) = &open {
            // An unlink or rename since may have changed the link count,
            // which WRITE replies sent before it do not show.
            if self.table().links_may_have_changed(ino) {
                f.attributes_changed();
            }
        }
        let attr = match open {
            // A bounded flush; the attributes of its WRITE replies, else a
            // GETATTR: the size and times include our writes.
            Some(f) => f.getattr()?,
            None => self.client(cred).getattr(&fh)?,
        };
        let now = Instant::now();
        let mut t = self.table();
        // The open file's getattr took the size itself.
        let changed = t.note_server_attr(ino, &attr, false);
        t.update_attr(ino, attr, now, &self.opts.cache, false);
        let entry = self.reply_attr(&t, ino, now);
        drop(t);
        if let Some(f) = changed {
            f.drop_read_ahead();
        }
        entry
    }

    #[allow(clippy::too_many_arguments, reason = "one per settable attribute")]
    pub(crate) fn setattr(
        &self,
        ino: u64,
        cred: Credential,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        through_open_file: bool,
    ) -> OpResult<Entry> {
        let (fh, open) = self.open_file(ino)?;
        // ftruncate(2): the kernel passes the open file and lets only a
        // descriptor open for writing through, checking nothing more, as
        // for a local file. Its owner (not root, whom the server may
        // squash) needs no ACCESS check then: the server's owner override
        // lets the SETATTR through whatever the mode now is, as knfsd does.
        // The table is locked again only for such a call.
        let open_writer_owns_it = through_open_file
            && size.is_some()
            && cred.uid != 0
            && self
                .table()
                .get(ino)
                .is_some_and(|n| n.attr.attr.uid == cred.uid);
        let nfs = self.client(cred);
        let mut sattr = Sattr3 {
            mode: mode.map(|m| m & 0o7777),
            uid,
            gid,
            size: None,
            atime: set_time(atime)?,
            mtime: set_time(mtime)?,
        };
        let mut attr = None;
        match (&open, size) {
            (Some(f), Some(size)) => {
                // The open file is shared by every open of the node and
                // writes with its first opener's credential; a truncate is
                // this caller's, and drops dirty data before its SETATTR:
                // ask the server first whether the caller may modify it.
                if open_writer_owns_it {
                    // ACCESS follows the mode, which may refuse the owner:
                    // write everything back and commit it instead, so that
                    // a SETATTR the server refuses after all (the owner
                    // changed meanwhile, or a server without the override)
                    // has dropped nothing that was not already stable.
                    f.fsync()?;
                } else {
                    let (granted, _) = nfs.access(&fh, ACCESS3_MODIFY)?;
                    if granted & ACCESS3_MODIFY == 0 {
                        return Err(Errno(libc::EACCES));
                    }
                }
                attr = Some(f.truncate_as(&nfs, size)?);
            }
            (Some(f), None) => {
                // As Linux's nfs_setattr, a write-back error does not fail
                // the SETATTR: it stays for every open's fsync and close.
                if let Err(e) = f.flush() {
                    tracing::debug!("writing back node {ino} before a setattr: {e}");
                }
            }
            (None, size) => sattr.size = size,
        }
        if sattr != Sattr3::default() {
            let wcc = nfs.setattr(&fh, &sattr, None);
            attributes_changed(open.clone());
            attr = wcc?.after;
        }
        let attr = attr_or_getattr(&nfs, &fh, attr)?;
        let now = Instant::now();
        let mut t = self.table();
        t.update_attr(ino, attr, now, &self.opts.cache, true);
        self.reply_attr(&t, ino, now)
    }

    pub(crate) fn access(&self, ino: u64, cred: Credential, mask: i32) -> OpResult<()> {
        if mask == libc::F_OK {
            return Ok(());
        }
        let (fh, dir) = {
            let t = self.table();
            let node = t.get(ino).ok_or(Errno(libc::ESTALE))?;
            (node.fh, node.attr.attr.ftype == Ftype3::Dir)
        };
        let mut want = 0;
        if mask & libc::R_OK != 0 {
            want |= ACCESS3_READ;
        }
        if mask & libc::W_OK != 0 {
            want |= if dir {
                ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE
            } else {
                ACCESS3_MODIFY | ACCESS3_EXTEND
            };
        }
        if mask & libc::X_OK != 0 {
            want |= if dir { ACCESS3_LOOKUP } else { ACCESS3_EXECUTE };
        }
        let nfs = self.client(cred);
        let (granted, attr) = nfs.access(&fh, want)?;
        if let Some(a) = attr {
            let changed = {
                let mut t = self.table();
                // The kernel does not see these attributes.
                let changed = t.note_server_attr(ino, &a, true);
                t.update_attr(ino, a, Instant::now(), &self.opts.cache, false);
                changed
            };
            if let Some(f) = changed {
                self.revalidate(&nfs, &fh, &f);
            }
        }
        if granted & want == want {
            Ok(())
        } else {
            Err(Errno(libc::EACCES))
        }
    }

    // ----- names -----

    pub(crate) fn lookup(&self, parent: u64, name: &OsStr, cred: Credential) -> OpResult<Entry> {
        self.check_name(name)?;
        let dir = self.fh(parent)?;
        let nfs = self.client(cred);
        let (fh, attr) = nfs.lookup(&dir, name.as_bytes())?;
        self.entry(&nfs, fh, attr)
    }

    pub(crate) fn forget(&self, ino: u64, n: u64) {
        self.table().forget(ino, n);
    }

    pub(crate) fn readlink(&self, ino: u64, cred: Credential) -> OpResult<Vec<u8>> {
        let fh = self.fh(ino)?;
        Ok(self.client(cred).readlink(&fh)?)
    }

    /// Takes the directory's wcc data of a creation of `name` in `dir`;
    /// returns the new object's handle (a LOOKUP if the server left it out).
    fn created_handle(
        &self,
        nfs: &NfsClient,
        dir: &FileHandle,
        name: &[u8],
        c: rnfs_client::Created,
    ) -> OpResult<(FileHandle, Option<Fattr3>)> {
        self.dir_changed(dir, &c.dir_wcc);
        match c.handle {
            Some(fh) => Ok((fh, c.attr)),
            None => Ok(nfs.lookup(dir, name)?),
        }
    }

    fn created(
        &self,
        nfs: &NfsClient,
        dir: &FileHandle,
        name: &[u8],
        c: rnfs_client::Created,
    ) -> OpResult<Entry> {
        let (fh, attr) = self.created_handle(nfs, dir, name, c)?;
        self.entry(nfs, fh, attr)
    }

    pub(crate) fn mknod(
        &self,
        parent: u64,
        name: &OsStr,
        mode: u32,
        rdev: u32,
        cred: Credential,
    ) -> OpResult<Entry> {
        self.check_name(name)?;
        let dir = self.fh(parent)?;
        let nfs = self.client(cred);
        let attrs = sattr_mode(mode);
        let dev = |attrs| {
            let (major, minor) = decode_dev(rdev);
            Devicedata3 {
                dev_attributes: attrs,
                spec: Specdata3 {
                    specdata1: major,
                    specdata2: minor,
                },
            }
        };
        let name = name.as_bytes();
        let c = match mode & libc::S_IFMT {
            libc::S_IFREG => nfs.create(&dir, name, CreateHow3::Guarded(attrs))?,
            libc::S_IFIFO => nfs.mknod(&dir, name, Mknoddata3::Fifo(attrs))?,
            libc::S_IFSOCK => nfs.mknod(&dir, name, Mknoddata3::Sock(attrs))?,
            libc::S_IFCHR => nfs.mknod(&dir, name, Mknoddata3::Chr(dev(attrs)))?,
            libc::S_IFBLK => nfs.mknod(&dir, name, Mknoddata3::Blk(dev(attrs)))?,
            _ => return Err(Errno(libc::EINVAL)),
        };
        self.created(&nfs, &dir, name, c)
    }

    pub(crate) fn mkdir(
        &self,
        parent: u64,
        name: &OsStr,
        mode: u32,
        cred: Credential,
    ) -> OpResult<Entry> {
        self.check_name(name)?;
        let dir = self.fh(parent)?;
        let nfs = self.client(cred);
        let c = nfs.mkdir(&dir, name.as_bytes(), &sattr_mode(mode))?;
        self.created(&nfs, &dir, name.as_bytes(), c)
    }

    pub(crate) fn symlink(
        &self,
        parent: u64,
        name: &OsStr,
        target: &[u8],
        cred: Credential,
    ) -> OpResult<Entry> {
        self.check_name(name)?;
        let dir = self.fh(parent)?;
        let nfs = self.client(cred);
        let c = nfs.symlink(&dir, name.as_bytes(), target, &Sattr3::default())?;
        self.created(&nfs, &dir, name.as_bytes(), c)
    }

    pub(crate) fn link(
        &self,
        ino: u64,
        parent: u64,
        name: &OsStr,
        cred: Credential,
    ) -> OpResult<Entry> {
        self.check_name(name)?;
        let ((fh, open), dir) = (self.open_file(ino)?, self.fh(parent)?);
        let nfs = self.client(cred);
        let attr = nfs.link(&fh, &dir, name.as_bytes())?;
        attributes_changed(open);
        self.table().expire(parent);
        self.entry(&nfs, fh, attr)
    }

    /// The open node named `name` in `dir`, if removing that name would
    /// remove its last link (needs a LOOKUP, so only asked when some file is
    /// open). A name of a file with other links goes as any other: the file
    /// stays reachable, as POSIX has it.
    fn open_victim(&self, nfs: &NfsClient, dir: &FileHandle, name: &[u8]) -> Option<u64> {
        if !self.table().any_open() {
            return None;
        }
        let (fh, attr) = nfs.lookup(dir, name).ok()?;
        if attr.is_some_and(|a| a.nlink > 1) {
            return None;
        }
        let t = self.table();
        let ino = t.ino_of(&fh)?;
        t.get(ino)?.open.as_ref().map(|_| ino)
    }

    /// Renames the open file `ino` (named `name` in `dir`) out of the way,
    /// to be removed when it is last closed: unlinking an open file must
    /// leave it readable.
    fn silly_rename(
        &self,
        nfs: &NfsClient,
        ino: u64,
        dir: &FileHandle,
        name: &[u8],
    ) -> OpResult<()> {
        let n = self.silly.fetch_add(1, Ordering::Relaxed);
        let silly = format!(".rnfs{:08x}{:08x}", std::process::id(), n).into_bytes();
        let (wcc, _) = nfs.rename(dir, name, dir, &silly)?;
        self.dir_changed(dir, &wcc);
        let mut t = self.table();
        let open = t.get_mut(ino).and_then(|n| n.open.as_mut()).map(|open| {
            open.silly = Some(Silly {
                dir: *dir,
                name: silly,
                cred: nfs.credential().clone(),
            });
            Arc::clone(&open.file)
        });
        t.expire(ino);
        drop(t);
        // RENAME changed its ctime.
        attributes_changed(open);
        Ok(())
    }

    pub(crate) fn unlink(&self, parent: u64, name: &OsStr, cred: Credential) -> OpResult<()> {
        let dir = self.fh(parent)?;
        let nfs = self.client(cred);
        let name = name.as_bytes();
        if let Some(ino) = self.open_victim(&nfs, &dir, name) {
            return self.silly_rename(&nfs, ino, &dir, name);
        }
        let wcc = nfs.remove(&dir, name)?;
        self.dir_changed(&dir, &wcc);
        self.table().note_unlink();
        Ok(())
    }

    pub(crate) fn rmdir(&self, parent: u64, name: &OsStr, cred: Credential) -> OpResult<()> {
        let dir = self.fh(parent)?;
        let wcc = self.client(cred).rmdir(&dir, name.as_bytes())?;
        self.dir_changed(&dir, &wcc);
        Ok(())
    }

    /// RENAME; `RENAME_NOREPLACE` is emulated with a LOOKUP (not atomic
    /// against other clients), `RENAME_EXCHANGE` is refused (NFSv3 has no
    /// such call).
    #[allow(clippy::too_many_arguments, reason = "FUSE's rename arguments")]
    pub(crate) fn rename(
        &self,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
        cred: Credential,
    ) -> OpResult<()> {
        if flags & !libc::RENAME_NOREPLACE != 0 {
            return Err(Errno(libc::EINVAL));
        }
        self.check_name(newname)?;
        let (from, to) = (self.fh(parent)?, self.fh(newparent)?);
        let nfs = self.client(cred);
        let (name, newname) = (name.as_bytes(), newname.as_bytes());
        if flags & libc::RENAME_NOREPLACE != 0 {
            match nfs.lookup(&to, newname) {
                Ok(_) => return Err(Errno(libc::EEXIST)),
                Err(e) if e.status() == Some(Nfsstat3::Noent) => {}
                Err(e) => return Err(e.into()),
            }
        }
        if let Some(victim) = self.open_victim(&nfs, &to, newname) {
            self.silly_rename(&nfs, victim, &to, newname)?;
        }
        let (from_wcc, to_wcc) = nfs.rename(&from, name, &to, newname)?;
        self.dir_changed(&from, &from_wcc);
        self.dir_changed(&to, &to_wcc);
        self.table().note_unlink();
        Ok(())
    }

    // ----- files -----

    /// Opens `ino`. Close-to-open: ACCESS (the permission check and fresh
    /// attributes in one call) tells whether the file changed since we
    /// cached it; if so the kernel's cached attributes and pages are dropped
    /// (the kernel keeps its attributes for the TTL we gave, so dropping the
    /// pages alone would leave it reading with the old size). A file we hold
    /// unwritten data for is not revalidated: the kernel's pages are ours.
    /// Returns the open's FUSE file handle and whether the kernel may keep
    /// its cached pages.
    pub(crate) fn open(&self, ino: u64, flags: i32, cred: Credential) -> OpResult<(u64, bool)> {
        let (fh, open, cached) = {
            let t = self.table();
            let node = t.get(ino).ok_or(Errno(libc::ESTALE))?;
            (
                node.fh,
                node.open.as_ref().map(|o| o.file.clone()),
                node.attr.attr,
            )
        };
        let dirty = open.as_ref().is_some_and(|f| f.is_dirty());
        let check = self.opts.cto || cred.uid != 0;
        let nfs = self.client(cred);
        let mut keep = true;
        let mut attr = cached;
        if check {
            let want = match flags & libc::O_ACCMODE {
                libc::O_RDONLY => ACCESS3_READ,
                libc::O_WRONLY => ACCESS3_MODIFY,
                _ => ACCESS3_READ | ACCESS3_MODIFY,
            };
            let sent_at = open.as_ref().map(|f| f.size_generation());
            let (granted, fresh) = nfs.access(&fh, want)?;
            if granted & want != want {
                return Err(Errno(libc::EACCES));
            }
            if self.opts.cto && !dirty {
                let fresh = attr_or_getattr(&nfs, &fh, fresh)?;
                // The kernel's pages are from the data the cached attributes
                // describe, unless attributes taken since (and now cached)
                // showed a change.
                let stale = {
                    let mut t = self.table();
                    t.update_attr(ino, fresh, Instant::now(), &self.opts.cache, false);
                    t.take_data_stale(ino)
                };
                keep = !stale && !data_changed(&cached, &fresh);
                attr = fresh;
                if !keep {
                    self.invalidate_kernel(ino);
                    if let Some(f) = &open {
                        // Still open: drop its read-ahead.
                        f.drop_read_ahead();
                    }
                }
                if let (Some(f), Some(sent_at)) = (&open, sent_at) {
                    // Every open shares the file: reads end at its size,
                    // which another client may have changed.
                    f.set_server_size(sent_at, fresh.size);
                }
                if !keep && flags & libc::O_APPEND != 0 {
                    // Without writeback cache the kernel appends at its own
                    // size and does not revalidate it before a write (nor
                    // does dropping its attributes above set it): an
                    // append would land on another client's data. Linux's
                    // NFS client revalidates the size before an append.
                    self.grow_kernel_size(&nfs, ino, &fh, fresh.size);
                }
            }
        }
        let handle = self.next_open.fetch_add(1, Ordering::Relaxed);
        if attr.ftype != Ftype3::Reg {
            return Ok((handle, keep));
        }
        let writes = flags & libc::O_ACCMODE != libc::O_RDONLY;
        self.attach(ino, nfs, fh, &attr, writes, handle);
        Ok((handle, keep))
    }

    /// One more open of `ino`, FUSE file handle `handle`: shares its
    /// [`OpenFile`] or makes one. An open for writing (`writes`) makes the
    /// file write as its caller: the first opener may have had only read
    /// access.
    fn attach(
        &self,
        ino: u64,
        nfs: NfsClient,
        fh: FileHandle,
        attr: &Fattr3,
        writes: bool,
        handle: u64,
    ) {
        let mut t = self.table();
        let Some(node) = t.get_mut(ino) else {
            return;
        };
        if let Some(o) = node.open.as_mut() {
            o.opens += 1;
            let file = Arc::clone(&o.file);
            drop(t);
            file.opened(handle);
            if writes {
                file.write_as(&nfs);
            }
            return;
        }
        let file = Arc::new(OpenFile::new(NfsFile::new(
            nfs,
            fh,
            attr,
            self.io.clone(),
            self.budget.clone(),
        )));
        file.opened(handle);
        t.set_open(
            ino,
            OpenState {
                file,
                opens: 1,
                silly: None,
            },
        );
    }

    /// CREATE (GUARDED, so `O_EXCL` is atomic on the server) and open.
    /// Without `O_EXCL` an existing file is opened instead (truncated for
    /// `O_TRUNC`), as `open(2)` does. Returns the entry and the open's FUSE
    /// file handle.
    pub(crate) fn create(
        &self,
        parent: u64,
        name: &OsStr,
        mode: u32,
        flags: i32,
        cred: Credential,
    ) -> OpResult<(Entry, u64)> {
        self.check_name(name)?;
        let dir = self.fh(parent)?;
        let nfs = self.client(cred);
        let name = name.as_bytes();
        let (fh, attr) = match nfs.create(&dir, name, CreateHow3::Guarded(sattr_mode(mode))) {
            Ok(c) => self.created_handle(&nfs, &dir, name, c)?,
            Err(e) if e.status() == Some(Nfsstat3::Exist) && flags & libc::O_EXCL == 0 => {
                let (fh, attr) = nfs.lookup(&dir, name)?;
                if flags & libc::O_TRUNC != 0 {
                    let truncate = Sattr3 {
                        size: Some(0),
                        ..Sattr3::default()
                    };
                    (fh, nfs.setattr(&fh, &truncate, None)?.after)
                } else {
                    (fh, attr)
                }
            }
            Err(e) => return Err(e.into()),
        };
        let attr = attr_or_getattr(&nfs, &fh, attr)?;
        if attr.ftype == Ftype3::Dir {
            return Err(Errno(libc::EISDIR));
        }
        let entry = self.entry(&nfs, fh, Some(attr))?;
        let handle = self.next_open.fetch_add(1, Ordering::Relaxed);
        if attr.ftype == Ftype3::Reg {
            self.attach(entry.attr.ino, nfs, fh, &attr, true, handle);
        }
        Ok((entry, handle))
    }

    pub(crate) fn read(
        &self,
        ino: u64,
        offset: u64,
        size: u32,
        cred: Credential,
    ) -> OpResult<Vec<u8>> {
        let (fh, open) = self.open_file(ino)?;
        let mut buf = vec![0; size as usize];
        let n = match open {
            Some(f) => f.read(offset, &mut buf)?,
            None => {
                // Not open here (should not happen): plain READs.
                let nfs = self.client(cred);
                let mut done = 0;
                while done < buf.len() {
                    let r = nfs.read(&fh, offset + done as u64, &mut buf[done..])?;
                    done += r.count;
                    if r.eof || r.count == 0 {
                        break;
                    }
                }
                done
            }
        };
        buf.truncate(n);
        Ok(buf)
    }

    pub(crate) fn write(&self, ino: u64, offset: u64, data: &[u8]) -> OpResult<u32> {
        let (_, open) = self.open_file(ino)?;
        let f = open.ok_or(Errno(libc::EBADF))?;
        let n = f.write(offset, data)?;
        self.flush_queue.note_write(&f);
        self.table().expire(ino);
        u32::try_from(n).map_err(|_| Errno(libc::EIO))
    }

    /// `close(2)` of one descriptor of open `handle` (which other
    /// descriptors, a forked child's say, may share): write back and COMMIT
    /// (close-to-open). Reports a write-back error the open has not seen in
    /// an fsync, and leaves it for that fsync.
    pub(crate) fn flush(&self, ino: u64, handle: u64) -> OpResult<()> {
        self.sync(ino, handle, false)
    }

    /// fsync(2) of open `handle`: write back and COMMIT; reports a
    /// write-back error of the file once to each open.
    pub(crate) fn fsync(&self, ino: u64, handle: u64) -> OpResult<()> {
        self.sync(ino, handle, true)
    }

    fn sync(&self, ino: u64, handle: u64, advance: bool) -> OpResult<()> {
        if let (_, Some(f)) = self.open_file(ino)? {
            let synced = f.fsync();
            // An error this fsync took is in the file's sequence too.
            f.check_error(handle, advance).map_err(Errno)?;
            synced?;
        }
        Ok(())
    }

    /// The release of open `handle`: when no open is left, the file is
    /// closed (written back, committed) and a silly-renamed file removed,
    /// as the user who unlinked it.
    pub(crate) fn release(&self, ino: u64, handle: u64) -> OpResult<()> {
        let (file, last) = {
            let mut t = self.table();
            let Some(open) = t.get_mut(ino).and_then(|n| n.open.as_mut()) else {
                return Ok(());
            };
            open.opens = open.opens.saturating_sub(1);
            (open.file.clone(), open.opens == 0)
        };
        file.released(handle);
        if !last {
            return Ok(());
        }
        // Write back before letting go, so an open racing with this release
        // never sees a file whose data is still on its way.
        let synced = file.fsync();
        let state = {
            let mut t = self.table();
            match t.get(ino).and_then(|n| n.open.as_ref()) {
                Some(o) if o.opens == 0 => t.close(ino),
                _ => None,
            }
        };
        if let Some(state) = state {
            let closed = state.file.close();
            if let Some(s) = state.silly {
                if let Err(e) = self.client(s.cred).remove(&s.dir, &s.name) {
                    tracing::warn!("removing {:?}: {e}", String::from_utf8_lossy(&s.name));
                }
            }
            closed?;
        }
        synced.map_err(Errno::from)
    }

    // ----- directories -----

    pub(crate) fn opendir(&self) -> u64 {
        let id = self.next_dir.fetch_add(1, Ordering::Relaxed);
        lock(&self.dirs).insert(id, DirStream::default());
        id
    }

    pub(crate) fn releasedir(&self, id: u64) {
        lock(&self.dirs).remove(&id);
    }

    /// Passes the names after cookie `offset` to `add`, with the inode
    /// table locked, until `add` returns `true` (the reply is full). The
    /// open files `add` finds changed (see [`dir_entry`](Self::dir_entry))
    /// are revalidated before it returns.
    pub(crate) fn list_dir(
        &self,
        ino: u64,
        id: u64,
        offset: u64,
        cred: Credential,
        mut add: impl FnMut(&mut InodeTable, &DirItem, Instant, &mut Changed) -> bool,
    ) -> OpResult<()> {
        let (page, start) = self.readdir(ino, id, offset, &cred)?;
        let mut changed = Changed::new();
        let mut stopped = page.len();
        {
            let mut t = self.table();
            let now = Instant::now();
            for (at, item) in page.iter().enumerate().skip(start) {
                if add(&mut t, item, now, &mut changed) {
                    stopped = at;
                    break;
                }
            }
        }
        if let Some(s) = lock(&self.dirs).get_mut(&id) {
            if Arc::ptr_eq(&s.page, &page) {
                s.resume = stopped;
            }
        }
        if !changed.is_empty() {
            let nfs = self.client(cred);
            for (fh, f) in changed {
                self.revalidate(&nfs, &fh, &f);
            }
        }
        Ok(())
    }

    /// The names after cookie `offset` (0: from the start): the rest of the
    /// cached page, or a new READDIRPLUS page. Empty at the end.
    fn readdir(
        &self,
        ino: u64,
        id: u64,
        offset: u64,
        cred: &Credential,
    ) -> OpResult<(Arc<Vec<DirItem>>, usize)> {
        let mut verf = CookieVerf3::default();
        if offset != 0 {
            let dirs = lock(&self.dirs);
            let s = dirs.get(&id).ok_or(Errno(libc::EBADF))?;
            verf = s.verf;
            let resumed = s.resume.checked_sub(1).and_then(|i| s.page.get(i));
            let at = if s.start == offset {
                Some(0)
            } else if resumed.is_some_and(|i| i.cookie == offset) {
                Some(s.resume)
            } else {
                // `Relaxed`: a statistic.
                self.listing_searches.fetch_add(1, Ordering::Relaxed);
                s.page
                    .iter()
                    .position(|i| i.cookie == offset)
                    .map(|p| p + 1)
            };
            if let Some(at) = at {
                if at < s.page.len() || s.eof {
                    return Ok((s.page.clone(), at));
                }
            }
        }
        let dir = self.fh(ino)?;
        let nfs = self.client(cred.clone());
        let maxcount = (self.dsize.saturating_mul(4)).clamp(32 << 10, 1 << 20);
        let page = nfs.readdirplus(&dir, offset, verf, self.dsize, maxcount)?;
        if let Some(a) = page.dir_attr {
            self.table()
                .update_attr(ino, a, Instant::now(), &self.opts.cache, false);
        }
        let mut items = Vec::with_capacity(page.entries.len());
        for e in page.entries {
            let (fh, attr) = match (e.handle, e.attr) {
                (Some(fh), Some(attr)) => (fh, attr),
                // rnfs lists `..` with neither (its handle would cost the
                // server a walk up to the export root per listing), knfsd
                // at the export root: still listed, by its file id.
                _ if e.name == b".." => (FileHandle::default(), dotdot_attr(e.fileid)),
                _ if e.name == b"." => continue,
                (handle, attr) => {
                    // The server left them out: ask for them.
                    match described(&nfs, &dir, &e.name, handle, attr) {
                        Ok(described) => described,
                        // Removed since it was listed, or a mount point the
                        // server does not cross: no entry to show, and no
                        // reason to fail the rest of the listing.
                        Err(NfsError::Status(
                            Nfsstat3::Noent | Nfsstat3::Stale | Nfsstat3::Xdev,
                        )) => continue,
                        Err(e) => return Err(e.into()),
                    }
                }
            };
            items.push(DirItem {
                cookie: e.cookie,
                name: e.name,
                fh,
                attr,
            });
        }
        let page_arc = Arc::new(items);
        let mut dirs = lock(&self.dirs);
        if let Some(s) = dirs.get_mut(&id) {
            s.verf = page.cookieverf;
            s.start = offset;
            s.page = page_arc.clone();
            s.eof = page.eof;
            s.resume = 0;
        }
        Ok((page_arc, 0))
    }

    /// The node id and attributes of a listed name; counts a lookup unless
    /// it is `.` or `..`. An open file the attributes show changed by
    /// another client goes to `changed`.
    pub(crate) fn dir_entry(
        &self,
        t: &mut InodeTable,
        dir_ino: u64,
        item: &DirItem,
        now: Instant,
        changed: &mut Changed,
    ) -> (Entry, bool) {
        let uncached = |ino| Entry {
            attr: to_fuse(ino, &item.attr, self.blksize),
            ttl: Duration::ZERO,
        };
        if item.is_dot() {
            return (uncached(self.dir_ino(t, dir_ino, item)), false);
        }
        if let Some(f) = t
            .ino_of(&item.fh)
            .and_then(|ino| t.note_server_attr(ino, &item.attr, false))
        {
            changed.push((item.fh, f));
        }
        let ino = t.reference(item.fh, item.attr, now, &self.opts.cache);
        let entry = self
            .reply_attr(t, ino, now)
            .unwrap_or_else(|_| uncached(ino));
        (entry, true)
    }

    /// The node id plain READDIR shows for a listed name.
    pub(crate) fn dir_ino(&self, t: &InodeTable, dir_ino: u64, item: &DirItem) -> u64 {
        if item.name == b"." {
            return dir_ino;
        }
        if let Some(ino) = t.ino_of(&item.fh) {
            return ino;
        }
        // A `..` listed without a handle: the root's node id if it is the
        // root, else its file id, the node id a directory usually gets.
        let root_fileid = t.get(ROOT).map(|n| n.attr.attr.fileid);
        if item.name == b".." && root_fileid == Some(item.attr.fileid) {
            return ROOT;
        }
        item.attr.fileid
    }

    pub(crate) fn statfs(&self, cred: Credential) -> OpResult<rnfs_nfs3::FsstatResOk> {
        Ok(self.client(cred).fsstat(&self.root)?)
    }

    pub(crate) fn name_max(&self) -> u32 {
        self.name_max
    }

    // ----- shutdown -----

    /// Writes back and closes every open file, removes silly-renamed files
    /// and tells the server the export is no longer mounted.
    pub(crate) fn shutdown(&self) {
        let open = self.table().take_open();
        for state in open {
            if let Err(e) = state.file.close() {
                tracing::error!("writing back an open file at unmount failed: {e}");
            }
            if let Some(s) = state.silly {
                let _ = self.client(s.cred).remove(&s.dir, &s.name);
            }
        }
        self.session.unmount();
    }

    /// Fails every NFS call in flight or to come (see
    /// [`RpcClient::abort`](rnfs_client::RpcClient::abort)).
    pub(crate) fn abort_calls(&self) {
        self.nfs.rpc().abort();
    }

    /// Writes back and commits every open file, keeping them open (before a
    /// forced unmount: their users may still write until it takes effect).
    pub(crate) fn sync_all(&self) {
        let open = self.table().open_files();
        for (ino, file) in open {
            if let Err(e) = file.fsync() {
                tracing::error!("writing back node {ino} failed: {e}");
            }
        }
    }

    /// Open files right now (for statistics and tests).
    pub(crate) fn open_count(&self) -> usize {
        self.table().open_files().len()
    }

    /// Nodes the kernel holds.
    /// Directory reads whose offset was not where the last read stopped,
    /// and was searched for in the cached page.
    pub(crate) fn listing_searches(&self) -> u64 {
        // `Relaxed`: a statistic.
        self.listing_searches.load(Ordering::Relaxed)
    }

    pub(crate) fn node_count(&self) -> usize {
        self.table().len()
    }
}

/// A call of ours (SETATTR, LINK, RENAME, REMOVE) changed the attributes of
/// these open files: WRITE replies sent before it carry attributes older than
/// the change, so their next stat must not answer with them.
fn attributes_changed(files: impl IntoIterator<Item = Arc<OpenFile>>) {
    for f in files {
        f.attributes_changed();
    }
}
