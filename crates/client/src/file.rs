//! [`NfsFile`]: an open regular file with write-behind and read-ahead.
//!
//! The policies live in two sans-IO engines, [`Writeback`] and
//! [`ReadAhead`]; this module drives them with [`NfsClient`] calls.
//!
//! **Threads.** Every method takes `&self` and may be called from several
//! threads at once. There is no background thread: the thread that needs
//! progress makes it. A writer over its file's WRITE cap, a writer over the
//! mount's [`DirtyBudget`], `flush`, `fsync`, `close` and `truncate` send
//! what the engine asks for and collect replies themselves (`getattr` sends
//! and collects only what its flush needs),
//! and dirty data older than [`IoConfig::dirty_expire`] is sent at the
//! file's next `read`, `write`, `flush`, `fsync` or `getattr`. A file nobody
//! touches keeps it until then, until it is dropped, or until the owner's
//! flusher calls [`NfsFile::write_back_expired`] (`rnfs mount` has one).
//!
//! **Locking.** One mutex (`state`) guards both engines, the WRITEs in
//! flight and the read-ahead cache; one condvar (`progress`) is signalled
//! whenever a thread that did I/O without the lock puts its result back,
//! if any thread waits on it (a lone writer makes no `futex` call for it).
//! The lock is never held across a network wait: a thread takes a WRITE (or
//! a READ) out of the state, drops the lock, sends or waits, then locks
//! again and hands the reply to the engine. A WRITE reply is collected under
//! the lock only when it has already arrived (`is_ready`). A thread that
//! needs progress while another thread holds every outstanding reply waits
//! on the condvar. A truncate holds back writes and other truncates from its
//! `handle_truncate` to its SETATTR's reply (`State::truncating`; they wait
//! on the condvar too). Lock order: `state`, then nothing; the budget is
//! atomics.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rnfs_nfs3::{Fattr3, FileHandle, Nfstime3, Sattr3, WriteVerf3};

use crate::error::{ClientError, NfsError};
use crate::nfs::{CollectedWrite, NfsClient, PendingRead, PendingWrite, WriteOutcome};
use crate::readahead::ReadAhead;
use crate::session::Session;
use crate::writeback::{
    Action, CommitId, Ticket, WriteId, WriteReply, Writeback, WritebackConfig, LEGACY_FLUSH_WINDOW,
};

/// The most READs one file's read-ahead keeps in flight (its window is
/// clamped to this many `rsize` pieces).
pub const MAX_READ_AHEAD_CALLS: u32 = 16;

/// How an [`NfsFile`] reads and writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoConfig {
    /// Bytes per READ (512 B to 1 MiB).
    pub rsize: u32,
    /// Bytes per WRITE (512 B to 1 MiB); write-behind works in chunks
    /// aligned to it.
    pub wsize: u32,
    /// The most WRITEs in flight per file (default 16). A sequential
    /// writer's full chunks are sent at once, and the writer blocks while
    /// this many are outstanding. 0 is the legacy behaviour: nothing is sent
    /// before a flush, fsync, close, getattr or budget pressure.
    pub max_outstanding_writes: u32,
    /// The most bytes of WRITEs in flight per file when
    /// `max_outstanding_writes` is not 0 (default 2 MiB; 0: no byte limit).
    /// A `getattr` of the file waits for its WRITEs in flight, which wait
    /// behind every other file's on the connection and the server: this
    /// bounds that wait for large `wsize`s (2 MiB is 2 WRITEs of 1 MiB, 8 of
    /// 256 KiB). One WRITE is always allowed, whatever its size. A single
    /// writer over a long, fast link needs about its bandwidth-delay product
    /// here.
    pub max_outstanding_write_bytes: u64,
    /// The most bytes read ahead of a sequential reader (0: no read-ahead).
    pub max_read_ahead: u32,
    /// Dirty data older than this is written at the file's next operation.
    pub dirty_expire: Duration,
}

impl IoConfig {
    /// Default outstanding WRITEs per file (Staubach's suggestion, 2009).
    pub const DEFAULT_MAX_OUTSTANDING_WRITES: u32 = 16;

    /// Default bytes of WRITEs in flight per file (seed 003: six writers
    /// beside a `stat` loop keep the `stat` p99 under 50 ms with it).
    pub const DEFAULT_MAX_OUTSTANDING_WRITE_BYTES: u64 = 2 << 20;

    /// The session's READ and WRITE sizes, other fields at their defaults.
    pub fn for_session(s: &Session) -> Self {
        Self {
            rsize: s.rsize(),
            wsize: s.wsize(),
            ..Self::default()
        }
    }
}

impl Default for IoConfig {
    fn default() -> Self {
        Self {
            rsize: 1 << 20,
            wsize: 1 << 20,
            max_outstanding_writes: Self::DEFAULT_MAX_OUTSTANDING_WRITES,
            max_outstanding_write_bytes: Self::DEFAULT_MAX_OUTSTANDING_WRITE_BYTES,
            max_read_ahead: 8 << 20,
            dirty_expire: Duration::from_secs(30),
        }
    }
}

/// The bytes that the files of one mount hold and the server has not made
/// stable (dirty, in flight or uncommitted), with Linux's hysteresis:
/// congested from the limit until usage falls below 3/4 of it. A writer that
/// finds it congested flushes and commits its own file before returning.
#[derive(Debug)]
pub struct DirtyBudget {
    max: u64,
    /// Bytes charged by all files. Relaxed: only a heuristic reads it.
    used: AtomicU64,
    /// Set by a charge that reaches `max`, cleared by a release that falls
    /// below 3/4 of it. Relaxed: a stale value only delays or adds one
    /// flush; no data is published through it.
    congested: AtomicBool,
}

impl DirtyBudget {
    /// Linux's cap on `nfs_congestion_kb`: a sensible budget for a mount.
    pub const DEFAULT_MAX_BYTES: u64 = 256 << 20;

    /// A budget of `max_bytes` (0: unlimited).
    pub fn new(max_bytes: u64) -> Arc<Self> {
        Arc::new(Self {
            max: max_bytes,
            used: AtomicU64::new(0),
            congested: AtomicBool::new(false),
        })
    }

