//! What each op sends and how its replies are checked.
//!
//! Call headers (record mark, XID, program, version, procedure, AUTH_SYS
//! credential, AUTH_NONE verifier) are encoded once per procedure; a call is
//! its header copied with the XID patched in, followed by its arguments
//! (rnfs-nfs3's encoders). Calls whose arguments never change (NULL, GETATTR
//! and ACCESS of the test file, COMMIT) are encoded whole, once. WRITE data
//! is not copied: it goes out as a separate `writev` segment.
//!
//! Replies are checked as far as the op needs: the NFS status (the first word
//! of the results) always; READ and WRITE the byte count; READDIRPLUS every
//! entry (to continue the listing).

use std::io::Write as _;
use std::sync::Arc;

use rnfs_client::Credential;
use rnfs_nfs3::{
    DirOpArgs3, Entryplus3, FileHandle, NfsProc3, Nfsstat3, PostOpAttr, ReadArgs, ReaddirplusArgs,
    WccData, NFS_PROGRAM, NFS_V3,
};
use rnfs_rpc::record::LAST_FRAGMENT;
use rnfs_rpc::{encode_call_header, Auth, AuthSys, Gids, ReplyStatus};
use rnfs_xdr::{padded_len, Decode, DecodeError, Encode, Reader, Writer};

use super::engine::OutQueue;
use super::fixtures::{Fixtures, Target};
use super::{LoadOp, LoadParams};

/// ACCESS mask: READ | LOOKUP | MODIFY | EXTEND | DELETE | EXECUTE, as the
/// Linux client asks.
const ACCESS_ALL: u32 = 0x3f;
/// Procedures of NFSv3 (0..=21).
pub(crate) const PROCS: usize = rnfs_nfs3::NFS3_PROC_NAMES.len();
/// Entries of the last READDIRPLUS page a mix slot keeps as targets.
const MIX_KEEP: usize = 15;

/// The mix's 16-call cycle: 1 READDIRPLUS, 7 GETATTR, 4 LOOKUP, 4 ACCESS.
const MIX_CYCLE: [NfsProc3; 16] = [
    NfsProc3::Readdirplus,
    NfsProc3::Getattr,
    NfsProc3::Lookup,
    NfsProc3::Access,
    NfsProc3::Getattr,
    NfsProc3::Getattr,
    NfsProc3::Lookup,
    NfsProc3::Access,
    NfsProc3::Getattr,
    NfsProc3::Getattr,
    NfsProc3::Lookup,
    NfsProc3::Access,
    NfsProc3::Getattr,
    NfsProc3::Getattr,
    NfsProc3::Lookup,
    NfsProc3::Access,
];

/// Everything the threads share about the calls to make.
#[derive(Debug)]
pub(crate) struct Workload {
    pub(crate) op: LoadOp,
    /// Calls in flight per connection.
    pub(crate) depth: u32,
    size: u32,
    /// Random offsets are `size * below(slots)`.
    offset_slots: u64,
    dir_entries: u64,
    name_width: u8,
    commit_every: u32,
    dir_page: u32,
    pub(crate) file: Option<FileHandle>,
    dir: Option<FileHandle>,
    cr_dirs: Vec<FileHandle>,
    /// Call header per procedure (from the XID to the verifier; XID 0).
    headers: Vec<Vec<u8>>,
    null_rec: Vec<u8>,
    getattr_rec: Vec<u8>,
    access_rec: Vec<u8>,
    commit_rec: Vec<u8>,
    /// WRITE data, shared by every call.
    pub(crate) payload: Arc<[u8]>,
    /// Tells this run's create-remove names from earlier runs'.
    tag: u32,
    /// Largest reply expected (READ data or a READDIRPLUS page, plus headers).
    pub(crate) max_reply: usize,
}

/// Per-connection state of the ops.
#[derive(Debug)]
pub(crate) struct ConnCtx {
    /// The connection's number.
    pub(crate) index: usize,
    rng: Rng,
    /// WRITEs since the last COMMIT.
    writes: u32,
    /// Next create-remove name.
    seq: u64,
}

impl ConnCtx {
    pub(crate) fn new(index: usize, seed: u64) -> ConnCtx {
        ConnCtx {
            index,
            rng: Rng::new(seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            writes: 0,
            seq: 0,
        }
    }
}

/// A short file name kept inline.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Name {
    bytes: [u8; 32],
    len: u8,
}

