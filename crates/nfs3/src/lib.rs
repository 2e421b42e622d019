//! NFSv3 (RFC 1813) and MOUNT v3 (RFC 1813 Appendix I) wire types and codecs.
//!
//! Sans-IO: nothing here touches a socket, a thread or a clock. Every type has a
//! [`Decode`](rnfs_xdr::Decode) and an [`Encode`](rnfs_xdr::Encode) impl, so the
//! server decodes arguments and encodes results with the same types the client
//! uses the other way round.
//!
//! - [`status`]: [`Nfsstat3`], [`Mountstat3`];
//! - [`types`]: handles ([`NfsFh3`] borrowed, [`FileHandle`] owned), attributes,
//!   `wcc_data`, `sattr3`, `diropargs3`, …;
//! - [`nfs`]: [`NfsProc3`] and every procedure's `XxxArgs` / `XxxRes`, plus
//!   [`NfsArgs`] / [`NfsRes`] to decode by procedure number;
//! - [`readdir`]: READDIR/READDIRPLUS results and the streaming
//!   [`ReaddirEncoder`] / [`ReaddirplusEncoder`];
//! - [`mount`]: the MOUNT v3 program.
//!
//! Limits on decode: handles ≤ 64 bytes ([`NFS3_FHSIZE`]), names ≤ 1024
//! ([`MAX_NAME_DECODE`], so the server itself answers `NFS3ERR_NAMETOOLONG` past
//! 255), paths ≤ 4096 ([`MAX_PATH_LEN`]), WRITE/READ data ≤ 1 MiB + 64 KiB
//! ([`MAX_WRITE_DATA`]), MOUNT paths ≤ 1024 and names ≤ 255. Linked lists
//! (directory entries, mount and export lists) carry no count, and each element
//! consumes input, so decoding allocates in proportion to the bytes received.
//! Every failure is a [`DecodeError`](rnfs_xdr::DecodeError) naming the XDR type.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[macro_use]
mod macros;

pub mod fuzzing;
pub mod mount;
pub mod nfs;
pub mod readdir;
pub mod status;
pub mod types;

pub use mount::{
    DumpRes, ExportNode, ExportRes, MntArgs, MountArgs, MountBody, MountProc3, MountRes, Mountres3,
    Mountres3Ok, UmntArgs, MAX_AUTH_FLAVORS, MNTNAMLEN, MNTPATHLEN, MOUNT_PROGRAM, MOUNT_V3,
};
pub use nfs::*;
pub use readdir::{
    dir_info_size, entry3_size, entryplus3_size, Entry3, Entryplus3, ReaddirEncoder, ReaddirRes,
    ReaddirResOk, ReaddirplusEncoder, ReaddirplusRes, ReaddirplusResOk,
};
pub use status::{Mountstat3, Nfsstat3};
pub use types::{
    CookieVerf3, CreateHow3, CreateVerf3, Devicedata3, DirOpArgs3, Fattr3, FileHandle, Ftype3,
    HandleTooLong, Mknoddata3, NfsFh3, Nfstime3, PostOpAttr, PostOpFh3, PreOpAttr, Sattr3, SetTime,
    Specdata3, StableHow, WccAttr, WccData, WriteVerf3, MAX_NAME_DECODE, MAX_PATH_LEN, NAME_MAX,
    NFS3_COOKIEVERFSIZE, NFS3_CREATEVERFSIZE, NFS3_FHSIZE, NFS3_WRITEVERFSIZE,
};
