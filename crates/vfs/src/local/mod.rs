//! The `local` backend: a directory of the host's file system, exported as is.
//!
//! [`LocalFs::open`] takes the export directory; every operation then works on
//! descriptors, never on path strings.
//!
//! # Confinement
//! - Each operation starts from a descriptor of a directory the handle named and
//!   resolves **one name component**: names with `/` or NUL, `""`, and `.`/`..`
//!   where they make no sense are refused before any system call. Where the
//!   kernel has `openat2` (probed once at open; `ENOSYS`/`EPERM` fall back) names
//!   are opened with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//!   RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV`, otherwise with `O_NOFOLLOW`. The
//!   other `*at` calls take one name they do not follow (`unlinkat`, `mkdirat`,
//!   `renameat`, ...; `fstatat` with `AT_SYMLINK_NOFOLLOW`) or act on a
//!   descriptor with `AT_EMPTY_PATH`. Symlinks are returned, never followed.
//! - `lookup("..")` at the export root is the root; below it, the parent,
//!   once a walk up from that parent has met the export root (O(depth), for
//!   LOOKUP of `..` only). A directory moved out of the export keeps its
//!   handle (the kernel's handles and cached descriptors follow the inode),
//!   and its `..` is [`FsError::Stale`], as with knfsd's subtree check, never
//!   a handle outside the export (see `ops.rs`, `parent_of`). READDIRPLUS
//!   lists `..` with its file id but no handle and no attributes, so that no
//!   listing walks.
//! - Objects on another file system (a mount point inside the export, a btrfs
//!   subvolume) are refused with [`FsError::XDev`]: their kernel handles would not
//!   resolve against the export's mount.
//!
//! # Handles
//! A handle is the kernel's own (`name_to_handle_at`), see `handle.rs`: stable
//! across restarts, O(1) to resolve with `open_by_handle_at(export, handle,
//! O_PATH)`, no table. The descriptors it opens are kept in a bounded cache
//! (CLOCK, at most an eighth of `RLIMIT_NOFILE`), so resolving a hot handle
//! costs no system call: a GETATTR is one `fstat`. A cached descriptor pins its
//! inode, so it cannot stand for a reused inode number, and every resolution
//! `fstat`s it: one with no links left is dropped and the handle is `Stale`,
//! as a fresh `open_by_handle_at` would say. That call needs
//! `CAP_DAC_READ_SEARCH`, which a thread loses when the server switches its
//! fsuid to the caller's; resolution therefore
//! runs under [`identity::as_fs_root`], and only the resolution: the `O_PATH`
//! descriptor it yields grants no access, and every access (open for reading or
//! writing, listing, creating, removing) happens with the caller's identity.
//!
//! `open_by_handle_at` accepts any handle of the file system, including one of a
//! file outside the export directory. The backend does not walk `..` to check
//! each handle (O(depth)): the server wraps every handle it issues in a keyed
//! MAC, so a client cannot forge one, and every handle the backend issues is
//! of an object inside the export when it is issued. An object moved out of
//! the export afterwards keeps its handle, as on knfsd without subtree
//! checking; what that handle reaches is still only the object (and, for a
//! directory, its entries), since `..` is checked (see *Confinement*).
//! A handle of another file system is interpreted on this one and in practice
//! resolves to nothing ([`FsError::Stale`] or [`FsError::BadHandle`]).
//!
//! **Unprivileged** (the process cannot `open_by_handle_at` at open time): handles
//! keep the same format, but resolve through a bounded cache (CLOCK, 64 Ki entries
//! by default) of `O_PATH` descriptors filled by lookup, create and readdirplus. A
//! miss is `Stale`. Handles other than the root's do not survive a restart or an
//! eviction in this mode.
//!
//! # LOOKUP
//! A privileged backend looks a name up with one `statx` (not following; the
//! mount id checked, so a mount on the name, even a bind mount of this file
//! system, is left to the descriptor path, which refuses to cross it) and
//! takes the handle from the inode handle cache while the inode's `ctime` is
//! the one cached with it, and was settled when cached (see `readdir.rs`,
//! `lookup_by_name`). A miss costs
//! `name_to_handle_at` and a second stat, which must show the first one's
//! inode, and remembers the handle. Otherwise (unprivileged, or a name the
//! by-name path cannot vouch for) the child is opened `O_PATH`, stat'ed and
//! given its handle: four calls. Measured: 0.53x the server CPU per LOOKUP at
//! 16x16 (`bench/ab lookup 16x16 8 BEFORE AFTER`).
//!
//! # Open files and durability
//! READ, WRITE and COMMIT use a bounded cache (16 Ki by default, at most half
//! of `RLIMIT_NOFILE`) of descriptors
//! opened for reading or writing, keyed by handle, so a stream of WRITEs costs one
//! `pwrite` and two `fstat`s each, and a handle with a cached descriptor needs no
//! resolution at all (GETATTR is one `fstat`). Descriptors are opened by
//! re-opening `/proc/self/fd/N` of the `O_PATH` descriptor, so the kernel checks
//! the caller's permissions at open. On a cache hit the permission is checked
//! again (`faccessat2`), except for the file's owner, as knfsd's owner override
//! does: a file created with mode 0444 (git objects, `cp -p`) stays writable by
//! its creator. A fresh open that the kernel refuses an owner is retried with
//! fsuid 0 (when the server runs as root).
//!
//! Unstable writes are plain `pwrite`s; `DATA_SYNC`/`FILE_SYNC` writes use
//! `pwritev2(RWF_DSYNC/RWF_SYNC)` (fallback: `fdatasync`/`fsync`); COMMIT is
//! `fsync`, for a caller who may write the file, checked as for WRITE (knfsd's
//! `nfsd_commit` asks for write permission too). When an `fsync` reports an
//! error, the write verifier changes, so clients resend every unstable write
//! since their last COMMIT, as knfsd does. The verifier is random at each
//! [`LocalFs::open`]. A stable WRITE, a SETATTR and the idle-writer flush
//! sync the file too, and may be the ones to see its write-back error; a
//! COMMIT answers only once they have moved the verifier (`wb_errors.rs`).
//!
//! Changes to the namespace and to attributes (CREATE ... LINK, SETATTR)
//! are on stable storage before they answer, unless
//! [`LocalOptions::sync_metadata`] is off (exports(5) `async`): the
//! directory, and a new or changed file or directory, are `fsync`ed
//! (`durable.rs`).
//!
//! **How long descriptors stay.** One open for reading only stays until the
//! cache evicts it (CLOCK, under pressure) or its file loses its last link.
//! One open for *writing* is closed once no call has used it for
//! [`LocalOptions::idle_writer_close`] (default 2 s, as knfsd's file cache;
//! closed 2 to 3 s after its last use): while it is open, the file cannot be
//! run on the server (`execve` fails with `ETXTBSY`), nor leased
//! (`F_SETLEASE`), nor used for swap, and without this it would stay open as
//! long as the server lives. Before closing it, the sweeper flushes it
//! (`fdatasync`), and if that reports an error it changes the write verifier
//! exactly as a failed COMMIT does: a write-back error belongs to the inode,
//! and an inode no descriptor holds may leave the kernel's inode cache with
//! its error before a later `fsync` on a new descriptor could report it (as
//! knfsd's `nfsd_file_free`). A descriptor some call holds is never closed
//! under it; the sweeper looks again a second later. A writable descriptor
//! the cache *evicts* (a full cache) or replaces on a call's path is not
//! closed there: it waits, open, for the sweeper to flush and close it the
//! same way at its next wake, once no call holds it (at most 256 wait per
//! export; past that the evicting call flushes it itself; see
//! `idle_writers.rs`, *Evicted writers*).
//! The sweep (`idle_writers.rs`) is one background thread for the process,
//! however many exports: once a second it scans every export's cache,
//! O(cached descriptors), one cache shard locked at a time, and flushes and
//! closes with no lock held. A call pays only a load and, at most once a
//! second per descriptor, a store of its *last used* tick.
//!
//! REMOVE, RMDIR and RENAME drop the object whose last link they removed from
//! the caches, so its space is freed at once; a file deleted by another process
//! stays allocated until its descriptor is evicted or its handle is next used.
//! A handle whose object has no links left is `Stale`.
//!
//! # READDIR cookies
//! `.` and `..` come first with the cookies `0x7fff_ffff_0000_0001` and
//! `..._0002`, positions none of these file systems hands out (see
//! `readdir.rs`); the kernel's own entries follow, each with its `d_off`, the
//! position after it, which ext4, xfs, btrfs and tmpfs (since Linux 6.6) keep
//! stable while the entry exists. Every cookie has bit 63 clear: Linux clients
//! give cookies to applications as `telldir` positions, and a negative one
//! cannot be `seekdir`ed to. A listing stopped by a full reply
//! keeps its descriptor, and the entries read past the reply's last one, in a
//! bounded cache (CLOCK, 256 by default) keyed by directory handle and cookie;
//! the call resuming from that cookie reads on from it, after checking that
//! its caller may read the directory (`faccessat2`), so ext4 does not rebuild
//! its htree readdir state per call (see `dirstreams.rs`). Otherwise resuming
//! is `lseek(d_off)` on a fresh descriptor: O(1) (a hash or index lookup in the
//! file system), whatever the position. `getdents64` starts with a 4 KiB buffer
//! and doubles it up to 32 KiB as the sink keeps taking entries, so a small
//! page reads little more than it returns. The cookie verifier is always zero (as knfsd on these file
//! systems); a cookie with any other verifier is [`FsError::BadCookie`]. With
//! `plus`, a privileged backend takes each entry's handle by name
//! (`name_to_handle_at`, not following) and then its attributes (`fstatat`,
//! not following), and keeps the pair only if the inode is the one `getdents`
//! listed on the export's mount: two calls per entry (see `readdir.rs` for why
//! they cannot disagree). Otherwise, and always when unprivileged (the
//! descriptor fills the handle cache), the entry is opened `O_PATH`, stat'ed
//! and given its handle (one object for all three). An entry that vanished
//! meanwhile, or that is on another mount, carries no plus data.
//!
//! # READDIRPLUS attributes and entries
//! A READDIRPLUS entry's attributes cost an `fstatat` each, two thirds of
//! the server's time per entry, and reading the entries most of the rest. A privileged backend therefore keeps the
//! attributes of every non-directory with one link that a listing stat'ed,
//! beside its handle (`inode_handles`), and answers the next listing from
//! them, with no system call, while nothing can have changed them:
//! - **Changes the kernel reports.** Every listed directory is watched with
//!   inotify (one instance per process, at most 4,096 directories; see
//!   `watches.rs`): any write, truncate, `fallocate`, chmod, chown, utimes,
//!   xattr change, create, unlink or rename in it, by any process, moves the
//!   directory's generation, and attributes read under another generation do
//!   not answer. Events are read before each listing looks; inotify queues
//!   them inside the system call that makes the change, so a change finished
//!   before the READDIRPLUS began is always seen. A full event queue retires
//!   every generation.
//! - **rnfs's own changes.** WRITE, SETATTR, LINK and CREATE UNCHECKED's
//!   truncation of an existing file drop the inode's attributes themselves
//!   (a descriptor from `open_by_handle_at` may not be reported to any
//!   directory, and a cached one may have been opened through a name since
//!   removed, whose directory alone is told), and a listing that began
//!   before such a change stores none of what it read for that inode's
//!   shard of the cache (counts of updates per shard, no counter shared by
//!   all writers).
//! - **What the kernel does not report** shows once the attributes are older
//!   than [`LocalOptions::attr_max_age`] (default 10 s, the export option
//!   `attr_cache_max_age`; 0 turns the cache off): writes through a shared
//!   mapping, a hard link to the file made in another directory (its link
//!   count and ctime; the file then has two links and is no longer cached),
//!   and access times; and rnfs's own changes through *another export* of
//!   the same files (nested exports are separate backends, each with its
//!   own cache, and a change drops the attributes only from the cache of
//!   the export it came through) where the kernel reports them to no
//!   directory the listing watches. A directory's own attributes change
//!   with its entries, which its parent's watch does not hear of, and a file
//!   with two links can change through the other directory: neither is
//!   cached.
//!
//!
//! **What `getdents` returned** is kept the same way, for READDIRPLUS
//! (`dirchunks.rs`): each call's entries, as a chunk stamped with the
//! directory's *names* generation, which moves only with creates, deletes
//! and renames in it (a file being written does not retire its directory's
//! chunks). Listings that resume where another stopped read the chunk
//! instead of the kernel, after checking that the caller may read the
//! directory (`faccessat2`), as opening it would.
//!
//! GETATTR, LOOKUP, ACCESS and every reply's post-op attributes always stat:
//! a client's close-to-open check sees the file system as it is. Linux knfsd
//! stats every entry; nfs-ganesha answers from a cache that expires after 60
//! seconds and hears of no change made outside it.
//!
//! # Credentials
//! The backend never switches identities: the server sets the thread's fsuid,
//! fsgid and groups with [`identity::switch_to`] (which [`identity::as_fs_root`]
//! relies on) and the kernel checks permissions. ACCESS
//! ([`Filesystem::access`](crate::Filesystem::access)) computes from the mode
//! bits, and asks the kernel (`faccessat2` as the caller) for what they refuse,
//! so POSIX ACLs grant as they do for knfsd's `nfsd_access`; a read-only export
//! removes MODIFY, EXTEND and DELETE.
//!
//! # Limitations
//! - Requires `/proc/self/fd` (checked at open).
//! - Setting the mode of a symlink is ignored (Linux has no such mode; knfsd
//!   ignores it too).
//! - knfsd's owner override (see above) needs root for a descriptor that is
//!   not cached yet: the open runs with fsuid 0 only for an owner the kernel
//!   refused. An unprivileged server uses the kernel's checks as they are.
//!   Such a descriptor carries root's credentials, and it is cached: on a
//!   file system that acts with the opener's credentials (an NFS or SMB
//!   mount re-exported), later I/O through it goes out as root.
//!   knfsd's read-if-executable (READ of a mode 0111 file) is not honoured.
//! - READDIR cookies are only stable where the file system keeps `d_off` stable
//!   (not tmpfs before Linux 6.6, nor overlayfs merged directories).
//! - `max_file_size` is reported as `i64::MAX` (userspace cannot read the file
//!   system's `s_maxbytes`); writes past the real limit fail with `FBig`.

