//! A pool: its threads' registry, the control words shared by every policy
//! (resize, victims, growth), and the policy that connects tasks to threads.
//!
//! Life of a worker, whatever the policy (`worker.rs` runs it):
//! 1. [`Pool::next_work`] returns a task, or tells the thread to exit;
//! 2. the handler runs with the task's `BUSY` flag held (a `Claim`);
//! 3. repeat.
//!
//! A thread exits when it wins a victim request (shrink), when it retires
//! after the idle timeout above the minimum, or at shutdown. Before exiting it
//! passes pending work on (wakes the next thread) so nothing is stranded.

use std::ptr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::policy::{ListWalk, WakeAll, WakeOne};
use crate::stats::{PoolCounters, PoolStats, Retired, WorkerStats};
use crate::sync::{self, AtomicBool, AtomicPtr, AtomicUsize, Mutex, Ordering, Parker};
use crate::task::Task;
use crate::Policy;

/// One service thread's shared half.
pub(crate) struct WorkerSlot<T> {
    /// Index in the pool's registry; reused after the thread exits.
    pub(crate) id: u32,
    parker: Parker,
    /// List-walk only: idle and not claimed. Changed only under that
    /// policy's lock (Relaxed suffices there).
    pub(crate) listed_idle: AtomicBool,
    /// Lwq only: the task handed over by the waker that popped this thread
    /// off the idle stack (an owned `Arc` from `Arc::into_raw`), or null.
    /// Written only by that waker, taken only by this thread after waking.
    handed: AtomicPtr<Task<T>>,
    pub(crate) stats: WorkerStats,
}

// SAFETY: `handed` holds an owned `Arc<Task<T>>`; moving it between threads is
// sending that `Arc`, which is Send + Sync when T is. The rest is Send + Sync.
unsafe impl<T: Send + Sync> Send for WorkerSlot<T> {}
// SAFETY: as above; `handed` is only accessed through atomic swaps.
unsafe impl<T: Send + Sync> Sync for WorkerSlot<T> {}

impl<T> WorkerSlot<T> {
    pub(crate) fn notify(&self) {
        self.parker.notify();
    }

    /// Parks until notified; `false` once `timeout` passes without one.
    pub(crate) fn park_until_notified(&self, timeout: Option<Duration>) -> bool {
        self.parker.wait(timeout)
    }

    /// Gives `task` to this thread, which must be off the idle stack and not
    /// yet notified. Returns a task already there, which cannot happen (a
    /// thread takes its task before it can idle again) but is never dropped.
    pub(crate) fn hand(&self, task: Arc<Task<T>>) -> Option<Arc<Task<T>>> {
        let raw = Arc::into_raw(task).cast_mut();
        // Release: the thread's acquire swap in `take_handed` sees the task
        // as the waker left it (the parker orders this too; this does not
        // depend on it).
        let previous = self.handed.swap(raw, Ordering::AcqRel);
        debug_assert!(previous.is_null(), "two tasks handed to one wake-up");
        // SAFETY: a non-null value was stored by `hand` from `Arc::into_raw`
        // and the swap took it out, so we own that strong count.
        (!previous.is_null()).then(|| unsafe { Arc::from_raw(previous) })
    }

    /// The task handed to this thread, if any.
    pub(crate) fn take_handed(&self) -> Option<Arc<Task<T>>> {
        // Acquire: pairs with the release half of `hand`'s swap.
        let raw = self.handed.swap(ptr::null_mut(), Ordering::AcqRel);
        // SAFETY: as in `hand`: non-null values are owned `Arc`s.
        (!raw.is_null()).then(|| unsafe { Arc::from_raw(raw) })
    }
}

impl<T> Drop for WorkerSlot<T> {
    fn drop(&mut self) {
        drop(self.take_handed());
    }
}

impl<T> std::fmt::Debug for WorkerSlot<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerSlot")
            .field("id", &self.id)
            .field("listed_idle", &self.listed_idle)
            .finish_non_exhaustive()
    }
}

/// Registry of a pool's live threads; behind the pool mutex.
#[derive(Debug)]
pub(crate) struct Synced<T> {
    pub(crate) slots: Vec<Option<Arc<WorkerSlot<T>>>>,
    free_ids: Vec<u32>,
    pub(crate) retired: Retired,
    /// Lwq policy: the idle stack (here so a waker pops and finds the slot
    /// under one lock).
    pub(crate) idle: crate::idle::IdleStack,
}

/// Control words every policy consults.
#[derive(Debug)]
pub(crate) struct PoolCtl {
    /// Live threads, not counting those that won a victim request or
    /// retired. Changed by resizes, growth and exits.
    pub(crate) nthreads: AtomicUsize,
    /// Outstanding shrink requests; each is won by exactly one thread (CAS).
    pub(crate) victims: AtomicUsize,
    /// A growth spawn is in progress (Linux `SP_TASK_STARTING`): grow one
    /// thread at a time.
    pub(crate) starting: AtomicBool,
    pub(crate) min: AtomicUsize,
    pub(crate) max: AtomicUsize,
    /// Set once, at shutdown.
    pub(crate) shutdown: AtomicBool,
    pub(crate) idle_timeout: Duration,
}

