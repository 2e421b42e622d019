//! The public face: start threads, queue tasks, resize, observe, shut down.

use std::cell::Cell;
use std::collections::HashMap;
use std::io;
use std::ops::Deref;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::config::{share, Config, ConfigError, PoolMode, MAX_THREADS};
use crate::cpu::{self, PoolMap};
use crate::futex_hash;
use crate::pool::{Next, Pool, PoolCtl, Resize};
use crate::stats::{new_histogram, SchedStats};
use crate::sync::lock;
use crate::task::{Marked, Released, Task};

/// The work a service thread does with a claimed task.
pub trait Handler: Send + Sync + 'static {
    /// The payload of each task (a transport).
    type Item: Send + Sync + 'static;
    /// Per-thread state (buffers), created on the thread and never shared.
    type ThreadState: 'static;

    /// Creates the state of a new thread of pool `pool`.
    fn thread_state(&self, pool: usize) -> Self::ThreadState;

    /// Handles one claimed task. The claim is this thread's exclusive right
    /// to the task (its `BUSY` flag); release it as soon as one unit of work
    /// (one record) has been taken off the transport, so another thread can
    /// take the next while this one processes.
    fn handle(&self, work: Claim<'_, Self::Item>, state: &mut Self::ThreadState);
}

/// The scheduler could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The configuration is refused.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The OS would not create a thread.
    #[error("cannot start service thread: {0}")]
    Spawn(io::Error),
}

/// A thread-count change was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResizeError {
    /// Fewer threads than pools.
    #[error("{threads} thread(s) cannot serve {pools} pool(s): every pool needs at least one")]
    TooFew {
        /// Requested count.
        threads: usize,
        /// Number of pools.
        pools: usize,
    },
    /// More than [`MAX_THREADS`].
    #[error("{threads} threads exceed the limit of {limit}")]
    TooMany {
        /// Requested count.
        threads: usize,
        /// Upper limit.
        limit: usize,
    },
    /// `min > max`.
    #[error("minimum ({min}) is above maximum ({max})")]
    Order {
        /// Requested minimum.
        min: usize,
        /// Requested maximum.
        max: usize,
    },
    /// The scheduler is shutting down.
    #[error("the scheduler is shutting down")]
    ShuttingDown,
    /// The OS would not create a thread. Nothing changed: the limits are
    /// restored, threads already started for the change are asked to exit
    /// and its shrink requests withdrawn.
    #[error(
        "cannot start service thread: {0} (the thread limits and counts are left as they were)"
    )]
    Spawn(io::Error),
}

struct Core<T> {
    pools: Vec<Pool<T>>,
    map: PoolMap,
}

/// The producer side of a scheduler: queue tasks from any thread (pollers,
/// reply paths). Cheap to clone; does not keep the threads alive.
pub struct Enqueuer<T> {
    core: Arc<Core<T>>,
}

impl<T> Clone for Enqueuer<T> {
    fn clone(&self) -> Self {
        Enqueuer {
            core: Arc::clone(&self.core),
        }
    }
}

impl<T> std::fmt::Debug for Enqueuer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Enqueuer")
            .field("pools", &self.core.pools.len())
            .finish()
    }
}

impl<T> Enqueuer<T> {
    /// Number of pools.
    pub fn pool_count(&self) -> usize {
        self.core.pools.len()
    }

    /// The pool of the CPU the caller runs on.
    pub fn current_pool(&self) -> usize {
        self.core.map.current_pool()
    }

    /// Wraps `item` as a task of pool `pool` (clamped to the pool count).
    pub fn new_task(&self, item: T, pool: usize) -> Arc<Task<T>> {
        Arc::new(Task::new(item, pool.min(self.core.pools.len() - 1)))
    }

    /// The task has work (data arrived): queue it and wake one thread,
    /// unless a thread owns it already, which then re-queues it when it
    /// releases. Never blocks; spurious calls are harmless.
    pub fn notify(&self, task: &Arc<Task<T>>) {
        if task.mark_data() == Marked::MustQueue {
            self.core.pools[task.pool()].enqueue(Arc::clone(task));
        }
    }

