//! Write-behind for one file, sans-IO: no sockets, threads or clocks; the
//! time is passed in as a [`Duration`] since any fixed start.
//!
//! [`Writeback`] holds the file's data the server does not have yet, or has
//! not made stable, in three sets of byte ranges:
//!
//! - **dirty**: written by the application, not sent. Chunks never cross a
//!   `wsize`-aligned boundary, so each is one WRITE.
//! - **in flight**: sent in a WRITE, no reply yet. In-flight ranges never
//!   overlap: a dirty chunk that overlaps one waits for its reply, so two
//!   WRITEs of the same bytes are never reordered on the wire.
//! - **unstable**: acknowledged UNSTABLE, not yet committed; kept with the
//!   verifier of its WRITE to be sent again if the server restarts.
//!
//! Dirty data is the newest, then in flight, then unstable; unstable never
//! overlaps the other two (newer data replaces it).
//!
//! Call order (quinn's vocabulary): feed events with `handle_*`
//! ([`handle_write`](Writeback::handle_write),
//! [`handle_write_reply`](Writeback::handle_write_reply),
//! [`handle_commit_reply`](Writeback::handle_commit_reply),
//! [`handle_truncate`](Writeback::handle_truncate)), ask for barriers with
//! [`request_flush`](Writeback::request_flush) /
//! [`request_sync`](Writeback::request_sync), then call
//! [`poll_action`](Writeback::poll_action) until it returns `None` and send
//! what it returns. When a barrier is not reached and nothing is to be sent,
//! wait for a reply. [`poll_timeout`](Writeback::poll_timeout) says when old
//! dirty data becomes due.
//!
//! Policy (seed 003, Staubach 2009):
//! - A sequential writer's chunk is sent UNSTABLE as soon as it reaches the
//!   end of its `wsize` block, at most `max_outstanding` WRITEs and
//!   `max_outstanding_bytes` bytes at a time (one WRITE is always allowed);
//!   [`writer_should_wait`](Writeback::writer_should_wait) tells the driver
//!   to block the writer while more such chunks wait for a slot, so a file's
//!   dirty data stays within about two blocks.
//! - A getattr's flush ([`poll_flush`](Writeback::poll_flush)) sends only
//!   the data written before its ticket and waits only for WRITEs that carry
//!   such data: the in-flight window and one partial chunk, never what the
//!   writer adds meanwhile, never a COMMIT.
//! - Random writers get no early sends (their data may be rewritten).
//! - `max_outstanding == 0` is the legacy behaviour: nothing is sent before
//!   a flush, sync, getattr or memory pressure (or expiry).
//! - COMMIT is sent for a sync barrier once everything before it is acked,
//!   or when a file's unstable bytes reach `commit_threshold`.
//! - A WRITE or COMMIT reply with a new verifier sends every unstable range
//!   written under another verifier again.
//! - The first error sticks until [`take_error`](Writeback::take_error);
//!   the data of a failed WRITE or COMMIT is dropped.
//!
//! Every operation is O(log n) in the number of ranges, plus the ranges it
//! touches; nothing is proportional to the file size.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use rnfs_nfs3::{Nfsstat3, StableHow, WriteVerf3};

use crate::error::NfsError;

/// Failures the engine itself detects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WritebackError {
    /// The server acknowledged a WRITE of zero bytes.
    #[error("server wrote no bytes")]
    NoProgress,
    /// The write would end past the largest offset.
    #[error("file offset overflow")]
    Overflow,
}

impl From<WritebackError> for NfsError {
    fn from(e: WritebackError) -> Self {
        match e {
            WritebackError::NoProgress => Self::Status(Nfsstat3::Io),
            WritebackError::Overflow => Self::Status(Nfsstat3::Fbig),
        }
    }
}

/// Settings of one [`Writeback`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WritebackConfig {
    /// Bytes per WRITE (at least 1); chunks are aligned to it.
    pub wsize: u32,
    /// WRITEs in flight per file; 0 turns early sending off (legacy).
    pub max_outstanding: u32,
    /// Bytes in flight per file while early sending is on (0: no byte
    /// limit); a WRITE is sent only if it fits, or if none is in flight.
    /// Ignored in legacy mode.
    pub max_outstanding_bytes: u64,
    /// Dirty data older than this is sent at the next [`Writeback::poll_action`].
    pub dirty_expire: Duration,
    /// A COMMIT is sent when this many bytes are unstable (0: only on sync).
    pub commit_threshold: u64,
}

/// In-flight WRITEs used for flushes in legacy mode (`max_outstanding == 0`).
pub const LEGACY_FLUSH_WINDOW: u32 = 16;

/// Names one WRITE sent by the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WriteId(pub u64);

/// Names one COMMIT sent by the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommitId(pub u64);

/// A flush or sync barrier: covers every byte written before it was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ticket(u64);

/// Bytes of a WRITE, shared (not copied) between the engine and the sender.
#[derive(Clone)]
pub struct WriteData {
    buf: Arc<Vec<u8>>,
    start: usize,
    len: usize,
}

impl WriteData {
    fn new(v: Vec<u8>) -> Self {
        let len = v.len();
        Self {
            buf: Arc::new(v),
            start: 0,
            len,
        }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }

    /// Number of bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes `[from, to)` of this one (`from <= to <= len`).
    fn slice(&self, from: usize, to: usize) -> Self {
        debug_assert!(from <= to && to <= self.len);
        Self {
            buf: Arc::clone(&self.buf),
            start: self.start + from,
            len: to - from,
        }
    }

    /// Keeps `[0, at)`, returns `[at, len)` (`at <= len`), as `Vec::split_off`.
    fn split_off(&mut self, at: usize) -> Self {
        let tail = self.slice(at, self.len);
        self.len = at;
        tail
    }
}

impl std::fmt::Debug for WriteData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WriteData({} bytes)", self.len)
    }
}

/// What a truncate dropped ([`Writeback::handle_truncate`]), kept until its
/// SETATTR answers: put back by [`Writeback::undo_truncate`] if it fails.
#[derive(Debug)]
pub struct Truncated {
    size: u64,
    last_end: Option<u64>,
    /// `(start, bytes, seq, since)`, newest first.
    pieces: Vec<(u64, WriteData, u64, Duration)>,
}

/// A WRITE to send.
#[derive(Debug, Clone)]
pub struct WriteRequest {
    /// Give it back to [`Writeback::handle_write_reply`].
    pub id: WriteId,
    /// File offset.
    pub offset: u64,
    /// The bytes.
    pub data: WriteData,
    /// `Unstable`, or `FileSync` when one WRITE completes a sync.
    pub stable: StableHow,
}

/// What the driver must send next.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Action {
    /// Send a WRITE.
    Write(WriteRequest),
    /// Send COMMIT of the whole file (offset 0, count 0).
    Commit(CommitId),
}

/// A successful WRITE reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteReply {
    /// Bytes the server wrote.
    pub count: u32,
    /// How stable they are.
    pub committed: StableHow,
    /// The server's write verifier.
    pub verf: WriteVerf3,
}

/// Counters of one [`Writeback`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WritebackStats {
    /// WRITEs sent.
    pub writes_sent: u64,
    /// Bytes sent in WRITEs.
    pub bytes_sent: u64,
    /// WRITEs sent early, for a sequential writer's completed chunk.
    pub early_writes: u64,
    /// WRITEs sent because their data had expired.
    pub expired_writes: u64,
    /// WRITEs sent `FILE_SYNC` (a sync that needed one WRITE).
    pub file_sync_writes: u64,
    /// COMMITs sent.
    pub commits_sent: u64,
    /// Bytes sent again (short WRITEs, verifier changes).
    pub resent_bytes: u64,
    /// WRITE replies with fewer bytes than sent.
    pub short_writes: u64,
    /// Times the server's verifier changed.
    pub verifier_changes: u64,
    /// WRITE or COMMIT replies with an error.
    pub errors: u64,
    /// The most WRITEs in flight at once.
    pub max_outstanding: u64,
}

/// One piece of a range set.
trait Piece {
    fn len(&self) -> u64;
    fn seq(&self) -> u64;
    /// When the oldest bytes here were written.
    fn since(&self) -> Duration;
    /// Keeps `[0, at)`, returns `[at, len)`; `0 < at < len`.
    fn split_off(&mut self, at: u64) -> Self;
    fn bytes(&self) -> &[u8];
}