    /// Bytes held by the files now.
    pub fn dirty_bytes(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// The limit given to [`new`](Self::new).
    pub fn max_bytes(&self) -> u64 {
        self.max
    }

    /// Whether writers must flush before returning.
    pub fn is_congested(&self) -> bool {
        self.congested.load(Ordering::Relaxed)
    }

    fn charge(&self, n: u64) {
        let used = self.used.fetch_add(n, Ordering::Relaxed) + n;
        if self.max > 0 && used >= self.max {
            self.congested.store(true, Ordering::Relaxed);
        }
    }

    fn release(&self, n: u64) {
        let used = self.used.fetch_sub(n, Ordering::Relaxed) - n;
        if used < self.max - self.max / 4 {
            self.congested.store(false, Ordering::Relaxed);
        }
    }
}

/// Counters of one file's I/O.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileStats {
    /// WRITEs sent.
    pub writes_sent: u64,
    /// Bytes sent in WRITEs.
    pub bytes_written: u64,
    /// WRITEs sent early, for a sequential writer's completed chunk.
    pub early_writes: u64,
    /// WRITEs of dirty data that had expired.
    pub expired_writes: u64,
    /// WRITEs sent `FILE_SYNC` (a sync that needed only one).
    pub file_sync_writes: u64,
    /// COMMITs sent.
    pub commits_sent: u64,
    /// Bytes sent again (short WRITEs, verifier changes).
    pub resent_bytes: u64,
    /// WRITE replies with fewer bytes than sent.
    pub short_writes: u64,
    /// Times the server's write verifier changed.
    pub verifier_changes: u64,
    /// WRITE and COMMIT failures.
    pub write_errors: u64,
    /// The most WRITEs outstanding at once.
    pub max_outstanding: u64,
    /// Times a writer blocked on the file's WRITE cap.
    pub writer_waits: u64,
    /// Times a writer flushed because the mount's budget was congested.
    pub budget_waits: u64,
    /// `getattr`s answered with the post-op attributes of a WRITE reply
    /// collected during the call, without a GETATTR.
    pub getattrs_from_writes: u64,
    /// READs sent for the application's reads (cache misses).
    pub reads_sent: u64,
    /// READs sent ahead of a sequential reader.
    pub read_ahead_reads: u64,
    /// Bytes asked for by READs sent for the application's reads and ahead
    /// of it: a sequential reader's is the file's size, once.
    pub bytes_asked: u64,
    /// WRITEs made synchronously because background calls (of every file)
    /// held their share of the connection's slots
    /// ([`RpcClient::submit_background`](crate::RpcClient::submit_background)).
    pub synchronous_writes: u64,
    /// Bytes served from read-ahead.
    pub read_ahead_hit_bytes: u64,
}

/// A prefetched range.
#[derive(Debug)]
enum Cached {
    /// READ sent, reply not collected; `held` is this client's data in the
    /// range when it was sent, to lay over the reply.
    Pending {
        len: u64,
        call: PendingRead,
        held: Vec<(u64, Vec<u8>)>,
    },
    /// The server's bytes with this client's laid over (fewer than asked
    /// after a short READ; zeros past the server's end of file).
    Ready { data: Vec<u8> },
}

impl Cached {
    fn len(&self) -> u64 {
        match self {
            Self::Pending { len, .. } => *len,
            Self::Ready { data, .. } => data.len() as u64,
        }
    }
}

/// Everything behind the file's lock.
#[derive(Debug)]
struct State {
    wb: Writeback<NfsError>,
    /// WRITEs sent whose replies no thread is collecting.
    pending: BTreeMap<WriteId, PendingWrite>,
    /// The freshest post-op attributes of the WRITE replies collected.
    post_op: Option<Fattr3>,
    /// WRITE replies with post-op attributes collected so far.
    post_op_replies: u64,
    /// Replies to WRITEs with a smaller id are not used for `post_op`: they
    /// were sent before the attributes last changed by other means.
    post_op_floor: u64,
    /// The largest WRITE id the engine has handed out.
    last_write: u64,
    /// Threads doing this file's I/O without the lock; each signals
    /// `progress` when done.
    busy: u32,
    /// WRITE and COMMIT failures handed to the engine so far, and the errno
    /// of the last (see [`NfsFile::write_back_failures`]).
    failures: u64,
    last_failure: i32,
    /// Threads waiting on `progress`: a signal with none is skipped, so a
    /// lone writer makes no `futex` call per WRITE (`signal_progress`).
    waiting: u32,
    /// Signals sent on `progress`.
    #[cfg(test)]
    signals: u64,
    /// The part of `wb.held_bytes()` charged to the budget.
    charged: u64,
    ra: ReadAhead,
    /// Read-ahead, disjoint ranges by offset.
    cache: BTreeMap<u64, Cached>,
    cache_bytes: u64,
    /// Bumped by every write and truncate: a READ sent before the bump is
    /// not cached.
    cache_epoch: u64,
    stats: FileStats,
    /// Who WRITEs, COMMITs and truncates go out as, when not the opener's
    /// client: the last one given to [`NfsFile::write_as`].
    writer: Option<Arc<NfsClient>>,
    /// A truncate is between its `handle_truncate` and its SETATTR's reply.
    /// Writes and other truncates wait (on `progress`) until it is done:
    /// they come after it, and their data must not reach the server before
    /// the SETATTR, which would cut it.
    truncating: bool,
    /// Bumped by everything this client does that may change the file's
    /// size on the server (WRITE and COMMIT replies, truncates): a size
    /// fetched by a call sent at one value applies only if it still holds
    /// when the reply comes. Else a GETATTR answered before a truncate, or
    /// before a write that a COMMIT then released, would set the size back.
    size_gen: u64,
}

impl State {
    /// A file's state before any I/O.
    fn new(wb: Writeback<NfsError>, ra: ReadAhead) -> Self {
        State {
            writer: None,
            truncating: false,
            size_gen: 0,
            wb,
            pending: BTreeMap::new(),
            post_op: None,
            post_op_replies: 0,
            post_op_floor: 0,
            last_write: 0,
            busy: 0,
            failures: 0,
            last_failure: 0,
            waiting: 0,
            #[cfg(test)]
            signals: 0,
            charged: 0,
            ra,
            cache: BTreeMap::new(),
            cache_bytes: 0,
            cache_epoch: 0,
            stats: FileStats::default(),
        }
    }

    /// Hands WRITE `id`'s reply to the engine, keeping its post-op
    /// attributes if they are the freshest.
    fn write_reply(&mut self, now: Duration, id: WriteId, outcome: Result<WriteOutcome, NfsError>) {
        self.size_gen += 1;
        if let Ok(after) = outcome.as_ref().map(|o| o.wcc.after) {
            if let Some(a) = after.filter(|_| id.0 >= self.post_op_floor) {
                if self.post_op.is_none_or(|p| freshness(&a) >= freshness(&p)) {
                    self.post_op = Some(a);
                }
                self.post_op_replies += 1;
            }
        }
        let errno = outcome.as_ref().err().map(NfsError::errno);
        self.wb.handle_write_reply(now, id, outcome.map(reply));
        self.count_failure(errno);
    }

    /// Counts a failure the engine just took, if it did: `errno` is the
    /// reply's error (`None`: the engine's own, a WRITE that wrote nothing).
    fn count_failure(&mut self, errno: Option<i32>) {
        let failures = self.wb.stats().errors;
        if failures != self.failures {
            self.failures = failures;
            self.last_failure = errno.unwrap_or(libc::EIO);
        }
    }

    /// Forgets the post-op attributes of WRITEs sent so far.
    fn forget_post_op(&mut self) {
        self.post_op = None;
        self.post_op_floor = self.last_write + 1;
    }

