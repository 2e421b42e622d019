//! Changes to the namespace and to attributes reach stable storage before
//! the reply (exports(5) `sync`, the default).
//!
//! RFC 1813 §1.6 lists CREATE, MKDIR, SYMLINK, MKNOD, REMOVE, RMDIR, RENAME
//! and LINK among the synchronous procedures: once one answers, the client
//! may assume its change survives a server crash, and never sends it again.
//! knfsd commits the inodes a call changed (`commit_metadata`) before it
//! answers, SETATTR's too, unless the export is `async`, which exports(5)
//! calls a violation of the protocol. Here the same: the directory whose entries a
//! call changed is `fsync`ed, and so is the object whose attributes it set,
//! when it is a regular file or a directory (a new file's mode and times,
//! a truncation, a chmod). A symlink's or device node's own attributes have
//! no descriptor to `fsync`: they go with the next commit of the file
//! system's journal (on ext4 with a journal and on xfs their creation is
//! in the same transaction as their directory entry, which is committed).
//!
//! SETATTR of a regular file `fsync`s the whole file, its uncommitted
//! UNSTABLE data too: userspace has no call that writes an inode alone
//! (knfsd's `sync_inode_metadata`). That data is what the client's COMMIT
//! would write anyway, and the Linux client commits a file's writes before
//! it sends a SETATTR for it, so the flush finds nothing left there.
//!
//! Cost: one `fsync` of the directory per change, two for a CREATE or a
//! MKDIR (the new object, then its directory), and an `open` for a
//! directory whose descriptor is `O_PATH`. On a journalling file system
//! concurrent `fsync`s share journal commits, so the throughput of many
//! clients creating files falls less than one client's latency rises.
//! `sync = false` in the export's configuration (`rnfs serve --async`)
//! answers first, as knfsd's `async`: a crash may then lose changes that
//! clients were told are done.

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::Ordering;

use rustix::fs::{self as rfs, FileType as RawType, OFlags};
use rustix::io::Errno;

use super::wb_errors::{self, FileKey};
use super::{errno, LocalFs};
use crate::FsResult;

impl LocalFs {
    /// Commits the object `fd` refers to (of type `kind`), whose entries or
    /// attributes a call changed, before the call answers; nothing on an
    /// export served `async`. An `O_PATH` descriptor (the handle cache's)
    /// is opened again for reading, as root: the descriptor only syncs, so
    /// the caller need not be able to read what it may change.
    pub(super) fn commit_metadata(&self, fd: BorrowedFd<'_>, kind: RawType) -> FsResult<()> {
        if !self.sync_metadata {
            return Ok(());
        }
        // A regular file's `fsync` writes its UNSTABLE data too, and may see
        // a write-back error that its COMMIT then cannot: it moves the
        // verifier, holding the file's stripe (`wb_errors.rs`).
        let _syncing = if kind == RawType::RegularFile {
            let stat = rfs::fstat(fd).map_err(errno)?;
            Some(wb_errors::syncing(FileKey::of(&stat)))
        } else {
            None
        };
        match self.fsync_any(fd, kind) {
            Ok(true) => {
                // `Relaxed`: a statistic; it orders nothing.
                self.metadata_syncs.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Ok(false) => Ok(()),
            Err(e) => Err(errno(e)),
        }
    }

    /// `fsync`s `fd`, an object of type `kind`: `Ok(false)` for an `O_PATH`
    /// descriptor of an object that has none to sync. A regular file's
    /// failed `fsync` moves the write verifier, as a failed COMMIT's.
    fn fsync_any(&self, fd: BorrowedFd<'_>, kind: RawType) -> Result<bool, Errno> {
        let failed = |e: Errno| {
            if kind == RawType::RegularFile {
                self.write_failed(e);
            }
            e
        };
        match rfs::fsync(fd) {
            // `O_PATH`: reopen. Only a directory or a regular file can be
            // opened without side effects (a device's driver sees opens).
            Err(Errno::BADF) if matches!(kind, RawType::Directory | RawType::RegularFile) => {
                let flags = if kind == RawType::Directory {
                    OFlags::RDONLY | OFlags::DIRECTORY
                } else {
                    OFlags::RDONLY | OFlags::NOCTTY
                };
                let opened = crate::identity::as_fs_root(|| self.reopen(fd, flags))?;
                rfs::fsync(opened.as_fd()).map_err(failed)?;
                Ok(true)
            }
            Ok(()) => Ok(true),
            Err(Errno::BADF) => Ok(false),
            Err(e) => Err(failed(e)),
        }
    }

    /// How many `fsync`s the backend made to commit metadata changes
    /// since the backend opened: none when it serves `async`.
    pub fn metadata_syncs(&self) -> u64 {
        // `Relaxed`: a statistic.
        self.metadata_syncs.load(Ordering::Relaxed)
    }
}
