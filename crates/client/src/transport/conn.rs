//! One TCP connection: its slot table, the send path and the reader thread.
//!
//! **Sending** (Linux `xprt_transmit` under `XPRT_LOCKED`): a caller that
//! finds the send lock free and the queue empty writes its request at once;
//! otherwise it pushes it on a lock-free queue, then tries the send lock; the
//! winner writes everything queued (several requests per `writev`) and
//! releases; a loser returns at once, its request sent by the winner. The
//! push / try and the release / re-check of the queue are a Dekker pair
//! (`SeqCst` fences), so no request is left in the queue with no sender. A
//! failed write shuts the socket down (the stream may hold half a record)
//! and the reader reconnects.
//!
//! **Receiving** (`lead.rs`): whoever holds the read role reads records
//! (`RecordDecoder`, many per `read`), takes the XID from the first four
//! bytes, and moves the record into the slot of that XID ([`Slot::deliver`]);
//! decoding happens in the caller. A blocking caller reads until its own
//! reply is in; the reader thread reads for everyone else (async futures,
//! submitted calls) and gives the role up when a blocking caller wants it,
//! or when a reader task on a tokio runtime stands in for it (`reactor.rs`;
//! that task reads with non-blocking `recv`s woken by the runtime's reactor).
//! Replies with no waiting slot are dropped and counted. Every tick
//! (`timeout / 8`, 5 ms to 1 s) the reader thread wakes the owners whose
//! retransmit deadline passed (async calls have no timer of their own).
//!
//! **Reconnecting**: on end of stream or a socket error (seen by whoever
//! read) the reader thread closes the socket, reconnects with bounded
//! exponential backoff (from the previous source port when it can be had,
//! `socket.rs`), installs the new
//! socket for the senders and bumps `epoch`, then wakes every owner: each
//! owner that sent at an older epoch sends its request again, same XID. A
//! record stream the client cannot parse (a record over `max_reply`, too many
//! fragments) fails the calls in flight with `BadReply` first: such a server
//! is broken, not slow.
//!
//! **Shutdown**: `close` sets `closing`, shuts the socket down (waking the
//! reader out of `read`), unparks the reader (out of a backoff) and wakes
//! every owner and backlog ticket; they return `ClientError::Shutdown`.
//!
//! [`Slot::deliver`]: super::slots::Slot::deliver

