//! The NFSv3 data types shared by many procedures (RFC 1813 §2.5 and the types the
//! RFC defines after `nfsstat3` in §2.6): file handles, attributes, weak cache
//! consistency data, settable attributes and directory operation arguments.

use std::fmt;

use rnfs_xdr::{Decode, DecodeError, Encode, Reader, Writer};

/// `NFS3_FHSIZE`: the largest file handle, in bytes (RFC 1813 §2.4).
pub const NFS3_FHSIZE: usize = 64;
/// `NFS3_COOKIEVERFSIZE` (RFC 1813 §2.4).
pub const NFS3_COOKIEVERFSIZE: usize = 8;
/// `NFS3_CREATEVERFSIZE` (RFC 1813 §2.4).
pub const NFS3_CREATEVERFSIZE: usize = 8;
/// `NFS3_WRITEVERFSIZE` (RFC 1813 §2.4).
pub const NFS3_WRITEVERFSIZE: usize = 8;

/// The longest file name (`filename3`) the decoders accept. The RFC sets no limit;
/// names of 256..=1024 bytes decode so the server can answer
/// `NFS3ERR_NAMETOOLONG` itself (against [`NAME_MAX`]); longer ones are a decode
/// error (GARBAGE_ARGS).
pub const MAX_NAME_DECODE: u32 = 1024;
/// The usual file-name limit of the exported file system (Linux `NAME_MAX`): the
/// server's threshold for `NFS3ERR_NAMETOOLONG`. Not enforced by the decoders.
pub const NAME_MAX: usize = 255;
/// The longest path (`nfspath3`: symlink data) the decoders accept, Linux
/// `PATH_MAX`.
pub const MAX_PATH_LEN: u32 = 4096;

/// `cookieverf3` (RFC 1813 §2.5): the READDIR cookie verifier.
pub type CookieVerf3 = [u8; NFS3_COOKIEVERFSIZE];
/// `createverf3` (RFC 1813 §2.5): the exclusive CREATE verifier.
pub type CreateVerf3 = [u8; NFS3_CREATEVERFSIZE];
/// `writeverf3` (RFC 1813 §2.5): the server instance verifier of WRITE and COMMIT.
pub type WriteVerf3 = [u8; NFS3_WRITEVERFSIZE];

/// A file handle longer than [`NFS3_FHSIZE`] was given to a constructor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("file handle of {0} bytes exceeds NFS3_FHSIZE ({NFS3_FHSIZE})")]
pub struct HandleTooLong(pub usize);

/// `nfs_fh3` (RFC 1813 §2.6) borrowed from the input: `opaque data<NFS3_FHSIZE>`.
///
/// Always at most [`NFS3_FHSIZE`] bytes: the constructor and the decoder check.
/// Copy into a [`FileHandle`] to keep it beyond the input's lifetime.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NfsFh3<'a>(&'a [u8]);

impl<'a> NfsFh3<'a> {
    /// A handle over `bytes`, if it is at most [`NFS3_FHSIZE`] bytes.
    pub fn new(bytes: &'a [u8]) -> Result<Self, HandleTooLong> {
        if bytes.len() > NFS3_FHSIZE {
            return Err(HandleTooLong(bytes.len()));
        }
        Ok(Self(bytes))
    }

    /// The handle's bytes.
    #[inline]
    pub fn as_bytes(&self) -> &'a [u8] {
        self.0
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the handle has no bytes (legal on the wire, never issued by rnfs).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for NfsFh3<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex(f, "NfsFh3", self.0)
    }
}

impl<'a> Decode<'a> for NfsFh3<'a> {
    fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        r.named("nfs_fh3", |r| r.read_opaque(NFS3_FHSIZE as u32))
            .map(Self)
    }
}

impl Encode for NfsFh3<'_> {
    fn encode(&self, w: &mut Writer<'_>) {
        w.write_opaque(self.0);
    }
}

/// An owned `nfs_fh3`, stored inline (no allocation) and `Copy`.
#[derive(Clone, Copy)]
pub struct FileHandle {
    bytes: [u8; NFS3_FHSIZE],
    /// `len <= NFS3_FHSIZE`; bytes past it are zero.
    len: u8,
}

impl FileHandle {
    /// A copy of `bytes`, if it is at most [`NFS3_FHSIZE`] bytes.
    pub fn new(bytes: &[u8]) -> Result<Self, HandleTooLong> {
        let mut out = Self::default();
        out.bytes
            .get_mut(..bytes.len())
            .ok_or(HandleTooLong(bytes.len()))?
            .copy_from_slice(bytes);
        out.len = bytes.len() as u8; // <= 64, checked by the slice above
        Ok(out)
    }