mod cache;
mod dirchunks;
mod dirstreams;
mod durable;
mod group_sync;
mod handle;
mod idle_writers;
mod ops;
mod readdir;
mod sys;
mod watches;
mod wb_errors;

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rustix::fs::{self as rfs, AtFlags, FileType as RawType, Mode, OFlags, ResolveFlags, Stat};
use rustix::io::Errno;
use rustix::path::{Arg, DecInt};

use self::cache::ClockCache;
use self::dirstreams::{DirStream, StreamKey};
use self::readdir::InodeHandle;
use crate::names::NAME_MAX;
use crate::{identity, Attr, BackendHandle, Cred, FileType, FsError, FsInfo, FsResult, Time};

/// Options for [`LocalFs::open`].
#[derive(Debug, Clone)]
pub struct LocalOptions {
    /// Refuse every change with [`FsError::RoFs`] (also forced when the mount
    /// itself is read-only).
    pub read_only: bool,
    /// The `fsid` to report instead of the export's `st_dev`.
    pub fsid: Option<u64>,
    /// How many open file descriptors to cache for READ/WRITE/COMMIT: at most
    /// half of `RLIMIT_NOFILE` when handles resolve through the kernel, a
    /// quarter otherwise (the handle cache takes another quarter), so
    /// connections keep the rest. A miss costs an `open_by_handle_at` and a
    /// reopen, so the default is large: the cost per call should not depend on
    /// how many files clients have in use.
    pub open_files: usize,
    /// How many resolved handles to keep (one `O_PATH` descriptor each).
    /// Privileged, a miss costs an `open_by_handle_at` and at most an eighth of
    /// `RLIMIT_NOFILE` is used; unprivileged, the cache is the only way to
    /// resolve (a miss is `Stale`) and it may use a quarter.
    pub handle_cache: usize,
    /// How many READDIR listings to keep open between calls (one directory
    /// descriptor and up to 32 KiB of read entries each; at most a sixteenth
    /// of `RLIMIT_NOFILE`). 0 opens a descriptor per call.
    pub dir_streams: usize,
    /// How many handles to remember by inode number for READDIRPLUS, with
    /// the entry's attributes (see `attr_max_age`; no descriptor; about 190
    /// bytes each, taken as listings fill them). A hit saves the entry's
    /// `name_to_handle_at`. Only a directory whose entries all fit uses them,
    /// so the default (2 Mi, at most about 400 MiB) lets a directory of a
    /// million entries use them. 0 remembers none (and caches no
    /// attributes).
    pub inode_handles: usize,
    /// How long, in seconds, READDIRPLUS may answer an entry from attributes
    /// it read earlier when nothing reported a change (see *READDIRPLUS
    /// attributes and entries* in the module docs): the bound on how stale
    /// a change the kernel does not report can leave them. 0 stats every
    /// entry and keeps no `getdents` results either.
    pub attr_max_age: u32,
    /// How long a cached descriptor opened for writing may go unused before
    /// it is flushed (`fdatasync`) and closed, so that the file can be run
    /// on the server (no `ETXTBSY`) and leased. A background sweep, once a
    /// second, closes it between `ceil(idle)` and `ceil(idle) + 1` seconds
    /// after its last use. Default 2 s, as knfsd's file cache. `None` keeps
    /// such descriptors until the cache evicts them, and then closes them
    /// unflushed (no sweeper runs). See *Open files and durability* in the
    /// module docs.
    pub idle_writer_close: Option<Duration>,
    /// Commit every change to a directory's entries, and to an object's
    /// attributes, to stable storage (`fsync`) before answering, as RFC 1813
    /// and exports(5) `sync` (the default) ask. `false` is knfsd's `async`:
    /// faster, and a crash may lose changes clients were told are done. See
    /// `durable.rs`.
    pub sync_metadata: bool,
    /// The write verifier to share with the server's other exports. A
    /// write-back error that one export's descriptor sees first is then
    /// reported to COMMITs of the same file through the others too, as
    /// knfsd's one verifier per network namespace does (see `wb_errors.rs`).
    /// `None` gives this backend a verifier of its own.
    pub verifier: Option<SharedVerifier>,
}

