//! [`Filesystem`] for [`LocalFs`]: one method per NFS procedure.

use std::io::IoSlice;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use rustix::fs::{
    self as rfs, AtFlags, FileType as RawType, Gid, Mode, OFlags, Stat, Timespec, Timestamps, Uid,
};
use rustix::io::{Errno, ReadWriteFlags};
use rustix::path::{Arg, DecInt};

use super::wb_errors::{self, FileKey};
use super::{errno, sys, LocalFs, Node, NodeFd, OpenFile};
use crate::names::{check_lookup_name, check_name};
use crate::{
    access, Attr, BackendHandle, CookieVerifier, CreateHow, Created, Cred, DirEntry, FileType,
    Filesystem, FsError, FsInfo, FsResult, FsStat, ListingStats, ReadOk, ReaddirEnd, SetAttr,
    SetTime, SpecialNode, Stability, Time, Wcc, WccAttr, WriteOk, WriteVerifier,
};

/// Largest READ served in one call, whatever the caller asks.
const MAX_READ: u32 = 4 << 20;
/// Mode of a file or special node created without one.
const DEFAULT_FILE_MODE: u32 = 0o644;
/// Mode of a directory created without one.
const DEFAULT_DIR_MODE: u32 = 0o755;
/// Mode of an exclusively created file until the client's SETATTR.
const EXCLUSIVE_MODE: u32 = 0o600;
/// Longest symlink target (`PATH_MAX` less the NUL).
const MAX_TARGET: usize = 4095;

fn no_wcc(e: FsError) -> (FsError, Wcc) {
    (e, Wcc::default())
}

fn is_type(stat: &Stat, ty: RawType) -> bool {
    RawType::from_raw_mode(stat.st_mode) == ty
}

fn timespec(t: SetTime) -> FsResult<Timespec> {
    Ok(match t {
        SetTime::DontChange => Timespec {
            tv_sec: 0,
            tv_nsec: rfs::UTIME_OMIT,
        },
        SetTime::ServerTime => Timespec {
            tv_sec: 0,
            tv_nsec: rfs::UTIME_NOW,
        },
        SetTime::ClientTime(t) => {
            if t.nsecs >= 1_000_000_000 {
                return Err(FsError::Inval);
            }
            Timespec {
                tv_sec: t.secs,
                tv_nsec: t.nsecs.into(),
            }
        }
    })
}

/// knfsd's encoding of an exclusive-create verifier in the new file's times:
/// (atime, mtime) seconds, each 31 bits so any file system can store them.
fn verifier_times(verifier: &[u8; 8]) -> (i64, i64) {
    let half = |b: [u8; 4]| i64::from(u32::from_be_bytes(b) & 0x7fff_ffff);
    let [a, b, c, d, e, f, g, h] = *verifier;
    (half([e, f, g, h]), half([a, b, c, d]))
}

/// The ACCESS bits `cred` gets on an object, computed like knfsd's
/// `nfsd_access`: directories answer READ/LOOKUP/MODIFY/EXTEND/DELETE, other
/// objects READ/EXECUTE/MODIFY/EXTEND; root gets everything except EXECUTE on
/// a file without any x bit.
fn access_bits(cred: &Cred, attr: &Attr, read_only: bool) -> u32 {
    let bits = if cred.uid == 0 {
        7
    } else {
        cred.mode_bits(attr.uid, attr.gid, attr.mode)
    };
    let (r, w, x) = (bits & 4 != 0, bits & 2 != 0, bits & 1 != 0);
    let mut out = 0;
    if r {
        out |= access::READ;
    }
    if attr.ftype == FileType::Directory {
        if x {
            out |= access::LOOKUP;
        }
        if w && x {
            out |= access::MODIFY | access::EXTEND | access::DELETE;
        }
    } else {
        if w {
            out |= access::MODIFY | access::EXTEND;
        }
        if x && (cred.uid != 0 || attr.mode & 0o111 != 0) {
            out |= access::EXECUTE;
        }
    }
    if read_only {
        out &= !(access::MODIFY | access::EXTEND | access::DELETE);
    }
    out
}

impl LocalFs {
    /// Runs `op`, a change to the entries of the directory `dir`, with the
    /// directory's wcc around it, and commits the directory once `op`
    /// succeeded (`durable.rs`).
    fn in_dir<T>(
        &self,
        dir: &BackendHandle,
        op: impl FnOnce(&Node) -> FsResult<T>,
    ) -> Result<(T, Wcc), (FsError, Wcc)> {
        let node = self.resolve_dir(dir).map_err(no_wcc)?;
        let before = Some(WccAttr::from(&self.attr(&node.stat)));
        let result = op(&node).and_then(|value| {
            self.commit_metadata(node.fd.as_fd(), RawType::Directory)?;
            Ok(value)
        });
        let wcc = Wcc {
            before,
            after: self.attr_of(&node.fd),
        };
        match result {
            Ok(value) => Ok((value, wcc)),
            Err(e) => Err((e, wcc)),
        }
    }

    /// Applies owner, mode and times (not size) to the object `fd` refers to.
    /// Owner first, so an explicit mode wins over the set-id bits chown clears.
    fn set_attrs(&self, fd: BorrowedFd<'_>, stat: &Stat, set: &SetAttr) -> FsResult<()> {
        if set.uid == Some(u32::MAX) || set.gid == Some(u32::MAX) {
            // (uid_t)-1 means "unchanged" to chown; never a real owner.
            return Err(FsError::Inval);
        }
        let mut mode = set.mode;
        if set.uid.is_some() || set.gid.is_some() {
            // A chown drops setuid, and setgid with group execute, of a
            // non-directory; so does a mode set with it (knfsd's
            // `nfsd_sanitize_attrs`), or a chown by root would keep them.
            if !is_type(stat, RawType::Directory) {
                mode = mode.map(strip_set_id);
            }
            rfs::chownat(
                fd,
                "",
                set.uid.map(Uid::from_raw),
                set.gid.map(Gid::from_raw),
                AtFlags::EMPTY_PATH,
            )
            .map_err(errno)?;
        }
        if let Some(mode) = mode {
            // Linux symlinks have no mode of their own; knfsd ignores it too.
            if !is_type(stat, RawType::Symlink) {
                self.chmod(fd, mode & 0o7777)?;
            }
        }
        if set.atime != SetTime::DontChange || set.mtime != SetTime::DontChange {
            let times = Timestamps {
                last_access: timespec(set.atime)?,
                last_modification: timespec(set.mtime)?,
            };
            rfs::utimensat(fd, "", &times, AtFlags::EMPTY_PATH).map_err(errno)?;
        }
        Ok(())
    }

