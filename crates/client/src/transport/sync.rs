//! std / loom facade for the transport's synchronisation, plus the three
//! primitives built on it:
//!
//! - [`UnsafeCell`]: loom's closure API over std's cell, so the slot's reply
//!   hand-off is checked by loom for data races;
//! - [`Waiter`] and [`park()`]: one wake-up registration per slot or backlog
//!   ticket. With std it is an [`atomic_waker::AtomicWaker`] (lock-free) woken
//!   by a thread's unpark or an async task's waker. Under loom it is a mutex
//!   and condition variable token, because loom 0.7's `thread::park` loses the
//!   token of the flag-then-unpark pattern (see `rnfs-sched`'s `Parker`);
//! - [`TryLock`]: the send lock and the read role. Never waited on: a sender that loses it
//!   leaves its request in the queue for the holder to send.
//!
//! Every lock taken here is reported to [`crate::lockstat`].

use crate::lockstat::{self, Site};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};

pub(crate) use park::{park, Waiter};

/// Locks `m` and counts the acquisition at `site`. Poisoning is ignored: no
/// structure behind our locks is left half-updated by a panic (the critical
/// sections only push, pop and store).
pub(crate) fn lock<T>(m: &Mutex<T>, site: Site) -> MutexGuard<'_, T> {
    lockstat::acquired(site);
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Lets another thread run while waiting for a state that lasts a few
/// instructions (a reply being stored into its slot).
pub(crate) fn spin_wait() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::thread::yield_now();
}

/// An `UnsafeCell` with loom's closure-based API.
#[derive(Debug)]
pub(crate) struct UnsafeCell<T> {
    #[cfg(loom)]
    inner: loom::cell::UnsafeCell<T>,
    #[cfg(not(loom))]
    inner: std::cell::UnsafeCell<T>,
}

impl<T> UnsafeCell<T> {
    pub(crate) fn new(value: T) -> Self {
        Self {
            #[cfg(loom)]
            inner: loom::cell::UnsafeCell::new(value),
            #[cfg(not(loom))]
            inner: std::cell::UnsafeCell::new(value),
        }
    }

    /// Runs `f` with a pointer to the value; the caller's protocol must make
    /// the access exclusive for writes (see each call site's `SAFETY`).
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        #[cfg(loom)]
        {
            self.inner.with_mut(f)
        }
        #[cfg(not(loom))]
        {
            f(self.inner.get())
        }
    }
}

/// A lock that is only ever tried, never waited for (the send lock, Linux's
/// `XPRT_LOCKED`). Waiting for it is the reconnect path's business
/// ([`TryLock::lock_spinning`]), never a caller's.
#[derive(Debug)]
pub(crate) struct TryLock<T> {
    /// Set by the holder. Acquire on taking / Release on dropping the guard
    /// order the holder's accesses to `value` after the previous holder's.
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: `value` is only reached through a `TryLockGuard`, and at most one
// guard exists at a time (the `locked` swap), so sharing the lock between
// threads gives one thread at a time `&mut T`: exactly `Mutex<T>`'s contract.
#[allow(unsafe_code)]
unsafe impl<T: Send> Sync for TryLock<T> {}

impl<T> TryLock<T> {
    pub(crate) fn new(value: T) -> Self {
        Self {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Takes the lock if it is free (counted at `site`).
    pub(crate) fn try_lock(&self, site: Site) -> Option<TryLockGuard<'_, T>> {
        // Acquire: see everything the previous holder did before releasing.
        // A failed attempt writes nothing (a CAS, not a swap).
        if self
            .locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return None;
        }
        lockstat::acquired(site);
        Some(TryLockGuard { lock: self })
    }

    /// Whether someone holds the lock now (a snapshot; see `lead.rs` for the
    /// fence that makes it useful).
    pub(crate) fn is_locked(&self) -> bool {
        self.locked.load(Ordering::SeqCst)
    }

    /// Takes the lock, yielding until the holder (a sender in a bounded
    /// write) lets go. For the reconnect and shutdown paths only.
    pub(crate) fn lock_spinning(&self, site: Site) -> TryLockGuard<'_, T> {
        loop {
            if let Some(g) = self.try_lock(site) {
                return g;
            }
            spin_wait();
        }
    }
}

