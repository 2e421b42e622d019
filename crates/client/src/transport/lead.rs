//! Who reads the socket (leader/follower): the read role.
//!
//! A blocking caller about to sleep first tries to take the role and read
//! the socket itself, delivering the replies of other calls on the way, until
//! its own reply arrives: at one call in flight a call costs no thread
//! switch. Callers that cannot block on the socket (async futures, calls
//! submitted but not yet waited for) rely on the connection's reader thread,
//! which takes the role when asked and gives it up as soon as a blocking
//! caller wants it.
//!
//! **Protocol.** A blocking owner sets its slot's `WANT`, then tries the role
//! ([`ReadRole::try_lead`]); if it fails it sleeps. Whoever releases the role
//! ([`ReadRole::release`]) then hands it off: it turns one `WANT` into `BATON`
//! and wakes that owner ([`SlotTable::pass_baton`]); if no owner wants it and
//! a call still waits for its reply, it asks the reader thread. The two sides
//! are a Dekker pair (store, `SeqCst` fence, load on each side): the owner
//! either gets the role or is seen by the releaser. An owner holding the
//! baton either takes the role or, if its reply came meanwhile, passes the
//! baton on ([`ReadRole::pass_on`]). A non-leading owner that sent a call
//! asks the reader thread if the role is free ([`ReadRole::ensure_reader`];
//! the same pairing with the releaser's count of waiting calls). So whenever a
//! call waits for a reply, someone reads or has been woken to.
//!
//! A broken stream is the reader thread's to repair: a release that finds
//! it broken asks the reader thread and wakes no owner.
//!
//! With the `tokio` feature, a reader task on the caller's runtime may stand
//! in for the reader thread (`reactor.rs`): while it runs, "asking the
//! reader" asks the task, except for a broken stream.

use crate::lockstat::Site;

use super::slots::{Slot, SlotTable};
use super::sync::{fence, AtomicBool, Ordering, TryLock, TryLockGuard, Waiter};

/// What the role guards: the reading end of the connection.
pub(crate) trait ReadSide {
    /// Whether only the reader thread can make progress (the stream failed
    /// or is being replaced).
    fn needs_reader(&mut self) -> bool;
}

/// The read role of one connection and the reader thread's wake-up.
#[derive(Debug)]
pub(crate) struct ReadRole<S> {
    side: TryLock<S>,
    /// The reader thread is asked to take the role. Set before waking it.
    reader_wanted: AtomicBool,
    /// The reader thread's registration.
    reader: Waiter,
    /// The reader task standing in for the reader thread, if one runs.
    #[cfg(all(feature = "tokio", not(loom)))]
    async_reader: super::reactor::AsyncReader,
}

impl<S: ReadSide> ReadRole<S> {
    pub(crate) fn new(side: S) -> Self {
        Self {
            side: TryLock::new(side),
            reader_wanted: AtomicBool::new(false),
            reader: Waiter::new(),
            #[cfg(all(feature = "tokio", not(loom)))]
            async_reader: super::reactor::AsyncReader::default(),
        }
    }

    /// A blocking owner of `slot` about to sleep: takes the role if it is
    /// free, else leaves its `WANT` for the holder's hand-off.
    pub(crate) fn try_lead(&self, slot: &Slot) -> Option<TryLockGuard<'_, S>> {
        slot.want_lead();
        // SeqCst fence: `WANT` is visible before we look at the role; pairs
        // with the fence in `release`.
        fence(Ordering::SeqCst);
        let g = self.side.try_lock(Site::ReadRole)?;
        slot.clear_lead();
        Some(g)
    }

    /// Takes the role without asking for a hand-off (the reader thread, and
    /// an owner passing a baton on).
    pub(crate) fn try_take(&self) -> Option<TryLockGuard<'_, S>> {
        self.side.try_lock(Site::ReadRole)
    }

    /// Gives the role up and hands it off (module docs).
    pub(crate) fn release(&self, mut guard: TryLockGuard<'_, S>, slots: &SlotTable) {
        let broken = guard.with(ReadSide::needs_reader);
        drop(guard);
        // SeqCst fence: our release is visible before we look for `WANT`s and
        // waiting slots; pairs with `try_lead` and `ensure_reader`.
        fence(Ordering::SeqCst);
        // A broken stream is the reader thread's; otherwise one willing
        // owner, else the reader if a call still waits.
        if broken {
            self.wake_thread();
        } else if !slots.pass_baton() && slots.any_waiting() {
            self.wake_reader();
        }
    }

    /// An owner that was handed the baton but no longer needs to read: makes
    /// sure someone reads. If the role is taken, its holder hands off.
    pub(crate) fn pass_on(&self, slots: &SlotTable) {
        if let Some(g) = self.try_take() {
            self.release(g, slots);
        }
    }

    /// A call was sent by an owner that will not read: asks the reader
    /// thread unless someone holds the role (who hands off on release).
    pub(crate) fn ensure_reader(&self) {
        // SeqCst fence: the slot's `WAITING` is visible before we look at
        // the role; pairs with the fence in `release`.
        fence(Ordering::SeqCst);
        if !self.side.is_locked() {
            self.wake_reader();
        }
    }

    /// Asks the reader to take the role: the reader task if one runs, else
    /// the reader thread.
    pub(crate) fn wake_reader(&self) {
        #[cfg(all(feature = "tokio", not(loom)))]
        if self.async_reader.wake() {
            return;
        }
        self.wake_thread();
    }

    /// Asks the reader thread to take the role.
    pub(crate) fn wake_thread(&self) {
        // SeqCst: read by the reader after registering (register / check /
        // sleep, as every waiter here). A swap, not a store: the same
        // instruction on x86, and loom 0.7 mis-orders SeqCst stores against
        // the reader's swap (false deadlocks).
        self.reader_wanted.swap(true, Ordering::SeqCst);
        self.reader.wake();
    }

    /// The reader task's registration.
    #[cfg(all(feature = "tokio", not(loom)))]
    pub(crate) fn async_reader(&self) -> &super::reactor::AsyncReader {
        &self.async_reader
    }

    /// Whether a reader task stands in for the reader thread.
    pub(crate) fn async_active(&self) -> bool {
        self.async_polls().is_some()
    }

    /// The reader task's heartbeat, if one runs (`Conn::reader_main`'s
    /// watchdog).
    pub(crate) fn async_polls(&self) -> Option<u64> {
        #[cfg(all(feature = "tokio", not(loom)))]
        return self
            .async_reader
            .is_active()
            .then(|| self.async_reader.polls());
        #[cfg(not(all(feature = "tokio", not(loom))))]
        None
    }

    /// The reader task ended: asks the reader thread if a call waits.
    #[cfg(all(feature = "tokio", not(loom)))]
    pub(crate) fn retire_async_reader(&self, slots: &SlotTable) {
        self.async_reader.retire();
        if slots.any_waiting() {
            self.wake_thread();
        }
    }

    /// Reader thread: registers for [`wake_reader`](Self::wake_reader).
    pub(crate) fn reader_register(&self) {
        self.reader.register_thread();
    }

    /// Reader thread: whether it was asked to read (clears the request).
    pub(crate) fn reader_asked(&self) -> bool {
        self.reader_wanted.swap(false, Ordering::SeqCst)
    }
}