    /// After creating an object (`fd`, created with `mode` in directory
    /// `dir`): applies what the creation did not already give it. The
    /// process umask may have cut permission bits of `mode`: those are put
    /// back, as knfsd (umask 0, no chmod) has them. But in a directory with
    /// a default ACL the kernel cut them by that ACL instead of the umask,
    /// as it does for knfsd, and they stay cut: putting them back would
    /// open a file the directory's owner made private. What the kernel
    /// decided about set-id bits (setgid inherited from the directory, or
    /// dropped for a non-member) stays.
    fn set_new_attrs(
        &self,
        dir: BorrowedFd<'_>,
        fd: BorrowedFd<'_>,
        mode: u32,
        set: &SetAttr,
    ) -> FsResult<()> {
        let stat = rfs::fstat(fd).map_err(errno)?;
        let current = stat.st_mode & 0o7777;
        let cut = mode & 0o777 & !current;
        // Asked only when bits were cut: with the usual umask (022) and modes
        // (0644, 0755) nothing is.
        let wanted = if cut != 0 && !self.has_default_acl(dir) {
            current | cut
        } else {
            current
        };
        let (uid, gid) = creation_owner(set);
        let rest = SetAttr {
            mode: Some(wanted).filter(|&m| m != current),
            uid: uid.filter(|&u| u != stat.st_uid),
            gid: gid.filter(|&g| g != stat.st_gid),
            size: None,
            atime: set.atime,
            mtime: set.mtime,
        };
        self.set_attrs(fd, &stat, &rest)
    }