/// A write verifier that several backends share ([`LocalOptions::verifier`]):
/// each backend moves it when one of its syncs fails.
#[derive(Debug, Clone)]
pub struct SharedVerifier(Arc<AtomicU64>);

impl SharedVerifier {
    /// A new verifier with a random start value (only uniqueness across
    /// server restarts matters).
    pub fn random() -> std::io::Result<Self> {
        let mut start = [0u8; 8];
        File::open("/dev/urandom")?.read_exact(&mut start)?;
        Ok(Self(Arc::new(AtomicU64::new(u64::from_ne_bytes(start)))))
    }
}

/// How many directories' sizes `LocalFs::dir_sizes` keeps (16 bytes each).
const DIR_SIZES: usize = 4096;

impl Default for LocalOptions {
    fn default() -> Self {
        Self {
            read_only: false,
            fsid: None,
            open_files: 16_384,
            handle_cache: 65_536,
            dir_streams: 256,
            inode_handles: 2 << 20,
            attr_max_age: 10,
            idle_writer_close: Some(Duration::from_secs(2)),
            sync_metadata: true,
            verifier: None,
        }
    }
}

/// Why [`LocalFs::open`] failed. Every variant names the export path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalError {
    /// The export directory cannot be opened or stat'ed.
    #[error("cannot open export directory {path}: {cause}")]
    Open {
        /// The export path.
        path: PathBuf,
        /// The system error.
        cause: std::io::Error,
    },
    /// The file system does not give out file handles (`name_to_handle_at`).
    #[error("file system of {path} does not support file handles: {cause}")]
    HandlesUnsupported {
        /// The export path.
        path: PathBuf,
        /// The system error.
        cause: std::io::Error,
    },
    /// The file system's handles do not fit in a [`BackendHandle`].
    #[error("file handles of {path} are {len} bytes (type {handle_type}); at most {max} fit")]
    HandleTooLong {
        /// The export path.
        path: PathBuf,
        /// The kernel handle's length.
        len: usize,
        /// The kernel handle's type.
        handle_type: i32,
        /// The most that fit.
        max: usize,
    },
    /// `open_by_handle_at` failed for another reason than missing privilege.
    #[error("cannot resolve file handles under {path}: {cause}")]
    Handles {
        /// The export path.
        path: PathBuf,
        /// The system error.
        cause: std::io::Error,
    },
    /// `/proc/self/fd` is missing or unusable.
    #[error("export {path} needs /proc/self/fd: {cause}")]
    Proc {
        /// The export path.
        path: PathBuf,
        /// The system error.
        cause: std::io::Error,
    },
    /// No random bytes for the write verifier.
    #[error("export {path}: cannot read /dev/urandom for the write verifier: {cause}")]
    Random {
        /// The export path.
        path: PathBuf,
        /// The system error.
        cause: std::io::Error,
    },
}

/// A host directory as a [`Filesystem`](crate::Filesystem). See the module docs.
#[derive(Debug)]
pub struct LocalFs {
    /// The export path, for messages.
    path: PathBuf,
    /// The export directory, `O_RDONLY`: the mount descriptor for
    /// `open_by_handle_at` and the root's descriptor.
    root: Arc<OwnedFd>,
    root_handle: BackendHandle,
    root_dev: u64,
    root_ino: u64,
    /// The mount of the export directory (`name_to_handle_at`'s mount id).
    root_mount_id: i32,
    fsid: u64,
    read_only: bool,
    /// Handles resolve through `open_by_handle_at` (else only through `paths`).
    privileged: bool,
    /// `O_PATH` descriptors by handle. Privileged: what `open_by_handle_at`
    /// opened, so a hot handle resolves with no system call. Unprivileged: the
    /// only way to resolve (filled by lookup, create and readdirplus).
    paths: ClockCache<Arc<OwnedFd>>,
    /// Descriptors opened for reading or writing, by handle. Shared with
    /// the idle-writer sweeper (`idle_writers.rs`), which holds it weakly.
    open_files: Arc<ClockCache<Arc<OpenFile>>>,
    /// Writable descriptors the cache let go of, for the sweeper to flush
    /// and close (`idle_writers.rs`, *Evicted writers*).
    retired: Arc<idle_writers::Retired>,
    /// Whether a sweeper serves `retired` (`idle_writer_close` set).
    flush_retired: bool,
    /// Directory listings left part way, by handle and resume cookie.
    dir_streams: ClockCache<DirStream, StreamKey>,
    /// READDIRPLUS: each listed inode's handle with the `ctime` it had then
    /// (see `readdir.rs`, `entry_plus_by_name`).
    inode_handles: ClockCache<InodeHandle, u64>,
    /// Entries seen by the last complete listing of a directory, by device
    /// and inode (see `readdir.rs`, `inode_handles_fit`).
    dir_sizes: ClockCache<u64, (u64, u64)>,
    /// READDIRPLUS: what `getdents` returned, by directory and position
    /// (see `dirchunks.rs`).
    dir_chunks: ClockCache<dirchunks::ResumePoint, dirchunks::ResumeKey>,
    /// `LocalOptions::attr_max_age`.
    attr_max_age: u32,
    /// What listings took from the caches (`Filesystem::listing_stats`).
    listing: readdir::ListingCounters,
    /// Set by the first listing that may cache attributes; until then
    /// `forget_attrs` has nothing to do.
    attrs_cached: AtomicBool,
    /// `/proc/self/fd`, to re-open `O_PATH` descriptors with access.
    proc_fd: OwnedFd,
    has_openat2: bool,
    /// Cleared the first time `fchmodat2(AT_EMPTY_PATH)` is missing.
    has_fchmodat2: AtomicBool,
    /// Cleared the first time `faccessat2` is missing.
    has_faccessat2: AtomicBool,
    /// Cleared the first time `pwritev2` refuses sync flags.
    has_rwf_sync: AtomicBool,
    /// Cleared the first time `preadv2` refuses `RWF_NOWAIT` (`read_cached`
    /// then never answers).
    has_rwf_nowait: AtomicBool,
    /// The write verifier; bumped when an `fsync` reports an error (also
    /// the idle-writer sweeper's, hence shared).
    verifier: Arc<AtomicU64>,
    info: FsInfo,
    /// `LocalOptions::sync_metadata`.
    sync_metadata: bool,
    /// `fsync`s made to commit metadata (`durable.rs`).
    metadata_syncs: AtomicU64,
}

