//! One call from reservation to reply: [`PendingCall`] (blocking) and
//! [`CallFuture`] (async) share [`CallState`], which owns the slot and the
//! request and does the retransmissions.
//!
//! The owner's loop (both flavours): register the waker, then check the slot
//! (`DONE`?), `closing`, the connection epoch (resend after a reconnect) and
//! the deadline (retransmit, same XID, or give up); then sleep until woken or
//! the deadline. Registering before checking is what makes a reply that
//! arrives between the check and the sleep wake the sleeper.

use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use rnfs_rpc::{decode_reply, ReplyStatus};
use rnfs_xdr::{DecodeError, Reader};

use crate::error::ClientError;
use crate::lockstat;

use super::conn::{Conn, ConnStats};
use super::slots::{Delivery, Reservation, Slot};
use super::sync::{park, Ordering};

/// Offset of the XID in an encoded request: after the 4-byte record mark.
const XID_AT: usize = 4;

/// A call that owns a slot and has been sent at least once.
#[derive(Debug)]
pub(crate) struct CallState {
    conn: Arc<Conn>,
    idx: u32,
    xid: u32,
    /// The encoded record, kept to retransmit it (shared with the send queue).
    request: Arc<Vec<u8>>,
    /// The connection epoch when last sent.
    sent_epoch: u64,
    /// When to retransmit (or give up).
    deadline: Instant,
    retransmits: u32,
    /// The slot has been released.
    finished: bool,
    /// The owner blocks and reads the socket itself while waiting; others
    /// ask the reader thread after each send (`lead.rs`).
    leads: bool,
    /// An async call: while a reader task runs, its sends are queued for
    /// that task to write with others in one `writev` (`reactor.rs`).
    #[cfg_attr(not(all(feature = "tokio", not(loom))), allow(dead_code))]
    is_async: bool,
    /// Counted in the connection's background calls until the slot is
    /// released (`Conn::take_background`).
    background: bool,
}

impl CallState {
    /// Starts a call in slot `idx` (already reserved) with `record` (XID 0).
    /// `leads`: the owner waits at once, blocking (and so reads itself).
    /// `is_async`: the owner is a future.
    pub(crate) fn start(
        conn: Arc<Conn>,
        idx: u32,
        mut record: Vec<u8>,
        leads: bool,
        is_async: bool,
    ) -> Self {
        let xid = match conn.slots.begin(idx) {
            Some(xid) => xid,
            None => {
                // `idx` comes from this table, so this is unreachable; fail
                // the call rather than panic.
                debug_assert!(false, "slot {idx} out of range");
                0
            }
        };
        if let Some(field) = record.get_mut(XID_AT..XID_AT + 4) {
            field.copy_from_slice(&xid.to_be_bytes());
        }
        let now = Instant::now();
        let mut call = Self {
            conn,
            idx,
            xid,
            request: Arc::new(record),
            sent_epoch: 0,
            deadline: now,
            retransmits: 0,
            finished: false,
            leads,
            is_async,
            background: false,
        };
        call.send(now);
        call
    }

    /// Marks a call that took one of the connection's background counts
    /// (`Conn::take_background`); releasing the slot gives it back.
    pub(crate) fn counted_as_background(mut self) -> Self {
        self.background = true;
        self
    }

    fn slot(&self) -> Option<&Slot> {
        self.conn.slots.slot(self.idx)
    }

    /// Sends (or resends) the request and arms the deadline.
    fn send(&mut self, now: Instant) {
        self.deadline = now + self.conn.options.timeout;
        if let Some(slot) = self.slot() {
            // Relaxed: a hint for the reader's tick.
            slot.deadline_ms
                .store(self.conn.ms_since_created(self.deadline), Ordering::Relaxed);
        }
        self.resend();
    }

    /// Sends the request again without touching the deadline.
    fn resend(&mut self) {
        // Read the epoch before queueing: if a reconnect drops the request,
        // the epoch we see later differs and we send again.
        self.sent_epoch = self.conn.epoch();
        #[cfg(all(feature = "tokio", not(loom)))]
        if self.is_async && self.conn.transmit_deferred(Arc::clone(&self.request)) {
            // The reader task writes it, and reads its reply.
            return;
        }
        self.conn.transmit(Arc::clone(&self.request));
        if !self.leads {
            self.conn.reading.ensure_reader();
        }
    }

