//! READDIR and READDIRPLUS results (RFC 1813 §3.3.16, §3.3.17): the owned or
//! borrowed form the client decodes, and streaming encoders the server drives one
//! entry at a time within the client's byte budgets.
//!
//! # Budgets
//!
//! A directory can be far larger than one reply, so the server never builds a
//! `Vec` of entries: it calls [`ReaddirEncoder::push`] (or
//! [`ReaddirplusEncoder::push`]) per entry until one does not fit, then
//! [`finish`](ReaddirEncoder::finish)es the reply with `eof = false`.
//!
//! - **`count` / `maxcount`** bound the whole result: every byte from the status
//!   word to the closing `entries = FALSE, eof` trailer, plus `reply_overhead`,
//!   the bytes of the reply the caller has already used (RPC reply header,
//!   record mark) and wants counted too. Pass 0 for the RFC's strict "size of the
//!   resok structure".
//! - **`dircount`** (READDIRPLUS only) bounds the directory information alone:
//!   for each entry, its `fileid` (8), `name` (4 + padded length) and `cookie`
//!   (8): the RFC's "bytes of directory information", as Linux counts them.
//!
//! A push that would exceed either budget writes nothing and returns `false`;
//! every later push is refused too, and `finish` then sends `eof = false` whatever
//! it is told. If not even one entry fit ([`is_too_small`]), the server answers
//! `NFS3ERR_TOOSMALL` with [`too_small`] instead. The encoded result never
//! exceeds the budget unless the empty reply (status, attributes, verifier,
//! trailer: 24 bytes, 108 with directory attributes) alone does.
//!
//! [`is_too_small`]: ReaddirEncoder::is_too_small
//! [`too_small`]: ReaddirEncoder::too_small

use rnfs_xdr::{padded_len, Decode, DecodeError, Encode, Reader, Writer};

use crate::types::{decode_list, encode_list, filename3};
use crate::{CookieVerf3, Fattr3, FileHandle, Nfsstat3, PostOpAttr, PostOpFh3};

/// The closing `entries = FALSE` word and the `eof` bool.
const TRAILER: usize = 8;

/// Wire size of the directory information of an entry with a `name_len`-byte
/// name: `fileid` + `name` + `cookie`. This is what READDIRPLUS's `dircount`
/// limits.
#[inline]
pub const fn dir_info_size(name_len: usize) -> usize {
    8 + 4 + padded_len(name_len) + 8
}

/// Wire size of one `entry3` in a `dirlist3`, its "value follows" flag included.
#[inline]
pub const fn entry3_size(name_len: usize) -> usize {
    4 + dir_info_size(name_len)
}

/// Wire size of one `entryplus3` in a `dirlistplus3`, its "value follows" flag
/// included.
#[inline]
pub const fn entryplus3_size(
    name_len: usize,
    has_attributes: bool,
    handle_len: Option<usize>,
) -> usize {
    let attributes = if has_attributes { Fattr3::WIRE_SIZE } else { 0 };
    let handle = match handle_len {
        Some(len) => 4 + padded_len(len),
        None => 0,
    };
    entry3_size(name_len) + 4 + attributes + 4 + handle
}

xdr_struct! {
    /// `entry3` (RFC 1813 §3.3.16): one READDIR entry.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Entry3<'a> : "entry3" {
        /// File number.
        pub fileid: u64,
        /// Name within the directory.
        pub name: &'a [u8] as filename3,
        /// Cookie to resume after this entry.
        pub cookie: u64,
    }
}

xdr_struct! {
    /// `entryplus3` (RFC 1813 §3.3.17): one READDIRPLUS entry.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Entryplus3<'a> : "entryplus3" {
        /// File number.
        pub fileid: u64,
        /// Name within the directory.
        pub name: &'a [u8] as filename3,
        /// Cookie to resume after this entry.
        pub cookie: u64,
        /// The entry's attributes, if the server returned them.
        pub name_attributes: PostOpAttr,
        /// The entry's handle, if the server returned it.
        pub name_handle: PostOpFh3,
    }
}

/// `READDIR3resok` (RFC 1813 §3.3.16), with `dirlist3` flattened into
/// `entries` and `eof`. Decoding is bounded by the input: every entry consumes at
/// least 24 bytes, and no count is read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReaddirResOk<'a> {
    /// The directory's attributes.
    pub dir_attributes: PostOpAttr,
    /// The verifier to send with later cookies.
    pub cookieverf: CookieVerf3,
    /// The entries, in directory order.
    pub entries: Vec<Entry3<'a>>,
    /// Whether the last entry is the directory's last.
    pub eof: bool,
}

impl<'a> Decode<'a> for ReaddirResOk<'a> {
    fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        r.named("READDIR3resok", |r| {
            Ok(Self {
                dir_attributes: Decode::decode(r)?,
                cookieverf: Decode::decode(r)?,
                entries: decode_list(r, Entry3::decode)?,
                eof: r.read_bool()?,
            })
        })
    }
}