/// A cached descriptor opened for reading, writing, or both.
#[derive(Debug)]
struct OpenFile {
    fd: OwnedFd,
    writable: bool,
    /// False for a descriptor opened write-only: the caller who opened it
    /// could write the file but not read it (mode 0622 and a group member).
    readable: bool,
    /// COMMITs of this file share `fsync`s.
    sync: group_sync::GroupSync,
    /// The tick (`idle_writers::now`) in which a call last used it; only
    /// kept for a writable descriptor, which the idle-writer sweeper closes
    /// once it has gone unused long enough.
    last_used: AtomicU32,
}

impl OpenFile {
    fn new(fd: OwnedFd, readable: bool, writable: bool) -> Self {
        Self {
            fd,
            writable,
            readable,
            sync: group_sync::GroupSync::default(),
            last_used: AtomicU32::new(idle_writers::now()),
        }
    }

    /// A call uses this descriptor: keeps a writable one from the
    /// idle-writer sweeper for a while. Two loads, and a store only when
    /// the tick moved since the last use (once a second at most), so calls
    /// on a hot file do not all write the same cache line. `Relaxed`: the
    /// stamp orders no other memory and only says roughly when the last use
    /// was; whether a call holds the descriptor *now* the sweeper learns
    /// from the `Arc`'s count, under the cache's lock. A stamp seen late
    /// closes a descriptor a tick early (its data flushed; the next call
    /// opens it again) or a tick late.
    fn touch(&self) {
        if self.writable {
            let now = idle_writers::now();
            if self.last_used.load(Ordering::Relaxed) != now {
                self.last_used.store(now, Ordering::Relaxed);
            }
        }
    }
}

/// A resolved handle: a descriptor (`O_PATH` or better) and its attributes.
struct Node {
    fd: NodeFd,
    stat: Stat,
}

/// Where a node's descriptor comes from. Operations use it only with
/// `AT_EMPTY_PATH`, `fstat` and as a directory, which any of these allow.
enum NodeFd {
    /// The root, or from the handle cache (`O_PATH`).
    Shared(Arc<OwnedFd>),
    /// From the open-file cache (opened for reading or writing).
    File(Arc<OpenFile>),
}

impl AsFd for NodeFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Self::Shared(fd) => fd.as_fd(),
            Self::File(file) => file.fd.as_fd(),
        }
    }
}

impl Node {
    fn is_dir(&self) -> bool {
        RawType::from_raw_mode(self.stat.st_mode) == RawType::Directory
    }
}

/// `Ok` for a regular file; `IsDir` for a directory, `Inval` for anything else.
fn check_regular(stat: &Stat) -> FsResult<()> {
    match RawType::from_raw_mode(stat.st_mode) {
        RawType::RegularFile => Ok(()),
        RawType::Directory => Err(FsError::IsDir),
        _ => Err(FsError::Inval),
    }
}

/// Some previously acknowledged unstable write may be lost: make clients
/// resend. Only uniqueness matters, and the start value is random.
/// `Relaxed`: the verifier orders no other memory; a reply carries
/// whichever value its load sees, and the failed call itself reports the
/// error.
fn rotate_verifier(verifier: &AtomicU64) {
    verifier.fetch_add(1, Ordering::Relaxed);
}

/// A write or sync failed: data acknowledged as unstable may be lost, so the
/// verifier changes (knfsd's `commit_reset_write_verifier`), except for
/// errors that say nothing about the data. WRITE, COMMIT, the commit of a
/// regular file's metadata and the idle-writer sweeper's flush before
/// closing all come here; all but COMMIT hold the file's stripe while they
/// sync and move it (`wb_errors.rs`).
fn write_failed(verifier: &AtomicU64, e: Errno) {
    if !matches!(e, Errno::AGAIN | Errno::INTR | Errno::STALE) {
        rotate_verifier(verifier);
    }
}

/// The one place a system error becomes an [`FsError`].
fn errno(e: Errno) -> FsError {
    FsError::from_errno(e.raw_os_error())
}

fn time(secs: i64, nsecs: u64) -> Time {
    Time {
        secs,
        nsecs: u32::try_from(nsecs).unwrap_or(0),
    }
}

