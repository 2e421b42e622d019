//! READDIR / READDIRPLUS over `getdents64`, with the cookie scheme of the module
//! docs: `.` and `..` first with tagged cookies, then the kernel's entries with
//! their own `d_off`.

use std::cell::Cell;
use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::num::NonZeroU64;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::OnceLock;
use std::time::{Instant, SystemTime};

use rustix::fs::{self as rfs, AtFlags, OFlags, RawDir, SeekFrom};
use rustix::io::Errno;

use super::cache::{SlotHint, Updates, MAX_BATCH};
use super::dirchunks::{self, Chunk, ResumePoint, CHUNK_BYTES};
use super::dirstreams::{self, DirStream, Pending, RawEntry, StreamKey, WAYS};
use super::watches::DirWatches;
use super::{errno, handle, sys, time, LocalFs, Node};
use crate::{
    Attr, BackendHandle, CookieVerifier, DirEntry, FileType, FsError, FsResult, ListingStats, Time,
};

/// The cookie verifier: cookies are positions the file system keeps stable, so
/// there is nothing to verify (knfsd sends zeros for these file systems too).
pub(super) const VERIFIER: CookieVerifier = [0; 8];

/// The synthetic cookies of `.` and `..` are positions no file system we
/// serve hands out: ext4's hash positions are `(major >> 1) << 32 | minor`
/// and its major hash is never 0xffff_fffe or odd, so bits 32..63 are never
/// all ones; xfs and tmpfs positions fit 32 bits; btrfs counts up from 2.
/// Bit 63 stays clear, as in every `d_off`: Linux clients hand cookies to
/// applications as `telldir` positions, and `lseek` refuses a negative one.
const SYNTHETIC: u64 = 0x7fff_ffff_0000_0000;
/// The cookie of `.`: resume with `..`.
const AFTER_DOT: u64 = SYNTHETIC | 1;
/// The cookie of `..`: resume with the first real entry.
const AFTER_DOTDOT: u64 = SYNTHETIC | 2;

/// Whether a cookie is one the kernel could have handed out: neither 0 (the
/// start), nor a negative `loff_t`, nor one of the synthetic two.
fn is_kernel_position(cookie: u64) -> bool {
    cookie != 0 && i64::try_from(cookie).is_ok() && cookie != AFTER_DOT && cookie != AFTER_DOTDOT
}

/// First `getdents64` buffer: about a hundred typical entries.
const FIRST_BUF: usize = 4 * 1024;
/// Largest `getdents64` buffer: about a thousand typical entries.
const MAX_BUF: usize = 32 * 1024;

/// `.` or `..`, which the kernel lists and the synthetic entries replace.
fn is_dot(name: &CStr) -> bool {
    matches!(name.to_bytes(), b"." | b"..")
}

fn raw_entry<'a>(entry: &'a rfs::RawDirEntry<'_>) -> RawEntry<'a> {
    RawEntry {
        ino: entry.ino(),
        cookie: entry.next_entry_cookie(),
        name: entry.file_name(),
    }
}

/// Appends to `pending` what one `getdents64` call returns (nothing at the
/// directory's end); returns how many of those entries are not `.` or `..`.
fn read_buffer(entries: &mut RawDir<'_, impl AsFd>, pending: &mut Pending) -> FsResult<u64> {
    let mut listed = 0;
    while let Some(entry) = entries.next() {
        let entry = entry.map_err(errno)?;
        let entry = raw_entry(&entry);
        listed += u64::from(!is_dot(entry.name));
        pending.push(entry);
        if entries.is_buffer_empty() {
            break;
        }
    }
    Ok(listed)
}

impl LocalFs {
    /// Hands the entries of `dir` after `cookie` to `sink`. Returns `true` when
    /// the directory ended, `false` when the sink was full.
    pub(super) fn list(
        &self,
        dir_fh: &BackendHandle,
        dir: &Node,
        cookie: u64,
        plus: bool,
        sink: &mut dyn FnMut(DirEntry<'_>) -> bool,
    ) -> FsResult<bool> {
        // Counted in this thread while the call runs, added up at its end.
        let _tally = TallyGuard::start(self);
        // Handles and attributes only for a caller who may search the
        // directory, as knfsd (which looks each name up) and LOOKUP give
        // them: the caches below answer with no system call, which would
        // check it. One stat of "." (the walk checks search permission on
        // `dir`); the descriptor path's `openat` of each name checks it.
        let plus = plus
            && (!self.privileged() || rfs::statat(&dir.fd, ".", AtFlags::SYMLINK_NOFOLLOW).is_ok());
        let (dot, dotdot, position) = match cookie {
            0 => (true, true, 0),
            AFTER_DOT => (false, true, 0),
            AFTER_DOTDOT => (false, false, 0),
            c if !is_kernel_position(c) => return Err(FsError::BadCookie),
            c => (false, false, c),
        };
        if dot {
            let entry = DirEntry {
                fileid: dir.stat.st_ino,
                name: b".",
                cookie: AFTER_DOT,
                plus: plus.then(|| (*dir_fh, self.attr(&dir.stat))),
            };
            if !sink(entry) {
                return Ok(false);
            }
        }
        if dotdot {
            // `..` carries no handle and no attributes, READDIRPLUS too
            // (RFC 1813 makes both optional; knfsd leaves them out at the
            // export root, and Linux clients skip `.` and `..` when they
            // take a listing's handles): a parent's handle is handed out
            // only after the walk up to the export root that `parent_of`
            // makes, O(depth), which every listing would pay. Its file id
            // is one stat, as in READDIR.
            let fileid = if self.is_root(&dir.stat) {
                dir.stat.st_ino
            } else {
                let parent = rfs::statat(&dir.fd, "..", AtFlags::SYMLINK_NOFOLLOW);
                parent.map_or(dir.stat.st_ino, |s| s.st_ino)
            };
            let entry = DirEntry {
                fileid,
                name: b"..",
                cookie: AFTER_DOTDOT,
                plus: None,
            };
            if !sink(entry) {
                return Ok(false);
            }
        }

        // The handle cache (unprivileged) needs a descriptor per entry.
        let describe = if !self.privileged() {
            Describe::FromDescriptor
        } else if self.inode_handles_fit(&dir.stat) {
            // READDIR too: it may list from cached chunks.
            Describe::ByNameRemembering {
                vouch: self.vouch(dir, plus),
            }
        } else {
            Describe::ByName
        };
        if let Describe::ByNameRemembering { vouch: Some(vouch) } = describe {
            if let Some(done) = self.list_chunks(dir, position, vouch, plus, describe, sink)? {
                return Ok(done);
            }
        }

        // Streams can be reused only with `faccessat2` (see `resume`) and
        // a cache to keep them in.
        let reusable =
            self.has_faccessat2.load(Ordering::Relaxed) && self.dir_streams.capacity() > 0;
        // Whether the stream may be kept when the sink is full, judged before
        // anything is read (see `dirstreams.rs`).
        let keepable =
            reusable && dirstreams::settled(dirstreams::ctime(&dir.stat), SystemTime::now());
        // A descriptor left at this cookie by an earlier call, or a fresh one.
        let resumed = if reusable {
            self.resume(dir_fh, dir, position)
        } else {
            None
        };
        let mut stream = match resumed {
            Some(stream) => stream,
            None => self.open_stream(dir, position)?,
        };
        // The cookie a client resumes from: that of the last entry handed out.
        let mut resume_at = position;

        // Small first: a sink often takes a hundred entries, and every entry
        // read beyond those is copied to `pending` (or thrown away at the end).
        // Doubles per refill.
        let mut buf = vec![MaybeUninit::<u8>::uninit(); MAX_BUF];
        let mut len = FIRST_BUF;
        'refill: loop {
            // First what `pending` holds: what an earlier call read from the
            // kernel and did not send, or the buffer read just below.
            if !self.hand_out_pending(&mut stream, plus, describe, sink, &mut resume_at)? {
                if keepable {
                    self.keep(dir_fh, resume_at, stream);
                }
                return Ok(false);
            }
            stream.pending.clear();
            let mut entries = RawDir::new(stream.fd.as_fd(), &mut buf[..len]);
            if describe.batches(plus) {
                // With the inode handle cache, one buffer's entries go into
                // `pending`, so that their handles are looked up a batch at a
                // time (`hand_out_pending`).
                read_buffer(&mut entries, &mut stream.pending)?;
                if stream.pending.is_empty() {
                    break;
                }
                len = (len * 2).min(MAX_BUF);
                continue 'refill;
            }
            while let Some(entry) = entries.next() {
                let entry = entry.map_err(errno)?;
                if !is_dot(entry.file_name()) {
                    let entry = raw_entry(&entry);
                    if !self.hand_out(stream.fd.as_fd(), entry, plus, describe, None, sink)? {
                        if !keepable {
                            return Ok(false);
                        }
                        // The descriptor is past the rest of the buffer: keep
                        // it, from this entry on, with the descriptor.
                        stream.pending.push(entry);
                        while !entries.is_buffer_empty() {
                            // No refill, so no error, while the buffer lasts.
                            let Some(Ok(rest)) = entries.next() else {
                                return Ok(false);
                            };
                            stream.pending.push(raw_entry(&rest));
                        }
                        self.keep(dir_fh, resume_at, stream);
                        return Ok(false);
                    }
                    dirstreams::count_one(&mut stream.listed);
                    resume_at = entry.cookie;
                }
                if entries.is_buffer_empty() && len < MAX_BUF {
                    // The iterator resumes at the descriptor's position.
                    len *= 2;
                    continue 'refill;
                }
            }
            break;
        }
        if let Some(entries) = stream.listed {
            // What was replaced or evicted is plain data.
            let _replaced = self.dir_sizes.insert(dir_key(&dir.stat), entries);
        }
        Ok(true)
    }

