//! Conversions between backend types ([`rnfs_vfs`]) and wire types
//! ([`rnfs_nfs3`]), each in exactly one place: notably [`status`], the only mapping
//! from [`FsError`] to `nfsstat3`.

use rnfs_nfs3::{
    CreateHow3, Fattr3, Ftype3, Nfsstat3, Nfstime3, Sattr3, SetTime as WireSetTime, Specdata3,
    StableHow, WccAttr as WireWccAttr, WccData,
};
use rnfs_vfs::{
    Attr, CreateHow, FileType, FsError, SetAttr, SetTime, Stability, Time, Wcc, WccAttr,
};

/// The `nfsstat3` for a backend error.
pub(crate) fn status(e: FsError) -> Nfsstat3 {
    match e {
        FsError::Perm => Nfsstat3::Perm,
        FsError::NoEnt => Nfsstat3::Noent,
        FsError::Io => Nfsstat3::Io,
        FsError::Nxio => Nfsstat3::Nxio,
        FsError::Access => Nfsstat3::Acces,
        FsError::Exist => Nfsstat3::Exist,
        FsError::XDev => Nfsstat3::Xdev,
        FsError::NotDir => Nfsstat3::Notdir,
        FsError::IsDir => Nfsstat3::Isdir,
        FsError::Inval => Nfsstat3::Inval,
        FsError::FBig => Nfsstat3::Fbig,
        FsError::NoSpc => Nfsstat3::Nospc,
        FsError::RoFs => Nfsstat3::Rofs,
        FsError::MLink => Nfsstat3::Mlink,
        FsError::NameTooLong => Nfsstat3::Nametoolong,
        FsError::NotEmpty => Nfsstat3::Notempty,
        FsError::DQuot => Nfsstat3::Dquot,
        FsError::Stale => Nfsstat3::Stale,
        FsError::BadHandle => Nfsstat3::Badhandle,
        FsError::BadCookie => Nfsstat3::BadCookie,
        FsError::NotSupp => Nfsstat3::Notsupp,
        FsError::NotSync => Nfsstat3::NotSync,
        FsError::BadType => Nfsstat3::Badtype,
        FsError::TooSmall => Nfsstat3::Toosmall,
        FsError::Jukebox => Nfsstat3::Jukebox,
        // `FsError` is non-exhaustive: anything new is a server fault until mapped.
        _ => Nfsstat3::Serverfault,
    }
}

/// NFSv3 times are unsigned 32-bit seconds: dates before 1970 become 0 and dates
/// after 2106 saturate.
pub(crate) fn time(t: Time) -> Nfstime3 {
    Nfstime3 {
        seconds: u32::try_from(t.secs.max(0)).unwrap_or(u32::MAX),
        nseconds: t.nsecs.min(999_999_999),
    }
}

fn from_wire_time(t: Nfstime3) -> Time {
    Time {
        secs: i64::from(t.seconds),
        nsecs: t.nseconds.min(999_999_999),
    }
}

pub(crate) fn ftype(t: FileType) -> Ftype3 {
    match t {
        FileType::Regular => Ftype3::Reg,
        FileType::Directory => Ftype3::Dir,
        FileType::BlockDevice => Ftype3::Blk,
        FileType::CharDevice => Ftype3::Chr,
        FileType::Symlink => Ftype3::Lnk,
        FileType::Socket => Ftype3::Sock,
        FileType::Fifo => Ftype3::Fifo,
    }
}

pub(crate) fn fattr(a: &Attr) -> Fattr3 {
    Fattr3 {
        ftype: ftype(a.ftype),
        mode: a.mode & 0o7777,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        size: a.size,
        used: a.used,
        rdev: Specdata3 {
            specdata1: a.rdev.0,
            specdata2: a.rdev.1,
        },
        fsid: a.fsid,
        fileid: a.fileid,
        atime: time(a.atime),
        mtime: time(a.mtime),
        ctime: time(a.ctime),
    }
}

pub(crate) fn post_op(a: Option<&Attr>) -> Option<Fattr3> {
    a.map(fattr)
}

fn wcc_attr(a: &WccAttr) -> WireWccAttr {
    WireWccAttr {
        size: a.size,
        mtime: time(a.mtime),
        ctime: time(a.ctime),
    }
}

pub(crate) fn wcc(w: &Wcc) -> WccData {
    WccData {
        before: w.before.as_ref().map(wcc_attr),
        after: w.after.as_ref().map(fattr),
    }
}

fn set_time(t: WireSetTime) -> SetTime {
    match t {
        WireSetTime::DontChange => SetTime::DontChange,
        WireSetTime::SetToServerTime => SetTime::ServerTime,
        WireSetTime::SetToClientTime(t) => SetTime::ClientTime(from_wire_time(t)),
    }
}

pub(crate) fn sattr(s: &Sattr3) -> SetAttr {
    SetAttr {
        mode: s.mode.map(|m| m & 0o7777),
        uid: s.uid,
        gid: s.gid,
        size: s.size,
        atime: set_time(s.atime),
        mtime: set_time(s.mtime),
    }
}

pub(crate) fn guard_time(t: Nfstime3) -> Time {
    from_wire_time(t)
}

pub(crate) fn create_how(h: &CreateHow3) -> CreateHow {
    match h {
        CreateHow3::Unchecked(s) => CreateHow::Unchecked(sattr(s)),
        CreateHow3::Guarded(s) => CreateHow::Guarded(sattr(s)),
        CreateHow3::Exclusive(v) => CreateHow::Exclusive(*v),
    }
}

pub(crate) fn stability(s: StableHow) -> Stability {
    match s {
        StableHow::Unstable => Stability::Unstable,
        StableHow::DataSync => Stability::DataSync,
        StableHow::FileSync => Stability::FileSync,
    }
}

pub(crate) fn stable_how(s: Stability) -> StableHow {
    match s {
        Stability::Unstable => StableHow::Unstable,
        Stability::DataSync => StableHow::DataSync,
        Stability::FileSync => StableHow::FileSync,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_saturate_instead_of_wrapping() {
        assert_eq!(time(Time { secs: -5, nsecs: 7 }).seconds, 0);
        assert_eq!(
            time(Time {
                secs: i64::MAX,
                nsecs: 0
            })
            .seconds,
            u32::MAX
        );
        assert_eq!(
            time(Time {
                secs: 10,
                nsecs: 2_000_000_000
            })
            .nseconds,
            999_999_999
        );
    }

    #[test]
    fn every_backend_error_has_its_own_status() {
        let all = [
            FsError::Perm,
            FsError::NoEnt,
            FsError::Io,
            FsError::Nxio,
            FsError::Access,
            FsError::Exist,
            FsError::XDev,
            FsError::NotDir,
            FsError::IsDir,
            FsError::Inval,
            FsError::FBig,
            FsError::NoSpc,
            FsError::RoFs,
            FsError::MLink,
            FsError::NameTooLong,
            FsError::NotEmpty,
            FsError::DQuot,
            FsError::Stale,
            FsError::BadHandle,
            FsError::BadCookie,
            FsError::NotSupp,
            FsError::NotSync,
            FsError::BadType,
            FsError::TooSmall,
            FsError::Jukebox,
            FsError::ServerFault,
        ];
        let statuses: std::collections::HashSet<_> = all.iter().map(|&e| status(e)).collect();
        assert_eq!(statuses.len(), all.len());
        assert!(!statuses.contains(&Nfsstat3::Ok));
    }
}