    /// Drops read-ahead overlapping `[from, to)`.
    fn invalidate(&mut self, from: u64, to: u64) {
        self.cache_epoch += 1;
        let keys: Vec<u64> = self
            .cache
            .range(..to)
            .rev()
            .take_while(|(k, c)| *k + c.len() > from)
            .map(|(k, _)| *k)
            .collect();
        for k in keys {
            self.uncache(k);
        }
    }

    fn uncache(&mut self, key: u64) -> Option<Cached> {
        let c = self.cache.remove(&key)?;
        self.cache_bytes -= c.len();
        Some(c)
    }

    fn cache_insert(&mut self, key: u64, c: Cached) {
        self.cache_bytes += c.len();
        if let Some(old) = self.cache.insert(key, c) {
            self.cache_bytes -= old.len();
        }
    }

    /// Drops read-ahead behind `offset` or too far ahead of it.
    fn evict(&mut self, offset: u64, horizon: u64) {
        while let Some((k, c)) = self.cache.first_key_value() {
            if k + c.len() > offset {
                break;
            }
            let k = *k;
            self.uncache(k);
        }
        let far: Vec<u64> = self
            .cache
            .range(offset.saturating_add(horizon)..)
            .map(|(k, _)| *k)
            .collect();
        for k in far {
            self.uncache(k);
        }
    }
}

/// How a truncate's SETATTR failed ([`NfsFile::send_truncate`]).
enum TruncateFailed {
    /// The file is not cut, or not known to be: the data dropped beyond
    /// the new size is put back.
    NotCut(NfsError),
    /// The file is cut; only its attributes could not be had.
    Cut(NfsError),
}

/// Ends a truncate of its file: clears `truncating`, counts a size change
/// (a GETATTR sent while the SETATTR was on its way may predate it, and a
/// SETATTR that failed may still have been applied), and wakes the writes
/// and truncates that wait. On drop too, so a panic ends it as well.
struct TruncateEnd<'a>(&'a NfsFile);

impl<'a> TruncateEnd<'a> {
    /// Ends the truncate and returns the file's state, locked.
    fn end(self) -> MutexGuard<'a, State> {
        let file = self.0;
        std::mem::forget(self);
        let mut st = file.lock();
        Self::finish(file, &mut st);
        st
    }

    fn finish(file: &NfsFile, st: &mut State) {
        st.truncating = false;
        st.size_gen += 1;
        file.signal_progress(st);
    }
}

impl Drop for TruncateEnd<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        Self::finish(self.0, &mut st);
    }
}

/// One READ of read-ahead to send.
struct Ahead {
    at: u64,
    len: u64,
    /// This client's data in `[at, at + len)` before the READ is sent
    /// ([`Writeback::snapshot`]).
    held: Vec<(u64, Vec<u8>)>,
}

/// What a thread that did I/O without the lock brings back.
enum Sent {
    Write(WriteId, Result<PendingWrite, NfsError>),
    Commit(CommitId, Result<WriteVerf3, NfsError>),
}

/// Orders attributes of one file by how recent they are.
fn freshness(a: &Fattr3) -> (Nfstime3, Nfstime3, u64) {
    (a.ctime, a.mtime, a.size)
}

fn reply(outcome: WriteOutcome) -> WriteReply {
    WriteReply {
        count: outcome.count,
        committed: outcome.committed,
        verf: outcome.verf,
    }
}

/// An engine invariant failed: nothing to send, nothing to collect, nobody
/// else working, and yet the goal is not reached. Never expected.
fn stalled() -> NfsError {
    NfsError::Client(ClientError::Io(std::io::Error::other(
        "write-behind made no progress",
    )))
}

/// An open regular file with write-behind and read-ahead. `Send + Sync`;
/// every method takes `&self`.
///
/// Writes are buffered and sent as described in [`crate::writeback`]; reads
/// see this client's own unwritten data. Errors of WRITEs and COMMITs sent
/// in the background are reported, once, by the next `write`, `flush`,
/// `fsync` or `close`. Dropping the file fsyncs it if it holds data, and
/// ignores the result: call [`close`](Self::close) to see it.
#[derive(Debug)]
pub struct NfsFile {
    nfs: NfsClient,
    fh: FileHandle,
    config: IoConfig,
    budget: Arc<DirtyBudget>,
    /// Time zero of the engines' clock.
    epoch: Instant,
    state: Mutex<State>,
    /// Signalled when a thread puts a reply (or a sent call) back.
    progress: Condvar,
}

impl NfsFile {
    /// The file `fh`, whose attributes were `attr` when it was opened.
    /// `rsize` and `wsize` are clamped to 512 B..1 MiB.
    pub fn new(
        nfs: NfsClient,
        fh: FileHandle,
        attr: &Fattr3,
        config: IoConfig,
        budget: Arc<DirtyBudget>,
    ) -> Self {
        let mut config = config;
        config.rsize = config.rsize.clamp(512, 1 << 20);
        config.wsize = config.wsize.clamp(512, 1 << 20);
        let window = match config.max_outstanding_writes {
            0 => LEGACY_FLUSH_WINDOW,
            n => n,
        };
        let wb = Writeback::new(
            &WritebackConfig {
                wsize: config.wsize,
                max_outstanding: config.max_outstanding_writes,
                max_outstanding_bytes: config.max_outstanding_write_bytes,
                dirty_expire: config.dirty_expire,
                commit_threshold: 2 * u64::from(window) * u64::from(config.wsize),
            },
            attr.size,
        );
        // At most MAX_READ_AHEAD_CALLS READs of read-ahead in flight.
        config.max_read_ahead = config
            .max_read_ahead
            .min(MAX_READ_AHEAD_CALLS.saturating_mul(config.rsize));
        let ra = ReadAhead::new(u64::from(config.rsize), u64::from(config.max_read_ahead));
        Self {
            fh,
            config,
            budget,
            epoch: Instant::now(),
            nfs,
            state: Mutex::new(State::new(wb, ra)),
            progress: Condvar::new(),
        }
    }

    /// From now on, WRITEs, COMMITs and truncates go out as `nfs`'s
    /// credential, data already written included. For a file shared by
    /// several opens (a FUSE node): the opener whose credential is used may
    /// have had only read access, so each open for writing passes its own.
    pub fn write_as(&self, nfs: &NfsClient) {
        let mut st = self.lock();
        let current = st.writer.as_deref().unwrap_or(&self.nfs);
        if current.credential() != nfs.credential() {
            st.writer = Some(Arc::new(nfs.clone()));
        }
    }

    /// The file's handle.
    pub fn handle(&self) -> FileHandle {
        self.fh
    }