impl Name {
    fn from_slice(s: &[u8]) -> Option<Name> {
        let mut bytes = [0; 32];
        bytes.get_mut(..s.len())?.copy_from_slice(s);
        Some(Name {
            bytes,
            len: s.len() as u8,
        })
    }

    /// `f<n>`, `n` in at least `width` digits (zero-padded): the names of
    /// the directory's entries. `width` is at most [`MAX_NAME_WIDTH`].
    pub(crate) fn entry(n: u64, width: u8) -> Name {
        let mut digits = [b'0'; MAX_NAME_WIDTH as usize];
        let mut i = digits.len();
        let mut v = n;
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        i = i.min(digits.len().saturating_sub(usize::from(width)));
        let mut bytes = [0; 32];
        bytes[0] = b'f';
        let len = 1 + digits.len() - i;
        bytes[1..len].copy_from_slice(&digits[i..]);
        Name {
            bytes,
            len: len as u8,
        }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

/// Most digits of an entry name: those of `u64::MAX`.
pub(crate) const MAX_NAME_WIDTH: u8 = 20;

/// Whether `n` takes at most `width` digits (always, for width 0).
pub(crate) fn fits_width(n: u64, width: u8) -> bool {
    width == 0 || width >= MAX_NAME_WIDTH || n < 10u64.pow(u32::from(width))
}

/// The entry number `name` stands for: `f` and decimal digits, exactly
/// `width` of them, or, for width 0, with no leading zero.
pub(crate) fn parse_entry(name: &[u8], width: u8) -> Option<u64> {
    let digits = name.strip_prefix(b"f")?;
    let canonical = match width {
        0 => !digits.starts_with(b"0") || digits.len() == 1,
        w => digits.len() == usize::from(w),
    };
    if !canonical || digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// The directory of `k` entries named with `width` digits.
pub(crate) fn entries_dir_name(k: u64, width: u8) -> String {
    match width {
        0 => format!("dir-{k}"),
        w => format!("dir-{k}-w{w}"),
    }
}

/// A position in a READDIRPLUS listing.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Cursor {
    cookie: u64,
    verf: [u8; 8],
}

/// An entry of a mix slot's last page.
#[derive(Debug, Clone)]
pub(crate) struct Kept {
    fh: FileHandle,
    name: Name,
}

/// What a slot (one call in flight) is in the middle of.
#[derive(Debug)]
pub(crate) enum SlotState {
    /// Independent calls.
    Plain,
    /// create-remove: `removing` once the CREATE of `name` succeeded.
    Pair { removing: bool, name: Name },
    /// readdirplus: the slot's listing.
    Listing(Cursor),
    /// mix: the position in the cycle, the listing, and the entries of the
    /// last page.
    Mix {
        step: usize,
        cursor: Cursor,
        kept: Vec<Kept>,
        next: usize,
    },
}

/// How a reply ended its call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The call succeeded: payload bytes moved, directory entries returned,
    /// and whether the page ended a listing.
    Done { bytes: u64, entries: u32, eof: bool },
    /// The call is half done (CREATE of a pair); its next RPC follows.
    Continue,
    /// The call failed with this status (an `NFS3ERR_*` name or a reply that
    /// does not decode).
    Failed(&'static str),
}

impl Workload {
    pub(crate) fn new(p: &LoadParams, target: &Target, fx: Fixtures) -> Workload {
        let headers = (0..PROCS as u32)
            .map(|proc_| call_header(&target.cred, proc_))
            .collect::<Vec<_>>();
        let mut w = Workload {
            op: p.op,
            depth: p.depth,
            size: p.size,
            offset_slots: (p.file_size / u64::from(p.size)).max(1),
            dir_entries: p.dir_entries.max(1),
            name_width: p.name_width,
            commit_every: p.commit_every,
            dir_page: p.dir_page,
            file: fx.file,
            dir: fx.dir,
            cr_dirs: fx.cr_dirs,
            headers,
            null_rec: Vec::new(),
            getattr_rec: Vec::new(),
            access_rec: Vec::new(),
            commit_rec: Vec::new(),
            payload: vec![0x5a; p.size as usize].into(),
            tag: rnfs_client::transport::xid_seed(),
            max_reply: (p.size.max(p.dir_page) as usize) + (64 << 10),
        };
        let mut buf = Vec::new();
        let start = w.begin(&mut buf, NfsProc3::Null, 0);
        finish(&mut buf, start, 0);
        w.null_rec = std::mem::take(&mut buf);
        if let Some(file) = w.file {
            let start = w.begin(&mut buf, NfsProc3::Getattr, 0);
            file.as_fh3().encode(&mut Writer::new(&mut buf));
            finish(&mut buf, start, 0);
            w.getattr_rec = std::mem::take(&mut buf);
            let start = w.begin(&mut buf, NfsProc3::Access, 0);
            let mut wr = Writer::new(&mut buf);
            file.as_fh3().encode(&mut wr);
            wr.write_u32(ACCESS_ALL);
            finish(&mut buf, start, 0);
            w.access_rec = std::mem::take(&mut buf);
            let start = w.begin(&mut buf, NfsProc3::Commit, 0);
            let mut wr = Writer::new(&mut buf);
            file.as_fh3().encode(&mut wr);
            wr.write_u64(0);
            wr.write_u32(0);
            finish(&mut buf, start, 0);
            w.commit_rec = std::mem::take(&mut buf);
        }
        w
    }

    /// A record-marked NULL call with `xid`.
    pub(crate) fn null_record(&self, xid: u32) -> Vec<u8> {
        let mut rec = self.null_rec.clone();
        patch_xid(&mut rec, 0, xid);
        rec
    }

    /// The state of a fresh slot.
    pub(crate) fn slot_state(&self) -> SlotState {
        match self.op {
            LoadOp::CreateRemove => SlotState::Pair {
                removing: false,
                name: Name::entry(0, 0),
            },
            LoadOp::Readdirplus => SlotState::Listing(Cursor::default()),
            LoadOp::Mix => SlotState::Mix {
                step: 0,
                cursor: Cursor::default(),
                kept: Vec::with_capacity(MIX_KEEP),
                next: 0,
            },
            _ => SlotState::Plain,
        }
    }

    /// Appends the slot's next call with `xid` to `out`; returns its procedure.
    pub(crate) fn encode(
        &self,
        ctx: &mut ConnCtx,
        st: &mut SlotState,
        xid: u32,
        out: &mut OutQueue,
    ) -> NfsProc3 {
        match st {
            SlotState::Plain => self.encode_plain(ctx, xid, out),
            SlotState::Pair { removing, name } => {
                let dir = self.cr_dir(ctx.index);
                let buf = out.buf();
                if *removing {
                    let start = self.begin(buf, NfsProc3::Remove, xid);
                    dirop(dir, name.as_bytes()).encode(&mut Writer::new(buf));
                    finish(buf, start, 0);
                    return NfsProc3::Remove;
                }
                *name = self.pair_name(ctx);
                let start = self.begin(buf, NfsProc3::Create, xid);
                let mut w = Writer::new(buf);
                dirop(dir, name.as_bytes()).encode(&mut w);
                w.write_u32(1); // GUARDED
                rnfs_nfs3::Sattr3 {
                    mode: Some(0o644),
                    ..Default::default()
                }
                .encode(&mut w);
                finish(buf, start, 0);
                NfsProc3::Create
            }
            SlotState::Listing(cursor) => {
                self.encode_readdirplus(out.buf(), *cursor, xid);
                NfsProc3::Readdirplus
            }
            SlotState::Mix {
                step,
                cursor,
                kept,
                next,
            } => {
                let proc_ = MIX_CYCLE[*step];
                *step = (*step + 1) % MIX_CYCLE.len();
                let target = if kept.is_empty() {
                    None
                } else {
                    *next = next.wrapping_add(1);
                    kept.get(*next % kept.len())
                };
                let buf = out.buf();
                match (proc_, target) {
                    (NfsProc3::Readdirplus, _) => self.encode_readdirplus(buf, *cursor, xid),
                    (NfsProc3::Lookup, Some(k)) => self.encode_lookup(buf, k.name, xid),
                    (NfsProc3::Lookup, None) => {
                        let name = Name::entry(ctx.rng.below(self.dir_entries), self.name_width);
                        self.encode_lookup(buf, name, xid);
                    }
                    (_, target) => {
                        let fh = target.map(|k| &k.fh).or(self.dir.as_ref());
                        let start = self.begin(buf, proc_, xid);
                        let mut w = Writer::new(buf);
                        if let Some(fh) = fh {
                            fh.as_fh3().encode(&mut w);
                        }
                        if proc_ == NfsProc3::Access {
                            w.write_u32(ACCESS_ALL);
                        }
                        finish(buf, start, 0);
                    }
                }
                proc_
            }
        }
    }

    fn encode_plain(&self, ctx: &mut ConnCtx, xid: u32, out: &mut OutQueue) -> NfsProc3 {
        match self.op {
            LoadOp::Getattr => {
                fixed(out.buf(), &self.getattr_rec, xid);
                NfsProc3::Getattr
            }
            LoadOp::Access => {
                fixed(out.buf(), &self.access_rec, xid);
                NfsProc3::Access
            }
            LoadOp::Lookup => {
                let name = Name::entry(ctx.rng.below(self.dir_entries), self.name_width);
                self.encode_lookup(out.buf(), name, xid);
                NfsProc3::Lookup
            }
            LoadOp::Read => {
                let buf = out.buf();
                let start = self.begin(buf, NfsProc3::Read, xid);
                ReadArgs {
                    file: self.file_fh3(),
                    offset: self.random_offset(ctx),
                    count: self.size,
                }
                .encode(&mut Writer::new(buf));
                finish(buf, start, 0);
                NfsProc3::Read
            }
            LoadOp::Write if self.commit_every > 0 && ctx.writes >= self.commit_every => {
                ctx.writes = 0;
                fixed(out.buf(), &self.commit_rec, xid);
                NfsProc3::Commit
            }
            LoadOp::Write => {
                ctx.writes += 1;
                let offset = self.random_offset(ctx);
                let buf = out.buf();
                let start = self.begin(buf, NfsProc3::Write, xid);
                let mut w = Writer::new(buf);
                self.file_fh3().encode(&mut w);
                w.write_u64(offset);
                w.write_u32(self.size);
                w.write_u32(0); // UNSTABLE
                w.write_u32(self.size); // opaque data<> length
                let data = self.size as usize;
                let pad = padded_len(data) - data;
                finish(buf, start, data + pad);
                out.push_payload(data);
                out.buf().extend_from_slice(&[0; 3][..pad]);
                NfsProc3::Write
            }
            _ => {
                fixed(out.buf(), &self.null_rec, xid);
                NfsProc3::Null
            }
        }
    }

    fn encode_lookup(&self, buf: &mut Vec<u8>, name: Name, xid: u32) {
        let start = self.begin(buf, NfsProc3::Lookup, xid);
        if let Some(dir) = &self.dir {
            dirop(dir, name.as_bytes()).encode(&mut Writer::new(buf));
        }
        finish(buf, start, 0);
    }

    fn encode_readdirplus(&self, buf: &mut Vec<u8>, cursor: Cursor, xid: u32) {
        let start = self.begin(buf, NfsProc3::Readdirplus, xid);
        if let Some(dir) = &self.dir {
            ReaddirplusArgs {
                dir: dir.as_fh3(),
                cookie: cursor.cookie,
                cookieverf: cursor.verf,
                dircount: self.dir_page / 8,
                maxcount: self.dir_page,
            }
            .encode(&mut Writer::new(buf));
        }
        finish(buf, start, 0);
    }

    /// Checks the results of a successful RPC and advances the slot.
    pub(crate) fn on_reply(&self, st: &mut SlotState, proc_: NfsProc3, results: &[u8]) -> Outcome {
        let mut r = Reader::new(results);
        if proc_ == NfsProc3::Null {
            return Outcome::Done {
                bytes: 0,
                entries: 0,
                eof: false,
            };
        }
        let status = match Nfsstat3::decode(&mut r) {
            Ok(s) => s,
            Err(DecodeError::BadDiscriminant { .. }) => {
                self.reset(st);
                return Outcome::Failed("NFS3ERR_UNKNOWN");
            }
            Err(_) => {
                self.reset(st);
                return Outcome::Failed("BAD_RESULTS");
            }
        };
        if status != Nfsstat3::Ok {
            self.reset(st);
            return Outcome::Failed(nfsstat_name(status));
        }
        let done = |bytes| Outcome::Done {
            bytes,
            entries: 0,
            eof: false,
        };
        let parsed = match proc_ {
            NfsProc3::Read => read_count(&mut r).map(|n| done(u64::from(n))),
            NfsProc3::Write => write_count(&mut r).map(|n| done(u64::from(n))),
            NfsProc3::Readdirplus => self.on_page(st, &mut r),
            NfsProc3::Create => {
                if let SlotState::Pair { removing, .. } = st {
                    *removing = true;
                }
                Ok(Outcome::Continue)
            }
            NfsProc3::Remove => {
                if let SlotState::Pair { removing, .. } = st {
                    *removing = false;
                }
                Ok(done(0))
            }
            _ => Ok(done(0)),
        };
        parsed.unwrap_or_else(|_| {
            self.reset(st);
            Outcome::Failed("BAD_RESULTS")
        })
    }

    /// A failed RPC ends a create-remove pair and restarts a listing.
    pub(crate) fn reset(&self, st: &mut SlotState) {
        match st {
            SlotState::Plain => {}
            SlotState::Pair { removing, .. } => *removing = false,
            SlotState::Listing(c) | SlotState::Mix { cursor: c, .. } => *c = Cursor::default(),
        }
    }

    fn on_page(&self, st: &mut SlotState, r: &mut Reader<'_>) -> Result<Outcome, DecodeError> {
        let (cursor, mut keep) = match st {
            SlotState::Listing(c) => (c, None),
            SlotState::Mix {
                cursor, kept, next, ..
            } => (cursor, Some((kept, next))),
            _ => {
                return Err(DecodeError::UnexpectedEnd {
                    type_name: "READDIRPLUS3resok",
                    needed: 0,
                    remaining: 0,
                })
            }
        };
        let _dir_attr = PostOpAttr::decode(r)?;
        let verf = <[u8; 8]>::decode(r)?;
        let mut entries = 0u32;
        let mut last = None;
        let mut cleared = false;
        while r.read_bool()? {
            let e = Entryplus3::decode(r)?;
            entries += 1;
            last = Some(e.cookie);
            if let Some((kept, next)) = keep.as_mut() {
                if !cleared {
                    kept.clear();
                    **next = usize::MAX;
                    cleared = true;
                }
                if kept.len() < MIX_KEEP {
                    if let (Some(fh), Some(name)) = (e.name_handle, Name::from_slice(e.name)) {
                        kept.push(Kept { fh, name });
                    }
                }
            }
        }
        let eof = r.read_bool()?;
        match last {
            Some(cookie) if !eof => *cursor = Cursor { cookie, verf },
            None if !eof => {
                *cursor = Cursor::default();
                return Ok(Outcome::Failed("EMPTY_PAGE"));
            }
            _ => *cursor = Cursor::default(),
        }
        Ok(Outcome::Done {
            bytes: 0,
            entries,
            eof,
        })
    }

    fn begin(&self, buf: &mut Vec<u8>, proc_: NfsProc3, xid: u32) -> usize {
        let start = buf.len();
        buf.extend_from_slice(&[0; 4]);
        if let Some(h) = self.headers.get(u32::from(proc_) as usize) {
            buf.extend_from_slice(h);
        }
        patch_xid(buf, start, xid);
        start
    }

    fn file_fh3(&self) -> rnfs_nfs3::NfsFh3<'_> {
        match &self.file {
            Some(f) => f.as_fh3(),
            None => rnfs_nfs3::NfsFh3::default(), // only ops with a file use it
        }
    }

    fn cr_dir(&self, conn: usize) -> &FileHandle {
        &self.cr_dirs[conn % self.cr_dirs.len().max(1)]
    }

    fn random_offset(&self, ctx: &mut ConnCtx) -> u64 {
        ctx.rng.below(self.offset_slots) * u64::from(self.size)
    }

    fn pair_name(&self, ctx: &mut ConnCtx) -> Name {
        ctx.seq += 1;
        let mut bytes = [0u8; 32];
        let mut cur = std::io::Cursor::new(&mut bytes[..]);
        let _ = write!(cur, "{:08x}.{}", self.tag, ctx.seq);
        let len = cur.position() as u8;
        Name { bytes, len }
    }
}

/// The name of an `nfsstat3` as RFC 1813 spells it.
pub(crate) fn nfsstat_name(s: Nfsstat3) -> &'static str {
    match s {
        Nfsstat3::Ok => "NFS3_OK",
        Nfsstat3::Perm => "NFS3ERR_PERM",
        Nfsstat3::Noent => "NFS3ERR_NOENT",
        Nfsstat3::Io => "NFS3ERR_IO",
        Nfsstat3::Nxio => "NFS3ERR_NXIO",
        Nfsstat3::Acces => "NFS3ERR_ACCES",
        Nfsstat3::Exist => "NFS3ERR_EXIST",
        Nfsstat3::Xdev => "NFS3ERR_XDEV",
        Nfsstat3::Nodev => "NFS3ERR_NODEV",
        Nfsstat3::Notdir => "NFS3ERR_NOTDIR",
        Nfsstat3::Isdir => "NFS3ERR_ISDIR",
        Nfsstat3::Inval => "NFS3ERR_INVAL",
        Nfsstat3::Fbig => "NFS3ERR_FBIG",
        Nfsstat3::Nospc => "NFS3ERR_NOSPC",
        Nfsstat3::Rofs => "NFS3ERR_ROFS",
        Nfsstat3::Mlink => "NFS3ERR_MLINK",
        Nfsstat3::Nametoolong => "NFS3ERR_NAMETOOLONG",
        Nfsstat3::Notempty => "NFS3ERR_NOTEMPTY",
        Nfsstat3::Dquot => "NFS3ERR_DQUOT",
        Nfsstat3::Stale => "NFS3ERR_STALE",
        Nfsstat3::Remote => "NFS3ERR_REMOTE",
        Nfsstat3::Badhandle => "NFS3ERR_BADHANDLE",
        Nfsstat3::NotSync => "NFS3ERR_NOT_SYNC",
        Nfsstat3::BadCookie => "NFS3ERR_BAD_COOKIE",
        Nfsstat3::Notsupp => "NFS3ERR_NOTSUPP",
        Nfsstat3::Toosmall => "NFS3ERR_TOOSMALL",
        Nfsstat3::Serverfault => "NFS3ERR_SERVERFAULT",
        Nfsstat3::Badtype => "NFS3ERR_BADTYPE",
        Nfsstat3::Jukebox => "NFS3ERR_JUKEBOX",
    }
}