#[derive(Debug)]
struct Dirty {
    data: Vec<u8>,
    /// Oldest write sequence number whose bytes are here.
    seq: u64,
    /// When the oldest bytes were written.
    since: Duration,
}

#[derive(Debug)]
struct Flight {
    id: WriteId,
    data: WriteData,
    seq: u64,
    since: Duration,
}

#[derive(Debug)]
struct Unstable {
    data: WriteData,
    seq: u64,
    since: Duration,
    verf: WriteVerf3,
    /// Acks with `gen <=` a COMMIT's generation are covered by it.
    gen: u64,
}

impl Piece for Dirty {
    fn len(&self) -> u64 {
        self.data.len() as u64
    }
    fn seq(&self) -> u64 {
        self.seq
    }

    fn since(&self) -> Duration {
        self.since
    }
    fn split_off(&mut self, at: u64) -> Self {
        Self {
            data: self.data.split_off(to_usize(at)),
            seq: self.seq,
            since: self.since,
        }
    }
    fn bytes(&self) -> &[u8] {
        &self.data
    }
}

impl Piece for Flight {
    fn len(&self) -> u64 {
        self.data.len() as u64
    }
    fn seq(&self) -> u64 {
        self.seq
    }

    fn since(&self) -> Duration {
        self.since
    }
    fn split_off(&mut self, at: u64) -> Self {
        Self {
            id: self.id,
            data: self.data.split_off(to_usize(at)),
            seq: self.seq,
            since: self.since,
        }
    }
    fn bytes(&self) -> &[u8] {
        self.data.as_slice()
    }
}

impl Piece for Unstable {
    fn len(&self) -> u64 {
        self.data.len() as u64
    }
    fn seq(&self) -> u64 {
        self.seq
    }

    fn since(&self) -> Duration {
        self.since
    }
    fn split_off(&mut self, at: u64) -> Self {
        Self {
            data: self.data.split_off(to_usize(at)),
            seq: self.seq,
            since: self.since,
            verf: self.verf,
            gen: self.gen,
        }
    }
    fn bytes(&self) -> &[u8] {
        self.data.as_slice()
    }
}

/// Lengths here are bounded by `wsize` or by a caller's buffer.
fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// Disjoint byte ranges keyed by start, indexed by sequence number.
#[derive(Debug)]
struct Ranges<P> {
    map: BTreeMap<u64, P>,
    by_seq: BTreeSet<(u64, u64)>,
    bytes: u64,
}

impl<P: Piece> Ranges<P> {
    fn new() -> Self {
        Self {
            map: BTreeMap::new(),
            by_seq: BTreeSet::new(),
            bytes: 0,
        }
    }

    fn insert(&mut self, start: u64, p: P) {
        debug_assert!(p.len() > 0);
        debug_assert!(self.overlapping(start, start + p.len()).next().is_none());
        self.bytes += p.len();
        self.by_seq.insert((p.seq(), start));
        self.map.insert(start, p);
    }

    fn remove(&mut self, start: u64) -> Option<P> {
        let p = self.map.remove(&start)?;
        self.by_seq.remove(&(p.seq(), start));
        self.bytes -= p.len();
        Some(p)
    }

    /// Pieces overlapping `[s, e)`, in order.
    fn overlapping(&self, s: u64, e: u64) -> impl Iterator<Item = (u64, &P)> {
        let first = self
            .map
            .range(..s)
            .next_back()
            .filter(|(k, p)| **k + p.len() > s);
        first
            .into_iter()
            .chain(self.map.range(s..e.max(s)))
            .map(|(k, p)| (*k, p))
    }

    /// Removes `[s, e)`, splitting pieces at the edges; returns what was in it.
    fn carve(&mut self, s: u64, e: u64) -> Vec<(u64, P)> {
        let keys: Vec<u64> = self.overlapping(s, e).map(|(k, _)| k).collect();
        let mut out = Vec::with_capacity(keys.len());
        for k in keys {
            let Some(mut p) = self.remove(k) else {
                continue;
            };
            let mut start = k;
            if start < s {
                let tail = p.split_off(s - start);
                self.insert(start, p);
                p = tail;
                start = s;
            }
            if start + p.len() > e {
                let rest = p.split_off(e - start);
                self.insert(e, rest);
            }
            out.push((start, p));
        }
        out
    }

    /// Removes the pieces `pred` selects; returns them.
    fn remove_where(&mut self, pred: impl Fn(&P) -> bool) -> Vec<(u64, P)> {
        let keys: Vec<u64> = self
            .map
            .iter()
            .filter(|(_, p)| pred(p))
            .map(|(k, _)| *k)
            .collect();
        keys.into_iter()
            .filter_map(|k| Some((k, self.remove(k)?)))
            .collect()
    }

    fn min_seq(&self) -> Option<u64> {
        self.by_seq.first().map(|(s, _)| *s)
    }

    /// When the bytes of the oldest write here were written (pieces keep
    /// their oldest write's sequence number and time, so the first piece by
    /// sequence number has them).
    fn oldest_since(&self) -> Option<Duration> {
        let (_, start) = self.by_seq.first()?;
        self.map.get(start).map(Piece::since)
    }

    /// The end of the last piece (pieces are disjoint, so the largest end).
    fn end(&self) -> u64 {
        self.map.last_key_value().map_or(0, |(k, p)| k + p.len())
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    /// Copies the parts of the pieces that overlap `[offset, offset+buf.len())`.
    fn overlay(&self, offset: u64, buf: &mut [u8]) {
        let end = offset + buf.len() as u64;
        for (k, p) in self.overlapping(offset, end) {
            let s = k.max(offset);
            let e = (k + p.len()).min(end);
            let src = &p.bytes()[to_usize(s - k)..to_usize(e - k)];
            buf[to_usize(s - offset)..to_usize(e - offset)].copy_from_slice(src);
        }
    }
}

/// The write-behind state of one file. `E` is the error WRITE and COMMIT
/// replies carry; the first one is kept until taken.
#[derive(Debug)]
pub struct Writeback<E> {
    wsize: u64,
    cap: u32,
    byte_cap: u64,
    dirty_expire: Duration,
    commit_threshold: u64,
    dirty: Ranges<Dirty>,
    /// Dirty chunks a sequential writer has completed: sent early.
    ready: BTreeSet<u64>,
    inflight: Ranges<Flight>,
    inflight_ids: BTreeMap<WriteId, u64>,
    unstable: Ranges<Unstable>,
    /// The COMMIT in flight and the ack generation it covers.
    commit: Option<(CommitId, u64)>,
    ack_gen: u64,
    verf: Option<WriteVerf3>,
    next_seq: u64,
    next_id: u64,
    flush_barrier: u64,
    sync_barrier: u64,
    size: u64,
    last_end: Option<u64>,
    sequential: bool,
    error: Option<E>,
    stats: WritebackStats,
}

impl<E: From<WritebackError>> Writeback<E> {
    /// An engine for a file of `size` bytes.
    pub fn new(config: &WritebackConfig, size: u64) -> Self {
        Self {
            wsize: u64::from(config.wsize.max(1)),
            cap: config.max_outstanding,
            byte_cap: if config.max_outstanding == 0 {
                0
            } else {
                config.max_outstanding_bytes
            },
            dirty_expire: config.dirty_expire,
            commit_threshold: config.commit_threshold,
            dirty: Ranges::new(),
            ready: BTreeSet::new(),
            inflight: Ranges::new(),
            inflight_ids: BTreeMap::new(),
            unstable: Ranges::new(),
            commit: None,
            ack_gen: 0,
            verf: None,
            next_seq: 1,
            next_id: 1,
            flush_barrier: 0,
            sync_barrier: 0,
            size,
            last_end: None,
            sequential: true,
            error: None,
            stats: WritebackStats::default(),
        }
    }

    // ----- events -----