impl LocalFs {
    /// Opens the export directory `path`.
    ///
    /// Probes, once: file handle support and size, whether `open_by_handle_at`
    /// is allowed (else the unprivileged cache), `openat2`, `/proc/self/fd`, and
    /// whether the mount is read-only.
    pub fn open(path: &Path, options: LocalOptions) -> Result<Self, LocalError> {
        let owned = || path.to_path_buf();
        let open_err = |e: Errno| LocalError::Open {
            path: owned(),
            cause: e.into(),
        };
        let root = rfs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(open_err)?;
        let root_stat = rfs::fstat(&root).map_err(open_err)?;
        let statvfs = rfs::fstatvfs(&root).map_err(open_err)?;

        let proc_err = |e: Errno| LocalError::Proc {
            path: owned(),
            cause: e.into(),
        };
        let proc_fd = rfs::open(
            "/proc/self/fd",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(proc_err)?;
        let reopened = rfs::openat(
            &proc_fd,
            DecInt::from_fd(&root),
            OFlags::PATH | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .and_then(rfs::fstat)
        .map_err(proc_err)?;
        if (reopened.st_dev, reopened.st_ino) != (root_stat.st_dev, root_stat.st_ino) {
            return Err(proc_err(Errno::NOENT));
        }

        let kernel = sys::name_to_handle(root.as_fd(), c"", libc::AT_EMPTY_PATH).map_err(|e| {
            LocalError::HandlesUnsupported {
                path: owned(),
                cause: e.into(),
            }
        })?;
        let root_handle = handle::encode(&kernel).ok_or_else(|| LocalError::HandleTooLong {
            path: owned(),
            len: kernel.bytes().len(),
            handle_type: kernel.handle_type,
            max: handle::MAX_KERNEL_BYTES,
        })?;
        let privileged = match sys::open_by_handle(
            root.as_fd(),
            kernel.handle_type,
            kernel.bytes(),
            libc::O_PATH,
        ) {
            Ok(_) => true,
            Err(Errno::PERM) => false,
            Err(e) => {
                return Err(LocalError::Handles {
                    path: owned(),
                    cause: e.into(),
                })
            }
        };

        let has_openat2 = rfs::openat2(
            &root,
            ".",
            OFlags::PATH | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        )
        .is_ok();

        let verifier = match &options.verifier {
            Some(shared) => shared.clone(),
            None => SharedVerifier::random().map_err(|cause| LocalError::Random {
                path: owned(),
                cause,
            })?,
        };

        let fd_limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
            .current
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(usize::MAX);
        let paths = ClockCache::new(options.handle_cache.min(if privileged {
            fd_limit / 8
        } else {
            fd_limit / 4
        }));
        let info = FsInfo {
            max_file_size: i64::MAX as u64,
            time_delta: Time { secs: 0, nsecs: 1 },
            link: true,
            symlink: true,
            max_link: sys::link_max(root.as_fd()).unwrap_or(65_000),
            max_name: u32::try_from(statvfs.f_namemax)
                .unwrap_or(NAME_MAX as u32)
                .min(NAME_MAX as u32),
            case_insensitive: false,
            case_preserving: true,
            chown_restricted: true,
            no_trunc: true,
        };
        let root_dev = root_stat.st_dev;
        let read_only =
            options.read_only || statvfs.f_flag.contains(rfs::StatVfsMountFlags::RDONLY);
        let open_files = Arc::new(ClockCache::new(options.open_files.min(if privileged {
            fd_limit / 2
        } else {
            fd_limit / 4
        })));
        let verifier = verifier.0;
        // A read-only export never opens a file for writing.
        let retired = Arc::new(idle_writers::Retired::default());
        let sweeper = options.idle_writer_close.filter(|_| !read_only);
        if let Some(idle) = sweeper {
            idle_writers::register(&open_files, &retired, &verifier, idle);
        }
        Ok(Self {
            path: owned(),
            root_handle,
            root_dev,
            root_ino: root_stat.st_ino,
            root_mount_id: kernel.mount_id,
            fsid: options.fsid.unwrap_or(root_dev),
            read_only,
            privileged,
            paths,
            open_files,
            retired,
            flush_retired: sweeper.is_some(),
            dir_streams: ClockCache::new(options.dir_streams.min(fd_limit / 16)),
            inode_handles: ClockCache::new(options.inode_handles),
            dir_sizes: ClockCache::new(DIR_SIZES),
            dir_chunks: ClockCache::new(if options.attr_max_age > 0 {
                dirchunks::RESUME_POINTS
            } else {
                0
            }),
            attr_max_age: options.attr_max_age,
            listing: readdir::ListingCounters::default(),
            attrs_cached: AtomicBool::new(false),
            proc_fd,
            root: Arc::new(root),
            has_openat2,
            has_fchmodat2: AtomicBool::new(true),
            has_faccessat2: AtomicBool::new(true),
            has_rwf_sync: AtomicBool::new(true),
            has_rwf_nowait: AtomicBool::new(true),
            verifier,
            info,
            sync_metadata: options.sync_metadata,
            metadata_syncs: AtomicU64::new(0),
        })
    }

    /// The export directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether handles resolve through the kernel, behind the handle cache
    /// (`true`), or, unprivileged, through that cache alone (`false`).
    pub fn privileged(&self) -> bool {
        self.privileged
    }

    /// Whether every change is refused.
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    fn check_writable(&self) -> FsResult<()> {
        if self.read_only {
            Err(FsError::RoFs)
        } else {
            Ok(())
        }
    }

    fn is_root(&self, stat: &Stat) -> bool {
        (stat.st_dev, stat.st_ino) == (self.root_dev, self.root_ino)
    }

    #[allow(clippy::useless_conversion, reason = "stat field widths vary by arch")]
    fn attr(&self, st: &Stat) -> Attr {
        let raw = RawType::from_raw_mode(st.st_mode);
        let ftype = match raw {
            RawType::Directory => FileType::Directory,
            RawType::Symlink => FileType::Symlink,
            RawType::CharacterDevice => FileType::CharDevice,
            RawType::BlockDevice => FileType::BlockDevice,
            RawType::Fifo => FileType::Fifo,
            RawType::Socket => FileType::Socket,
            _ => FileType::Regular,
        };
        let rdev = match ftype {
            FileType::CharDevice | FileType::BlockDevice => {
                (rfs::major(st.st_rdev), rfs::minor(st.st_rdev))
            }
            _ => (0, 0),
        };
        Attr {
            ftype,
            mode: st.st_mode & 0o7777,
            nlink: u32::try_from(st.st_nlink).unwrap_or(u32::MAX),
            uid: st.st_uid,
            gid: st.st_gid,
            size: u64::try_from(st.st_size).unwrap_or(0),
            used: u64::try_from(st.st_blocks).unwrap_or(0).saturating_mul(512),
            rdev,
            fsid: self.fsid,
            fileid: st.st_ino,
            atime: time(i64::from(st.st_atime), u64::from(st.st_atime_nsec)),
            mtime: time(i64::from(st.st_mtime), u64::from(st.st_mtime_nsec)),
            ctime: time(i64::from(st.st_ctime), u64::from(st.st_ctime_nsec)),
        }
    }

    /// Post-op attributes of `fd`, if it can be stat'ed.
    fn attr_of(&self, fd: impl AsFd) -> Option<Attr> {
        rfs::fstat(fd).ok().map(|st| self.attr(&st))
    }

    /// The object behind `fh`, with a fresh stat. `BadHandle` for bytes that
    /// were never a handle, `Stale` for an object that is gone.
    fn resolve(&self, fh: &BackendHandle) -> FsResult<Node> {
        let (handle_type, bytes) = handle::decode(fh)?;
        let fd = if *fh == self.root_handle {
            NodeFd::Shared(Arc::clone(&self.root))
        } else if let Some(file) = self.open_files.get(fh) {
            // A file in use: no resolution (and no identity switch) at all.
            NodeFd::File(file)
        } else if let Some(path) = self.paths.get(fh) {
            // The descriptor pins the inode, so it cannot have been reused for
            // another file; a removed one is caught by `st_nlink` below.
            NodeFd::Shared(path)
        } else if self.privileged {
            let path = Arc::new(self.open_by_handle(handle_type, bytes)?);
            drop(self.paths.insert(*fh, Arc::clone(&path)));
            NodeFd::Shared(path)
        } else {
            return Err(FsError::Stale);
        };
        let stat = rfs::fstat(&fd).map_err(errno)?;
        if stat.st_nlink == 0 {
            self.forget(fh);
            return Err(FsError::Stale);
        }
        Ok(Node { fd, stat })
    }

    /// `open_by_handle_at(O_PATH)` of a handle's kernel part, as root (the
    /// call needs `CAP_DAC_READ_SEARCH`).
    fn open_by_handle(&self, handle_type: i32, bytes: &[u8]) -> FsResult<OwnedFd> {
        let open = || {
            identity::as_fs_root(|| {
                sys::open_by_handle(
                    self.root.as_fd(),
                    handle_type,
                    bytes,
                    libc::O_PATH | libc::O_NOFOLLOW,
                )
            })
        };
        // Linux 6.18 sometimes answers ENOMEM, not ESTALE, for the handle of a
        // file whose last link was just removed (seen under parallel tests,
        // about one run in five; later attempts say ESTALE). Retry a few
        // times, then call it Stale: a kernel truly out of memory fails
        // everything else too, and STALE only makes the client look again.
        let mut opened = open();
        for _ in 0..3 {
            if !matches!(opened, Err(Errno::NOMEM)) {
                break;
            }
            std::thread::yield_now();
            opened = open();
        }
        opened.map_err(|e| match e {
            // The kernel could not decode the bytes for this file system: not
            // a handle of ours.
            Errno::INVAL => FsError::BadHandle,
            Errno::NOENT | Errno::NOMEM => FsError::Stale,
            // Privilege lost since open: the server's fault.
            Errno::PERM => FsError::ServerFault,
            e => errno(e),
        })
    }

    fn resolve_dir(&self, fh: &BackendHandle) -> FsResult<Node> {
        let node = self.resolve(fh)?;
        if node.is_dir() {
            Ok(node)
        } else {
            Err(FsError::NotDir)
        }
    }

    /// Drops `fh` from the caches (its object is gone).
    fn forget(&self, fh: &BackendHandle) {
        drop(self.open_files.remove(fh));
        drop(self.paths.remove(fh));
    }

    /// After a name of `fh` was removed or replaced: drops it from the caches if
    /// that was its last link, so its space is freed now rather than at
    /// eviction. Other links keep their cached descriptors.
    fn forget_if_gone(&self, fh: &BackendHandle) {
        let gone = |fd: BorrowedFd<'_>| rfs::fstat(fd).map_or(true, |s| s.st_nlink == 0);
        let cached_file = self.open_files.get(fh);
        let cached_path = self.paths.get(fh);
        let any_gone = cached_file.as_ref().is_some_and(|f| gone(f.fd.as_fd()))
            || cached_path.as_ref().is_some_and(|p| gone(p.as_fd()));
        if any_gone {
            self.forget(fh);
        }
    }

    fn handle_of(&self, fd: BorrowedFd<'_>) -> FsResult<BackendHandle> {
        let kernel = sys::name_to_handle(fd, c"", libc::AT_EMPTY_PATH).map_err(errno)?;
        handle::encode(&kernel).ok_or(FsError::NotSupp)
    }

    /// Handle and attributes of the object `fd` refers to, which must be on the
    /// export's file system.
    fn describe(&self, fd: BorrowedFd<'_>, stat: &Stat) -> FsResult<(BackendHandle, Attr)> {
        if stat.st_dev != self.root_dev {
            return Err(FsError::XDev);
        }
        Ok((self.handle_of(fd)?, self.attr(stat)))
    }

    /// [`describe`](Self::describe) for a fresh `O_PATH` descriptor, remembered in
    /// the unprivileged cache.
    fn describe_path(&self, path_fd: OwnedFd) -> FsResult<(BackendHandle, Attr)> {
        let stat = rfs::fstat(&path_fd).map_err(errno)?;
        self.describe_stated(path_fd, &stat)
    }

    /// [`Self::describe_path`] of a descriptor already `fstat`ed.
    fn describe_stated(&self, path_fd: OwnedFd, stat: &Stat) -> FsResult<(BackendHandle, Attr)> {
        let (fh, attr) = self.describe(path_fd.as_fd(), stat)?;
        if !self.privileged() {
            self.remember(fh, Arc::new(path_fd));
        }
        Ok((fh, attr))
    }

    /// Handle and attributes of `name` (one checked component, not a dot) in
    /// the directory `dir`: by name where that can vouch for them
    /// (`lookup_by_name`), else from an `O_PATH` descriptor.
    fn lookup_child(&self, dir: BorrowedFd<'_>, name: &[u8]) -> FsResult<(BackendHandle, Attr)> {
        if self.privileged {
            // A name of at most NAME_MAX bytes is made a C string on the stack.
            let by_name = name.into_with_c_str(|name| Ok(self.lookup_by_name(dir, name)));
            if let Ok(Some(found)) = by_name {
                return found;
            }
        }
        let fd = self.open_child_path(dir, name).map_err(errno)?;
        self.describe_path(fd)
    }

    /// Unprivileged mode: `fh` now resolves to `path_fd` (an `O_PATH` descriptor).
    fn remember(&self, fh: BackendHandle, path_fd: Arc<OwnedFd>) {
        if !self.privileged && fh != self.root_handle {
            drop(self.paths.insert(fh, path_fd));
        }
    }

    /// Opens `name` in `dir` (one component), never following a symlink or
    /// leaving the file system.
    fn open_child(
        &self,
        dir: BorrowedFd<'_>,
        name: &[u8],
        flags: OFlags,
        mode: Mode,
    ) -> Result<OwnedFd, Errno> {
        let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        if self.has_openat2 {
            let resolve = ResolveFlags::BENEATH
                | ResolveFlags::NO_SYMLINKS
                | ResolveFlags::NO_MAGICLINKS
                | ResolveFlags::NO_XDEV;
            // EAGAIN: a concurrent rename elsewhere; the kernel asks for a retry.
            let mut tries = 0;
            loop {
                match rfs::openat2(dir, name, flags, mode, resolve) {
                    Err(Errno::AGAIN) if tries < 3 => tries += 1,
                    other => return other,
                }
            }
        } else {
            rfs::openat(dir, name, flags, mode)
        }
    }

    /// An `O_PATH` descriptor of `name` in `dir` (a symlink itself if it is one).
    fn open_child_path(&self, dir: BorrowedFd<'_>, name: &[u8]) -> Result<OwnedFd, Errno> {
        self.open_child(dir, name, OFlags::PATH, Mode::empty())
    }

    /// A new descriptor for the object `fd` refers to, opened with `flags`; the
    /// kernel checks the caller's permission as for any open.
    fn reopen(&self, fd: BorrowedFd<'_>, flags: OFlags) -> Result<OwnedFd, Errno> {
        rfs::openat(
            &self.proc_fd,
            DecInt::from_fd(fd),
            flags | OFlags::CLOEXEC,
            Mode::empty(),
        )
    }

    /// A descriptor of the regular file `fh` opened for reading (and writing if
    /// `write`), from the cache or opened now, with the file's current stat.
    fn open_file(
        &self,
        cred: &Cred,
        fh: &BackendHandle,
        write: bool,
        known: Option<&Node>,
    ) -> FsResult<(Arc<OpenFile>, Stat)> {
        // A read that finds only a write-only descriptor cached opens the
        // file for both if it may, so that the cached one is replaced and
        // later READs do not each open the file again.
        let mut upgrade = false;
        if let Some(file) = self.open_files.get(fh) {
            upgrade = !write;
            if if write { file.writable } else { file.readable } {
                let stat = rfs::fstat(&file.fd).map_err(errno)?;
                if stat.st_nlink == 0 {
                    self.forget(fh);
                    return Err(FsError::Stale);
                }
                let want = if write { libc::W_OK } else { libc::R_OK };
                self.may(cred, file.fd.as_fd(), &stat, want)?;
                file.touch();
                return Ok((file, stat));
            }
        }
        let resolved;
        let node = match known {
            Some(node) => node,
            None => {
                resolved = self.resolve(fh)?;
                &resolved
            }
        };
        check_regular(&node.stat)?;
        // Only where the mode lets the caller write (else the read-write
        // open would fail first on every such READ; an ACL that allows more
        // just keeps the read-only path).
        let upgrade = upgrade && {
            let st = &node.stat;
            cred.uid == 0
                || cred.uid == st.st_uid
                || cred.mode_bits(st.st_uid, st.st_gid, st.st_mode) & 0o2 != 0
        };
        let flags = if write || upgrade {
            OFlags::RDWR
        } else {
            OFlags::RDONLY
        };
        let (fd, readable, writable) = match self.reopen(node.fd.as_fd(), flags) {
            Ok(fd) => (fd, true, write || upgrade),
            // knfsd's owner override, as on a cache hit (`may`): the owner
            // may read and write their file whatever its mode (a file
            // created 0444 and then written, `ftruncate` of a descriptor
            // open for writing). Only the open runs as root; the caller's
            // identity is back before anything is done with it.
            Err(Errno::ACCESS) if cred.uid == node.stat.st_uid && identity::can_switch() => {
                let fd =
                    identity::as_fs_root(|| self.reopen(node.fd.as_fd(), flags)).map_err(errno)?;
                (fd, true, write || upgrade)
            }
            // A writer who may not read (as knfsd, which opens write-only for
            // a WRITE): the descriptor serves writes only.
            Err(Errno::ACCESS) if write => {
                let fd = self
                    .reopen(node.fd.as_fd(), OFlags::WRONLY)
                    .map_err(errno)?;
                (fd, false, true)
            }
            // A reader who may not write, or a file that cannot be opened
            // for writing now (a running executable): read-only, uncached.
            Err(_) if upgrade => {
                let fd = self
                    .reopen(node.fd.as_fd(), OFlags::RDONLY)
                    .map_err(errno)?;
                (fd, true, false)
            }
            Err(e) => return Err(errno(e)),
        };
        let file = Arc::new(OpenFile::new(fd, readable, writable));
        // A descriptor never displaces one that can do more (two threads that
        // missed at once): read and write, then write, then read.
        let rank = |f: &OpenFile| u8::from(f.writable) * 2 + u8::from(f.readable);
        let better = self
            .open_files
            .get(fh)
            .is_none_or(|f| rank(&file) > rank(&f));
        if better {
            self.let_go(self.open_files.insert(*fh, Arc::clone(&file)), &node.stat);
        }
        Ok((file, node.stat))
    }

    /// Disposes of what the open-file cache gave back on inserting a
    /// descriptor of `inserted` (the one it replaced, or one it evicted): a
    /// writable one of another file is flushed before it closes, by the
    /// sweeper (`idle_writers.rs`, *Evicted writers*), or here when the
    /// sweeper's list is full. One of the same file closes at once: the new
    /// descriptor keeps the inode, and its write-back errors, for the next
    /// `fsync`. Without a sweeper (`idle_writer_close: None`) it closes at
    /// once, unflushed.
    fn let_go(&self, old: Option<Arc<OpenFile>>, inserted: &Stat) {
        let Some(file) = old.filter(|f| f.writable && self.flush_retired) else {
            return;
        };
        let same_file = rfs::fstat(&file.fd)
            .is_ok_and(|st| (st.st_dev, st.st_ino) == (inserted.st_dev, inserted.st_ino));
        if same_file {
            return;
        }
        if let Err(file) = self.retired.push(file) {
            idle_writers::flush_and_close(file, &self.verifier);
        }
    }

    /// May the caller access `fd` with `want` (`R_OK`/`W_OK`)? The owner always
    /// may (knfsd's owner override); others as the kernel says for the thread's
    /// identity, or by the mode bits where `faccessat2` is missing.
    fn may(&self, cred: &Cred, fd: BorrowedFd<'_>, stat: &Stat, want: i32) -> FsResult<()> {
        if cred.uid == stat.st_uid {
            return Ok(());
        }
        self.kernel_allows(cred, fd, stat, want)
    }

    /// May the caller access `fd` with `want` (`R_OK`, `W_OK` or `X_OK`),
    /// as the kernel says for the thread's identity (the owner too: no
    /// override), or by the mode bits where `faccessat2` is missing.
    fn kernel_allows(
        &self,
        cred: &Cred,
        fd: BorrowedFd<'_>,
        stat: &Stat,
        want: i32,
    ) -> FsResult<()> {
        if self.has_faccessat2.load(Ordering::Relaxed) {
            match sys::access_fd(fd, want) {
                Ok(()) => return Ok(()),
                Err(Errno::NOSYS) => self.has_faccessat2.store(false, Ordering::Relaxed),
                Err(e) => return Err(errno(e)),
            }
        }
        let bits = cred.mode_bits(stat.st_uid, stat.st_gid, stat.st_mode);
        let need = match want {
            libc::W_OK => 0o2,
            libc::X_OK => 0o1,
            _ => 0o4,
        };
        if cred.uid == 0 || bits & need != 0 {
            Ok(())
        } else {
            Err(FsError::Access)
        }
    }

    /// chmod the object `fd` refers to (an `O_PATH` descriptor is fine).
    fn chmod(&self, fd: BorrowedFd<'_>, mode: u32) -> FsResult<()> {
        if self.has_fchmodat2.load(Ordering::Relaxed) {
            match sys::chmod_fd(fd, mode) {
                Ok(()) => return Ok(()),
                Err(Errno::NOSYS | Errno::INVAL) => {
                    self.has_fchmodat2.store(false, Ordering::Relaxed)
                }
                Err(e) => return Err(errno(e)),
            }
        }
        // Through the magic link: reaches the inode without opening it.
        rfs::chmodat(
            &self.proc_fd,
            DecInt::from_fd(fd),
            Mode::from_raw_mode(mode),
            AtFlags::empty(),
        )
        .map_err(errno)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use crate::{CreateHow, Filesystem, SetAttr, Stability};

    /// The paths for kernels without openat2, fchmodat2, faccessat2 or
    /// RWF_DSYNC give the same results.
    #[test]
    fn fallbacks_for_older_kernels() {
        let dir = tempfile::tempdir().unwrap();
        let mut fs = LocalFs::open(dir.path(), LocalOptions::default()).unwrap();
        fs.has_openat2 = false;
        fs.has_fchmodat2.store(false, Ordering::Relaxed);
        fs.has_faccessat2.store(false, Ordering::Relaxed);
        fs.has_rwf_sync.store(false, Ordering::Relaxed);
        let root = Cred::root();
        let r = fs.root();
        let set = SetAttr {
            mode: Some(0o600),
            ..SetAttr::default()
        };
        let created = fs
            .create(&root, &r, b"f", &CreateHow::Guarded(set))
            .unwrap();
        assert_eq!(created.attr.mode, 0o600);
        let chmod = SetAttr {
            mode: Some(0o640),
            ..SetAttr::default()
        };
        fs.setattr(&root, &created.handle, &chmod, None).unwrap();
        let ok = fs
            .write(&root, &created.handle, 0, b"abc", Stability::FileSync)
            .unwrap();
        assert_eq!((ok.count, ok.committed), (3, Stability::FileSync));
        std::os::unix::fs::symlink("/etc", dir.path().join("l")).unwrap();
        let (link, attr, _) = fs.lookup(&root, &r, b"l").unwrap();
        assert_eq!(attr.ftype, FileType::Symlink);
        assert_eq!(
            fs.lookup(&root, &link, b"passwd").unwrap_err().0,
            FsError::NotDir
        );

        // Mode bits decide on a cached descriptor when faccessat2 is missing.
        let (file, stat) = fs.open_file(&root, &created.handle, false, None).unwrap();
        assert_eq!(stat.st_mode & 0o7777, 0o640);
        let member = Cred {
            uid: 4242,
            gid: stat.st_gid,
            groups: vec![],
        };
        let stranger = Cred {
            uid: 4242,
            gid: 4242,
            groups: vec![],
        };
        let fd = file.fd.as_fd();
        assert_eq!(fs.may(&member, fd, &stat, libc::R_OK), Ok(()));
        assert_eq!(fs.may(&member, fd, &stat, libc::W_OK), Err(FsError::Access));
        assert_eq!(
            fs.may(&stranger, fd, &stat, libc::R_OK),
            Err(FsError::Access)
        );
        assert_eq!(fs.may(&root, fd, &stat, libc::W_OK), Ok(()));
    }

    /// The idle-writer sweep takes only writable descriptors that are idle
    /// and held by no call, flushes them without touching the verifier,
    /// and leaves the file to be opened again by the next WRITE.
    #[test]
    fn the_sweep_closes_only_idle_unheld_writers() {
        let dir = tempfile::tempdir().unwrap();
        // No background sweeper for this backend: the test sweeps.
        let options = LocalOptions {
            idle_writer_close: None,
            ..LocalOptions::default()
        };
        let fs = LocalFs::open(dir.path(), options).unwrap();
        let root = Cred::root();
        let created = fs
            .create(
                &root,
                &fs.root(),
                b"f",
                &CreateHow::Guarded(SetAttr::default()),
            )
            .unwrap();
        let fh = created.handle;
        fs.write(&root, &fh, 0, b"abc", Stability::Unstable)
            .unwrap();
        let verifier = fs.write_verifier();
        let sweep = |idle_ticks| {
            let mut taken = Vec::new();
            idle_writers::sweep(
                &fs.open_files,
                &fs.retired,
                &fs.verifier,
                idle_ticks,
                &mut taken,
            );
            assert!(taken.is_empty());
            fs.open_files.contains(&fh)
        };

        // Used just now (and held by no call): a long idle time keeps it.
        let file = fs.open_files.get(&fh).unwrap();
        assert!(file.writable);
        file.last_used.store(idle_writers::now(), Ordering::Relaxed);
        drop(file);
        assert!(sweep(1000), "closed though just used");
        // Idle, but a call holds it.
        let file = fs.open_files.get(&fh).unwrap();
        file.last_used
            .store(idle_writers::now().wrapping_sub(1000), Ordering::Relaxed);
        assert!(sweep(1000), "closed while a call held it");
        drop(file);
        assert!(!sweep(1000), "an idle writer stayed open");
        assert_eq!(
            fs.write_verifier(),
            verifier,
            "a good flush moved the verifier"
        );

        // A read-only descriptor stays, however idle.
        let (file, _) = fs.open_file(&root, &fh, false, None).unwrap();
        assert!(!file.writable);
        drop(file);
        assert!(sweep(0), "a read-only descriptor was closed");
        // The next WRITE opens the file again.
        fs.write(&root, &fh, 3, b"def", Stability::Unstable)
            .unwrap();
        assert!(fs.open_files.get(&fh).unwrap().writable);
        assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"abcdef");
    }

    /// A flush that fails before the close moves the write verifier, as a
    /// failed COMMIT does (`write_failed`). `fdatasync` of a socket fails
    /// (EINVAL), which stands in for a write-back error here.
    #[test]
    fn a_failed_flush_before_closing_moves_the_verifier() {
        let dir = tempfile::tempdir().unwrap();
        let options = LocalOptions {
            idle_writer_close: None,
            ..LocalOptions::default()
        };
        let fs = LocalFs::open(dir.path(), options).unwrap();
        let verifier = fs.write_verifier();
        let (socket, _peer) = std::os::unix::net::UnixStream::pair().unwrap();
        let fh = BackendHandle::new(b"a socket").unwrap();
        let file = Arc::new(OpenFile::new(OwnedFd::from(socket), false, true));
        drop(fs.open_files.insert(fh, file));
        let mut taken = Vec::new();
        idle_writers::sweep(&fs.open_files, &fs.retired, &fs.verifier, 0, &mut taken);
        assert!(!fs.open_files.contains(&fh));
        assert_ne!(fs.write_verifier(), verifier);
    }

    /// A writable descriptor the open-file cache evicts on a call's path is
    /// not closed there unflushed: it waits for the sweep (`idle_writers.rs`,
    /// *Evicted writers*), which flushes and closes it once no call holds
    /// it; a flush that fails moves the verifier.
    #[test]
    fn evicted_writers_wait_for_the_sweep_to_flush_them() {
        let dir = tempfile::tempdir().unwrap();
        let options = LocalOptions {
            // One descriptor per shard: every further file evicts one.
            open_files: 1,
            idle_writer_close: None,
            ..LocalOptions::default()
        };
        let mut fs = LocalFs::open(dir.path(), options).unwrap();
        // As with a sweeper running; the test sweeps.
        fs.flush_retired = true;
        let root = Cred::root();
        let files = 64;
        for i in 0..files {
            let name = format!("f{i}");
            let how = CreateHow::Guarded(SetAttr::default());
            let fh = fs.create(&root, &fs.root(), name.as_bytes(), &how).unwrap();
            fs.write(&root, &fh.handle, 0, b"data", Stability::Unstable)
                .unwrap();
        }
        let cached = fs.open_files.len();
        assert!(cached < files, "nothing was evicted");
        assert_eq!(
            fs.retired.len(),
            files - cached,
            "evicted writers were closed unflushed"
        );
        // One held by a call stays until the call lets go.
        let held = Arc::clone(&fs.retired.lock()[0]);
        let verifier = fs.write_verifier();
        let mut taken = Vec::new();
        idle_writers::sweep(&fs.open_files, &fs.retired, &fs.verifier, 1000, &mut taken);
        assert_eq!(fs.retired.len(), 1);
        assert_eq!(fs.write_verifier(), verifier, "a good flush moved it");
        drop(held);
        idle_writers::sweep(&fs.open_files, &fs.retired, &fs.verifier, 1000, &mut taken);
        assert_eq!(fs.retired.len(), 0);

        // A flush that fails (a socket's `fdatasync`: EINVAL) moves it.
        let (socket, _peer) = std::os::unix::net::UnixStream::pair().unwrap();
        let file = Arc::new(OpenFile::new(OwnedFd::from(socket), false, true));
        let other = rfs::stat(dir.path()).unwrap();
        fs.let_go(Some(file), &other);
        idle_writers::sweep(&fs.open_files, &fs.retired, &fs.verifier, 1000, &mut taken);
        assert_ne!(fs.write_verifier(), verifier);
    }

    /// Every call that syncs a regular file other than COMMIT (a stable
    /// WRITE, a SETATTR committing the file, the idle-writer flush) holds
    /// the file's stripe while it syncs (`wb_errors.rs`); an UNSTABLE
    /// WRITE, which syncs nothing, does not.
    #[test]
    fn syncs_that_may_see_write_back_errors_hold_the_stripe() {
        let dir = tempfile::tempdir().unwrap();
        let options = LocalOptions {
            idle_writer_close: None,
            ..LocalOptions::default()
        };
        let fs = LocalFs::open(dir.path(), options).unwrap();
        let root = Cred::root();
        let how = CreateHow::Guarded(SetAttr::default());
        let fh = fs.create(&root, &fs.root(), b"f", &how).unwrap().handle;
        let file = fs.open_files.get(&fh).unwrap();
        let key = wb_errors::FileKey::of(&rfs::fstat(&file.fd).unwrap());
        drop(file);
        // Whether `call` finishes while the stripe is held exclusively.
        let runs_while_held = |call: &(dyn Fn() + Sync)| {
            let held = wb_errors::exclusive(key);
            let (done, finished) = std::sync::mpsc::channel();
            std::thread::scope(|s| {
                s.spawn(move || {
                    call();
                    done.send(()).unwrap();
                });
                let ran = finished.recv_timeout(Duration::from_millis(200)).is_ok();
                drop(held);
                if !ran {
                    finished.recv().unwrap();
                }
                ran
            })
        };
        let write = |stable| {
            fs.write(&root, &fh, 0, b"data", stable).unwrap();
        };
        assert!(runs_while_held(&|| write(Stability::Unstable)));
        assert!(!runs_while_held(&|| write(Stability::DataSync)));
        assert!(!runs_while_held(&|| write(Stability::FileSync)));
        let truncate = SetAttr {
            size: Some(2),
            ..SetAttr::default()
        };
        assert!(!runs_while_held(&|| {
            fs.setattr(&root, &fh, &truncate, None).unwrap();
        }));
        let mut taken = Vec::new();
        fs.open_files.take_if(|_| true, &mut taken);
        let file = taken.pop().unwrap();
        let flush = std::sync::Mutex::new(Some(file));
        assert!(!runs_while_held(&|| {
            let file = flush.lock().unwrap().take().unwrap();
            idle_writers::flush_and_close(file, &fs.verifier);
        }));
    }

    /// A COMMIT whose `fsync` succeeded while another sync of the file had
    /// seen an error but not yet moved the verifier answers only after the
    /// move, so its reply carries the new verifier (`wb_errors.rs`).
    #[test]
    fn a_commit_waits_for_a_failed_sync_to_move_the_verifier() {
        let dir = tempfile::tempdir().unwrap();
        let fs = LocalFs::open(dir.path(), LocalOptions::default()).unwrap();
        let root = Cred::root();
        let how = CreateHow::Guarded(SetAttr::default());
        let fh = fs.create(&root, &fs.root(), b"f", &how).unwrap().handle;
        fs.write(&root, &fh, 0, b"data", Stability::Unstable)
            .unwrap();
        let stat = rfs::stat(dir.path().join("f")).unwrap();
        let old = fs.write_verifier();
        // Another sync saw an error and is about to move the verifier.
        let syncing = wb_errors::syncing(wb_errors::FileKey::of(&stat));
        let (replied, reply) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                fs.commit(&root, &fh, 0, 0).unwrap();
                // As the NFS layer builds the reply.
                replied.send(fs.write_verifier()).unwrap();
            });
            std::thread::sleep(Duration::from_millis(200));
            rotate_verifier(&fs.verifier);
            drop(syncing);
            let verifier = reply.recv().unwrap();
            assert_ne!(verifier, old, "the COMMIT answered with the old verifier");
        });
    }

    /// A regular file's metadata commit that fails moves the verifier: its
    /// `fsync` wrote the file's UNSTABLE data too, and consumed the error a
    /// COMMIT would have reported. A directory's does not move it.
    #[test]
    fn a_failed_commit_of_a_regular_file_moves_the_verifier() {
        let dir = tempfile::tempdir().unwrap();
        let fs = LocalFs::open(dir.path(), LocalOptions::default()).unwrap();
        // `fsync` of a socket fails (EINVAL): a write-back error here.
        let (socket, _peer) = std::os::unix::net::UnixStream::pair().unwrap();
        let verifier = fs.write_verifier();
        let dir_kind = fs.commit_metadata(socket.as_fd(), RawType::Directory);
        assert!(dir_kind.is_err());
        assert_eq!(fs.write_verifier(), verifier, "a directory moved it");
        let file_kind = fs.commit_metadata(socket.as_fd(), RawType::RegularFile);
        assert!(file_kind.is_err());
        assert_ne!(
            fs.write_verifier(),
            verifier,
            "the lost data went unreported"
        );
    }

    /// Backends that share a verifier (nested exports of one server) all
    /// answer with the one that a failure seen through any of them moved.
    #[test]
    fn a_failure_through_one_export_moves_a_shared_verifier() {
        let dir = tempfile::tempdir().unwrap();
        let inner = dir.path().join("inner");
        std::fs::create_dir(&inner).unwrap();
        let shared = SharedVerifier::random().unwrap();
        let with_shared = || LocalOptions {
            verifier: Some(shared.clone()),
            ..LocalOptions::default()
        };
        let outer = LocalFs::open(dir.path(), with_shared()).unwrap();
        let nested = LocalFs::open(&inner, with_shared()).unwrap();
        let alone = LocalFs::open(&inner, LocalOptions::default()).unwrap();
        let (before, alone_before) = (nested.write_verifier(), alone.write_verifier());
        assert_eq!(outer.write_verifier(), before);
        let (socket, _peer) = std::os::unix::net::UnixStream::pair().unwrap();
        assert!(outer
            .commit_metadata(socket.as_fd(), RawType::RegularFile)
            .is_err());
        assert_ne!(
            nested.write_verifier(),
            before,
            "the nested export missed it"
        );
        assert_eq!(nested.write_verifier(), outer.write_verifier());
        assert_eq!(alone.write_verifier(), alone_before);
    }

    #[test]
    fn idle_times_in_ticks() {
        assert_eq!(idle_writers::TICK, Duration::from_secs(1));
        assert_eq!(idle_writers::idle_ticks(Duration::ZERO), 1);
        assert_eq!(idle_writers::idle_ticks(Duration::from_millis(200)), 2);
        assert_eq!(idle_writers::idle_ticks(Duration::from_secs(2)), 3);
        assert_eq!(idle_writers::idle_ticks(Duration::MAX), u32::MAX);
    }
}