    /// Hands the entries of `stream.pending` out to `sink`, from the first
    /// not handed out yet; `false` when the sink is full (the entry it
    /// refused stays first). See `hand_out_from`.
    fn hand_out_pending(
        &self,
        stream: &mut DirStream,
        plus: bool,
        describe: Describe,
        sink: &mut dyn FnMut(DirEntry<'_>) -> bool,
        resume_at: &mut u64,
    ) -> FsResult<bool> {
        let mut out = Out {
            sink,
            resume_at: *resume_at,
            listed: stream.listed,
        };
        let mut next = stream.pending.next_index();
        let entries = Entries {
            entries: &stream.pending,
            hints: None,
        };
        let taken = self.hand_out_from(
            stream.fd.as_fd(),
            entries,
            &mut next,
            plus,
            describe,
            &mut out,
        )?;
        stream.pending.set_next_index(next);
        stream.listed = out.listed;
        *resume_at = out.resume_at;
        Ok(taken)
    }

    /// Hands the entries of `entries` of directory `dir` out to `out`, from
    /// index `next` on, advancing it (with its hints, where every entry's
    /// inode was last found in the cache); `false` when the sink is full (`next`
    /// is then the entry it refused). With the inode handle cache, the
    /// handles of up to [`MAX_BATCH`] entries are looked up at once before
    /// those entries' stats: in a directory too large for the CPU's caches
    /// every lookup misses, and a batch waits for its misses together rather
    /// than one after another (`ClockCache::get_many`; READDIRPLUS of a
    /// million-entry directory spent 16% of its time in those lookups, one
    /// at a time).
    fn hand_out_from(
        &self,
        dir: BorrowedFd<'_>,
        Entries { entries, hints }: Entries<'_>,
        next: &mut usize,
        plus: bool,
        describe: Describe,
        out: &mut Out<'_>,
    ) -> FsResult<bool> {
        let batched = describe.batches(plus);
        let mut inos = [0u64; MAX_BATCH];
        let mut known = Vec::new();
        loop {
            let count = entries.inos_from(*next, &mut inos);
            if count == 0 {
                return Ok(true);
            }
            if batched {
                let hints = hints.map(|hints| hints.get(*next..).unwrap_or_default());
                self.inode_handles
                    .get_many(&inos[..count], hints, &mut known);
            }
            for i in 0..count {
                // Cannot be `None`: `inos_from` counted the entries left.
                let Some(entry) = entries.at(*next)? else {
                    return Ok(true);
                };
                if !is_dot(entry.name) {
                    // `known[i]` is of `entry`: `inos_from` started at it.
                    let known = batched.then(|| Known {
                        found: known.get(i).copied().flatten(),
                        hint: hints.and_then(|hints| hints.get(*next)),
                    });
                    if !self.hand_out(dir, entry, plus, describe, known, out.sink)? {
                        return Ok(false);
                    }
                    dirstreams::count_one(&mut out.listed);
                    out.resume_at = entry.cookie;
                }
                *next += 1;
            }
        }
    }

    /// READDIR(PLUS) of `dir` from `position` out of cached chunks
    /// (`dirchunks.rs`), reading and caching those missing; `None` if
    /// `position` has no resume point (the caller then reads from the
    /// kernel), or the caller may not read `dir` now.
    fn list_chunks(
        &self,
        dir: &Node,
        position: u64,
        vouch: Vouch,
        plus: bool,
        describe: Describe,
        sink: &mut dyn FnMut(DirEntry<'_>) -> bool,
    ) -> FsResult<Option<bool>> {
        let key = dir_key(&dir.stat);
        let current = |point: &ResumePoint| point.chunk.names == vouch.names;
        let mut found = self.dir_chunks.get(&(key, position)).filter(current);
        if found.is_none() && position != 0 {
            return Ok(None);
        }
        // Opening the directory would check that the caller may read it; a
        // listing from a cache must check as well. The kernel's own check,
        // with the thread's fsuid, fsgid and groups (as `resume`).
        if sys::access_fd(dir.fd.as_fd(), libc::R_OK).is_err() {
            return Ok(None);
        }
        tally(|t| t.chunk_calls += 1);
        let mut out = Out {
            sink,
            resume_at: position,
            listed: None,
        };
        // Where the next chunk to read starts, and what comes before it.
        let mut at = position;
        let mut before = (position == 0).then_some(0);
        // A descriptor of `dir` and its position, once one is needed.
        let mut reader = None;
        loop {
            let point = match found.take() {
                Some(point) => point,
                None => {
                    let chunk = self.read_chunk(dir, &mut reader, at, vouch.names, before)?;
                    let point = ResumePoint { chunk, index: 0 };
                    // What this replaces or evicts is dropped here, unlocked.
                    drop(self.dir_chunks.insert((key, at), point.clone()));
                    point
                }
            };
            let chunk = &point.chunk;
            let mut next = point.index;
            let entries = Entries {
                entries: &chunk.entries,
                hints: Some(&chunk.hints),
            };
            if !self.hand_out_from(dir.fd.as_fd(), entries, &mut next, plus, describe, &mut out)? {
                let stop = ResumePoint {
                    chunk: Arc::clone(chunk),
                    index: next,
                };
                drop(self.dir_chunks.insert((key, out.resume_at), stop));
                return Ok(Some(false));
            }
            if chunk.eof {
                if let Some(before) = chunk.before {
                    // What was replaced or evicted is plain data.
                    let _replaced = self.dir_sizes.insert(key, before + chunk.listed);
                }
                return Ok(Some(true));
            }
            at = chunk.end;
            before = chunk.before.map(|b| b + chunk.listed);
            found = self
                .dir_chunks
                .get(&(key, at))
                .filter(|p| current(p) && p.index == 0);
        }
    }

    /// Reads the chunk of `dir` at position `at` with one `getdents64`
    /// call, through `reader` (opened, or seeked, if it is not at `at`).
    /// `names`: the directory's names generation, taken before.
    fn read_chunk(
        &self,
        dir: &Node,
        reader: &mut Option<(OwnedFd, u64)>,
        at: u64,
        names: NonZeroU64,
        before: Option<u64>,
    ) -> FsResult<Arc<Chunk>> {
        let (fd, position) = match reader.take() {
            Some((fd, position)) if position == at => (fd, position),
            _ => (self.open_stream(dir, at)?.fd, at),
        };
        tally(|t| t.chunks_read += 1);
        let mut buf = [MaybeUninit::<u8>::uninit(); CHUNK_BYTES];
        let mut pending = Pending::default();
        let listed = read_buffer(&mut RawDir::new(fd.as_fd(), &mut buf), &mut pending)?;
        pending.shrink_to_fit();
        let end = pending.last_cookie().unwrap_or(position);
        let eof = pending.is_empty();
        *reader = Some((fd, end));
        Ok(Arc::new(Chunk {
            names,
            hints: dirchunks::no_hints(pending.len()),
            entries: pending,
            end,
            eof,
            before,
            listed,
        }))
    }

    /// The stream cached at `key`, if it is of `dir` and the caller may read
    /// `dir` now. It was opened under the identity of the caller that left it,
    /// so the kernel checks the current caller as a fresh open would
    /// (`faccessat2(R_OK)` with the thread's fsuid, fsgid and groups, against
    /// the directory's mode now). Without `faccessat2`, nothing is reused.
    /// If `dir` changed since the stream read ahead, back to `position`.
    fn resume(&self, dir_fh: &BackendHandle, dir: &Node, position: u64) -> Option<DirStream> {
        let mut stream = (0..WAYS).find_map(|way| {
            self.dir_streams.remove(&StreamKey {
                dir: *dir_fh,
                cookie: position,
                way,
            })
        })?;
        match sys::access_fd(stream.fd.as_fd(), libc::R_OK) {
            Ok(()) => {}
            Err(Errno::NOSYS) => {
                self.has_faccessat2.store(false, Ordering::Relaxed);
                return None;
            }
            Err(_) => return None,
        }
        let ctime = dirstreams::ctime(&dir.stat);
        if stream.ctime != ctime {
            stream.ctime = ctime;
            stream.listed = None;
            stream.pending.clear();
            rfs::seek(&stream.fd, SeekFrom::Start(position)).ok()?;
        }
        Some(stream)
    }

    /// A fresh descriptor of `dir` at `position`; the kernel checks the
    /// caller's read permission.
    fn open_stream(&self, dir: &Node, position: u64) -> FsResult<DirStream> {
        let fd = self
            .reopen(dir.fd.as_fd(), OFlags::RDONLY | OFlags::DIRECTORY)
            .map_err(errno)?;
        if position != 0 {
            rfs::seek(&fd, SeekFrom::Start(position)).map_err(|e| match e {
                Errno::INVAL => FsError::BadCookie,
                e => errno(e),
            })?;
        }
        Ok(DirStream {
            fd,
            ctime: dirstreams::ctime(&dir.stat),
            pending: Pending::default(),
            listed: (position == 0).then_some(0),
        })
    }

    /// Caches `stream` of `dir_fh`, which stopped after the entry with cookie
    /// `resume_at`. Its ctime is that of the call's stat, from before any
    /// entry of `stream.pending` was read, and was settled then.
    fn keep(&self, dir_fh: &BackendHandle, resume_at: u64, stream: DirStream) {
        let key = |way| StreamKey {
            dir: *dir_fh,
            cookie: resume_at,
            way,
        };
        // A free way, else the first is replaced.
        let way = (0..WAYS)
            .find(|&way| !self.dir_streams.contains(&key(way)))
            .unwrap_or(0);
        // A replaced or evicted stream is closed here, outside the lock.
        drop(self.dir_streams.insert(key(way), stream));
    }

    /// Offers the kernel's `entry` of `dir` to `sink`; `false` when it is full.
    /// `known`: what the inode handle cache held for the entry, if the caller
    /// looked it up already, with the entry's slot hint.
    fn hand_out(
        &self,
        dir: BorrowedFd<'_>,
        entry: RawEntry<'_>,
        plus: bool,
        describe: Describe,
        known: Option<Known<'_>>,
        sink: &mut dyn FnMut(DirEntry<'_>) -> bool,
    ) -> FsResult<bool> {
        if !is_kernel_position(entry.cookie) {
            // Not a file system whose positions we can hand out.
            return Err(FsError::Io);
        }
        let extra = if plus {
            tally(|t| t.plus_entries += 1);
            self.entry_plus(dir, entry.name, entry.ino, describe, known)
        } else {
            None
        };
        Ok(sink(DirEntry {
            fileid: entry.ino,
            name: entry.name.to_bytes(),
            cookie: entry.cookie,
            plus: extra,
        }))
    }

    /// Whether a listing of `dir` may use `inode_handles`: only if all its
    /// entries fit. Listing a larger one would evict an entry per entry and
    /// never hit (CLOCK under a cyclic scan), at a cost of about 1 us per
    /// entry. The count comes from the last complete listing (`dir_sizes`),
    /// which must fill at most 15/16 of the cache (inodes spread unevenly
    /// over its shards; the rest is room to grow); a directory not listed to
    /// its end yet is judged by its size, at 12 bytes or more per entry (a
    /// bound for ext4 and tmpfs, generous for most: ext4's entries of
    /// 10-byte names take 20).
    fn inode_handles_fit(&self, dir: &rustix::fs::Stat) -> bool {
        let capacity = self.inode_handles.capacity() as u64;
        match self.dir_sizes.get(&dir_key(dir)) {
            Some(entries) => entries.saturating_mul(16) <= capacity.saturating_mul(15),
            None => u64::try_from(dir.st_size).unwrap_or(u64::MAX) / 12 <= capacity,
        }
    }

    /// READDIRPLUS data of the entry `name` of `dir`, which `getdents` listed
    /// with inode `d_ino`: by name unless `FromDescriptor`, if that can vouch
    /// for the pair, else from an `O_PATH` descriptor of the entry (four
    /// calls, and the unprivileged handle cache keeps the descriptor).
    /// `known` as for `hand_out`.
    fn entry_plus(
        &self,
        dir: BorrowedFd<'_>,
        name: &CStr,
        d_ino: u64,
        describe: Describe,
        known: Option<Known<'_>>,
    ) -> Option<(BackendHandle, Attr)> {
        if describe != Describe::FromDescriptor {
            if let Some(found) = self.entry_plus_by_name(dir, name, d_ino, describe, known) {
                return Some(found);
            }
        }
        let child = self.open_child_path(dir, name.to_bytes()).ok()?;
        self.describe_path(child).ok()
    }

    /// READDIRPLUS data of the entry `name` of `dir`, which `getdents` listed
    /// with inode `d_ino`, in two calls and no descriptor: the handle by name,
    /// then the attributes by name. `None` unless both are provably of the
    /// listed inode on the export's mount; the caller then takes the
    /// descriptor path.
    ///
    /// Why the pair cannot disagree: the handle is taken at t1, the stat at
    /// t2 > t1, and the stat must show `d_ino`, read by `getdents` at t0 < t1.
    /// Any rebinding of the name after t0 that is still in place at t2 shows
    /// as another inode, and the pair is dropped. Passing with a handle of
    /// another object needs the name to leave the listed inode before t1 and
    /// come back to it (or to a recycled number) before t2: two renames
    /// between two adjacent system calls. Even then the handle is of an object
    /// that held the name during the call (or is deleted, so `Stale`), with
    /// the attributes of the one holding it now: stale attributes, which a
    /// client already revalidates. In the other order a single rename between
    /// stat and handle would pair them unnoticed.
    ///
    /// **Inode handle cache** (with `remember`; see `inode_handles_fit`). A
    /// handle names an inode, whatever its names, so once the pair is
    /// vouched for, the handle is remembered by inode number with the
    /// `ctime` the stat showed (`inode_handles`). The next
    /// listing first looks the listed inode up there, and then needs only the
    /// stat (one call): if it shows the listed inode with the same `ctime`,
    /// it is the same inode, since an inode number reused by a new file comes
    /// with the new file's `ctime` (its creation time, after the old file's
    /// unlink set the old one's). Only a delete and a re-create on the same
    /// number within one timestamp tick could pass, and the handle would
    /// then be of the deleted file (`Stale` when used, which clients recover
    /// from by looking the name up again: LOOKUP uses only entries whose
    /// `ctime` was settled when remembered, see `lookup_by_name`). Any
    /// change to the inode (write, chmod, rename, link) moves `ctime` and
    /// costs one refresh.
    ///
    /// A mismatch goes to the descriptor path rather than to no plus data: it
    /// answers as before this path existed (nothing for a mount point, which
    /// `openat2` will not cross, or a vanished name; a consistent pair for a
    /// renamed one), and file systems whose `d_ino` is not `st_ino`
    /// (overlayfs without xino, some FUSE) keep their attributes, at two more
    /// calls per entry.
    ///
    /// **Cached attributes** (with a `vouch`; see `watches.rs` and the
    /// module docs). A non-directory with one link keeps its attributes in
    /// its `InodeHandle` with the generation its directory's watch had before
    /// they were read, and answers with no system call while that generation
    /// and `vouch`'s agree and they are younger than `attr_max_age`. rnfs's
    /// own changes through a handle (WRITE, SETATTR, LINK) drop them too
    /// (`forget_attrs`): the kernel reports a change made through a
    /// descriptor to the directory it was opened through, and a descriptor
    /// from `open_by_handle_at` may have none.
    ///
    /// `known`: what the cache holds for `d_ino`, if the caller looked it up
    /// already (a batch); else it is looked up here when remembering.
    fn entry_plus_by_name(
        &self,
        dir: BorrowedFd<'_>,
        name: &CStr,
        d_ino: u64,
        describe: Describe,
        known: Option<Known<'_>>,
    ) -> Option<(BackendHandle, Attr)> {
        let (remember, vouch) = match describe {
            Describe::ByNameRemembering { vouch } => (true, vouch),
            _ => (false, None),
        };
        let (known, hint) = match known {
            Some(known) => (known.found, known.hint),
            None if remember => (self.inode_handles.get(&d_ino), None),
            None => (None, None),
        };
        if let Some(known) = known {
            if let (Some(vouch), Some(attrs)) = (vouch, known.attrs) {
                if attrs.vouched_by(&vouch, self.attr_max_age) {
                    tally(|t| t.attrs_cached += 1);
                    let ctime = time(known.ctime.0, known.ctime.1);
                    return Some((known.handle, attrs.attr(self.fsid, d_ino, ctime)));
                }
            }
            let stat = rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
            // A mount on the name shows another `st_dev` or inode (the
            // mounted root's); the handle was taken on the export's mount.
            if stat.st_ino == d_ino
                && stat.st_dev == self.root_dev
                && known.ctime == dirstreams::ctime(&stat)
            {
                let attr = self.attr(&stat);
                if vouch.is_some() && attrs_cacheable(&attr) {
                    let settled = known.settled;
                    self.remember_inode(d_ino, known.handle, &stat, &attr, vouch, hint, settled);
                }
                return Some((known.handle, attr));
            }
        }
        // Flags 0: a symlink is not followed. `name` is one component from
        // getdents, so it stays in `dir` (or enters a mount on it: below).
        let kernel = sys::name_to_handle(dir, name, 0).ok()?;
        let stat = rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
        // The mount id catches a mount of the same file system (a bind mount)
        // on the name, which `st_dev` cannot tell apart.
        let listed = stat.st_ino == d_ino
            && stat.st_dev == self.root_dev
            && kernel.mount_id == self.root_mount_id;
        if !listed {
            return None;
        }
        let handle = handle::encode(&kernel)?;
        let attr = self.attr(&stat);
        if remember {
            self.remember_inode(d_ino, handle, &stat, &attr, vouch, hint, false);
        }
        Some((handle, attr))
    }

    /// LOOKUP of `name` (one component, not a dot) in `dir` by name,
    /// privileged mode only (an unprivileged handle resolves through the
    /// descriptor its lookup leaves in `paths`). One `statx` when the inode
    /// handle cache knows the inode it shows with the same `ctime`, settled
    /// when it was remembered; else the handle, then a second stat, which
    /// must show the first stat's inode (the argument of
    /// `entry_plus_by_name`, with the first stat in the place of
    /// `getdents`), and the handle is remembered. The descriptor path it
    /// replaces takes four calls (`openat2`, `fstat`, `name_to_handle_at`,
    /// `close`).
    ///
    /// Why settled: a file deleted and re-created on the same inode number
    /// within one timestamp tick shows the old file's `ctime`, and the cache
    /// would pair it with the deleted file's handle. A client recovers from
    /// such a handle (`Stale`) by looking the name up again, so LOOKUP must
    /// not answer from such a pair: it uses an entry only if its `ctime` was
    /// already older than a tick plus the file system's granularity when
    /// remembered (`dirstreams::settled`), so that no later change, a
    /// re-creation included, can be stamped with it. A recent one costs the
    /// three calls until it settles, and the miss replaces the entry with
    /// the name's current handle.
    ///
    /// `None` where this cannot vouch for an answer: a mount on the name
    /// (even of this file system, which only the mount id tells), a kernel
    /// without `statx`'s mount id, a file system without handles, or an
    /// error other than a missing name or a refused search. The caller then
    /// takes the descriptor path, which answers those as it always did.
    pub(super) fn lookup_by_name(
        &self,
        dir: BorrowedFd<'_>,
        name: &CStr,
    ) -> Option<FsResult<(BackendHandle, Attr)>> {
        let (stat, mount) = match sys::stat_with_mount(dir, name) {
            Ok(found) => found,
            Err(e @ (Errno::NOENT | Errno::ACCESS)) => return Some(Err(errno(e))),
            Err(_) => return None,
        };
        let on_export = |dev, mount| dev == self.root_dev && mount == self.root_mount_id;
        if !on_export(stat.st_dev, i32::try_from(mount).ok()?) {
            return None;
        }
        let ino = stat.st_ino;
        let ctime = dirstreams::ctime(&stat);
        if let Some(known) = self.inode_handles.get(&ino) {
            if known.ctime == ctime && known.settled {
                return Some(Ok((known.handle, self.attr(&stat))));
            }
        }
        // Flags 0: a final symlink is not followed, as by the stat.
        let kernel = sys::name_to_handle(dir, name, 0).ok()?;
        let stat = rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
        if stat.st_ino != ino || !on_export(stat.st_dev, kernel.mount_id) {
            return None;
        }
        let handle = handle::encode(&kernel)?;
        let known = InodeHandle {
            handle,
            ctime: dirstreams::ctime(&stat),
            settled: InodeHandle::settled_now(&stat),
            attrs: None,
        };
        // The same handle with the same `ctime` keeps what it holds (a
        // listing's cached attributes) and only learns that the `ctime` has
        // settled; anything else is replaced. What this replaces or evicts
        // is plain data.
        let _replaced = self
            .inode_handles
            .insert_or_merge(ino, known, |cached, new| {
                let same = cached.handle == new.handle && cached.ctime == new.ctime;
                if same {
                    cached.settled |= new.settled;
                }
                same
            });
        Some(Ok((handle, self.attr(&stat))))
    }

    /// Remembers `handle` for inode `ino`, with the `ctime` of `stat` and,
    /// if `vouch` allows, its attributes `attr`; `hint`: where `ino` was
    /// last found, if a chunk keeps that. `settled`: whether that ctime was
    /// settled when the handle was first remembered with it (else it is
    /// judged now, one clock read).
    #[allow(clippy::too_many_arguments, reason = "one private helper's call sites")]
    fn remember_inode(
        &self,
        ino: u64,
        handle: BackendHandle,
        stat: &rustix::fs::Stat,
        attr: &Attr,
        vouch: Option<Vouch>,
        hint: Option<&SlotHint>,
        settled: bool,
    ) {
        let settled = settled || InodeHandle::settled_now(stat);
        let known = |attrs| InodeHandle {
            handle,
            ctime: dirstreams::ctime(stat),
            settled,
            attrs,
        };
        // What these replace or evict is plain data.
        let with_updates = vouch.and_then(|vouch| Some((vouch, vouch.updates?)));
        match with_updates.filter(|_| attrs_cacheable(attr)) {
            // Under the shard's lock: either `forget_attrs` of this inode
            // counted its update before this looks, or it takes the lock
            // after this and drops what this stores.
            Some((vouch, updates)) => {
                let _replaced = self
                    .inode_handles
                    .insert_with(ino, hint, &updates, |updated| {
                        known((!updated).then(|| CachedAttrs::new(attr, &vouch)))
                    });
            }
            None => {
                let _replaced = self.inode_handles.insert(ino, known(None));
            }
        }
    }

    /// What vouches for cached chunks of `dir` and, in a READDIRPLUS
    /// (`plus`), cached attributes, taken before any of its entries is read;
    /// `None` without the caches or a watch of `dir`.
    fn vouch(&self, dir: &Node, plus: bool) -> Option<Vouch> {
        if self.attr_max_age == 0 {
            return None;
        }
        let generations = DirWatches::get()?.generation(dir.fd.as_fd(), dir_key(&dir.stat))?;
        // A READDIR stores no attributes: it leaves `forget_attrs` free.
        let updates = plus.then(|| {
            if !self.attrs_cached.load(Ordering::Relaxed) {
                self.attrs_cached.store(true, Ordering::Relaxed);
            }
            // Pairs with the fence in `forget_attrs` (store, fence, load on
            // both sides): either that call sees `attrs_cached` and counts
            // its change, or its change is complete before this call's stats.
            fence(Ordering::SeqCst);
            // Taken under each shard's lock: a change counted here is visible
            // to the stats after it (the change came before its update's lock).
            self.inode_handles.updates()
        });
        Some(Vouch {
            generation: generations.any,
            names: generations.names,
            now: monotonic_secs(),
            updates,
        })
    }

    /// Drops the cached attributes of inode `ino`, which rnfs just changed
    /// through a handle (see `entry_plus_by_name`), and counts the update in
    /// its shard of `inode_handles`, so that a listing whose stats may
    /// predate the change stores none of them (`remember_inode`): one shard
    /// lock, no state shared by all writers. Costs a fence and a load until
    /// a listing has cached attributes.
    pub(super) fn forget_attrs(&self, ino: u64) {
        // See `vouch`.
        fence(Ordering::SeqCst);
        if !self.attrs_cached.load(Ordering::Relaxed) {
            return;
        }
        self.inode_handles.update(&ino, |known| known.attrs = None);
    }
}

/// What a batch lookup found for one entry (`LocalFs::hand_out_from`):
/// the cached value, if any, and the entry's slot hint, if its chunk keeps
/// one, for storing a new value where the old one is.
#[derive(Clone, Copy)]
struct Known<'a> {
    found: Option<InodeHandle>,
    hint: Option<&'a SlotHint>,
}

/// Entries to hand out (`LocalFs::hand_out_from`), with a slot hint per
/// entry when they come from a chunk, which keeps them between listings.
#[derive(Clone, Copy)]
struct Entries<'a> {
    entries: &'a Pending,
    hints: Option<&'a [SlotHint]>,
}

/// Whether an entry's attributes may be cached: a directory's change with
/// its own entries, which its parent's watch does not hear of, and a file
/// with more links may be changed through a directory that is not watched.
fn attrs_cacheable(attr: &Attr) -> bool {
    attr.ftype != FileType::Directory && attr.nlink == 1
}

/// A directory's key in `dir_sizes`: its device and inode.
fn dir_key(dir: &rustix::fs::Stat) -> (u64, u64) {
    (dir.st_dev, dir.st_ino)
}

/// What this thread's listing call did so far (`TallyGuard`).
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    plus_entries: u64,
    attrs_cached: u64,
    chunk_calls: u64,
    chunks_read: u64,
}