use std::fmt;
use std::io::{self, IoSlice, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::Arc;
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use crossbeam_queue::{ArrayQueue, SegQueue};
use rnfs_rpc::RecordDecoder;

use crate::error::ClientError;
use crate::lockstat::Site;

use super::lead::{ReadRole, ReadSide};
#[cfg(all(feature = "tokio", not(loom)))]
use super::reactor::{Stint, Watched};
use super::slots::{Delivery, Slot, SlotTable};
use super::socket;
use super::sync::{
    fence, lock, park, AtomicBool, AtomicU32, AtomicU64, Mutex, Ordering, TryLock, TryLockGuard,
};
use super::ClientOptions;

/// First pause before reconnecting after a connection that delivered nothing.
const MIN_BACKOFF: Duration = Duration::from_millis(50);
/// Longest pause between reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(3);
/// Most requests written by one `writev`.
const BATCH: usize = 64;
/// How often an idle decoder's grown buffers are freed.
const SHRINK_EVERY: Duration = Duration::from_secs(1);

/// Counters of one connection (Relaxed: statistics only).
#[derive(Debug, Default)]
pub(crate) struct ConnStats {
    pub(crate) calls: AtomicU64,
    pub(crate) retransmits: AtomicU64,
    pub(crate) reconnects: AtomicU64,
    pub(crate) unknown_replies: AtomicU64,
    pub(crate) backlog_waits: AtomicU64,
    pub(crate) runtime_reads: AtomicU64,
    pub(crate) reused_reply_buffers: AtomicU64,
}

impl ConnStats {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// What the send-lock holder owns.
#[derive(Debug)]
struct Writer {
    /// The socket to write to; `None` while disconnected (requests drained
    /// then are dropped: their owners send again after the reconnect).
    stream: Option<TcpStream>,
    /// Requests taken from the queue for one `writev` (kept for its capacity).
    batch: Vec<Arc<Vec<u8>>>,
}

/// Connection state touched only when connecting, failing or closing.
#[derive(Debug, Default)]
struct Control {
    /// A handle on the current socket, to shut it down from `close`.
    stream: Option<TcpStream>,
    /// Why the last connection or attempt failed.
    last_error: Option<String>,
    /// The reader thread, to unpark it from a backoff pause.
    reader: Option<Thread>,
    /// The last socket's local address, to reconnect from the same port.
    local: Option<SocketAddr>,
}

/// One TCP connection and its calls.
pub(crate) struct Conn {
    peer: SocketAddr,
    pub(crate) options: ClientOptions,
    pub(crate) slots: SlotTable,
    pub(crate) stats: ConnStats,
    /// Requests waiting for the send-lock holder.
    queue: SegQueue<Arc<Vec<u8>>>,
    writer: TryLock<Writer>,
    /// The reading end and who reads it (`lead.rs`).
    pub(crate) reading: ReadRole<ReadSideState>,
    control: Mutex<Control>,
    /// Bumped (SeqCst) after each new socket is installed; an owner that sent
    /// at an older epoch sends again.
    epoch: AtomicU64,
    /// Whether a socket is installed (for the error a timed-out call gets).
    connected: AtomicBool,
    /// Set once by `close`; never cleared.
    closing: AtomicBool,
    /// Origin of the slots' `deadline_ms`.
    created: Instant,
    /// Reply buffers their callers have decoded, for the next replies to be
    /// assembled in (lock-free). A fresh 32 KiB buffer often has no pages
    /// mapped yet (glibc gives the freed top of its heap back to the kernel),
    /// and seed 002's READs then took 3 page faults per reply.
    spare_records: ArrayQueue<Vec<u8>>,
    /// Slots held by background calls (write-behind, read-ahead), at most
    /// [`background_limit`]: a background call keeps its slot until its
    /// owner collects it, which may be never while that owner waits on
    /// another call, so they must leave slots for calls whose caller waits.
    background: AtomicU32,
}

/// How many of `max_slots` background calls may hold at once: all but a
/// quarter, and never the last slot (with one slot, none: every
/// background call is then made synchronously, or skipped).
pub(crate) fn background_limit(max_slots: u32) -> u32 {
    let reserve = (max_slots / 4).max(1);
    max_slots.saturating_sub(reserve)
}

/// Most reply buffers a connection keeps for reuse.
const SPARE_RECORDS: usize = 32;
/// Largest reply buffer kept for reuse: at most 32 x 128 KiB (4 MiB) per
/// connection, and only while replies that large keep coming.
const SPARE_RECORD_MAX: usize = 128 * 1024;

impl fmt::Debug for Conn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Conn")
            .field("peer", &self.peer)
            .field("epoch", &self.epoch())
            .field("connected", &self.is_connected())
            .field("closing", &self.is_closing())
            .finish_non_exhaustive()
    }
}

impl Conn {
    /// Connects to `peer` and starts the reader thread.
    pub(crate) fn connect(
        peer: SocketAddr,
        options: ClientOptions,
        seed: u32,
    ) -> Result<Arc<Self>, ClientError> {
        let stream = open(peer, &options, None)?;
        let conn = Arc::new(Self {
            peer,
            slots: SlotTable::new(options.max_slots, seed),
            stats: ConnStats::default(),
            queue: SegQueue::new(),
            writer: TryLock::new(Writer {
                stream: None,
                batch: Vec::with_capacity(BATCH),
            }),
            reading: ReadRole::new(ReadSideState {
                stream: Some(stream.try_clone()?),
                decoder: RecordDecoder::new(options.max_reply),
                end: None,
                delivered: false,
                shrink_at: Instant::now() + SHRINK_EVERY,
            }),
            control: Mutex::new(Control::default()),
            epoch: AtomicU64::new(0),
            connected: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            created: Instant::now(),
            spare_records: ArrayQueue::new(SPARE_RECORDS),
            background: AtomicU32::new(0),
            options,
        });
        conn.install(&stream)?;
        drop(stream);
        let reader = Arc::clone(&conn);
        let handle = thread::Builder::new()
            .name("rnfs-rpc-reader".into())
            .spawn(move || reader.reader_main())?;
        lock(&conn.control, Site::Control).reader = Some(handle.thread().clone());
        Ok(conn)
    }

