//! std / loom facade: under `--cfg loom` every atomic, lock and park used by the
//! wake protocol is loom's, so the loom tests explore their interleavings.

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering},
    Condvar, Mutex, MutexGuard,
};

#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering},
    Condvar, Mutex, MutexGuard,
};

/// Locks `m`, ignoring poisoning: a panicking handler is caught in the worker
/// loop, and every structure behind our locks is left consistent between
/// statements, so a poisoned lock carries no broken invariant.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// One service thread's wake-up token. `notify` makes the token available
/// (idempotent) and wakes the thread; `wait` consumes it, blocking until it is
/// available or the timeout passes. A `notify` before `wait` is never lost.
///
/// With std: an atomic flag plus the thread's own futex (`thread::park`); the
/// release store / acquire swap makes the notifier's writes visible to the
/// woken thread. Under loom: a flag behind a mutex and a condition variable,
/// because loom 0.7's `thread::park` loses the token of the textbook
/// flag-then-unpark pattern (reproduced in a ten-line model).
#[derive(Debug)]
pub(crate) struct Parker {
    #[cfg(not(loom))]
    notified: AtomicBool,
    #[cfg(not(loom))]
    thread: std::thread::Thread,
    #[cfg(loom)]
    token: Mutex<bool>,
    #[cfg(loom)]
    cv: Condvar,
}

impl Parker {
    /// A parker for the calling thread.
    pub(crate) fn for_current_thread() -> Self {
        Parker {
            #[cfg(not(loom))]
            notified: AtomicBool::new(false),
            #[cfg(not(loom))]
            thread: std::thread::current(),
            #[cfg(loom)]
            token: Mutex::new(false),
            #[cfg(loom)]
            cv: Condvar::new(),
        }
    }

    pub(crate) fn notify(&self) {
        #[cfg(not(loom))]
        {
            self.notified.store(true, Ordering::Release);
            self.thread.unpark();
        }
        #[cfg(loom)]
        {
            *lock(&self.token) = true;
            self.cv.notify_one();
        }
    }

    /// Waits for the token; `false` if `timeout` passed first (loom has no
    /// time: a timed wait without the token times out at once).
    pub(crate) fn wait(&self, timeout: Option<std::time::Duration>) -> bool {
        #[cfg(not(loom))]
        {
            let start = timeout.map(|_| std::time::Instant::now());
            loop {
                if self.notified.swap(false, Ordering::Acquire) {
                    return true;
                }
                match (timeout, start) {
                    (Some(t), Some(s)) => {
                        let elapsed = s.elapsed();
                        if elapsed >= t {
                            return false;
                        }
                        std::thread::park_timeout(t - elapsed);
                    }
                    _ => std::thread::park(),
                }
            }
        }
        #[cfg(loom)]
        {
            let mut token = lock(&self.token);
            if timeout.is_some() && !*token {
                // The timeout fires now: loom explores this point against
                // every step of the other threads, so a wake-up that comes
                // just before or just after it are both modelled. Models ask
                // for timeouts through `PoolCtl::loom_timeouts`.
                return false;
            }
            while !*token {
                token = self.cv.wait(token).unwrap_or_else(|p| p.into_inner());
            }
            *token = false;
            true
        }
    }
}
