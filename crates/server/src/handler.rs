//! [`ServerHandler`]: what a service thread does with a connection it owns.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rnfs_rpc::{DispatchOutcome, Dispatcher, OpaqueAuth, Pace, ReplyHeader, ReplyStatus};
use rnfs_sched::{Claim, Enqueuer, Handler, Task};
use rnfs_xdr::{Encode, Writer};

use crate::config::DrcConfig;
use crate::drc::{DrcBegin, DrcKey, DrcStats, DuplicateRequestCache};
use crate::metrics::{note, CallIds, Metrics, ShardHandle};
use crate::transport::{CallPace, Connection, ReadOutcome};

/// Initial capacity of each thread's reply buffer.
const REPLY_BUFFER: usize = 4096;

scoped_tls::scoped_thread_local! {
    /// The connection whose call this thread is dispatching.
    static CALLING: Connection
}

thread_local! {
    /// Replies that [`before_blocking`] wrote during the current dispatch, to
    /// retire once it returns (where the enqueuer is at hand).
    static RETIRED_EARLY: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// For a [`Service`](rnfs_rpc::Service) about to wait (for storage, a lock, a
/// remote server) in a call it declared quick
/// ([`Service::is_quick`](rnfs_rpc::Service::is_quick)): replies held on the
/// caller's connection for this call (reply coalescing) are written now
/// instead of waiting for it. Does nothing outside a dispatch of this server,
/// and costs one uncontended lock when nothing is held.
pub fn before_blocking() {
    if CALLING.is_set() {
        CALLING.with(|conn| {
            // An error breaks the connection; the call's own reply meets it.
            if let Ok(done) = conn.flush_held() {
                RETIRED_EARLY.with(|n| n.set(n.get() + done));
            }
        });
    }
}

/// The scheduler's handler: reads one record from a connection, hands the
/// connection back, dispatches the record and sends the reply. See the
/// [`transport`](crate::transport) module docs for the protocol.
pub struct ServerHandler {
    dispatcher: Arc<Dispatcher>,
    max_in_flight: u32,
    /// [`Limits::max_output_per_conn`](crate::Limits::max_output_per_conn).
    max_output: usize,
    /// [`Limits::max_reply_hold`](crate::Limits::max_reply_hold).
    max_reply_hold: Duration,
    drc: Option<(DuplicateRequestCache, DrcConfig)>,
    metrics: Option<Arc<Metrics>>,
}

/// Per-service-thread state: a reply buffer reused across calls, and the
/// thread's statistics shard when the server has [`Metrics`].
#[derive(Debug)]
pub struct ThreadState {
    reply: Vec<u8>,
    shard: Option<ShardHandle>,
}

impl ServerHandler {
    pub(crate) fn new(
        dispatcher: Arc<Dispatcher>,
        max_in_flight: u32,
        max_output: usize,
        max_reply_hold: Duration,
        drc: Option<DrcConfig>,
        metrics: Option<Arc<Metrics>>,
    ) -> Self {
        ServerHandler {
            dispatcher,
            max_in_flight,
            max_output,
            max_reply_hold,
            drc: drc.map(|c| (DuplicateRequestCache::new(c.limits), c)),
            metrics,
        }
    }

    /// The statistics calls are counted in, if any.
    pub fn metrics(&self) -> Option<&Arc<Metrics>> {
        self.metrics.as_ref()
    }

    /// The duplicate request cache's counters, if there is one.
    pub fn drc_stats(&self) -> Option<DrcStats> {
        self.drc.as_ref().map(|(cache, _)| cache.stats())
    }

    /// The cache key of `record` if its call goes through the DRC. Reads the
    /// program, version and procedure words directly, so other calls pay no
    /// header decode.
    fn drc_key(
        &self,
        record: &[u8],
        peer: std::net::SocketAddr,
    ) -> Option<(&DuplicateRequestCache, DrcKey)> {
        let (cache, config) = self.drc.as_ref()?;
        // Not a CALL of RPC version 2: dropped or answered with an error the
        // dispatcher computes again at no cost, so not worth caching.
        let (prog, vers, proc_) = rnfs_rpc::peek_call_ids(record)?;
        if !(config.cached)(prog, vers, proc_) {
            return None;
        }
        Some((cache, DrcKey::from_call(peer, record)?))
    }

    /// The dispatcher calls are handed to.
    pub fn dispatcher(&self) -> &Arc<Dispatcher> {
        &self.dispatcher
    }

    /// Dispatches `record`, read at `read_at` (taken only with metrics), and
    /// sends the reply.
    fn process(
        &self,
        enq: &Enqueuer<Connection>,
        task: &Arc<Task<Connection>>,
        record: &[u8],
        state: &mut ThreadState,
        read_at: Option<Instant>,
    ) {
        state.reply.clear();
        let unwind = UnwindGuard {
            handler: self,
            enq,
            task,
            record,
        };
        let outcome = CALLING.set(task, || self.dispatch(record, task, state));
        unwind.defuse();
        let early = RETIRED_EARLY.with(|n| n.replace(0));
        if early > 0 {
            complete(enq, task, early);
        }
        let outcome = match outcome {
            Some(outcome) => outcome,
            None => {
                self.finish_unanswered(enq, task);
                return;
            }
        };
        let ids = match outcome {
            DispatchOutcome::Replied {
                prog, vers, proc_, ..
            } => Some(CallIds { prog, vers, proc_ }),
            _ => None,
        };
        // Taken on every path, so it never leaks into the thread's next call.
        let note = self.metrics.as_ref().map(|_| note::take());
        match outcome {
            DispatchOutcome::Dropped(reason) => {
                tracing::warn!(peer = %task.peer(), "closing connection: undecodable RPC message ({reason})");
                task.counters()
                    .closed_bad_input
                    .fetch_add(1, Ordering::Relaxed);
                complete(enq, task, 1);
                close(enq, task);
            }
            // `Replied`, and any future outcome: send whatever reply was written.
            _ if state.reply.is_empty() => self.finish_unanswered(enq, task),
            _ => match task.send_reply(&state.reply, self.pace(ids), self.max_reply_hold) {
                Ok(sent) => {
                    if let (Some(metrics), Some(shard), Some(ids), Some(read_at), Some(mut note)) =
                        (&self.metrics, &state.shard, ids, read_at, note)
                    {
                        note.reply_held = sent.held;
                        metrics.record(
                            shard,
                            task.client(),
                            ids,
                            &note,
                            &state.reply,
                            read_at.elapsed(),
                            task.peer(),
                        );
                    }
                    complete(enq, task, sent.done);
                }
                Err(e) => {
                    tracing::debug!(peer = %task.peer(), "cannot send reply, closing: {e}");
                    complete(enq, task, 1);
                    close(enq, task);
                }
            },
        }
    }

    /// Dispatches `record` (through the DRC when it applies) into
    /// `state.reply`; `None` when a duplicate of a running call is dropped.
    fn dispatch(
        &self,
        record: &[u8],
        task: &Arc<Task<Connection>>,
        state: &mut ThreadState,
    ) -> Option<DispatchOutcome> {
        Some(match self.drc_key(record, task.peer()) {
            None => self
                .dispatcher
                .dispatch(record, Some(task.peer()), &mut state.reply),
            Some((cache, key)) => match cache.begin(key) {
                DrcBegin::Run(guard) => {
                    let outcome =
                        self.dispatcher
                            .dispatch(record, Some(task.peer()), &mut state.reply);
                    if !state.reply.is_empty() {
                        guard.finish(&state.reply);
                    }
                    outcome
                }
                DrcBegin::Replay(cached) => {
                    state.reply.extend_from_slice(&cached);
                    DispatchOutcome::Replied {
                        xid: key.xid(),
                        prog: key.prog(),
                        vers: key.vers(),
                        proc_: key.proc_(),
                        status: ReplyStatus::Success,
                    }
                }
                DrcBegin::Drop => return None,
            },
        })
    }

    /// The pace of the call a reply answers, for reply coalescing (`Slow` when
    /// the call's procedure is unknown).
    fn pace(&self, ids: Option<CallIds>) -> Pace {
        if self.max_reply_hold.is_zero() {
            return Pace::Slow;
        }
        ids.map_or(Pace::Slow, |ids| {
            self.dispatcher.pace(ids.prog, ids.vers, ids.proc_)
        })
    }

    /// Ends a call that gets no reply. Replies held for it go out unless the
    /// next record lets them wait longer.
    fn finish_unanswered(&self, enq: &Enqueuer<Connection>, task: &Arc<Task<Connection>>) {
        match task.send_reply(&[], Pace::Slow, self.max_reply_hold) {
            Ok(sent) => complete(enq, task, sent.done + 1),
            Err(e) => {
                tracing::debug!(peer = %task.peer(), "cannot send reply, closing: {e}");
                complete(enq, task, 1);
                close(enq, task);
            }
        }
    }
}

impl Handler for ServerHandler {
    type Item = Connection;
    type ThreadState = ThreadState;

    fn thread_state(&self, _pool: usize) -> ThreadState {
        ThreadState {
            reply: Vec::with_capacity(REPLY_BUFFER),
            shard: self.metrics.as_ref().map(|m| m.register_thread()),
        }
    }

    fn handle(&self, claim: Claim<'_, Connection>, state: &mut ThreadState) {
        let task = Arc::clone(claim.task());
        let enq = claim.enqueuer();
        if claim.is_closing() {
            // The scheduler keeps a closing task BUSY for ever: nobody reads it again.
            task.teardown();
            return;
        }
        // Clear DATA before reading: bytes that arrive from here on re-queue the task.
        task.note_data(claim.take_data());
        if task.at_limit(self.max_in_flight, self.max_output) {
            // Back-pressure: leave the bytes in the socket. The next completed reply
            // notifies the task (see `Connection::at_limit`). Replies held for the
            // next record must go now: it is not taken until a reply completes.
            match task.release_held() {
                Ok(done) => complete(enq, &task, done),
                Err(e) => {
                    tracing::debug!(peer = %task.peer(), "cannot send reply, closing: {e}");
                    close(enq, &task);
                }
            }
            return;
        }
        let pace = |head: &[u8]| self.dispatcher.call_pace(head);
        let hold = !self.max_reply_hold.is_zero();
        match task.read_record(hold.then_some(&pace as CallPace<'_>)) {
            ReadOutcome::Record { record, more } => {
                let read_at = self.metrics.as_ref().map(|_| Instant::now());
                // `read_record` counted the call in flight. Hand the connection back
                // before processing, so another thread can read the next pipelined
                // call meanwhile.
                claim.release(more);
                self.process(enq, &task, &record, state, read_at);
            }
            // Nothing complete yet; a partial record stays in the decoder.
            ReadOutcome::Pending => {}
            // Draining: the bytes stay unread; the server closes the connection
            // once the calls in flight are answered.
            ReadOutcome::Stopped => {}
            ReadOutcome::Eof => {
                tracing::debug!(peer = %task.peer(), "connection closed by peer");
                task.teardown();
                close(enq, &task);
            }
            ReadOutcome::Bad(e) => {
                tracing::warn!(peer = %task.peer(), "closing connection: {e}");
                task.counters()
                    .closed_bad_input
                    .fetch_add(1, Ordering::Relaxed);
                task.teardown();
                close(enq, &task);
            }
            ReadOutcome::Failed(e) => {
                tracing::debug!(peer = %task.peer(), "read failed, closing: {e}");
                task.teardown();
                close(enq, &task);
            }
        }
    }
}

/// Ends a call whose dispatch unwinds (a panicking service; the scheduler
/// catches the panic and the thread goes on to other connections' calls).
/// Without it the call would stay counted in flight for ever (each panic
/// shrinking the connection's window, a drain never completing), replies held
/// for it would wait for a call that never finishes, and the replies
/// [`before_blocking`] wrote would be retired on whichever connection this
/// thread serves next. On the normal path it is [`defuse`](Self::defuse)d.
struct UnwindGuard<'a> {
    handler: &'a ServerHandler,
    enq: &'a Enqueuer<Connection>,
    task: &'a Arc<Task<Connection>>,
    record: &'a [u8],
}

impl UnwindGuard<'_> {
    /// The dispatch returned: nothing to clean up.
    fn defuse(self) {
        std::mem::forget(self);
    }
}

