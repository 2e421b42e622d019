//! Transport counters. All but one are statistics only: relaxed atomics that order
//! nothing, updated on rare events (accept, close, back-pressure), never once per
//! call, so they add no shared cache-line write to the hot path. The exception is
//! [`InFlight`], the server-wide count of calls in flight, which a drain waits on:
//! one add and one subtract per call, on a cache line of its own.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Instant;

use crossbeam_utils::CachePadded;

/// A snapshot of the transport counters, from [`Server::stats`](crate::Server::stats).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerStats {
    /// Connections open now (accepted and not yet dropped).
    pub connections: u64,
    /// Connections accepted since start, including rejected ones.
    pub accepted: u64,
    /// Connections closed at once because `max_connections` was reached.
    pub rejected: u64,
    /// Connections closed because of bad input (oversized or undecodable records).
    pub closed_bad_input: u64,
    /// Connections closed after `conn_idle_timeout` without a call.
    pub closed_idle: u64,
    /// Times a connection reached `max_in_flight_per_conn` or
    /// `max_output_per_conn` and reading it stopped.
    pub throttled: u64,
    /// Largest number of calls in flight seen on any one connection.
    pub peak_in_flight: u32,
    /// Calls in flight now, server-wide: read off a connection and not yet
    /// answered (reply not yet handed to the kernel).
    pub in_flight: u64,
    /// Largest output buffer (bytes of replies the socket would not take yet) seen
    /// on any one connection.
    pub peak_output_buffered: u64,
}

/// The live counters behind [`ServerStats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Incremented by the acceptor for each admitted connection, decremented when a
    /// [`Connection`](crate::Connection) (or a connection rejected before becoming
    /// one) is dropped. The acceptor compares it with `max_connections`; being a
    /// little stale there only admits or rejects one connection early.
    pub(crate) connections: AtomicUsize,
    pub(crate) accepted: AtomicU64,
    pub(crate) rejected: AtomicU64,
    pub(crate) closed_bad_input: AtomicU64,
    pub(crate) closed_idle: AtomicU64,
    pub(crate) throttled: AtomicU64,
    pub(crate) peak_in_flight: AtomicU32,
    pub(crate) peak_output_buffered: AtomicU64,
    /// Calls in flight server-wide; see [`InFlight`].
    pub(crate) in_flight: InFlight,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> ServerStats {
        ServerStats {
            connections: self.connections.load(Relaxed) as u64,
            accepted: self.accepted.load(Relaxed),
            rejected: self.rejected.load(Relaxed),
            closed_bad_input: self.closed_bad_input.load(Relaxed),
            closed_idle: self.closed_idle.load(Relaxed),
            throttled: self.throttled.load(Relaxed),
            peak_in_flight: self.peak_in_flight.load(Relaxed),
            in_flight: self.in_flight.get(),
            peak_output_buffered: self.peak_output_buffered.load(Relaxed),
        }
    }

    /// Raises `peak_in_flight` to `v`. Reads first so the common case (no new peak)
    /// writes nothing shared.
    pub(crate) fn note_in_flight(&self, v: u32) {
        if v > self.peak_in_flight.load(Relaxed) {
            self.peak_in_flight.fetch_max(v, Relaxed);
        }
    }

    /// Raises `peak_output_buffered` to `v` (called only when replies are buffered).
    pub(crate) fn note_output_buffered(&self, v: usize) {
        let v = v as u64;
        if v > self.peak_output_buffered.load(Relaxed) {
            self.peak_output_buffered.fetch_max(v, Relaxed);
        }
    }
}