/// Exclusive access to a [`TryLock`]'s value; released on drop.
#[derive(Debug)]
pub(crate) struct TryLockGuard<'a, T> {
    lock: &'a TryLock<T>,
}

impl<T> TryLockGuard<'_, T> {
    /// Runs `f` on the guarded value.
    pub(crate) fn with<R>(&mut self, f: impl FnOnce(&mut T) -> R) -> R {
        #[allow(unsafe_code)]
        self.lock.value.with_mut(|p| {
            // SAFETY: this guard is the only one (see `TryLock`'s `Sync`), and
            // `&mut self` keeps the reference from escaping the closure or
            // being taken twice.
            f(unsafe { &mut *p })
        })
    }
}

impl<T> Drop for TryLockGuard<'_, T> {
    fn drop(&mut self) {
        // Release: publish this holder's writes to the next holder.
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(not(loom))]
mod park {
    use std::sync::Arc;
    use std::task::{Wake, Waker};
    use std::thread::{self, Thread};
    use std::time::Instant;

    use atomic_waker::AtomicWaker;

    /// One wake-up registration: whoever waits registers, then re-checks its
    /// condition, then sleeps; whoever changes the condition then calls
    /// [`wake`](Self::wake). `AtomicWaker` guarantees that a wake racing with
    /// a registration wakes the newly registered waker, so no wake-up is lost.
    #[derive(Debug, Default)]
    pub(crate) struct Waiter(AtomicWaker);

    struct ThreadWake(Thread);

    impl Wake for ThreadWake {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.unpark();
        }
    }

    thread_local! {
        /// This thread's waker (one allocation per thread, not per call).
        static THREAD_WAKER: Waker = Waker::from(Arc::new(ThreadWake(thread::current())));
    }

    impl Waiter {
        pub(crate) fn new() -> Self {
            Self(AtomicWaker::new())
        }

        /// The calling thread will be unparked by the next [`wake`](Self::wake).
        pub(crate) fn register_thread(&self) {
            THREAD_WAKER.with(|w| self.0.register(w));
        }

        /// `waker` will be woken by the next [`wake`](Self::wake).
        #[cfg(feature = "async")]
        pub(crate) fn register(&self, waker: &Waker) {
            self.0.register(waker);
        }

        /// Wakes the registered thread or task (consumes the registration).
        pub(crate) fn wake(&self) {
            self.0.wake();
        }
    }

    /// Blocks the calling thread until it is unparked or `deadline` passes.
    /// May return early (stale unpark tokens): callers re-check and loop.
    pub(crate) fn park(deadline: Option<Instant>) {
        match deadline {
            Some(d) => {
                let now = Instant::now();
                if d > now {
                    thread::park_timeout(d - now);
                }
            }
            None => thread::park(),
        }
    }
}

#[cfg(loom)]
mod park {
    use std::sync::Arc;
    use std::time::Instant;

    use loom::sync::{Condvar, Mutex};

    /// A thread's wake-up token (mutex + condition variable under loom).
    #[derive(Debug, Default)]
    struct Token {
        set: Mutex<bool>,
        cv: Condvar,
    }

    loom::thread_local! {
        static TOKEN: Arc<Token> = Arc::new(Token::default());
    }

    /// See the std version: the same register / re-check / sleep contract.
    #[derive(Debug, Default)]
    pub(crate) struct Waiter(Mutex<Option<Arc<Token>>>);

    impl Waiter {
        pub(crate) fn new() -> Self {
            Self::default()
        }

        pub(crate) fn register_thread(&self) {
            let token = TOKEN.with(Arc::clone);
            *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(token);
        }

        pub(crate) fn wake(&self) {
            let token = self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(t) = token {
                *t.set.lock().unwrap_or_else(|p| p.into_inner()) = true;
                t.cv.notify_one();
            }
        }
    }

    /// Waits for this thread's token (loom has no clock: no timeout).
    pub(crate) fn park(_deadline: Option<Instant>) {
        TOKEN.with(|t| {
            let mut set = t.set.lock().unwrap_or_else(|p| p.into_inner());
            while !*set {
                set = t.cv.wait(set).unwrap_or_else(|p| p.into_inner());
            }
            *set = false;
        });
    }
}