/// The name of an RPC-level refusal.
pub(crate) fn reply_status_name(s: &ReplyStatus) -> &'static str {
    match s {
        ReplyStatus::Success => "RPC_SUCCESS",
        ReplyStatus::ProgUnavail => "RPC_PROG_UNAVAIL",
        ReplyStatus::ProgMismatch { .. } => "RPC_PROG_MISMATCH",
        ReplyStatus::ProcUnavail => "RPC_PROC_UNAVAIL",
        ReplyStatus::GarbageArgs => "RPC_GARBAGE_ARGS",
        ReplyStatus::SystemErr => "RPC_SYSTEM_ERR",
        ReplyStatus::RpcMismatch { .. } => "RPC_MISMATCH",
        ReplyStatus::AuthError(_) => "RPC_AUTH_ERROR",
        _ => "RPC_REJECTED",
    }
}

/// The name of a procedure, for the per-procedure call counts.
pub(crate) fn proc_name(p: usize) -> &'static str {
    rnfs_nfs3::NFS3_PROC_NAMES
        .get(p)
        .copied()
        .unwrap_or("UNKNOWN")
}

/// READ3resok after the status: attributes, then the count.
fn read_count(r: &mut Reader<'_>) -> Result<u32, DecodeError> {
    PostOpAttr::decode(r)?;
    r.read_u32()
}