    /// The task must close: the next thread to claim it sees
    /// [`Claim::is_closing`] and tears it down.
    pub fn close(&self, task: &Arc<Task<T>>) {
        if task.mark_close() == Marked::MustQueue {
            self.core.pools[task.pool()].enqueue(Arc::clone(task));
        }
    }
}

/// A service thread's exclusive right to a task (its `BUSY` flag).
///
/// Protocol: call [`take_data`](Self::take_data) before reading the
/// transport, then [`release`](Self::release) as soon as one record is out,
/// before processing it. Dropping the claim releases it.
pub struct Claim<'a, T> {
    task: Arc<Task<T>>,
    enqueuer: &'a Enqueuer<T>,
    closing_seen: Cell<bool>,
    released: bool,
}

impl<'a, T> Claim<'a, T> {
    /// The claimed task.
    pub fn task(&self) -> &Arc<Task<T>> {
        &self.task
    }

    /// The scheduler's producer side, to notify other tasks (or this one
    /// later, e.g. when back-pressure lifts).
    pub fn enqueuer(&self) -> &'a Enqueuer<T> {
        self.enqueuer
    }

    /// Whether the task must be torn down. Once this has returned `true`,
    /// releasing the claim leaves the task `BUSY` for ever, so no thread
    /// touches it again.
    pub fn is_closing(&self) -> bool {
        let closing = self.task.is_closing();
        if closing {
            self.closing_seen.set(true);
        }
        closing
    }

    /// Clears the task's `DATA` flag; returns whether it was set. Call it
    /// before reading, so data arriving during the read re-queues the task.
    pub fn take_data(&self) -> bool {
        self.task.take_data()
    }

    /// Releases the task. `more`: the caller already holds further work for
    /// it (a complete record still buffered, or it stopped reading early),
    /// so it is re-queued at the back of the queue (FIFO fairness).
    pub fn release(mut self, more: bool) {
        self.finish(more);
    }

    fn finish(&mut self, more: bool) {
        if std::mem::replace(&mut self.released, true) || self.closing_seen.get() {
            return;
        }
        if self.task.release(more) == Released::MustRequeue {
            self.enqueuer.core.pools[self.task.pool()].enqueue(Arc::clone(&self.task));
        }
    }
}

impl<T> Deref for Claim<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.task.item()
    }
}

impl<T> Drop for Claim<'_, T> {
    fn drop(&mut self) {
        self.finish(false);
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Claim<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claim").field("task", &self.task).finish()
    }
}

struct Shared<H: Handler> {
    enqueuer: Enqueuer<H::Item>,
    handler: H,
    config: Config,
    /// Serialises resizes (Linux's `nfsd_mutex`); workers never take it.
    admin: Mutex<()>,
    /// Join handles of running threads by serial; an exiting thread removes
    /// (detaches) its own, shutdown joins the rest.
    threads: Mutex<HashMap<u64, JoinHandle<()>>>,
    next_serial: AtomicU64,
    /// Tests: spawns allowed before each further one fails.
    #[cfg(test)]
    spawns_left: std::sync::atomic::AtomicUsize,
}

impl<H: Handler> Shared<H> {
    fn pool(&self, i: usize) -> &Pool<H::Item> {
        &self.enqueuer.core.pools[i]
    }

    fn pools(&self) -> &[Pool<H::Item>] {
        &self.enqueuer.core.pools
    }
}

/// A running set of service threads. Dropping it shuts it down.
pub struct Scheduler<H: Handler> {
    shared: Arc<Shared<H>>,
}

impl<H: Handler> std::fmt::Debug for Scheduler<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