impl Tally {
    const ZERO: Self = Self {
        plus_entries: 0,
        attrs_cached: 0,
        chunk_calls: 0,
        chunks_read: 0,
    };
}

thread_local! {
    static TALLY: Cell<Tally> = const { Cell::new(Tally::ZERO) };
}

/// Counts into this thread's tally: no atomic per entry.
fn tally(count: impl FnOnce(&mut Tally)) {
    TALLY.with(|cell| {
        let mut t = cell.get();
        count(&mut t);
        cell.set(t);
    });
}

/// Starts a listing call's tally and adds it to the backend's counters when
/// the call ends, whichever way: one atomic add per figure and call.
struct TallyGuard<'a>(&'a LocalFs);

impl<'a> TallyGuard<'a> {
    fn start(fs: &'a LocalFs) -> Self {
        TALLY.with(|cell| cell.set(Tally::ZERO));
        Self(fs)
    }
}

impl Drop for TallyGuard<'_> {
    fn drop(&mut self) {
        let t = TALLY.with(Cell::take);
        let counters = &self.0.listing;
        // Relaxed: statistics, read on their own.
        for (counter, n) in [
            (&counters.plus_entries, t.plus_entries),
            (&counters.attrs_cached, t.attrs_cached),
            (&counters.chunk_calls, t.chunk_calls),
            (&counters.chunks_read, t.chunks_read),
        ] {
            if n > 0 {
                counter.fetch_add(n, Ordering::Relaxed);
            }
        }
    }
}