    /// The application writes `data` at `offset`. A deferred error is
    /// returned (and cleared) instead, and nothing is written.
    pub fn handle_write(&mut self, now: Duration, offset: u64, data: &[u8]) -> Result<(), E> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or(WritebackError::Overflow)?;
        if data.is_empty() {
            return Ok(());
        }
        self.sequential = self.last_end == Some(offset)
            || (self.last_end.is_none() && (offset == 0 || offset == self.size))
            || data.len() as u64 >= self.wsize;
        self.last_end = Some(end);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.size = self.size.max(end);
        // Newer bytes replace unstable ones.
        self.unstable.carve(offset, end);
        let eligible = self.cap > 0 && self.sequential;
        self.put_dirty_blocks(offset, data, seq, now, true, eligible);
        Ok(())
    }

    /// [`put_dirty`](Self::put_dirty) for `bytes` at `start` across any
    /// number of blocks, one block's part at a time.
    fn put_dirty_blocks(
        &mut self,
        start: u64,
        bytes: &[u8],
        seq: u64,
        since: Duration,
        newer: bool,
        eligible: bool,
    ) {
        let mut pos = start;
        let mut rest = bytes;
        while !rest.is_empty() {
            let block_end = (pos / self.wsize + 1) * self.wsize;
            let n = to_usize((block_end - pos).min(rest.len() as u64));
            self.put_dirty(pos, &rest[..n], seq, since, newer, eligible);
            pos += n as u64;
            rest = &rest[n..];
        }
    }

    /// The reply (or failure) of WRITE `id`.
    pub fn handle_write_reply(&mut self, now: Duration, id: WriteId, reply: Result<WriteReply, E>) {
        let _ = now;
        let Some(start) = self.inflight_ids.remove(&id) else {
            return;
        };
        let Some(f) = self.inflight.remove(start) else {
            return;
        };
        let reply = match reply {
            Ok(r) => r,
            Err(e) => {
                self.stats.errors += 1;
                self.fail(e);
                return;
            }
        };
        let len = f.data.len();
        let count = (reply.count as usize).min(len);
        if count == 0 {
            self.stats.errors += 1;
            self.fail(WritebackError::NoProgress.into());
            return;
        }
        self.note_verifier(reply.verf);
        if reply.committed != StableHow::FileSync {
            self.add_unstable(start, f.data.slice(0, count), f.seq, f.since, reply.verf);
        }
        if count < len {
            self.stats.short_writes += 1;
            self.stats.resent_bytes += (len - count) as u64;
            self.redirty(
                start + count as u64,
                f.data.slice(count, len),
                f.seq,
                f.since,
            );
        }
    }

    /// The reply (or failure) of COMMIT `id`.
    pub fn handle_commit_reply(&mut self, id: CommitId, reply: Result<WriteVerf3, E>) {
        let Some((sent, gen)) = self.commit else {
            return;
        };
        if sent != id {
            return;
        }
        self.commit = None;
        match reply {
            Ok(verf) => self.note_verifier(verf),
            Err(e) => {
                self.stats.errors += 1;
                self.fail(e);
            }
        }
        // What remains before the COMMIT carries the current verifier (or
        // failed): either way it is done.
        self.unstable.remove_where(|p| p.gen <= gen);
    }

    /// The file is being truncated (or extended) to `size`: data beyond it is
    /// dropped. The driver must wait until
    /// [`inflight_beyond`](Self::inflight_beyond) is false before SETATTR,
    /// and hand what this returns to
    /// [`undo_truncate`](Self::undo_truncate) if the SETATTR fails.
    pub fn handle_truncate(&mut self, size: u64) -> Truncated {
        let mut taken = Truncated {
            size: self.size,
            last_end: self.last_end,
            pieces: Vec::new(),
        };
        // Newest first: what is dirty was written after what is in flight,
        // which was sent after what is acknowledged.
        for (start, p) in self.dirty.carve(size, u64::MAX) {
            taken
                .pieces
                .push((start, WriteData::new(p.data), p.seq, p.since));
        }
        for (start, f) in self.inflight.overlapping(size, u64::MAX) {
            let skip = to_usize(size.saturating_sub(start));
            let data = f.data.slice(skip, f.data.len());
            taken
                .pieces
                .push((start + skip as u64, data, f.seq, f.since));
        }
        for (start, p) in self.unstable.carve(size, u64::MAX) {
            taken.pieces.push((start, p.data, p.seq, p.since));
        }
        let dirty = &self.dirty.map;
        self.ready.retain(|k| dirty.contains_key(k));
        self.size = size;
        self.last_end = None;
        taken
    }

    /// The SETATTR of a truncate failed: the data
    /// [`handle_truncate`](Self::handle_truncate) dropped is dirty again,
    /// and the size is what it was. Data since written over it wins. What
    /// was in flight or acknowledged beyond the new size is sent again
    /// (its acknowledgement was forgotten), so a COMMIT covers it.
    pub fn undo_truncate(&mut self, taken: Truncated) {
        self.size = self.size.max(taken.size);
        self.last_end = taken.last_end;
        for (start, data, seq, since) in taken.pieces {
            let bytes = data.as_slice();
            self.unstable.carve(start, start + bytes.len() as u64);
            // Any of these bytes already dirty are newer (or restored first,
            // being newer): they win.
            self.put_dirty_blocks(start, bytes, seq, since, false, self.cap > 0);
        }
    }

    /// The server says the file is `size` bytes: the client's view becomes
    /// that, or the end of the data held here if larger.
    pub fn set_server_size(&mut self, size: u64) {
        self.size = size.max(self.held_end());
    }

    // ----- requests -----

    /// A barrier for everything written so far to be acknowledged.
    pub fn request_flush(&mut self) -> Ticket {
        self.flush_barrier = self.flush_barrier.max(self.next_seq);
        Ticket(self.next_seq)
    }

    /// A barrier for everything written so far to be committed.
    pub fn request_sync(&mut self) -> Ticket {
        self.sync_barrier = self.sync_barrier.max(self.next_seq);
        self.request_flush()
    }

    /// Whether everything written before `t` is acknowledged (or failed).
    pub fn is_flushed(&self, t: Ticket) -> bool {
        self.dirty.min_seq().is_none_or(|s| s >= t.0)
            && self.inflight.min_seq().is_none_or(|s| s >= t.0)
    }

    /// Whether everything written before `t` is stable (or failed).
    pub fn is_synced(&self, t: Ticket) -> bool {
        self.is_flushed(t) && self.unstable.min_seq().is_none_or(|s| s >= t.0)
    }

    /// Takes the deferred error.
    pub fn take_error(&mut self) -> Option<E> {
        self.error.take()
    }

    // ----- outputs -----

    /// The next WRITE or COMMIT to send, if any.
    pub fn poll_action(&mut self, now: Duration) -> Option<Action> {
        if let Some(action) = self.poll_write(now) {
            return Some(action);
        }
        if self.commit.is_none() && self.unstable.len() > 0 {
            let sync_due = self
                .unstable
                .min_seq()
                .is_some_and(|s| s < self.sync_barrier)
                && self.is_flushed(Ticket(self.sync_barrier));
            let big = self.commit_threshold > 0 && self.unstable.bytes >= self.commit_threshold;
            if sync_due || big {
                let id = CommitId(self.next_id);
                self.next_id += 1;
                self.commit = Some((id, self.ack_gen));
                self.ack_gen += 1;
                self.stats.commits_sent += 1;
                return Some(Action::Commit(id));
            }
        }
        None
    }

    /// The next WRITE of data written before `t`, if the window has room:
    /// what a getattr sends while it waits for `t`. Never a COMMIT, never
    /// data written later.
    pub fn poll_flush(&mut self, t: Ticket) -> Option<Action> {
        let start = self.oldest_before(t.0)?;
        if !self.window_allows(self.chunk_len(start)) {
            return None;
        }
        Some(self.send(start, StableHow::Unstable))
    }

    /// Whether WRITE `id` is in flight with data written before `t` (so a
    /// flush for `t` waits for it).
    pub fn is_write_before(&self, id: WriteId, t: Ticket) -> bool {
        self.inflight_ids
            .get(&id)
            .and_then(|start| self.inflight.map.get(start))
            .is_some_and(|f| f.seq < t.0)
    }

    /// The oldest dirty chunk written before sequence number `barrier` that
    /// does not overlap a WRITE in flight.
    fn oldest_before(&self, barrier: u64) -> Option<u64> {
        self.dirty
            .by_seq
            .iter()
            .take_while(|(seq, _)| *seq < barrier)
            .map(|(_, start)| *start)
            .find(|start| !self.blocked(*start))
    }