impl Encode for ReaddirResOk<'_> {
    fn encode(&self, w: &mut Writer<'_>) {
        self.dir_attributes.encode(w);
        self.cookieverf.encode(w);
        encode_list(w, &self.entries, Entry3::encode);
        w.write_bool(self.eof);
    }
}

/// `READDIRPLUS3resok` (RFC 1813 §3.3.17), with `dirlistplus3` flattened into
/// `entries` and `eof`. Decoding is bounded by the input as for
/// [`ReaddirResOk`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReaddirplusResOk<'a> {
    /// The directory's attributes.
    pub dir_attributes: PostOpAttr,
    /// The verifier to send with later cookies.
    pub cookieverf: CookieVerf3,
    /// The entries, in directory order.
    pub entries: Vec<Entryplus3<'a>>,
    /// Whether the last entry is the directory's last.
    pub eof: bool,
}

impl<'a> Decode<'a> for ReaddirplusResOk<'a> {
    fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        r.named("READDIRPLUS3resok", |r| {
            Ok(Self {
                dir_attributes: Decode::decode(r)?,
                cookieverf: Decode::decode(r)?,
                entries: decode_list(r, Entryplus3::decode)?,
                eof: r.read_bool()?,
            })
        })
    }
}

impl Encode for ReaddirplusResOk<'_> {
    fn encode(&self, w: &mut Writer<'_>) {
        self.dir_attributes.encode(w);
        self.cookieverf.encode(w);
        encode_list(w, &self.entries, Entryplus3::encode);
        w.write_bool(self.eof);
    }
}

nfs_res! {
    /// `READDIR3res` (RFC 1813 §3.3.16). Servers stream it with
    /// [`ReaddirEncoder`] instead of building it.
    pub enum ReaddirRes<'a> : "READDIR3res" {
        Ok(ReaddirResOk<'a>),
        Fail {
            /// The directory's attributes.
            dir_attributes: PostOpAttr,
        }
    }
}

nfs_res! {
    /// `READDIRPLUS3res` (RFC 1813 §3.3.17). Servers stream it with
    /// [`ReaddirplusEncoder`] instead of building it.
    pub enum ReaddirplusRes<'a> : "READDIRPLUS3res" {
        Ok(ReaddirplusResOk<'a>),
        Fail {
            /// The directory's attributes.
            dir_attributes: PostOpAttr,
        }
    }
}

/// The budget bookkeeping shared by both encoders.
#[derive(Debug, Clone, Copy)]
struct Budget {
    /// `w.len()` before the status word.
    start: usize,
    /// Most bytes from `start` to the end of the trailer.
    limit: usize,
    entries: u32,
    /// A push was refused; all later ones are too.
    truncated: bool,
}

impl Budget {
    fn begin(
        w: &mut Writer<'_>,
        limit: u32,
        reply_overhead: usize,
        dir_attributes: &PostOpAttr,
        cookieverf: &CookieVerf3,
    ) -> Self {
        let start = w.len();
        Nfsstat3::Ok.encode(w);
        dir_attributes.encode(w);
        cookieverf.encode(w);
        Self {
            start,
            limit: (limit as usize).saturating_sub(reply_overhead),
            entries: 0,
            truncated: false,
        }
    }

    /// Whether `size` more bytes (plus the trailer) fit; refuses for good if not.
    fn admit(&mut self, w: &Writer<'_>, size: usize) -> bool {
        let used = w.len().saturating_sub(self.start);
        if self.truncated || used + size + TRAILER > self.limit {
            self.truncated = true;
            return false;
        }
        true
    }

    fn finish(self, w: &mut Writer<'_>, eof: bool) -> usize {
        w.write_bool(false);
        w.write_bool(eof && !self.truncated);
        w.len().saturating_sub(self.start)
    }

    fn too_small(self, w: &mut Writer<'_>, dir_attributes: &PostOpAttr) {
        w.truncate(self.start);
        Nfsstat3::Toosmall.encode(w);
        dir_attributes.encode(w);
    }
}

/// Streams a successful `READDIR3res` into a reply (see the [module docs](self)
/// for the budget).
///
/// ```
/// # use rnfs_xdr::Writer;
/// # use rnfs_nfs3::ReaddirEncoder;
/// let mut out = Vec::new();
/// let mut w = Writer::new(&mut out);
/// let mut enc = ReaddirEncoder::begin(&mut w, 4096, 0, &None, &[0; 8]);
/// assert!(enc.push(&mut w, 2, b".", 1));
/// assert!(enc.push(&mut w, 1, b"..", 2));
/// enc.finish(&mut w, true);
/// ```
#[derive(Debug)]
#[must_use = "finish the reply with `finish` or `too_small`"]
pub struct ReaddirEncoder {
    budget: Budget,
}

impl ReaddirEncoder {
    /// Writes `NFS3_OK`, the directory's attributes and the cookie verifier.
    /// `count` is `READDIR3args.count` (capped by the server beforehand if it
    /// wants); `reply_overhead` is counted against it (0: strict RFC resok size).
    pub fn begin(
        w: &mut Writer<'_>,
        count: u32,
        reply_overhead: usize,
        dir_attributes: &PostOpAttr,
        cookieverf: &CookieVerf3,
    ) -> Self {
        Self {
            budget: Budget::begin(w, count, reply_overhead, dir_attributes, cookieverf),
        }
    }