/// A backend's listing counters (`Filesystem::listing_stats`).
#[derive(Debug, Default)]
pub(super) struct ListingCounters {
    plus_entries: AtomicU64,
    attrs_cached: AtomicU64,
    chunk_calls: AtomicU64,
    chunks_read: AtomicU64,
}

impl ListingCounters {
    pub(super) fn stats(&self) -> ListingStats {
        let attrs_cached = self.attrs_cached.load(Ordering::Relaxed);
        ListingStats {
            attrs_cached,
            attrs_read: self
                .plus_entries
                .load(Ordering::Relaxed)
                .saturating_sub(attrs_cached),
            chunk_calls: self.chunk_calls.load(Ordering::Relaxed),
            chunks_read: self.chunks_read.load(Ordering::Relaxed),
        }
    }
}

/// Where a listing's entries go, and how far it got.
struct Out<'s> {
    sink: &'s mut dyn FnMut(DirEntry<'_>) -> bool,
    /// The cookie of the last entry handed out.
    resume_at: u64,
    /// Entries handed out from the directory's start, while counted
    /// (`DirStream::listed`).
    listed: Option<u64>,
}

/// How READDIRPLUS describes each entry (`LocalFs::entry_plus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Describe {
    /// From an `O_PATH` descriptor (unprivileged: the handle cache needs one).
    FromDescriptor,
    /// By name, in two calls.
    ByName,
    /// By name, remembering handles by inode (`inode_handles`), and
    /// attributes too while `vouch` vouches for them.
    ByNameRemembering { vouch: Option<Vouch> },
}