/// Why a thread leaves its loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExitReason {
    Shutdown,
    Victim,
    Retired,
}

/// What `next_work` hands a thread.
#[derive(Debug)]
pub(crate) enum Next<T> {
    Work(Arc<Task<T>>),
    Exit(ExitReason),
}

impl PoolCtl {
    pub(crate) fn new(nthreads: usize, min: usize, max: usize, idle_timeout: Duration) -> Self {
        PoolCtl {
            nthreads: AtomicUsize::new(nthreads),
            victims: AtomicUsize::new(0),
            starting: AtomicBool::new(false),
            min: AtomicUsize::new(min),
            max: AtomicUsize::new(max),
            shutdown: AtomicBool::new(false),
            idle_timeout,
        }
    }

    /// Whether a thread must come and look: shutdown or a shrink request.
    /// (Pending tasks are checked by the policy.)
    pub(crate) fn control_pending(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst) || self.victims.load(Ordering::SeqCst) > 0
    }

    /// Returns the reason the calling thread must exit, claiming a victim
    /// request if one is outstanding.
    pub(crate) fn claim_exit(&self, counters: &PoolCounters) -> Option<ExitReason> {
        if self.shutdown.load(Ordering::Acquire) {
            return Some(ExitReason::Shutdown);
        }
        let mut v = self.victims.load(Ordering::Acquire);
        while v > 0 {
            // AcqRel: exactly one thread wins each request.
            match self
                .victims
                .compare_exchange_weak(v, v - 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    self.nthreads.fetch_sub(1, Ordering::AcqRel);
                    counters.victims.fetch_add(1, Ordering::Relaxed);
                    return Some(ExitReason::Victim);
                }
                Err(actual) => v = actual,
            }
        }
        None
    }

    /// The idle timeout if this thread could retire now.
    pub(crate) fn retire_timeout(&self) -> Option<Duration> {
        if cfg!(loom) {
            return None;
        }
        let above_min = self.nthreads.load(Ordering::Relaxed) > self.min.load(Ordering::Relaxed);
        above_min.then_some(self.idle_timeout)
    }

    /// Reserves one retirement: `nthreads -= 1` if that keeps it >= min.
    pub(crate) fn reserve_retirement(&self) -> bool {
        let min = self.min.load(Ordering::Acquire);
        self.nthreads
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n > min).then(|| n - 1)
            })
            .is_ok()
    }

    pub(crate) fn cancel_retirement(&self) {
        self.nthreads.fetch_add(1, Ordering::AcqRel);
    }

    /// Reserves one growth spawn: one at a time, never above max.
    pub(crate) fn reserve_growth(&self) -> bool {
        if self.shutdown.load(Ordering::Acquire)
            || self.nthreads.load(Ordering::Acquire) >= self.max.load(Ordering::Acquire)
            || self.starting.swap(true, Ordering::AcqRel)
        {
            return false;
        }
        let max = self.max.load(Ordering::Acquire);
        let grew = self
            .nthreads
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .is_ok();
        if !grew {
            self.starting.store(false, Ordering::Release);
        }
        grew
    }
}

/// Per-policy state.
#[derive(Debug)]
pub(crate) enum PolicyState<T> {
    Lwq(WakeOne<T>),
    ListWalk(ListWalk<T>),
    WakeAll(WakeAll<T>),
}

/// One pool.
#[derive(Debug)]
pub(crate) struct Pool<T> {
    pub(crate) cpus: Vec<usize>,
    pub(crate) ctl: PoolCtl,
    pub(crate) counters: PoolCounters,
    pub(crate) synced: Mutex<Synced<T>>,
    pub(crate) policy: PolicyState<T>,
    epoch: Instant,
}

impl<T> Pool<T> {
    pub(crate) fn new(
        cpus: Vec<usize>,
        policy: Policy,
        max_waking: usize,
        ctl: PoolCtl,
        epoch: Instant,
    ) -> Self {
        let policy = match policy {
            Policy::Lwq => PolicyState::Lwq(WakeOne::new(max_waking, false)),
            Policy::LwqHandoff => PolicyState::Lwq(WakeOne::new(max_waking, true)),
            Policy::ListWalk => PolicyState::ListWalk(ListWalk::new()),
            Policy::WakeAll => PolicyState::WakeAll(WakeAll::new()),
        };
        Pool {
            cpus,
            ctl,
            counters: PoolCounters::default(),
            synced: Mutex::new(Synced::default()),
            policy,
            epoch,
        }
    }

