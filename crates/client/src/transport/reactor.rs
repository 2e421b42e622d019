//! The async fast path on tokio: a connection's replies read by a task of
//! the caller's runtime, woken by that runtime's reactor.
//!
//! Without it, an async call's reply crosses threads: the connection's
//! reader thread reads it and wakes the task, a futex wake and a context
//! switch per reply (or per batch). With it, the runtime's own worker waits
//! in `epoll` for the socket, reads the replies and wakes the calls' tasks
//! on the same thread: the shape of libnfs's event loop.
//!
//! **Who reads.** The task is one more reader under the read role
//! (`lead.rs`): it takes the role only to read, never holds it across a
//! poll, and while it runs it is the one [`ReadRole::wake_reader`] asks in
//! place of the reader thread. The reader thread keeps reconnecting (a
//! broken stream is still its own), the retransmit timers, and a watchdog
//! (`Conn::reader_main`): if calls wait and the task has not run for a whole
//! tick (its runtime's workers all blocked), the thread reads for a tick.
//!
//! **Parked.** After a read found the socket empty the task registers with
//! the reactor (`AsyncFd::poll_read_ready`), sets `parked`, then releases
//! the role. While `parked`, asking it is a no-op: any byte that arrives
//! after the registration wakes it through the reactor. `parked` is cleared
//! at the start of every poll and when a new socket is installed (the
//! registration is for the old one).
//!
//! **Writes.** After a batch of replies the task sets `flush_pending` and
//! wakes itself: tokio runs it again after the tasks those replies woke.
//! Their next calls, seeing `flush_pending`, queue their requests instead of
//! writing them, and the task's next poll writes them all in one `writev`.
//! Otherwise a call writes its own request, at once.
//!
//! **Which runtimes.** Multi-thread runtimes only: their workers run for as
//! long as the runtime exists. A current-thread runtime runs only inside
//! `block_on`, and calls polled elsewhere would wait on a task nobody runs.
//! The task is started by the first async call polled on such a runtime and
//! ends with the client (`close`) or the runtime; on the end it hands the
//! reading back to the reader thread ([`AsyncReader::retire`]). If the
//! runtime cannot watch the socket (no I/O driver), the fast path is turned
//! off for the connection (a runtime built without `enable_io` makes the
//! registration panic; the task ends with the panic, once).
//!
//! [`ReadRole::wake_reader`]: super::lead::ReadRole::wake_reader

use std::future::Future;
use std::net::TcpStream;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use atomic_waker::AtomicWaker;
use tokio::io::unix::AsyncFd;
use tokio::runtime::{Handle, RuntimeFlavor};

use super::conn::Conn;
use super::sync::{fence, AtomicBool, AtomicU64, Ordering};

/// Reads (each a `recv` that found data) in one poll of the task before it
/// yields to the other tasks of its worker.
const READ_BUDGET: u32 = 32;

/// The reader task's registration with its connection.
#[derive(Debug, Default)]
pub(crate) struct AsyncReader {
    /// A task runs. SeqCst: a Dekker pair with the calls' `WAITING` (the
    /// waker loads it after storing `WAITING`; `retire` stores it, then loads
    /// the count of waiting calls).
    active: AtomicBool,
    /// The task is registered with the reactor for the current socket and
    /// knows of no unread data (module docs). SeqCst, like `active`.
    parked: AtomicBool,
    /// The fast path failed on this connection (no I/O driver): not tried
    /// again. Relaxed: a hint; a stale read only starts a task that ends.
    disabled: AtomicBool,
    /// The task delivered replies and will run again after the tasks they
    /// woke: their calls' requests are queued for it to write in one
    /// `writev`. SeqCst: a Dekker pair with `Conn::transmit_deferred` (the
    /// task clears it, fences, then drains the queue; a caller pushes,
    /// fences, then loads it).
    flush_pending: AtomicBool,
    /// The task's waker.
    waker: AtomicWaker,
    /// Polls of the task. Relaxed: the watchdog's heartbeat, compared a tick
    /// apart.
    polls: AtomicU64,
}

impl AsyncReader {
    /// Whether a reader task runs.
    pub(crate) fn is_active(&self) -> bool {
        self.active.load(Ordering::SeqCst)
    }

    /// Asks the task to read. `false` if no task runs (the caller asks the
    /// reader thread instead).
    pub(crate) fn wake(&self) -> bool {
        if !self.active.load(Ordering::SeqCst) {
            return false;
        }
        if !self.parked.load(Ordering::SeqCst) {
            self.waker.wake();
        }
        true
    }

    /// Whether a request queued now will be written by the task's next poll.
    pub(crate) fn flush_pending(&self) -> bool {
        self.is_active() && self.flush_pending.load(Ordering::SeqCst)
    }

    /// The task is about to drain the send queue (or is gone): a request
    /// queued from now on must be written by its caller.
    fn flushing(&self) {
        self.flush_pending.store(false, Ordering::SeqCst);
        // SeqCst fence: cleared before the caller drains the queue.
        fence(Ordering::SeqCst);
    }

