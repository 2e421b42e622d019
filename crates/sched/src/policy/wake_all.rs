//! Baseline `wakeall`: one mutex, one FIFO, and a condition-variable
//! broadcast on every enqueue. Every waiting thread wakes, all but one find
//! nothing: the thundering herd. Kept to measure against.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use crate::pool::{ExitReason, Next, Pool, WorkerSlot};
use crate::sync::{lock, Condvar, Mutex, MutexGuard};
use crate::task::Task;

#[derive(Debug)]
pub(crate) struct WakeAll<T> {
    synced: Mutex<Synced<T>>,
    cond: Condvar,
    idle: AtomicU64,
    waking: AtomicU64,
}

#[derive(Debug)]
struct Synced<T> {
    queue: VecDeque<Arc<Task<T>>>,
    /// Threads blocked in `wait` and not yet signalled.
    waiting: u64,
    /// Threads signalled by a broadcast that have not run yet.
    waking: u64,
    /// Bumped by every broadcast, so a waiter can tell a broadcast from a
    /// spurious wake-up or a timeout.
    generation: u64,
}

impl<T> WakeAll<T> {
    pub(crate) fn new() -> Self {
        WakeAll {
            synced: Mutex::new(Synced {
                queue: VecDeque::new(),
                waiting: 0,
                waking: 0,
                generation: 0,
            }),
            cond: Condvar::new(),
            idle: AtomicU64::new(0),
            waking: AtomicU64::new(0),
        }
    }

    pub(crate) fn idle_hint(&self) -> u64 {
        self.idle.load(Relaxed)
    }

    pub(crate) fn waking_hint(&self) -> u64 {
        self.waking.load(Relaxed)
    }

    fn mirror(&self, g: &Synced<T>) {
        self.idle.store(g.waiting, Relaxed);
        self.waking.store(g.waking, Relaxed);
    }

    /// Marks every waiter as woken; returns how many there were.
    fn broadcast(&self, g: &mut Synced<T>, pool: &Pool<T>) -> u64 {
        let n = g.waiting;
        if n > 0 {
            g.waking += n;
            g.waiting = 0;
            g.generation += 1;
            self.mirror(g);
            pool.counters.note_waking(g.waking);
            pool.counters.wakeups.fetch_add(n, Relaxed);
        }
        n
    }

    pub(crate) fn enqueue(&self, pool: &Pool<T>, task: Arc<Task<T>>) {
        let n = {
            let mut g = lock(&self.synced);
            g.queue.push_back(task);
            self.broadcast(&mut g, pool)
        };
        if n > 0 {
            self.cond.notify_all();
        }
    }

    pub(crate) fn wake_for_control(&self, pool: &Pool<T>) {
        let n = self.broadcast(&mut lock(&self.synced), pool);
        if n > 0 {
            self.cond.notify_all();
        }
    }

    fn wait<'a>(
        &self,
        g: MutexGuard<'a, Synced<T>>,
        pool: &Pool<T>,
    ) -> (MutexGuard<'a, Synced<T>>, bool) {
        match pool.ctl.retire_timeout() {
            Some(t) => match self.cond.wait_timeout(g, t) {
                Ok((g, r)) => (g, r.timed_out()),
                Err(p) => {
                    let (g, r) = p.into_inner();
                    (g, r.timed_out())
                }
            },
            None => (self.cond.wait(g).unwrap_or_else(|p| p.into_inner()), false),
        }
    }

    pub(crate) fn next_work(&self, pool: &Pool<T>, me: &WorkerSlot<T>) -> Next<T> {
        let mut g = lock(&self.synced);
        let mut woken = false;
        loop {
            if let Some(reason) = pool.ctl.claim_exit(&pool.counters) {
                let n = if !g.queue.is_empty() || pool.ctl.control_pending() {
                    self.broadcast(&mut g, pool)
                } else {
                    0
                };
                drop(g);
                if n > 0 {
                    self.cond.notify_all();
                }
                return Next::Exit(reason);
            }
            if let Some(task) = g.queue.pop_front() {
                return Next::Work(task);
            }
            if woken {
                me.stats.wasted_wakeups.fetch_add(1, Relaxed);
            }
            g.waiting += 1;
            self.mirror(&g);
            let generation = g.generation;
            let (g2, timed_out) = self.wait(g, pool);
            g = g2;
            if g.generation != generation {
                g.waking -= 1;
                woken = true;
            } else {
                g.waiting -= 1;
                woken = false;
                if timed_out && pool.ctl.reserve_retirement() {
                    self.mirror(&g);
                    pool.counters.retired.fetch_add(1, Relaxed);
                    return Next::Exit(ExitReason::Retired);
                }
            }
            self.mirror(&g);
        }
    }
}