    /// Whether directory `dir` has a default ACL, which the kernel applies
    /// to new objects instead of the umask. Read through `/proc/self/fd`
    /// (`dir` may be `O_PATH`), as root: a caller's fsuid may not look into
    /// the server's own descriptors. An error counts as none.
    fn has_default_acl(&self, dir: BorrowedFd<'_>) -> bool {
        let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&dir));
        // A minimal ACL takes 28 bytes; a longer one fills the buffer
        // (ERANGE), which says as much.
        let mut value = [0u8; 64];
        let read = crate::identity::as_fs_root(|| {
            rfs::getxattr(path.as_str(), "system.posix_acl_default", &mut value[..])
        });
        matches!(read, Ok(1..) | Err(Errno::RANGE))
    }

    /// Finishes a create-like operation on `path_fd`, the new object of
    /// type `kind` in directory `dir`, committed with its attributes.
    fn finish_new(
        &self,
        dir: BorrowedFd<'_>,
        path_fd: OwnedFd,
        kind: RawType,
        mode: u32,
        set: &SetAttr,
    ) -> FsResult<(BackendHandle, Attr)> {
        self.set_new_attrs(dir, path_fd.as_fd(), mode, set)?;
        self.commit_metadata(path_fd.as_fd(), kind)?;
        self.describe_path(path_fd)
    }

    /// Finishes a CREATE on `fd`, the new file in `dir` open for reading
    /// and writing, which is kept in the open-file cache for the WRITEs that
    /// follow.
    fn finish_new_file(
        &self,
        dir: BorrowedFd<'_>,
        fd: OwnedFd,
        mode: u32,
        set: &SetAttr,
    ) -> FsResult<(BackendHandle, Attr)> {
        if let Some(size) = set.size {
            truncate(fd.as_fd(), size)?;
        }
        self.set_new_attrs(dir, fd.as_fd(), mode, set)?;
        self.commit_metadata(fd.as_fd(), RawType::RegularFile)?;
        let stat = rfs::fstat(&fd).map_err(errno)?;
        let (fh, attr) = self.describe(fd.as_fd(), &stat)?;
        if !self.privileged() {
            let path_fd = self.reopen(fd.as_fd(), OFlags::PATH).map_err(errno)?;
            self.remember(fh, Arc::new(path_fd));
        }
        let file = Arc::new(OpenFile::new(fd, true, true));
        self.let_go(self.open_files.insert(fh, file), &stat);
        Ok((fh, attr))
    }

    fn create_file(
        &self,
        cred: &Cred,
        dir: BorrowedFd<'_>,
        name: &[u8],
        how: &CreateHow,
    ) -> FsResult<(BackendHandle, Attr)> {
        let create = |mode: u32| {
            self.open_child(
                dir,
                name,
                OFlags::CREATE | OFlags::EXCL | OFlags::RDWR,
                Mode::from_raw_mode(mode),
            )
        };
        match how {
            CreateHow::Unchecked(set) | CreateHow::Guarded(set) => {
                let mode = set.mode.unwrap_or(DEFAULT_FILE_MODE) & 0o7777;
                match create(mode) {
                    Ok(fd) => self.finish_new_file(dir, fd, mode, set),
                    Err(Errno::EXIST) if matches!(how, CreateHow::Unchecked(_)) => {
                        self.open_existing(cred, dir, name, set.size)
                    }
                    Err(e) => Err(errno(e)),
                }
            }
            CreateHow::Exclusive(verifier) => {
                let (atime, mtime) = verifier_times(verifier);
                match create(EXCLUSIVE_MODE) {
                    Ok(fd) => {
                        let at = |secs| SetTime::ClientTime(Time { secs, nsecs: 0 });
                        let set = SetAttr {
                            atime: at(atime),
                            mtime: at(mtime),
                            ..SetAttr::default()
                        };
                        self.finish_new_file(dir, fd, EXCLUSIVE_MODE, &set)
                    }
                    Err(Errno::EXIST) => {
                        // A retransmission finds its own file: same verifier in
                        // the times, still empty (as knfsd checks).
                        let path_fd = self.open_child_path(dir, name).map_err(errno)?;
                        let st = rfs::fstat(&path_fd).map_err(errno)?;
                        let ours = is_type(&st, RawType::RegularFile)
                            && st.st_size == 0
                            && st_secs(st.st_atime) == atime
                            && st_secs(st.st_mtime) == mtime;
                        if ours {
                            self.describe_path(path_fd)
                        } else {
                            Err(FsError::Exist)
                        }
                    }
                    Err(e) => Err(errno(e)),
                }
            }
        }
    }

    /// CREATE UNCHECKED of an existing name: a regular file is returned, truncated
    /// to `size` if given; anything else is `Exist`.
    fn open_existing(
        &self,
        cred: &Cred,
        dir: BorrowedFd<'_>,
        name: &[u8],
        size: Option<u64>,
    ) -> FsResult<(BackendHandle, Attr)> {
        let path_fd = self.open_child_path(dir, name).map_err(errno)?;
        let stat = rfs::fstat(&path_fd).map_err(errno)?;
        if !is_type(&stat, RawType::RegularFile) {
            return Err(FsError::Exist);
        }
        let (fh, attr) = self.describe(path_fd.as_fd(), &stat)?;
        let path_fd = Arc::new(path_fd);
        self.remember(fh, Arc::clone(&path_fd));
        let Some(size) = size else {
            return Ok((fh, attr));
        };
        let node = Node {
            fd: NodeFd::Shared(path_fd),
            stat,
        };
        let (file, _) = self.open_file(cred, &fh, true, Some(&node))?;
        let truncated = truncate(file.fd.as_fd(), size);
        // As WRITE and SETATTR do: the cached descriptor may have been
        // opened through another name, whose directory alone is told.
        self.forget_attrs(stat.st_ino);
        truncated?;
        self.commit_metadata(file.fd.as_fd(), RawType::RegularFile)?;
        let stat = rfs::fstat(&file.fd).map_err(errno)?;
        Ok((fh, self.attr(&stat)))
    }

    /// REMOVE (`flags` empty) and RMDIR (`AtFlags::REMOVEDIR`).
    fn unlink(
        &self,
        dir: &BackendHandle,
        name: &[u8],
        flags: AtFlags,
    ) -> Result<Wcc, (FsError, Wcc)> {
        self.check_writable().map_err(no_wcc)?;
        check_name(name, FsError::Inval).map_err(no_wcc)?;
        let ((), wcc) = self.in_dir(dir, |d| {
            let victim = self.child_handle(d.fd.as_fd(), name);
            rfs::unlinkat(&d.fd, name, flags).map_err(errno)?;
            if let Some(fh) = victim {
                self.forget_if_gone(&fh);
            }
            Ok(())
        })?;
        Ok(wcc)
    }

    /// The handle `name` in `dir` has now, if any (to drop it from the caches
    /// when the name is removed or replaced). Does not follow symlinks.
    fn child_handle(&self, dir: BorrowedFd<'_>, name: &[u8]) -> Option<BackendHandle> {
        let kernel = name
            .into_with_c_str(|name| sys::name_to_handle(dir, name, 0))
            .ok()?;
        super::handle::encode(&kernel)
    }

    /// The parent of the directory `dir` (the root's parent is the root),
    /// never an object outside the export: `Stale` when `dir` is no longer
    /// below the export root.
    ///
    /// A directory's handle stays valid when the directory is moved out of
    /// the export (by another process on the server, or through another
    /// export of the same file system): `open_by_handle_at` and a cached
    /// descriptor follow the inode wherever it goes. Its `..` is then
    /// outside, and so would be everything reached from it. So the parent
    /// is handed out only after walking `..` up from it to the export root
    /// (`below_root`): about three system calls per level, O(depth). Only
    /// LOOKUP of `..` pays it, a rare call (clients resolve `..` through
    /// their own name cache); READDIRPLUS
    /// lists `..` with no handle or attributes rather than walk on every
    /// listing (`list` in `readdir.rs`). A directory moved out
    /// answers `Stale`, as knfsd's subtree check does for a handle no longer
    /// in its export, rather than the export root: the client then drops
    /// its view of the moved directory and looks the path up again, where
    /// the root would be a wrong parent that it would cache.
    pub(super) fn parent_of(&self, dir: &Node) -> FsResult<(BackendHandle, Attr)> {
        if self.is_root(&dir.stat) {
            return Ok((self.root_handle, self.attr(&dir.stat)));
        }
        // Opened as the caller, so that it checks search permission on `dir`.
        let fd = open_dotdot(dir.fd.as_fd())?;
        let stat = rfs::fstat(&fd).map_err(errno)?;
        if self.is_root(&stat) {
            return Ok((self.root_handle, self.attr(&stat)));
        }
        if !self.below_root(fd.as_fd(), &stat)? {
            return Err(FsError::Stale);
        }
        self.describe_stated(fd, &stat)
    }

    /// Whether the directory `start` (stat'ed as `start_stat`, not the root)
    /// is below the export root: walks `..` up until it meets the root
    /// (yes), or leaves the export's mount or file system, or reaches the
    /// top, whose `..` is itself (no). The walk runs as root
    /// ([`identity::as_fs_root`](crate::identity::as_fs_root)): it compares
    /// inodes and grants nothing, and a caller who may search `start` need
    /// not be able to search every directory above it.
    fn below_root(&self, start: BorrowedFd<'_>, start_stat: &Stat) -> FsResult<bool> {
        let on_export = |fd: BorrowedFd<'_>, st: &Stat| {
            st.st_dev == self.root_dev
                && sys::name_to_handle(fd, c"", libc::AT_EMPTY_PATH)
                    .is_ok_and(|k| k.mount_id == self.root_mount_id)
        };
        crate::identity::as_fs_root(|| {
            if !on_export(start, start_stat) {
                return Ok(false);
            }
            let mut here: Option<OwnedFd> = None;
            let mut id = (start_stat.st_dev, start_stat.st_ino);
            loop {
                let cur = here.as_ref().map_or(start, AsFd::as_fd);
                let up = open_dotdot(cur)?;
                let st = rfs::fstat(&up).map_err(errno)?;
                if self.is_root(&st) {
                    return Ok(true);
                }
                // The top of the process's tree, or of a file system the
                // export's mount shows only part of (`..` stays put), or a
                // step over a mount's root into the mount it is on.
                if (st.st_dev, st.st_ino) == id || !on_export(up.as_fd(), &st) {
                    return Ok(false);
                }
                id = (st.st_dev, st.st_ino);
                here = Some(up);
            }
        })
    }

    /// A descriptor for COMMIT, for a caller who may write the file, as
    /// knfsd asks (`nfsd_commit` acquires the file with `NFSD_MAY_WRITE`,
    /// the owner override included): the cached one (any access mode
    /// syncs) after the check WRITE makes on a cache hit (`may`), or one
    /// opened for writing as WRITE opens it (the kernel checks; the owner
    /// may write a file whatever its mode), which stays cached.
    fn sync_target(&self, cred: &Cred, fh: &BackendHandle) -> FsResult<(Arc<OpenFile>, Stat)> {
        if let Some(file) = self.open_files.get(fh) {
            let stat = rfs::fstat(&file.fd).map_err(errno)?;
            if stat.st_nlink == 0 {
                self.forget(fh);
                return Err(FsError::Stale);
            }
            self.may(cred, file.fd.as_fd(), &stat, libc::W_OK)?;
            file.touch();
            return Ok((file, stat));
        }
        self.open_file(cred, fh, true, None)
    }

    /// Writes all of `data` at `offset` of `key`'s file with the requested
    /// stability. Returns how many bytes were written: less than asked only
    /// if a later chunk failed.
    fn write_stable(
        &self,
        fd: BorrowedFd<'_>,
        key: FileKey,
        offset: u64,
        data: &[u8],
        stable: Stability,
    ) -> FsResult<u32> {
        // A stable write syncs the file, and may see a write-back error a
        // COMMIT then cannot (`wb_errors.rs`).
        let _syncing = (stable != Stability::Unstable).then(|| wb_errors::syncing(key));
        let sync_flags = match stable {
            Stability::Unstable => ReadWriteFlags::empty(),
            Stability::DataSync => ReadWriteFlags::DSYNC,
            Stability::FileSync => ReadWriteFlags::SYNC,
        };
        let mut inline_sync = !sync_flags.is_empty() && self.has_rwf_sync.load(Ordering::Relaxed);
        let mut done = 0;
        while done < data.len() {
            let pos = offset + done as u64;
            let result = if inline_sync {
                rustix::io::pwritev2(fd, &[IoSlice::new(&data[done..])], pos, sync_flags)
            } else {
                rustix::io::pwrite(fd, &data[done..], pos)
            };
            match result {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(Errno::OPNOTSUPP | Errno::NOSYS) if inline_sync && done == 0 => {
                    self.has_rwf_sync.store(false, Ordering::Relaxed);
                    inline_sync = false;
                }
                Err(e) => {
                    self.write_failed(e);
                    if done == 0 {
                        return Err(errno(e));
                    }
                    break;
                }
            }
        }
        if done == 0 && !data.is_empty() {
            return Err(FsError::Io);
        }
        if stable != Stability::Unstable && (!inline_sync || data.is_empty()) {
            let synced = if stable == Stability::DataSync {
                rfs::fdatasync(fd)
            } else {
                rfs::fsync(fd)
            };
            synced.map_err(|e| {
                self.write_failed(e);
                errno(e)
            })?;
        }
        // `data` is at most u32::MAX bytes in NFS; saturate rather than wrap.
        Ok(u32::try_from(done).unwrap_or(u32::MAX))
    }

    /// Which of the `refused` ACCESS bits, refused by the mode bits, the
    /// kernel grants the caller all the same: a POSIX ACL's named user or
    /// group entry grants what the mode bits cannot say (knfsd's ACCESS asks
    /// the kernel for each bit). Such an entry grants at most the ACL's
    /// mask, which the mode's group bits show, and never to the owner; so
    /// the kernel is asked (`faccessat2`, as this thread's file-system
    /// identity, which must be the caller's) only for a kind of access the
    /// group bits allow and the caller is refused: a 0644 file or 0755
    /// directory costs nothing. An ACL can also refuse what the mode bits
    /// grant; ACCESS then says more than the operation allows, which the
    /// kernel refuses.
    fn granted_beyond_mode(&self, cred: &Cred, node: &Node, attr: &Attr, refused: u32) -> u32 {
        let mask = (attr.mode >> 3) & 7;
        if mask == 0 || cred.uid == attr.uid || !self.has_faccessat2.load(Ordering::Relaxed) {
            return 0;
        }
        let dir = attr.ftype == FileType::Directory;
        let writes = if self.read_only {
            0
        } else if dir {
            access::MODIFY | access::EXTEND | access::DELETE
        } else {
            access::MODIFY | access::EXTEND
        };
        let kinds = [
            (access::READ, 4, libc::R_OK),
            (
                if dir { access::LOOKUP } else { access::EXECUTE },
                1,
                libc::X_OK,
            ),
            // Changing a directory's entries needs search permission too.
            (
                writes,
                2,
                if dir {
                    libc::W_OK | libc::X_OK
                } else {
                    libc::W_OK
                },
            ),
        ];
        let mut granted = 0;
        let mut switched = None;
        for (bits, mode_bit, want) in kinds {
            if refused & bits == 0 || mask & mode_bit == 0 {
                continue;
            }
            // The server switched to the caller's identity (privileged
            // mode): checked once, and only when the kernel is asked.
            if !*switched.get_or_insert_with(|| crate::identity::fs_uid() == cred.uid) {
                return 0;
            }
            if sys::access_fd(node.fd.as_fd(), want).is_ok() {
                granted |= refused & bits;
            }
        }
        granted
    }

    /// A write or sync failed: see [`super::write_failed`].
    pub(super) fn write_failed(&self, e: Errno) {
        super::write_failed(&self.verifier, e);
    }
}

