//! The NFSv3 program (RFC 1813 §3): procedure numbers and every procedure's
//! arguments (`XXX3args`) and results (`XXX3res`).
//!
//! Arguments borrow from the call record (handles, names, symlink and write data);
//! results borrow only where data is large (READ data, READLINK path, READDIR
//! names) and hold returned handles as owned, inline [`FileHandle`]s. Every type
//! decodes (server: args; client: results) and encodes (client: args; server:
//! results). READDIR and READDIRPLUS results live in [`crate::readdir`], which
//! also streams them.

use rnfs_xdr::{Decode, DecodeError, Encode, Reader, Writer};

use crate::readdir::{ReaddirRes, ReaddirplusRes};
use crate::types::nfspath3;
use crate::{
    CookieVerf3, CreateHow3, DirOpArgs3, Fattr3, FileHandle, Mknoddata3, NfsFh3, Nfstime3,
    PostOpAttr, PostOpFh3, Sattr3, StableHow, WccData, WriteVerf3,
};

/// The NFS program number.
pub const NFS_PROGRAM: u32 = 100_003;
/// The NFS protocol version these types describe.
pub const NFS_V3: u32 = 3;

/// The largest WRITE (and READ result) payload the decoders accept: 1 MiB, Linux's
/// largest `rsize`/`wsize`, plus 64 KiB of slack. The server enforces its own,
/// smaller `wtmax`.
pub const MAX_WRITE_DATA: u32 = 1024 * 1024 + 64 * 1024;
/// The largest READ result payload the decoders accept (same as WRITE).
pub const MAX_READ_DATA: u32 = MAX_WRITE_DATA;

/// ACCESS bit `ACCESS3_READ` (RFC 1813 §3.3.4): read data or list a directory.
pub const ACCESS3_READ: u32 = 0x0001;
/// ACCESS bit `ACCESS3_LOOKUP`: look up a name in a directory.
pub const ACCESS3_LOOKUP: u32 = 0x0002;
/// ACCESS bit `ACCESS3_MODIFY`: rewrite data or modify a directory entry.
pub const ACCESS3_MODIFY: u32 = 0x0004;
/// ACCESS bit `ACCESS3_EXTEND`: write beyond the end or add a directory entry.
pub const ACCESS3_EXTEND: u32 = 0x0008;
/// ACCESS bit `ACCESS3_DELETE`: delete a directory entry.
pub const ACCESS3_DELETE: u32 = 0x0010;
/// ACCESS bit `ACCESS3_EXECUTE`: execute a file (no meaning for directories).
pub const ACCESS3_EXECUTE: u32 = 0x0020;

/// FSINFO property `FSF3_LINK` (RFC 1813 §3.3.19): hard links are supported.
pub const FSF3_LINK: u32 = 0x0001;
/// FSINFO property `FSF3_SYMLINK`: symbolic links are supported.
pub const FSF3_SYMLINK: u32 = 0x0002;
/// FSINFO property `FSF3_HOMOGENEOUS`: PATHCONF is the same for every file.
pub const FSF3_HOMOGENEOUS: u32 = 0x0008;
/// FSINFO property `FSF3_CANSETTIME`: SETATTR can set times.
pub const FSF3_CANSETTIME: u32 = 0x0010;

wire_enum! {
    /// The NFSv3 procedures (RFC 1813 §3.3), by number. `TryFrom<u32>` fails for
    /// numbers outside 0..=21 (the server answers PROC_UNAVAIL).
    pub enum NfsProc3 : "nfsproc3" {
        /// 0: do nothing (§3.3.0).
        Null = 0,
        /// 1: get file attributes (§3.3.1).
        Getattr = 1,
        /// 2: set file attributes (§3.3.2).
        Setattr = 2,
        /// 3: look up a file name (§3.3.3).
        Lookup = 3,
        /// 4: check access permission (§3.3.4).
        Access = 4,
        /// 5: read from a symbolic link (§3.3.5).
        Readlink = 5,
        /// 6: read from a file (§3.3.6).
        Read = 6,
        /// 7: write to a file (§3.3.7).
        Write = 7,
        /// 8: create a file (§3.3.8).
        Create = 8,
        /// 9: create a directory (§3.3.9).
        Mkdir = 9,
        /// 10: create a symbolic link (§3.3.10).
        Symlink = 10,
        /// 11: create a special device (§3.3.11).
        Mknod = 11,
        /// 12: remove a file (§3.3.12).
        Remove = 12,
        /// 13: remove a directory (§3.3.13).
        Rmdir = 13,
        /// 14: rename a file or directory (§3.3.14).
        Rename = 14,
        /// 15: create a hard link (§3.3.15).
        Link = 15,
        /// 16: read from a directory (§3.3.16).
        Readdir = 16,
        /// 17: extended read from a directory (§3.3.17).
        Readdirplus = 17,
        /// 18: get dynamic file system information (§3.3.18).
        Fsstat = 18,
        /// 19: get static file system information (§3.3.19).
        Fsinfo = 19,
        /// 20: retrieve POSIX information (§3.3.20).
        Pathconf = 20,
        /// 21: commit cached data to stable storage (§3.3.21).
        Commit = 21,
    }
}

