//! Counters and their snapshot.
//!
//! Counters use std atomics even under loom: they observe the protocol, they
//! are not part of it. Hot counters are per worker (one writer each) and are
//! summed when a snapshot is taken; per-pool counters are cache-padded.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use crossbeam_utils::CachePadded;
use hdrhistogram::Histogram;

use crate::config::{Policy, PoolMode};

/// Highest hand-off latency recorded exactly (10 s); longer ones saturate.
const HISTOGRAM_MAX_NS: u64 = 10_000_000_000;

#[allow(
    clippy::expect_used,
    reason = "constant bounds that hdrhistogram accepts"
)]
pub(crate) fn new_histogram() -> Histogram<u64> {
    // Two significant digits: ~1% error, ~28 KiB per thread, so thousands of
    // threads stay cheap. 300 ns reporting bins need no more.
    Histogram::new_with_bounds(1, HISTOGRAM_MAX_NS, 2).expect("valid histogram bounds")
}

/// Per-pool counters written by producers and wakers.
#[derive(Debug, Default)]
pub(crate) struct PoolCounters {
    pub(crate) enqueues: CachePadded<AtomicU64>,
    pub(crate) wakeups: CachePadded<AtomicU64>,
    pub(crate) peak_waking: AtomicU64,
    pub(crate) spawned: AtomicU64,
    pub(crate) retired: AtomicU64,
    pub(crate) victims: AtomicU64,
}

impl PoolCounters {
    pub(crate) fn note_waking(&self, waking_now: u64) {
        self.peak_waking.fetch_max(waking_now, Relaxed);
    }
}

/// Per-worker counters; written only by the worker itself.
#[derive(Debug)]
pub(crate) struct WorkerStats {
    pub(crate) dispatches: AtomicU64,
    pub(crate) wasted_wakeups: AtomicU64,
    pub(crate) handoff: Mutex<Histogram<u64>>,
}

impl WorkerStats {
    pub(crate) fn new() -> Self {
        WorkerStats {
            dispatches: AtomicU64::new(0),
            wasted_wakeups: AtomicU64::new(0),
            handoff: Mutex::new(new_histogram()),
        }
    }

    pub(crate) fn record_dispatch(&self, handoff_ns: u64) {
        self.dispatches.fetch_add(1, Relaxed);
        // Uncontended: only a stats snapshot ever takes this lock besides us.
        if let Ok(mut h) = self.handoff.lock() {
            h.saturating_record(handoff_ns.max(1));
        }
    }

    /// Adds this worker's figures into `acc`.
    pub(crate) fn add_to(&self, acc: &mut Retired) {
        acc.dispatches += self.dispatches.load(Relaxed);
        acc.wasted_wakeups += self.wasted_wakeups.load(Relaxed);
        if let Ok(h) = self.handoff.lock() {
            // Same bounds on both sides, so `add` cannot fail.
            let _ = acc.handoff.add(&*h);
        }
    }

    pub(crate) fn reset(&self) {
        self.dispatches.store(0, Relaxed);
        self.wasted_wakeups.store(0, Relaxed);
        if let Ok(mut h) = self.handoff.lock() {
            h.reset();
        }
    }
}

/// Figures of threads that have exited, kept so totals never go backwards.
#[derive(Debug, Clone)]
pub(crate) struct Retired {
    pub(crate) dispatches: u64,
    pub(crate) wasted_wakeups: u64,
    pub(crate) handoff: Histogram<u64>,
}

impl Default for Retired {
    fn default() -> Self {
        Retired {
            dispatches: 0,
            wasted_wakeups: 0,
            handoff: new_histogram(),
        }
    }
}

/// One pool's figures.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct PoolStats {
    /// Live service threads.
    pub threads: u64,
    /// Threads idle and not claimed by a waker.
    pub idle: u64,
    /// Threads woken but not yet running.
    pub waking: u64,
    /// Highest `waking` seen since the last reset.
    pub peak_waking: u64,
    /// Tasks put on the pending queue.
    pub enqueues: u64,
    /// Threads woken (unparked / signalled).
    pub wakeups: u64,
    /// Wake-ups after which the thread found nothing to do.
    pub wasted_wakeups: u64,
    /// Tasks handed to a thread.
    pub dispatches: u64,
    /// Threads started after the initial set (growth, resizes).
    pub spawned: u64,
    /// Threads retired after the idle timeout.
    pub retired: u64,
    /// Threads stopped by a shrink request.
    pub victims: u64,
}

impl PoolStats {
    fn add(&mut self, o: &PoolStats) {
        self.threads += o.threads;
        self.idle += o.idle;
        self.waking += o.waking;
        self.peak_waking = self.peak_waking.max(o.peak_waking);
        self.enqueues += o.enqueues;
        self.wakeups += o.wakeups;
        self.wasted_wakeups += o.wasted_wakeups;
        self.dispatches += o.dispatches;
        self.spawned += o.spawned;
        self.retired += o.retired;
        self.victims += o.victims;
    }
}

/// A snapshot of the scheduler's figures.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SchedStats {
    /// The policy in force.
    pub policy: Policy,
    /// The pool mode in force (`auto` resolved).
    pub pool_mode: PoolMode,
    /// Configured bound on woken-but-not-running threads per pool.
    pub max_waking: u64,
    /// Per-pool figures.
    pub pools: Vec<PoolStats>,
    /// Enqueue-to-pickup latency of every dispatch, in nanoseconds.
    #[serde(skip)]
    pub handoff_ns: Histogram<u64>,
}

impl SchedStats {
    /// The sum over pools (`peak_waking` is the highest of any pool).
    pub fn total(&self) -> PoolStats {
        let mut t = PoolStats::default();
        for p in &self.pools {
            t.add(p);
        }
        t
    }
}
