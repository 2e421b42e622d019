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
//!
//! **Waking more than one** (`max_waking` > 1, `lwq` only). A thread beyond
//! the first is woken only while more tasks are queued than threads are
//! waking for them ([`Lwq::len_estimate`]): each woken thread takes one
//! task, so a further one would find nothing. This is pair 2's argument
//! again, with `min(max_waking, queued)` for the bound: the gate only ever
//! holds back a wake-up while some thread is waking, and that thread
//! re-checks the queue once it runs. With `max_waking` = 1 it never applies.
//!
//! **Direct hand-off** (`lwq-handoff` only). A waker that wakes a thread for
//! work pops the oldest
//! task itself and hands it to the thread it wakes ([`WorkerSlot::hand`]), so
//! a woken thread never finds that a running thread took its work first (a
//! wasted wake-up: Linux's `svc_recv` pays one then). The order is: claim a
//! thread (one CAS on `state`), pop a task, pop the thread's stack entry and
//! hand the task over, notify. If the pop finds nothing (a running thread took
//! the task), the claim is given back without touching the stack, and since
//! giving it back ends a "waking" that another producer may have relied on
//! (pair 2), the waker then fences and looks again, like a woken thread.
//! Without hand-off (`lwq`, the default), a woken thread pops for itself, and
//! a running thread that finishes first takes the task: the woken thread
//! finds nothing, but the task ran on a hot thread without waiting for a
//! wake-up. Measured side by side (docs/benchmarks.md), that is the faster
//! trade: hand-off removes the wasted wake-ups and adds more useful ones.

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
    /// The waker hands the task to the thread it wakes (`lwq-handoff`).
    handoff: bool,
}

impl<T> std::fmt::Debug for Lwq<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lwq")
            .field("empty", &self.is_empty())
            .finish()
    }
}

impl<T> WakeOne<T> {
    pub(crate) fn new(max_waking: usize, handoff: bool) -> Self {
        WakeOne {
            // Only the gate of a bound above 1 reads the queue's length.
            pending: if max_waking > 1 && !handoff {
                Lwq::counted()
            } else {
                Lwq::new()
            },
            state: AtomicU64::new(0),
            max_waking: u64::try_from(max_waking).unwrap_or(u64::MAX),
            handoff,
        }
    }

    pub(crate) fn state(&self) -> State {
        State(self.state.load(SeqCst))
    }

    pub(crate) fn enqueue(&self, pool: &Pool<T>, task: Arc<Task<T>>) {
        self.pending.push(task);
        // Fence pair 1 and 2, producer side: push, fence, read `state`.
        fence(SeqCst);
        self.wake_with_task(pool, self.max_waking);
    }

    /// Wakes a thread for whatever is pending: with a task handed over if
    /// one is queued, bare for a control request. The caller has fenced.
    fn wake_for_pending(&self, pool: &Pool<T>, bound: u64) {
        if !self.pending.is_empty() {
            self.wake_with_task(pool, bound);
        } else if pool.ctl.control_pending() {
            self.notify_one_idle(pool, bound);
        }
    }

    /// Claims an idle thread (unless `bound` are waking or none is idle),
    /// pops the oldest pending task and hands it to that thread (without
    /// hand-off: just wakes it).
    fn wake_with_task(&self, pool: &Pool<T>, bound: u64) {
        if !self.handoff {
            if let Some(before) = self.claim(bound, true) {
                self.wake_claimed(pool, before, None);
            }
            return;
        }
        loop {
            // No gate: each claim here pops its own task.
            let Some(before) = self.claim(bound, false) else {
                return;
            };
            if let Some(task) = self.pending.pop() {
                self.wake_claimed(pool, before, Some(task));
                return;
            }
            // Someone took the task: give the claim back (one idle unit
            // again, one waking less; the stack entry was never popped).
            self.state
                .fetch_sub(State::ONE_WAKING - State::ONE_IDLE, SeqCst);
            // Fence pair 2, as a woken thread: a producer that saw our claim
            // and woke nobody has pushed before this fence, or sees the
            // release and wakes a thread itself.
            fence(SeqCst);
            if self.pending.is_empty() {
                if pool.ctl.control_pending() {
                    self.notify_one_idle(pool, bound);
                }
                return;
            }
        }
    }

