//! The `lwq` policy: lock-free pending queue, O(1) idle stack, one thread
//! waking at a time (at most `max_waking`), and the woken thread wakes the
//! next only if work remains.
//!
//! Two store→load races must not lose a wake-up. Each is closed by a pair of
//! `SeqCst` fences (a Dekker pattern: of two threads that each write then
//! fence then read, at least one reads the other's write):
//!
//! 1. **Going idle** (`next_work`): the thread pushes itself on the idle
//!    stack and increments `idle`, fences, then re-checks the pending queue.
//!    A producer pushes the task, fences, then reads `idle`. Either the
//!    producer sees the idle thread and wakes it, or the thread sees the task
//!    (and wakes a thread, most likely itself, to take it).
//! 2. **Waking bound**: a producer that sees `waking >= max_waking` wakes
//!    nobody, relying on the waking thread. That thread decrements `waking`,
//!    fences, and after taking a task re-checks the queue and wakes the next
//!    thread if work remains. Either the producer sees the decrement (and
//!    wakes a thread itself) or the waking thread sees the task.
//!
//! A woken thread decrements `waking` as soon as it runs, before any work, so
//! a thread that blocks in its handler never holds the waking bound.

use std::sync::Arc;

use crate::idle::State;
use crate::lwq::Lwq;
use crate::pool::{ExitReason, Next, Pool, WorkerSlot};
use crate::sync::{fence, lock, AtomicU64, Ordering, Ordering::SeqCst};
use crate::task::Task;

#[derive(Debug)]
pub(crate) struct WakeOne<T> {
    pending: Lwq<T>,
    /// Packed [`State`]: idle-and-unclaimed and woken-but-not-running
    /// threads. Always accessed `SeqCst`: it is one side of both fence pairs
    /// in the module docs.
    state: AtomicU64,
    max_waking: u64,
}

impl<T> std::fmt::Debug for Lwq<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lwq")
            .field("empty", &self.is_empty())
            .finish()
    }
}

impl<T> WakeOne<T> {
    pub(crate) fn new(max_waking: usize) -> Self {
        WakeOne {
            pending: Lwq::new(),
            state: AtomicU64::new(0),
            max_waking: u64::try_from(max_waking).unwrap_or(u64::MAX),
        }
    }

    pub(crate) fn state(&self) -> State {
        State(self.state.load(SeqCst))
    }

    pub(crate) fn enqueue(&self, pool: &Pool<T>, task: Arc<Task<T>>) {
        self.pending.push(task);
        // Fence pair 1 and 2, producer side: push, fence, read `state`.
        fence(SeqCst);
        self.notify_one_idle(pool, self.max_waking);
    }

    /// Work a thread must come and do: a pending task or a control request.
    fn has_work(&self, pool: &Pool<T>) -> bool {
        !self.pending.is_empty() || pool.ctl.control_pending()
    }

    /// Wakes the most recently idled thread, unless `bound` threads are
    /// already waking or none is idle. Returns whether one was woken.
    pub(crate) fn notify_one_idle(&self, pool: &Pool<T>, bound: u64) -> bool {
        let mut s = self.state();
        loop {
            if s.waking() >= bound || s.idle() == 0 {
                return false;
            }
            match self
                .state
                .compare_exchange_weak(s.0, s.claim_one().0, SeqCst, SeqCst)
            {
                Ok(_) => break,
                Err(actual) => s = State(actual),
            }
        }
        if !pool.ctl.shutdown.load(Ordering::Relaxed) {
            pool.counters.note_waking(s.waking() + 1);
        }
        // Our claim guarantees an entry: idle <= stack length (idle.rs).
        let slot = {
            let mut synced = lock(&pool.synced);
            let id = synced.idle.pop();
            id.and_then(|id| synced.slot(id))
        };
        let Some(slot) = slot else {
            debug_assert!(false, "idle count without an idle thread: {s:?}");
            self.state.fetch_sub(State::ONE_WAKING, SeqCst);
            return false;
        };
        pool.counters.wakeups.fetch_add(1, Ordering::Relaxed);
        slot.notify();
        true
    }