impl<H: Handler> Scheduler<H> {
    /// Builds the pools and starts `config.initial_threads` threads.
    pub fn start(config: Config, handler: H) -> Result<Arc<Self>, StartError> {
        let map = PoolMap::build(config.pool_mode);
        let npools = map.pools();
        config.validate(npools)?;
        // `validate` checked initial_threads <= max_threads.
        futex_hash::fit(config.max_threads);
        let epoch = Instant::now();
        let pools = (0..npools)
            .map(|i| {
                let cpus = if config.pin_threads {
                    map.cpus[i].clone()
                } else {
                    Vec::new()
                };
                let initial = share(config.initial_threads, npools, i).max(1);
                let min = share(config.min_threads, npools, i).max(1);
                let max = share(config.max_threads, npools, i).max(initial);
                let ctl = PoolCtl::new(initial, min, max, config.idle_timeout);
                Pool::new(cpus, config.policy, config.max_waking, ctl, epoch)
            })
            .collect();
        let shared = Arc::new(Shared {
            enqueuer: Enqueuer {
                core: Arc::new(Core { pools, map }),
            },
            handler,
            config,
            admin: Mutex::new(()),
            threads: Mutex::new(HashMap::new()),
            next_serial: AtomicU64::new(0),
            #[cfg(test)]
            spawns_left: std::sync::atomic::AtomicUsize::new(usize::MAX),
        });
        let scheduler = Arc::new(Scheduler { shared });
        for (i, pool) in scheduler.shared.pools().iter().enumerate() {
            let n = pool.ctl.counts().nthreads();
            for _ in 0..n {
                spawn_worker(&scheduler.shared, i, false).map_err(StartError::Spawn)?;
            }
        }
        Ok(scheduler)
    }

    /// The handler.
    pub fn handler(&self) -> &H {
        &self.shared.handler
    }

    /// The producer side, for pollers and reply paths.
    pub fn enqueuer(&self) -> &Enqueuer<H::Item> {
        &self.shared.enqueuer
    }

    /// The configuration it was started with.
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// The pool mode in force (`auto` resolved).
    pub fn pool_mode(&self) -> PoolMode {
        self.shared.enqueuer.core.map.mode
    }

    /// Number of pools.
    pub fn pools(&self) -> usize {
        self.shared.pools().len()
    }

    /// The pool of the CPU the caller runs on.
    pub fn current_pool(&self) -> usize {
        self.shared.enqueuer.current_pool()
    }

    /// See [`Enqueuer::new_task`].
    pub fn new_task(&self, item: H::Item, pool: usize) -> Arc<Task<H::Item>> {
        self.shared.enqueuer.new_task(item, pool)
    }

    /// See [`Enqueuer::notify`].
    pub fn notify(&self, task: &Arc<Task<H::Item>>) {
        self.shared.enqueuer.notify(task);
    }

    /// See [`Enqueuer::close`].
    pub fn close(&self, task: &Arc<Task<H::Item>>) {
        self.shared.enqueuer.close(task);
    }

    /// The thread bounds in force, `(min, max)` over all pools: the configured
    /// ones until [`set_limits`](Self::set_limits) or
    /// [`set_threads`](Self::set_threads) changes them. Each pool holds its share;
    /// the shares add up to exactly what was asked (`min` is at least one per
    /// pool, so no pool's share is rounded up).
    pub fn limits(&self) -> (usize, usize) {
        // Under the resize lock, so a concurrent `set_limits` is seen whole rather
        // than pool by pool; the loads need no ordering of their own.
        let _admin = lock(&self.shared.admin);
        self.shared.pools().iter().fold((0, 0), |(min, max), pool| {
            (
                min + pool.ctl.min.load(Ordering::Relaxed),
                max + pool.ctl.max.load(Ordering::Relaxed),
            )
        })
    }

    /// Sets a fixed thread count (automatic sizing off): grows at once, or
    /// asks exactly one thread per surplus thread to exit (it passes pending
    /// work on first). Returns without waiting for the exits.
    pub fn set_threads(&self, threads: usize) -> Result<(), ResizeError> {
        self.set_limits(threads, threads)
    }

