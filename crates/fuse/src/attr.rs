//! NFS attributes as FUSE sees them, and the adaptive attribute cache entry.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fuser::{FileAttr, FileType};
use rnfs_nfs3::{Fattr3, Ftype3, Nfstime3};

use crate::options::CacheTimes;

/// The FUSE kind of an NFS file type.
pub(crate) fn kind(t: Ftype3) -> FileType {
    match t {
        Ftype3::Reg => FileType::RegularFile,
        Ftype3::Dir => FileType::Directory,
        Ftype3::Blk => FileType::BlockDevice,
        Ftype3::Chr => FileType::CharDevice,
        Ftype3::Lnk => FileType::Symlink,
        Ftype3::Sock => FileType::Socket,
        Ftype3::Fifo => FileType::NamedPipe,
    }
}

pub(crate) fn system_time(t: Nfstime3) -> SystemTime {
    UNIX_EPOCH + Duration::new(u64::from(t.seconds), t.nseconds.min(999_999_999))
}

/// `t` as an NFS time, if it fits (1970 to 2106).
pub(crate) fn nfs_time(t: SystemTime) -> Option<Nfstime3> {
    let d = t.duration_since(UNIX_EPOCH).ok()?;
    Some(Nfstime3 {
        seconds: u32::try_from(d.as_secs()).ok()?,
        nseconds: d.subsec_nanos(),
    })
}

/// Device numbers as the kernel's `new_encode_dev` packs them into FUSE's u32.
pub(crate) fn encode_dev(major: u32, minor: u32) -> u32 {
    (minor & 0xff) | ((major & 0xfff) << 8) | ((minor & !0xff) << 12)
}

/// The inverse of [`encode_dev`]: `(major, minor)`.
pub(crate) fn decode_dev(dev: u32) -> (u32, u32) {
    ((dev & 0xfff00) >> 8, (dev & 0xff) | ((dev >> 12) & 0xfff00))
}

/// `a` as a FUSE attribute of node `ino`, with `blksize` as the preferred I/O size.
pub(crate) fn to_fuse(ino: u64, a: &Fattr3, blksize: u32) -> FileAttr {
    FileAttr {
        ino,
        size: a.size,
        blocks: a.used.div_ceil(512),
        atime: system_time(a.atime),
        mtime: system_time(a.mtime),
        ctime: system_time(a.ctime),
        crtime: system_time(a.ctime),
        kind: kind(a.ftype),
        perm: (a.mode & 0o7777) as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: encode_dev(a.rdev.specdata1, a.rdev.specdata2),
        blksize,
        flags: 0,
    }
}

/// Whether the file's data may have changed between `old` and `new`.
pub(crate) fn data_changed(old: &Fattr3, new: &Fattr3) -> bool {
    old.mtime != new.mtime || old.size != new.size
}

/// One object's cached attributes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CachedAttr {
    pub(crate) attr: Fattr3,
    fetched: Instant,
    timeout: Duration,
}

impl CachedAttr {
    pub(crate) fn new(attr: Fattr3, now: Instant, times: &CacheTimes) -> Self {
        Self {
            attr,
            fetched: now,
            timeout: times.bounds(attr.ftype == Ftype3::Dir).0,
        }
    }

    /// Takes attributes fresh from the server. The timeout doubles when
    /// nothing changed since the last refresh and falls back to the minimum
    /// when something did (Linux's adaptive `attrtimeo`). `ours`: the change
    /// is one of our own modifications (also resets to the minimum).
    pub(crate) fn refresh(&mut self, attr: Fattr3, now: Instant, times: &CacheTimes, ours: bool) {
        let (min, max) = times.bounds(attr.ftype == Ftype3::Dir);
        let unchanged = attr.mtime == self.attr.mtime
            && attr.ctime == self.attr.ctime
            && attr.size == self.attr.size;
        self.timeout = if unchanged && !ours {
            (self.timeout * 2).clamp(min, max)
        } else {
            min
        };
        self.attr = attr;
        self.fetched = now;
    }

    /// How much longer the entry is valid (zero: expired).
    pub(crate) fn remaining(&self, now: Instant) -> Duration {
        (self.fetched + self.timeout).saturating_duration_since(now)
    }

    #[cfg(test)]
    pub(crate) fn is_fresh(&self, now: Instant) -> bool {
        !self.remaining(now).is_zero()
    }

    /// Forces the next use to ask the server.
    pub(crate) fn expire(&mut self) {
        self.timeout = Duration::ZERO;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A regular file's attributes: mode 0644, one link, size 0, times 0.
    pub(crate) fn regular_file(fileid: u64) -> Fattr3 {
        Fattr3 {
            ftype: Ftype3::Reg,
            mode: 0o644,
            nlink: 1,
            uid: 0,
            gid: 0,
            size: 0,
            used: 0,
            rdev: Default::default(),
            fsid: 1,
            fileid,
            atime: Nfstime3::default(),
            mtime: Nfstime3::default(),
            ctime: Nfstime3::default(),
        }
    }

    fn attr(mtime: u32) -> Fattr3 {
        let mut a = regular_file(7);
        a.mtime.seconds = mtime;
        a
    }

    #[test]
    fn timeout_grows_while_unchanged_and_resets_on_change() {
        let times = CacheTimes::default();
        let t0 = Instant::now();
        let mut c = CachedAttr::new(attr(1), t0, &times);
        assert_eq!(c.remaining(t0), Duration::from_secs(3));
        c.refresh(attr(1), t0, &times, false);
        assert_eq!(c.remaining(t0), Duration::from_secs(6));
        for _ in 0..10 {
            c.refresh(attr(1), t0, &times, false);
        }
        assert_eq!(c.remaining(t0), Duration::from_secs(60));
        c.refresh(attr(2), t0, &times, false);
        assert_eq!(c.remaining(t0), Duration::from_secs(3));
        c.refresh(attr(2), t0, &times, true);
        assert_eq!(c.remaining(t0), Duration::from_secs(3));
        assert!(!c.is_fresh(t0 + Duration::from_secs(3)));
        c.expire();
        assert!(!c.is_fresh(t0));
        let none = CacheTimes::none();
        assert!(!CachedAttr::new(attr(1), t0, &none).is_fresh(t0));
    }

    #[test]
    fn device_numbers_round_trip() {
        for (ma, mi) in [(0, 0), (1, 3), (8, 17), (259, 70000)] {
            assert_eq!(decode_dev(encode_dev(ma, mi)), (ma, mi));
        }
        assert_eq!(
            to_fuse(5, &attr(3), 4096).mtime,
            UNIX_EPOCH + Duration::from_secs(3)
        );
        assert_eq!(
            nfs_time(UNIX_EPOCH + Duration::new(5, 6)).map(|t| t.nseconds),
            Some(6)
        );
    }
}