    /// Whether one more WRITE of `len` bytes fits the in-flight window.
    fn window_allows(&self, len: u64) -> bool {
        let count = if self.cap == 0 {
            LEGACY_FLUSH_WINDOW
        } else {
            self.cap
        };
        self.inflight.len() < count as usize
            && (self.byte_cap == 0
                || self.inflight.len() == 0
                || self.inflight.bytes + len <= self.byte_cap)
    }

    fn poll_write(&mut self, now: Duration) -> Option<Action> {
        // 1. Barriers: oldest data first; nothing overtakes it.
        if let Some(start) = self.oldest_before(self.flush_barrier) {
            if !self.window_allows(self.chunk_len(start)) {
                return None;
            }
            let single = self.dirty.len() == 1
                && self.inflight.len() == 0
                && self.unstable.len() == 0
                && self.commit.is_none()
                && self.dirty.min_seq().is_some_and(|s| s < self.sync_barrier);
            let stable = if single {
                self.stats.file_sync_writes += 1;
                StableHow::FileSync
            } else {
                StableHow::Unstable
            };
            return Some(self.send(start, stable));
        }
        // 2. Completed chunks of a sequential writer.
        if self.cap > 0 {
            let pick = self.ready.iter().copied().find(|s| !self.blocked(*s));
            if let Some(start) = pick {
                if !self.window_allows(self.chunk_len(start)) {
                    return None;
                }
                self.stats.early_writes += 1;
                return Some(self.send(start, StableHow::Unstable));
            }
        }
        // 3. Expired data.
        let mut pick = None;
        for &(_, start) in &self.dirty.by_seq {
            let Some(p) = self.dirty.map.get(&start) else {
                continue;
            };
            if p.since + self.dirty_expire > now {
                break;
            }
            if !self.blocked(start) {
                pick = Some(start);
                break;
            }
        }
        let start = pick.filter(|s| self.window_allows(self.chunk_len(*s)))?;
        self.stats.expired_writes += 1;
        Some(self.send(start, StableHow::Unstable))
    }

    /// When the oldest data held here (dirty, in flight or not yet
    /// committed) was written, if there is any.
    pub fn oldest_held(&self) -> Option<Duration> {
        [
            self.dirty.oldest_since(),
            self.inflight.oldest_since(),
            self.unstable.oldest_since(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// When the oldest dirty data expires, if there is any.
    pub fn poll_timeout(&self) -> Option<Duration> {
        let (_, start) = self.dirty.by_seq.first()?;
        let p = self.dirty.map.get(start)?;
        Some(p.since + self.dirty_expire)
    }

    /// Whether a writer should block: completed chunks wait for one of the
    /// `max_outstanding` slots, or twice `commit_threshold` bytes are
    /// unstable (a COMMIT is in flight or due). Collect a reply and poll
    /// again.
    pub fn writer_should_wait(&self) -> bool {
        let window_full = self
            .ready
            .first()
            .is_some_and(|s| !self.window_allows(self.chunk_len(*s)));
        (self.cap > 0 && window_full)
            || (self.commit_threshold > 0 && self.unstable.bytes >= 2 * self.commit_threshold)
    }

    /// Whether a WRITE in flight ends beyond `size`.
    pub fn inflight_beyond(&self, size: u64) -> bool {
        self.inflight.end() > size
    }

    // ----- queries -----

    /// Copies this client's data over `buf`, which holds the server's bytes
    /// at `offset`.
    pub fn overlay(&self, offset: u64, buf: &mut [u8]) {
        self.unstable.overlay(offset, buf);
        self.inflight.overlay(offset, buf);
        self.dirty.overlay(offset, buf);
    }

    /// A copy of this client's bytes in `[offset, offset+len)`, in the order
    /// [`overlay`](Self::overlay) lays them. Taken when a READ is sent and
    /// laid under the later overlay, it covers data committed and dropped
    /// while the READ was in flight (the server may have read before that
    /// WRITE landed).
    pub fn snapshot(&self, offset: u64, len: u64) -> Vec<(u64, Vec<u8>)> {
        let end = offset.saturating_add(len);
        let mut out = Vec::new();
        let mut take = |k: u64, bytes: &[u8]| {
            let s = k.max(offset);
            let e = (k + bytes.len() as u64).min(end);
            out.push((s, bytes[to_usize(s - k)..to_usize(e - k)].to_vec()));
        };
        for (k, p) in self.unstable.overlapping(offset, end) {
            take(k, p.bytes());
        }
        for (k, p) in self.inflight.overlapping(offset, end) {
            take(k, p.bytes());
        }
        for (k, p) in self.dirty.overlapping(offset, end) {
            take(k, p.bytes());
        }
        out
    }

    /// The client's view of the file size.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Bytes held: dirty, in flight and unstable.
    pub fn held_bytes(&self) -> u64 {
        self.dirty.bytes + self.inflight.bytes + self.unstable.bytes
    }

    /// Bytes dirty (not sent).
    pub fn dirty_bytes(&self) -> u64 {
        self.dirty.bytes
    }

    /// WRITEs in flight.
    pub fn outstanding(&self) -> usize {
        self.inflight.len()
    }

    /// Whether the last write looked sequential.
    pub fn is_sequential(&self) -> bool {
        self.sequential
    }

    /// The counters.
    pub fn stats(&self) -> &WritebackStats {
        &self.stats
    }

    // ----- internals -----

    fn held_end(&self) -> u64 {
        self.dirty
            .end()
            .max(self.inflight.end())
            .max(self.unstable.end())
    }

    fn fail(&mut self, e: E) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }

    /// The length of dirty chunk `start` (0 if there is none).
    fn chunk_len(&self, start: u64) -> u64 {
        self.dirty.map.get(&start).map_or(0, Piece::len)
    }

    /// Whether dirty chunk `start` overlaps a WRITE in flight.
    fn blocked(&self, start: u64) -> bool {
        let Some(p) = self.dirty.map.get(&start) else {
            return true;
        };
        self.inflight
            .overlapping(start, start + p.len())
            .next()
            .is_some()
    }

    fn send(&mut self, start: u64, stable: StableHow) -> Action {
        self.ready.remove(&start);
        let p = self.dirty.remove(start).unwrap_or(Dirty {
            data: Vec::new(),
            seq: 0,
            since: Duration::ZERO,
        });
        let data = WriteData::new(p.data);
        let end = start + data.len() as u64;
        self.unstable.carve(start, end);
        let id = WriteId(self.next_id);
        self.next_id += 1;
        self.stats.writes_sent += 1;
        self.stats.bytes_sent += data.len() as u64;
        self.inflight_ids.insert(id, start);
        self.inflight.insert(
            start,
            Flight {
                id,
                data: data.clone(),
                seq: p.seq,
                since: p.since,
            },
        );
        self.stats.max_outstanding = self.stats.max_outstanding.max(self.inflight.len() as u64);
        Action::Write(WriteRequest {
            id,
            offset: start,
            data,
            stable,
        })
    }

    /// Puts `bytes` at `start` (within one block) into the dirty set, merging
    /// with the chunks it overlaps or touches in that block. `newer`: the
    /// bytes replace dirty ones (else dirty ones win). `eligible`: mark the
    /// chunk for early sending if it reaches the end of its block.
    fn put_dirty(
        &mut self,
        start: u64,
        bytes: &[u8],
        seq: u64,
        since: Duration,
        newer: bool,
        eligible: bool,
    ) {
        let end = start + bytes.len() as u64;
        let block_start = start - start % self.wsize;
        let block_end = block_start + self.wsize;
        let keys: Vec<u64> = self
            .dirty
            .map
            .range(block_start..(end + 1).min(block_end))
            .rev()
            .take_while(|(k, p)| *k + p.len() >= start)
            .map(|(k, _)| *k)
            .collect();
        let mut merged_seq = seq;
        let mut merged_since = since;
        let chunk_start;
        let data;
        if let [k] = keys[..] {
            let old = self.dirty.remove(k);
            self.ready.remove(&k);
            merged_seq = merged_seq.min(old.as_ref().map_or(seq, |o| o.seq));
            merged_since = merged_since.min(old.as_ref().map_or(since, |o| o.since));
            let mut old_data = old.map(|o| o.data).unwrap_or_default();
            if k + old_data.len() as u64 == start && newer {
                // Append: the sequential writer's common case.
                old_data.extend_from_slice(bytes);
                chunk_start = k;
                data = old_data;
            } else {
                let (s, v) = merge(start, bytes, &[(k, old_data)], newer);
                chunk_start = s;
                data = v;
            }
        } else {
            let mut olds = Vec::with_capacity(keys.len());
            for k in keys.iter().rev() {
                self.ready.remove(k);
                if let Some(o) = self.dirty.remove(*k) {
                    merged_seq = merged_seq.min(o.seq);
                    merged_since = merged_since.min(o.since);
                    olds.push((*k, o.data));
                }
            }
            let (s, v) = merge(start, bytes, &olds, newer);
            chunk_start = s;
            data = v;
        }
        let chunk_end = chunk_start + data.len() as u64;
        self.dirty.insert(
            chunk_start,
            Dirty {
                data,
                seq: merged_seq,
                since: merged_since,
            },
        );
        if eligible && chunk_end == block_end {
            self.ready.insert(chunk_start);
        }
    }

    /// Puts sent bytes back into the dirty set to be sent again, under
    /// newer dirty bytes and within the file size.
    fn redirty(&mut self, start: u64, data: WriteData, seq: u64, since: Duration) {
        if start >= self.size || data.is_empty() {
            return;
        }
        let keep = to_usize((self.size - start).min(data.len() as u64));
        self.put_dirty(
            start,
            &data.as_slice()[..keep],
            seq,
            since,
            false,
            self.cap > 0,
        );
    }

    /// Records acknowledged UNSTABLE bytes (those still in the file and not
    /// already rewritten).
    fn add_unstable(
        &mut self,
        start: u64,
        data: WriteData,
        seq: u64,
        since: Duration,
        verf: WriteVerf3,
    ) {
        if start >= self.size {
            return;
        }
        let len = to_usize((self.size - start).min(data.len() as u64));
        let end = start + len as u64;
        // Gaps of [start, end) not covered by dirty data.
        let mut gaps = Vec::new();
        let mut pos = start;
        for (k, p) in self.dirty.overlapping(start, end) {
            if k > pos {
                gaps.push((pos, k));
            }
            pos = pos.max(k + p.len());
        }
        if pos < end {
            gaps.push((pos, end));
        }
        for (s, e) in gaps {
            self.unstable.carve(s, e);
            self.unstable.insert(
                s,
                Unstable {
                    data: data.slice(to_usize(s - start), to_usize(e - start)),
                    seq,
                    since,
                    verf,
                    gen: self.ack_gen,
                },
            );
        }
    }

    /// A reply carried `verf`: if the server's verifier changed, every
    /// unstable range written under another one is sent again.
    fn note_verifier(&mut self, verf: WriteVerf3) {
        let changed = self.verf.is_some_and(|v| v != verf);
        self.verf = Some(verf);
        if !changed {
            return;
        }
        self.stats.verifier_changes += 1;
        for (k, p) in self.unstable.remove_where(|p| p.verf != verf) {
            self.stats.resent_bytes += p.len();
            self.redirty(k, p.data, p.seq, p.since);
        }
    }
}

/// Merges `bytes` at `start` with touching or overlapping chunks `olds`
/// (sorted): returns the union's start and contents.
fn merge(start: u64, bytes: &[u8], olds: &[(u64, Vec<u8>)], newer: bool) -> (u64, Vec<u8>) {
    let end = start + bytes.len() as u64;
    let s = olds.iter().map(|(k, _)| *k).fold(start, u64::min);
    let e = olds
        .iter()
        .map(|(k, v)| k + v.len() as u64)
        .fold(end, u64::max);
    let mut out = vec![0u8; to_usize(e - s)];
    let mut put = |at: u64, b: &[u8]| {
        let at = to_usize(at - s);
        out[at..at + b.len()].copy_from_slice(b);
    };
    if newer {
        olds.iter().for_each(|(k, v)| put(*k, v));
        put(start, bytes);
    } else {
        put(start, bytes);
        olds.iter().for_each(|(k, v)| put(*k, v));
    }
    (s, out)
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone, PartialEq, Eq)]
    enum TestError {
        Engine(WritebackError),
        Server(Nfsstat3),
    }