/// A stat time in seconds (the field is narrower on some architectures).
#[allow(clippy::useless_conversion, reason = "stat field widths vary by arch")]
fn st_secs(secs: impl Into<i64>) -> i64 {
    secs.into()
}

fn truncate(fd: BorrowedFd<'_>, size: u64) -> FsResult<()> {
    if size > i64::MAX as u64 {
        return Err(FsError::FBig);
    }
    rfs::ftruncate(fd, size).map_err(errno)
}

impl Filesystem for LocalFs {
    fn root(&self) -> BackendHandle {
        self.root_handle
    }

    fn getattr(&self, _cred: &Cred, fh: &BackendHandle) -> FsResult<Attr> {
        Ok(self.attr(&self.resolve(fh)?.stat))
    }

    fn setattr(
        &self,
        cred: &Cred,
        fh: &BackendHandle,
        set: &SetAttr,
        guard: Option<Time>,
    ) -> Result<Wcc, (FsError, Wcc)> {
        self.check_writable().map_err(no_wcc)?;
        let node = self.resolve(fh).map_err(no_wcc)?;
        let attr = self.attr(&node.stat);
        let before = Some(WccAttr::from(&attr));
        if guard.is_some_and(|ctime| ctime != attr.ctime) {
            let wcc = Wcc {
                before,
                after: Some(attr),
            };
            return Err((FsError::NotSync, wcc));
        }
        let result = set
            .size
            .map_or(Ok(()), |size| {
                let (file, _) = self.open_file(cred, fh, true, Some(&node))?;
                truncate(file.fd.as_fd(), size)
            })
            .and_then(|()| self.set_attrs(node.fd.as_fd(), &node.stat, set))
            .and_then(|()| {
                if *set == SetAttr::default() {
                    return Ok(());
                }
                let kind = RawType::from_raw_mode(node.stat.st_mode);
                self.commit_metadata(node.fd.as_fd(), kind)
            });
        self.forget_attrs(node.stat.st_ino);
        let wcc = Wcc {
            before,
            after: self.attr_of(&node.fd),
        };
        result.map(|()| wcc).map_err(|e| (e, wcc))
    }