    /// Wakes the task even if parked: its registration is for an old socket,
    /// or the client is closing.
    pub(crate) fn wake_unparked(&self) {
        self.parked.store(false, Ordering::SeqCst);
        self.waker.wake();
    }

    /// Runs `register`, which panics on a runtime without an I/O driver,
    /// with the fast path marked off meanwhile: a panic (which ends the task)
    /// leaves it off for this connection.
    pub(crate) fn registering<T>(&self, register: impl FnOnce() -> T) -> T {
        // Relaxed: see `disabled`.
        self.disabled.store(true, Ordering::Relaxed);
        let r = register();
        self.disabled.store(false, Ordering::Relaxed);
        r
    }

    /// The watchdog's heartbeat.
    pub(crate) fn polls(&self) -> u64 {
        self.polls.load(Ordering::Relaxed)
    }
}

/// Starts a reader task for `conn` if the caller runs on a multi-thread
/// tokio runtime and none runs yet.
pub(crate) fn ensure_reader_task(conn: &Arc<Conn>) {
    let ar = conn.reading.async_reader();
    // Relaxed: `compare_exchange` below decides; this only skips the
    // runtime lookup on the common path.
    if !conn.options.runtime_reader
        || ar.active.load(Ordering::Relaxed)
        || ar.disabled.load(Ordering::Relaxed)
    {
        return;
    }
    let Ok(handle) = Handle::try_current() else {
        return;
    };
    if !matches!(handle.runtime_flavor(), RuntimeFlavor::MultiThread) || conn.is_closing() {
        return;
    }
    // SeqCst: see `active`. Only the winner spawns.
    if ar
        .active
        .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return;
    }
    drop(handle.spawn(ReaderTask {
        conn: Arc::clone(conn),
        watched: None,
    }));
}

/// What one stint under the read role ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stint {
    /// The socket is empty and the task is registered with the reactor.
    Parked,
    /// The read budget is spent: yield, then read on.
    Yield,
    /// A blocking caller wants the role.
    HandOff,
    /// The stream failed: the reader thread repairs it.
    Broken,
    /// The runtime cannot watch the socket.
    Unusable,
}

/// The socket the task watches, as of connection epoch `epoch`.
#[derive(Debug)]
pub(crate) struct Watched {
    pub(crate) epoch: u64,
    pub(crate) fd: AsyncFd<TcpStream>,
}

/// The per-connection reader task (module docs).
#[derive(Debug)]
struct ReaderTask {
    conn: Arc<Conn>,
    watched: Option<Watched>,
}

impl Future for ReaderTask {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let conn = &*this.conn;
        let ar = conn.reading.async_reader();
        ar.polls.fetch_add(1, Ordering::Relaxed);
        ar.parked.store(false, Ordering::SeqCst);
        ar.waker.register(cx.waker());
        if conn.is_closing() {
            return Poll::Ready(());
        }
        // The requests the async calls queued since our last poll, in one
        // `writev` (module docs).
        ar.flushing();
        conn.kick_if_queued();
        // Nothing to read on the socket we watch: stay registered with the
        // reactor without taking the role.
        if let Some(w) = &this.watched {
            if w.epoch == conn.epoch() && w.fd.poll_read_ready(cx).is_pending() {
                ar.parked.store(true, Ordering::SeqCst);
                return Poll::Pending;
            }
        }
        // SeqCst fence: our registration is visible before we try the role;
        // pairs with the fence in `ReadRole::release` (a holder we lose to
        // sees the waiting calls and wakes us).
        fence(Ordering::SeqCst);
        let Some(mut guard) = conn.reading.try_take() else {
            return Poll::Pending;
        };
        let mut budget = READ_BUDGET;
        let stint = guard.with(|st| conn.read_async(st, &mut this.watched, cx, &mut budget));
        if stint == Stint::Parked {
            // Before the release: a waker that sees the role free and
            // `parked` relies on the reactor (module docs).
            ar.parked.store(true, Ordering::SeqCst);
        }
        conn.reading.release(guard, &conn.slots);
        if budget < READ_BUDGET {
            // Replies were delivered: the tasks they woke queue their next
            // calls. Polled again after them, we write those together.
            ar.flush_pending.store(true, Ordering::SeqCst);
            cx.waker().wake_by_ref();
        }
        match stint {
            Stint::Parked | Stint::HandOff | Stint::Broken => Poll::Pending,
            Stint::Yield => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            Stint::Unusable => {
                // Relaxed: see `disabled`.
                ar.disabled.store(true, Ordering::Relaxed);
                Poll::Ready(())
            }
        }
    }
}

impl Drop for ReaderTask {
    fn drop(&mut self) {
        // The runtime or the client ended: the reader thread reads again,
        // and requests still queued for us are written now.
        self.conn.reading.retire_async_reader(&self.conn.slots);
        self.conn.kick();
    }
}

impl AsyncReader {
    /// The task ended: it is no longer asked. The caller then asks the
    /// reader thread if a call waits.
    pub(crate) fn retire(&self) {
        self.flushing();
        self.parked.store(false, Ordering::SeqCst);
        // SeqCst, then a SeqCst fence before the caller loads the count of
        // waiting calls: see `active`.
        self.active.store(false, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }
}