    impl From<WritebackError> for TestError {
        fn from(e: WritebackError) -> Self {
            Self::Engine(e)
        }
    }

    /// How the fake server answers a WRITE.
    #[derive(Debug, Clone, Copy)]
    enum Answer {
        Unstable,
        FileSync,
        /// Writes only this many bytes (at least 1).
        Short(usize),
        Fail(Nfsstat3),
    }

    /// A server with a volatile cache: `contents` is what READ sees,
    /// `stable` what survives a restart.
    #[derive(Debug, Default)]
    struct Server {
        contents: Vec<u8>,
        stable: Vec<u8>,
        boot: u8,
    }

    impl Server {
        fn verf(&self) -> WriteVerf3 {
            [self.boot; 8]
        }

        fn put(buf: &mut Vec<u8>, offset: u64, data: &[u8]) {
            let (o, e) = (offset as usize, offset as usize + data.len());
            if buf.len() < e {
                buf.resize(e, 0);
            }
            buf[o..e].copy_from_slice(data);
        }

        fn restart(&mut self) {
            self.contents = self.stable.clone();
            self.boot = self.boot.wrapping_add(1);
        }
    }

    /// The engine, the fake server, the actions sent and not yet answered,
    /// the virtual clock and the model of the file.
    struct Harness {
        wb: Writeback<TestError>,
        server: Server,
        sent: VecDeque<Action>,
        now: Duration,
        model: Vec<u8>,
    }

    fn config(wsize: u32, cap: u32) -> WritebackConfig {
        WritebackConfig {
            wsize,
            max_outstanding: cap,
            max_outstanding_bytes: 0,
            dirty_expire: Duration::from_secs(30),
            commit_threshold: 0,
        }
    }

    impl Harness {
        fn new(wsize: u32, cap: u32) -> Self {
            Self::with(config(wsize, cap))
        }

        fn with(config: WritebackConfig) -> Self {
            Self {
                wb: Writeback::new(&config, 0),
                server: Server::default(),
                sent: VecDeque::new(),
                now: Duration::ZERO,
                model: Vec::new(),
            }
        }

        fn write(&mut self, offset: u64, data: &[u8]) {
            self.wb.handle_write(self.now, offset, data).unwrap();
            Server::put(&mut self.model, offset, data);
        }

        /// Polls every action; returns how many there were.
        fn pump(&mut self) -> usize {
            let mut n = 0;
            while let Some(a) = self.wb.poll_action(self.now) {
                self.sent.push_back(a);
                n += 1;
            }
            n
        }

        fn writes_sent(&self) -> Vec<(u64, usize, StableHow)> {
            self.sent
                .iter()
                .filter_map(|a| match a {
                    Action::Write(w) => Some((w.offset, w.data.len(), w.stable)),
                    Action::Commit(_) => None,
                })
                .collect()
        }

        fn answer(&mut self, i: usize, how: Answer) {
            let Some(action) = self.sent.remove(i) else {
                return;
            };
            match action {
                Action::Write(w) => {
                    let data = w.data.as_slice();
                    let (count, committed) = match how {
                        Answer::Fail(s) => {
                            self.wb
                                .handle_write_reply(self.now, w.id, Err(TestError::Server(s)));
                            return;
                        }
                        Answer::Short(k) => (k.clamp(1, data.len()), StableHow::Unstable),
                        Answer::Unstable => (data.len(), StableHow::Unstable),
                        Answer::FileSync => (data.len(), StableHow::FileSync),
                    };
                    let committed = if w.stable == StableHow::FileSync {
                        StableHow::FileSync
                    } else {
                        committed
                    };
                    Server::put(&mut self.server.contents, w.offset, &data[..count]);
                    if committed == StableHow::FileSync {
                        Server::put(&mut self.server.stable, w.offset, &data[..count]);
                    }
                    let reply = WriteReply {
                        count: count as u32,
                        committed,
                        verf: self.server.verf(),
                    };
                    self.wb.handle_write_reply(self.now, w.id, Ok(reply));
                }
                Action::Commit(id) => {
                    if let Answer::Fail(s) = how {
                        self.wb.handle_commit_reply(id, Err(TestError::Server(s)));
                        return;
                    }
                    self.server.stable = self.server.contents.clone();
                    self.wb.handle_commit_reply(id, Ok(self.server.verf()));
                }
            }
        }