    /// Reads up to `buf.len()` bytes at `offset`; returns how many (0 at or
    /// past the end). Sees this client's own dirty data; a sequential reader
    /// gets read-ahead.
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<usize, NfsError> {
        let mut st = self.pump(self.lock());
        let size = st.wb.size();
        if offset >= size || buf.is_empty() {
            return Ok(0);
        }
        let len = (buf.len() as u64).min(size - offset);
        let end = offset + len;
        let buf = &mut buf[..len as usize];
        let max_ahead = u64::from(self.config.max_read_ahead);
        // What lies just behind the read stays a little: the read that
        // needs it may come next, a FUSE mount serving out of order.
        let behind = u64::from(self.config.rsize);
        st.evict(
            offset.saturating_sub(behind),
            len.saturating_add(max_ahead).saturating_add(behind),
        );
        let prefetch = st.ra.on_read(offset, len, size).map(|r| {
            let room = max_ahead.saturating_sub(st.cache_bytes);
            let to = r.end.min(r.start + room);
            if to < r.end {
                st.ra.cancel(to);
            }
            r.start..to
        });
        let epoch = st.cache_epoch;
        let held = st.wb.snapshot(offset, len);
        // Taken now, before the READs go out: data acknowledged FILE_SYNC or
        // committed before they are sent is on the server when they are
        // read; data dropped later (no write bumps `epoch`) may not be.
        let ahead: Vec<Ahead> = prefetch
            .into_iter()
            .flat_map(|r| pieces(r, u64::from(self.config.rsize)))
            .map(|(at, len)| Ahead {
                at,
                len,
                held: st.wb.snapshot(at, len),
            })
            .collect();
        drop(st);
        if !ahead.is_empty() {
            self.prefetch(ahead, epoch);
        }
        let mut pos = offset;
        while pos < end {
            pos = self.read_piece(pos, offset, buf)?;
        }
        lay(offset, buf, &held);
        self.lock().wb.overlay(offset, buf);
        Ok(buf.len())
    }

    /// Writes `data` at `offset` into the file's dirty data; returns
    /// `data.len()`. Blocks while the file has its cap of WRITEs outstanding
    /// with more completed chunks to send, and flushes the file when the
    /// mount's budget is congested. A deferred error from earlier WRITEs is
    /// returned instead (once), and nothing is written.
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<usize, NfsError> {
        let mut st = self.wait_truncate(self.lock());
        st.wb.handle_write(self.now(), offset, data)?;
        st.invalidate(offset, offset + data.len() as u64);
        st = self.pump(st);
        if st.wb.writer_should_wait() {
            st.stats.writer_waits += 1;
            st = self.drive_until(st, |s| !s.wb.writer_should_wait())?;
        }
        if self.budget.is_congested() && st.wb.held_bytes() > 0 {
            st.stats.budget_waits += 1;
            let t = st.wb.request_sync();
            let budget = &self.budget;
            st = self.drive_until(st, |s| !budget.is_congested() || s.wb.is_synced(t))?;
        }
        drop(st);
        Ok(data.len())
    }

    /// For a periodic flusher (a mount's; the library has no thread of its
    /// own): if this file holds data written more than
    /// [`IoConfig::dirty_expire`] ago, writes everything back and COMMITs it,
    /// waiting for the replies, as Linux's flusher writes back and commits
    /// dirty pages older than `dirty_expire_centisecs`; otherwise sends only
    /// what is due and collects replies that arrived. A WRITE or COMMIT
    /// failure is kept for the application's next `fsync` or `close`.
    /// Returns whether the file still holds data (dirty, in flight or not
    /// committed).
    pub fn write_back_expired(&self) -> Result<bool, NfsError> {
        let mut st = self.lock();
        let expired = st
            .wb
            .oldest_held()
            .is_some_and(|t| t + self.config.dirty_expire <= self.now());
        if expired {
            let t = st.wb.request_sync();
            st = self.drive_until(st, |s| s.wb.is_synced(t))?;
        } else {
            st = self.pump(st);
        }
        Ok(st.wb.held_bytes() > 0)
    }

    /// Sends everything written so far and waits for the replies (data may
    /// still be UNSTABLE on the server). Returns a deferred error, once.
    pub fn flush(&self) -> Result<(), NfsError> {
        let mut st = self.lock();
        let t = st.wb.request_flush();
        st = self.drive_until(st, |s| s.wb.is_flushed(t))?;
        st.wb.take_error().map_or(Ok(()), Err)
    }

    /// Flushes, COMMITs, and sends again (then commits again) whatever a
    /// server restart lost, until everything written so far is stable.
    /// Returns a deferred error, once.
    pub fn fsync(&self) -> Result<(), NfsError> {
        let mut st = self.lock();
        let t = st.wb.request_sync();
        st = self.drive_until(st, |s| s.wb.is_synced(t))?;
        st.wb.take_error().map_or(Ok(()), Err)
    }

    /// Close-to-open: [`fsync`](Self::fsync), and the read-ahead is dropped
    /// (the next open sees other clients' changes). The file stays usable.
    pub fn close(&self) -> Result<(), NfsError> {
        let result = self.fsync();
        self.drop_read_ahead();
        result
    }

    /// Drops the read-ahead, READs on the wire included: another client
    /// changed the file (its attributes say so), so what was read ahead may
    /// be its old bytes. The next read asks the server.
    pub fn drop_read_ahead(&self) {
        let mut st = self.lock();
        st.invalidate(0, u64::MAX);
        st.ra.reset();
    }

    /// The server's attributes once what was written before the call is
    /// acknowledged (so mtime is current). The flush is bounded: it sends
    /// only what was dirty when called (a sequential writer holds about two
    /// chunks) and waits only for the WRITEs carrying it (the WRITE cap),
    /// never for what is written meanwhile nor for a COMMIT. The attributes
    /// are the freshest post-op attributes of the WRITE replies collected
    /// during the call, or, if none came, a GETATTR's. `size` is the larger
    /// of the server's and the end of the data held here.
    pub fn getattr(&self) -> Result<Fattr3, NfsError> {
        let mut st = self.lock();
        let t = st.wb.request_flush();
        let replies = st.post_op_replies;
        st = self.flush_for(st, t)?;
        let fresh = st.post_op.filter(|_| st.post_op_replies > replies);
        let mut attr = match fresh {
            Some(a) => {
                st.stats.getattrs_from_writes += 1;
                st.wb.set_server_size(a.size);
                a
            }
            None => {
                let sent_at = st.size_gen;
                drop(st);
                let a = self.nfs.getattr(&self.fh)?;
                st = self.lock();
                if st.size_gen == sent_at {
                    st.wb.set_server_size(a.size);
                }
                a
            }
        };
        attr.size = st.wb.size();
        Ok(attr)
    }

    /// Says that the file's attributes were changed by a call this file did
    /// not make (a SETATTR of its mode, owner or times, a LINK or REMOVE of
    /// one of its names, a RENAME): the post-op
    /// attributes of WRITEs sent before are no longer used by
    /// [`getattr`](Self::getattr).
    pub fn attributes_changed(&self) {
        self.lock().forget_post_op();
    }