    /// Gives back a reply buffer its caller has decoded, for a later reply
    /// (see `spare_records`); one too large, or beyond the pool's room, is
    /// freed.
    pub(crate) fn recycle_record(&self, record: Vec<u8>) {
        if record.capacity() <= SPARE_RECORD_MAX {
            // A full pool hands the buffer back; it is freed here.
            let _ = self.spare_records.push(record);
        }
    }

    /// Gives `decoder` a recycled buffer for its next record, if it needs
    /// one and one is spare.
    fn supply_record_buffer(&self, decoder: &mut RecordDecoder) {
        if decoder.wants_record_buffer() {
            if let Some(used) = self.spare_records.pop() {
                decoder.supply_record_buffer(used);
                ConnStats::bump(&self.stats.reused_reply_buffers);
            }
        }
    }

    /// The current connection epoch.
    pub(crate) fn epoch(&self) -> u64 {
        // SeqCst: read before pushing a request; pairs with the bump after a
        // socket is installed (module docs).
        self.epoch.load(Ordering::SeqCst)
    }

    pub(crate) fn is_connected(&self) -> bool {
        self.connected.load(Ordering::SeqCst)
    }

    pub(crate) fn is_closing(&self) -> bool {
        // SeqCst: an owner registers its waker, then reads this; `close`
        // stores it, then wakes the owners.
        self.closing.load(Ordering::SeqCst)
    }

    /// Why the connection is down, for a call that gives up.
    pub(crate) fn disconnected_error(&self) -> ClientError {
        let why = lock(&self.control, Site::Control)
            .last_error
            .clone()
            .unwrap_or_else(|| "not connected".into());
        ClientError::Disconnected(why)
    }