impl Describe {
    /// Whether a listing (READDIRPLUS when `plus`) looks the handle cache up
    /// a batch of entries at a time (`LocalFs::hand_out_pending`).
    fn batches(self, plus: bool) -> bool {
        plus && matches!(self, Describe::ByNameRemembering { .. })
    }
}

/// What a READDIRPLUS call knew before its first stat (`LocalFs::vouch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Vouch {
    /// The directory's watch generation, after every queued event.
    generation: NonZeroU64,
    /// Its names generation, likewise.
    names: NonZeroU64,
    /// `monotonic_secs` at the start of the call.
    now: u32,
    /// `inode_handles`' updates by shard at the start of the call: rnfs's
    /// own changes (`LocalFs::forget_attrs`). READDIRPLUS only: without
    /// them no attributes are stored.
    updates: Option<Updates>,
}

/// Seconds since the first call, on the monotonic clock.
fn monotonic_secs() -> u32 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let secs = EPOCH.get_or_init(Instant::now).elapsed().as_secs();
    u32::try_from(secs).unwrap_or(u32::MAX)
}

/// The attributes of a non-directory with one link, as a listing read them,
/// less what its `InodeHandle` and key hold (`ctime`, inode number) and what
/// is the same for all (`fsid`, one link).
#[derive(Debug, Clone, Copy)]
struct CachedAttrs {
    generation: NonZeroU64,
    read_at: u32,
    ftype: FileType,
    mode: u32,
    uid: u32,
    gid: u32,
    size: u64,
    used: u64,
    rdev: (u32, u32),
    atime: Time,
    mtime: Time,
}

impl CachedAttrs {
    fn new(attr: &Attr, vouch: &Vouch) -> Self {
        Self {
            generation: vouch.generation,
            read_at: vouch.now,
            ftype: attr.ftype,
            mode: attr.mode,
            uid: attr.uid,
            gid: attr.gid,
            size: attr.size,
            used: attr.used,
            rdev: attr.rdev,
            atime: attr.atime,
            mtime: attr.mtime,
        }
    }

    /// Whether these may answer a listing that `vouch` describes: nothing
    /// was reported for the directory since they were read, and they are
    /// younger than `max_age` seconds.
    fn vouched_by(&self, vouch: &Vouch, max_age: u32) -> bool {
        self.generation == vouch.generation && vouch.now.saturating_sub(self.read_at) < max_age
    }

    fn attr(&self, fsid: u64, fileid: u64, ctime: Time) -> Attr {
        Attr {
            ftype: self.ftype,
            mode: self.mode,
            nlink: 1,
            uid: self.uid,
            gid: self.gid,
            size: self.size,
            used: self.used,
            rdev: self.rdev,
            fsid,
            fileid,
            atime: self.atime,
            mtime: self.mtime,
            ctime,
        }
    }
}

/// A handle remembered by inode number, with the `ctime` that vouches for
/// it (`LocalFs::entry_plus_by_name`).
#[derive(Debug, Clone, Copy)]
pub(super) struct InodeHandle {
    handle: BackendHandle,
    ctime: dirstreams::Ctime,
    /// Whether `ctime` was settled (`dirstreams::settled`) when the handle
    /// was remembered: no later change can be stamped with it, so no file
    /// re-created on the same inode number can show it (see
    /// `lookup_by_name`). LOOKUP answers only from settled entries.
    settled: bool,
    /// The attributes, while they can be vouched for.
    attrs: Option<CachedAttrs>,
}

