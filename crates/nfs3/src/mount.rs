//! The MOUNT protocol, version 3 (RFC 1813 Appendix I, §5): procedure numbers,
//! arguments and results.
//!
//! The DUMP and EXPORT results are XDR linked lists; their decoders read no
//! counts, and every node consumes input, so a list's length is bounded by the
//! bytes received.

use rnfs_xdr::{Decode, DecodeError, Encode, Reader, Writer};

use crate::types::{decode_list, encode_list};
use crate::{FileHandle, Mountstat3};

/// The MOUNT program number.
pub const MOUNT_PROGRAM: u32 = 100_005;
/// The MOUNT protocol version these types describe.
pub const MOUNT_V3: u32 = 3;
/// `MNTPATHLEN`: the longest `dirpath` (RFC 1813 §5.1.4).
pub const MNTPATHLEN: u32 = 1024;
/// `MNTNAMLEN`: the longest `name` (host or group) (RFC 1813 §5.1.4).
pub const MNTNAMLEN: u32 = 255;
/// The most authentication flavors a MNT reply may list when decoded (the RFC
/// sets no limit; real servers send one to a handful).
pub const MAX_AUTH_FLAVORS: u32 = 64;

wire_enum! {
    /// The MOUNT v3 procedures (RFC 1813 §5.2).
    pub enum MountProc3 : "mountproc3" {
        /// 0: do nothing (§5.2.0).
        Null = 0,
        /// 1: map a path to a file handle (§5.2.1).
        Mnt = 1,
        /// 2: list mounted file systems (§5.2.2).
        Dump = 2,
        /// 3: remove a mount entry (§5.2.3).
        Umnt = 3,
        /// 4: remove all of the caller's mount entries (§5.2.4).
        Umntall = 4,
        /// 5: list the exports (§5.2.5).
        Export = 5,
    }
}

impl MountProc3 {
    /// The RFC's name, e.g. `"MNT"`, for logs.
    pub fn name(self) -> &'static str {
        MOUNT3_PROC_NAMES[self as usize]
    }
}

/// The RFC names of the MOUNT v3 procedures, indexed by procedure number.
pub const MOUNT3_PROC_NAMES: [&str; 6] = ["NULL", "MNT", "DUMP", "UMNT", "UMNTALL", "EXPORT"];

/// Codec for `dirpath`: a string of at most [`MNTPATHLEN`] bytes.
mod dirpath {
    use rnfs_xdr::{DecodeError, Reader, Writer};

    pub(super) fn decode<'a>(r: &mut Reader<'a>) -> Result<&'a [u8], DecodeError> {
        r.named("dirpath", |r| r.read_string(super::MNTPATHLEN))
    }

    pub(super) fn encode(path: &[u8], w: &mut Writer<'_>) {
        w.write_string(path);
    }
}

/// Codec for `name`: a string of at most [`MNTNAMLEN`] bytes.
mod name {
    use rnfs_xdr::{DecodeError, Reader, Writer};

    pub(super) fn decode<'a>(r: &mut Reader<'a>) -> Result<&'a [u8], DecodeError> {
        r.named("name", |r| r.read_string(super::MNTNAMLEN))
    }

    pub(super) fn encode(name: &[u8], w: &mut Writer<'_>) {
        w.write_string(name);
    }
}

xdr_struct! {
    /// MNT's argument (RFC 1813 §5.2.1): the path to mount.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct MntArgs<'a> : "dirpath" {
        /// Server path of the export, at most [`MNTPATHLEN`] bytes.
        pub dirpath: &'a [u8] as dirpath,
    }
}

xdr_struct! {
    /// UMNT's argument (RFC 1813 §5.2.3): the path to unmount.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct UmntArgs<'a> : "dirpath" {
        /// Server path of the export, at most [`MNTPATHLEN`] bytes.
        pub dirpath: &'a [u8] as dirpath,
    }
}

