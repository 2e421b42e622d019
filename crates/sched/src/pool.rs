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
use crate::sync::{self, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Mutex, Ordering, Parker};
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

/// A pool's thread counts, packed in one word so that they are read and
/// changed together: live threads (`nthreads`), outstanding shrink requests
/// (`victims`), whether a growth spawn is in progress (`starting`), and the
/// generation of the pool's limits.
///
/// The generation changes with every `resize`, which stores the new limits
/// first: a change checked against limits loaded before that (a growth
/// against the old maximum, a retirement against the old minimum) then
/// fails its RMW and is checked again against the new ones, even when the
/// resize left the counts as they were.
///
/// `nthreads - victims` is the count the pool will have once every request
/// is won (the *effective* count). Every change keeps it within the limits
/// it was checked against: a shrink request and the thread that wins it
/// leave it unchanged, a retirement needs it above the minimum. Read
/// separately, the fields could be seen between two steps of one change (a
/// victim counted as gone and as still live at once).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counts(u64);

const FIELD_BITS: u32 = 21;
const FIELD_MASK: u64 = (1 << FIELD_BITS) - 1;
const VICTIMS_SHIFT: u32 = FIELD_BITS;
const STARTING_BIT: u64 = 1 << (2 * FIELD_BITS);
const GENERATION_SHIFT: u32 = 2 * FIELD_BITS + 1;
/// The generation wraps after 2^21 resizes (serialised, admin-driven): a
/// change would need to span all of them to mistake one for another.
const GENERATION_MASK: u64 = (1 << (64 - GENERATION_SHIFT)) - 1;

impl Counts {
    /// One thread, in the `nthreads` field (for `fetch_add`/`fetch_sub`).
    const ONE_THREAD: u64 = 1;

    fn new(nthreads: usize, victims: usize, starting: bool) -> Counts {
        // Per-pool counts are at most MAX_THREADS (65,536) plus one growth
        // spawn: far below the field width.
        let field = |n: usize| u64::try_from(n).unwrap_or(FIELD_MASK).min(FIELD_MASK);
        debug_assert!(nthreads as u64 <= FIELD_MASK && victims as u64 <= FIELD_MASK);
        Counts(
            field(nthreads)
                | field(victims) << VICTIMS_SHIFT
                | if starting { STARTING_BIT } else { 0 },
        )
    }

    /// Live threads, counting a growth spawn in progress and threads that
    /// will win the outstanding victim requests.
    pub(crate) fn nthreads(self) -> usize {
        (self.0 & FIELD_MASK) as usize
    }

    /// Outstanding shrink requests.
    pub(crate) fn victims(self) -> usize {
        ((self.0 >> VICTIMS_SHIFT) & FIELD_MASK) as usize
    }

    /// A growth spawn is reserved and its thread not yet running.
    pub(crate) fn starting(self) -> bool {
        self.0 & STARTING_BIT != 0
    }

    /// Threads once every victim request is won.
    pub(crate) fn effective(self) -> usize {
        self.nthreads().saturating_sub(self.victims())
    }

    /// Live threads not counting a growth spawn still starting, which may
    /// yet fail: the threads that can be relied on to exist.
    fn running(self) -> usize {
        self.nthreads().saturating_sub(usize::from(self.starting()))
    }

    fn generation(self) -> u64 {
        self.0 >> GENERATION_SHIFT
    }

    /// These counts changed, the generation kept.
    fn with(self, nthreads: usize, victims: usize) -> Counts {
        self.with_starting(nthreads, victims, self.starting())
    }

    fn with_starting(self, nthreads: usize, victims: usize, starting: bool) -> Counts {
        Counts(Counts::new(nthreads, victims, starting).0 | self.generation() << GENERATION_SHIFT)
    }

    /// The next generation of limits.
    fn next_generation(self) -> Counts {
        let generation = (self.generation() + 1) & GENERATION_MASK;
        Counts((self.0 & !(GENERATION_MASK << GENERATION_SHIFT)) | generation << GENERATION_SHIFT)
    }
}

impl std::fmt::Debug for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counts")
            .field("nthreads", &self.nthreads())
            .field("victims", &self.victims())
            .field("starting", &self.starting())
            .field("generation", &self.generation())
            .finish()
    }
}