impl NfsProc3 {
    /// Whether a retransmission may simply be executed again. False exactly for
    /// the procedures Linux knfsd keeps in its duplicate reply cache: SETATTR,
    /// WRITE, CREATE, MKDIR, SYMLINK, MKNOD, REMOVE, RMDIR, RENAME and LINK.
    pub fn is_idempotent(self) -> bool {
        !matches!(
            self,
            Self::Setattr
                | Self::Write
                | Self::Create
                | Self::Mkdir
                | Self::Symlink
                | Self::Mknod
                | Self::Remove
                | Self::Rmdir
                | Self::Rename
                | Self::Link
        )
    }

    /// The RFC's name, e.g. `"READDIRPLUS"`, for logs.
    pub fn name(self) -> &'static str {
        NFS3_PROC_NAMES[self as usize]
    }
}

/// The RFC names of the NFSv3 procedures, indexed by procedure number.
pub const NFS3_PROC_NAMES: [&str; 22] = [
    "NULL",
    "GETATTR",
    "SETATTR",
    "LOOKUP",
    "ACCESS",
    "READLINK",
    "READ",
    "WRITE",
    "CREATE",
    "MKDIR",
    "SYMLINK",
    "MKNOD",
    "REMOVE",
    "RMDIR",
    "RENAME",
    "LINK",
    "READDIR",
    "READDIRPLUS",
    "FSSTAT",
    "FSINFO",
    "PATHCONF",
    "COMMIT",
];

/// Codec for WRITE's and READ's `opaque data<>`, bounded by [`MAX_WRITE_DATA`].
mod data {
    use rnfs_xdr::{DecodeError, Reader, Writer};

    pub(super) fn decode<'a>(r: &mut Reader<'a>) -> Result<&'a [u8], DecodeError> {
        r.read_opaque(super::MAX_WRITE_DATA)
    }

    pub(super) fn encode(data: &[u8], w: &mut Writer<'_>) {
        w.write_opaque(data);
    }
}

// ---------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------

xdr_struct! {
    /// `GETATTR3args` (RFC 1813 §3.3.1).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct GetattrArgs<'a> : "GETATTR3args" {
        /// The object.
        pub object: NfsFh3<'a>,
    }
}

xdr_struct! {
    /// `SETATTR3args` (RFC 1813 §3.3.2).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct SetattrArgs<'a> : "SETATTR3args" {
        /// The object.
        pub object: NfsFh3<'a>,
        /// Attributes to set.
        pub new_attributes: Sattr3,
        /// `sattrguard3`: if set, fail with `NFS3ERR_NOT_SYNC` unless the object's
        /// ctime equals it.
        pub guard: Option<Nfstime3>,
    }
}

xdr_struct! {
    /// `LOOKUP3args` (RFC 1813 §3.3.3).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct LookupArgs<'a> : "LOOKUP3args" {
        /// Directory and name to look up.
        pub what: DirOpArgs3<'a>,
    }
}

xdr_struct! {
    /// `ACCESS3args` (RFC 1813 §3.3.4).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct AccessArgs<'a> : "ACCESS3args" {
        /// The object.
        pub object: NfsFh3<'a>,
        /// `ACCESS3_*` bits to check.
        pub access: u32,
    }
}