impl InodeHandle {
    /// Whether `stat`'s ctime is settled now (`stat` taken before this).
    fn settled_now(stat: &rustix::fs::Stat) -> bool {
        dirstreams::settled(dirstreams::ctime(stat), SystemTime::now())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    use rustix::fs::FileType as RawType;

    use super::*;
    use crate::cannot_run::cannot_run;
    use crate::local::dirstreams::RawEntry;
    use crate::local::LocalOptions;
    use crate::{Cred, Filesystem};

    /// No listing opens `..`, however deep its directory: READDIRPLUS lists
    /// `..` with its file id only, where handing out its handle meant
    /// walking `..` up to the export root (about three system calls per
    /// level). LOOKUP of `..` still walks, and the count sees it.
    #[test]
    fn listings_open_no_dotdot_whatever_the_depth() {
        use super::super::ops::DOTDOT_OPENS;
        const DEPTH: usize = 40;
        let top = tempfile::tempdir().unwrap();
        let deepest = top.path().join("d/".repeat(DEPTH));
        std::fs::create_dir_all(&deepest).unwrap();
        std::fs::write(deepest.join("f"), b"").unwrap();
        let fs = LocalFs::open(top.path(), LocalOptions::default()).unwrap();
        let cred = Cred::root();
        let mut handles = vec![fs.root()];
        for _ in 0..DEPTH {
            let up = handles[handles.len() - 1];
            handles.push(fs.lookup(&cred, &up, b"d").unwrap().0);
        }
        let dir = handles[DEPTH];
        let parent_ino = std::fs::metadata(deepest.join("..")).unwrap().ino();
        for plus in [true, false] {
            for _ in 0..2 {
                DOTDOT_OPENS.with(|n| n.set(0));
                let mut dotdot = None;
                let mut names = 0;
                fs.readdir(&cred, &dir, 0, VERIFIER, plus, &mut |e| {
                    names += 1;
                    if e.name == b".." {
                        dotdot = Some((e.fileid, e.plus.is_some()));
                    }
                    true
                })
                .unwrap();
                assert_eq!(names, 3, "plus {plus}");
                assert_eq!(dotdot, Some((parent_ino, false)), "plus {plus}");
                assert_eq!(DOTDOT_OPENS.with(Cell::get), 0, "plus {plus}");
            }
        }
        // The count sees a walk: LOOKUP opens `..` once per level.
        DOTDOT_OPENS.with(|n| n.set(0));
        let up = fs.lookup(&cred, &dir, b"..").unwrap().0;
        assert_eq!(up, handles[DEPTH - 1]);
        assert_eq!(DOTDOT_OPENS.with(Cell::get), DEPTH as u64);
    }

    /// A listing stopped by a full sink leaves its descriptor at the cookie
    /// of its last entry, positioned right after the entries it read ahead;
    /// the call resuming from that cookie goes on with that very descriptor.
    #[test]
    fn a_stopped_listing_is_resumed_on_its_descriptor() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..2000 {
            std::fs::write(dir.path().join(format!("f{i:04}")), b"").unwrap();
        }
        // Streams of a directory changed in the last few ms are not kept.
        std::thread::sleep(std::time::Duration::from_millis(100));
        // Streams serve what the cached chunks do not: none here.
        let options = LocalOptions {
            attr_max_age: 0,
            ..LocalOptions::default()
        };
        let fs = LocalFs::open(dir.path(), options).unwrap();
        let root = fs.root();
        let page = |cookie: u64, take: usize| {
            let (mut got, mut last) = (0, cookie);
            let end = fs
                .readdir(&Cred::root(), &root, cookie, VERIFIER, false, &mut |e| {
                    if got == take {
                        return false;
                    }
                    got += 1;
                    last = e.cookie;
                    true
                })
                .unwrap();
            (last, end.eof)
        };
        let key = |cookie| StreamKey {
            dir: root,
            cookie,
            way: 0,
        };
        let take = |cookie| fs.dir_streams.remove(&key(cookie)).unwrap();

        let (first, _) = page(0, 50);
        assert_eq!(fs.dir_streams.len(), 1);
        let stream = take(first);
        // The kernel's position is after the last entry read ahead.
        let read_ahead = stream.pending.last_cookie().unwrap();
        assert_eq!(
            rfs::seek(&stream.fd, SeekFrom::Current(0)).unwrap(),
            read_ahead
        );
        // Mark the descriptor (a fresh one is close-on-exec), put it back.
        rustix::io::fcntl_setfd(&stream.fd, rustix::io::FdFlags::empty()).unwrap();
        drop(fs.dir_streams.insert(key(first), stream));

        // Within what was read ahead, then well past it.
        let (second, _) = page(first, 10);
        let (third, _) = page(second, 500);
        assert_eq!(fs.dir_streams.len(), 1);
        let stream = take(third);
        let flags = rustix::io::fcntl_getfd(&stream.fd).unwrap();
        assert!(!flags.contains(rustix::io::FdFlags::CLOEXEC));
        drop(fs.dir_streams.insert(key(third), stream));

        // A change: the entries read ahead are dropped, the descriptor goes
        // back to the cookie, and it is not kept while the change is recent.
        std::fs::write(dir.path().join("new"), b"").unwrap();
        let (fourth, _) = page(third, 10);
        // Still recent now, so it was when the call began. (A loaded machine
        // may reach this line after the change has settled: then it may be kept.)
        if !settled_now(dir.path()) {
            assert_eq!(fs.dir_streams.len(), 0);
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        let (fifth, _) = page(fourth, 10);
        let stream = take(fifth);
        let read_ahead = stream.pending.last_cookie().unwrap();
        assert_eq!(
            rfs::seek(&stream.fd, SeekFrom::Current(0)).unwrap(),
            read_ahead
        );
        drop(fs.dir_streams.insert(key(fifth), stream));

        // To the end: nothing is kept.
        let (_, eof) = page(fifth, usize::MAX);
        assert!(eof);
        assert_eq!(fs.dir_streams.len(), 0);

        // Listings in step stop at the same cookies: each keeps its own.
        let (a, _) = page(0, 50);
        let (b, _) = page(0, 50);
        assert_eq!((a, fs.dir_streams.len()), (b, 2));
        let (a, _) = page(a, 50);
        let (b, _) = page(b, 50);
        assert_eq!((a, fs.dir_streams.len()), (b, 2));
    }

    const REMEMBER: Describe = Describe::ByNameRemembering { vouch: None };

    /// An export holding one file, `a`, and its privileged backend (`None`,
    /// skipped, without the privilege the by-name path needs).
    fn one_file_export() -> Option<(tempfile::TempDir, std::path::PathBuf, LocalFs)> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a");
        std::fs::write(&path, b"a").unwrap();
        let fs = LocalFs::open(dir.path(), LocalOptions::default()).unwrap();
        if !fs.privileged() {
            cannot_run("the by-name path is for privileged backends");
            return None;
        }
        Some((dir, path, fs))
    }

    /// A described inode's handle is remembered with its `ctime`: the next
    /// description takes it from there while the `ctime` matches (a planted
    /// handle shows the cache is read), and any change to the inode makes it
    /// take the handle afresh.
    #[test]
    fn inode_handles_hold_while_the_ctime_vouches_for_them() {
        let Some((dir, path, fs)) = one_file_export() else {
            return;
        };
        let dir_fd = rfs::open(
            dir.path(),
            OFlags::RDONLY | OFlags::DIRECTORY,
            rfs::Mode::empty(),
        )
        .unwrap();
        let ino = std::fs::symlink_metadata(&path).unwrap().ino();
        let describe = || {
            fs.entry_plus_by_name(dir_fd.as_fd(), c"a", ino, REMEMBER, None)
                .unwrap()
        };
        let (fh, attr) = describe();
        let (l_fh, l_attr, _) = fs.lookup(&Cred::root(), &fs.root(), b"a").unwrap();
        assert_eq!((fh, attr), (l_fh, l_attr));
        let known = fs.inode_handles.get(&ino).unwrap();
        assert_eq!(known.handle, fh);

        // Read from the cache: a planted handle with the right ctime is used.
        let planted = BackendHandle::new(b"planted").unwrap();
        let _ = fs.inode_handles.insert(
            ino,
            InodeHandle {
                handle: planted,
                ..known
            },
        );
        assert_eq!(describe(), (planted, attr));

        // The inode changes (a later timestamp tick): taken afresh.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let (fh2, attr2) = describe();
        assert_eq!(fh2, fh);
        assert_eq!(attr2.mode & 0o777, 0o600);
        assert_eq!(fs.inode_handles.get(&ino).unwrap().handle, fh);
    }

    /// rnfs's own change through a handle drops the inode's cached
    /// attributes, whether or not the kernel tells its directory's watch;
    /// and a listing that took the cache's update counts before such a
    /// change stores none of the attributes it read.
    #[test]
    fn own_changes_drop_cached_attributes_and_outrun_listings() {
        let Some((_dir, path, fs)) = one_file_export() else {
            return;
        };
        let r = fs.root();
        let ino = std::fs::symlink_metadata(&path).unwrap().ino();
        let cached = || fs.inode_handles.get(&ino).unwrap().attrs.is_some();
        let list = || {
            fs.readdir(&Cred::root(), &r, 0, [0; 8], true, &mut |_| true)
                .unwrap()
        };
        list();
        assert!(cached());
        let fh = fs.lookup(&Cred::root(), &r, b"a").unwrap().0;
        fs.write(&Cred::root(), &fh, 0, b"b", crate::Stability::Unstable)
            .unwrap();
        assert!(!cached(), "WRITE drops the cached attributes");
        list();
        assert!(cached());

        let known = fs.inode_handles.get(&ino).unwrap();
        let vouch = |updates| Vouch {
            generation: known.attrs.unwrap().generation,
            names: known.attrs.unwrap().generation,
            now: monotonic_secs(),
            updates,
        };
        let before = fs.inode_handles.updates();
        fs.write(&Cred::root(), &fh, 0, b"c", crate::Stability::Unstable)
            .unwrap();
        let after = fs.inode_handles.updates();
        let stat = rfs::statat(&*fs.root, "a", AtFlags::SYMLINK_NOFOLLOW).unwrap();
        let attr = fs.attr(&stat);
        fs.remember_inode(
            ino,
            known.handle,
            &stat,
            &attr,
            Some(vouch(Some(before))),
            None,
            false,
        );
        assert!(!cached(), "a listing older than a change stores nothing");
        fs.remember_inode(
            ino,
            known.handle,
            &stat,
            &attr,
            Some(vouch(Some(after))),
            None,
            false,
        );
        assert!(cached());
    }

    /// A READDIRPLUS listing is answered from the chunks an earlier one read
    /// (a planted entry shows it), until a name changes in the directory;
    /// then from the kernel again.
    #[test]
    fn listings_share_chunks_until_a_name_changes() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..50 {
            std::fs::write(dir.path().join(format!("f{i}")), b"").unwrap();
        }
        let fs = LocalFs::open(dir.path(), LocalOptions::default()).unwrap();
        if !fs.privileged() {
            cannot_run("chunks are for privileged backends");
            return;
        }
        let r = fs.root();
        let names = || {
            let mut names = Vec::new();
            fs.readdir(&Cred::root(), &r, 0, [0; 8], true, &mut |e| {
                names.push(e.name.to_vec());
                true
            })
            .unwrap();
            names.sort();
            names
        };
        let first = names();
        assert_eq!(first.len(), 52);
        let key = (dir_key(&fs.resolve(&r).unwrap().stat), 0);
        let start = fs.dir_chunks.get(&key).unwrap();
        assert_eq!(start.index, 0);