    /// Sets the automatic-sizing bounds and moves each pool's count into
    /// them (a pool short of its minimum is grown back even when the bounds
    /// are unchanged). `min == max` fixes the count. If a thread cannot be
    /// started, the change is undone ([`ResizeError::Spawn`]).
    pub fn set_limits(&self, min: usize, max: usize) -> Result<(), ResizeError> {
        let pools = self.pools();
        if min > max {
            return Err(ResizeError::Order { min, max });
        }
        if min < pools {
            return Err(ResizeError::TooFew {
                threads: min,
                pools,
            });
        }
        if max > MAX_THREADS {
            return Err(ResizeError::TooMany {
                threads: max,
                limit: MAX_THREADS,
            });
        }
        let _admin = lock(&self.shared.admin);
        if self
            .shared
            .pools()
            .iter()
            .any(|p| p.ctl.shutdown.load(Ordering::Acquire))
        {
            return Err(ResizeError::ShuttingDown);
        }
        futex_hash::fit(max);
        let limits: Vec<(usize, usize)> = (0..pools)
            .map(|i| {
                let pmin = share(min, pools, i).max(1);
                (pmin, share(max, pools, i).max(pmin))
            })
            .collect();
        let before: Vec<(usize, usize)> = self
            .shared
            .pools()
            .iter()
            .map(|p| {
                // Relaxed: only `set_limits` stores them, under `admin`.
                (
                    p.ctl.min.load(Ordering::Relaxed),
                    p.ctl.max.load(Ordering::Relaxed),
                )
            })
            .collect();
        // Pools that must grow go first, so that a spawn failure finds no
        // shrink request of this change made yet (one already won could not
        // be undone).
        let mut order: Vec<usize> = (0..pools).collect();
        order.sort_by_key(|&i| self.shared.pool(i).ctl.counts().effective() >= limits[i].0);
        let mut done = Vec::with_capacity(pools);
        for i in order {
            let pool = self.shared.pool(i);
            let (pmin, pmax) = limits[i];
            let plan = pool.ctl.resize(pmin, pmax);
            if plan.victims_added > 0 {
                pool.wake_for_control();
            }
            for started in 0..plan.spawn {
                if let Err(e) = spawn_worker(&self.shared, i, false) {
                    pool.ctl.cancel_spawn(plan.spawn - started);
                    done.push((
                        i,
                        Resize {
                            spawn: started,
                            ..plan
                        },
                    ));
                    // A refused request changes nothing: every pool changed
                    // so far gets its limits back, the threads started for
                    // it are asked to exit, its shrink requests withdrawn.
                    for (j, plan) in done {
                        let pool = self.shared.pool(j);
                        let (min, max) = before[j];
                        if pool.ctl.undo_resize(min, max, plan) {
                            pool.wake_for_control();
                        }
                    }
                    return Err(ResizeError::Spawn(e));
                }
                pool.counters.spawned.fetch_add(1, Ordering::Relaxed);
            }
            done.push((i, plan));
        }
        Ok(())
    }

    /// A snapshot of every counter.
    pub fn stats(&self) -> SchedStats {
        let mut handoff = new_histogram();
        let pools = self
            .shared
            .pools()
            .iter()
            .map(|p| {
                let (stats, acc) = p.stats();
                let _ = handoff.add(&acc.handoff);
                stats
            })
            .collect();
        SchedStats {
            policy: self.shared.config.policy,
            pool_mode: self.pool_mode(),
            max_waking: self.shared.config.max_waking as u64,
            pools,
            handoff_ns: handoff,
        }
    }

    /// Zeroes counters and histograms (gauges such as `threads` stay).
    pub fn reset_stats(&self) {
        for p in self.shared.pools() {
            p.reset_stats();
        }
    }

    /// Stops every thread: idle ones at once, busy ones after their current
    /// task; then joins them. Idempotent. Tasks still queued are dropped.
    pub fn shutdown(&self) {
        for p in self.shared.pools() {
            p.ctl.shutdown.store(true, Ordering::SeqCst);
        }
        for p in self.shared.pools() {
            p.wake_for_control();
        }
        let handles: Vec<JoinHandle<()>> =
            lock(&self.shared.threads).drain().map(|(_, h)| h).collect();
        let me = std::thread::current().id();
        for h in handles {
            if h.thread().id() != me {
                let _ = h.join();
            }
        }
    }
}