    fn lookup(
        &self,
        cred: &Cred,
        dir: &BackendHandle,
        name: &[u8],
    ) -> Result<(BackendHandle, Attr, Option<Attr>), (FsError, Option<Attr>)> {
        check_lookup_name(name).map_err(|e| (e, None))?;
        let node = self.resolve(dir).map_err(|e| (e, None))?;
        let dir_attr = self.attr(&node.stat);
        let fail = |e| (e, Some(dir_attr));
        if !node.is_dir() {
            return Err(fail(FsError::NotDir));
        }
        let (fh, attr) = match name {
            b"." => {
                // Search permission, as for any name (knfsd's
                // `fh_verify(NFSD_MAY_EXEC)`); no owner override.
                self.kernel_allows(cred, node.fd.as_fd(), &node.stat, libc::X_OK)
                    .map_err(fail)?;
                (*dir, dir_attr)
            }
            b".." => self.parent_of(&node).map_err(fail)?,
            _ => self.lookup_child(node.fd.as_fd(), name).map_err(fail)?,
        };
        Ok((fh, attr, Some(dir_attr)))
    }

    fn access(&self, cred: &Cred, fh: &BackendHandle, mask: u32) -> FsResult<(u32, Attr)> {
        let node = self.resolve(fh)?;
        let attr = self.attr(&node.stat);
        let mut granted = access_bits(cred, &attr, self.read_only) & mask;
        if granted != mask && cred.uid != 0 {
            granted |= self.granted_beyond_mode(cred, &node, &attr, mask & !granted);
        }
        Ok((granted, attr))
    }

    fn readlink(&self, _cred: &Cred, fh: &BackendHandle, out: &mut Vec<u8>) -> FsResult<Attr> {
        let node = self.resolve(fh)?;
        if !is_type(&node.stat, RawType::Symlink) {
            return Err(FsError::Inval);
        }
        let target = rfs::readlinkat(&node.fd, "", Vec::new()).map_err(errno)?;
        out.extend_from_slice(target.as_bytes());
        Ok(self.attr(&node.stat))
    }

    fn read(
        &self,
        cred: &Cred,
        fh: &BackendHandle,
        offset: u64,
        count: u32,
        out: &mut Vec<u8>,
    ) -> FsResult<ReadOk> {
        // Without `nowait`, `read_with` always answers; `Io` is unreachable.
        self.read_with(cred, fh, offset, count, out, false)
            .and_then(|ok| ok.ok_or(FsError::Io))
    }

    fn read_cached(
        &self,
        cred: &Cred,
        fh: &BackendHandle,
        offset: u64,
        count: u32,
        out: &mut Vec<u8>,
    ) -> FsResult<Option<ReadOk>> {
        // Relaxed: a hint; a stale `true` costs one refused system call.
        if !self.has_rwf_nowait.load(Ordering::Relaxed) {
            return Ok(None);
        }
        self.read_with(cred, fh, offset, count, out, true)
    }

