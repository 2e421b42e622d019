//! [`Connection`]: one TCP connection, the scheduler's unit of work.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use rnfs_rpc::{Pace, RecordDecoder, RecordError};

use super::poller::PollerHandle;
use crate::metrics::{ClientConn, ConnCounters};
use crate::stats::Counters;

/// An output buffer that has grown past this is freed once it drains, so a
/// connection that once buffered a burst of large replies does not keep the memory.
const KEEP_OUTPUT_CAPACITY: usize = 64 << 10;

/// Largest reply that may be held for coalescing (a 16 KiB READ and its headers).
const MAX_HELD_REPLY: usize = 16 << 10 | 512;

/// Most bytes held in the output buffer: a reply that would take it past this
/// is written with those held. Keeps the buffer under [`KEEP_OUTPUT_CAPACITY`],
/// so coalescing never frees and regrows it.
const MAX_HELD_BYTES: usize = 32 << 10;

/// Bytes of a call record that say which procedure it calls: xid, message type,
/// RPC version, program, version, procedure.
const CALL_HEAD: usize = 24;

/// Tells the [`Pace`] of a call, given the first [`CALL_HEAD`] bytes of its
/// record (see [`Connection::read_record`]).
pub(crate) type CallPace<'a> = &'a dyn Fn(&[u8]) -> Pace;

/// [`Pace`] as stored in [`Connection::next_pace`].
const fn pace_code(pace: Pace) -> u8 {
    match pace {
        Pace::Slow => 0,
        Pace::Quick => 1,
        Pace::QuickAmongPeers => 2,
    }
}

/// One accepted TCP connection: the item behind each scheduler
/// [`Task`](rnfs_sched::Task).
///
/// The read side is used only by the thread that owns the task (the scheduler's
/// `BUSY` flag), so its mutex is never contended; it exists to satisfy `Sync`. The
/// write side is shared by every thread with a reply to send and by the poller.
pub struct Connection {
    id: u64,
    peer: SocketAddr,
    stream: TcpStream,
    /// The poller this connection is registered with (told to forget it on teardown).
    poller: Arc<PollerHandle>,
    read: Mutex<ReadState>,
    write: Mutex<WriteState>,
    /// "The output buffer may be non-empty": set by a sender, under `write`, *before*
    /// its last write attempt; cleared under `write` only when the buffer is empty.
    /// The poller reads it without the lock to skip locking on writable edges when
    /// nothing is buffered. No edge is lost: if the poller reads `false`, any sender
    /// that left bytes behind had not yet made its final attempt, and that attempt
    /// either drains the buffer or fails with `WouldBlock`, after which the kernel
    /// raises a fresh writable edge (the syscall orders our store before it).
    write_pending: AtomicBool,
    /// The [`Pace`] ([`pace_code`]) of the record this connection's decoder hands
    /// out next, if it is already complete, else `Slow`: a thread finishing a
    /// reply may hold it back when it is `Quick` (or `QuickAmongPeers` and the
    /// reply is of that pace too), because the thread that takes that record
    /// will send soon and carry it along (see [`Connection::send_reply`]).
    /// Stored by the task's owner under the read lock at every record taken;
    /// cleared, before releasing held replies, where no record will be taken for
    /// a while (back-pressure, draining).
    ///
    /// Relaxed: it is read only under the write lock, and every store is followed
    /// by a write-lock section of the storing thread (the taken call's reply, or
    /// the release), so the mutex orders it. A reader that sees a holding pace
    /// therefore runs its section before the section of whoever stored the value
    /// replacing it, and that section sends what was held (or holds it further
    /// under the same rule).
    next_pace: AtomicU8,
    /// Calls read from this connection whose replies have not fully reached the
    /// kernel. Incremented only by the task's owner (after checking the limit);
    /// decremented by whoever completes a reply (a service thread or the poller).
    /// `SeqCst` against `throttled`: see [`Connection::at_limit`].
    in_flight: AtomicU32,
    /// Bytes in the output buffer not yet written (`WriteState::unsent`), for the
    /// owner's lock-free check against the output cap in [`Connection::at_limit`].
    /// Stored only under `write`, after every change to the buffer, so it is
    /// exact whenever the lock is free. `SeqCst` stores: each precedes, in its
    /// storer's program order, that storer's `complete` (decrement `in_flight`,
    /// then load `throttled`), which makes it part of the same Dekker pair.
    unsent: AtomicUsize,
    /// "Reading stopped at the in-flight limit or the output cap; notify the
    /// scheduler when a reply completes." Set by the owner, cleared by the first
    /// completer (or by the owner when its re-check finds room). `SeqCst`, pairing
    /// with `in_flight` and `unsent`.
    throttled: AtomicBool,
    /// Set once by the first [`Connection::teardown`], so teardown runs once.
    torn_down: AtomicBool,
    /// "No call read since the poller's last idle sweep": set by the sweep,
    /// cleared when a record is taken ([`Connection::age`]). Relaxed: it only
    /// chooses which connections the sweep closes, which also requires the
    /// task not busy and nothing in flight; a stale value closes, at worst, a
    /// connection whose first call in a whole timeout arrives at that very
    /// moment, which the client retransmits after reconnecting, as after
    /// knfsd's own ageing.
    quiet: AtomicBool,
    slot: ConnSlot,
    /// Per-client statistics, when the server has metrics.
    client: Option<ClientConn>,
}