/// The server-wide count of calls in flight: from the moment a record is taken
/// off a connection (`Connection::begin_call`) to the moment its reply is handed
/// to the kernel, or the call is dropped (`Connection::complete`). Replies of a
/// connection dropped with replies still buffered are retired when it is dropped,
/// so the count is always the sum of the live connections' own counts.
///
/// A drain stops reading, then [`InFlight::wait_zero`] sleeps on a condvar until
/// the count reaches zero; the completer that brings it there wakes it.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    /// The count. Written once up and once down per call by many threads, so it
    /// has a cache line of its own (the other counters are read on every call).
    count: CachePadded<AtomicU64>,
    /// "A drain waits for zero": set by [`InFlight::wait_zero`], never cleared (a
    /// drained server reads no more calls, so the count reaches zero at most a
    /// few more times). Read by a completer only when it brought the count to 0.
    waiting: AtomicBool,
    /// Guards nothing but the sleep/notify hand-off of `zero`.
    lock: Mutex<()>,
    /// Signalled when the count reaches zero while `waiting` is set.
    zero: Condvar,
}

impl InFlight {
    /// Counts one call in flight.
    pub(crate) fn begin(&self) {
        // Relaxed: the caller (the connection's owner) holds the connection's read
        // lock, and a drain takes that lock after it stops reading, before it loads
        // the count: the lock orders this add before the drain's loads, which
        // therefore see it (or a later value). Nothing else is published here.
        self.count.fetch_add(1, Relaxed);
    }

    /// Retires `n` calls whose replies have reached the kernel (or were dropped).
    pub(crate) fn end(&self, n: u64) {
        if n == 0 {
            return;
        }
        // Release: the reply writes before this happen-before a drain's Acquire
        // load that reads the result (or a later value: every later update is a
        // read-modify-write, so it continues this release sequence), so a drain
        // that sees 0 closes sockets only after the replies went out.
        let before = self.count.fetch_sub(n, Ordering::Release);
        debug_assert!(before >= n, "in-flight count underflow: {before} - {n}");
        if before == n {
            // The count is now 0. Store-load pair with `wait_zero` (store
            // `waiting`, fence, load count): with a SeqCst fence on each side,
            // either this load sees `waiting` or the waiter's load sees our 0.
            // Paid only on the transition to zero, not per call.
            fence(Ordering::SeqCst);
            if self.waiting.load(Relaxed) {
                // Taking the lock orders the notify after the waiter's check: a
                // waiter that saw a non-zero count holds the lock until it sleeps.
                let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
                self.zero.notify_all();
            }
        }
    }

    /// The count now (for statistics).
    pub(crate) fn get(&self) -> u64 {
        self.count.load(Relaxed)
    }

    /// Sleeps until the count is zero or `deadline` passes; returns the count
    /// then (0 unless the deadline passed). Never spins: woken by the completer
    /// that brings the count to zero.
    pub(crate) fn wait_zero(&self, deadline: Instant) -> u64 {
        let mut guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.waiting.store(true, Relaxed);
        // Pairs with the fence in `end`; see there.
        fence(Ordering::SeqCst);
        loop {
            // Acquire: see `end`.
            let n = self.count.load(Ordering::Acquire);
            let now = Instant::now();
            if n == 0 || now >= deadline {
                return n;
            }
            guard = self
                .zero
                .wait_timeout(guard, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn wait_zero_returns_when_the_last_call_ends() {
        let f = Arc::new(InFlight::default());
        for _ in 0..3 {
            f.begin();
        }
        let ender = {
            let f = Arc::clone(&f);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                f.end(2);
                std::thread::sleep(Duration::from_millis(20));
                f.end(1);
            })
        };
        let start = Instant::now();
        assert_eq!(f.wait_zero(start + Duration::from_secs(10)), 0);
        assert!(start.elapsed() < Duration::from_secs(5));
        ender.join().unwrap();
    }

    #[test]
    fn wait_zero_gives_up_at_the_deadline() {
        let f = InFlight::default();
        f.begin();
        f.begin();
        let start = Instant::now();
        assert_eq!(f.wait_zero(start + Duration::from_millis(30)), 2);
        assert!(start.elapsed() >= Duration::from_millis(30));
        f.end(2);
        assert_eq!(f.wait_zero(Instant::now()), 0);
        assert_eq!(f.get(), 0);
    }
}
