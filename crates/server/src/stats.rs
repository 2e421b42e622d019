//! Transport counters. All are statistics only: relaxed atomics that order nothing,
//! updated on rare events (accept, close, back-pressure), never once per call, so
//! they add no shared cache-line write to the hot path.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};

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
    /// Times a connection reached `max_in_flight_per_conn` and reading it stopped.
    pub throttled: u64,
    /// Largest number of calls in flight seen on any one connection.
    pub peak_in_flight: u32,
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
    pub(crate) throttled: AtomicU64,
    pub(crate) peak_in_flight: AtomicU32,
    pub(crate) peak_output_buffered: AtomicU64,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> ServerStats {
        ServerStats {
            connections: self.connections.load(Relaxed) as u64,
            accepted: self.accepted.load(Relaxed),
            rejected: self.rejected.load(Relaxed),
            closed_bad_input: self.closed_bad_input.load(Relaxed),
            throttled: self.throttled.load(Relaxed),
            peak_in_flight: self.peak_in_flight.load(Relaxed),
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