    /// The handle's bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// Borrows it as an [`NfsFh3`] (to put in arguments).
    #[inline]
    pub fn as_fh3(&self) -> NfsFh3<'_> {
        NfsFh3(self.as_bytes())
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Whether the handle has no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Default for FileHandle {
    /// The empty handle.
    fn default() -> Self {
        Self {
            bytes: [0; NFS3_FHSIZE],
            len: 0,
        }
    }
}

impl From<NfsFh3<'_>> for FileHandle {
    fn from(fh: NfsFh3<'_>) -> Self {
        let mut out = Self::default();
        let n = fh.0.len().min(NFS3_FHSIZE); // an NfsFh3 is never longer
        out.bytes[..n].copy_from_slice(&fh.0[..n]);
        out.len = n as u8;
        out
    }
}

impl<'a> From<&'a FileHandle> for NfsFh3<'a> {
    fn from(fh: &'a FileHandle) -> Self {
        fh.as_fh3()
    }
}

impl TryFrom<&[u8]> for FileHandle {
    type Error = HandleTooLong;
    fn try_from(bytes: &[u8]) -> Result<Self, HandleTooLong> {
        Self::new(bytes)
    }
}

impl PartialEq for FileHandle {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for FileHandle {}

impl std::hash::Hash for FileHandle {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl fmt::Debug for FileHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex(f, "FileHandle", self.as_bytes())
    }
}

impl Decode<'_> for FileHandle {
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        NfsFh3::decode(r).map(Self::from)
    }
}

impl Encode for FileHandle {
    fn encode(&self, w: &mut Writer<'_>) {
        w.write_opaque(self.as_bytes());
    }
}

fn write_hex(f: &mut fmt::Formatter<'_>, name: &str, bytes: &[u8]) -> fmt::Result {
    write!(f, "{name}(")?;
    for b in bytes {
        write!(f, "{b:02x}")?;
    }
    write!(f, ")")
}

wire_enum! {
    /// `ftype3` (RFC 1813 §2.6): the type of a file.
    pub enum Ftype3 : "ftype3" {
        /// `NF3REG`: regular file.
        Reg = 1,
        /// `NF3DIR`: directory.
        Dir = 2,
        /// `NF3BLK`: block device.
        Blk = 3,
        /// `NF3CHR`: character device.
        Chr = 4,
        /// `NF3LNK`: symbolic link.
        Lnk = 5,
        /// `NF3SOCK`: socket.
        Sock = 6,
        /// `NF3FIFO`: named pipe.
        Fifo = 7,
    }
}

xdr_struct! {
    /// `specdata3` (RFC 1813 §2.6): device numbers (major, minor) of a device file.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Specdata3 : "specdata3" {
        /// Major number.
        pub specdata1: u32,
        /// Minor number.
        pub specdata2: u32,
    }
}

xdr_struct! {
    /// `nfstime3` (RFC 1813 §2.6): seconds and nanoseconds since the epoch.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
    pub struct Nfstime3 : "nfstime3" {
        /// Seconds since 1970-01-01 UTC.
        pub seconds: u32,
        /// Nanoseconds within the second.
        pub nseconds: u32,
    }
}

xdr_struct! {
    /// `fattr3` (RFC 1813 §2.6): the attributes of a file. 84 bytes on the wire.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Fattr3 : "fattr3" {
        /// File type (`type` in the RFC).
        pub ftype: Ftype3,
        /// Protection mode bits (lower 12 bits: setuid, setgid, sticky, rwx).
        pub mode: u32,
        /// Number of hard links.
        pub nlink: u32,
        /// Owner user id.
        pub uid: u32,
        /// Owner group id.
        pub gid: u32,
        /// Size in bytes.
        pub size: u64,
        /// Bytes of disk space used.
        pub used: u64,
        /// Device numbers for block and character devices.
        pub rdev: Specdata3,
        /// File system identifier.
        pub fsid: u64,
        /// File number, unique within the file system.
        pub fileid: u64,
        /// Last access time.
        pub atime: Nfstime3,
        /// Last data modification time.
        pub mtime: Nfstime3,
        /// Last attribute change time.
        pub ctime: Nfstime3,
    }
}

impl Fattr3 {
    /// Wire size of a `fattr3`.
    pub const WIRE_SIZE: usize = 84;
}

/// `post_op_attr` (RFC 1813 §2.6): attributes after the operation, if the server
/// has them.
pub type PostOpAttr = Option<Fattr3>;

xdr_struct! {
    /// `wcc_attr` (RFC 1813 §2.6): the attributes weak cache consistency compares.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct WccAttr : "wcc_attr" {
        /// Size in bytes.
        pub size: u64,
        /// Data modification time.
        pub mtime: Nfstime3,
        /// Attribute change time.
        pub ctime: Nfstime3,
    }
}