        // Plant a chunk with one more entry at the start.
        let mut entries = Pending::default();
        entries.push(RawEntry {
            ino: 1,
            cookie: start.chunk.entries.at(0).unwrap().unwrap().cookie,
            name: c"planted",
        });
        for i in 0..start.chunk.entries.len() {
            entries.push(start.chunk.entries.at(i).unwrap().unwrap());
        }
        let planted = Chunk {
            names: start.chunk.names,
            hints: dirchunks::no_hints(entries.len()),
            entries,
            end: start.chunk.end,
            eof: start.chunk.eof,
            before: start.chunk.before,
            listed: start.chunk.listed + 1,
        };
        let point = ResumePoint {
            chunk: Arc::new(planted),
            index: 0,
        };
        let _ = fs.dir_chunks.insert(key, point);
        let mut expected = first.clone();
        expected.push(b"planted".to_vec());
        expected.sort();
        assert_eq!(names(), expected, "answered from the planted chunk");

        // A new name moves the names generation: read from the kernel.
        std::fs::write(dir.path().join("g"), b"").unwrap();
        let mut expected = first;
        expected.push(b"g".to_vec());
        expected.sort();
        assert_eq!(names(), expected);
        // A changed attribute does not.
        let planted_again = fs.dir_chunks.get(&key).unwrap();
        std::fs::write(dir.path().join("g"), b"longer").unwrap();
        names();
        assert!(Arc::ptr_eq(
            &planted_again.chunk,
            &fs.dir_chunks.get(&key).unwrap().chunk
        ));
    }

    /// READDIRPLUS in pages of odd sizes (so pages stop inside a batch of
    /// handle lookups and resume from `pending`), three times over: the first
    /// listing remembers handles, the later ones read them back a batch at a
    /// time. Every entry comes exactly once per listing, with the handle and
    /// attributes LOOKUP gives its name. Files made in one burst share
    /// ctimes, which is what lets a handle paired with the wrong entry of its
    /// batch slip through the ctime check: this catches that.
    #[test]
    fn batched_handle_lookups_pair_every_entry_with_its_own_handle() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..700 {
            std::fs::write(dir.path().join(format!("f{i}")), b"").unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        let fs = LocalFs::open(dir.path(), LocalOptions::default()).unwrap();
        if !fs.privileged() {
            cannot_run("the by-name path is for privileged backends");
            return;
        }
        let root = fs.root();
        let cred = Cred::root();
        let expected: std::collections::HashMap<Vec<u8>, (BackendHandle, Attr)> = (0..700)
            .map(|i| {
                let name = format!("f{i}").into_bytes();
                let (fh, attr, _) = fs.lookup(&cred, &root, &name).unwrap();
                (name, (fh, attr))
            })
            .collect();
        for (round, sizes) in [[7, 100, 1, 64], [65, 3, 200, 9], [1000, 1, 1, 1]]
            .iter()
            .enumerate()
        {
            let mut seen = std::collections::HashSet::new();
            let (mut cookie, mut page) = (0, 0);
            loop {
                let take = sizes[page % sizes.len()];
                page += 1;
                let mut got = 0;
                let end = fs
                    .readdir(&cred, &root, cookie, VERIFIER, true, &mut |e| {
                        if got == take {
                            return false;
                        }
                        got += 1;
                        cookie = e.cookie;
                        if e.name != b"." && e.name != b".." {
                            let (fh, attr) = e.plus.expect("plus data");
                            let want = &expected[e.name];
                            assert_eq!((fh, attr.fileid), (want.0, want.1.fileid), "round {round}");
                            assert_eq!(attr, want.1, "round {round}");
                            assert!(seen.insert(e.name.to_vec()), "listed twice");
                        }
                        true
                    })
                    .unwrap();
                if end.eof {
                    break;
                }
            }
            assert_eq!(seen.len(), 700, "round {round}");
            assert_eq!(fs.inode_handles.len(), 700, "round {round}");
            // Forgotten inodes move others into their slots: the chunks'
            // slot hints go stale, and the next round must not believe them.
            for (_, attr) in expected.values().step_by(5) {
                let _ = fs.inode_handles.remove(&attr.fileid);
            }
        }
    }

    /// A READDIRPLUS listing remembers inode handles only for a directory
    /// whose entries could all fit: a larger one would only evict.
    #[test]
    fn only_directories_that_fit_remember_inode_handles() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("small");
        let large = dir.path().join("large");
        std::fs::create_dir(&small).unwrap();
        std::fs::create_dir(&large).unwrap();
        for i in 0..5 {
            std::fs::write(small.join(format!("f{i}")), b"").unwrap();
        }
        for i in 0..2000 {
            std::fs::write(large.join(format!("f{i:04}")), b"").unwrap();
        }
        let options = LocalOptions {
            inode_handles: 1024,
            ..LocalOptions::default()
        };
        let fs = LocalFs::open(dir.path(), options).unwrap();
        if !fs.privileged() {
            cannot_run("the by-name path is for privileged backends");
            return;
        }
        let root = fs.root();
        let [large, small] = [b"large", b"small"].map(|name| {
            let (fh, _, _) = fs.lookup(&Cred::root(), &root, name).unwrap();
            fh
        });
        // The two LOOKUPs remembered theirs.
        let looked_up = fs.inode_handles.len();
        let list = |fh| described_from(&fs, fh, 0, usize::MAX);
        // Every entry is described either way ("." too; ".." never is).
        assert_eq!(list(&large), 2001);
        assert_eq!(fs.inode_handles.len(), looked_up);
        // Counted now, and still too many.
        assert_eq!(list(&large), 2001);
        assert_eq!(fs.inode_handles.len(), looked_up);
        assert_eq!(list(&small), 6);
        assert_eq!(fs.inode_handles.len(), looked_up + 5);
    }

    /// A directory whose size in bytes suggests more entries than the cache
    /// holds is listed without it until a complete listing, in pages that
    /// each resume the last one's descriptor, has counted its entries; from
    /// then on it remembers them. A listing that did not start at the
    /// beginning counts nothing.
    #[test]
    fn a_complete_listing_counts_the_entries_that_decide_the_fit() {
        let dir = tempfile::tempdir().unwrap();
        let mid = dir.path().join("mid");
        std::fs::create_dir(&mid).unwrap();
        let entries = 100;
        for i in 0..entries {
            std::fs::write(mid.join(format!("{i:03}{}", "x".repeat(200))), b"").unwrap();
        }
        // The largest cache (a multiple of its 16 shards) that the size
        // estimate (12 bytes per entry) says is too small.
        let estimate = std::fs::metadata(&mid).unwrap().size() / 12;
        let capacity = (estimate - 1) / 16 * 16;
        if capacity * 15 < entries * 16 {
            cannot_run(&format!(
                "this file system's directory size ({estimate} x 12) is too small"
            ));
            return;
        }
        // Streams of a directory changed in the last few ms are not kept.
        wait_until_settled(&mid);
        let options = LocalOptions {
            inode_handles: usize::try_from(capacity).unwrap(),
            ..LocalOptions::default()
        };
        let fs = LocalFs::open(dir.path(), options).unwrap();
        if !fs.privileged() {
            cannot_run("the by-name path is for privileged backends");
            return;
        }
        let (fh, _, _) = fs.lookup(&Cred::root(), &fs.root(), b"mid").unwrap();
        let list_from = |cookie| described_from(&fs, &fh, cookie, 30);
        // After the first three files: no count.
        let (mut taken, mut after_three) = (0, 0);
        fs.readdir(&Cred::root(), &fh, 0, VERIFIER, false, &mut |e| {
            after_three = e.cookie;
            taken += 1;
            taken < 5
        })
        .unwrap();
        // The LOOKUP remembered `mid`'s.
        let looked_up = fs.inode_handles.len();
        assert_eq!(list_from(after_three), 97);
        assert_eq!(fs.inode_handles.len(), looked_up);
        // "." and the 100 files; ".." is never described.
        assert_eq!(list_from(0), 101);
        assert_eq!(fs.inode_handles.len(), looked_up);
        assert_eq!(list_from(0), 101);
        assert_eq!(fs.inode_handles.len(), looked_up + 100);
    }

    /// Whether `path` (not following a symlink) changed long enough ago for
    /// its streams to be kept and its handle to answer LOOKUP.
    fn settled_now(path: &std::path::Path) -> bool {
        InodeHandle::settled_now(&rustix::fs::lstat(path).unwrap())
    }

    /// Waits until `path` is `settled_now`.
    fn wait_until_settled(path: &std::path::Path) {
        while !settled_now(path) {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Lists `dir` with READDIRPLUS from `cookie` to its end, in pages of
    /// `page` entries; how many entries came with handle and attributes.
    fn described_from(fs: &LocalFs, dir: &BackendHandle, mut cookie: u64, page: usize) -> usize {
        let mut described = 0;
        loop {
            let mut room = page;
            let end = fs
                .readdir(&Cred::root(), dir, cookie, VERIFIER, true, &mut |e| {
                    if room == 0 {
                        return false;
                    }
                    room -= 1;
                    described += usize::from(e.plus.is_some());
                    cookie = e.cookie;
                    true
                })
                .unwrap();
            if end.eof {
                return described;
            }
        }
    }

    /// Every kind of entry is described by name as LOOKUP describes it. Then
    /// the race the inode check closes, played in order: a name replaced after
    /// `getdents` listed it is not described by name, and the descriptor path
    /// describes what the name holds now.
    #[test]
    fn by_name_unless_the_name_was_replaced() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), b"a").unwrap();
        std::fs::create_dir(dir.path().join("b")).unwrap();
        let fs = LocalFs::open(dir.path(), LocalOptions::default()).unwrap();
        if !fs.privileged() {
            cannot_run("the by-name path is for privileged backends");
            return;
        }
        let listed = std::fs::symlink_metadata(dir.path().join("a"))
            .unwrap()
            .ino();
        let dir_fd = rfs::open(
            dir.path(),
            OFlags::RDONLY | OFlags::DIRECTORY,
            rfs::Mode::empty(),
        )
        .unwrap();
        let lookup = |name: &[u8]| fs.lookup(&Cred::root(), &fs.root(), name).unwrap();

        // Every kind is described by name, as LOOKUP describes it.
        std::os::unix::fs::symlink("/etc", dir.path().join("l")).unwrap();
        rfs::mknodat(&dir_fd, "p", RawType::Fifo, rfs::Mode::RUSR, 0).unwrap();
        for (name, c_name) in [(&b"b"[..], c"b"), (b"l", c"l"), (b"p", c"p")] {
            let path = dir.path().join(std::str::from_utf8(name).unwrap());
            let ino = std::fs::symlink_metadata(path).unwrap().ino();
            let (fh, attr) = fs
                .entry_plus_by_name(dir_fd.as_fd(), c_name, ino, Describe::ByName, None)
                .unwrap();
            let (l_fh, l_attr, _) = lookup(name);
            assert_eq!((fh, attr), (l_fh, l_attr), "{name:?}");
        }

        let (fh, attr) = fs
            .entry_plus_by_name(dir_fd.as_fd(), c"a", listed, Describe::ByName, None)
            .unwrap();
        let (a_fh, a_attr, _) = lookup(b"a");
        assert_eq!((fh, attr), (a_fh, a_attr));

        // Another object takes the name: the listed inode no longer matches.
        std::fs::remove_file(dir.path().join("a")).unwrap();
        std::fs::rename(dir.path().join("b"), dir.path().join("a")).unwrap();
        assert!(fs
            .entry_plus_by_name(dir_fd.as_fd(), c"a", listed, Describe::ByName, None)
            .is_none());
        let (fh, attr) = fs
            .entry_plus(dir_fd.as_fd(), c"a", listed, Describe::ByName, None)
            .unwrap();
        let (now_fh, now_attr, _) = lookup(b"a");
        assert_eq!((fh, attr), (now_fh, now_attr));
        assert_ne!(fh, a_fh);
        assert_eq!(attr.ftype, FileType::Directory);

        // Gone: nothing either way.
        std::fs::remove_dir(dir.path().join("a")).unwrap();
        assert!(fs
            .entry_plus(dir_fd.as_fd(), c"a", attr.fileid, Describe::ByName, None)
            .is_none());
    }

    /// LOOKUP by name (`lookup_by_name`) gives what the descriptor path it
    /// replaces gives, for every kind of object; it remembers the handle by
    /// inode and answers from there while the `ctime` matches; a missing name
    /// is `NoEnt`, and a name taken by another object gets that object.
    #[test]
    fn lookups_by_name_answer_as_the_descriptor_path() {
        let Some((dir, _, fs)) = one_file_export() else {
            return;
        };
        std::fs::create_dir(dir.path().join("b")).unwrap();
        std::os::unix::fs::symlink("/etc", dir.path().join("l")).unwrap();
        let dir_fd = fs.root.as_fd();
        rfs::mknodat(dir_fd, "p", RawType::Fifo, rfs::Mode::RUSR, 0).unwrap();
        let by_name = |name: &CStr| fs.lookup_by_name(dir_fd, name).unwrap().unwrap();
        let by_descriptor = |name: &CStr| {
            let fd = fs.open_child_path(dir_fd, name.to_bytes()).unwrap();
            fs.describe_path(fd).unwrap()
        };
        // Remembered once their ctimes are settled.
        for name in ["a", "b", "l", "p"] {
            wait_until_settled(&dir.path().join(name));
        }
        for name in [c"a", c"b", c"l", c"p"] {
            let (fh, attr) = by_name(name);
            assert_eq!((fh, attr), by_descriptor(name), "{name:?}");
            let known = fs.inode_handles.get(&attr.fileid).unwrap();
            assert_eq!(known.handle, fh, "{name:?} remembered");
            assert!(known.settled, "{name:?}");
            // Now from the cache, and the same.
            assert_eq!(by_name(name), (fh, attr), "{name:?} again");
        }

        // The cache is what answers while the ctime matches: a planted
        // handle comes back; with another ctime the real one does, and
        // replaces it.
        let (a_fh, a_attr) = by_name(c"a");
        let (b_fh, _) = by_name(c"b");
        let known = fs.inode_handles.get(&a_attr.fileid).unwrap();
        let planted = |ctime, settled| InodeHandle {
            handle: b_fh,
            ctime,
            settled,
            attrs: None,
        };
        let _ = fs
            .inode_handles
            .insert(a_attr.fileid, planted(known.ctime, true));
        assert_eq!(by_name(c"a"), (b_fh, a_attr));
        let (secs, nsecs) = known.ctime;
        let _ = fs
            .inode_handles
            .insert(a_attr.fileid, planted((secs - 1, nsecs), true));
        assert_eq!(by_name(c"a"), (a_fh, a_attr));
        assert_eq!(fs.inode_handles.get(&a_attr.fileid).unwrap().handle, a_fh);
        // Nor with a ctime that was not settled when remembered: a file
        // re-created on the same inode number within a timestamp tick would
        // show it.
        let _ = fs
            .inode_handles
            .insert(a_attr.fileid, planted(known.ctime, false));
        assert_eq!(by_name(c"a"), (a_fh, a_attr));
        assert_eq!(fs.inode_handles.get(&a_attr.fileid).unwrap().handle, a_fh);

        // Missing, then taken by another object.
        assert_eq!(
            fs.lookup_by_name(dir_fd, c"missing")
                .map(|found| found.err()),
            Some(Some(FsError::NoEnt))
        );
        std::fs::write(dir.path().join("new"), b"new").unwrap();
        std::fs::rename(dir.path().join("new"), dir.path().join("a")).unwrap();
        let (now_fh, now_attr) = by_name(c"a");
        assert_ne!(now_fh, a_fh);
        assert_ne!(now_attr.fileid, a_attr.fileid);
        assert_eq!((now_fh, now_attr), by_descriptor(c"a"));
        // Remembered, but its ctime is too recent to answer from (still
        // recent now, so it was when remembered; a loaded machine may have
        // let it settle in between).
        let known = fs.inode_handles.get(&now_attr.fileid).unwrap();
        assert_eq!(known.handle, now_fh);
        if !dirstreams::settled(known.ctime, SystemTime::now()) {
            assert!(!known.settled);
        }
    }

    /// A mount on the name, even of the export's own file system with the
    /// inode cache holding its root, is not crossed by name: LOOKUP refuses
    /// it (`XDev`) as the descriptor path does.
    #[test]
    fn lookup_by_name_never_crosses_a_mount() {
        let Some((dir, _, fs)) = one_file_export() else {
            return;
        };
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::create_dir(dir.path().join("m")).unwrap();
        let dir_fd = fs.root.as_fd();
        // Remembered by inode, with its ctime.
        let (_, src) = fs.lookup_by_name(dir_fd, c"src").unwrap().unwrap();
        let Some(_mount) = BindMount::new(&dir.path().join("src"), &dir.path().join("m")) else {
            cannot_run("no bind mounts here");
            return;
        };
        let through = std::fs::metadata(dir.path().join("m")).unwrap();
        assert_eq!((through.ino(), through.dev()), (src.fileid, fs.root_dev));
        assert!(fs.lookup_by_name(dir_fd, c"m").is_none());
        assert_eq!(
            fs.lookup(&Cred::root(), &fs.root(), b"m")
                .err()
                .map(|(e, _)| e),
            Some(FsError::XDev)
        );
    }

    /// A bind mount, detached when dropped.
    struct BindMount(std::ffi::CString);

    impl BindMount {
        fn new(source: &std::path::Path, target: &std::path::Path) -> Option<Self> {
            use std::os::unix::ffi::OsStrExt;
            let c = |p: &std::path::Path| std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
            let (source, target) = (c(source), c(target));
            // SAFETY: NUL-terminated paths, no data.
            let rc = unsafe {
                libc::mount(
                    source.as_ptr(),
                    target.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                )
            };
            (rc == 0).then_some(Self(target))
        }
    }

    impl Drop for BindMount {
        fn drop(&mut self) {
            // SAFETY: a NUL-terminated path.
            let _ = unsafe { libc::umount2(self.0.as_ptr(), libc::MNT_DETACH) };
        }
    }
}
