//! READDIR / READDIRPLUS over `getdents64`, with the cookie scheme of the module
//! docs: `.` and `..` first with tagged cookies, then the kernel's entries with
//! their own `d_off`.

use std::mem::MaybeUninit;
use std::os::fd::AsFd;

use rustix::fs::{self as rfs, AtFlags, OFlags, RawDir, SeekFrom};
use rustix::io::Errno;

use super::{errno, LocalFs, Node};
use crate::{BackendHandle, CookieVerifier, DirEntry, FsError, FsResult};

/// The cookie verifier: cookies are positions the file system keeps stable, so
/// there is nothing to verify (knfsd sends zeros for these file systems too).
pub(super) const VERIFIER: CookieVerifier = [0; 8];

/// Bit 63 marks the synthetic cookies; a file system's `d_off` is a
/// non-negative `loff_t` and never has it.
const TAG: u64 = 1 << 63;
/// The cookie of `.`: resume with `..`.
const AFTER_DOT: u64 = TAG | 1;
/// The cookie of `..`: resume with the first real entry.
const AFTER_DOTDOT: u64 = TAG | 2;

/// First `getdents64` buffer: about a hundred typical entries.
const FIRST_BUF: usize = 4 * 1024;
/// Largest `getdents64` buffer: about a thousand typical entries.
const MAX_BUF: usize = 32 * 1024;

impl LocalFs {
    /// Hands the entries of `dir` after `cookie` to `sink`. Returns `true` when
    /// the directory ended, `false` when the sink was full.
    pub(super) fn list(
        &self,
        dir_fh: &BackendHandle,
        dir: &Node,
        cookie: u64,
        plus: bool,
        sink: &mut dyn FnMut(DirEntry<'_>) -> bool,
    ) -> FsResult<bool> {
        let (dot, dotdot, position) = match cookie {
            0 => (true, true, 0),
            AFTER_DOT => (false, true, 0),
            AFTER_DOTDOT => (false, false, 0),
            c if c & TAG != 0 => return Err(FsError::BadCookie),
            c => (false, false, c),
        };
        if dot {
            let entry = DirEntry {
                fileid: dir.stat.st_ino,
                name: b".",
                cookie: AFTER_DOT,
                plus: plus.then(|| (*dir_fh, self.attr(&dir.stat))),
            };
            if !sink(entry) {
                return Ok(false);
            }
        }
        if dotdot {
            let (fileid, extra) = if plus {
                match self.parent_of(dir) {
                    Ok((fh, attr)) => (attr.fileid, Some((fh, attr))),
                    Err(_) => (dir.stat.st_ino, None),
                }
            } else if self.is_root(&dir.stat) {
                (dir.stat.st_ino, None)
            } else {
                let parent = rfs::statat(&dir.fd, "..", AtFlags::SYMLINK_NOFOLLOW);
                (parent.map_or(dir.stat.st_ino, |s| s.st_ino), None)
            };
            let entry = DirEntry {
                fileid,
                name: b"..",
                cookie: AFTER_DOTDOT,
                plus: extra,
            };
            if !sink(entry) {
                return Ok(false);
            }
        }

        // A fresh descriptor per call: no shared file position between threads,
        // and the kernel checks the caller's read permission on the directory.
        let fd = self
            .reopen(dir.fd.as_fd(), OFlags::RDONLY | OFlags::DIRECTORY)
            .map_err(errno)?;
        if position != 0 {
            rfs::seek(&fd, SeekFrom::Start(position)).map_err(|e| match e {
                Errno::INVAL => FsError::BadCookie,
                e => errno(e),
            })?;
        }
        // Small first: a sink often takes a hundred entries, and every entry
        // read beyond those is work thrown away. Doubles per refill.
        let mut buf = vec![MaybeUninit::<u8>::uninit(); MAX_BUF];
        let mut len = FIRST_BUF;
        'refill: loop {
            let mut entries = RawDir::new(fd.as_fd(), &mut buf[..len]);
            while let Some(entry) = entries.next() {
                let entry = entry.map_err(errno)?;
                let name = entry.file_name().to_bytes();
                if name != b"." && name != b".." {
                    let cookie = entry.next_entry_cookie();
                    if cookie == 0 || cookie & TAG != 0 {
                        // Not a file system whose positions we can hand out.
                        return Err(FsError::Io);
                    }
                    let extra = if plus {
                        self.open_child_path(fd.as_fd(), name)
                            .ok()
                            .and_then(|child| self.describe_path(child).ok())
                    } else {
                        None
                    };
                    let entry = DirEntry {
                        fileid: entry.ino(),
                        name,
                        cookie,
                        plus: extra,
                    };
                    if !sink(entry) {
                        return Ok(false);
                    }
                }
                if entries.is_buffer_empty() && len < MAX_BUF {
                    // The iterator resumes at the descriptor's position.
                    len *= 2;
                    continue 'refill;
                }
            }
            return Ok(true);
        }
    }
}