impl From<&Fattr3> for WccAttr {
    fn from(a: &Fattr3) -> Self {
        Self {
            size: a.size,
            mtime: a.mtime,
            ctime: a.ctime,
        }
    }
}

/// `pre_op_attr` (RFC 1813 §2.6): [`WccAttr`] before the operation, if known.
pub type PreOpAttr = Option<WccAttr>;

xdr_struct! {
    /// `wcc_data` (RFC 1813 §2.6): attributes before and after a modifying call.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct WccData : "wcc_data" {
        /// Attributes before the operation.
        pub before: PreOpAttr,
        /// Attributes after the operation.
        pub after: PostOpAttr,
    }
}

/// `post_op_fh3` (RFC 1813 §2.6): the handle of a created object, if returned.
pub type PostOpFh3 = Option<FileHandle>;

/// `set_atime` / `set_mtime` (RFC 1813 §2.6): how SETATTR changes a time stamp.
/// The discriminant is `time_how`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SetTime {
    /// `DONT_CHANGE` (0).
    #[default]
    DontChange,
    /// `SET_TO_SERVER_TIME` (1).
    SetToServerTime,
    /// `SET_TO_CLIENT_TIME` (2), with the time.
    SetToClientTime(Nfstime3),
}

impl Decode<'_> for SetTime {
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match r.named("time_how", Reader::read_enum)? {
            0 => Ok(Self::DontChange),
            1 => Ok(Self::SetToServerTime),
            2 => Nfstime3::decode(r).map(Self::SetToClientTime),
            value => Err(DecodeError::BadDiscriminant {
                type_name: "time_how",
                value,
            }),
        }
    }
}

impl Encode for SetTime {
    fn encode(&self, w: &mut Writer<'_>) {
        match self {
            Self::DontChange => w.write_u32(0),
            Self::SetToServerTime => w.write_u32(1),
            Self::SetToClientTime(t) => {
                w.write_u32(2);
                t.encode(w);
            }
        }
    }
}

xdr_struct! {
    /// `sattr3` (RFC 1813 §2.6): attributes to set; `None` leaves one unchanged
    /// (each `set_*` union is a bool-switched optional on the wire).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Sattr3 : "sattr3" {
        /// New mode bits.
        pub mode: Option<u32>,
        /// New owner.
        pub uid: Option<u32>,
        /// New group.
        pub gid: Option<u32>,
        /// New size (truncate or extend).
        pub size: Option<u64>,
        /// New access time.
        pub atime: SetTime,
        /// New modification time.
        pub mtime: SetTime,
    }
}

/// Codec for `filename3`: a string of at most [`MAX_NAME_DECODE`] bytes.
pub(crate) mod filename3 {
    use rnfs_xdr::{DecodeError, Reader, Writer};

    pub(crate) fn decode<'a>(r: &mut Reader<'a>) -> Result<&'a [u8], DecodeError> {
        r.named("filename3", |r| r.read_string(super::MAX_NAME_DECODE))
    }

    pub(crate) fn encode(name: &[u8], w: &mut Writer<'_>) {
        w.write_string(name);
    }
}

/// Codec for `nfspath3`: a string of at most [`MAX_PATH_LEN`] bytes.
pub(crate) mod nfspath3 {
    use rnfs_xdr::{DecodeError, Reader, Writer};

    pub(crate) fn decode<'a>(r: &mut Reader<'a>) -> Result<&'a [u8], DecodeError> {
        r.named("nfspath3", |r| r.read_string(super::MAX_PATH_LEN))
    }

    pub(crate) fn encode(path: &[u8], w: &mut Writer<'_>) {
        w.write_string(path);
    }
}

xdr_struct! {
    /// `diropargs3` (RFC 1813 §2.6): a name within a directory.
    ///
    /// `name` decodes up to [`MAX_NAME_DECODE`] bytes; the server checks
    /// [`NAME_MAX`] and that the name is not empty, `.`, `..` or contains `/`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct DirOpArgs3<'a> : "diropargs3" {
        /// The directory.
        pub dir: NfsFh3<'a>,
        /// The name within it (bytes, not necessarily UTF-8).
        pub name: &'a [u8] as filename3,
    }
}

wire_enum! {
    /// `stable_how` (RFC 1813 §3.3.7): how far WRITE must commit the data.
    pub enum StableHow : "stable_how" {
        /// `UNSTABLE`: may cache; COMMIT later.
        Unstable = 0,
        /// `DATA_SYNC`: data and the metadata needed to read it are on stable storage.
        DataSync = 1,
        /// `FILE_SYNC`: data and all metadata are on stable storage.
        FileSync = 2,
    }
}