    fn write(
        &self,
        cred: &Cred,
        fh: &BackendHandle,
        offset: u64,
        data: &[u8],
        stable: Stability,
    ) -> Result<WriteOk, (FsError, Wcc)> {
        self.check_writable().map_err(no_wcc)?;
        let end = offset.checked_add(data.len() as u64);
        if end.is_none_or(|end| end > i64::MAX as u64) {
            return Err(no_wcc(FsError::FBig));
        }
        let (file, stat) = self.open_file(cred, fh, true, None).map_err(no_wcc)?;
        let before = Some(WccAttr::from(&self.attr(&stat)));
        let key = FileKey::of(&stat);
        let result = self.write_stable(file.fd.as_fd(), key, offset, data, stable);
        self.forget_attrs(stat.st_ino);
        let wcc = Wcc {
            before,
            after: self.attr_of(&file.fd),
        };
        match result {
            Ok(count) => Ok(WriteOk {
                count,
                committed: stable,
                wcc,
            }),
            Err(e) => Err((e, wcc)),
        }
    }

    fn create(
        &self,
        cred: &Cred,
        dir: &BackendHandle,
        name: &[u8],
        how: &CreateHow,
    ) -> Result<Created, (FsError, Wcc)> {
        self.check_writable().map_err(no_wcc)?;
        check_name(name, FsError::Exist).map_err(no_wcc)?;
        let ((handle, attr), dir_wcc) =
            self.in_dir(dir, |d| self.create_file(cred, d.fd.as_fd(), name, how))?;
        Ok(Created {
            handle,
            attr,
            dir_wcc,
        })
    }

    fn mkdir(
        &self,
        _cred: &Cred,
        dir: &BackendHandle,
        name: &[u8],
        attr: &SetAttr,
    ) -> Result<Created, (FsError, Wcc)> {
        self.check_writable().map_err(no_wcc)?;
        check_name(name, FsError::Exist).map_err(no_wcc)?;
        let ((handle, new_attr), dir_wcc) = self.in_dir(dir, |d| {
            let mode = attr.mode.unwrap_or(DEFAULT_DIR_MODE) & 0o7777;
            rfs::mkdirat(&d.fd, name, Mode::from_raw_mode(mode)).map_err(errno)?;
            let fd = self
                .open_child(
                    d.fd.as_fd(),
                    name,
                    OFlags::PATH | OFlags::DIRECTORY,
                    Mode::empty(),
                )
                .map_err(errno)?;
            self.finish_new(d.fd.as_fd(), fd, RawType::Directory, mode, attr)
        })?;
        Ok(Created {
            handle,
            attr: new_attr,
            dir_wcc,
        })
    }

    fn symlink(
        &self,
        _cred: &Cred,
        dir: &BackendHandle,
        name: &[u8],
        target: &[u8],
        attr: &SetAttr,
    ) -> Result<Created, (FsError, Wcc)> {
        self.check_writable().map_err(no_wcc)?;
        check_name(name, FsError::Exist).map_err(no_wcc)?;
        if target.contains(&0) {
            return Err(no_wcc(FsError::Inval));
        }
        if target.len() > MAX_TARGET {
            return Err(no_wcc(FsError::NameTooLong));
        }
        let ((handle, new_attr), dir_wcc) = self.in_dir(dir, |d| {
            rfs::symlinkat(target, &d.fd, name).map_err(errno)?;
            let fd = self.open_child_path(d.fd.as_fd(), name).map_err(errno)?;
            // A symlink has no mode of its own and no size to set.
            let stat = rfs::fstat(&fd).map_err(errno)?;
            let (uid, gid) = creation_owner(attr);
            let rest = SetAttr {
                mode: None,
                size: None,
                uid: uid.filter(|&u| u != stat.st_uid),
                gid: gid.filter(|&g| g != stat.st_gid),
                ..*attr
            };
            self.set_attrs(fd.as_fd(), &stat, &rest)?;
            // The link itself has no descriptor to sync (`durable.rs`).
            self.describe_path(fd)
        })?;
        Ok(Created {
            handle,
            attr: new_attr,
            dir_wcc,
        })
    }

    fn mknod(
        &self,
        _cred: &Cred,
        dir: &BackendHandle,
        name: &[u8],
        node: &SpecialNode,
        attr: &SetAttr,
    ) -> Result<Created, (FsError, Wcc)> {
        self.check_writable().map_err(no_wcc)?;
        check_name(name, FsError::Exist).map_err(no_wcc)?;
        let (kind, dev) = match *node {
            SpecialNode::Char(major, minor) => {
                (RawType::CharacterDevice, rfs::makedev(major, minor))
            }
            SpecialNode::Block(major, minor) => (RawType::BlockDevice, rfs::makedev(major, minor)),
            SpecialNode::Socket => (RawType::Socket, 0),
            SpecialNode::Fifo => (RawType::Fifo, 0),
        };
        let ((handle, new_attr), dir_wcc) = self.in_dir(dir, |d| {
            let mode = attr.mode.unwrap_or(DEFAULT_FILE_MODE) & 0o7777;
            rfs::mknodat(&d.fd, name, kind, Mode::from_raw_mode(mode), dev).map_err(errno)?;
            let fd = self.open_child_path(d.fd.as_fd(), name).map_err(errno)?;
            let set = SetAttr {
                size: None,
                ..*attr
            };
            self.finish_new(d.fd.as_fd(), fd, kind, mode, &set)
        })?;
        Ok(Created {
            handle,
            attr: new_attr,
            dir_wcc,
        })
    }

    fn remove(
        &self,
        _cred: &Cred,
        dir: &BackendHandle,
        name: &[u8],
    ) -> Result<Wcc, (FsError, Wcc)> {
        self.unlink(dir, name, AtFlags::empty())
    }

    fn rmdir(&self, _cred: &Cred, dir: &BackendHandle, name: &[u8]) -> Result<Wcc, (FsError, Wcc)> {
        self.unlink(dir, name, AtFlags::REMOVEDIR)
    }