    /// Whether the reply has arrived.
    pub(crate) fn is_ready(&self) -> bool {
        !self.finished && self.slot().is_some_and(|s| s.is_done(self.xid))
    }

    /// One turn of the owner's loop (module docs). The caller registered its
    /// waker on the slot first.
    fn poll_reply(&mut self) -> Poll<Result<Vec<u8>, ClientError>> {
        if self.finished {
            return Poll::Ready(Err(ClientError::Shutdown));
        }
        let Some(slot) = self.slot() else {
            return Poll::Ready(self.finish(None, ClientError::Shutdown));
        };
        if let Some(d) = slot.take_if_done(self.xid) {
            return Poll::Ready(self.finish(Some(d), ClientError::Shutdown));
        }
        if self.conn.is_closing() {
            let d = slot.abandon(self.xid);
            return Poll::Ready(self.finish(d, ClientError::Shutdown));
        }
        if self.conn.epoch() != self.sent_epoch {
            self.resend();
        }
        // Read the clock only now: most polls find the reply in.
        let now = Instant::now();
        if now < self.deadline {
            return Poll::Pending;
        }
        let options = &self.conn.options;
        if options.hard || self.retransmits < options.retrans {
            self.retransmits += 1;
            ConnStats::bump(&self.conn.stats.retransmits);
            self.send(now);
            return Poll::Pending;
        }
        let d = self.slot().and_then(|s| s.abandon(self.xid));
        let err = if self.conn.is_connected() {
            ClientError::TimedOut
        } else {
            self.conn.disconnected_error()
        };
        Poll::Ready(self.finish(d, err))
    }

    /// Blocks until the reply arrives or the call fails, reading the socket
    /// itself whenever the read role is free (`lead.rs`).
    fn wait_blocking(&mut self) -> Result<Vec<u8>, ClientError> {
        self.leads = true;
        loop {
            if let Some(slot) = self.slot() {
                slot.waiter.register_thread();
            }
            if let Poll::Ready(r) = self.poll_reply() {
                return r;
            }
            // Led and the stream is fine: check again at once. Otherwise
            // sleep until a reply, a baton, a reconnect or the deadline.
            if self.lead() != Some(false) {
                park(Some(self.deadline));
            }
        }
    }

    /// Takes the read role if free and reads until this call's reply, the
    /// deadline or a failure. `None`: the role was taken (our `WANT` is left
    /// for its holder); `Some(broken)`: we read, and whether the stream
    /// failed (the reader thread repairs it).
    fn lead(&self) -> Option<bool> {
        let slot = self.slot()?;
        let mut guard = self.conn.reading.try_lead(slot)?;
        let broken = self.conn.lead(&mut guard, slot, self.xid, self.deadline);
        self.conn.reading.release(guard, &self.conn.slots);
        Some(broken)
    }

    /// Releases the slot; the result is the delivery, or `otherwise` if
    /// nothing was delivered.
    fn finish(
        &mut self,
        d: Option<Delivery>,
        otherwise: ClientError,
    ) -> Result<Vec<u8>, ClientError> {
        self.finished = true;
        self.release_slot();
        lockstat::call_finished();
        ConnStats::bump(&self.conn.stats.calls);
        match d {
            Some(Delivery::Reply(record)) => Ok(record),
            Some(Delivery::Failed(e)) => Err(e),
            None => Err(otherwise),
        }
    }

    /// Gives the slot back, passing on a read baton handed to this owner.
    fn release_slot(&self) {
        let baton = self.slot().is_some_and(Slot::leave_lead);
        self.conn.slots.release(self.idx);
        if self.background {
            self.conn.give_back_background();
        }
        if baton {
            self.conn.reading.pass_on(&self.conn.slots);
        }
    }
}

impl Drop for CallState {
    fn drop(&mut self) {
        if !self.finished {
            if let Some(slot) = self.slot() {
                drop(slot.abandon(self.xid));
            }
            self.finished = true;
            self.release_slot();
        }
    }
}