/// WRITE3resok after the status: wcc data, then the count.
fn write_count(r: &mut Reader<'_>) -> Result<u32, DecodeError> {
    WccData::decode(r)?;
    r.read_u32()
}

fn dirop<'a>(dir: &'a FileHandle, name: &'a [u8]) -> DirOpArgs3<'a> {
    DirOpArgs3 {
        dir: dir.as_fh3(),
        name,
    }
}

/// Appends a whole pre-encoded record with its XID replaced.
fn fixed(buf: &mut Vec<u8>, rec: &[u8], xid: u32) {
    let start = buf.len();
    buf.extend_from_slice(rec);
    patch_xid(buf, start, xid);
}

fn patch_xid(buf: &mut [u8], record_start: usize, xid: u32) {
    if let Some(x) = buf.get_mut(record_start + 4..record_start + 8) {
        x.copy_from_slice(&xid.to_be_bytes());
    }
}

/// Patches the record mark at `start`: one last fragment holding everything
/// after it plus `extra` bytes still to be queued.
fn finish(buf: &mut [u8], start: usize, extra: usize) {
    let len = buf.len() - start - 4 + extra;
    // Calls are at most 1 MiB of data plus headers: far below 2^31.
    let mark = LAST_FRAGMENT | (len as u32 & !LAST_FRAGMENT);
    buf[start..start + 4].copy_from_slice(&mark.to_be_bytes());
}