/// `createhow3` (RFC 1813 §3.3.8): how CREATE creates the file. The discriminant
/// is `createmode3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CreateHow3 {
    /// `UNCHECKED` (0): create, or open an existing file, with these attributes.
    Unchecked(Sattr3),
    /// `GUARDED` (1): fail with `NFS3ERR_EXIST` if the file exists.
    Guarded(Sattr3),
    /// `EXCLUSIVE` (2): exclusive create keyed by the client's verifier.
    Exclusive(CreateVerf3),
}

impl Decode<'_> for CreateHow3 {
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match r.named("createmode3", Reader::read_enum)? {
            0 => Sattr3::decode(r).map(Self::Unchecked),
            1 => Sattr3::decode(r).map(Self::Guarded),
            2 => r
                .named("createverf3", CreateVerf3::decode)
                .map(Self::Exclusive),
            value => Err(DecodeError::BadDiscriminant {
                type_name: "createmode3",
                value,
            }),
        }
    }
}

impl Encode for CreateHow3 {
    fn encode(&self, w: &mut Writer<'_>) {
        match self {
            Self::Unchecked(a) => {
                w.write_u32(0);
                a.encode(w);
            }
            Self::Guarded(a) => {
                w.write_u32(1);
                a.encode(w);
            }
            Self::Exclusive(verf) => {
                w.write_u32(2);
                verf.encode(w);
            }
        }
    }
}

xdr_struct! {
    /// `devicedata3` (RFC 1813 §3.3.11): attributes and device numbers of a
    /// device file made by MKNOD.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Devicedata3 : "devicedata3" {
        /// Initial attributes.
        pub dev_attributes: Sattr3,
        /// Major and minor numbers.
        pub spec: Specdata3,
    }
}

/// `mknoddata3` (RFC 1813 §3.3.11): what MKNOD creates, switched on [`Ftype3`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mknoddata3 {
    /// `NF3CHR`: a character device.
    Chr(Devicedata3),
    /// `NF3BLK`: a block device.
    Blk(Devicedata3),
    /// `NF3SOCK`: a socket, with its attributes.
    Sock(Sattr3),
    /// `NF3FIFO`: a named pipe, with its attributes.
    Fifo(Sattr3),
    /// `NF3REG`, `NF3DIR` or `NF3LNK` (void arm): the server answers
    /// `NFS3ERR_BADTYPE`.
    Other(Ftype3),
}

impl Mknoddata3 {
    /// The type of the node to create.
    pub fn ftype(&self) -> Ftype3 {
        match self {
            Self::Chr(_) => Ftype3::Chr,
            Self::Blk(_) => Ftype3::Blk,
            Self::Sock(_) => Ftype3::Sock,
            Self::Fifo(_) => Ftype3::Fifo,
            Self::Other(t) => *t,
        }
    }
}

impl Decode<'_> for Mknoddata3 {
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(match Ftype3::decode(r)? {
            Ftype3::Chr => Self::Chr(Devicedata3::decode(r)?),
            Ftype3::Blk => Self::Blk(Devicedata3::decode(r)?),
            Ftype3::Sock => Self::Sock(Sattr3::decode(r)?),
            Ftype3::Fifo => Self::Fifo(Sattr3::decode(r)?),
            t @ (Ftype3::Reg | Ftype3::Dir | Ftype3::Lnk) => Self::Other(t),
        })
    }
}

impl Encode for Mknoddata3 {
    fn encode(&self, w: &mut Writer<'_>) {
        self.ftype().encode(w);
        match self {
            Self::Chr(d) | Self::Blk(d) => d.encode(w),
            Self::Sock(a) | Self::Fifo(a) => a.encode(w),
            // `Other` with a device type would be ambiguous: encode its (empty)
            // attributes so the bytes still decode.
            Self::Other(Ftype3::Chr | Ftype3::Blk) => Devicedata3::default().encode(w),
            Self::Other(Ftype3::Sock | Ftype3::Fifo) => Sattr3::default().encode(w),
            Self::Other(_) => {}
        }
    }
}

/// Decodes an XDR linked list (`T *next` chains, as in `dirlist3` or `exports`):
/// a `bool` "value follows" before each element and a final `false`.
///
/// There is no count to trust: every element costs at least its flag plus one
/// word of input, so the list's length is bounded by the bytes remaining.
pub(crate) fn decode_list<'a, T>(
    r: &mut Reader<'a>,
    mut element: impl FnMut(&mut Reader<'a>) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    let mut out = Vec::new();
    while r.read_bool()? {
        out.push(element(r)?);
    }
    Ok(out)
}

/// Encodes `items` as an XDR linked list (see [`decode_list`]).
pub(crate) fn encode_list<T>(
    w: &mut Writer<'_>,
    items: &[T],
    mut element: impl FnMut(&T, &mut Writer<'_>),
) {
    for item in items {
        w.write_bool(true);
        element(item, w);
    }
    w.write_bool(false);
}