/// `mountres3_ok` (RFC 1813 §5.2.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mountres3Ok {
    /// The root handle of the export (`fhandle3`, at most 64 bytes).
    pub fhandle: FileHandle,
    /// RPC authentication flavors the server accepts for it, preferred first
    /// (decoded up to [`MAX_AUTH_FLAVORS`]).
    pub auth_flavors: Vec<u32>,
}

impl Decode<'_> for Mountres3Ok {
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let fhandle = r.named("fhandle3", FileHandle::decode)?;
        let auth_flavors = r.named("mountres3_ok", |r| r.read_array(MAX_AUTH_FLAVORS, 4))?;
        Ok(Self {
            fhandle,
            auth_flavors,
        })
    }
}

impl Encode for Mountres3Ok {
    fn encode(&self, w: &mut Writer<'_>) {
        self.fhandle.encode(w);
        w.write_u32(u32::try_from(self.auth_flavors.len()).unwrap_or(u32::MAX));
        for flavor in self.auth_flavors.iter().take(u32::MAX as usize) {
            w.write_u32(*flavor);
        }
    }
}

/// `mountres3` (RFC 1813 §5.2.1): MNT's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mountres3 {
    /// `MNT3_OK`.
    Ok(Mountres3Ok),
    /// Any other status (void arm). Never [`Mountstat3::Ok`] when decoded;
    /// encoding `Ok` here is a bug and is sent as `MNT3ERR_SERVERFAULT`.
    Fail(Mountstat3),
}

impl Decode<'_> for Mountres3 {
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match Mountstat3::decode(r)? {
            Mountstat3::Ok => Mountres3Ok::decode(r).map(Self::Ok),
            status => Ok(Self::Fail(status)),
        }
    }
}

impl Encode for Mountres3 {
    fn encode(&self, w: &mut Writer<'_>) {
        match self {
            Self::Ok(ok) => {
                Mountstat3::Ok.encode(w);
                ok.encode(w);
            }
            Self::Fail(status) => {
                debug_assert_ne!(*status, Mountstat3::Ok, "failure result with MNT3_OK");
                match status {
                    Mountstat3::Ok => Mountstat3::Serverfault,
                    other => *other,
                }
                .encode(w);
            }
        }
    }
}

xdr_struct! {
    /// `mountbody` (RFC 1813 §5.2.2): one entry of DUMP's `mountlist`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct MountBody<'a> : "mountbody" {
        /// The client's host name, at most [`MNTNAMLEN`] bytes.
        pub hostname: &'a [u8] as name,
        /// The path it mounted, at most [`MNTPATHLEN`] bytes.
        pub directory: &'a [u8] as dirpath,
    }
}

/// DUMP's result (RFC 1813 §5.2.2): the `mountlist` linked list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DumpRes<'a> {
    /// The mount entries.
    pub mounts: Vec<MountBody<'a>>,
}

impl<'a> Decode<'a> for DumpRes<'a> {
    fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        r.named("mountlist", |r| decode_list(r, MountBody::decode))
            .map(|mounts| Self { mounts })
    }
}

impl Encode for DumpRes<'_> {
    fn encode(&self, w: &mut Writer<'_>) {
        encode_list(w, &self.mounts, MountBody::encode);
    }
}

/// `exportnode` (RFC 1813 §5.2.5): one export and the groups allowed to mount it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExportNode<'a> {
    /// The exported path, at most [`MNTPATHLEN`] bytes.
    pub dir: &'a [u8],
    /// The `groups` linked list: host or netgroup names, each at most
    /// [`MNTNAMLEN`] bytes (empty: everyone).
    pub groups: Vec<&'a [u8]>,
}

impl<'a> Decode<'a> for ExportNode<'a> {
    fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let dir = dirpath::decode(r)?;
        let groups = r.named("groups", |r| decode_list(r, name::decode))?;
        Ok(Self { dir, groups })
    }
}

impl Encode for ExportNode<'_> {
    fn encode(&self, w: &mut Writer<'_>) {
        dirpath::encode(self.dir, w);
        encode_list(w, &self.groups, |group, w| name::encode(group, w));
    }
}

/// EXPORT's result (RFC 1813 §5.2.5): the `exports` linked list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExportRes<'a> {
    /// The exports.
    pub exports: Vec<ExportNode<'a>>,
}

