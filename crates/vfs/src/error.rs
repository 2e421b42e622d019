//! [`FsError`]: what a backend operation can fail with, and the one place where
//! `errno` values become [`FsError`]s.

/// Result of a backend operation.
pub type FsResult<T> = Result<T, FsError>;

/// A backend failure. Each variant maps to exactly one `nfsstat3` (the mapping is
/// in the server).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum FsError {
    /// EPERM: not the owner, or an operation only root may do.
    #[error("operation not permitted")]
    Perm,
    /// ENOENT.
    #[error("no such file or directory")]
    NoEnt,
    /// EIO and anything without a better match.
    #[error("input/output error")]
    Io,
    /// ENXIO.
    #[error("no such device or address")]
    Nxio,
    /// EACCES.
    #[error("permission denied")]
    Access,
    /// EEXIST.
    #[error("file exists")]
    Exist,
    /// EXDEV.
    #[error("cross-device link")]
    XDev,
    /// ENOTDIR.
    #[error("not a directory")]
    NotDir,
    /// EISDIR.
    #[error("is a directory")]
    IsDir,
    /// EINVAL.
    #[error("invalid argument")]
    Inval,
    /// EFBIG.
    #[error("file too large")]
    FBig,
    /// ENOSPC.
    #[error("no space left on device")]
    NoSpc,
    /// EROFS.
    #[error("read-only file system")]
    RoFs,
    /// EMLINK.
    #[error("too many links")]
    MLink,
    /// ENAMETOOLONG.
    #[error("file name too long")]
    NameTooLong,
    /// ENOTEMPTY.
    #[error("directory not empty")]
    NotEmpty,
    /// EDQUOT.
    #[error("disk quota exceeded")]
    DQuot,
    /// The object behind a valid handle is gone.
    #[error("stale file handle")]
    Stale,
    /// Bytes that are not a handle of this backend.
    #[error("bad file handle")]
    BadHandle,
    /// A READDIR cookie or its verifier is no longer valid.
    #[error("bad readdir cookie")]
    BadCookie,
    /// The operation is not supported (EOPNOTSUPP).
    #[error("operation not supported")]
    NotSupp,
    /// The SETATTR ctime guard did not match.
    #[error("ctime guard mismatch")]
    NotSync,
    /// MKNOD of a type that is not a special file.
    #[error("bad object type")]
    BadType,
    /// A READDIR buffer too small for even one entry.
    #[error("buffer too small")]
    TooSmall,
    /// Temporarily unavailable; the client should retry (EAGAIN, EWOULDBLOCK).
    #[error("try again later")]
    Jukebox,
    /// A server-side fault that is not the caller's doing.
    #[error("server fault")]
    ServerFault,
}

impl FsError {
    /// The error for an `errno` value. Every errno a backend can see goes through
    /// here, so the mapping lives in one place.
    pub fn from_errno(errno: i32) -> Self {
        match errno {
            libc::EPERM => Self::Perm,
            libc::ENOENT => Self::NoEnt,
            libc::ENXIO | libc::ENODEV => Self::Nxio,
            libc::EACCES => Self::Access,
            libc::EEXIST => Self::Exist,
            libc::EXDEV => Self::XDev,
            libc::ENOTDIR => Self::NotDir,
            libc::EISDIR => Self::IsDir,
            libc::EINVAL => Self::Inval,
            libc::EFBIG | libc::EOVERFLOW => Self::FBig,
            libc::ENOSPC => Self::NoSpc,
            libc::EROFS => Self::RoFs,
            libc::EMLINK => Self::MLink,
            libc::ENAMETOOLONG => Self::NameTooLong,
            libc::ENOTEMPTY => Self::NotEmpty,
            libc::EDQUOT => Self::DQuot,
            libc::ESTALE => Self::Stale,
            // As knfsd: a descriptor that went bad is a file gone, which the
            // client recovers from by looking the name up again.
            libc::EBADF => Self::Stale,
            // Following a symlink where we asked not to: the path goes through a
            // link, which NFS calls "not a directory".
            libc::ELOOP => Self::NotDir,
            libc::EOPNOTSUPP | libc::ENOSYS => Self::NotSupp,
            // ENOMEM as knfsd: the client retries later instead of failing.
            libc::EAGAIN | libc::EINTR | libc::ENOMEM => Self::Jukebox,
            libc::EMFILE | libc::ENFILE => Self::ServerFault,
            _ => Self::Io,
        }
    }
}

impl From<std::io::Error> for FsError {
    fn from(e: std::io::Error) -> Self {
        e.raw_os_error().map_or(Self::Io, Self::from_errno)
    }
}

#[cfg(test)]
mod tests {
    use super::FsError;

    #[test]
    fn errnos_map_as_knfsd_maps_them() {
        for (errno, want) in [
            (libc::EBADF, FsError::Stale),
            (libc::ESTALE, FsError::Stale),
            (libc::ENOMEM, FsError::Jukebox),
            (libc::EAGAIN, FsError::Jukebox),
            (libc::ENOTEMPTY, FsError::NotEmpty),
            (libc::EXDEV, FsError::XDev),
            (libc::EDQUOT, FsError::DQuot),
            (libc::ENAMETOOLONG, FsError::NameTooLong),
            (libc::ELOOP, FsError::NotDir),
            (libc::EMFILE, FsError::ServerFault),
            (libc::EPROTO, FsError::Io),
        ] {
            assert_eq!(FsError::from_errno(errno), want, "errno {errno}");
        }
    }
}
