//! The data path of one open regular file: an [`NfsFile`] (the client's
//! write-behind and read-ahead engine) shared by every open of the node, plus
//! what the mount needs to know about it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rnfs_client::{NfsClient, NfsError, NfsFile};
use rnfs_nfs3::Fattr3;

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
}

impl OpenFile {
    pub(crate) fn new(file: NfsFile) -> Self {
        Self {
            file,
            written: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            queued: AtomicBool::new(false),
        }
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
