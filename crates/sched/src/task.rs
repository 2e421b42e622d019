//! A schedulable transport and its flag word (Linux `svc_xprt`'s `xpt_flags`).
//!
//! Rules (as in the comment at the top of Linux `svc_xprt.c`):
//! - `BUSY` is set only by whoever wins the `fetch_or` in [`Task::mark_data`]
//!   or [`Task::mark_close`], and cleared only by [`Task::release`]. Its owner
//!   is the one thread allowed to read the transport, and the only one that may
//!   put the task on a pending queue; so a task is queued at most once.
//! - `DATA` may be set by anyone at any time; the owner clears it before
//!   reading (`take_data`), so data that arrives during the read re-queues it.
//! - `CLOSE` is set once and never cleared; a closing task keeps `BUSY` for ever.
//!
//! All three live in one atomic word, so the "set DATA / test BUSY" of a
//! producer and the "test DATA / clear BUSY" of the owner are read-modify-writes
//! on a single location: they are totally ordered and no wake-up can be lost.

use std::fmt;
use std::ops::Deref;
use std::ptr;

use crate::sync::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

const BUSY: u32 = 1 << 0;
const DATA: u32 = 1 << 1;
const CLOSE: u32 = 1 << 2;

/// A transport (or any source of work) known to the scheduler. `T` is the
/// caller's payload, reached through `Deref`.
pub struct Task<T> {
    flags: AtomicU32,
    /// Next task in an lwq chain. Written by the single owner before the task
    /// is published with a release CAS, read by consumers after an acquire swap.
    pub(crate) next: AtomicPtr<Task<T>>,
    /// Nanoseconds since the scheduler's epoch when the task was last queued;
    /// written by the queuer before publishing (so ordered by the queue).
    pub(crate) enqueued_at: AtomicU64,
    pool: usize,
    item: T,
}

/// What a producer's `mark_*` call decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Marked {
    /// The caller won `BUSY` and must queue the task.
    MustQueue,
    /// Another thread owns the task; it will see the flag when it releases.
    OwnerWillSee,
}

/// What releasing ownership decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Released {
    /// `BUSY` is cleared; the task is idle.
    Idle,
    /// Work arrived (or remains): the caller still owns `BUSY` and must re-queue.
    MustRequeue,
}

impl<T> Task<T> {
    pub(crate) fn new(item: T, pool: usize) -> Self {
        Task {
            flags: AtomicU32::new(0),
            next: AtomicPtr::new(ptr::null_mut()),
            enqueued_at: AtomicU64::new(0),
            pool,
            item,
        }
    }

    /// The pool this task is queued on.
    pub fn pool(&self) -> usize {
        self.pool
    }

    /// The payload.
    pub fn item(&self) -> &T {
        &self.item
    }

    /// Whether the task has been asked to close.
    pub fn is_closing(&self) -> bool {
        // Acquire: pairs with the AcqRel `fetch_or(CLOSE)` so the closer's
        // earlier writes are visible to whoever acts on the flag.
        self.flags.load(Ordering::Acquire) & CLOSE != 0
    }

    /// Whether a service thread owns the task right now (tests, stats).
    pub fn is_busy(&self) -> bool {
        self.flags.load(Ordering::Acquire) & BUSY != 0
    }

    /// `(busy, data)`, for invariant checks in tests.
    #[cfg(all(test, loom))]
    pub(crate) fn busy_and_data(&self) -> (bool, bool) {
        let f = self.flags.load(Ordering::SeqCst);
        (f & BUSY != 0, f & DATA != 0)
    }

    /// Sets `DATA`; takes `BUSY` if nobody holds it.
    pub(crate) fn mark_data(&self) -> Marked {
        // AcqRel: acquire the previous owner's release (its transport writes),
        // release ours to whoever dequeues the task next.
        Self::decide(self.flags.fetch_or(DATA | BUSY, Ordering::AcqRel))
    }

    /// Sets `CLOSE`; takes `BUSY` if nobody holds it.
    pub(crate) fn mark_close(&self) -> Marked {
        Self::decide(self.flags.fetch_or(CLOSE | BUSY, Ordering::AcqRel))
    }

    fn decide(previous: u32) -> Marked {
        if previous & BUSY == 0 {
            Marked::MustQueue
        } else {
            Marked::OwnerWillSee
        }
    }

    /// Clears `DATA`, returning whether it was set. Owner only, before reading.
    pub(crate) fn take_data(&self) -> bool {
        self.flags.fetch_and(!DATA, Ordering::AcqRel) & DATA != 0
    }

    /// Gives up `BUSY` unless work is flagged (`DATA`, `CLOSE`) or `more` says
    /// the owner already holds buffered work. Owner only.
    pub(crate) fn release(&self, more: bool) -> Released {
        if more {
            return Released::MustRequeue;
        }
        let mut current = self.flags.load(Ordering::Acquire);
        loop {
            if current & (DATA | CLOSE) != 0 {
                return Released::MustRequeue;
            }
            // Release: the next owner (via a producer's AcqRel fetch_or) sees
            // everything we did to the transport while we held BUSY.
            match self.flags.compare_exchange_weak(
                current,
                current & !BUSY,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Released::Idle,
                Err(actual) => current = actual,
            }
        }
    }
}

impl<T> Deref for Task<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.item
    }
}

impl<T: fmt::Debug> fmt::Debug for Task<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let flags = self.flags.load(Ordering::Relaxed);
        f.debug_struct("Task")
            .field("pool", &self.pool)
            .field("busy", &(flags & BUSY != 0))
            .field("data", &(flags & DATA != 0))
            .field("close", &(flags & CLOSE != 0))
            .field("item", &self.item)
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn first_marker_wins_busy_and_owner_sees_later_data() {
        let t = Task::new((), 0);
        assert_eq!(t.mark_data(), Marked::MustQueue);
        assert_eq!(t.mark_data(), Marked::OwnerWillSee);
        assert!(t.take_data());
        assert!(!t.take_data());
        assert_eq!(t.release(false), Released::Idle);
        assert!(!t.is_busy());
    }

    #[test]
    fn data_arriving_while_owned_forces_requeue() {
        let t = Task::new((), 0);
        assert_eq!(t.mark_data(), Marked::MustQueue);
        assert!(t.take_data());
        assert_eq!(t.mark_data(), Marked::OwnerWillSee);
        assert_eq!(t.release(false), Released::MustRequeue);
        assert!(t.is_busy());
    }

    #[test]
    fn close_keeps_requeueing_and_never_clears() {
        let t = Task::new((), 0);
        assert_eq!(t.mark_close(), Marked::MustQueue);
        assert!(t.is_closing());
        assert_eq!(t.release(false), Released::MustRequeue);
        assert_eq!(t.mark_data(), Marked::OwnerWillSee);
    }

    #[test]
    fn more_requeues_without_touching_flags() {
        let t = Task::new(7u32, 3);
        assert_eq!(t.mark_data(), Marked::MustQueue);
        assert!(t.take_data());
        assert_eq!(t.release(true), Released::MustRequeue);
        assert_eq!(*t, 7);
        assert_eq!(t.pool(), 3);
    }
}