        fn answer_all(&mut self) {
            while !self.sent.is_empty() {
                self.answer(0, Answer::Unstable);
                self.pump();
            }
        }

        /// The driver's truncate: drop, wait for WRITEs beyond, SETATTR.
        fn truncate(&mut self, size: u64) {
            self.wb.handle_truncate(size);
            while self.wb.inflight_beyond(size) {
                let i = self
                    .sent
                    .iter()
                    .position(
                        |a| matches!(a, Action::Write(w) if w.offset + w.data.len() as u64 > size),
                    )
                    .unwrap();
                self.answer(i, Answer::Unstable);
            }
            self.server.contents.resize(size as usize, 0);
            self.server.stable.resize(size as usize, 0);
            self.model.resize(size as usize, 0);
        }

        /// The driver's fsync: drive until the barrier is stable.
        fn fsync(&mut self) -> Option<TestError> {
            let t = self.wb.request_sync();
            for _ in 0..100_000 {
                self.pump();
                if self.wb.is_synced(t) {
                    self.answer_all();
                    return self.wb.take_error();
                }
                assert!(!self.sent.is_empty(), "not synced and nothing to wait for");
                self.answer(0, Answer::Unstable);
            }
            panic!("fsync did not finish");
        }

        /// What a READ of the whole file returns after the overlay.
        fn view(&self) -> Vec<u8> {
            let mut v = self.server.contents.clone();
            v.resize(self.wb.size() as usize, 0);
            self.wb.overlay(0, &mut v);
            v
        }
    }

    #[test]
    fn the_oldest_held_data_is_dated_until_it_is_committed() {
        let mut h = Harness::new(4096, 4);
        assert_eq!(h.wb.oldest_held(), None);
        h.now = Duration::from_secs(1);
        h.write(0, &[1; 100]);
        h.now = Duration::from_secs(5);
        h.write(8192, &[2; 100]);
        assert_eq!(h.wb.oldest_held(), Some(Duration::from_secs(1)), "dirty");
        let t = h.wb.request_flush();
        h.pump();
        assert!(h.wb.outstanding() > 0);
        assert_eq!(
            h.wb.oldest_held(),
            Some(Duration::from_secs(1)),
            "in flight"
        );
        while !h.wb.is_flushed(t) {
            h.answer(0, Answer::Unstable);
            h.pump();
        }
        assert_eq!(h.wb.oldest_held(), Some(Duration::from_secs(1)), "unstable");
        assert_eq!(h.fsync(), None);
        assert_eq!(h.wb.oldest_held(), None, "committed");
    }

    #[test]
    fn a_sequential_writer_sends_each_full_chunk_at_once_within_the_cap() {
        let mut h = Harness::new(4096, 4);
        let data: Vec<u8> = (0..20_000u32).map(|i| i as u8).collect();
        for (i, piece) in data.chunks(1000).enumerate() {
            h.write(i as u64 * 1000, piece);
            h.pump();
            assert!(h.wb.outstanding() <= 4);
        }
        // Chunks 0..4 fill at 4096, 8192, 12288, 16384: 4 WRITEs, the cap.
        let w = h.writes_sent();
        assert_eq!(
            w,
            (0..4)
                .map(|i| (i * 4096, 4096, StableHow::Unstable))
                .collect::<Vec<_>>()
        );
        assert!(!h.wb.writer_should_wait(), "no completed chunk waits");
        h.write(20_000, &[7; 480]); // completes the fifth chunk
        assert_eq!(h.pump(), 0, "the cap is reached");
        assert!(h.wb.writer_should_wait());
        h.answer(0, Answer::Unstable);
        assert_eq!(h.pump(), 1);
        assert!(!h.wb.writer_should_wait());
        assert_eq!(h.wb.stats().early_writes, 5);
        assert_eq!(h.wb.stats().max_outstanding, 4);
        assert_eq!(h.wb.dirty_bytes(), 0);
        h.model.resize(20_480, 7);
        assert_eq!(h.fsync(), None);
        assert_eq!(h.server.stable, h.model);
        assert_eq!(h.wb.stats().commits_sent, 1);
    }

    #[test]
    fn a_byte_cap_bounds_the_bytes_in_flight() {
        let mut h = Harness::with(WritebackConfig {
            max_outstanding_bytes: 10_000,
            ..config(4096, 16)
        });
        for i in 0..5u64 {
            h.write(i * 4096, &[i as u8; 4096]);
            h.pump();
        }
        // 2 x 4096 fit in 10,000 bytes; a third would not.
        assert_eq!(h.wb.outstanding(), 2);
        assert_eq!(h.wb.inflight.bytes, 8192);
        assert!(h.wb.writer_should_wait(), "completed chunks wait for room");
        h.answer(0, Answer::Unstable);
        assert_eq!(h.pump(), 1);
        assert_eq!(h.wb.inflight.bytes, 8192);
        h.answer_all();
        assert_eq!(h.wb.stats().max_outstanding, 2);
        assert!(!h.wb.writer_should_wait());
        assert_eq!(h.fsync(), None);
        assert_eq!(h.server.stable, h.model);

        // A cap below wsize still lets one WRITE go.
        let mut h = Harness::with(WritebackConfig {
            max_outstanding_bytes: 1000,
            ..config(4096, 16)
        });
        h.write(0, &[1; 8192]);
        assert_eq!(h.pump(), 1);
        assert!(h.wb.writer_should_wait());
        h.answer(0, Answer::Unstable);
        assert_eq!(h.pump(), 1);
        assert_eq!(h.wb.stats().max_outstanding, 1);

        // Legacy mode ignores it: flushes use the whole legacy window.
        let mut h = Harness::with(WritebackConfig {
            max_outstanding_bytes: 1000,
            ..config(4096, 0)
        });
        h.write(0, &[1; 8 * 4096]);
        h.wb.request_flush();
        assert_eq!(h.pump(), 8);
    }

    #[test]
    fn a_getattr_flush_waits_only_for_what_was_in_flight_or_dirty_at_its_start() {
        let mut h = Harness::with(WritebackConfig {
            commit_threshold: 4096,
            ..config(4096, 4)
        });
        h.write(0, &[1; 16_384]);
        assert_eq!(h.pump(), 4, "four chunks in flight: the cap");
        h.write(16_384, &[2; 100]); // a partial chunk, dirty
        let t = h.wb.request_flush();
        let covered: Vec<WriteId> = h
            .sent
            .iter()
            .filter_map(|a| match a {
                Action::Write(w) => Some(w.id),
                Action::Commit(_) => None,
            })
            .collect();
        assert!(covered.iter().all(|id| h.wb.is_write_before(*id, t)));
        assert!(h.wb.poll_flush(t).is_none(), "the window is full");
        // The writer goes on: a chunk written after the getattr began.
        h.write(20_480, &[3; 4096]);
        h.answer(0, Answer::Unstable);
        // The getattr sends the partial chunk it covers, not the later one,
        // and no COMMIT although 4 KiB are unstable.
        let Some(Action::Write(w)) = h.wb.poll_flush(t) else {
            panic!("the covered partial chunk is sent");
        };
        assert_eq!((w.offset, w.data.len()), (16_384, 100));
        assert!(h.wb.is_write_before(w.id, t));
        h.sent.push_back(Action::Write(w));
        h.answer(0, Answer::Unstable);
        assert!(h.wb.poll_flush(t).is_none(), "only later data is left");
        // The writer's own pump sends the later chunk and a COMMIT.
        h.pump();
        assert!(h.sent.iter().any(|a| matches!(a, Action::Commit(_))));
        let later = h
            .sent
            .iter()
            .find_map(|a| match a {
                Action::Write(w) if w.offset == 20_480 => Some(w.id),
                _ => None,
            })
            .unwrap();
        assert!(!h.wb.is_write_before(later, t));
        // Acking the covered WRITEs ends the flush; the later one may still
        // be in flight.
        while !h.wb.is_flushed(t) {
            let i = h
                .sent
                .iter()
                .position(|a| matches!(a, Action::Write(w) if w.id != later))
                .unwrap();
            h.answer(i, Answer::Unstable);
        }
        assert_eq!(h.wb.outstanding(), 1, "the later chunk is still in flight");
        assert!(h
            .sent
            .iter()
            .any(|a| matches!(a, Action::Write(w) if w.id == later)));
    }