/// What [`PoolCtl::resize`] asks of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Resize {
    /// Threads to spawn, already counted in `nthreads`.
    pub(crate) spawn: usize,
    /// Victim requests added: wake a thread to see them.
    pub(crate) victims_added: usize,
}

/// Control words every policy consults.
#[derive(Debug)]
pub(crate) struct PoolCtl {
    /// Packed [`Counts`]. Every change is one RMW on the whole word, so the
    /// counts are never seen half-changed; see each method for its ordering.
    counts: AtomicU64,
    pub(crate) min: AtomicUsize,
    pub(crate) max: AtomicUsize,
    /// Set once, at shutdown.
    pub(crate) shutdown: AtomicBool,
    pub(crate) idle_timeout: Duration,
    /// loom only: how many more idle timeouts the model may let fire (each
    /// one fires at once when the thread parks without a wake-up token, so
    /// loom explores it against every other step). 0 outside the models
    /// that set it.
    #[cfg(loom)]
    pub(crate) loom_timeouts: AtomicUsize,
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
            counts: AtomicU64::new(Counts::new(nthreads, 0, false).0),
            min: AtomicUsize::new(min),
            max: AtomicUsize::new(max),
            shutdown: AtomicBool::new(false),
            idle_timeout,
            #[cfg(loom)]
            loom_timeouts: AtomicUsize::new(0),
        }
    }

    /// The counts now (a snapshot: they may change at once).
    pub(crate) fn counts(&self) -> Counts {
        // Acquire: pairs with the AcqRel RMWs below, so a caller that acts
        // on the snapshot sees what the changer wrote before it.
        Counts(self.counts.load(Ordering::Acquire))
    }

    /// Changes the counts with `f` (given them and the limits), unless `f`
    /// declines; returns the counts before a change, or the last ones seen.
    /// The limits are loaded after the counts: a `resize` stores them before
    /// its RMW, so either they are the ones of the generation read, or a
    /// newer generation makes our RMW fail and `f` runs again.
    fn update(
        &self,
        mut f: impl FnMut(Counts, usize, usize) -> Option<Counts>,
    ) -> Result<Counts, Counts> {
        // AcqRel on success: the word is the one place the counts live, so
        // each change acquires the changes before it and releases its own.
        // Acquire on the loads: the same, for a change that is refused.
        self.counts
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                let c = Counts(c);
                let min = self.min.load(Ordering::Acquire);
                let max = self.max.load(Ordering::Acquire);
                f(c, min, max).map(|n| n.0)
            })
            .map(Counts)
            .map_err(Counts)
    }

    /// Whether a thread must come and look: shutdown or a shrink request.
    /// (Pending tasks are checked by the policy.)
    pub(crate) fn control_pending(&self) -> bool {
        // SeqCst: read after a fence of pair 1 (going idle), whose other side
        // is `resize` adding victims then `wake_for_control` fencing.
        self.shutdown.load(Ordering::SeqCst)
            || Counts(self.counts.load(Ordering::SeqCst)).victims() > 0
    }

    /// Returns the reason the calling thread must exit, claiming a victim
    /// request if one is outstanding.
    ///
    /// A request is won only while the threads running without it stay at
    /// or above the minimum; otherwise it is dropped (it was made for a
    /// thread that is gone: one retired or a growth spawn that failed), so
    /// shrink requests and retirements together never leave a pool below its
    /// minimum.
    pub(crate) fn claim_exit(&self, counters: &PoolCounters) -> Option<ExitReason> {
        if self.shutdown.load(Ordering::Acquire) {
            return Some(ExitReason::Shutdown);
        }
        // The common case, no request, is one load.
        if self.counts().victims() == 0 {
            return None;
        }
        // Set by the closure's last run, the one whose RMW took effect.
        let mut exit = false;
        let won = self.update(|c, min, _| {
            let v = c.victims();
            if v == 0 {
                return None;
            }
            // `running() - 1` threads remain if this one exits.
            exit = c.running() > min;
            Some(c.with(c.nthreads() - usize::from(exit), v - 1))
        });
        if won.is_ok() && exit {
            counters.victims.fetch_add(1, Ordering::Relaxed);
            return Some(ExitReason::Victim);
        }
        None
    }

    /// The idle timeout if this thread could retire now.
    pub(crate) fn retire_timeout(&self) -> Option<Duration> {
        // Relaxed: a hint; `reserve_retirement` decides.
        let c = Counts(self.counts.load(Ordering::Relaxed));
        let above_min = c.effective() > self.min.load(Ordering::Relaxed);
        #[cfg(loom)]
        let above_min = above_min
            && self
                .loom_timeouts
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok();
        above_min.then_some(self.idle_timeout)
    }

    /// Reserves one retirement: `nthreads -= 1` if the effective count (the
    /// threads left once the outstanding victims exit) stays >= min.
    pub(crate) fn reserve_retirement(&self) -> bool {
        self.update(|c, min, _| {
            (c.effective() > min && c.running() > min)
                .then(|| c.with(c.nthreads() - 1, c.victims()))
        })
        .is_ok()
    }

    pub(crate) fn cancel_retirement(&self) {
        // AcqRel: as in `update`.
        self.counts.fetch_add(Counts::ONE_THREAD, Ordering::AcqRel);
    }

    /// Reserves one growth spawn: one at a time, never above max.
    pub(crate) fn reserve_growth(&self) -> bool {
        if self.shutdown.load(Ordering::Acquire) {
            return false;
        }
        // Cheap look first: most dispatches find a spawn in progress or the
        // pool at its maximum, and write nothing.
        let c = self.counts();
        if c.starting() || c.nthreads() >= self.max.load(Ordering::Acquire) {
            return false;
        }
        self.update(|c, _, max| {
            (!c.starting() && c.nthreads() < max)
                .then(|| c.with_starting(c.nthreads() + 1, c.victims(), true))
        })
        .is_ok()
    }

    /// The growth thread runs: the next growth may start.
    pub(crate) fn finish_growth(&self) {
        // AcqRel: as in `update`; the next grower sees this thread registered.
        self.counts.fetch_and(!STARTING_BIT, Ordering::AcqRel);
    }

    /// The growth spawn failed: uncount its thread. A victim request made
    /// while it was counted is dropped with it (the thread it asked for is
    /// the one that never started).
    pub(crate) fn cancel_growth(&self) {
        let _ = self.update(|c, _, _| {
            Some(c.with_starting(
                c.nthreads().saturating_sub(1),
                c.victims().saturating_sub(1),
                false,
            ))
        });
    }

    /// `n` threads counted by `resize` will not be spawned: uncount them.
    pub(crate) fn cancel_spawn(&self, n: usize) {
        // (`resize` leaves no victims when it grows, so these are plain
        // threads; saturating, so a miscount can never borrow from the
        // victims field.)
        let _ = self.update(|c, _, _| Some(c.with(c.nthreads().saturating_sub(n), c.victims())));
    }

    /// Undoes a [`resize`](Self::resize) whose change was refused: restores
    /// the limits `min`/`max`, withdraws the shrink requests it added that
    /// no thread has won yet, and asks its `plan.spawn` spawned threads to
    /// exit (victim requests: the caller wakes a thread). Returns whether
    /// requests were added.
    pub(crate) fn undo_resize(&self, min: usize, max: usize, plan: Resize) -> bool {
        // Release: as in `resize`; the new generation below publishes them.
        self.min.store(min, Ordering::Release);
        self.max.store(max, Ordering::Release);
        let _ = self.update(|c, _, _| {
            let v = c.victims().saturating_sub(plan.victims_added) + plan.spawn;
            Some(c.with(c.nthreads(), v).next_generation())
        });
        plan.spawn > 0
    }

    /// Sets the limits and moves the effective count into them: withdraws
    /// shrink requests and counts new threads (returned in `spawn`, for the
    /// caller to start), or adds shrink requests (`victims_added`, for the
    /// caller to wake a thread). A pool short of its minimum, however it got
    /// there, is grown back. Callers are serialised (the admin lock).
    pub(crate) fn resize(&self, min: usize, max: usize) -> Resize {
        // Release: a thread that acquires the counts word after the update
        // below sees these limits.
        self.min.store(min, Ordering::Release);
        self.max.store(max, Ordering::Release);
        let mut plan = Resize {
            spawn: 0,
            victims_added: 0,
        };
        // One RMW reads the counts and changes them together: a victim won
        // meanwhile fails the RMW, which then re-reads both. It always
        // writes a new generation, so that a change checked against the old
        // limits fails its own RMW (see `Counts`).
        let _ = self.update(|c, _, _| {
            let (n, v) = (c.nthreads(), c.victims());
            let effective = c.effective();
            let target = effective.clamp(min, max);
            let (n, v, spawn, added) = if target > effective {
                let need = target - effective;
                let withdrawn = need.min(v);
                (n + need - withdrawn, v - withdrawn, need - withdrawn, 0)
            } else {
                let added = effective - target;
                (n, v + added, 0, added)
            };
            plan = Resize {
                spawn,
                victims_added: added,
            };
            Some(c.with(n, v).next_generation())
        });
        plan
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn fields(c: Counts) -> (usize, usize, bool) {
        (c.nthreads(), c.victims(), c.starting())
    }

    fn ctl(nthreads: usize, min: usize, max: usize) -> PoolCtl {
        PoolCtl::new(nthreads, min, max, Duration::from_secs(1))
    }

    /// `--min-threads 1 --max-threads 2`, two idle threads, `threads 1`; then
    /// one thread's idle timeout fires before the victim wakes. The reviewer's
    /// hang: both exited and the pool had no thread left.
    #[test]
    fn an_idle_timeout_during_a_shrink_takes_no_second_thread() {
        let ctl = ctl(2, 1, 2);
        let counters = PoolCounters::default();
        let plan = ctl.resize(1, 1);
        assert_eq!(
            plan,
            Resize {
                spawn: 0,
                victims_added: 1
            }
        );
        // The timed-out thread may not retire: the victim is the one exit the
        // pool can afford.
        assert_eq!(ctl.retire_timeout(), None);
        assert!(!ctl.reserve_retirement(), "{:?}", ctl.counts());
        assert_eq!(ctl.claim_exit(&counters), Some(ExitReason::Victim));
        assert_eq!(ctl.claim_exit(&counters), None);
        assert_eq!(fields(ctl.counts()), (1, 0, false));
        assert!(!ctl.reserve_retirement());
    }

    /// Retirement above the minimum still works, and leaves the victims
    /// their threads.
    #[test]
    fn retirement_counts_outstanding_victims() {
        let ctl = ctl(4, 1, 4);
        let counters = PoolCounters::default();
        assert_eq!(ctl.resize(1, 2).victims_added, 2);
        assert!(ctl.reserve_retirement());
        assert!(!ctl.reserve_retirement(), "{:?}", ctl.counts());
        assert_eq!(ctl.claim_exit(&counters), Some(ExitReason::Victim));
        assert_eq!(ctl.claim_exit(&counters), Some(ExitReason::Victim));
        assert_eq!(ctl.claim_exit(&counters), None);
        assert_eq!(fields(ctl.counts()), (1, 0, false));
    }

    /// A shrink counted a growth thread that is still starting: the running
    /// thread does not exit for it, whether the spawn then succeeds or fails.
    #[test]
    fn a_victim_request_never_takes_the_pool_below_its_minimum() {
        let fresh = ctl;
        for spawned in [true, false] {
            let ctl = fresh(1, 1, 2);
            let counters = PoolCounters::default();
            assert!(ctl.reserve_growth());
            assert_eq!(ctl.resize(1, 1).victims_added, 1);
            assert_eq!(ctl.claim_exit(&counters), None, "{:?}", ctl.counts());
            if spawned {
                ctl.finish_growth();
                assert_eq!(fields(ctl.counts()), (2, 0, false));
            } else {
                ctl.cancel_growth();
                assert_eq!(fields(ctl.counts()), (1, 0, false));
            }
            // And a failed spawn that comes first drops the request with it.
            let first = fresh(1, 1, 2);
            assert!(first.reserve_growth());
            assert_eq!(first.resize(1, 1).victims_added, 1);
            first.cancel_growth();
            assert_eq!(fields(first.counts()), (1, 0, false));
            assert_eq!(first.claim_exit(&counters), None);
        }
    }

    /// A pool short of its minimum (however it got there) is grown back by
    /// the next resize, even to the limits already in force.
    #[test]
    fn resize_to_the_same_limits_repairs_a_short_pool() {
        let ctl = ctl(0, 1, 1);
        assert_eq!(
            ctl.resize(1, 1),
            Resize {
                spawn: 1,
                victims_added: 0
            }
        );
        assert_eq!(fields(ctl.counts()), (1, 0, false));
        assert_eq!(
            ctl.resize(1, 1),
            Resize {
                spawn: 0,
                victims_added: 0
            }
        );
    }
}