xdr_struct! {
    /// `READLINK3args` (RFC 1813 §3.3.5).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ReadlinkArgs<'a> : "READLINK3args" {
        /// The symbolic link.
        pub symlink: NfsFh3<'a>,
    }
}

xdr_struct! {
    /// `READ3args` (RFC 1813 §3.3.6).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ReadArgs<'a> : "READ3args" {
        /// The file.
        pub file: NfsFh3<'a>,
        /// Byte offset.
        pub offset: u64,
        /// Bytes wanted (the server caps it at its `rtmax`).
        pub count: u32,
    }
}

xdr_struct! {
    /// `WRITE3args` (RFC 1813 §3.3.7).
    ///
    /// `count` is kept as sent; the RFC has `data` carry at least `count` bytes and
    /// Linux sends them equal. The server decides what to do when they differ.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct WriteArgs<'a> : "WRITE3args" {
        /// The file.
        pub file: NfsFh3<'a>,
        /// Byte offset.
        pub offset: u64,
        /// Bytes to write, as sent.
        pub count: u32,
        /// How far to commit before replying.
        pub stable: StableHow,
        /// The data, at most [`MAX_WRITE_DATA`] bytes.
        pub data: &'a [u8] as data,
    }
}

xdr_struct! {
    /// `CREATE3args` (RFC 1813 §3.3.8).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct CreateArgs<'a> : "CREATE3args" {
        /// Directory and name of the new file (`where` in the RFC).
        pub where_: DirOpArgs3<'a>,
        /// Creation mode and attributes or verifier.
        pub how: CreateHow3,
    }
}

xdr_struct! {
    /// `MKDIR3args` (RFC 1813 §3.3.9).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct MkdirArgs<'a> : "MKDIR3args" {
        /// Directory and name of the new directory (`where` in the RFC).
        pub where_: DirOpArgs3<'a>,
        /// Initial attributes.
        pub attributes: Sattr3,
    }
}

xdr_struct! {
    /// `symlinkdata3` (RFC 1813 §3.3.10).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Symlinkdata3<'a> : "symlinkdata3" {
        /// Initial attributes of the link.
        pub symlink_attributes: Sattr3,
        /// The link's target, at most [`MAX_PATH_LEN`](crate::MAX_PATH_LEN) bytes.
        pub symlink_data: &'a [u8] as nfspath3,
    }
}

xdr_struct! {
    /// `SYMLINK3args` (RFC 1813 §3.3.10).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct SymlinkArgs<'a> : "SYMLINK3args" {
        /// Directory and name of the new link (`where` in the RFC).
        pub where_: DirOpArgs3<'a>,
        /// Attributes and target.
        pub symlink: Symlinkdata3<'a>,
    }
}

xdr_struct! {
    /// `MKNOD3args` (RFC 1813 §3.3.11).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct MknodArgs<'a> : "MKNOD3args" {
        /// Directory and name of the new node (`where` in the RFC).
        pub where_: DirOpArgs3<'a>,
        /// Type and type-specific data.
        pub what: Mknoddata3,
    }
}

xdr_struct! {
    /// `REMOVE3args` (RFC 1813 §3.3.12).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct RemoveArgs<'a> : "REMOVE3args" {
        /// Directory and name to remove.
        pub object: DirOpArgs3<'a>,
    }
}

xdr_struct! {
    /// `RMDIR3args` (RFC 1813 §3.3.13).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct RmdirArgs<'a> : "RMDIR3args" {
        /// Parent directory and name of the directory to remove.
        pub object: DirOpArgs3<'a>,
    }
}

xdr_struct! {
    /// `RENAME3args` (RFC 1813 §3.3.14).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct RenameArgs<'a> : "RENAME3args" {
        /// Source directory and name.
        pub from: DirOpArgs3<'a>,
        /// Target directory and name.
        pub to: DirOpArgs3<'a>,
    }
}

xdr_struct! {
    /// `LINK3args` (RFC 1813 §3.3.15).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct LinkArgs<'a> : "LINK3args" {
        /// The existing file.
        pub file: NfsFh3<'a>,
        /// Directory and name of the new link.
        pub link: DirOpArgs3<'a>,
    }
}

