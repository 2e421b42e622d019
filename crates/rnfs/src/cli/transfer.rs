//! Moving file data: sequential readers and writers over a local file or an
//! [`NfsFile`] (read-ahead, write-behind, COMMIT at close).

use std::fs::File;
use std::io::{Read, Write};
use std::sync::Arc;

use rnfs_client::{DirtyBudget, IoConfig, NfsFile, Session};
use rnfs_nfs3::{Fattr3, FileHandle, Nfsstat3};

use super::remote::Error;

/// The chunk size to copy with between `session`s (or local files: 1 MiB).
pub(crate) fn chunk_size(src: Option<&Session>, dst: Option<&Session>) -> usize {
    let r = src.map_or(1 << 20, |s| s.rsize() as usize);
    let w = dst.map_or(1 << 20, |s| s.wsize() as usize);
    r.min(w).max(4096)
}

/// Opens `fh` (whose attributes are `attr`) for I/O with write-behind and
/// read-ahead, its unstable bytes counted against `budget`.
pub(crate) fn open_nfs(
    session: &Session,
    fh: FileHandle,
    attr: &Fattr3,
    budget: &Arc<DirtyBudget>,
) -> NfsFile {
    NfsFile::new(
        session.nfs().clone(),
        fh,
        attr,
        IoConfig::for_session(session),
        Arc::clone(budget),
    )
}

/// Reads a file from its start to its end.
#[derive(Debug)]
pub(crate) enum Reader {
    /// A local file.
    Local(File),
    /// An NFS file (with read-ahead) and the next offset.
    Nfs(Box<NfsFile>, u64),
}

impl Reader {
    /// The next bytes into `buf`; 0 at the end of the file.
    pub(crate) fn read(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        match self {
            Self::Local(f) => loop {
                match f.read(buf) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    r => return Ok(r?),
                }
            },
            Self::Nfs(file, offset) => {
                let n = file.read(*offset, buf)?;
                *offset += n as u64;
                Ok(n)
            }
        }
    }
}

/// Writes a file from its start.
#[derive(Debug)]
pub(crate) enum Writer {
    /// A local file.
    Local(File),
    /// An NFS file (with write-behind) and the next offset.
    Nfs(Box<NfsFile>, u64),
}

impl Writer {
    /// Appends `data`.
    pub(crate) fn write_all(&mut self, data: &[u8]) -> Result<(), Error> {
        match self {
            Self::Local(f) => Ok(f.write_all(data)?),
            Self::Nfs(file, offset) => {
                let mut done = 0;
                while done < data.len() {
                    let n = file.write(*offset, &data[done..])?;
                    if n == 0 {
                        return Err(Nfsstat3::Io.into());
                    }
                    done += n;
                    *offset += n as u64;
                }
                Ok(())
            }
        }
    }

    /// Makes everything written stable on the server (an NFS file's
    /// close: flush, COMMIT, and resend what a server restart lost) and
    /// closes the file. Local files are left to the page cache, as cp does,
    /// but their close is checked: on a network or FUSE file system it is
    /// where a failed write-back is told.
    pub(crate) fn finish(self) -> Result<(), Error> {
        match self {
            Self::Local(f) => nix::unistd::close(f).map_err(|e| Error::Errno(e as i32)),
            Self::Nfs(file, _) => Ok(file.close()?),
        }
    }

    /// Whether this writes a local file.
    pub(crate) fn is_local(&self) -> bool {
        matches!(self, Self::Local(_))
    }
}

/// Copies `reader` to `writer` through `buf`, calling `progress` with each
/// amount written. Errors say which side failed.
pub(crate) fn pump(
    reader: &mut Reader,
    writer: &mut Writer,
    buf: &mut [u8],
    mut progress: impl FnMut(u64),
) -> Result<(), Side> {
    loop {
        let n = reader.read(buf).map_err(Side::Read)?;
        if n == 0 {
            return Ok(());
        }
        writer.write_all(&buf[..n]).map_err(Side::Write)?;
        progress(n as u64);
    }
}

/// Which end of a copy failed.
#[derive(Debug)]
pub(crate) enum Side {
    /// Reading the source.
    Read(Error),
    /// Writing the destination.
    Write(Error),
}