    #[test]
    fn an_unaligned_sequential_writer_sends_the_head_chunk_too() {
        let mut h = Harness::new(4096, 16);
        h.wb.handle_truncate(100);
        h.server.contents = vec![0; 100];
        h.model = vec![0; 100];
        for i in 0..10u64 {
            h.write(100 + i * 1000, &[1; 1000]);
        }
        h.pump();
        assert_eq!(
            h.writes_sent(),
            [
                (100, 3996, StableHow::Unstable),
                (4096, 4096, StableHow::Unstable)
            ]
        );
    }

    #[test]
    fn random_writes_are_not_sent_early() {
        let mut h = Harness::new(4096, 16);
        h.write(2048, &[1; 2048]);
        h.write(0, &[2; 2048]); // block 0 is full, but not sequentially
        h.write(9000, &[3; 100]);
        h.write(4096, &[4; 4000]);
        assert_eq!(h.pump(), 0);
        assert!(!h.wb.is_sequential());
        assert_eq!(h.wb.dirty_bytes(), 8196);
        assert_eq!(h.view(), h.model);
        assert_eq!(h.fsync(), None);
        assert_eq!(h.server.stable, h.model);
    }

    #[test]
    fn legacy_mode_sends_nothing_until_a_flush() {
        let mut h = Harness::new(4096, 0);
        for i in 0..100u64 {
            h.write(i * 1000, &[i as u8; 1000]);
        }
        assert_eq!(h.pump(), 0);
        assert_eq!(h.wb.dirty_bytes(), 100_000);
        let t = h.wb.request_flush();
        assert_eq!(h.pump(), LEGACY_FLUSH_WINDOW as usize);
        assert!(!h.wb.is_flushed(t));
        h.answer_all();
        assert!(h.wb.is_flushed(t));
        assert_eq!(h.wb.stats().early_writes, 0);
        assert_eq!(h.wb.stats().writes_sent, 25);
        // A flush does not commit.
        assert_eq!(h.wb.stats().commits_sent, 0);
        assert_eq!(h.server.contents, h.model);
    }

    #[test]
    fn a_flush_covers_only_what_was_written_before_it() {
        let mut h = Harness::new(4096, 16);
        h.write(0, &[1; 100]);
        let t = h.wb.request_flush();
        h.write(100, &[2; 100]); // appended after the barrier: same chunk
        h.write(50_000, &[3; 10]); // a later chunk: not part of the flush
        h.pump();
        assert_eq!(h.writes_sent(), [(0, 200, StableHow::Unstable)]);
        h.answer_all();
        assert!(h.wb.is_flushed(t));
        assert_eq!(h.wb.dirty_bytes(), 10);
    }

    #[test]
    fn old_partial_chunks_expire() {
        let mut h = Harness::new(4096, 16);
        h.now = Duration::from_secs(100);
        h.write(0, &[1; 10]);
        assert_eq!(h.wb.poll_timeout(), Some(Duration::from_secs(130)));
        h.now = Duration::from_secs(129);
        assert_eq!(h.pump(), 0);
        h.now = Duration::from_secs(130);
        assert_eq!(h.pump(), 1);
        assert_eq!(h.wb.stats().expired_writes, 1);
        assert_eq!(h.wb.poll_timeout(), None);
    }

    #[test]
    fn a_short_write_sends_the_rest_again() {
        let mut h = Harness::new(4096, 16);
        h.write(0, &[5; 4096]);
        h.pump();
        h.answer(0, Answer::Short(1000));
        assert_eq!(h.wb.stats().short_writes, 1);
        h.pump();
        assert_eq!(h.writes_sent(), [(1000, 3096, StableHow::Unstable)]);
        assert_eq!(h.fsync(), None);
        assert_eq!(h.server.stable, h.model);
    }

    #[test]
    fn a_verifier_change_before_commit_resends_everything_uncommitted() {
        let mut h = Harness::new(4096, 16);
        let data: Vec<u8> = (0..16_384u32).map(|i| (i * 7) as u8).collect();
        h.write(0, &data);
        h.pump();
        h.answer(0, Answer::Unstable);
        h.answer(0, Answer::Unstable);
        h.server.restart(); // the first two chunks are lost
        h.answer_all();
        assert_eq!(h.wb.stats().verifier_changes, 1);
        assert_eq!(h.wb.stats().resent_bytes, 8192);
        assert_eq!(h.view(), h.model);
        assert_eq!(h.fsync(), None);
        assert_eq!(h.server.stable, h.model);
        // A restart between the last WRITE and the COMMIT.
        h.write(200, &[8; 10]);
        h.write(5000, &[8; 10]);
        let t = h.wb.request_sync();
        assert_eq!(h.pump(), 2);
        h.answer(0, Answer::Unstable);
        h.answer(0, Answer::Unstable);
        h.server.restart();
        h.pump(); // COMMIT
        h.answer(0, Answer::Unstable);
        assert!(
            !h.wb.is_synced(t),
            "the COMMIT's new verifier forces a resend"
        );
        assert_eq!(h.fsync(), None);
        assert_eq!(h.server.stable, h.model);
        assert_eq!(h.wb.stats().verifier_changes, 2);
    }

    #[test]
    fn file_sync_replies_need_no_commit() {
        let mut h = Harness::new(4096, 16);
        h.write(0, &[1; 8192]);
        h.pump();
        h.answer(0, Answer::FileSync);
        h.answer(0, Answer::FileSync);
        assert_eq!(h.wb.held_bytes(), 0);
        assert_eq!(h.fsync(), None);
        assert_eq!(h.wb.stats().commits_sent, 0);
        assert_eq!(h.server.stable, h.model);
    }

    #[test]
    fn a_sync_of_one_chunk_is_one_file_sync_write() {
        let mut h = Harness::new(4096, 16);
        h.write(0, b"hello");
        assert_eq!(h.fsync(), None);
        assert_eq!(h.wb.stats().writes_sent, 1);
        assert_eq!(h.wb.stats().file_sync_writes, 1);
        assert_eq!(h.wb.stats().commits_sent, 0);
        assert_eq!(h.server.stable, b"hello");
    }

    #[test]
    fn an_error_is_reported_once_at_the_next_write() {
        let mut h = Harness::new(4096, 16);
        h.write(0, &[1; 4096]);
        h.pump();
        h.answer(0, Answer::Fail(Nfsstat3::Nospc));
        assert_eq!(
            h.wb.handle_write(h.now, 4096, b"x"),
            Err(TestError::Server(Nfsstat3::Nospc))
        );
        assert_eq!(h.wb.size(), 4096, "the failed write wrote nothing");
        assert!(h.wb.handle_write(h.now, 4096, b"x").is_ok());
        h.write(0, &[2; 10]);
        h.wb.request_flush();
        assert_eq!(h.pump(), 2);
        h.answer(0, Answer::Fail(Nfsstat3::Io));
        h.answer_all();
        assert_eq!(h.fsync(), Some(TestError::Server(Nfsstat3::Io)));
        assert_eq!(h.fsync(), None, "reported once");
    }

    #[test]
    fn a_commit_error_is_reported_at_fsync() {
        let mut h = Harness::new(4096, 16);
        h.write(0, &[1; 8192]);
        h.pump();
        h.answer_all();
        let t = h.wb.request_sync();
        assert_eq!(h.pump(), 1);
        h.answer(0, Answer::Fail(Nfsstat3::Stale));
        assert!(h.wb.is_synced(t));
        assert_eq!(h.wb.take_error(), Some(TestError::Server(Nfsstat3::Stale)));
        assert_eq!(h.wb.held_bytes(), 0);
    }

    #[test]
    fn a_zero_byte_write_reply_is_an_error() {
        let mut h = Harness::new(4096, 16);
        h.write(0, &[1; 4096]);
        h.pump();
        let Some(Action::Write(w)) = h.sent.pop_front() else {
            panic!("no write");
        };
        let reply = WriteReply {
            count: 0,
            committed: StableHow::Unstable,
            verf: [0; 8],
        };
        h.wb.handle_write_reply(h.now, w.id, Ok(reply));
        assert_eq!(
            h.wb.take_error(),
            Some(TestError::Engine(WritebackError::NoProgress))
        );
    }