    /// Sets the size to `size`: dirty data beyond it is dropped, WRITEs in
    /// flight beyond it are waited for, then SETATTR. Writes made meanwhile
    /// wait for its reply (they come after it). Returns the new attributes.
    pub fn truncate(&self, size: u64) -> Result<Fattr3, NfsError> {
        // Bound first: a guard in the `match` would live through the arms.
        let writer = self.lock().writer.clone();
        self.truncate_as(writer.as_deref().unwrap_or(&self.nfs), size)
    }

    /// [`truncate`](Self::truncate) with the SETATTR sent by `nfs` (its
    /// credential) rather than this file's client: for a file shared by
    /// several users' opens, a truncate is its caller's. The caller checks
    /// first (ACCESS) that `nfs` may modify the file: the dirty data beyond
    /// `size` is dropped before the SETATTR.
    pub fn truncate_as(&self, nfs: &NfsClient, size: u64) -> Result<Fattr3, NfsError> {
        let mut st = self.wait_truncate(self.lock());
        st.truncating = true;
        st.size_gen += 1;
        // Ends the truncate however `send_truncate` ends, a panic included:
        // a `truncating` left set would hold back every later write.
        let ending = TruncateEnd(self);
        let dropped = st.wb.handle_truncate(size);
        st.invalidate(size, u64::MAX);
        let truncated = self.send_truncate(st, nfs, size);
        // Under the lock `end` takes, before any held-back write runs.
        let mut st = ending.end();
        match truncated {
            Ok(mut attr) => {
                st.wb.set_server_size(attr.size);
                attr.size = st.wb.size();
                Ok(attr)
            }
            Err(TruncateFailed::Cut(e)) => Err(e),
            Err(TruncateFailed::NotCut(e)) => {
                // The file was not cut (or not known to be): the data
                // written beyond `size` is still the application's, to
                // be written back, not lost without a word.
                st.wb.undo_truncate(dropped);
                self.charge(&mut st);
                Err(e)
            }
        }
    }

