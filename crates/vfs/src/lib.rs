//! File-system backends for rnfs.
//!
//! [`Filesystem`] is the one trait the NFS service calls. Its operations are shaped
//! like NFSv3 procedures (RFC 1813) but use no wire types: the server maps
//! [`FsError`] to `nfsstat3` and [`Attr`] to `fattr3` in one place each.
//!
//! Rules every backend follows (the conformance suite in `tests/` checks them):
//! - **Handles** ([`BackendHandle`]) are at most [`BackendHandle::MAX_LEN`] bytes,
//!   opaque to the server, stable for the life of the object and, for persistent
//!   backends, across restarts. Resolving one costs O(1) (no walk of the tree, no
//!   table that grows without bound). A handle whose object is gone is
//!   [`FsError::Stale`]; bytes that could never have been a handle are
//!   [`FsError::BadHandle`]. The server adds the export id and a MAC around these
//!   bytes; backends do not authenticate handles.
//! - **Names** are bytes (not necessarily UTF-8). `""`, `"."`, `".."` and names
//!   containing `/` or NUL are refused by mutating operations with
//!   [`FsError::Inval`] (or [`FsError::Exist`] for `.`/`..` where POSIX says so);
//!   `lookup(".")` is the directory itself and `lookup("..")` is its parent, except
//!   at the export root where it is the root. Names longer than 255 bytes are
//!   [`FsError::NameTooLong`].
//! - **Symlinks are never followed** by the server: every operation acts on the
//!   link itself.
//! - **Nothing leaves the export**: an operation can only reach objects below the
//!   backend's root.
//! - **Weak cache consistency**: mutating operations return [`Wcc`] for the
//!   directory or file they change: attributes before (size, mtime, ctime) and
//!   after, taken as close to the change as the backend can.
//! - **Durability**: [`Stability::Unstable`] writes may stay in memory until
//!   [`Filesystem::commit`]; `DataSync`/`FileSync` writes are durable before the
//!   call returns. [`Filesystem::write_verifier`] changes whenever uncommitted data
//!   may have been lost (every process start for `local`).
//! - **READDIR cookies** are stable: a cookie returned for an entry stays valid while
//!   that entry exists, and resuming from it costs O(1) or O(log n), never O(n).
//!   Cookie 0 means "from the start" and is never given to an entry. Backends list
//!   `.` and `..` first, as knfsd does.
//! - **Credentials**: every call carries a [`Cred`]. Permission checks are the file
//!   system's own where possible (the server switches the thread's fsuid/fsgid for
//!   the local backend when it runs as root); the memory backend checks mode bits
//!   itself. [`Filesystem::access`] answers the ACCESS procedure.
//! - **No O(n)**: no operation's cost grows with the directory size, the file size
//!   (beyond the bytes moved) or the number of open files or handles.
#![warn(missing_docs)]
// Failures carry the wcc data NFS returns with them, so the `Err` side is as
// large as the `Ok` side by design; boxing it would allocate on every failure.
#![allow(clippy::result_large_err, reason = "errors carry wcc data by design")]

mod error;
pub mod identity;
pub mod local;
pub mod memory;
pub mod names;
mod types;

#[cfg(test)]
#[path = "../../../tests/support/cannot_run.rs"]
mod cannot_run;

pub use error::{FsError, FsResult};
pub use types::*;

/// What [`Filesystem::lookup`] returns: the object's handle and attributes and
/// the directory's post-op attributes, or the error and those attributes.
pub type LookupResult = Result<(BackendHandle, Attr, Option<Attr>), (FsError, Option<Attr>)>;

/// What [`Filesystem::link`] returns: the file's post-op attributes and the
/// directory's wcc, or the error with both.
pub type LinkResult = Result<(Option<Attr>, Wcc), (FsError, Option<Attr>, Wcc)>;

/// An NFS-shaped file system. All methods take `&self` and are called concurrently
/// from many service threads.
pub trait Filesystem: Send + Sync + std::fmt::Debug {
    /// The handle of the export root.
    fn root(&self) -> BackendHandle;

    /// Checks that `fh` could be a handle of this backend and that its object still
    /// exists: `BadHandle` or `Stale` otherwise. Cheap (one stat at most).
    fn getattr(&self, cred: &Cred, fh: &BackendHandle) -> FsResult<Attr>;

    /// SETATTR. `guard`: fail with [`FsError::NotSync`] unless the object's ctime
    /// equals it. A size change truncates or extends (zero-filled).
    fn setattr(
        &self,
        cred: &Cred,
        fh: &BackendHandle,
        set: &SetAttr,
        guard: Option<Time>,
    ) -> Result<Wcc, (FsError, Wcc)>;

    /// LOOKUP `name` in `dir`. Returns the object's handle and attributes and the
    /// directory's post-op attributes.
    fn lookup(&self, cred: &Cred, dir: &BackendHandle, name: &[u8]) -> LookupResult;

    /// ACCESS: which of `mask` ([`access`] bits) `cred` is granted on `fh`.
    fn access(&self, cred: &Cred, fh: &BackendHandle, mask: u32) -> FsResult<(u32, Attr)>;

    /// READLINK: the target of the symlink `fh`, appended to `out`.
    fn readlink(&self, cred: &Cred, fh: &BackendHandle, out: &mut Vec<u8>) -> FsResult<Attr>;

