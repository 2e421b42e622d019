//! Moving file data: sequential readers and writers over a local file or an
//! [`NfsFile`] (read-ahead, write-behind, COMMIT at close).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::Arc;

use nix::errno::Errno;
use nix::unistd::{lseek, Whence};

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

    /// Moves past a hole at the read position, if the source can tell
    /// where its holes are (a local file: SEEK_DATA), to the next data or
    /// the end of the file; the new position. NFSv3 cannot tell: an NFS
    /// source stays where it is.
    fn skip_hole(&mut self, pos: u64) -> Result<u64, Error> {
        let Self::Local(f) = self else {
            return Ok(pos);
        };
        let Ok(at) = i64::try_from(pos) else {
            return Ok(pos);
        };
        match lseek(&*f, at, Whence::SeekData) {
            Ok(data) => Ok(u64::try_from(data).unwrap_or(pos).max(pos)),
            // No data after `pos`: a hole up to the end of the file.
            Err(Errno::ENXIO) => {
                let end = f.metadata()?.len().max(pos);
                f.seek(SeekFrom::Start(end))?;
                Ok(end)
            }
            // A file system without SEEK_DATA: read on.
            Err(Errno::EINVAL | Errno::EOPNOTSUPP) => Ok(pos),
            Err(e) => Err(Error::Errno(e as i32)),
        }
    }
}

/// Writes a file from its start.
#[derive(Debug)]
pub(crate) enum Writer {
    /// A local file (written at its file position).
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

    /// Leaves a hole of `len` bytes: the next data goes after it.
    fn skip(&mut self, len: u64) -> Result<(), Error> {
        match self {
            Self::Local(f) => {
                let len = i64::try_from(len).map_err(|_| Error::Errno(Errno::EFBIG as i32))?;
                f.seek(SeekFrom::Current(len))?;
            }
            Self::Nfs(_, offset) => *offset += len,
        }
        Ok(())
    }

    /// Sets the file's size to `len` (a hole at its end is made so).
    fn set_len(&mut self, len: u64) -> Result<(), Error> {
        match self {
            Self::Local(f) => f.set_len(len)?,
            Self::Nfs(file, _) => {
                file.truncate(len)?;
            }
        }
        Ok(())
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

/// The unit of holes made in a copy: an aligned block of zeros this long
/// (or the zeros of a block the end of the file cuts) is not written.
const HOLE_BLOCK: u64 = 4096;

/// Copies `reader` to `writer` (an empty file) through `buf`, calling
/// `progress` with each amount copied. With `holes` (a sparse source, as
/// GNU cp's `--sparse=auto` tells one), holes of a local source are skipped
/// without reading them, blocks of zeros are not written, and the size is
/// set at the end, so that the copy has holes where the source has (and
/// where it has blocks of zeros). Errors say which side failed.
pub(crate) fn pump(
    reader: &mut Reader,
    writer: &mut Writer,
    buf: &mut [u8],
    holes: bool,
    mut progress: impl FnMut(u64),
) -> Result<(), Side> {
    // The source's bytes consumed, and whether the copy ends in a hole.
    let mut pos = 0u64;
    let mut in_hole = false;
    loop {
        if holes {
            let data = reader.skip_hole(pos).map_err(Side::Read)?;
            if data > pos {
                writer.skip(data - pos).map_err(Side::Write)?;
                progress(data - pos);
                pos = data;
                in_hole = true;
            }
        }
        let n = reader.read(buf).map_err(Side::Read)?;
        if n == 0 {
            break;
        }
        let chunk = &buf[..n];
        if holes {
            in_hole = write_sparse(writer, pos, chunk, in_hole).map_err(Side::Write)?;
        } else {
            writer.write_all(chunk).map_err(Side::Write)?;
        }
        pos += n as u64;
        progress(n as u64);
    }
    if in_hole {
        writer.set_len(pos).map_err(Side::Write)?;
    }
    Ok(())
}

/// Writes `data`, which is at `pos` in the file, but for its aligned
/// blocks of zeros, which are skipped; runs of other blocks are written
/// whole. Whether the file then ends in a hole (`in_hole` if `data` is
/// empty).
fn write_sparse(writer: &mut Writer, pos: u64, data: &[u8], in_hole: bool) -> Result<bool, Error> {
    let mut in_hole = in_hole;
    // The start of the run of data blocks not yet written.
    let mut run = 0;
    let mut at = 0;
    while at < data.len() {
        let into = usize::try_from((pos + at as u64) % HOLE_BLOCK).unwrap_or(0);
        let block_len = (HOLE_BLOCK as usize - into).min(data.len() - at);
        let block = &data[at..at + block_len];
        if block.iter().all(|&b| b == 0) {
            if run < at {
                writer.write_all(&data[run..at])?;
            }
            writer.skip(block_len as u64)?;
            run = at + block_len;
            in_hole = true;
        } else {
            in_hole = false;
        }
        at += block_len;
    }
    if run < data.len() {
        writer.write_all(&data[run..])?;
    }
    Ok(in_hole)
}

/// Which end of a copy failed.
#[derive(Debug)]
pub(crate) enum Side {
    /// Reading the source.
    Read(Error),
    /// Writing the destination.
    Write(Error),
}