    /// The body of [`truncate_as`](Self::truncate_as), while `truncating`
    /// holds back writes and the data beyond `size` is dropped: waits for
    /// the WRITEs in flight beyond it, then SETATTR; the server's
    /// attributes, or whether the file is cut despite the error.
    ///
    /// A SETATTR that got no answer (a soft mount's timeout, a lost
    /// connection) may have been carried out. A GETATTR then decides: a
    /// file of `size` bytes is what was asked for, whether this SETATTR or
    /// nothing cut it (the server held nothing beyond), so the truncate
    /// stands; restoring the data beyond would write it past a cut that may
    /// have removed the server's own bytes in between. Any other size, or
    /// no answer again, undoes it (the caller gets the error).
    fn send_truncate<'a>(
        &'a self,
        st: MutexGuard<'a, State>,
        nfs: &NfsClient,
        size: u64,
    ) -> Result<Fattr3, TruncateFailed> {
        let st = self
            .drive_until(st, |s| !s.wb.inflight_beyond(size))
            .map_err(TruncateFailed::NotCut)?;
        drop(st);
        let attrs = Sattr3 {
            size: Some(size),
            ..Sattr3::default()
        };
        let wcc = nfs.setattr(&self.fh, &attrs, None);
        self.attributes_changed();
        match wcc {
            Ok(wcc) => match wcc.after {
                Some(a) => Ok(a),
                // Cut: only the attributes are missing.
                None => nfs.getattr(&self.fh).map_err(TruncateFailed::Cut),
            },
            // The server refused: nothing was done.
            Err(e @ NfsError::Status(_)) => Err(TruncateFailed::NotCut(e)),
            Err(e) => match nfs.getattr(&self.fh) {
                Ok(a) if a.size == size => Ok(a),
                _ => Err(TruncateFailed::NotCut(e)),
            },
        }
    }

    /// Says that the server's attributes, fetched by a call this file did
    /// not make (a close-to-open revalidation by another open of a shared
    /// file) and sent when [`size_generation`](Self::size_generation) was
    /// `sent_at`, show `size`: the file's size becomes that, or the end of
    /// the data it holds if larger, as after [`getattr`](Self::getattr).
    /// Reads end at this size, so one left stale would read a grown file
    /// short. Ignored (`false`) if this file has since had a WRITE or COMMIT
    /// reply or a truncate: the server may have answered before them.
    pub fn set_server_size(&self, sent_at: u64, size: u64) -> bool {
        let mut st = self.lock();
        let current = st.size_gen == sent_at;
        if current {
            st.wb.set_server_size(size);
        }
        current
    }

    /// How many WRITEs and COMMITs of this file have failed, and the errno
    /// of the last failure (0 before any). A failure counts when its reply
    /// arrives, under the lock that resolves it, while its error waits to be
    /// taken, once, by the next `write`, `flush`, `fsync` or `close`. A
    /// layer that must report each failure to every opener of the file, as
    /// Linux's `errseq_t` does, compares the count with what each opener has
    /// seen: a `fsync` that returns after the failure was resolved sees it
    /// counted, whichever caller took the error.
    pub fn write_back_failures(&self) -> (u64, i32) {
        let st = self.lock();
        (st.failures, st.last_failure)
    }

    /// A count of this file's WRITE and COMMIT replies and truncates, to
    /// pass to [`set_server_size`](Self::set_server_size) with a size
    /// fetched by a call sent now.
    pub fn size_generation(&self) -> u64 {
        self.lock().size_gen
    }

    /// The client's view of the size, dirty data included.
    pub fn size(&self) -> u64 {
        self.lock().wb.size()
    }

    /// Bytes this file holds that the server has not made stable.
    pub fn held_bytes(&self) -> u64 {
        self.lock().wb.held_bytes()
    }

    /// The counters.
    pub fn stats(&self) -> FileStats {
        let st = self.lock();
        let w = st.wb.stats();
        FileStats {
            writes_sent: w.writes_sent,
            bytes_written: w.bytes_sent,
            early_writes: w.early_writes,
            expired_writes: w.expired_writes,
            file_sync_writes: w.file_sync_writes,
            commits_sent: w.commits_sent,
            resent_bytes: w.resent_bytes,
            short_writes: w.short_writes,
            verifier_changes: w.verifier_changes,
            write_errors: w.errors,
            max_outstanding: w.max_outstanding,
            ..st.stats.clone()
        }
    }

    // ----- driving the engine -----

    fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until no truncate is on its way (see `State::truncating`).
    fn wait_truncate<'a>(&'a self, mut st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        while st.truncating {
            st = self.wait_for_progress(st);
        }
        st
    }

    /// Waits on `progress`, counted in `st.waiting`.
    fn wait_for_progress<'a>(&'a self, mut st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        st.waiting += 1;
        let mut st = self
            .progress
            .wait(st)
            .unwrap_or_else(PoisonError::into_inner);
        st.waiting -= 1;
        st
    }

    /// Wakes every thread waiting on `progress`, if there is one; `st` is
    /// the locked state. A waiter counts itself under the lock, and the
    /// wait lets go of the lock atomically: a signaller that sees no waiter
    /// changed the state before any waiter could look at it again.
    /// (`notify_all` is a `futex` call even when nobody waits.)
    fn signal_progress(&self, st: &mut State) {
        if st.waiting > 0 {
            self.progress.notify_all();
            #[cfg(test)]
            {
                st.signals += 1;
            }
        }
    }

    /// Brings the budget in line with what the engine holds.
    fn charge(&self, st: &mut State) {
        let held = st.wb.held_bytes();
        if held > st.charged {
            self.budget.charge(held - st.charged);
        } else if held < st.charged {
            self.budget.release(st.charged - held);
        }
        st.charged = held;
    }

    /// Hands replies that have already arrived to the engine.
    fn collect_ready(&self, st: &mut State) {
        while let Some(entry) = st.pending.first_entry() {
            if !entry.get().is_ready() {
                break;
            }
            let (id, call) = entry.remove_entry();
            match call.try_collect() {
                CollectedWrite::Done(outcome) => st.write_reply(self.now(), id, outcome),
                CollectedWrite::Again(paused) => {
                    // NFS3ERR_JUKEBOX: sent again by whoever waits for it
                    // next (`wait_progress`), not under the lock.
                    st.pending.insert(id, paused);
                    break;
                }
            }
        }
    }

    /// Sends everything the engine asks for, dropping the lock around each
    /// call.
    fn pump<'a>(&'a self, mut st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        loop {
            self.collect_ready(&mut st);
            let Some(action) = st.wb.poll_action(self.now()) else {
                self.charge(&mut st);
                return st;
            };
            st = self.send(st, action);
        }
    }

    /// Sends `action` without the lock and puts the call (or its result)
    /// back.
    fn send<'a>(&'a self, mut st: MutexGuard<'a, State>, action: Action) -> MutexGuard<'a, State> {
        if let Action::Write(w) = &action {
            st.last_write = st.last_write.max(w.id.0);
        }
        st.busy += 1;
        let writer = st.writer.clone();
        let nfs = writer.as_deref().unwrap_or(&self.nfs);
        drop(st);
        let sent = match action {
            Action::Write(w) => Sent::Write(
                w.id,
                nfs.start_write(&self.fh, w.offset, w.data.as_slice(), w.stable),
            ),
            Action::Commit(id) => Sent::Commit(id, nfs.commit(&self.fh, 0, 0).map(|(v, _)| v)),
        };
        st = self.lock();
        st.busy -= 1;
        match sent {
            Sent::Write(id, Ok(call)) => {
                if call.was_synchronous() {
                    st.stats.synchronous_writes += 1;
                }
                st.pending.insert(id, call);
            }
            Sent::Write(id, Err(e)) => {
                let errno = e.errno();
                st.wb.handle_write_reply(self.now(), id, Err(e));
                st.count_failure(Some(errno));
            }
            Sent::Commit(id, r) => {
                st.size_gen += 1;
                let errno = r.as_ref().err().map(NfsError::errno);
                st.wb.handle_commit_reply(id, r);
                st.count_failure(errno);
            }
        }
        self.charge(&mut st);
        self.signal_progress(&mut st);
        st
    }

    /// Drives a getattr's flush to `t`: sends only data written before `t`
    /// (never a COMMIT nor later chunks, which the writer sends itself) and
    /// waits for those WRITEs first.
    fn flush_for<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        t: Ticket,
    ) -> Result<MutexGuard<'a, State>, NfsError> {
        loop {
            self.collect_ready(&mut st);
            if st.wb.is_flushed(t) {
                self.charge(&mut st);
                // Replies collected here may let a blocked writer go on.
                self.signal_progress(&mut st);
                return Ok(st);
            }
            if let Some(action) = st.wb.poll_flush(t) {
                st = self.send(st, action);
                continue;
            }
            let first = st
                .pending
                .keys()
                .copied()
                .find(|id| st.wb.is_write_before(*id, t));
            if first.is_none() && st.busy > 0 {
                // Other threads are sending or collecting the WRITEs it
                // waits for; each signals when done.
                st = self.wait_for_progress(st);
                continue;
            }
            st = self.wait_progress(st, first)?;
        }
    }

    /// Waits for one reply: collects WRITE `want` if given and outstanding,
    /// else the oldest outstanding WRITE, or, if other threads hold them
    /// all, waits until one of them is done.
    fn wait_progress<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        want: Option<WriteId>,
    ) -> Result<MutexGuard<'a, State>, NfsError> {
        let call = want
            .and_then(|id| st.pending.remove_entry(&id))
            .or_else(|| st.pending.pop_first());
        if let Some((id, call)) = call {
            st.busy += 1;
            drop(st);
            let outcome = call.wait();
            st = self.lock();
            st.busy -= 1;
            st.write_reply(self.now(), id, outcome);
            self.charge(&mut st);
            self.signal_progress(&mut st);
            return Ok(st);
        }
        if st.busy == 0 {
            return Err(stalled());
        }
        Ok(self.wait_for_progress(st))
    }

    /// Sends and collects until `done` holds.
    fn drive_until<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        mut done: impl FnMut(&State) -> bool,
    ) -> Result<MutexGuard<'a, State>, NfsError> {
        loop {
            st = self.pump(st);
            if done(&st) {
                return Ok(st);
            }
            st = self.wait_progress(st, None)?;
        }
    }

    // ----- reading -----

    /// Sends a READ for each piece of `ahead` (read at `epoch`) and caches
    /// them, unless a write came in between.
    fn prefetch(&self, ahead: Vec<Ahead>, epoch: u64) {
        let Some(start) = ahead.first().map(|a| a.at) else {
            return;
        };
        let mut calls = Vec::with_capacity(ahead.len());
        let mut cancel = None;
        for Ahead { at, len, held } in ahead {
            // Read-ahead never waits for a transport slot: an uncollected
            // READ holds its slot, so waiting here could wait on ourselves.
            match self.nfs.try_start_read(&self.fh, at, len as u32) {
                Ok(Some(call)) => calls.push((at, len, call, held)),
                Ok(None) | Err(_) => {
                    cancel = Some(at);
                    break;
                }
            }
        }
        #[cfg(test)]
        tests::hooks::read_ahead_sent();
        let mut st = self.lock();
        st.stats.read_ahead_reads += calls.len() as u64;
        st.stats.bytes_asked += calls.iter().map(|c| c.1).sum::<u64>();
        if st.cache_epoch != epoch {
            st.ra.cancel(start);
            return;
        }
        if let Some(at) = cancel {
            st.ra.cancel(at);
        }
        for (at, len, call, held) in calls {
            // `held` was taken before the READ was sent: what this client
            // held then and may have dropped since (no write since `epoch`).
            st.cache_insert(at, Cached::Pending { len, call, held });
        }
    }

    /// Fills `buf` (the bytes at `base`) from `pos` on, from read-ahead or a
    /// READ; returns the new position.
    fn read_piece(&self, pos: u64, base: u64, buf: &mut [u8]) -> Result<u64, NfsError> {
        let end = base + buf.len() as u64;
        let at = (pos - base) as usize;
        let mut st = self.lock();
        let hit = st
            .cache
            .range(..=pos)
            .next_back()
            .map(|(k, c)| (*k, c.len(), matches!(c, Cached::Ready { .. })));
        match hit {
            Some((key, len, true)) => {
                if let Some(Cached::Ready { data }) = st.cache.get(&key) {
                    let have = key + len;
                    if pos < have {
                        let n = (have.min(end) - pos) as usize;
                        let from = (pos - key) as usize;
                        buf[at..at + n].copy_from_slice(&data[from..from + n]);
                        st.stats.read_ahead_hit_bytes += n as u64;
                        return Ok(pos + n as u64);
                    }
                }
            }
            Some((key, len, false)) if pos < key + len => {
                let epoch = st.cache_epoch;
                if let Some(Cached::Pending { call, held, .. }) = st.uncache(key) {
                    drop(st);
                    let mut data = vec![0u8; len as usize];
                    if let Ok(out) = call.wait_into(&mut data) {
                        // Past the server's end of file: zeros (a hole, or
                        // this client's data, laid next).
                        if out.eof {
                            data[out.count..].fill(0);
                        } else {
                            data.truncate(out.count);
                        }
                        lay(key, &mut data, &held);
                        let mut st = self.lock();
                        if st.cache_epoch == epoch && !st.cache.contains_key(&key) {
                            st.cache_insert(key, Cached::Ready { data });
                            // The next round serves it from the cache.
                            return Ok(pos);
                        }
                    }
                    // Written meanwhile, or failed: read it afresh.
                    return self.read_server(pos, base, buf);
                }
            }
            _ => {}
        }
        drop(st);
        self.read_server(pos, base, buf)
    }

    /// One READ of at most `rsize` at `pos` into `buf` (the bytes at
    /// `base`); returns the new position. Past the server's end of file the
    /// rest of `buf` is zeros (this client's data is laid over it later).
    fn read_server(&self, pos: u64, base: u64, buf: &mut [u8]) -> Result<u64, NfsError> {
        let end = base + buf.len() as u64;
        let at = (pos - base) as usize;
        let n = (end - pos).min(u64::from(self.config.rsize)) as usize;
        // A blocking call: this thread reads its own reply.
        let out = self.nfs.read(&self.fh, pos, &mut buf[at..at + n])?;
        {
            let mut st = self.lock();
            st.stats.reads_sent += 1;
            st.stats.bytes_asked += n as u64;
        }
        if out.count == 0 || (out.eof && out.count < n) {
            buf[at + out.count..].fill(0);
            return Ok(end);
        }
        Ok(pos + out.count as u64)
    }
}

