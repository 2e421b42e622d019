//! Plain data passed across the [`Filesystem`](crate::Filesystem) trait.

/// Opaque backend handle bytes, at most [`Self::MAX_LEN`] long, stored inline.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct BackendHandle {
    len: u8,
    bytes: [u8; Self::MAX_LEN],
}

impl BackendHandle {
    /// The NFSv3 limit is 64 bytes; the server keeps 24 for the export id, a
    /// version byte and a MAC.
    pub const MAX_LEN: usize = 40;

    /// `None` if `bytes` is longer than [`Self::MAX_LEN`].
    pub fn new(bytes: &[u8]) -> Option<Self> {
        if bytes.len() > Self::MAX_LEN {
            return None;
        }
        let mut out = Self {
            len: bytes.len() as u8,
            bytes: [0; Self::MAX_LEN],
        };
        out.bytes[..bytes.len()].copy_from_slice(bytes);
        Some(out)
    }

    /// The handle's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// Hashes the handle's bytes only, not the zeroed tail of the inline array: a
/// handle is hashed on every cache lookup, and local handles are 9 to 25 of the
/// 40 bytes. Consistent with `Eq`: equal handles have equal `as_bytes`.
impl std::hash::Hash for BackendHandle {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl std::fmt::Debug for BackendHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BackendHandle(")?;
        for b in self.as_bytes() {
            write!(f, "{b:02x}")?;
        }
        f.write_str(")")
    }
}

/// The caller's identity (from AUTH_SYS, after squashing).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Cred {
    /// Effective user id.
    pub uid: u32,
    /// Effective group id.
    pub gid: u32,
    /// Supplementary groups (at most 16 from AUTH_SYS).
    pub groups: Vec<u32>,
}

impl Cred {
    /// The superuser.
    pub fn root() -> Self {
        Self::default()
    }

    /// Whether `gid` is the primary or a supplementary group.
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }

    /// The `rwx` bits (0..=7) of `mode` that apply to this caller for an object
    /// with this owner and group: exactly one class, owner, else group, else
    /// others.
    pub(crate) fn mode_bits(&self, uid: u32, gid: u32, mode: u32) -> u32 {
        if self.uid == uid {
            (mode >> 6) & 7
        } else if self.in_group(gid) {
            (mode >> 3) & 7
        } else {
            mode & 7
        }
    }
}

/// A timestamp: seconds and nanoseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time {
    /// Seconds (may be negative for dates before 1970).
    pub secs: i64,
    /// Nanoseconds, below 1e9.
    pub nsecs: u32,
}

/// The type of a file-system object (`ftype3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileType {
    /// Regular file.
    Regular,
    /// Directory.
    Directory,
    /// Block device.
    BlockDevice,
    /// Character device.
    CharDevice,
    /// Symbolic link.
    Symlink,
    /// Unix-domain socket.
    Socket,
    /// Named pipe.
    Fifo,
}

/// Object attributes (`fattr3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr {
    /// Object type.
    pub ftype: FileType,
    /// Permission bits and setuid/setgid/sticky (`mode & 0o7777`).
    pub mode: u32,
    /// Link count.
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Size in bytes.
    pub size: u64,
    /// Bytes allocated on disk.
    pub used: u64,
    /// Device numbers (major, minor) for device files, else (0, 0).
    pub rdev: (u32, u32),
    /// File-system id.
    pub fsid: u64,
    /// File id (inode number), unique within `fsid`.
    pub fileid: u64,
    /// Last access.
    pub atime: Time,
    /// Last modification of the data.
    pub mtime: Time,
    /// Last change of the attributes.
    pub ctime: Time,
}

/// The subset of attributes kept for weak cache consistency (`wcc_attr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WccAttr {
    /// Size in bytes.
    pub size: u64,
    /// Last modification.
    pub mtime: Time,
    /// Last attribute change.
    pub ctime: Time,
}

impl From<&Attr> for WccAttr {
    fn from(a: &Attr) -> Self {
        Self {
            size: a.size,
            mtime: a.mtime,
            ctime: a.ctime,
        }
    }
}

/// Attributes before and after a change (`wcc_data`). Either may be missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Wcc {
    /// Before the operation.
    pub before: Option<WccAttr>,
    /// After the operation.
    pub after: Option<Attr>,
}

/// How to set a timestamp (`set_atime` / `set_mtime`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SetTime {
    /// Leave it.
    #[default]
    DontChange,
    /// The server's current time.
    ServerTime,
    /// This time.
    ClientTime(Time),
}

/// Attributes to set (`sattr3`); `None` leaves a field unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SetAttr {
    /// New permission bits (`& 0o7777`).
    pub mode: Option<u32>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
    /// New size: truncate or extend with zeros.
    pub size: Option<u64>,
    /// New access time.
    pub atime: SetTime,
    /// New modification time.
    pub mtime: SetTime,
}

