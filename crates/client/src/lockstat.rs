//! Lock acquisitions of the RPC transport, counted when the `lock-stats`
//! feature is on (without it the counting compiles to nothing and
//! [`snapshot`] returns zeros).
//!
//! Every lock the transport takes is counted here, on client threads and on
//! the reader threads alike, by [`Site`]:
//! - [`Site::SendLock`]: the send lock, taken by whichever caller drains the
//!   send queue (a caller that finds it taken leaves its request queued and
//!   takes nothing);
//! - [`Site::Backlog`]: the slot backlog's mutex, taken only when every slot
//!   is in use (or a caller queued behind such a backlog);
//! - [`Site::ReadRole`]: the right to read the socket, taken by a blocking
//!   caller that reads its own reply (and delivers others met on the way),
//!   or by the reader thread; counted like a lock (it is exclusive);
//! - [`Site::Control`]: connecting, reconnecting and shutting down, which are
//!   not on the per-call path.
//!
//! Nothing else on the call path locks: the free-slot list, the reply
//! hand-off and the send queue are atomics (`crossbeam_queue::SegQueue` is
//! lock-free), waiting is an `AtomicWaker` plus thread park/unpark (futex
//! based, no mutex). Outside this count: the allocator's internal locks and
//! the kernel's socket locks.
//!
//! Typical use in a test: take a [`snapshot`] before and after a run, then
//! [`LockStats::since`] and [`LockStats::per_call`].

#[cfg(feature = "lock-stats")]
use std::sync::atomic::{AtomicU64, Ordering};

/// Where a lock was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Site {
    /// The per-connection send lock (call path).
    SendLock,
    /// The per-connection slot backlog (call path, congested only).
    Backlog,
    /// The per-connection read role (call path: a blocking caller reading).
    ReadRole,
    /// Connect, reconnect, shutdown (not per call).
    Control,
}

/// Counts since the process started (or deltas, from [`LockStats::since`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LockStats {
    /// Calls that finished (a reply, or an error after sending).
    pub calls: u64,
    /// Send-lock acquisitions.
    pub send_lock: u64,
    /// Backlog-mutex acquisitions.
    pub backlog: u64,
    /// Read-role acquisitions.
    pub read_role: u64,
    /// Control-path acquisitions (connect, reconnect, shutdown).
    pub control: u64,
}

impl LockStats {
    /// Acquisitions on the call path (send lock, backlog and read role).
    pub fn call_path(&self) -> u64 {
        self.send_lock + self.backlog + self.read_role
    }

    /// Call-path acquisitions per finished call (0 when no call finished).
    pub fn per_call(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.call_path() as f64 / self.calls as f64
        }
    }

    /// The counts accumulated between `earlier` and `self`.
    pub fn since(&self, earlier: &LockStats) -> LockStats {
        LockStats {
            calls: self.calls.saturating_sub(earlier.calls),
            send_lock: self.send_lock.saturating_sub(earlier.send_lock),
            backlog: self.backlog.saturating_sub(earlier.backlog),
            read_role: self.read_role.saturating_sub(earlier.read_role),
            control: self.control.saturating_sub(earlier.control),
        }
    }
}

/// Whether this build counts (the `lock-stats` feature).
pub fn enabled() -> bool {
    cfg!(feature = "lock-stats")
}

#[cfg(feature = "lock-stats")]
static CALLS: AtomicU64 = AtomicU64::new(0);
#[cfg(feature = "lock-stats")]
static SEND_LOCK: AtomicU64 = AtomicU64::new(0);
#[cfg(feature = "lock-stats")]
static BACKLOG: AtomicU64 = AtomicU64::new(0);
#[cfg(feature = "lock-stats")]
static READ_ROLE: AtomicU64 = AtomicU64::new(0);
#[cfg(feature = "lock-stats")]
static CONTROL: AtomicU64 = AtomicU64::new(0);

/// The counts so far (all zero without the `lock-stats` feature).
pub fn snapshot() -> LockStats {
    #[cfg(feature = "lock-stats")]
    {
        // Relaxed: statistics; a test reads them after joining its threads.
        LockStats {
            calls: CALLS.load(Ordering::Relaxed),
            send_lock: SEND_LOCK.load(Ordering::Relaxed),
            backlog: BACKLOG.load(Ordering::Relaxed),
            read_role: READ_ROLE.load(Ordering::Relaxed),
            control: CONTROL.load(Ordering::Relaxed),
        }
    }
    #[cfg(not(feature = "lock-stats"))]
    LockStats::default()
}

/// Counts one lock acquisition at `site`.
#[inline]
pub(crate) fn acquired(site: Site) {
    #[cfg(feature = "lock-stats")]
    {
        let counter = match site {
            Site::SendLock => &SEND_LOCK,
            Site::Backlog => &BACKLOG,
            Site::ReadRole => &READ_ROLE,
            Site::Control => &CONTROL,
        };
        // Relaxed: a statistic, no ordering needed.
        counter.fetch_add(1, Ordering::Relaxed);
    }
    #[cfg(not(feature = "lock-stats"))]
    let _ = site;
}

/// Counts one finished call.
#[inline]
pub(crate) fn call_finished() {
    #[cfg(feature = "lock-stats")]
    // Relaxed: a statistic.
    CALLS.fetch_add(1, Ordering::Relaxed);
}