    /// Counts a background call in, unless they hold their limit of slots.
    pub(crate) fn take_background(&self) -> bool {
        let limit = background_limit(self.options.max_slots);
        // Relaxed: a count, publishing nothing; the slot itself is handed
        // over by the slot table's own orderings.
        self.background
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < limit).then_some(n + 1)
            })
            .is_ok()
    }

    /// Counts a background call out (its slot was released).
    pub(crate) fn give_back_background(&self) {
        // Relaxed: as in `take_background`.
        self.background.fetch_sub(1, Ordering::Relaxed);
    }

    /// `at` in ms since the connection was created (for slot deadlines).
    pub(crate) fn ms_since_created(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.created).as_millis()).unwrap_or(u64::MAX)
    }

    /// Sends `request`, or queues it for the send-lock holder.
    pub(crate) fn transmit(&self, request: Arc<Vec<u8>>) {
        // Fast path: the lock is free and nothing is queued: write directly.
        if let Some(mut guard) = self.writer.try_lock(Site::SendLock) {
            guard.with(|w| {
                if self.queue.is_empty() {
                    Self::write_all(w, std::slice::from_ref(&request));
                } else {
                    self.queue.push(request);
                    self.drain(w);
                }
            });
            drop(guard);
            // SeqCst fence: as in `kick`, serve a pusher that lost the lock.
            fence(Ordering::SeqCst);
            if !self.queue.is_empty() {
                self.kick();
            }
            return;
        }
        self.queue.push(request);
        // SeqCst fence: our push is visible before we try the lock, pairing
        // with the holder's release-then-re-check in `kick`.
        fence(Ordering::SeqCst);
        self.kick();
    }

    /// An async call's send while a reader task is about to write what is
    /// queued (`reactor.rs`): queued for it, to go out with the others in
    /// one `writev`. `false` if no such write is pending (the caller sends
    /// itself).
    #[cfg(all(feature = "tokio", not(loom)))]
    pub(crate) fn transmit_deferred(&self, request: Arc<Vec<u8>>) -> bool {
        let ar = self.reading.async_reader();
        if !ar.flush_pending() {
            return false;
        }
        self.queue.push(request);
        // SeqCst fence: our push is visible before we look again; pairs with
        // the task clearing `flush_pending` (store, fence, then `kick`), so
        // the request is written by the task or by us.
        fence(Ordering::SeqCst);
        if !ar.flush_pending() {
            self.kick();
        }
        true
    }

    /// [`kick`](Self::kick) if a request is queued (the load half of the
    /// callers' Dekker pairs: they push, then look at the lock or a flag).
    #[cfg(all(feature = "tokio", not(loom)))]
    pub(crate) fn kick_if_queued(&self) {
        if !self.queue.is_empty() {
            self.kick();
        }
    }

    /// Drains the send queue while we can take the send lock.
    pub(crate) fn kick(&self) {
        loop {
            let Some(mut guard) = self.writer.try_lock(Site::SendLock) else {
                // The holder re-checks the queue after releasing.
                return;
            };
            guard.with(|w| self.drain(w));
            drop(guard);
            // SeqCst fence: our release is visible before we re-check the
            // queue, so a pusher that failed `try_lock` is served by us.
            fence(Ordering::SeqCst);
            if self.queue.is_empty() {
                return;
            }
        }
    }

    fn drain(&self, w: &mut Writer) {
        loop {
            w.batch.clear();
            while w.batch.len() < BATCH {
                match self.queue.pop() {
                    Some(r) => w.batch.push(r),
                    None => break,
                }
            }
            if w.batch.is_empty() {
                return;
            }
            let batch = std::mem::take(&mut w.batch);
            Self::write_all(w, &batch);
            w.batch = batch;
        }
    }

    /// Writes `requests` on the current socket (dropped while disconnected:
    /// their owners send again after the reconnect).
    fn write_all(w: &mut Writer, requests: &[Arc<Vec<u8>>]) {
        let Some(stream) = &w.stream else {
            return;
        };
        if write_batch(stream, requests).is_err() {
            // Half a record may be on the wire: the stream is unusable.
            // Shutting it down makes the reader reconnect.
            let _ = stream.shutdown(Shutdown::Both);
            w.stream = None;
        }
    }

    /// Installs a freshly connected socket for the senders.
    fn install(&self, stream: &TcpStream) -> io::Result<()> {
        let for_writer = stream.try_clone()?;
        let for_control = stream.try_clone()?;
        self.writer
            .lock_spinning(Site::Control)
            .with(|w| w.stream = Some(for_writer));
        {
            let mut c = lock(&self.control, Site::Control);
            c.local = stream.local_addr().ok();
            c.stream = Some(for_control);
            c.last_error = None;
        }
        self.connected.store(true, Ordering::SeqCst);
        // SeqCst: after the socket is installed; an owner reading the new
        // epoch sends on the new socket.
        self.epoch.fetch_add(1, Ordering::SeqCst);
        // A reader task watches the old socket: wake it to watch this one.
        #[cfg(all(feature = "tokio", not(loom)))]
        self.reading.async_reader().wake_unparked();
        self.slots.wake_owners(None);
        self.kick();
        Ok(())
    }

    /// Takes a failed socket out of service.
    fn disconnect(&self, stream: &TcpStream, why: String) {
        let _ = stream.shutdown(Shutdown::Both);
        self.connected.store(false, Ordering::SeqCst);
        self.writer
            .lock_spinning(Site::Control)
            .with(|w| w.stream = None);
        let mut c = lock(&self.control, Site::Control);
        c.stream = None;
        c.last_error = Some(why);
    }

    /// Shuts the connection down (the last client handle was dropped).
    pub(crate) fn close(&self) {
        // SeqCst: see `is_closing`.
        self.closing.store(true, Ordering::SeqCst);
        let (stream, reader) = {
            let mut c = lock(&self.control, Site::Control);
            (c.stream.take(), c.reader.clone())
        };
        if let Some(s) = stream {
            let _ = s.shutdown(Shutdown::Both);
        }
        if let Some(t) = reader {
            t.unpark();
        }
        self.slots.close();
        self.slots.wake_owners(None);
        // The reader task sees `closing` and ends.
        #[cfg(all(feature = "tokio", not(loom)))]
        self.reading.async_reader().wake_unparked();
    }

    fn tick(&self) -> Duration {
        tick(&self.options)
    }

    fn reader_main(self: Arc<Self>) {
        let mut backoff = MIN_BACKOFF;
        let mut watchdog = Watchdog::new(self.tick());
        while !self.is_closing() {
            self.reading.reader_register();
            let stalled = watchdog.stalled(self.reading.async_polls(), &self.slots);
            if stalled {
                // The task writes the async calls' requests too.
                self.kick();
            }
            if self.reading.reader_asked() || stalled {
                if let Some(mut g) = self.reading.try_take() {
                    g.with(|st| self.serve(st, &mut backoff, stalled));
                    self.reading.release(g, &self.slots);
                    continue;
                }
                // The holder hands off (and asks us again if needed).
            }
            park(Some(Instant::now() + self.tick()));
            self.slots
                .wake_owners(Some(self.ms_since_created(Instant::now())));
        }
        self.writer
            .lock_spinning(Site::Control)
            .with(|w| w.stream = None);
        lock(&self.control, Site::Control).stream = None;
        self.slots.wake_owners(None);
    }

    /// Reader thread, holding the role: reads (repairing the stream when it
    /// fails) until a blocking caller wants the role, a reader task can take
    /// over (unless `for_a_tick`: the watchdog, reading for one tick), or the
    /// client closes.
    fn serve(&self, st: &mut ReadSideState, backoff: &mut Duration, for_a_tick: bool) {
        let tick = self.tick();
        let mut next_tick = Instant::now() + tick;
        while !self.is_closing() {
            if let Some(end) = st.end.take() {
                let why = match &end {
                    StreamEnd::Eof { mid_record: true } => {
                        "server closed the connection mid-reply".to_owned()
                    }
                    StreamEnd::Eof { mid_record: false } => "server closed the connection".into(),
                    StreamEnd::Io(e) => format!("connection error: {e}"),
                    StreamEnd::Protocol(e) => format!("bad record stream: {e}"),
                };
                if let Some(s) = st.stream.take() {
                    self.disconnect(&s, why);
                }
                st.decoder = RecordDecoder::new(self.options.max_reply);
                if let StreamEnd::Protocol(e) = &end {
                    self.slots
                        .fail_outstanding(|| ClientError::BadReply(format!("record stream: {e}")));
                }
                if st.delivered {
                    *backoff = MIN_BACKOFF;
                } else if !self.is_closing() {
                    self.back_off(backoff);
                }
                st.delivered = false;
                continue;
            }
            if st.stream.is_none() {
                let local = lock(&self.control, Site::Control).local;
                let opened = open(self.peer, &self.options, local);
                match opened.and_then(|s| self.install(&s).map(|()| s)) {
                    Ok(s) => {
                        ConnStats::bump(&self.stats.reconnects);
                        st.stream = Some(s);
                    }
                    Err(e) => {
                        lock(&self.control, Site::Control).last_error =
                            Some(format!("reconnecting to {}: {e}", self.peer));
                        self.back_off(backoff);
                    }
                }
                continue;
            }
            if self.reading.async_active() && !for_a_tick {
                // The stream is sound: the reader task reads.
                return;
            }
            self.read_once(st, false);
            if self.slots.has_want() {
                return;
            }
            let now = Instant::now();
            if now >= next_tick {
                if for_a_tick {
                    return;
                }
                self.slots.wake_owners(Some(self.ms_since_created(now)));
                st.decoder.shrink_if_idle();
                next_tick = now + tick;
            }
        }
    }

    /// Pauses for `backoff`, then doubles it (up to [`MAX_BACKOFF`]).
    fn back_off(&self, backoff: &mut Duration) {
        self.pause(*backoff);
        *backoff = (*backoff * 2).min(MAX_BACKOFF);
    }

    /// Sleeps `d` (waking owners every tick), or until `close`.
    fn pause(&self, d: Duration) {
        let end = Instant::now() + d;
        loop {
            let now = Instant::now();
            if now >= end || self.is_closing() {
                return;
            }
            thread::park_timeout((end - now).min(self.tick()));
            self.slots
                .wake_owners(Some(self.ms_since_created(Instant::now())));
        }
    }

    /// A blocking caller holding the role: reads until `slot`'s reply for
    /// `xid` has arrived, `deadline` passes, the stream fails or the client
    /// closes. Replies of other calls are delivered on the way. Returns
    /// whether the stream needs the reader thread.
    pub(crate) fn lead(
        &self,
        guard: &mut TryLockGuard<'_, ReadSideState>,
        slot: &Slot,
        xid: u32,
        deadline: Instant,
    ) -> bool {
        guard.with(|st| {
            while !slot.is_done(xid)
                && !self.is_closing()
                && !st.needs_reader()
                && Instant::now() < deadline
            {
                self.read_once(st, false);
            }
            if st.shrink_at <= Instant::now() {
                st.decoder.shrink_if_idle();
                st.shrink_at = Instant::now() + SHRINK_EVERY;
            }
            st.needs_reader()
        })
    }

    /// One `read` (bounded by the socket's tick timeout; without waiting if
    /// `nonblocking`) and the delivery of every complete record. A failure
    /// is recorded in `st.end` and the socket shut down; the reader thread
    /// repairs it.
    fn read_once(&self, st: &mut ReadSideState, nonblocking: bool) -> ReadOutcome {
        let Some(s) = &st.stream else {
            return ReadOutcome::Failed;
        };
        // One vectored read: a large reply's body lands straight in its
        // record (no copy out of the read buffer) and what follows it in the
        // read buffer, so draining a socket of many queued replies takes no
        // more reads than through the buffer alone. (The body-only read it
        // replaces made blocking callers 1.08-1.15x faster at seed 002's
        // 32 KiB READs but the non-blocking reader 0.77-0.93x: it stopped at
        // the record's end.) Without waiting, or bounded by the socket's read
        // timeout (the tick).
        let (flags, rustix_flags) = if nonblocking {
            (libc::MSG_DONTWAIT, rustix::net::RecvFlags::DONTWAIT)
        } else {
            (0, rustix::net::RecvFlags::empty())
        };
        self.supply_record_buffer(&mut st.decoder);
        let targets = st.decoder.read_targets();
        let (got, room) = match targets.direct {
            _ if targets.buf.is_empty() => (None, 0),
            Some(record) => {
                let direct_room = targets.direct_room;
                let got = socket::recv_into_two(s, record, direct_room, targets.buf, flags);
                (Some(got), direct_room + targets.buf.len())
            }
            None => {
                let room = targets.buf.len();
                let got = rustix::net::recv(s, targets.buf, rustix_flags)
                    .map(|(n, _)| n)
                    .map_err(io::Error::from);
                (Some(got), room)
            }
        };
        let Some(got) = got else {
            let e = "read buffer full without a complete record".into();
            st.fail(StreamEnd::Protocol(e));
            return ReadOutcome::Failed;
        };
        st.decoder.targets_filled(*got.as_ref().unwrap_or(&0));
        match got {
            Ok(0) => {
                let mid_record = st.decoder.buffered() > 0;
                st.fail(StreamEnd::Eof { mid_record });
                ReadOutcome::Failed
            }
            Ok(n) => {
                if nonblocking {
                    // Only the reader task reads without blocking. Counted
                    // before the delivery, so a caller that got its reply
                    // sees the read counted.
                    ConnStats::bump(&self.stats.runtime_reads);
                }
                loop {
                    self.supply_record_buffer(&mut st.decoder);
                    match st.decoder.next_record() {
                        Ok(Some(record)) => st.delivered |= self.dispatch(record),
                        // A short read emptied the socket's receive queue.
                        Ok(None) if n < room => return ReadOutcome::Drained,
                        Ok(None) => return ReadOutcome::Data,
                        Err(e) => {
                            st.fail(StreamEnd::Protocol(e.to_string()));
                            return ReadOutcome::Failed;
                        }
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => ReadOutcome::Empty,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                ) =>
            {
                ReadOutcome::Data
            }
            Err(e) => {
                st.fail(StreamEnd::Io(e));
                ReadOutcome::Failed
            }
        }
    }

    /// The reader task, holding the role: reads while the reactor reports
    /// the socket readable, until it is empty (registered with the reactor),
    /// the budget is spent, a blocking caller wants the role or the stream
    /// fails (`reactor.rs`).
    #[cfg(all(feature = "tokio", not(loom)))]
    pub(crate) fn read_async(
        &self,
        st: &mut ReadSideState,
        watched: &mut Option<Watched>,
        cx: &mut std::task::Context<'_>,
        budget: &mut u32,
    ) -> Stint {
        use std::task::Poll;
        loop {
            if st.needs_reader() {
                return Stint::Broken;
            }
            // The stream and the epoch change together, under the role.
            let epoch = self.epoch();
            if watched.as_ref().is_none_or(|w| w.epoch != epoch) {
                *watched = None;
                let Some(s) = &st.stream else {
                    return Stint::Broken;
                };
                let fd = self.reading.async_reader().registering(|| {
                    s.try_clone().and_then(|dup| {
                        #[allow(unsafe_code)]
                        // SAFETY: `dup` is an owned socket the `AsyncFd` takes
                        // over: its descriptor stays open and the same until the
                        // `AsyncFd` is dropped.
                        unsafe {
                            tokio::io::unix::AsyncFd::register_with_interest(
                                dup,
                                tokio::io::Interest::READABLE,
                            )
                        }
                        .map_err(io::Error::from)
                    })
                });
                match fd {
                    Ok(fd) => *watched = Some(Watched { epoch, fd }),
                    Err(_) => return Stint::Unusable,
                }
            }
            let Some(w) = watched.as_ref() else {
                return Stint::Unusable;
            };
            let mut ready = match w.fd.poll_read_ready(cx) {
                Poll::Pending => return Stint::Parked,
                Poll::Ready(Ok(ready)) => ready,
                Poll::Ready(Err(_)) => return Stint::Unusable,
            };
            let outcome = self.read_once(st, true);
            if outcome == ReadOutcome::Drained || outcome == ReadOutcome::Empty {
                // Safe on a TCP socket: data arriving after this read is a
                // new edge, which sets readiness again (tokio compares ticks).
                ready.clear_ready();
            }
            match outcome {
                ReadOutcome::Empty => {}
                ReadOutcome::Failed => return Stint::Broken,
                ReadOutcome::Data | ReadOutcome::Drained => {
                    if self.slots.has_want() {
                        return Stint::HandOff;
                    }
                    *budget = budget.saturating_sub(1);
                    if *budget == 0 {
                        return Stint::Yield;
                    }
                }
            }
        }
    }

    /// Moves `record` into the slot waiting for its XID. `false` if none.
    fn dispatch(&self, record: Vec<u8>) -> bool {
        let xid = match record.first_chunk::<4>() {
            Some(b) => u32::from_be_bytes(*b),
            None => {
                ConnStats::bump(&self.stats.unknown_replies);
                return false;
            }
        };
        let delivered = self
            .slots
            .slot_for_xid(xid)
            .is_some_and(|slot| slot.deliver(xid, Delivery::Reply(record)));
        if !delivered {
            ConnStats::bump(&self.stats.unknown_replies);
        }
        delivered
    }
}

/// The reading end of a connection, behind the read role.
#[derive(Debug)]
pub(crate) struct ReadSideState {
    /// The socket to read; `None` while reconnecting.
    stream: Option<TcpStream>,
    decoder: RecordDecoder,
    /// Why the stream failed; the reader thread disconnects and reconnects.
    end: Option<StreamEnd>,
    /// Whether a reply was delivered on this stream (resets the backoff).
    delivered: bool,
    /// When a leader next frees an idle decoder's grown buffers.
    shrink_at: Instant,
}

impl ReadSideState {
    fn fail(&mut self, end: StreamEnd) {
        if let Some(s) = &self.stream {
            // Let the server and the senders see the failure at once.
            let _ = s.shutdown(Shutdown::Both);
        }
        self.end.get_or_insert(end);
    }
}

impl ReadSide for ReadSideState {
    fn needs_reader(&mut self) -> bool {
        self.end.is_some() || self.stream.is_none()
    }
}

/// The reader thread's check that a reader task still runs (`reactor.rs`):
/// stalled when calls wait and the task has not been polled for a tick.
#[derive(Debug)]
struct Watchdog {
    tick: Duration,
    since: Instant,
    polls: u64,
}

impl Watchdog {
    fn new(tick: Duration) -> Self {
        Self {
            tick,
            since: Instant::now(),
            polls: 0,
        }
    }

    /// `polls`: the task's heartbeat, `None` if no task runs.
    fn stalled(&mut self, polls: Option<u64>, slots: &SlotTable) -> bool {
        let Some(polls) = polls else {
            return false;
        };
        let now = Instant::now();
        if polls != self.polls {
            self.polls = polls;
            self.since = now;
            return false;
        }
        if now < self.since + self.tick {
            return false;
        }
        self.since = now;
        slots.any_waiting()
    }
}

/// What one read found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReadOutcome {
    /// Data (or a timeout: the caller checks its conditions again).
    Data,
    /// Data, and less than asked for: the socket was left empty.
    Drained,
    /// Nothing to read (non-blocking reads only).
    Empty,
    /// The stream failed (`st.end` says why).
    Failed,
}