    /// Work a thread must come and do: a pending task or a control request.
    fn has_work(&self, pool: &Pool<T>) -> bool {
        !self.pending.is_empty() || pool.ctl.control_pending()
    }

    /// Wakes the most recently idled thread without a task (for a control
    /// request), unless `bound` threads are already waking or none is idle.
    /// Returns whether one was woken.
    pub(crate) fn notify_one_idle(&self, pool: &Pool<T>, bound: u64) -> bool {
        match self.claim(bound, false) {
            Some(before) => self.wake_claimed(pool, before, None),
            None => false,
        }
    }

    /// Moves one idle unit to waking (one CAS) unless `bound` threads are
    /// waking or none is idle, or (`for_queued`) some are waking and no more
    /// tasks are queued than threads waking; returns the state before.
    fn claim(&self, bound: u64, for_queued: bool) -> Option<State> {
        let mut s = self.state();
        let mut queued = None;
        loop {
            if s.waking() >= bound || s.idle() == 0 {
                return None;
            }
            if for_queued && s.waking() > 0 {
                let queued = *queued.get_or_insert_with(|| self.pending.len_estimate());
                if queued <= s.waking() {
                    return None;
                }
            }
            match self
                .state
                .compare_exchange_weak(s.0, s.claim_one().0, SeqCst, SeqCst)
            {
                Ok(_) => return Some(s),
                Err(actual) => s = State(actual),
            }
        }
    }

    /// Pops the claimed thread off the stack, hands it `task`, wakes it.
    fn wake_claimed(&self, pool: &Pool<T>, before: State, task: Option<Arc<Task<T>>>) -> bool {
        if !pool.ctl.shutdown.load(Ordering::Relaxed) {
            pool.counters.note_waking(before.waking() + 1);
        }
        // Our claim guarantees an entry: idle <= stack length (idle.rs).
        let slot = {
            let mut synced = lock(&pool.synced);
            let id = synced.idle.pop();
            id.and_then(|id| synced.slot(id))
        };
        let Some(slot) = slot else {
            debug_assert!(false, "idle count without an idle thread: {before:?}");
            self.state.fetch_sub(State::ONE_WAKING, SeqCst);
            if let Some(task) = task {
                self.pending.push(task);
            }
            return false;
        };
        if let Some(task) = task {
            if let Some(stray) = slot.hand(task) {
                self.pending.push(stray);
            }
        }
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
        let bound = if pool.ctl.shutdown.load(SeqCst) {
            u64::MAX
        } else {
            self.max_waking
        };
        self.wake_for_pending(pool, bound);
    }

    pub(crate) fn next_work(&self, pool: &Pool<T>, me: &WorkerSlot<T>) -> Next<T> {
        let mut woken = false;
        loop {
            // A woken thread runs what it was handed before anything else,
            // even an exit: the task is off the queue and only it has it.
            let task = match (woken && self.handoff).then(|| me.take_handed()).flatten() {
                Some(task) => Some(task),
                None => {
                    if let Some(reason) = pool.ctl.claim_exit(&pool.counters) {
                        self.pass_on(pool);
                        return Next::Exit(reason);
                    }
                    self.pending.pop()
                }
            };
            if let Some(task) = task {
                // Fence pair 2, woken side: chain only if work remains.
                fence(SeqCst);
                self.wake_for_pending(pool, self.max_waking);
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
                self.wake_for_pending(pool, self.max_waking);
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
    fn transition_to_idle(&self, pool: &Pool<T>, me: &WorkerSlot<T>) {
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
    fn try_unidle(&self, pool: &Pool<T>, me: &WorkerSlot<T>) -> bool {
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
    /// thread we cannot tell apart from us, and only while the threads left
    /// once the outstanding victims exit stay above the minimum (a victim
    /// request is an exit already promised; `reserve_retirement`).
    fn try_retire(&self, pool: &Pool<T>, me: &WorkerSlot<T>) -> bool {
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