impl<'a> Decode<'a> for ExportRes<'a> {
    fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        r.named("exports", |r| decode_list(r, ExportNode::decode))
            .map(|exports| Self { exports })
    }
}

impl Encode for ExportRes<'_> {
    fn encode(&self, w: &mut Writer<'_>) {
        encode_list(w, &self.exports, ExportNode::encode);
    }
}

/// The arguments of any MOUNT v3 procedure, decoded by procedure number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MountArgs<'a> {
    /// NULL: void.
    Null,
    /// MNT: the path.
    Mnt(MntArgs<'a>),
    /// DUMP: void.
    Dump,
    /// UMNT: the path.
    Umnt(UmntArgs<'a>),
    /// UMNTALL: void.
    Umntall,
    /// EXPORT: void.
    Export,
}

impl<'a> MountArgs<'a> {
    /// The procedure these belong to.
    pub fn procedure(&self) -> MountProc3 {
        match self {
            Self::Null => MountProc3::Null,
            Self::Mnt(_) => MountProc3::Mnt,
            Self::Dump => MountProc3::Dump,
            Self::Umnt(_) => MountProc3::Umnt,
            Self::Umntall => MountProc3::Umntall,
            Self::Export => MountProc3::Export,
        }
    }

    /// Decodes the arguments of procedure `proc_` (trailing bytes are left in `r`).
    pub fn decode(proc_: MountProc3, r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        Ok(match proc_ {
            MountProc3::Null => Self::Null,
            MountProc3::Mnt => Self::Mnt(MntArgs::decode(r)?),
            MountProc3::Dump => Self::Dump,
            MountProc3::Umnt => Self::Umnt(UmntArgs::decode(r)?),
            MountProc3::Umntall => Self::Umntall,
            MountProc3::Export => Self::Export,
        })
    }
}

impl Encode for MountArgs<'_> {
    fn encode(&self, w: &mut Writer<'_>) {
        match self {
            Self::Mnt(a) => a.encode(w),
            Self::Umnt(a) => a.encode(w),
            Self::Null | Self::Dump | Self::Umntall | Self::Export => {}
        }
    }
}

/// The results of any MOUNT v3 procedure, decoded by procedure number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountRes<'a> {
    /// NULL: void.
    Null,
    /// MNT: status, and the handle and flavors on success.
    Mnt(Mountres3),
    /// DUMP: the mount list.
    Dump(DumpRes<'a>),
    /// UMNT: void.
    Umnt,
    /// UMNTALL: void.
    Umntall,
    /// EXPORT: the export list.
    Export(ExportRes<'a>),
}

impl<'a> MountRes<'a> {
    /// The procedure these belong to.
    pub fn procedure(&self) -> MountProc3 {
        match self {
            Self::Null => MountProc3::Null,
            Self::Mnt(_) => MountProc3::Mnt,
            Self::Dump(_) => MountProc3::Dump,
            Self::Umnt => MountProc3::Umnt,
            Self::Umntall => MountProc3::Umntall,
            Self::Export(_) => MountProc3::Export,
        }
    }

    /// Decodes the results of procedure `proc_` (trailing bytes are left in `r`).
    pub fn decode(proc_: MountProc3, r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        Ok(match proc_ {
            MountProc3::Null => Self::Null,
            MountProc3::Mnt => Self::Mnt(Mountres3::decode(r)?),
            MountProc3::Dump => Self::Dump(DumpRes::decode(r)?),
            MountProc3::Umnt => Self::Umnt,
            MountProc3::Umntall => Self::Umntall,
            MountProc3::Export => Self::Export(ExportRes::decode(r)?),
        })
    }
}

impl Encode for MountRes<'_> {
    fn encode(&self, w: &mut Writer<'_>) {
        match self {
            Self::Mnt(res) => res.encode(w),
            Self::Dump(res) => res.encode(w),
            Self::Export(res) => res.encode(w),
            Self::Null | Self::Umnt | Self::Umntall => {}
        }
    }
}