/// Why a socket stopped being readable.
#[derive(Debug)]
enum StreamEnd {
    Eof { mid_record: bool },
    Io(io::Error),
    Protocol(String),
}

/// Connects with the options' timeouts, from `local` if that address can be
/// had (a reconnect keeps its source port), else from any port.
fn open(
    peer: SocketAddr,
    options: &ClientOptions,
    local: Option<SocketAddr>,
) -> io::Result<TcpStream> {
    let timeout = options.connect_timeout;
    let stream = match local.map(|l| socket::connect(peer, Some(l), timeout)) {
        Some(Ok(s)) => s,
        _ => socket::connect(peer, None, timeout)?,
    };
    stream.set_nodelay(true)?;
    // A send blocked longer than a call's timeout means the server stopped
    // reading: fail the write (and reconnect) rather than hold the send lock.
    stream.set_write_timeout((!options.timeout.is_zero()).then_some(options.timeout))?;
    // The reader wakes every tick to run retransmit timers.
    stream.set_read_timeout(Some(tick(options)))?;
    Ok(stream)
}

/// How often the reader wakes owners whose deadline passed.
fn tick(options: &ClientOptions) -> Duration {
    (options.timeout / 8).clamp(Duration::from_millis(5), Duration::from_secs(1))
}

/// Writes every request of `batch`, in order, with as few `writev` as the
/// socket allows.
fn write_batch(stream: &TcpStream, batch: &[Arc<Vec<u8>>]) -> io::Result<()> {
    let mut slices = [IoSlice::new(&[]); BATCH];
    let n = batch.len().min(BATCH);
    for (slice, request) in slices.iter_mut().zip(batch) {
        *slice = IoSlice::new(request);
    }
    let mut bufs = &mut slices[..n];
    let mut w = stream;
    while !bufs.is_empty() {
        match w.write_vectored(bufs) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(k) => IoSlice::advance_slices(&mut bufs, k),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