    /// Appends one entry if it fits within `count`; otherwise writes nothing and
    /// returns `false` (and refuses every later entry).
    pub fn push(&mut self, w: &mut Writer<'_>, fileid: u64, name: &[u8], cookie: u64) -> bool {
        if !self.budget.admit(w, entry3_size(name.len())) {
            return false;
        }
        w.write_bool(true);
        w.write_u64(fileid);
        w.write_string(name);
        w.write_u64(cookie);
        self.budget.entries += 1;
        true
    }

    /// Entries written so far.
    pub fn entries(&self) -> u32 {
        self.budget.entries
    }

    /// Whether a push was refused (the reply will say `eof = false`).
    pub fn is_truncated(&self) -> bool {
        self.budget.truncated
    }

    /// Whether an entry was refused before any fit: the reply should be
    /// `NFS3ERR_TOOSMALL` ([`too_small`](Self::too_small)).
    pub fn is_too_small(&self) -> bool {
        self.budget.truncated && self.budget.entries == 0
    }

    /// Closes the list. `eof` is the directory's end; it is sent as `false` if a
    /// push was refused. Returns the result's size from the status word on.
    pub fn finish(self, w: &mut Writer<'_>, eof: bool) -> usize {
        self.budget.finish(w, eof)
    }

    /// Replaces everything written since [`begin`](Self::begin) with the
    /// `NFS3ERR_TOOSMALL` failure.
    pub fn too_small(self, w: &mut Writer<'_>, dir_attributes: &PostOpAttr) {
        self.budget.too_small(w, dir_attributes);
    }
}

/// Streams a successful `READDIRPLUS3res` into a reply, honouring both `dircount`
/// and `maxcount` (see the [module docs](self)).
#[derive(Debug)]
#[must_use = "finish the reply with `finish` or `too_small`"]
pub struct ReaddirplusEncoder {
    budget: Budget,
    dircount: usize,
    dir_used: usize,
}

impl ReaddirplusEncoder {
    /// Writes `NFS3_OK`, the directory's attributes and the cookie verifier.
    /// `dircount` and `maxcount` are from `READDIRPLUS3args`; `reply_overhead` is
    /// counted against `maxcount` (0: strict RFC resok size).
    pub fn begin(
        w: &mut Writer<'_>,
        dircount: u32,
        maxcount: u32,
        reply_overhead: usize,
        dir_attributes: &PostOpAttr,
        cookieverf: &CookieVerf3,
    ) -> Self {
        Self {
            budget: Budget::begin(w, maxcount, reply_overhead, dir_attributes, cookieverf),
            dircount: dircount as usize,
            dir_used: 0,
        }
    }

    /// Appends one entry if it fits within both budgets; otherwise writes nothing
    /// and returns `false` (and refuses every later entry).
    pub fn push(
        &mut self,
        w: &mut Writer<'_>,
        fileid: u64,
        name: &[u8],
        cookie: u64,
        name_attributes: Option<&Fattr3>,
        name_handle: Option<&FileHandle>,
    ) -> bool {
        let dir_info = dir_info_size(name.len());
        if self.dir_used + dir_info > self.dircount {
            self.budget.truncated = true;
            return false;
        }
        let size = entryplus3_size(
            name.len(),
            name_attributes.is_some(),
            name_handle.map(FileHandle::len),
        );
        if !self.budget.admit(w, size) {
            return false;
        }
        w.write_bool(true);
        w.write_u64(fileid);
        w.write_string(name);
        w.write_u64(cookie);
        w.write_optional(name_attributes);
        w.write_optional(name_handle);
        self.dir_used += dir_info;
        self.budget.entries += 1;
        true
    }

    /// Entries written so far.
    pub fn entries(&self) -> u32 {
        self.budget.entries
    }

    /// Directory-information bytes used so far (against `dircount`).
    pub fn dir_bytes(&self) -> usize {
        self.dir_used
    }

    /// Whether a push was refused (the reply will say `eof = false`).
    pub fn is_truncated(&self) -> bool {
        self.budget.truncated
    }

    /// Whether an entry was refused before any fit: the reply should be
    /// `NFS3ERR_TOOSMALL` ([`too_small`](Self::too_small)).
    pub fn is_too_small(&self) -> bool {
        self.budget.truncated && self.budget.entries == 0
    }

    /// Closes the list. `eof` is the directory's end; it is sent as `false` if a
    /// push was refused. Returns the result's size from the status word on.
    pub fn finish(self, w: &mut Writer<'_>, eof: bool) -> usize {
        self.budget.finish(w, eof)
    }

    /// Replaces everything written since [`begin`](Self::begin) with the
    /// `NFS3ERR_TOOSMALL` failure.
    pub fn too_small(self, w: &mut Writer<'_>, dir_attributes: &PostOpAttr) {
        self.budget.too_small(w, dir_attributes);
    }
}