xdr_struct! {
    /// `READDIR3args` (RFC 1813 §3.3.16).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ReaddirArgs<'a> : "READDIR3args" {
        /// The directory.
        pub dir: NfsFh3<'a>,
        /// Where to resume (0: from the start).
        pub cookie: u64,
        /// The verifier returned with `cookie` (zero with cookie 0).
        pub cookieverf: CookieVerf3,
        /// Largest `READDIR3resok` wanted, in bytes, XDR overhead included.
        pub count: u32,
    }
}

xdr_struct! {
    /// `READDIRPLUS3args` (RFC 1813 §3.3.17).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ReaddirplusArgs<'a> : "READDIRPLUS3args" {
        /// The directory.
        pub dir: NfsFh3<'a>,
        /// Where to resume (0: from the start).
        pub cookie: u64,
        /// The verifier returned with `cookie`.
        pub cookieverf: CookieVerf3,
        /// Most bytes of directory information (file ids, names, cookies).
        pub dircount: u32,
        /// Largest `READDIRPLUS3resok` wanted, in bytes, XDR overhead included.
        pub maxcount: u32,
    }
}

xdr_struct! {
    /// `FSSTAT3args` (RFC 1813 §3.3.18).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct FsstatArgs<'a> : "FSSTAT3args" {
        /// Any handle within the file system (usually its root).
        pub fsroot: NfsFh3<'a>,
    }
}

xdr_struct! {
    /// `FSINFO3args` (RFC 1813 §3.3.19).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct FsinfoArgs<'a> : "FSINFO3args" {
        /// Any handle within the file system (usually its root).
        pub fsroot: NfsFh3<'a>,
    }
}

xdr_struct! {
    /// `PATHCONF3args` (RFC 1813 §3.3.20).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct PathconfArgs<'a> : "PATHCONF3args" {
        /// The object.
        pub object: NfsFh3<'a>,
    }
}

xdr_struct! {
    /// `COMMIT3args` (RFC 1813 §3.3.21).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct CommitArgs<'a> : "COMMIT3args" {
        /// The file.
        pub file: NfsFh3<'a>,
        /// Start of the range (0 with `count` 0: the whole file).
        pub offset: u64,
        /// Length of the range (0: to the end of the file).
        pub count: u32,
    }
}

// ---------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------

xdr_struct! {
    /// `GETATTR3resok` (RFC 1813 §3.3.1).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct GetattrResOk : "GETATTR3resok" {
        /// The attributes.
        pub obj_attributes: Fattr3,
    }
}

nfs_res! {
    /// `GETATTR3res` (RFC 1813 §3.3.1).
    pub enum GetattrRes : "GETATTR3res" {
        Ok(GetattrResOk),
        Fail {}
    }
}

xdr_struct! {
    /// `SETATTR3resok` (RFC 1813 §3.3.2).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct SetattrResOk : "SETATTR3resok" {
        /// Attributes before and after.
        pub obj_wcc: WccData,
    }
}

nfs_res! {
    /// `SETATTR3res` (RFC 1813 §3.3.2).
    pub enum SetattrRes : "SETATTR3res" {
        Ok(SetattrResOk),
        Fail {
            /// Attributes before and after.
            obj_wcc: WccData,
        }
    }
}

xdr_struct! {
    /// `LOOKUP3resok` (RFC 1813 §3.3.3).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct LookupResOk : "LOOKUP3resok" {
        /// The handle of the object found.
        pub object: FileHandle,
        /// Its attributes.
        pub obj_attributes: PostOpAttr,
        /// The directory's attributes.
        pub dir_attributes: PostOpAttr,
    }
}

nfs_res! {
    /// `LOOKUP3res` (RFC 1813 §3.3.3).
    pub enum LookupRes : "LOOKUP3res" {
        Ok(LookupResOk),
        Fail {
            /// The directory's attributes.
            dir_attributes: PostOpAttr,
        }
    }
}

xdr_struct! {
    /// `ACCESS3resok` (RFC 1813 §3.3.4).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct AccessResOk : "ACCESS3resok" {
        /// The object's attributes.
        pub obj_attributes: PostOpAttr,
        /// The `ACCESS3_*` bits granted (a subset of those asked).
        pub access: u32,
    }
}

nfs_res! {
    /// `ACCESS3res` (RFC 1813 §3.3.4).
    pub enum AccessRes : "ACCESS3res" {
        Ok(AccessResOk),
        Fail {
            /// The object's attributes.
            obj_attributes: PostOpAttr,
        }
    }
}