    fn rename(
        &self,
        _cred: &Cred,
        from_dir: &BackendHandle,
        from_name: &[u8],
        to_dir: &BackendHandle,
        to_name: &[u8],
    ) -> Result<(Wcc, Wcc), (FsError, Wcc, Wcc)> {
        let none = |e| (e, Wcc::default(), Wcc::default());
        self.check_writable().map_err(none)?;
        check_name(from_name, FsError::Inval).map_err(none)?;
        check_name(to_name, FsError::Inval).map_err(none)?;
        let from = self.resolve_dir(from_dir).map_err(none)?;
        let from_before = Some(WccAttr::from(&self.attr(&from.stat)));
        let to = self.resolve_dir(to_dir).map_err(|e| {
            let from_wcc = Wcc {
                before: from_before,
                after: Some(self.attr(&from.stat)),
            };
            (e, from_wcc, Wcc::default())
        })?;
        let to_before = Some(WccAttr::from(&self.attr(&to.stat)));
        let victim = self.child_handle(to.fd.as_fd(), to_name);
        let renamed = rfs::renameat(&from.fd, from_name, &to.fd, to_name).map_err(errno);
        if renamed.is_ok() {
            if let Some(fh) = victim {
                self.forget_if_gone(&fh);
            }
        }
        let result = renamed.and_then(|()| {
            self.commit_metadata(to.fd.as_fd(), RawType::Directory)?;
            let same_dir = (from.stat.st_dev, from.stat.st_ino) == (to.stat.st_dev, to.stat.st_ino);
            if same_dir {
                return Ok(());
            }
            self.commit_metadata(from.fd.as_fd(), RawType::Directory)
        });
        let from_wcc = Wcc {
            before: from_before,
            after: self.attr_of(&from.fd),
        };
        let to_wcc = Wcc {
            before: to_before,
            after: self.attr_of(&to.fd),
        };
        match result {
            Ok(()) => Ok((from_wcc, to_wcc)),
            Err(e) => Err((e, from_wcc, to_wcc)),
        }
    }

    fn link(
        &self,
        _cred: &Cred,
        fh: &BackendHandle,
        dir: &BackendHandle,
        name: &[u8],
    ) -> Result<(Option<Attr>, Wcc), (FsError, Option<Attr>, Wcc)> {
        self.check_writable()
            .map_err(|e| (e, None, Wcc::default()))?;
        check_name(name, FsError::Exist).map_err(|e| (e, None, Wcc::default()))?;
        let file = self.resolve(fh).map_err(|e| (e, None, Wcc::default()))?;
        let result = self.in_dir(dir, |d| {
            let linked = rfs::linkat(&file.fd, "", &d.fd, name, AtFlags::EMPTY_PATH);
            match linked {
                // Without CAP_DAC_READ_SEARCH the kernel says ENOENT: link the
                // object through its /proc magic link instead.
                Err(Errno::NOENT) => rfs::linkat(
                    &self.proc_fd,
                    DecInt::from_fd(&file.fd),
                    &d.fd,
                    name,
                    AtFlags::SYMLINK_FOLLOW,
                ),
                other => other,
            }
            .map_err(errno)
        });
        self.forget_attrs(file.stat.st_ino);
        let file_attr = self.attr_of(&file.fd);
        match result {
            Ok(((), wcc)) => Ok((file_attr, wcc)),
            Err((e, wcc)) => Err((e, file_attr, wcc)),
        }
    }