impl Drop for UnwindGuard<'_> {
    /// Resets this thread's per-call state, then answers the call SYSTEM_ERR
    /// (writing whatever was held with it) and retires it. Runs while
    /// unwinding, so nothing here may panic: the lock helper ignores poisoning
    /// and errors only close the connection.
    fn drop(&mut self) {
        let (enq, task) = (self.enq, self.task);
        // These replies reached the kernel from this call's connection.
        let early = RETIRED_EARLY.with(|n| n.replace(0));
        if self.handler.metrics.is_some() {
            // Unrecorded: the call has no outcome to count it under.
            let _ = note::take();
        }
        tracing::error!(peer = %task.peer(), "service panicked; answering the call SYSTEM_ERR");
        let mut reply = Vec::new();
        if let Some(xid) = self.record.first_chunk::<4>() {
            let mark = rnfs_rpc::begin_record(&mut reply);
            ReplyHeader {
                xid: u32::from_be_bytes(*xid),
                verf: OpaqueAuth::NONE,
                status: ReplyStatus::SystemErr,
            }
            .encode(&mut Writer::new(&mut reply));
            rnfs_rpc::finish_record(&mut reply, mark);
        }
        // Zero hold: held replies go now, not after a call that has failed.
        match task.send_reply(&reply, Pace::Slow, Duration::ZERO) {
            // An empty reply (no xid to answer) completes nothing itself.
            Ok(sent) => complete(enq, task, early + sent.done + u32::from(reply.is_empty())),
            Err(e) => {
                tracing::debug!(peer = %task.peer(), "cannot send reply, closing: {e}");
                complete(enq, task, early + 1);
                close(enq, task);
            }
        }
    }
}

/// Closes a connection this thread may not own: the socket at once, the rest by
/// whichever thread next owns the task (it sees `is_closing`).
pub(crate) fn close(enq: &Enqueuer<Connection>, task: &Arc<Task<Connection>>) {
    task.shutdown_socket();
    enq.close(task);
}

/// Retires `done` completed calls and resumes reading the connection if it had
/// stopped at the in-flight limit or the output cap.
pub(crate) fn complete(enq: &Enqueuer<Connection>, task: &Arc<Task<Connection>>, done: u32) {
    if task.complete(done) {
        enq.notify(task);
    }
}

impl fmt::Debug for ServerHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerHandler")
            .field("max_in_flight", &self.max_in_flight)
            .field("max_output", &self.max_output)
            .finish_non_exhaustive()
    }
}