/// `range` cut into READs of at most `rsize` bytes: (offset, length).
fn pieces(range: Range<u64>, rsize: u64) -> impl Iterator<Item = (u64, u64)> {
    let end = range.end;
    range
        .step_by(usize::try_from(rsize).unwrap_or(usize::MAX))
        .map(move |at| (at, (end - at).min(rsize)))
}

/// Copies the parts of `pieces` inside `buf` (the bytes at `base`), in order.
fn lay(base: u64, buf: &mut [u8], pieces: &[(u64, Vec<u8>)]) {
    let end = base + buf.len() as u64;
    for (at, bytes) in pieces {
        let s = (*at).max(base);
        let e = (at + bytes.len() as u64).min(end);
        if s < e {
            buf[(s - base) as usize..(e - base) as usize]
                .copy_from_slice(&bytes[(s - at) as usize..(e - at) as usize]);
        }
    }
}

impl Drop for NfsFile {
    fn drop(&mut self) {
        if self.lock().wb.held_bytes() > 0 {
            let _ = self.fsync();
        }
        let charged = std::mem::take(&mut self.lock().charged);
        self.budget.release(charged);
    }
}

#[cfg(test)]
mod tests {
    use rnfs_nfs3::{Ftype3, Specdata3, StableHow, WccData};

    use super::*;

    /// Code a test runs at a chosen point of an operation on its own thread.
    pub(super) mod hooks {
        use std::cell::RefCell;

        thread_local! {
            /// Run by `prefetch` once its READs are sent, before it caches them.
            pub(in super::super) static READ_AHEAD_SENT: RefCell<Option<Box<dyn FnMut()>>> =
                const { RefCell::new(None) };
        }

        pub(in super::super) fn read_ahead_sent() {
            READ_AHEAD_SENT.with_borrow_mut(|hook| {
                if let Some(hook) = hook {
                    hook();
                }
            });
        }
    }

    /// An in-process rnfs server on loopback (memory backend) and a session
    /// on its export, as root.
    #[cfg(not(loom))]
    fn memory_server() -> (rnfs_server::Server, Session) {
        use rnfs_server::nfs::exports::{Access, BackendKind, ExportConfig, Exports, Squash};
        use rnfs_server::nfs::{self, HandleKey};
        use rnfs_vfs::Filesystem;

        let mut c = ExportConfig::new(std::path::Path::new("/"));
        c.mount_path = Some("/export".into());
        c.backend = BackendKind::Memory;
        c.access = Access::Rw;
        c.squash = Squash::None;
        let exports = Exports::new(
            &[c],
            Box::new(|c: &ExportConfig| {
                Ok(
                    Arc::new(rnfs_vfs::memory::MemoryFs::new(u64::from(c.export_id())))
                        as Arc<dyn Filesystem>,
                )
            }),
        )
        .expect("exports");
        let d = nfs::dispatcher(Arc::new(exports), HandleKey::ephemeral().expect("key"))
            .expect("dispatcher");
        let mut config = rnfs_server::ServerConfig::new(vec!["127.0.0.1:0".parse().expect("addr")]);
        let mut sched = rnfs_sched::Config::fixed(2);
        sched.pin_threads = false;
        config.sched = sched;
        let server =
            rnfs_server::Server::start_with_dispatcher(config, Arc::new(d)).expect("server");
        let port = server.local_addrs()[0].port();
        let url = crate::NfsUrl::parse(&format!("nfs://127.0.0.1:{port}/export")).expect("url");
        let (session, _) = Session::connect(
            &url,
            crate::ClientOptions::default(),
            crate::Credential::root(),
        )
        .expect("mount");
        (server, session)
    }