xdr_struct! {
    /// `READLINK3resok` (RFC 1813 §3.3.5).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ReadlinkResOk<'a> : "READLINK3resok" {
        /// The link's attributes.
        pub symlink_attributes: PostOpAttr,
        /// The link's target, at most [`MAX_PATH_LEN`](crate::MAX_PATH_LEN) bytes.
        pub data: &'a [u8] as nfspath3,
    }
}

nfs_res! {
    /// `READLINK3res` (RFC 1813 §3.3.5).
    pub enum ReadlinkRes<'a> : "READLINK3res" {
        Ok(ReadlinkResOk<'a>),
        Fail {
            /// The link's attributes.
            symlink_attributes: PostOpAttr,
        }
    }
}

xdr_struct! {
    /// `READ3resok` (RFC 1813 §3.3.6).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ReadResOk<'a> : "READ3resok" {
        /// The file's attributes.
        pub file_attributes: PostOpAttr,
        /// Bytes read.
        pub count: u32,
        /// Whether the read reached the end of the file.
        pub eof: bool,
        /// The data, at most [`MAX_READ_DATA`] bytes.
        pub data: &'a [u8] as data,
    }
}

nfs_res! {
    /// `READ3res` (RFC 1813 §3.3.6).
    pub enum ReadRes<'a> : "READ3res" {
        Ok(ReadResOk<'a>),
        Fail {
            /// The file's attributes.
            file_attributes: PostOpAttr,
        }
    }
}

xdr_struct! {
    /// `WRITE3resok` (RFC 1813 §3.3.7).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct WriteResOk : "WRITE3resok" {
        /// Attributes before and after.
        pub file_wcc: WccData,
        /// Bytes written.
        pub count: u32,
        /// How far the data was committed.
        pub committed: StableHow,
        /// The server instance verifier.
        pub verf: WriteVerf3,
    }
}

nfs_res! {
    /// `WRITE3res` (RFC 1813 §3.3.7).
    pub enum WriteRes : "WRITE3res" {
        Ok(WriteResOk),
        Fail {
            /// Attributes before and after.
            file_wcc: WccData,
        }
    }
}

xdr_struct! {
    /// `CREATE3resok` (RFC 1813 §3.3.8); `MKDIR3resok`, `SYMLINK3resok` and
    /// `MKNOD3resok` have the same fields and use this type too.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct CreateResOk : "CREATE3resok" {
        /// The new object's handle.
        pub obj: PostOpFh3,
        /// Its attributes.
        pub obj_attributes: PostOpAttr,
        /// The directory's attributes before and after.
        pub dir_wcc: WccData,
    }
}

nfs_res! {
    /// `CREATE3res` (RFC 1813 §3.3.8).
    pub enum CreateRes : "CREATE3res" {
        Ok(CreateResOk),
        Fail {
            /// The directory's attributes before and after.
            dir_wcc: WccData,
        }
    }
}

nfs_res! {
    /// `MKDIR3res` (RFC 1813 §3.3.9).
    pub enum MkdirRes : "MKDIR3res" {
        Ok(CreateResOk),
        Fail {
            /// The directory's attributes before and after.
            dir_wcc: WccData,
        }
    }
}

nfs_res! {
    /// `SYMLINK3res` (RFC 1813 §3.3.10).
    pub enum SymlinkRes : "SYMLINK3res" {
        Ok(CreateResOk),
        Fail {
            /// The directory's attributes before and after.
            dir_wcc: WccData,
        }
    }
}

nfs_res! {
    /// `MKNOD3res` (RFC 1813 §3.3.11).
    pub enum MknodRes : "MKNOD3res" {
        Ok(CreateResOk),
        Fail {
            /// The directory's attributes before and after.
            dir_wcc: WccData,
        }
    }
}

xdr_struct! {
    /// `REMOVE3resok` (RFC 1813 §3.3.12); `RMDIR3resok` has the same field and
    /// uses this type too.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct RemoveResOk : "REMOVE3resok" {
        /// The directory's attributes before and after.
        pub dir_wcc: WccData,
    }
}