impl<H: Handler> Drop for Scheduler<H> {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn spawn_worker<H: Handler>(shared: &Arc<Shared<H>>, pool: usize, growth: bool) -> io::Result<()> {
    #[cfg(test)]
    if shared
        .spawns_left
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_err()
    {
        return Err(io::Error::other("injected spawn failure"));
    }
    let serial = shared.next_serial.fetch_add(1, Ordering::Relaxed);
    let s = Arc::clone(shared);
    // Spawn under the lock so the thread cannot remove its entry before it
    // is inserted.
    let mut threads = lock(&shared.threads);
    let handle = std::thread::Builder::new()
        .name(format!("{}-p{pool}", shared.config.name))
        .spawn(move || worker_main(&s, pool, serial, growth))?;
    threads.insert(serial, handle);
    Ok(())
}

fn worker_main<H: Handler>(shared: &Arc<Shared<H>>, index: usize, serial: u64, growth: bool) {
    let pool = shared.pool(index);
    cpu::pin_current_thread(&pool.cpus);
    let slot = pool.register();
    if growth {
        pool.counters.spawned.fetch_add(1, Ordering::Relaxed);
        pool.ctl.finish_growth();
    }
    let mut state = shared.handler.thread_state(index);
    let reason = loop {
        match pool.next_work(&slot) {
            Next::Work(task) => {
                let queued = task.enqueued_at.load(Ordering::Relaxed);
                slot.stats
                    .record_dispatch(pool.now_ns().saturating_sub(queued));
                maybe_grow(shared, index);
                let claim = Claim {
                    task,
                    enqueuer: &shared.enqueuer,
                    closing_seen: Cell::new(false),
                    released: false,
                };
                let outcome = catch_unwind(AssertUnwindSafe(|| {
                    shared.handler.handle(claim, &mut state);
                }));
                if outcome.is_err() {
                    tracing::error!(
                        pool = index,
                        "service handler panicked; task released, thread continues"
                    );
                }
            }
            Next::Exit(reason) => break reason,
        }
    };
    drop(state);
    pool.unregister(&slot);
    tracing::debug!(pool = index, ?reason, "service thread exiting");
    lock(&shared.threads).remove(&serial);
}

/// Grow by one thread when work finds no idle thread left (Linux 7.0's
/// dynamic pools: `-EBUSY` from `svc_recv`).
fn maybe_grow<H: Handler>(shared: &Arc<Shared<H>>, index: usize) {
    let pool = shared.pool(index);
    if pool.idle_hint() > 0 || !pool.ctl.reserve_growth() {
        return;
    }
    if let Err(e) = spawn_worker(shared, index, true) {
        pool.ctl.cancel_growth();
        tracing::warn!(pool = index, error = %e, "cannot grow thread pool");
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    struct Idle;

    impl Handler for Idle {
        type Item = ();
        type ThreadState = ();
        fn thread_state(&self, _: usize) {}
        fn handle(&self, _: Claim<'_, ()>, _: &mut ()) {}
    }

    fn threads(s: &Scheduler<Idle>) -> u64 {
        s.stats().total().threads
    }

    /// A grow whose second spawn fails is refused and changes nothing: the
    /// limits stay, and the thread it did start exits again.
    #[test]
    fn a_refused_grow_changes_nothing() {
        let config = Config {
            initial_threads: 2,
            min_threads: 2,
            max_threads: 4,
            pin_threads: false,
            ..Config::default()
        };
        let s = Scheduler::start(config, Idle).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while threads(&s) != 2 {
            assert!(Instant::now() < deadline, "{:?}", s.stats().total());
            std::thread::sleep(Duration::from_millis(5));
        }
        s.shared.spawns_left.store(1, Ordering::Relaxed);
        let err = s.set_limits(4, 8).unwrap_err();
        assert!(matches!(err, ResizeError::Spawn(_)), "{err}");
        assert_eq!(s.limits(), (2, 4));
        assert_eq!(s.shared.pool(0).ctl.counts().effective(), 2);
        while threads(&s) != 2 {
            assert!(Instant::now() < deadline, "{:?}", s.stats().total());
            std::thread::sleep(Duration::from_millis(5));
        }
        // It stays at 2: the one request was won by one thread.
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(threads(&s), 2, "{:?}", s.stats().total());
        s.shared.spawns_left.store(usize::MAX, Ordering::Relaxed);
        s.set_limits(4, 8).unwrap();
        assert_eq!(s.limits(), (4, 8));
    }
}
