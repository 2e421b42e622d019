//! The client's errors: [`ClientError`] for the transport and RPC layers,
//! [`NfsError`] adds the NFS status, and both map once to an errno.

use std::io;

use rnfs_nfs3::{Mountstat3, Nfsstat3};
use rnfs_rpc::ReplyStatus;

/// Why an RPC call failed below the NFS layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// Connecting or talking to the server failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// No reply came within the timeout, after every retransmission.
    #[error("server not responding (timed out)")]
    TimedOut,
    /// The connection was lost and could not be re-established.
    #[error("connection to the server lost: {0}")]
    Disconnected(String),
    /// The reply could not be decoded (truncated, garbage or the wrong shape).
    #[error("malformed reply from server: {0}")]
    BadReply(String),
    /// The server rejected the call at the RPC level.
    #[error("server refused the call: {0:?}")]
    Rpc(ReplyStatus),
    /// The client was shut down while the call was waiting.
    #[error("client shut down")]
    Shutdown,
}

impl ClientError {
    /// The errno a POSIX caller sees for this error.
    pub fn errno(&self) -> i32 {
        match self {
            Self::Io(e) => e.raw_os_error().unwrap_or(libc::EIO),
            Self::TimedOut => libc::ETIMEDOUT,
            Self::Disconnected(_) => libc::ECONNRESET,
            Self::BadReply(_) => libc::EPROTO,
            Self::Rpc(ReplyStatus::AuthError(_)) => libc::EACCES,
            Self::Rpc(_) => libc::EPROTONOSUPPORT,
            Self::Shutdown => libc::ESHUTDOWN,
        }
    }
}

/// Why an NFS or MOUNT operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NfsError {
    /// The server answered with an error status.
    #[error("{}", nfsstat_message(*.0))]
    Status(Nfsstat3),
    /// MNT failed.
    #[error("mount failed: {}", mountstat_message(*.0))]
    Mount(Mountstat3),
    /// The call itself failed.
    #[error(transparent)]
    Client(#[from] ClientError),
}

impl NfsError {
    /// The errno a POSIX caller sees for this error (as the Linux client maps it).
    pub fn errno(&self) -> i32 {
        match self {
            Self::Status(s) => nfsstat_errno(*s),
            Self::Mount(m) => match m {
                Mountstat3::Perm => libc::EPERM,
                Mountstat3::Noent => libc::ENOENT,
                Mountstat3::Acces => libc::EACCES,
                Mountstat3::Notdir => libc::ENOTDIR,
                Mountstat3::Inval => libc::EINVAL,
                Mountstat3::Nametoolong => libc::ENAMETOOLONG,
                Mountstat3::Notsupp => libc::EOPNOTSUPP,
                _ => libc::EIO,
            },
            Self::Client(c) => c.errno(),
        }
    }

    /// The NFS status, when the server sent one.
    pub fn status(&self) -> Option<Nfsstat3> {
        match self {
            Self::Status(s) => Some(*s),
            _ => None,
        }
    }

    /// This error as an [`io::Error`] with the matching errno.
    pub fn to_io(&self) -> io::Error {
        io::Error::from_raw_os_error(self.errno())
    }
}

impl From<NfsError> for io::Error {
    fn from(e: NfsError) -> Self {
        match e {
            NfsError::Client(ClientError::Io(io)) => io,
            other => io::Error::from_raw_os_error(other.errno()),
        }
    }
}

/// The errno for an NFS status (`nfs3_stat_to_errno` in Linux).
pub fn nfsstat_errno(s: Nfsstat3) -> i32 {
    match s {
        Nfsstat3::Ok => 0,
        Nfsstat3::Perm => libc::EPERM,
        Nfsstat3::Noent => libc::ENOENT,
        Nfsstat3::Io => libc::EIO,
        Nfsstat3::Nxio => libc::ENXIO,
        Nfsstat3::Acces => libc::EACCES,
        Nfsstat3::Exist => libc::EEXIST,
        Nfsstat3::Xdev => libc::EXDEV,
        Nfsstat3::Nodev => libc::ENODEV,
        Nfsstat3::Notdir => libc::ENOTDIR,
        Nfsstat3::Isdir => libc::EISDIR,
        Nfsstat3::Inval => libc::EINVAL,
        Nfsstat3::Fbig => libc::EFBIG,
        Nfsstat3::Nospc => libc::ENOSPC,
        Nfsstat3::Rofs => libc::EROFS,
        Nfsstat3::Mlink => libc::EMLINK,
        Nfsstat3::Nametoolong => libc::ENAMETOOLONG,
        Nfsstat3::Notempty => libc::ENOTEMPTY,
        Nfsstat3::Dquot => libc::EDQUOT,
        Nfsstat3::Stale => libc::ESTALE,
        Nfsstat3::Remote => libc::EREMOTE,
        // Linux's EBADHANDLE, ETOOSMALL, EBADCOOKIE and EBADTYPE are kernel-internal.
        Nfsstat3::Badhandle => libc::ESTALE,
        Nfsstat3::NotSync => libc::EIO,
        Nfsstat3::BadCookie => libc::EIO,
        Nfsstat3::Notsupp => libc::EOPNOTSUPP,
        Nfsstat3::Toosmall => libc::EINVAL,
        Nfsstat3::Serverfault => libc::EREMOTEIO,
        Nfsstat3::Badtype => libc::EOPNOTSUPP,
        // Only a soft client sees it, once the server said "later" until its
        // time limit ran out: a timeout, as the soft limit's other failures.
        // Never EAGAIN, which tells a blocking caller that nothing happened,
        // when a WRITE given up on here may have carried its data.
        Nfsstat3::Jukebox => libc::ETIMEDOUT,
    }
}

fn nfsstat_message(s: Nfsstat3) -> String {
    io::Error::from_raw_os_error(nfsstat_errno(s)).to_string()
}

fn mountstat_message(m: Mountstat3) -> String {
    format!("{m:?}")
}