nfs_res! {
    /// `REMOVE3res` (RFC 1813 §3.3.12).
    pub enum RemoveRes : "REMOVE3res" {
        Ok(RemoveResOk),
        Fail {
            /// The directory's attributes before and after.
            dir_wcc: WccData,
        }
    }
}

nfs_res! {
    /// `RMDIR3res` (RFC 1813 §3.3.13).
    pub enum RmdirRes : "RMDIR3res" {
        Ok(RemoveResOk),
        Fail {
            /// The directory's attributes before and after.
            dir_wcc: WccData,
        }
    }
}

xdr_struct! {
    /// `RENAME3resok` (RFC 1813 §3.3.14).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct RenameResOk : "RENAME3resok" {
        /// The source directory's attributes before and after.
        pub fromdir_wcc: WccData,
        /// The target directory's attributes before and after.
        pub todir_wcc: WccData,
    }
}

nfs_res! {
    /// `RENAME3res` (RFC 1813 §3.3.14).
    pub enum RenameRes : "RENAME3res" {
        Ok(RenameResOk),
        Fail {
            /// The source directory's attributes before and after.
            fromdir_wcc: WccData,
            /// The target directory's attributes before and after.
            todir_wcc: WccData,
        }
    }
}

xdr_struct! {
    /// `LINK3resok` (RFC 1813 §3.3.15).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct LinkResOk : "LINK3resok" {
        /// The file's attributes.
        pub file_attributes: PostOpAttr,
        /// The link directory's attributes before and after.
        pub linkdir_wcc: WccData,
    }
}

nfs_res! {
    /// `LINK3res` (RFC 1813 §3.3.15).
    pub enum LinkRes : "LINK3res" {
        Ok(LinkResOk),
        Fail {
            /// The file's attributes.
            file_attributes: PostOpAttr,
            /// The link directory's attributes before and after.
            linkdir_wcc: WccData,
        }
    }
}

xdr_struct! {
    /// `FSSTAT3resok` (RFC 1813 §3.3.18).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct FsstatResOk : "FSSTAT3resok" {
        /// The root's attributes.
        pub obj_attributes: PostOpAttr,
        /// Total size in bytes.
        pub tbytes: u64,
        /// Free bytes.
        pub fbytes: u64,
        /// Free bytes available to the caller.
        pub abytes: u64,
        /// Total file slots.
        pub tfiles: u64,
        /// Free file slots.
        pub ffiles: u64,
        /// Free file slots available to the caller.
        pub afiles: u64,
        /// Seconds for which these values will not change (0: volatile).
        pub invarsec: u32,
    }
}

nfs_res! {
    /// `FSSTAT3res` (RFC 1813 §3.3.18).
    pub enum FsstatRes : "FSSTAT3res" {
        Ok(FsstatResOk),
        Fail {
            /// The root's attributes.
            obj_attributes: PostOpAttr,
        }
    }
}

xdr_struct! {
    /// `FSINFO3resok` (RFC 1813 §3.3.19).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct FsinfoResOk : "FSINFO3resok" {
        /// The root's attributes.
        pub obj_attributes: PostOpAttr,
        /// Largest READ supported.
        pub rtmax: u32,
        /// Preferred READ size.
        pub rtpref: u32,
        /// Suggested READ size multiple.
        pub rtmult: u32,
        /// Largest WRITE supported.
        pub wtmax: u32,
        /// Preferred WRITE size.
        pub wtpref: u32,
        /// Suggested WRITE size multiple.
        pub wtmult: u32,
        /// Preferred READDIR `count`.
        pub dtpref: u32,
        /// Largest file size.
        pub maxfilesize: u64,
        /// Time stamp granularity.
        pub time_delta: Nfstime3,
        /// `FSF3_*` bits.
        pub properties: u32,
    }
}

nfs_res! {
    /// `FSINFO3res` (RFC 1813 §3.3.19).
    pub enum FsinfoRes : "FSINFO3res" {
        Ok(FsinfoResOk),
        Fail {
            /// The root's attributes.
            obj_attributes: PostOpAttr,
        }
    }
}

