//! Status codes: `nfsstat3` (RFC 1813 §2.6) and `mountstat3` (Appendix I, §5.1.5).

wire_enum! {
    /// `nfsstat3` (RFC 1813 §2.6): the first word of every NFSv3 result.
    ///
    /// The set is closed by the RFC, so the enum is exhaustive; an unknown value
    /// decodes as [`DecodeError::BadDiscriminant`](rnfs_xdr::DecodeError).
    pub enum Nfsstat3 : "nfsstat3" {
        /// `NFS3_OK`: success.
        Ok = 0,
        /// `NFS3ERR_PERM`: not owner.
        Perm = 1,
        /// `NFS3ERR_NOENT`: no such file or directory.
        Noent = 2,
        /// `NFS3ERR_IO`: hard I/O error.
        Io = 5,
        /// `NFS3ERR_NXIO`: no such device or address.
        Nxio = 6,
        /// `NFS3ERR_ACCES`: permission denied.
        Acces = 13,
        /// `NFS3ERR_EXIST`: file exists.
        Exist = 17,
        /// `NFS3ERR_XDEV`: cross-device hard link.
        Xdev = 18,
        /// `NFS3ERR_NODEV`: no such device.
        Nodev = 19,
        /// `NFS3ERR_NOTDIR`: not a directory.
        Notdir = 20,
        /// `NFS3ERR_ISDIR`: is a directory.
        Isdir = 21,
        /// `NFS3ERR_INVAL`: invalid argument.
        Inval = 22,
        /// `NFS3ERR_FBIG`: file too large.
        Fbig = 27,
        /// `NFS3ERR_NOSPC`: no space left on device.
        Nospc = 28,
        /// `NFS3ERR_ROFS`: read-only file system.
        Rofs = 30,
        /// `NFS3ERR_MLINK`: too many hard links.
        Mlink = 31,
        /// `NFS3ERR_NAMETOOLONG`: file name too long.
        Nametoolong = 63,
        /// `NFS3ERR_NOTEMPTY`: directory not empty.
        Notempty = 66,
        /// `NFS3ERR_DQUOT`: quota exceeded.
        Dquot = 69,
        /// `NFS3ERR_STALE`: stale file handle.
        Stale = 70,
        /// `NFS3ERR_REMOTE`: too many levels of remote in path.
        Remote = 71,
        /// `NFS3ERR_BADHANDLE`: illegal file handle.
        Badhandle = 10001,
        /// `NFS3ERR_NOT_SYNC`: SETATTR guard mismatch.
        NotSync = 10002,
        /// `NFS3ERR_BAD_COOKIE`: READDIR cookie is stale.
        BadCookie = 10003,
        /// `NFS3ERR_NOTSUPP`: operation not supported.
        Notsupp = 10004,
        /// `NFS3ERR_TOOSMALL`: buffer or request too small.
        Toosmall = 10005,
        /// `NFS3ERR_SERVERFAULT`: server error with no better mapping.
        Serverfault = 10006,
        /// `NFS3ERR_BADTYPE`: type not supported by the server.
        Badtype = 10007,
        /// `NFS3ERR_JUKEBOX`: retry later (e.g. the file is being recalled).
        Jukebox = 10008,
    }
}

impl Nfsstat3 {
    /// Whether this is `NFS3_OK`.
    #[inline]
    pub fn is_ok(self) -> bool {
        self == Self::Ok
    }
}

/// The status sent for a result's failure arm: `Ok` there is a producer bug and
/// would make the reply undecodable, so it goes out as `NFS3ERR_SERVERFAULT`.
pub(crate) fn fail_status(status: Nfsstat3) -> Nfsstat3 {
    if status == Nfsstat3::Ok {
        Nfsstat3::Serverfault
    } else {
        status
    }
}

wire_enum! {
    /// `mountstat3` (RFC 1813 Appendix I, §5.1.5): the status of MNT.
    pub enum Mountstat3 : "mountstat3" {
        /// `MNT3_OK`: no error.
        Ok = 0,
        /// `MNT3ERR_PERM`: not owner.
        Perm = 1,
        /// `MNT3ERR_NOENT`: no such file or directory.
        Noent = 2,
        /// `MNT3ERR_IO`: I/O error.
        Io = 5,
        /// `MNT3ERR_ACCES`: permission denied.
        Acces = 13,
        /// `MNT3ERR_NOTDIR`: not a directory.
        Notdir = 20,
        /// `MNT3ERR_INVAL`: invalid argument.
        Inval = 22,
        /// `MNT3ERR_NAMETOOLONG`: file name too long.
        Nametoolong = 63,
        /// `MNT3ERR_NOTSUPP`: operation not supported.
        Notsupp = 10004,
        /// `MNT3ERR_SERVERFAULT`: a failure on the server.
        Serverfault = 10006,
    }
}