    #[test]
    fn rewriting_bytes_in_flight_waits_for_the_reply_then_sends_the_new_bytes() {
        let mut h = Harness::new(4096, 16);
        h.write(0, &[1; 4096]);
        h.pump();
        h.write(100, &[2; 10]);
        let t = h.wb.request_flush();
        assert_eq!(h.pump(), 0, "the chunk overlaps a WRITE in flight");
        assert_eq!(h.view(), h.model, "reads see the newest bytes");
        h.answer(0, Answer::Unstable);
        h.pump();
        assert_eq!(h.writes_sent(), [(100, 10, StableHow::Unstable)]);
        h.answer_all();
        assert!(h.wb.is_flushed(t));
        assert_eq!(h.server.contents, h.model);
    }

    #[test]
    fn truncate_drops_data_beyond_and_waits_for_writes_beyond() {
        let mut h = Harness::new(4096, 16);
        h.write(0, &[1; 8192]);
        h.pump();
        h.write(8192, &[2; 100]);
        h.wb.handle_truncate(5000);
        assert!(h.wb.inflight_beyond(5000));
        assert_eq!(h.wb.dirty_bytes(), 0);
        h.answer_all();
        assert!(!h.wb.inflight_beyond(5000));
        // The acknowledged bytes beyond the new size are not kept.
        assert_eq!(h.wb.held_bytes(), 5000);
        h.server.contents.truncate(5000);
        h.server.stable.truncate(5000);
        h.model.truncate(5000);
        h.write(6000, &[3; 10]);
        assert_eq!(h.view(), h.model);
        assert_eq!(h.fsync(), None);
        assert_eq!(h.server.stable, h.model);
    }

    /// A truncate whose SETATTR fails puts back what it dropped: dirty
    /// data, data that was in flight and data acknowledged UNSTABLE beyond
    /// the cut are all written again, so even a server restart (a new
    /// verifier) before the COMMIT loses none of it.
    #[test]
    fn a_failed_truncate_is_undone() {
        let mut h = Harness::new(4096, 16);
        let data: Vec<u8> = (0..16_384u32).map(|i| (i * 13) as u8).collect();
        h.write(0, &data[..12_288]);
        assert_eq!(h.pump(), 3);
        h.answer(0, Answer::Unstable); // [0, 4096): acknowledged, below
        h.answer(0, Answer::Unstable); // [4096, 8192): acknowledged, across
                                       // [8192, 12288) stays in flight; [12288, 16384) is dirty.
        h.write(12_288, &data[12_288..]);
        let taken = h.wb.handle_truncate(6000);
        assert!(h.wb.inflight_beyond(6000));
        h.answer_all();
        // The SETATTR failed: the file is as it was.
        h.wb.undo_truncate(taken);
        assert_eq!(h.wb.size(), 16_384);
        assert_eq!(h.view(), h.model);
        h.server.restart(); // everything unstable on the server is lost
        assert_eq!(h.fsync(), None);
        assert_eq!(h.server.stable, h.model);
        assert_eq!(h.server.stable, data);
    }

    #[test]
    fn a_commit_threshold_bounds_unstable_bytes() {
        let mut h = Harness::with(WritebackConfig {
            commit_threshold: 16_384,
            ..config(4096, 4)
        });
        for i in 0..64u64 {
            h.write(i * 4096, &[i as u8; 4096]);
            h.pump();
            while h.wb.writer_should_wait() {
                h.answer(0, Answer::Unstable);
                h.pump();
            }
            if let Some(i) = h.sent.iter().position(|a| matches!(a, Action::Commit(_))) {
                h.answer(i, Answer::Unstable);
            }
            assert!(h.wb.held_bytes() <= 16_384 + 4 * 4096 + 2 * 4096);
        }
        assert!(h.wb.stats().commits_sent >= 10);
    }

    #[test]
    fn a_writer_waits_while_too_much_is_unstable() {
        let mut h = Harness::with(WritebackConfig {
            commit_threshold: 8192,
            ..config(4096, 16)
        });
        h.write(0, &[1; 8192]);
        h.pump();
        h.answer(0, Answer::Unstable);
        h.answer(0, Answer::Unstable);
        assert_eq!(h.pump(), 1, "the threshold sends a COMMIT");
        assert!(!h.wb.writer_should_wait());
        h.write(8192, &[2; 8192]);
        h.pump();
        h.answer(1, Answer::Unstable);
        h.answer(1, Answer::Unstable);
        assert!(
            h.wb.writer_should_wait(),
            "16 KiB unstable, COMMIT in flight"
        );
        h.answer(0, Answer::Unstable);
        assert!(!h.wb.writer_should_wait());
        assert_eq!(h.wb.held_bytes(), 8192);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Write { offset: u16, len: u16, byte: u8 },
        Answer { pick: u8, how: u8, short: u16 },
        Restart,
        Truncate(u16),
        Tick(u8),
        Pump,
        Flush,
        Sync,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u16..600, 1u16..200, any::<u8>())
                .prop_map(|(offset, len, byte)| Op::Write { offset, len, byte }),
            6 => (any::<u8>(), 0u8..4, any::<u16>())
                .prop_map(|(pick, how, short)| Op::Answer { pick, how, short }),
            1 => Just(Op::Restart),
            1 => (0u16..700).prop_map(Op::Truncate),
            1 => (0u8..40).prop_map(Op::Tick),
            3 => Just(Op::Pump),
            1 => Just(Op::Flush),
            1 => Just(Op::Sync),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Any mix of writes, truncates, reply orders, short and FILE_SYNC
        /// replies and server restarts ends, after fsync, with exactly the
        /// model's bytes stable on the server; reads see the model at every
        /// step.
        #[test]
        fn fsync_makes_the_models_bytes_stable(
            wsize in prop_oneof![Just(16u32), Just(64), Just(100)],
            cap in 0u32..5,
            byte_cap in prop_oneof![Just(0u64), Just(50), Just(150)],
            threshold in prop_oneof![Just(0u64), Just(128)],
            ops in prop::collection::vec(op(), 1..150),
        ) {
            let mut h = Harness::with(WritebackConfig {
                wsize,
                max_outstanding: cap,
                max_outstanding_bytes: byte_cap,
                dirty_expire: Duration::from_millis(500),
                commit_threshold: threshold,
            });
            for op in ops {
                match op {
                    Op::Write { offset, len, byte } => {
                        let data: Vec<u8> =
                            (0..len).map(|i| byte.wrapping_add(i as u8)).collect();
                        h.write(u64::from(offset), &data);
                        h.pump();
                    }
                    Op::Answer { pick, how, short } => {
                        if !h.sent.is_empty() {
                            let i = usize::from(pick) % h.sent.len();
                            let how = match how {
                                0 | 1 => Answer::Unstable,
                                2 => Answer::FileSync,
                                _ => Answer::Short(usize::from(short)),
                            };
                            h.answer(i, how);
                        }
                    }
                    Op::Restart => h.server.restart(),
                    Op::Truncate(size) => h.truncate(u64::from(size)),
                    Op::Tick(ms) => h.now += Duration::from_millis(u64::from(ms) * 20),
                    Op::Pump => {
                        h.pump();
                    }
                    Op::Flush => {
                        h.wb.request_flush();
                        h.pump();
                    }
                    Op::Sync => {
                        h.wb.request_sync();
                        h.pump();
                    }
                }
                prop_assert_eq!(h.wb.size(), h.model.len() as u64);
                prop_assert!(h.server.contents.len() <= h.model.len());
                prop_assert_eq!(h.view(), h.model.clone());
                prop_assert!(h.wb.outstanding() <= cap.max(LEGACY_FLUSH_WINDOW) as usize);
                if cap > 0 && byte_cap > 0 {
                    // One WRITE (at most wsize) may exceed the byte cap alone.
                    prop_assert!(h.wb.inflight.bytes <= byte_cap.max(u64::from(wsize)));
                }
                prop_assert!(h.wb.take_error().is_none());
            }
            prop_assert_eq!(h.fsync(), None);
            prop_assert_eq!(&h.server.stable, &h.model);
            prop_assert_eq!(h.wb.held_bytes(), 0);
        }
    }
}