xdr_struct! {
    /// `PATHCONF3resok` (RFC 1813 §3.3.20).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct PathconfResOk : "PATHCONF3resok" {
        /// The object's attributes.
        pub obj_attributes: PostOpAttr,
        /// Most hard links to one file.
        pub linkmax: u32,
        /// Longest file name.
        pub name_max: u32,
        /// Whether longer names are refused (rather than truncated).
        pub no_trunc: bool,
        /// Whether only the superuser may change owners.
        pub chown_restricted: bool,
        /// Whether names are compared case-insensitively.
        pub case_insensitive: bool,
        /// Whether the case of names is preserved.
        pub case_preserving: bool,
    }
}

nfs_res! {
    /// `PATHCONF3res` (RFC 1813 §3.3.20).
    pub enum PathconfRes : "PATHCONF3res" {
        Ok(PathconfResOk),
        Fail {
            /// The object's attributes.
            obj_attributes: PostOpAttr,
        }
    }
}

xdr_struct! {
    /// `COMMIT3resok` (RFC 1813 §3.3.21).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct CommitResOk : "COMMIT3resok" {
        /// Attributes before and after.
        pub file_wcc: WccData,
        /// The server instance verifier.
        pub verf: WriteVerf3,
    }
}

nfs_res! {
    /// `COMMIT3res` (RFC 1813 §3.3.21).
    pub enum CommitRes : "COMMIT3res" {
        Ok(CommitResOk),
        Fail {
            /// Attributes before and after.
            file_wcc: WccData,
        }
    }
}

// ---------------------------------------------------------------------------
// Per-procedure dispatch
// ---------------------------------------------------------------------------