    /// READ up to `count` bytes at `offset`, appended to `out`. `eof` is true when
    /// the read reached the end of the file.
    fn read(
        &self,
        cred: &Cred,
        fh: &BackendHandle,
        offset: u64,
        count: u32,
        out: &mut Vec<u8>,
    ) -> FsResult<ReadOk>;

    /// READ as [`Filesystem::read`] does, but only if it needs no wait for
    /// storage: `Ok(None)`, with nothing appended to `out`, when some of the
    /// data is not in memory; the caller then reads with `read`. Lets a server
    /// tell a read served from the page cache (microseconds) from one that
    /// waits for a disk. The default never answers.
    fn read_cached(
        &self,
        cred: &Cred,
        fh: &BackendHandle,
        offset: u64,
        count: u32,
        out: &mut Vec<u8>,
    ) -> FsResult<Option<ReadOk>> {
        let _ = (cred, fh, offset, count, out);
        Ok(None)
    }

    /// WRITE `data` at `offset` with the requested stability. Returns the bytes
    /// written, the stability actually reached (at least the one asked) and the
    /// file's wcc.
    fn write(
        &self,
        cred: &Cred,
        fh: &BackendHandle,
        offset: u64,
        data: &[u8],
        stable: Stability,
    ) -> Result<WriteOk, (FsError, Wcc)>;

    /// CREATE a regular file `name` in `dir`.
    fn create(
        &self,
        cred: &Cred,
        dir: &BackendHandle,
        name: &[u8],
        how: &CreateHow,
    ) -> Result<Created, (FsError, Wcc)>;

    /// MKDIR.
    fn mkdir(
        &self,
        cred: &Cred,
        dir: &BackendHandle,
        name: &[u8],
        attr: &SetAttr,
    ) -> Result<Created, (FsError, Wcc)>;

    /// SYMLINK `name` -> `target` (stored verbatim, never resolved).
    fn symlink(
        &self,
        cred: &Cred,
        dir: &BackendHandle,
        name: &[u8],
        target: &[u8],
        attr: &SetAttr,
    ) -> Result<Created, (FsError, Wcc)>;

    /// MKNOD for FIFOs, sockets and character/block devices. Regular files,
    /// directories and symlinks are [`FsError::BadType`].
    fn mknod(
        &self,
        cred: &Cred,
        dir: &BackendHandle,
        name: &[u8],
        node: &SpecialNode,
        attr: &SetAttr,
    ) -> Result<Created, (FsError, Wcc)>;

    /// REMOVE a non-directory.
    fn remove(&self, cred: &Cred, dir: &BackendHandle, name: &[u8]) -> Result<Wcc, (FsError, Wcc)>;

    /// RMDIR an empty directory.
    fn rmdir(&self, cred: &Cred, dir: &BackendHandle, name: &[u8]) -> Result<Wcc, (FsError, Wcc)>;

    /// RENAME, replacing an existing target as POSIX `rename` does. Returns the
    /// wcc of the source and target directories.
    fn rename(
        &self,
        cred: &Cred,
        from_dir: &BackendHandle,
        from_name: &[u8],
        to_dir: &BackendHandle,
        to_name: &[u8],
    ) -> Result<(Wcc, Wcc), (FsError, Wcc, Wcc)>;

    /// LINK: a new name `name` in `dir` for `fh`. Returns the file's post-op
    /// attributes and the directory's wcc.
    fn link(&self, cred: &Cred, fh: &BackendHandle, dir: &BackendHandle, name: &[u8])
        -> LinkResult;

    /// READDIR / READDIRPLUS: entries of `dir` after `cookie`, in cookie order,
    /// handed to `sink` until it returns `false` (full) or the directory ends.
    /// `verifier` is the one returned with `cookie` (zeros with cookie 0); a stale
    /// one is [`FsError::BadCookie`]. With `plus`, each entry carries its handle and
    /// attributes where they can be had (an entry that vanished meanwhile has
    /// none), except `..`, which never does (RFC 1813 makes both optional): the
    /// local backend hands a parent's handle out only after walking `..` up to
    /// the export root, O(depth), which LOOKUP of `..` pays but no listing
    /// should. An entry the sink refused is not consumed: the next call with the
    /// last accepted cookie returns it again.
    fn readdir(
        &self,
        cred: &Cred,
        dir: &BackendHandle,
        cookie: u64,
        verifier: CookieVerifier,
        plus: bool,
        sink: &mut dyn FnMut(DirEntry<'_>) -> bool,
    ) -> Result<ReaddirEnd, (FsError, Option<Attr>)>;

    /// FSSTAT.
    fn fsstat(&self, cred: &Cred, fh: &BackendHandle) -> FsResult<(FsStat, Attr)>;

    /// Static facts for FSINFO and PATHCONF.
    fn info(&self) -> FsInfo;

    /// COMMIT: make `count` bytes at `offset` (0 = to the end) durable.
    fn commit(
        &self,
        cred: &Cred,
        fh: &BackendHandle,
        offset: u64,
        count: u32,
    ) -> Result<Wcc, (FsError, Wcc)>;

    /// The write verifier: changes whenever uncommitted writes may have been lost.
    fn write_verifier(&self) -> WriteVerifier;

    /// What the backend's listing caches did since it opened. The default
    /// has no caches.
    fn listing_stats(&self) -> ListingStats {
        ListingStats::default()
    }
}