/// Counts one connection against `max_connections` from accept until drop.
pub(crate) struct ConnSlot(Arc<Counters>);

impl ConnSlot {
    /// Takes a slot; the acceptor has already checked the limit.
    pub(crate) fn new(counters: Arc<Counters>) -> Self {
        counters.connections.fetch_add(1, Ordering::Relaxed);
        ConnSlot(counters)
    }
}

impl Drop for ConnSlot {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

impl fmt::Debug for ConnSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ConnSlot")
    }
}

struct ReadState {
    decoder: RecordDecoder,
    /// The socket may hold bytes for which no new readiness edge will come: the
    /// last read filled all the space offered, or an owner cleared DATA without
    /// reading the socket afterwards ([`Connection::note_data`]). Cleared by a read
    /// that comes back short or `WouldBlock` (the socket was drained then; bytes
    /// arriving later raise an edge). Survives between owners.
    maybe_more: bool,
    /// Set once by [`Connection::stop_reading`] (server draining): no record is
    /// taken off this connection again. Under the same lock as the read that
    /// counts a call in flight, so a drain that has set it knows every call ever
    /// taken from this connection is counted.
    stopped: bool,
}

/// Replies the socket has not taken yet, in order. `buf[sent..]` is unsent; `ends`
/// holds the offsets in `buf` at which each buffered reply ends, so replies are
/// counted complete exactly when their last byte is written.
#[derive(Default)]
struct WriteState {
    buf: Vec<u8>,
    sent: usize,
    ends: VecDeque<usize>,
    /// When the oldest reply now held back (not yet tried on the socket) was
    /// held; `None` when none is. Cleared by every flush, so `Some` implies
    /// unsent bytes.
    held_since: Option<Instant>,
}

/// What [`Connection::send_reply`] did.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sent {
    /// Replies that fully reached the kernel (this one and earlier ones).
    pub(crate) done: u32,
    /// This reply was held for coalescing, not written.
    pub(crate) held: bool,
}

/// What reading one record produced.
pub(crate) enum ReadOutcome {
    /// A complete record. `more`: the owner should have the task re-queued, because
    /// the decoder holds another complete record or the socket may hold more bytes.
    Record { record: Vec<u8>, more: bool },
    /// The socket is drained and no record is complete; partial bytes stay buffered.
    Pending,
    /// The peer closed its side.
    Eof,
    /// The byte stream is not valid record marking (e.g. a record over the limit).
    Bad(RecordError),
    /// The socket failed.
    Failed(io::Error),
    /// The server is draining: nothing is read any more (unread bytes, and
    /// records the decoder holds but no thread took, stay unanswered).
    Stopped,
}

impl Connection {
    pub(crate) fn new(
        id: u64,
        peer: SocketAddr,
        stream: TcpStream,
        poller: Arc<PollerHandle>,
        max_record_size: usize,
        slot: ConnSlot,
        client: Option<ClientConn>,
    ) -> Self {
        Connection {
            id,
            peer,
            stream,
            poller,
            read: Mutex::new(ReadState {
                decoder: RecordDecoder::new(max_record_size).grow_on_full_reads(),
                maybe_more: false,
                stopped: false,
            }),
            write: Mutex::new(WriteState::default()),
            write_pending: AtomicBool::new(false),
            next_pace: AtomicU8::new(pace_code(Pace::Slow)),
            in_flight: AtomicU32::new(0),
            unsent: AtomicUsize::new(0),
            throttled: AtomicBool::new(false),
            torn_down: AtomicBool::new(false),
            quiet: AtomicBool::new(false),
            slot,
            client,
        }
    }