    /// Wakes a thread to see a control request; at shutdown, wakes them all.
    pub(crate) fn wake_for_control(&self, pool: &Pool<T>) {
        fence(SeqCst);
        if pool.ctl.shutdown.load(SeqCst) {
            while self.notify_one_idle(pool, u64::MAX) {}
        } else {
            self.notify_one_idle(pool, self.max_waking);
        }
    }

    /// Before exiting: if work remains, wake the next thread.
    fn pass_on(&self, pool: &Pool<T>) {
        fence(SeqCst);
        if self.has_work(pool) {
            let bound = if pool.ctl.shutdown.load(SeqCst) {
                u64::MAX
            } else {
                self.max_waking
            };
            self.notify_one_idle(pool, bound);
        }
    }

    pub(crate) fn next_work(&self, pool: &Pool<T>, me: &WorkerSlot) -> Next<T> {
        let mut woken = false;
        loop {
            if let Some(reason) = pool.ctl.claim_exit(&pool.counters) {
                self.pass_on(pool);
                return Next::Exit(reason);
            }
            if let Some(task) = self.pending.pop() {
                // Fence pair 2, woken side: chain only if work remains.
                fence(SeqCst);
                if self.has_work(pool) {
                    self.notify_one_idle(pool, self.max_waking);
                }
                return Next::Work(task);
            }
            if woken {
                me.stats.wasted_wakeups.fetch_add(1, Ordering::Relaxed);
            }
            self.transition_to_idle(pool, me);
            // Fence pair 1, idle side: publish, fence, re-check.
            fence(SeqCst);
            if self.has_work(pool) {
                // Take ourselves back if no waker has claimed an idle thread
                // meanwhile; then look again without a wake-up. Otherwise a
                // claim is in flight and will pop someone: wake one to be sure
                // the work is seen, and park.
                if self.try_unidle(pool, me) {
                    woken = false;
                    continue;
                }
                self.notify_one_idle(pool, self.max_waking);
            }
            loop {
                if me.park_until_notified(pool.ctl.retire_timeout()) {
                    break;
                }
                if self.try_retire(pool, me) {
                    pool.counters.retired.fetch_add(1, Ordering::Relaxed);
                    return Next::Exit(ExitReason::Retired);
                }
            }
            self.transition_from_waking();
            woken = true;
        }
    }

    /// Publishes `me` as idle: on the stack first, then counted, both under
    /// the lock, so `idle <= stack length` holds at every instant.
    fn transition_to_idle(&self, pool: &Pool<T>, me: &WorkerSlot) {
        let mut synced = lock(&pool.synced);
        synced.idle.push(me.id);
        let before = State(self.state.fetch_add(State::ONE_IDLE, SeqCst));
        debug_assert!(before.idle() < synced.idle.len() as u64, "{before:?}");
    }

    /// Running again after a wake-up: no longer woken-but-not-running.
    fn transition_from_waking(&self) {
        self.state.fetch_sub(State::ONE_WAKING, SeqCst);
        // Fence pair 2, woken side: the decrement is visible before we look
        // at the queue, so a producer that saw us waking is seen by us.
        fence(SeqCst);
    }

    /// Leaves the idle stack at once if `me` is still on it and an
    /// unclaimed idle unit remains (see `try_retire`); returns whether it did.
    fn try_unidle(&self, pool: &Pool<T>, me: &WorkerSlot) -> bool {
        let mut synced = lock(&pool.synced);
        if !synced.idle.is_linked(me.id) {
            return false;
        }
        let unclaimed = self
            .state
            .fetch_update(SeqCst, SeqCst, |s| {
                (State(s).idle() > 0).then(|| s - State::ONE_IDLE)
            })
            .is_ok();
        if unclaimed {
            synced.idle.remove(me.id);
        }
        unclaimed
    }

    /// After the idle timeout: leave the stack unless a waker has claimed a
    /// thread we cannot tell apart from us, and only above the minimum.
    fn try_retire(&self, pool: &Pool<T>, me: &WorkerSlot) -> bool {
        if !pool.ctl.reserve_retirement() {
            return false;
        }
        // Every stack entry beyond `idle` is owed to an in-flight claim.
        // Taking one unclaimed unit and our own entry keeps that true.
        if self.try_unidle(pool, me) {
            return true;
        }
        pool.ctl.cancel_retirement();
        false
    }
}