/// The arguments of any NFSv3 procedure, decoded by procedure number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(
    missing_docs,
    reason = "each variant is the procedure of the same name"
)]
pub enum NfsArgs<'a> {
    Null,
    Getattr(GetattrArgs<'a>),
    Setattr(SetattrArgs<'a>),
    Lookup(LookupArgs<'a>),
    Access(AccessArgs<'a>),
    Readlink(ReadlinkArgs<'a>),
    Read(ReadArgs<'a>),
    Write(WriteArgs<'a>),
    Create(CreateArgs<'a>),
    Mkdir(MkdirArgs<'a>),
    Symlink(SymlinkArgs<'a>),
    Mknod(MknodArgs<'a>),
    Remove(RemoveArgs<'a>),
    Rmdir(RmdirArgs<'a>),
    Rename(RenameArgs<'a>),
    Link(LinkArgs<'a>),
    Readdir(ReaddirArgs<'a>),
    Readdirplus(ReaddirplusArgs<'a>),
    Fsstat(FsstatArgs<'a>),
    Fsinfo(FsinfoArgs<'a>),
    Pathconf(PathconfArgs<'a>),
    Commit(CommitArgs<'a>),
}

/// The results of any NFSv3 procedure, decoded by procedure number.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(
    missing_docs,
    reason = "each variant is the procedure of the same name"
)]
pub enum NfsRes<'a> {
    Null,
    Getattr(GetattrRes),
    Setattr(SetattrRes),
    Lookup(LookupRes),
    Access(AccessRes),
    Readlink(ReadlinkRes<'a>),
    Read(ReadRes<'a>),
    Write(WriteRes),
    Create(CreateRes),
    Mkdir(MkdirRes),
    Symlink(SymlinkRes),
    Mknod(MknodRes),
    Remove(RemoveRes),
    Rmdir(RmdirRes),
    Rename(RenameRes),
    Link(LinkRes),
    Readdir(ReaddirRes<'a>),
    Readdirplus(ReaddirplusRes<'a>),
    Fsstat(FsstatRes),
    Fsinfo(FsinfoRes),
    Pathconf(PathconfRes),
    Commit(CommitRes),
}

/// Generates `procedure()`, `decode(proc, r)` and `Encode` for [`NfsArgs`] and
/// [`NfsRes`], whose variants are named like the procedures.
macro_rules! per_procedure {
    ($ty:ident) => {
        impl<'a> $ty<'a> {
            /// The procedure these belong to.
            pub fn procedure(&self) -> NfsProc3 {
                per_procedure!(@match self, NfsProc3, _v => ())
            }

            /// Decodes the body of procedure `proc_` (trailing bytes are left in `r`).
            pub fn decode(proc_: NfsProc3, r: &mut Reader<'a>) -> Result<Self, DecodeError> {
                Ok(match proc_ {
                    NfsProc3::Null => Self::Null,
                    NfsProc3::Getattr => Self::Getattr(Decode::decode(r)?),
                    NfsProc3::Setattr => Self::Setattr(Decode::decode(r)?),
                    NfsProc3::Lookup => Self::Lookup(Decode::decode(r)?),
                    NfsProc3::Access => Self::Access(Decode::decode(r)?),
                    NfsProc3::Readlink => Self::Readlink(Decode::decode(r)?),
                    NfsProc3::Read => Self::Read(Decode::decode(r)?),
                    NfsProc3::Write => Self::Write(Decode::decode(r)?),
                    NfsProc3::Create => Self::Create(Decode::decode(r)?),
                    NfsProc3::Mkdir => Self::Mkdir(Decode::decode(r)?),
                    NfsProc3::Symlink => Self::Symlink(Decode::decode(r)?),
                    NfsProc3::Mknod => Self::Mknod(Decode::decode(r)?),
                    NfsProc3::Remove => Self::Remove(Decode::decode(r)?),
                    NfsProc3::Rmdir => Self::Rmdir(Decode::decode(r)?),
                    NfsProc3::Rename => Self::Rename(Decode::decode(r)?),
                    NfsProc3::Link => Self::Link(Decode::decode(r)?),
                    NfsProc3::Readdir => Self::Readdir(Decode::decode(r)?),
                    NfsProc3::Readdirplus => Self::Readdirplus(Decode::decode(r)?),
                    NfsProc3::Fsstat => Self::Fsstat(Decode::decode(r)?),
                    NfsProc3::Fsinfo => Self::Fsinfo(Decode::decode(r)?),
                    NfsProc3::Pathconf => Self::Pathconf(Decode::decode(r)?),
                    NfsProc3::Commit => Self::Commit(Decode::decode(r)?),
                })
            }
        }

        impl Encode for $ty<'_> {
            fn encode(&self, w: &mut Writer<'_>) {
                per_procedure!(@match self, Self, v => v.encode(w))
            }
        }
    };
    (@match $self:ident, $out:ident, $v:ident => $body:expr) => {
        match $self {
            Self::Null => per_procedure!(@null $out),
            Self::Getattr($v) => per_procedure!(@arm $out, Getattr, $body),
            Self::Setattr($v) => per_procedure!(@arm $out, Setattr, $body),
            Self::Lookup($v) => per_procedure!(@arm $out, Lookup, $body),
            Self::Access($v) => per_procedure!(@arm $out, Access, $body),
            Self::Readlink($v) => per_procedure!(@arm $out, Readlink, $body),
            Self::Read($v) => per_procedure!(@arm $out, Read, $body),
            Self::Write($v) => per_procedure!(@arm $out, Write, $body),
            Self::Create($v) => per_procedure!(@arm $out, Create, $body),
            Self::Mkdir($v) => per_procedure!(@arm $out, Mkdir, $body),
            Self::Symlink($v) => per_procedure!(@arm $out, Symlink, $body),
            Self::Mknod($v) => per_procedure!(@arm $out, Mknod, $body),
            Self::Remove($v) => per_procedure!(@arm $out, Remove, $body),
            Self::Rmdir($v) => per_procedure!(@arm $out, Rmdir, $body),
            Self::Rename($v) => per_procedure!(@arm $out, Rename, $body),
            Self::Link($v) => per_procedure!(@arm $out, Link, $body),
            Self::Readdir($v) => per_procedure!(@arm $out, Readdir, $body),
            Self::Readdirplus($v) => per_procedure!(@arm $out, Readdirplus, $body),
            Self::Fsstat($v) => per_procedure!(@arm $out, Fsstat, $body),
            Self::Fsinfo($v) => per_procedure!(@arm $out, Fsinfo, $body),
            Self::Pathconf($v) => per_procedure!(@arm $out, Pathconf, $body),
            Self::Commit($v) => per_procedure!(@arm $out, Commit, $body),
        }
    };
    (@null NfsProc3) => { NfsProc3::Null };
    (@null Self) => { () };
    (@arm NfsProc3, $proc_:ident, $body:expr) => { NfsProc3::$proc_ };
    (@arm Self, $proc_:ident, $body:expr) => { $body };
}

per_procedure!(NfsArgs);
per_procedure!(NfsRes);