    /// Server-unique connection number (also its poller token).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The client's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// The poller's idle sweep: whether no call was read since the last sweep
    /// and nothing is in flight or unsent (the caller also checks that no
    /// thread holds the task). Marks the connection quiet for the next sweep.
    pub(crate) fn age(&self) -> bool {
        let quiet = self.quiet.swap(true, Ordering::Relaxed);
        quiet
            && self.in_flight.load(Ordering::Relaxed) == 0
            && !self.write_pending.load(Ordering::Relaxed)
    }

    /// Calls read but not yet answered (a snapshot; for tests and diagnostics).
    pub fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Relaxed)
    }

    pub(crate) fn counters(&self) -> &Counters {
        &self.slot.0
    }

    /// This connection's per-client counters, when the server has metrics.
    pub(crate) fn client(&self) -> Option<&ConnCounters> {
        self.client.as_ref().map(ClientConn::counters)
    }

    // ---- read side: task owner only ----

    /// Back-pressure check, owner only, before reading: whether `max` calls are in
    /// flight, or more than `max_output` bytes of replies wait unsent in the output
    /// buffer, in which case the caller must release the task without reading.
    ///
    /// Store `throttled`, then re-load `in_flight` and `unsent` (here), against
    /// store `unsent` (under the write lock, after a flush), decrement `in_flight`,
    /// then load `throttled` ([`Connection::complete`]); all `SeqCst`, so at least
    /// one side sees the other's writes: either we see room and read on, or the
    /// completer sees `throttled` and notifies. No stall is possible: while
    /// `unsent` is over the cap a reply is unsent, so a completion is still to
    /// come (once the client reads), and every completion loads `throttled`
    /// after publishing what its flush left unsent. Reading thus resumes at the
    /// first reply completed with the buffer back under the cap.
    pub(crate) fn at_limit(&self, max: u32, max_output: usize) -> bool {
        // Relaxed for `unsent`: this fast check only chooses whether to take the
        // slow path below, which loads both again `SeqCst`, and orders nothing
        // (the buffer itself is only touched under the write lock). A stale low
        // value (a publish not yet visible) reads one call more, as a check an
        // instant earlier would have; a stale high one only costs the re-check.
        if self.in_flight.load(Ordering::SeqCst) < max
            && self.unsent.load(Ordering::Relaxed) <= max_output
        {
            return false;
        }
        if !self.throttled.swap(true, Ordering::SeqCst) {
            self.counters().throttled.fetch_add(1, Ordering::Relaxed);
        }
        if self.in_flight.load(Ordering::SeqCst) < max
            && self.unsent.load(Ordering::SeqCst) <= max_output
        {
            // A reply completed in between. Its completer may also notify: harmless.
            self.throttled.store(false, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// Records what `take_data` returned, right after the owner called it. A set
    /// DATA flag means bytes arrived that this owner may not read (it may be
    /// throttled, or find a complete record already in the decoder): remember that
    /// the socket may hold bytes, else the last owner to drain the decoder would go
    /// idle with the socket unread, and no new edge would come.
    pub(crate) fn note_data(&self, had_data: bool) {
        if had_data {
            lock(&self.read).maybe_more = true;
        }
    }

    /// Reads until one complete record is assembled or the socket would block.
    /// Owner only; call `take_data` first. A record returned is already counted
    /// in flight (see [`Connection::begin_call`]). With `pace`, notes the pace of
    /// the record after it if that one is already complete, which lets finishing
    /// calls hold their replies for it (reply coalescing); without, never.
    pub(crate) fn read_record(&self, pace: Option<CallPace<'_>>) -> ReadOutcome {
        let mut rs = lock(&self.read);
        if rs.stopped {
            return ReadOutcome::Stopped;
        }
        loop {
            match rs.decoder.next_record() {
                Ok(Some(record)) => {
                    // Counted under the read lock: see `stop_reading`.
                    self.begin_call();
                    // Read first: the line is written once per sweep, not per call.
                    if self.quiet.load(Ordering::Relaxed) {
                        self.quiet.store(false, Ordering::Relaxed);
                    }
                    let next_pace = pace
                        .and_then(|pace| rs.decoder.peek_complete_record(CALL_HEAD).map(pace))
                        .unwrap_or(Pace::Slow);
                    self.next_pace
                        .store(pace_code(next_pace), Ordering::Relaxed);
                    let more = rs.maybe_more || rs.decoder.has_complete_record();
                    return ReadOutcome::Record { record, more };
                }
                Ok(None) => {}
                Err(e) => return ReadOutcome::Bad(e),
            }
            let (got, offered) = if let Some(record) = rs.decoder.direct_target() {
                // A large call's body (WRITE data), straight into its own
                // buffer rather than copied out of the read buffer.
                let offered = record.capacity() - record.len();
                let got = rustix::net::recv(
                    &self.stream,
                    rustix::buffer::spare_capacity(record),
                    rustix::net::RecvFlags::empty(),
                )
                .map(|(n, _)| n)
                .map_err(io::Error::from);
                rs.decoder.direct_filled();
                (got, offered)
            } else {
                let space = rs.decoder.read_buf();
                let offered = space.len();
                if offered == 0 {
                    // The decoder should have reported an over-long record before
                    // its buffer filled; never spin on a zero-length read.
                    return ReadOutcome::Failed(io::Error::other("record decoder buffer is full"));
                }
                let got = (&self.stream).read(space);
                if let Ok(n) = got {
                    rs.decoder.advance(n);
                }
                (got, offered)
            };
            match got {
                Ok(0) => return ReadOutcome::Eof,
                Ok(n) => {
                    rs.maybe_more = n == offered;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    rs.maybe_more = false;
                    // After a large record, give the big buffers back so an idle
                    // connection stays a few KiB.
                    rs.decoder.shrink_if_idle();
                    return ReadOutcome::Pending;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return ReadOutcome::Failed(e),
            }
        }
    }

    /// Counts a call just taken off the connection as in flight, on the connection
    /// and server-wide. Owner only, under the read lock, after
    /// [`Connection::at_limit`] returned false, so the count never exceeds the limit.
    fn begin_call(&self) {
        // Relaxed would do for the count itself (only the owner increments); SeqCst
        // keeps every access in the throttle protocol in one total order.
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.counters().in_flight.begin();
        self.counters().note_in_flight(now);
    }

    /// Stops reading for good (server draining; any thread). Returns once no
    /// owner is inside [`Connection::read_record`]: from then on every call ever
    /// taken off this connection is counted in flight (the count is made under
    /// the same lock), and no more will be.
    /// Replies held for a record that will now never be taken are sent (and
    /// retired) here.
    pub(crate) fn stop_reading(&self) {
        {
            let mut rs = lock(&self.read);
            rs.stopped = true;
            self.next_pace
                .store(pace_code(Pace::Slow), Ordering::Relaxed);
        }
        if let Ok(done) = self.release_held() {
            // Nothing is read any more: no need to lift back-pressure.
            let _ = self.complete(done);
        }
    }

    // ---- write side: any thread, and the poller ----

    /// Ends one call with its complete, record-marked `reply` (empty for a call
    /// answered with nothing), without blocking. Returns how many replies (this
    /// one and earlier buffered ones) fully reached the kernel, to pass to
    /// [`Connection::complete`], and whether this one was held. On error the
    /// connection is broken.
    ///
    /// Reply coalescing: while the connection's next record is a quick call
    /// already received (`next_pace`), the reply is queued but not written, for
    /// at most `max_hold` after the oldest reply held; the next reply that is not
    /// held writes them all with one system call. A next record quick only among
    /// its peers holds only a reply whose call, of pace `pace`, is one of them.
    /// Zero `max_hold` never holds.
    pub(crate) fn send_reply(
        &self,
        reply: &[u8],
        pace: Pace,
        max_hold: Duration,
    ) -> io::Result<Sent> {
        let sent = |done| Sent { done, held: false };
        let mut ws = lock(&self.write);
        if reply.is_empty() && ws.is_empty() {
            return Ok(sent(0));
        }
        if self.may_hold(&mut ws, reply.len(), pace, max_hold) {
            if !reply.is_empty() {
                ws.queue(reply);
                self.publish_unsent(&ws);
            }
            return Ok(Sent {
                done: 0,
                held: true,
            });
        }
        let mut rest = reply;
        if ws.is_empty() {
            // Fast path: nothing queued ahead of us, write straight from the caller's
            // buffer.
            let n = write_nonblocking(&self.stream, rest)?;
            rest = &rest[n..];
            if rest.is_empty() {
                return Ok(sent(1));
            }
        }
        if !rest.is_empty() {
            ws.queue(rest);
            self.counters().note_output_buffered(ws.unsent());
        }
        self.write_buffered(&mut ws).map(sent)
    }

    /// Whether a reply of `len` bytes finishing now may be held (see
    /// [`Connection::send_reply`]). A large reply is not: holding would copy
    /// it, and one write of it already carries a large payload; nor one that
    /// would take the held bytes past [`MAX_HELD_BYTES`].
    fn may_hold(&self, ws: &mut WriteState, len: usize, pace: Pace, max_hold: Duration) -> bool {
        if max_hold.is_zero() || len > MAX_HELD_REPLY || ws.unsent() + len > MAX_HELD_BYTES {
            return false;
        }
        let next = self.next_pace.load(Ordering::Relaxed);
        let waits_for_next = next == pace_code(Pace::Quick)
            || (next == pace_code(Pace::QuickAmongPeers) && pace == Pace::QuickAmongPeers);
        if !waits_for_next {
            return false;
        }
        match ws.held_since {
            None => {
                ws.held_since = Some(Instant::now());
                true
            }
            Some(since) => since.elapsed() < max_hold,
        }
    }

    /// Writes the replies held now, if any, without touching `next_pace`: for
    /// a call, taken as quick, that finds it must wait after all (a READ whose
    /// data is not in memory), so nothing held waits for it. Any thread. Returns
    /// the replies completed, for [`Connection::complete`].
    pub(crate) fn flush_held(&self) -> io::Result<u32> {
        let mut ws = lock(&self.write);
        if ws.held_since.is_none() {
            return Ok(0);
        }
        self.write_buffered(&mut ws)
    }

    /// Stops holding replies and writes those held, for when the record they wait
    /// for will not be taken soon. Returns the replies completed, for
    /// [`Connection::complete`]. Owner only (or with reading stopped).
    pub(crate) fn release_held(&self) -> io::Result<u32> {
        self.next_pace
            .store(pace_code(Pace::Slow), Ordering::Relaxed);
        self.flush_held()
    }

    /// Writes what the output buffer holds, as a sender's final attempt.
    fn write_buffered(&self, ws: &mut WriteState) -> io::Result<u32> {
        // Before the final attempt: see `write_pending`.
        self.write_pending.store(true, Ordering::SeqCst);
        self.flush_locked(ws)
    }

    /// Whether the output buffer may hold bytes (poller, before [`Connection::flush`]).
    pub(crate) fn write_pending(&self) -> bool {
        self.write_pending.load(Ordering::SeqCst)
    }

    /// Writes buffered replies until the buffer is empty or the socket is full
    /// (poller, on a writable edge). Returns the number of replies completed.
    pub(crate) fn flush(&self) -> io::Result<u32> {
        let mut ws = lock(&self.write);
        self.flush_locked(&mut ws)
    }

    fn flush_locked(&self, ws: &mut WriteState) -> io::Result<u32> {
        // Whatever was held goes out now (or waits for a writable edge).
        ws.held_since = None;
        let result = ws.flush(&self.stream);
        self.publish_unsent(ws);
        if ws.is_empty() {
            self.write_pending.store(false, Ordering::SeqCst);
        }
        result
    }

    /// Publishes how many bytes the output buffer holds unsent, for
    /// [`Connection::at_limit`]. Under the write lock (`ws`), after every change.
    fn publish_unsent(&self, ws: &WriteState) {
        // SeqCst: the first half of the completer's side of the `at_limit` pair
        // (see `unsent`); the completion that follows loads `throttled`.
        self.unsent.store(ws.unsent(), Ordering::SeqCst);
    }

    /// Retires `n` completed calls. Returns true when reading had stopped at the
    /// in-flight limit or the output cap: the caller must then `notify` the task
    /// so it is read again (the owner checks both limits anew).
    pub(crate) fn complete(&self, n: u32) -> bool {
        if n == 0 {
            return false;
        }
        // SeqCst: decrement, then load `throttled` (the other half of `at_limit`).
        self.in_flight.fetch_sub(n, Ordering::SeqCst);
        self.counters().in_flight.end(u64::from(n));
        self.throttled.load(Ordering::SeqCst) && self.throttled.swap(false, Ordering::SeqCst)
    }

    // ---- closing ----

    /// Shuts the socket down both ways (any thread; idempotent). The peer sees the
    /// close at once; the poller then reports hang-up.
    pub(crate) fn shutdown_socket(&self) {
        // Fails only when the socket is already dead (ENOTCONN): nothing to do.
        let _ = self.stream.shutdown(Shutdown::Both);
    }

    /// Tears the connection down: shuts the socket and asks the poller to deregister
    /// it and drop its reference. Called by the thread that owns a closing task;
    /// runs once.
    pub(crate) fn teardown(&self) {
        if self.torn_down.swap(true, Ordering::AcqRel) {
            return;
        }
        self.shutdown_socket();
        self.poller.remove(self.id);
    }

    pub(crate) fn stream(&self) -> &TcpStream {
        &self.stream
    }
}

impl Drop for Connection {
    /// Retires the calls still counted: replies left in the output buffer of a
    /// connection closed before they could be written. Nothing else can remain,
    /// since a running call holds a reference to its connection.
    fn drop(&mut self) {
        let left = *self.in_flight.get_mut();
        self.counters().in_flight.end(u64::from(left));
    }
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("id", &self.id)
            .field("peer", &self.peer)
            .field("in_flight", &self.in_flight.load(Ordering::Relaxed))
            .field("unsent", &self.unsent.load(Ordering::Relaxed))
            .field("write_pending", &self.write_pending.load(Ordering::Relaxed))
            .field("throttled", &self.throttled.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl WriteState {
    fn is_empty(&self) -> bool {
        self.sent == self.buf.len()
    }

    fn unsent(&self) -> usize {
        self.buf.len() - self.sent
    }

    /// Appends the unsent tail of one reply.
    fn queue(&mut self, bytes: &[u8]) {
        if self.sent > 0 && self.sent >= self.buf.len() / 2 {
            // Compact: the sent prefix is at least half the buffer.
            self.buf.drain(..self.sent);
            for end in &mut self.ends {
                *end -= self.sent;
            }
            self.sent = 0;
        }
        self.buf.extend_from_slice(bytes);
        self.ends.push_back(self.buf.len());
    }

    /// Writes until empty or `WouldBlock`; returns replies completed.
    fn flush(&mut self, stream: &TcpStream) -> io::Result<u32> {
        let mut done = 0;
        if !self.is_empty() {
            // Returns short only on `WouldBlock`.
            self.sent += write_nonblocking(stream, &self.buf[self.sent..])?;
            while self.ends.front().is_some_and(|&end| end <= self.sent) {
                self.ends.pop_front();
                done += 1;
            }
        }
        if self.is_empty() {
            self.sent = 0;
            if self.buf.capacity() > KEEP_OUTPUT_CAPACITY {
                self.buf = Vec::new();
            } else {
                self.buf.clear();
            }
        }
        Ok(done)
    }
}

/// Writes as much of `bytes` as the socket takes now; 0 means `WouldBlock`.
fn write_nonblocking(stream: &TcpStream, bytes: &[u8]) -> io::Result<usize> {
    let mut written = 0;
    let mut stream = stream;
    while written < bytes.len() {
        match stream.write(&bytes[written..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(written)
}

/// Locks `m`, ignoring poisoning: the scheduler catches a panicking handler, and the
/// states behind our locks are consistent between statements.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_state_counts_replies_by_their_last_byte() {
        let mut ws = WriteState::default();
        ws.queue(b"aaaa");
        ws.queue(b"bb");
        assert_eq!(ws.unsent(), 6);
        // Simulate partial progress.
        ws.sent = 3;
        assert_eq!(ws.ends.front(), Some(&4));
        ws.queue(b"c"); // compacts: sent (3) >= len/2
        assert_eq!(ws.sent, 0);
        assert_eq!(ws.buf, b"abbc");
        assert_eq!(ws.ends, [1, 3, 4]);
    }
}
