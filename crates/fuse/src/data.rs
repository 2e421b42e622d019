//! The data path of one open regular file: an [`NfsFile`] (the client's
//! write-behind and read-ahead engine) shared by every open of the node, plus
//! what the mount needs to know about it.
//!
//! **Write-back errors** are kept as Linux's `errseq_t`: the `NfsFile`
//! hands a WRITE or COMMIT failure out once, to whichever call takes it, but
//! counts every failure when its reply arrives
//! (`NfsFile::write_back_failures`), and each open (FUSE file handle)
//! remembers the count it last reported. `fsync` reports a failure the open
//! has not seen and marks it seen; `flush` (every `close(2)` of a
//! descriptor, a forked child's exit included) and setattr report without
//! marking, so an error always reaches every open's fsync. The count moves
//! as the failure is resolved, not when some call takes its error, so an
//! open's fsync that returns after a failure always sees it, even while
//! another open's call is taking that error.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use rnfs_client::{NfsClient, NfsError, NfsFile};
use rnfs_nfs3::Fattr3;

/// What each open has seen of the file's write-back failures.
#[derive(Debug, Default)]
struct Errors {
    /// Per open (FUSE file handle): the failure count
    /// (`NfsFile::write_back_failures`) it last reported, or saw when opened.
    seen: HashMap<u64, u64>,
}

/// An open regular file.
#[derive(Debug)]
pub(crate) struct OpenFile {
    file: NfsFile,
    /// Bumped by every write.
    written: AtomicU64,
    /// The value of `written` the last completed fsync started from.
    synced: AtomicU64,
    /// In the mount's flush queue (`flusher.rs`).
    pub(crate) queued: AtomicBool,
    /// Write-back errors (see the module's doc).
    errors: Mutex<Errors>,
}

impl OpenFile {
    pub(crate) fn new(file: NfsFile) -> Self {
        Self {
            file,
            written: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            queued: AtomicBool::new(false),
            errors: Mutex::new(Errors::default()),
        }
    }

    fn errors(&self) -> MutexGuard<'_, Errors> {
        self.errors.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Open `fh` of the file begins: it reports only errors from now on.
    pub(crate) fn opened(&self, fh: u64) {
        // Lock order: `errors`, then the `NfsFile`'s state.
        let mut errors = self.errors();
        let (seq, _) = self.file.write_back_failures();
        errors.seen.insert(fh, seq);
    }

    /// Open `fh` of the file was released.
    pub(crate) fn released(&self, fh: u64) {
        self.errors().seen.remove(&fh);
    }

    /// The errno of a write-back error that open `fh` has not reported yet,
    /// if any; `advance` (fsync) marks it reported for `fh`, else (flush,
    /// setattr) it stays for `fh`'s next fsync.
    pub(crate) fn check_error(&self, fh: u64, advance: bool) -> Result<(), i32> {
        let mut errors = self.errors();
        let (seq, errno) = self.file.write_back_failures();
        let Some(seen) = errors.seen.get_mut(&fh) else {
            return Ok(());
        };
        if *seen == seq {
            return Ok(());
        }
        if advance {
            *seen = seq;
        }
        Err(errno)
    }

    /// Whether data was written since the last completed fsync: then the
    /// server's attributes may lag ours.
    pub(crate) fn is_dirty(&self) -> bool {
        self.written.load(Ordering::Acquire) != self.synced.load(Ordering::Acquire)
    }

    /// Reads until `buf` is full or the file ends (FUSE takes a short read for
    /// the end of the file). Returns the bytes read.
    pub(crate) fn read(&self, offset: u64, buf: &mut [u8]) -> Result<usize, NfsError> {
        let mut done = 0;
        while done < buf.len() {
            let n = self.file.read(offset + done as u64, &mut buf[done..])?;
            if n == 0 {
                break;
            }
            done += n;
        }
        Ok(done)
    }

    /// Writes all of `data` at `offset` (`NfsFile::write` takes all of it;
    /// may wait for the write-behind's flow control).
    pub(crate) fn write(&self, offset: u64, data: &[u8]) -> Result<usize, NfsError> {
        self.written.fetch_add(1, Ordering::AcqRel);
        self.file.write(offset, data)
    }

    /// Writes back and commits what was written more than the expiry ago
    /// (see `NfsFile::write_back_expired`); whether data is left.
    pub(crate) fn write_back_expired(&self) -> Result<bool, NfsError> {
        self.file.write_back_expired()
    }

    /// Whether the file holds data the server has not made stable.
    pub(crate) fn holds_data(&self) -> bool {
        self.file.held_bytes() > 0
    }

    /// Writes back everything and COMMITs it (close-to-open, fsync).
    pub(crate) fn fsync(&self) -> Result<(), NfsError> {
        let start = self.written.load(Ordering::Acquire);
        self.file.fsync()?;
        self.synced.store(start, Ordering::Release);
        Ok(())
    }

    /// Sends everything dirty and waits for it (before a SETATTR, whose
    /// times later WRITEs must not overwrite).
    pub(crate) fn flush(&self) -> Result<(), NfsError> {
        self.file.flush()
    }

    /// The attributes, after a bounded flush, with the size we know of
    /// (`NfsFile::getattr` counts the data it holds).
    pub(crate) fn getattr(&self) -> Result<Fattr3, NfsError> {
        self.file.getattr()
    }

    /// The attributes were changed by another call (SETATTR, LINK, RENAME,
    /// REMOVE): WRITE replies sent before no longer give them.
    pub(crate) fn attributes_changed(&self) {
        self.file.attributes_changed();
    }

    /// WRITEs and COMMITs go out as `nfs`'s credential from now on (an open
    /// for writing; see `NfsFile::write_as`).
    pub(crate) fn write_as(&self, nfs: &NfsClient) {
        self.file.write_as(nfs);
    }

    /// Sets the size, with the SETATTR sent by `nfs` (the caller's
    /// credential; see `NfsFile::truncate_as`).
    pub(crate) fn truncate_as(&self, nfs: &NfsClient, size: u64) -> Result<Fattr3, NfsError> {
        self.file.truncate_as(nfs, size)
    }

    /// The server's attributes, fetched by another call (an open's
    /// revalidation) sent at `sent_at` (`size_generation`), say the file is
    /// `size` bytes (see `NfsFile::set_server_size`).
    pub(crate) fn set_server_size(&self, sent_at: u64, size: u64) {
        self.file.set_server_size(sent_at, size);
    }

    /// Another client changed the file: drops what was read ahead (see
    /// `NfsFile::drop_read_ahead`).
    pub(crate) fn drop_read_ahead(&self) {
        self.file.drop_read_ahead();
    }

    /// See `NfsFile::size_generation`.
    pub(crate) fn size_generation(&self) -> u64 {
        self.file.size_generation()
    }

    /// `attr` with our size if we hold writes the server has not seen.
    pub(crate) fn patch(&self, attr: &mut Fattr3) {
        if self.is_dirty() {
            attr.size = attr.size.max(self.file.size());
        }
    }

    /// Last close: writes back, commits, and lets go.
    pub(crate) fn close(&self) -> Result<(), NfsError> {
        let start = self.written.load(Ordering::Acquire);
        self.file.close()?;
        self.synced.store(start, Ordering::Release);
        Ok(())
    }
}