/// The call header of `proc_` (XID 0) as `cred`.
fn call_header(cred: &Credential, proc_: u32) -> Vec<u8> {
    let gids = Gids::new(&cred.gids[..cred.gids.len().min(16)]).unwrap_or_default();
    let auth = Auth::Sys(AuthSys {
        stamp: 0,
        machine_name: cred.machine_name.as_bytes(),
        uid: cred.uid,
        gid: cred.gid,
        gids,
    });
    let mut out = Vec::with_capacity(128);
    encode_call_header(
        &mut Writer::new(&mut out),
        0,
        NFS_PROGRAM,
        NFS_V3,
        proc_,
        &auth,
    );
    out
}

/// A seed that differs on every run (clock and process id).
pub(crate) fn time_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ u64::from(std::process::id())
}

/// xorshift64*: deterministic per seed, no dependency.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform enough in `0..n` (`n` > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn entry_names_are_f_and_decimal() {
        assert_eq!(Name::entry(0, 0).as_bytes(), b"f0");
        assert_eq!(Name::entry(1_000_000, 0).as_bytes(), b"f1000000");
        assert_eq!(
            Name::entry(u64::MAX, 0).as_bytes(),
            format!("f{}", u64::MAX).as_bytes()
        );
        assert_eq!(Name::entry(0, 7).as_bytes(), b"f0000000");
        assert_eq!(Name::entry(999_999, 7).as_bytes(), b"f0999999");
        // Wider than the width: all the digits, as `fits_width` refuses.
        assert_eq!(Name::entry(12_345, 3).as_bytes(), b"f12345");
        assert_eq!(
            Name::entry(u64::MAX, MAX_NAME_WIDTH).as_bytes(),
            format!("f{}", u64::MAX).as_bytes()
        );
    }

    #[test]
    fn entry_names_parse_back_only_in_their_own_width() {
        for width in [0, 1, 7, MAX_NAME_WIDTH] {
            for n in [0, 9, 10, 999_999, u64::MAX] {
                if fits_width(n, width) {
                    let name = Name::entry(n, width);
                    assert_eq!(parse_entry(name.as_bytes(), width), Some(n), "{n} {width}");
                }
            }
        }
        assert!(fits_width(9_999_999, 7) && !fits_width(10_000_000, 7));
        assert_eq!(parse_entry(b"f0000012", 0), None);
        assert_eq!(parse_entry(b"f12", 7), None);
        assert_eq!(parse_entry(b"f00000012", 7), None);
        assert_eq!(parse_entry(b"f", 0), None);
        assert_eq!(parse_entry(b"f+123456", 7), None);
        assert_eq!(parse_entry(b"g0000012", 7), None);
        assert_eq!(parse_entry(b"f99999999999999999999", 20), None);
        assert_eq!(entries_dir_name(1000, 0), "dir-1000");
        assert_eq!(entries_dir_name(1000, 7), "dir-1000-w7");
    }

    #[test]
    fn finish_marks_one_last_fragment() {
        let mut buf = vec![0xee, 0, 0, 0, 0, 1, 2, 3, 4];
        finish(&mut buf, 1, 4096);
        assert_eq!(&buf[1..5], &(0x8000_0000u32 | 4100).to_be_bytes());
    }
}