/// Waits (blocking) for a slot of `conn`.
pub(crate) fn reserve_blocking(conn: &Conn) -> Result<u32, ClientError> {
    match conn.slots.reserve() {
        Reservation::Slot(idx) => Ok(idx),
        Reservation::Shutdown => Err(ClientError::Shutdown),
        Reservation::Queued(ticket) => {
            ConnStats::bump(&conn.stats.backlog_waits);
            ticket.wait_blocking().ok_or(ClientError::Shutdown)
        }
    }
}

/// Checks a reply record's header and decodes its results with `decode`.
fn decode_results<T, F>(record: &[u8], decode: F) -> Result<T, ClientError>
where
    F: FnOnce(&mut Reader<'_>) -> Result<T, DecodeError>,
{
    let reply = decode_reply(record).map_err(|e| ClientError::BadReply(e.to_string()))?;
    if reply.header.status != ReplyStatus::Success {
        return Err(ClientError::Rpc(reply.header.status));
    }
    let mut r = Reader::new(reply.results);
    decode(&mut r).map_err(|e| ClientError::BadReply(e.to_string()))
}

/// A call sent by [`RpcClient::submit`](super::RpcClient::submit) whose reply
/// has not been collected. Dropping it abandons the call (a late reply is
/// dropped).
///
/// It holds its connection slot until [`wait`](Self::wait) returns or it is
/// dropped, even after the reply arrived: a thread that holds `max_slots`
/// uncollected calls of one connection and submits another waits for ever.
/// Retransmissions (timeout, reconnect) happen inside `wait`.
#[derive(Debug)]
pub struct PendingCall {
    state: CallState,
}

impl PendingCall {
    pub(crate) fn new(state: CallState) -> Self {
        Self { state }
    }

    /// Whether the reply has arrived ([`wait`](Self::wait) will not block).
    pub fn is_ready(&self) -> bool {
        self.state.is_ready()
    }

    /// The encoded request (with this call's XID), to send it again as a
    /// new call ([`RpcClient::call_again`](super::RpcClient::call_again)).
    pub(crate) fn request(&self) -> Arc<Vec<u8>> {
        Arc::clone(&self.state.request)
    }

    /// Waits for the reply and decodes its results with `decode`.
    ///
    /// Retransmits (same XID) every `timeout`; fails with
    /// [`ClientError::TimedOut`] after `retrans` retransmissions unless
    /// `hard`, [`ClientError::Shutdown`] if the client is dropped meanwhile.
    pub fn wait<T, F>(mut self, decode: F) -> Result<T, ClientError>
    where
        F: FnOnce(&mut Reader<'_>) -> Result<T, DecodeError>,
    {
        let record = self.state.wait_blocking()?;
        let result = decode_results(&record, decode);
        self.state.conn.recycle_record(record);
        result
    }
}

#[cfg(all(feature = "async", not(loom)))]
pub use self::future::CallFuture;

#[cfg(all(feature = "async", not(loom)))]
mod future {
    use std::future::Future;
    use std::marker::PhantomData;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::task::{Context, Poll};

    use rnfs_xdr::{DecodeError, Reader};

    use crate::error::ClientError;

    use super::super::conn::{Conn, ConnStats};
    use super::super::slots::{Reservation, Ticket, TicketState};
    use super::{decode_results, CallState};

    /// The future of [`RpcClient::call_async`](super::super::RpcClient::call_async).
    ///
    /// Runtime-agnostic: it is woken by whoever reads the connection (its
    /// reader thread, or a reader task on a multi-thread tokio runtime) for
    /// a reply or a reconnect, and by the reader thread for a retransmit
    /// deadline (checked every tick), never by a timer of some runtime.
    /// Dropping it abandons the call.
    #[must_use = "a call future does nothing unless polled"]
    pub struct CallFuture<T, F> {
        stage: Stage,
        decode: Option<F>,
        _output: PhantomData<fn() -> T>,
    }

    enum Stage {
        /// Waiting in the backlog for a slot, the request already encoded.
        Queued {
            conn: Arc<Conn>,
            ticket: Arc<Ticket>,
            record: Vec<u8>,
        },
        /// Sent; waiting for the reply.
        Sent(CallState),
        /// Failed before it was sent.
        Failed(ClientError),
        /// The output was returned.
        Done,
    }

    impl<T, F> std::fmt::Debug for CallFuture<T, F> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            let stage = match &self.stage {
                Stage::Queued { .. } => "queued",
                Stage::Sent(_) => "sent",
                Stage::Failed(_) => "failed",
                Stage::Done => "done",
            };
            f.debug_struct("CallFuture")
                .field("stage", &stage)
                .finish_non_exhaustive()
        }
    }

    // `CallFuture` holds no self-references.
    impl<T, F> Unpin for CallFuture<T, F> {}

    impl<T, F> CallFuture<T, F> {
        /// Reserves a slot of `conn` without blocking and sends `record`, or
        /// queues for a slot.
        pub(crate) fn new(conn: Arc<Conn>, record: Vec<u8>, decode: F) -> Self {
            // Before the first send, so that its reply is read on this
            // runtime already (`reactor.rs`).
            #[cfg(feature = "tokio")]
            super::super::reactor::ensure_reader_task(&conn);
            let stage = match conn.slots.reserve() {
                Reservation::Slot(idx) => {
                    Stage::Sent(CallState::start(conn, idx, record, false, true))
                }
                Reservation::Queued(ticket) => {
                    ConnStats::bump(&conn.stats.backlog_waits);
                    Stage::Queued {
                        conn,
                        ticket,
                        record,
                    }
                }
                Reservation::Shutdown => Stage::Failed(ClientError::Shutdown),
            };
            Self {
                stage,
                decode: Some(decode),
                _output: PhantomData,
            }
        }
    }

    impl<T, F> Future for CallFuture<T, F>
    where
        F: FnOnce(&mut Reader<'_>) -> Result<T, DecodeError>,
    {
        type Output = Result<T, ClientError>;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            let this = self.get_mut();
            loop {
                match &mut this.stage {
                    Stage::Queued { ticket, .. } => {
                        ticket.waiter.register(cx.waker());
                        match ticket.state() {
                            TicketState::Waiting => return Poll::Pending,
                            TicketState::Shutdown => {
                                this.stage = Stage::Done;
                                return Poll::Ready(Err(ClientError::Shutdown));
                            }
                            TicketState::Granted(idx) => {
                                let Stage::Queued { conn, record, .. } =
                                    std::mem::replace(&mut this.stage, Stage::Done)
                                else {
                                    return Poll::Ready(Err(ClientError::Shutdown));
                                };
                                this.stage =
                                    Stage::Sent(CallState::start(conn, idx, record, false, true));
                            }
                        }
                    }
                    Stage::Sent(call) => {
                        #[cfg(feature = "tokio")]
                        super::super::reactor::ensure_reader_task(&call.conn);
                        if let Some(slot) = call.slot() {
                            slot.waiter.register(cx.waker());
                        }
                        let record = match call.poll_reply() {
                            Poll::Pending => return Poll::Pending,
                            Poll::Ready(r) => r,
                        };
                        let result = match (record, this.decode.take()) {
                            (Ok(record), Some(decode)) => {
                                let result = decode_results(&record, decode);
                                call.conn.recycle_record(record);
                                result
                            }
                            (Err(e), _) => Err(e),
                            (Ok(_), None) => Err(ClientError::Shutdown),
                        };
                        this.stage = Stage::Done;
                        return Poll::Ready(result);
                    }
                    Stage::Failed(_) => {
                        let Stage::Failed(e) = std::mem::replace(&mut this.stage, Stage::Done)
                        else {
                            return Poll::Ready(Err(ClientError::Shutdown));
                        };
                        return Poll::Ready(Err(e));
                    }
                    Stage::Done => return Poll::Ready(Err(ClientError::Shutdown)),
                }
            }
        }
    }

    impl<T, F> Drop for CallFuture<T, F> {
        fn drop(&mut self) {
            if let Stage::Queued { conn, ticket, .. } = &self.stage {
                if let Some(idx) = ticket.cancel() {
                    conn.slots.release(idx);
                }
            }
        }
    }
}