/// How CREATE behaves if the name exists (`createhow3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateHow {
    /// Create, or open the existing file (then apply `size` if given, as O_TRUNC).
    Unchecked(SetAttr),
    /// Fail with [`FsError::Exist`](crate::FsError::Exist) if the name exists.
    Guarded(SetAttr),
    /// Exclusive create: the verifier is stored with the file so that a
    /// retransmitted CREATE with the same verifier succeeds and returns the same
    /// file, while a different verifier gets `Exist`. The client then sets the
    /// real attributes with SETATTR.
    Exclusive(CreateVerifier),
}

/// The 8-byte verifier of an exclusive CREATE.
pub type CreateVerifier = [u8; 8];
/// The 8-byte READDIR cookie verifier.
pub type CookieVerifier = [u8; 8];
/// The 8-byte WRITE/COMMIT verifier.
pub type WriteVerifier = [u8; 8];

/// What a successful create-like operation returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Created {
    /// The new object's handle.
    pub handle: BackendHandle,
    /// Its attributes.
    pub attr: Attr,
    /// The parent directory's wcc.
    pub dir_wcc: Wcc,
}

/// A special file for MKNOD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecialNode {
    /// Character device (major, minor).
    Char(u32, u32),
    /// Block device (major, minor).
    Block(u32, u32),
    /// Unix-domain socket.
    Socket,
    /// Named pipe.
    Fifo,
}

/// Write stability (`stable_how`), ordered weakest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stability {
    /// May be lost until COMMIT.
    Unstable,
    /// Data (and the metadata needed to read it back) durable before the reply.
    DataSync,
    /// Data and all metadata durable before the reply.
    FileSync,
}

/// A successful READ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOk {
    /// Bytes appended to the output.
    pub count: u32,
    /// The read reached the end of the file.
    pub eof: bool,
    /// Post-op attributes.
    pub attr: Option<Attr>,
}

/// A successful WRITE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOk {
    /// Bytes written.
    pub count: u32,
    /// Stability reached (at least the one requested).
    pub committed: Stability,
    /// The file's wcc.
    pub wcc: Wcc,
}

/// One directory entry handed to a READDIR sink.
#[derive(Debug, Clone, Copy)]
pub struct DirEntry<'a> {
    /// File id (inode number).
    pub fileid: u64,
    /// Name, as bytes.
    pub name: &'a [u8],
    /// Cookie to resume after this entry.
    pub cookie: u64,
    /// With `plus`: the handle and attributes, when available (never for
    /// `..`).
    pub plus: Option<(BackendHandle, Attr)>,
}

/// How a READDIR ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReaddirEnd {
    /// The directory's post-op attributes.
    pub dir_attr: Option<Attr>,
    /// The verifier to send back with cookies from this reply.
    pub verifier: CookieVerifier,
    /// True when every entry was handed out (the sink never said full).
    pub eof: bool,
}

/// FSSTAT results (bytes and file slots).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FsStat {
    /// Total bytes.
    pub total_bytes: u64,
    /// Free bytes.
    pub free_bytes: u64,
    /// Free bytes available to the caller.
    pub avail_bytes: u64,
    /// Total file slots (inodes).
    pub total_files: u64,
    /// Free file slots.
    pub free_files: u64,
    /// Free file slots available to the caller.
    pub avail_files: u64,
}

/// Static properties for FSINFO and PATHCONF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsInfo {
    /// Largest file size.
    pub max_file_size: u64,
    /// Timestamp granularity.
    pub time_delta: Time,
    /// Hard links supported.
    pub link: bool,
    /// Symlinks supported.
    pub symlink: bool,
    /// Largest link count.
    pub max_link: u32,
    /// Longest name in bytes.
    pub max_name: u32,
    /// Names are case-insensitive.
    pub case_insensitive: bool,
    /// Case is preserved.
    pub case_preserving: bool,
    /// chown restricted to root.
    pub chown_restricted: bool,
    /// Long names are refused (not truncated).
    pub no_trunc: bool,
}

/// ACCESS bits (RFC 1813 §3.3.4).
pub mod access {
    /// Read data or list a directory.
    pub const READ: u32 = 0x01;
    /// Look up a name in a directory.
    pub const LOOKUP: u32 = 0x02;
    /// Rewrite existing data or modify directory entries.
    pub const MODIFY: u32 = 0x04;
    /// Write new data or add directory entries.
    pub const EXTEND: u32 = 0x08;
    /// Delete a directory entry.
    pub const DELETE: u32 = 0x10;
    /// Execute a file (no meaning for directories).
    pub const EXECUTE: u32 = 0x20;
    /// Every bit.
    pub const ALL: u32 = 0x3f;
}

/// What a backend's directory listing caches did since it opened
/// ([`Filesystem::listing_stats`](crate::Filesystem::listing_stats)); all
/// zero for a backend without them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListingStats {
    /// READDIRPLUS entries answered from cached attributes.
    pub attrs_cached: u64,
    /// READDIRPLUS entries whose attributes were read from the file system.
    pub attrs_read: u64,
    /// READDIR and READDIRPLUS calls answered from cached `getdents` chunks.
    pub chunk_calls: u64,
    /// `getdents` chunks read into the cache.
    pub chunks_read: u64,
}