    /// Read-ahead lays over its READs this client's data as it was when
    /// they were sent: data acknowledged FILE_SYNC while they are on the
    /// wire (the server may have read before it landed) is still laid. The
    /// snapshot was once taken after the READs went out and missed it.
    #[cfg(not(loom))]
    #[test]
    fn read_ahead_keeps_data_synced_while_its_reads_are_on_the_wire() {
        let (_server, s) = memory_server();
        let nfs = s.nfs();
        let created = nfs
            .create(
                &s.root(),
                b"f",
                rnfs_nfs3::CreateHow3::Unchecked(Sattr3::default()),
            )
            .expect("create");
        let fh = created.handle.expect("handle");
        nfs.write(&fh, 0, &[1; 64 << 10], StableHow::FileSync)
            .expect("write");
        let attr = nfs.getattr(&fh).expect("getattr");
        let config = IoConfig {
            rsize: 4096,
            wsize: 4096,
            max_outstanding_writes: 0,
            max_read_ahead: 64 << 10,
            ..IoConfig::default()
        };
        let f = Arc::new(NfsFile::new(
            nfs.clone(),
            fh,
            &attr,
            config,
            DirtyBudget::new(0),
        ));
        // Dirty (legacy mode sends nothing early), in the read-ahead of a
        // first read at 0.
        f.write(8192, &[2; 100]).expect("write");
        let synced = Arc::clone(&f);
        hooks::READ_AHEAD_SENT.set(Some(Box::new(move || {
            // The server answers the READs with its old bytes; then the data
            // goes out FILE_SYNC, and the file holds none.
            std::thread::sleep(Duration::from_millis(100));
            synced.fsync().expect("fsync");
            assert_eq!(synced.held_bytes(), 0);
        })));
        let mut buf = vec![0; 4096];
        assert_eq!(f.read(0, &mut buf).expect("read"), 4096);
        hooks::READ_AHEAD_SENT.set(None);
        assert_eq!(f.stats().read_ahead_reads, 4);
        let mut buf = vec![0; 100];
        assert_eq!(f.read(8192, &mut buf).expect("read"), 100);
        assert_eq!(f.stats().read_ahead_hit_bytes, 100, "served by read-ahead");
        assert!(
            buf == [2; 100],
            "read-ahead served the server's old bytes: {:?}...",
            &buf[..8]
        );
    }

    /// A lone writer never finds anyone waiting on `progress`, and so
    /// signals it never: `notify_all` costs a `futex` call even then, once
    /// per WRITE sent or collected. Two writers over the WRITE cap do wait,
    /// and are woken.
    #[cfg(not(loom))]
    #[test]
    fn progress_is_signalled_only_to_waiters() {
        let (_server, s) = memory_server();
        let nfs = s.nfs();
        let open = |name: &[u8]| {
            let how = rnfs_nfs3::CreateHow3::Unchecked(Sattr3::default());
            let fh = nfs.create(&s.root(), name, how).expect("create");
            let fh = fh.handle.expect("handle");
            let attr = nfs.getattr(&fh).expect("getattr");
            let config = IoConfig {
                wsize: 4096,
                max_outstanding_writes: 2,
                ..IoConfig::default()
            };
            Arc::new(NfsFile::new(
                nfs.clone(),
                fh,
                &attr,
                config,
                DirtyBudget::new(0),
            ))
        };
        let f = open(b"lone");
        for i in 0..64u64 {
            f.write(i * 4096, &[1; 4096]).expect("write");
        }
        f.fsync().expect("fsync");
        assert!(f.stats().writes_sent >= 64);
        assert_eq!(f.lock().signals, 0, "signalled with nobody waiting");

        let f = open(b"shared");
        let (done, finished) = std::sync::mpsc::channel();
        for t in 0..4u64 {
            let (f, done) = (Arc::clone(&f), done.clone());
            std::thread::spawn(move || {
                for i in 0..64u64 {
                    f.write((i * 4 + t) * 4096, &[1; 4096]).expect("write");
                }
                done.send(()).expect("send");
            });
        }
        for _ in 0..4 {
            // A lost wake-up hangs a writer: fail rather than hang.
            finished
                .recv_timeout(Duration::from_secs(60))
                .expect("a writer never finished: a wake-up was lost");
        }
        f.fsync().expect("fsync");
        assert_eq!(f.stats().writes_sent, 256);
        let signals = f.lock().signals;
        assert!(signals > 0, "four writers over the cap never waited");
    }

    fn state() -> State {
        let config = WritebackConfig {
            wsize: 4096,
            max_outstanding: 4,
            max_outstanding_bytes: 0,
            dirty_expire: Duration::from_secs(30),
            commit_threshold: 0,
        };
        State::new(Writeback::new(&config, 0), ReadAhead::new(4096, 0))
    }

    /// A WRITE reply whose post-op attributes have this ctime and mode.
    fn outcome(ctime: u32, mode: u32) -> Result<WriteOutcome, NfsError> {
        let t = Nfstime3 {
            seconds: ctime,
            nseconds: 0,
        };
        let attr = Fattr3 {
            ftype: Ftype3::Reg,
            mode,
            nlink: 1,
            uid: 0,
            gid: 0,
            size: 100,
            used: 4096,
            rdev: Specdata3::default(),
            fsid: 1,
            fileid: 2,
            atime: t,
            mtime: t,
            ctime: t,
        };
        Ok(WriteOutcome {
            count: 100,
            committed: StableHow::Unstable,
            verf: [0; 8],
            wcc: WccData {
                before: None,
                after: Some(attr),
            },
        })
    }

    #[test]
    fn write_replies_keep_the_freshest_attributes_sent_after_the_last_setattr() {
        let now = Duration::ZERO;
        let mut st = state();
        st.write_reply(now, WriteId(1), outcome(10, 0o644));
        // An older reply, arrived late, does not replace it but counts.
        st.write_reply(now, WriteId(2), outcome(5, 0o644));
        assert_eq!(st.post_op.map(|a| a.ctime.seconds), Some(10));
        assert_eq!(st.post_op_replies, 2);
        // A SETATTR after WRITE 3 was sent: its reply may predate it.
        st.last_write = 3;
        st.forget_post_op();
        st.write_reply(now, WriteId(3), outcome(20, 0o644));
        assert_eq!(st.post_op, None);
        assert_eq!(st.post_op_replies, 2);
        st.write_reply(now, WriteId(4), outcome(21, 0o600));
        assert_eq!(st.post_op.map(|a| a.mode), Some(0o600));
        assert_eq!(st.post_op_replies, 3);
        // Failed WRITEs carry nothing.
        st.write_reply(
            now,
            WriteId(5),
            Err(NfsError::Status(rnfs_nfs3::Nfsstat3::Io)),
        );
        assert_eq!(st.post_op_replies, 3);
    }

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn nfs_file_is_send_and_sync() {
        assert_send_sync::<NfsFile>();
        assert_send_sync::<DirtyBudget>();
    }

    #[test]
    fn the_budget_is_congested_from_the_limit_to_three_quarters() {
        let b = DirtyBudget::new(1000);
        b.charge(999);
        assert!(!b.is_congested());
        b.charge(1);
        assert!(b.is_congested());
        b.release(200);
        assert!(b.is_congested(), "800 is above 3/4");
        b.release(51);
        assert!(!b.is_congested(), "749 is below 3/4");
        b.charge(100);
        assert!(!b.is_congested(), "off until the limit again");
        assert_eq!(b.dirty_bytes(), 849);
        let unlimited = DirtyBudget::new(0);
        unlimited.charge(u64::MAX / 2);
        assert!(!unlimited.is_congested());
    }
}