    pub(crate) fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Registers the calling thread; returns its slot.
    pub(crate) fn register(&self) -> Arc<WorkerSlot<T>> {
        let mut synced = sync::lock(&self.synced);
        let id = synced
            .free_ids
            .pop()
            .unwrap_or_else(|| u32::try_from(synced.slots.len()).unwrap_or(u32::MAX));
        let slot = Arc::new(WorkerSlot {
            id,
            parker: Parker::for_current_thread(),
            listed_idle: AtomicBool::new(false),
            handed: AtomicPtr::new(ptr::null_mut()),
            stats: WorkerStats::new(),
        });
        let idx = id as usize;
        if synced.slots.len() <= idx {
            synced.slots.resize(idx + 1, None);
        }
        synced.slots[idx] = Some(Arc::clone(&slot));
        drop(synced);
        if let PolicyState::ListWalk(lw) = &self.policy {
            lw.add_thread(Arc::clone(&slot));
        }
        slot
    }

    /// Removes an exiting thread, keeping its figures.
    pub(crate) fn unregister(&self, slot: &WorkerSlot<T>) {
        if let PolicyState::ListWalk(lw) = &self.policy {
            lw.remove_thread(slot);
        }
        let mut synced = sync::lock(&self.synced);
        let Synced {
            slots,
            free_ids,
            retired,
            ..
        } = &mut *synced;
        slot.stats.add_to(retired);
        if let Some(entry) = slots.get_mut(slot.id as usize) {
            *entry = None;
            free_ids.push(slot.id);
        }
    }

    /// Queues a task whose `BUSY` flag the caller holds, and wakes a thread.
    pub(crate) fn enqueue(&self, task: Arc<Task<T>>) {
        task.enqueued_at.store(self.now_ns(), Ordering::Relaxed);
        self.counters.enqueues.fetch_add(1, Ordering::Relaxed);
        match &self.policy {
            PolicyState::Lwq(p) => p.enqueue(self, task),
            PolicyState::ListWalk(p) => p.enqueue(self, task),
            PolicyState::WakeAll(p) => p.enqueue(self, task),
        }
    }

    /// Blocks until there is a task for `me`, or `me` must exit.
    pub(crate) fn next_work(&self, me: &WorkerSlot<T>) -> Next<T> {
        match &self.policy {
            PolicyState::Lwq(p) => p.next_work(self, me),
            PolicyState::ListWalk(p) => p.next_work(self, me),
            PolicyState::WakeAll(p) => p.next_work(self, me),
        }
    }

    /// Wakes a thread to act on a control request (shrink, shutdown).
    pub(crate) fn wake_for_control(&self) {
        match &self.policy {
            PolicyState::Lwq(p) => p.wake_for_control(self),
            PolicyState::ListWalk(p) => p.wake_for_control(self),
            PolicyState::WakeAll(p) => p.wake_for_control(self),
        }
    }

    /// Idle threads not yet claimed (a hint: it may change at once).
    pub(crate) fn idle_hint(&self) -> u64 {
        match &self.policy {
            PolicyState::Lwq(p) => p.state().idle(),
            PolicyState::ListWalk(p) => p.idle_hint(),
            PolicyState::WakeAll(p) => p.idle_hint(),
        }
    }

    fn waking_now(&self) -> u64 {
        match &self.policy {
            PolicyState::Lwq(p) => p.state().waking(),
            PolicyState::ListWalk(p) => p.waking_hint(),
            PolicyState::WakeAll(p) => p.waking_hint(),
        }
    }

    pub(crate) fn stats(&self) -> (PoolStats, Retired) {
        use Ordering::Relaxed;
        let synced = sync::lock(&self.synced);
        let mut acc = synced.retired.clone();
        let mut threads = 0;
        for slot in synced.slots.iter().flatten() {
            slot.stats.add_to(&mut acc);
            threads += 1;
        }
        drop(synced);
        let c = &self.counters;
        let stats = PoolStats {
            threads,
            idle: self.idle_hint(),
            waking: self.waking_now(),
            peak_waking: c.peak_waking.load(Relaxed),
            enqueues: c.enqueues.load(Relaxed),
            wakeups: c.wakeups.load(Relaxed),
            wasted_wakeups: acc.wasted_wakeups,
            dispatches: acc.dispatches,
            spawned: c.spawned.load(Relaxed),
            retired: c.retired.load(Relaxed),
            victims: c.victims.load(Relaxed),
        };
        (stats, acc)
    }

    pub(crate) fn reset_stats(&self) {
        use Ordering::Relaxed;
        let mut synced = sync::lock(&self.synced);
        synced.retired = Retired::default();
        for slot in synced.slots.iter().flatten() {
            slot.stats.reset();
        }
        drop(synced);
        let c = &self.counters;
        for counter in [&c.enqueues, &c.wakeups] {
            counter.store(0, Relaxed);
        }
        for counter in [&c.peak_waking, &c.spawned, &c.retired, &c.victims] {
            counter.store(0, Relaxed);
        }
    }
}

impl<T> Default for Synced<T> {
    fn default() -> Self {
        Synced {
            slots: Vec::new(),
            free_ids: Vec::new(),
            retired: Retired::default(),
            idle: crate::idle::IdleStack::default(),
        }
    }
}

impl<T> Synced<T> {
    /// The slot registered under `id`.
    pub(crate) fn slot(&self, id: u32) -> Option<Arc<WorkerSlot<T>>> {
        self.slots.get(id as usize).and_then(Clone::clone)
    }
}