    fn readdir(
        &self,
        _cred: &Cred,
        dir: &BackendHandle,
        cookie: u64,
        verifier: CookieVerifier,
        plus: bool,
        sink: &mut dyn FnMut(DirEntry<'_>) -> bool,
    ) -> Result<ReaddirEnd, (FsError, Option<Attr>)> {
        let node = self.resolve(dir).map_err(|e| (e, None))?;
        let attr = self.attr(&node.stat);
        if !node.is_dir() {
            return Err((FsError::NotDir, Some(attr)));
        }
        if cookie != 0 && verifier != super::readdir::VERIFIER {
            return Err((FsError::BadCookie, Some(attr)));
        }
        let eof = self
            .list(dir, &node, cookie, plus, sink)
            .map_err(|e| (e, Some(attr)))?;
        Ok(ReaddirEnd {
            dir_attr: Some(attr),
            verifier: super::readdir::VERIFIER,
            eof,
        })
    }

    fn fsstat(&self, _cred: &Cred, fh: &BackendHandle) -> FsResult<(FsStat, Attr)> {
        let node = self.resolve(fh)?;
        let vfs = rfs::fstatvfs(&node.fd).map_err(errno)?;
        let bytes = |blocks: u64| blocks.saturating_mul(vfs.f_frsize);
        let stat = FsStat {
            total_bytes: bytes(vfs.f_blocks),
            free_bytes: bytes(vfs.f_bfree),
            avail_bytes: bytes(vfs.f_bavail),
            total_files: vfs.f_files,
            free_files: vfs.f_ffree,
            avail_files: vfs.f_favail,
        };
        Ok((stat, self.attr(&node.stat)))
    }

    fn info(&self) -> FsInfo {
        self.info
    }

    fn commit(
        &self,
        cred: &Cred,
        fh: &BackendHandle,
        _offset: u64,
        _count: u32,
    ) -> Result<Wcc, (FsError, Wcc)> {
        self.check_writable().map_err(no_wcc)?;
        let (file, stat) = self.sync_target(cred, fh).map_err(no_wcc)?;
        let before = Some(WccAttr::from(&self.attr(&stat)));
        // The whole file: COMMIT may always do more than asked. A file's
        // concurrent COMMITs share fsyncs (group commit).
        // A failure moves the verifier before the group's lock is let go:
        // the `fsync` that failed consumed the error, so a COMMIT leading
        // the next one would succeed, and must then see the new verifier.
        let key = FileKey::of(&stat);
        let synced = file.sync.sync(|| {
            // Another COMMIT of the file may hold another descriptor of it
            // (one the cache let go of): its `fsync` may see the error this
            // one then cannot, and must move the verifier under the stripe
            // too (`wb_errors.rs`).
            let _syncing = wb_errors::syncing(key);
            rfs::fsync(&file.fd).inspect_err(|&e| self.write_failed(e))
        });
        if synced.is_ok() {
            // Another sync of the file may have seen an error this `fsync`
            // then could not, and not yet moved the verifier the reply
            // carries (`wb_errors.rs`).
            wb_errors::settle(key);
        }
        let result = synced.map_err(errno);
        let wcc = Wcc {
            before,
            after: self.attr_of(&file.fd),
        };
        result.map(|()| wcc).map_err(|e| (e, wcc))
    }

    fn write_verifier(&self) -> WriteVerifier {
        self.verifier.load(Ordering::Relaxed).to_ne_bytes()
    }

    fn listing_stats(&self) -> ListingStats {
        self.listing.stats()
    }
}

/// `mode` without setuid, and without setgid if the group may execute (a
/// setgid bit without group execute is mandatory locking, not an identity).
fn strip_set_id(mode: u32) -> u32 {
    let mut mode = mode & !0o4000;
    if mode & 0o010 != 0 {
        mode &= !0o2000;
    }
    mode
}

/// The owner and group a create-like call asked for, as knfsd applies them
/// (`nfsd_create_setattr`): only for root. Anyone else gets the object as the
/// kernel made it (the caller's ids, or the directory's setgid group), not
/// the object made and then a PERM for a chown it may not do.
fn creation_owner(set: &SetAttr) -> (Option<u32>, Option<u32>) {
    if crate::identity::fs_uid() == 0 {
        (set.uid, set.gid)
    } else {
        (None, None)
    }
}

impl LocalFs {
    /// READ; with `nowait`, `Ok(None)` instead of waiting for storage
    /// ([`Filesystem::read_cached`]).
    fn read_with(
        &self,
        cred: &Cred,
        fh: &BackendHandle,
        offset: u64,
        count: u32,
        out: &mut Vec<u8>,
        nowait: bool,
    ) -> FsResult<Option<ReadOk>> {
        let (file, stat) = self.open_file(cred, fh, false, None)?;
        let size = u64::try_from(stat.st_size).unwrap_or(0);
        // Bounded by the request, MAX_READ and the bytes the file has.
        let want = u64::from(count.min(MAX_READ)).min(size.saturating_sub(offset));
        let want = usize::try_from(want).unwrap_or(0);
        let n = if want == 0 {
            0
        } else if nowait {
            match sys::pread_append_nowait(file.fd.as_fd(), offset, want, out) {
                Ok(Some(n)) => n,
                Ok(None) => return Ok(None),
                Err(Errno::OPNOTSUPP) => {
                    // This file system cannot tell: stop asking (one wasted
                    // system call per READ otherwise).
                    self.has_rwf_nowait.store(false, Ordering::Relaxed);
                    return Ok(None);
                }
                Err(e) => return Err(errno(e)),
            }
        } else {
            sys::pread_append(file.fd.as_fd(), offset, want, out).map_err(errno)?
        };
        // Attributes from the stat taken before reading: a concurrent write can
        // make them older than the data, never newer, so a client cannot take
        // them as proof that older data is current. Only a read reaching that
        // size stats again: the file may have grown, and EOF must not be
        // claimed with data behind it.
        let read_to = offset.saturating_add(n as u64);
        let (attr, end) = if read_to >= size {
            let attr = self.attr_of(&file.fd);
            (attr, attr.map_or(size, |a| a.size))
        } else {
            (Some(self.attr(&stat)), size)
        };
        Ok(Some(ReadOk {
            count: u32::try_from(n).unwrap_or(u32::MAX),
            eof: read_to >= end,
            attr,
        }))
    }
}

#[cfg(test)]
thread_local! {
    /// `..` descriptors opened by this thread ([`open_dotdot`]): tests count
    /// the walks up to the export root with it.
    pub(super) static DOTDOT_OPENS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// An `O_PATH` descriptor of the directory `dir`'s `..`, opened with the
/// thread's identity. Not `openat2`: `RESOLVE_BENEATH` refuses `..`.
fn open_dotdot(dir: BorrowedFd<'_>) -> FsResult<OwnedFd> {
    #[cfg(test)]
    DOTDOT_OPENS.with(|n| n.set(n.get() + 1));
    rfs::openat(
        dir,
        "..",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(errno)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(ftype: FileType, mode: u32, uid: u32, gid: u32) -> Attr {
        Attr {
            ftype,
            mode,
            nlink: 1,
            uid,
            gid,
            size: 0,
            used: 0,
            rdev: (0, 0),
            fsid: 0,
            fileid: 1,
            atime: Time::default(),
            mtime: Time::default(),
            ctime: Time::default(),
        }
    }

    #[test]
    fn access_follows_knfsd() {
        let user = Cred {
            uid: 1000,
            gid: 100,
            groups: vec![],
        };
        let root = Cred::root();
        let file = attr(FileType::Regular, 0o640, 1000, 100);
        assert_eq!(
            access_bits(&user, &file, false),
            access::READ | access::MODIFY | access::EXTEND
        );
        // Root: no EXECUTE on a file without any x bit; LOOKUP never on files.
        assert_eq!(
            access_bits(&root, &file, false),
            access::READ | access::MODIFY | access::EXTEND
        );
        let script = attr(FileType::Regular, 0o701, 1000, 100);
        assert_ne!(access_bits(&root, &script, false) & access::EXECUTE, 0);
        let other = Cred {
            uid: 2000,
            gid: 200,
            groups: vec![],
        };
        assert_eq!(access_bits(&other, &script, false), access::EXECUTE);
        let dir = attr(FileType::Directory, 0o750, 0, 100);
        assert_eq!(
            access_bits(&user, &dir, false),
            access::READ | access::LOOKUP
        );
        assert_eq!(
            access_bits(&root, &dir, false),
            access::ALL & !access::EXECUTE
        );
        assert_eq!(
            access_bits(&root, &dir, true),
            access::READ | access::LOOKUP
        );
    }

    #[test]
    fn verifier_halves_go_to_atime_and_mtime() {
        let (atime, mtime) = verifier_times(&[0x80, 0, 0, 1, 0x12, 0x34, 0x56, 0x78]);
        assert_eq!(mtime, 1);
        assert_eq!(atime, 0x1234_5678);
    }
}
