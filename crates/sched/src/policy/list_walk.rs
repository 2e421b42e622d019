//! Baseline `listwalk`: one pool mutex guards a FIFO of pending tasks, and
//! every enqueue walks the list of all threads for an idle one. Finding a
//! thread costs O(threads) under the lock: Linux before 6.6
//! (`svc_xprt_do_enqueue` walking `sp_all_threads`). Kept to measure against.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use crate::pool::{ExitReason, Next, Pool, WorkerSlot};
use crate::sync::{lock, Mutex};
use crate::task::Task;

#[derive(Debug)]
pub(crate) struct ListWalk<T> {
    synced: Mutex<Synced<T>>,
    /// Mirrors of `Synced::{idle, waking}` for lock-free stats reads.
    idle: AtomicU64,
    waking: AtomicU64,
}

#[derive(Debug)]
struct Synced<T> {
    queue: VecDeque<Arc<Task<T>>>,
    /// Every thread, in start order; the walk always starts at the front.
    threads: Vec<Arc<WorkerSlot<T>>>,
    idle: u64,
    waking: u64,
}

impl<T> ListWalk<T> {
    pub(crate) fn new() -> Self {
        ListWalk {
            synced: Mutex::new(Synced {
                queue: VecDeque::new(),
                threads: Vec::new(),
                idle: 0,
                waking: 0,
            }),
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

    pub(crate) fn add_thread(&self, slot: Arc<WorkerSlot<T>>) {
        lock(&self.synced).threads.push(slot);
    }

    pub(crate) fn remove_thread(&self, slot: &WorkerSlot<T>) {
        let mut g = lock(&self.synced);
        if let Some(pos) = g.threads.iter().position(|t| t.id == slot.id) {
            g.threads.remove(pos);
        }
    }

    fn mirror(&self, g: &Synced<T>) {
        self.idle.store(g.idle, Relaxed);
        self.waking.store(g.waking, Relaxed);
    }

    /// The walk: O(threads) under the lock.
    fn claim_first_idle(&self, g: &mut Synced<T>, pool: &Pool<T>) -> Option<Arc<WorkerSlot<T>>> {
        let found = g
            .threads
            .iter()
            .find(|t| t.listed_idle.load(Relaxed))
            .cloned()?;
        found.listed_idle.store(false, Relaxed);
        g.idle -= 1;
        g.waking += 1;
        self.mirror(g);
        pool.counters.note_waking(g.waking);
        pool.counters.wakeups.fetch_add(1, Relaxed);
        Some(found)
    }

    pub(crate) fn enqueue(&self, pool: &Pool<T>, task: Arc<Task<T>>) {
        let woken = {
            let mut g = lock(&self.synced);
            g.queue.push_back(task);
            self.claim_first_idle(&mut g, pool)
        };
        if let Some(slot) = woken {
            slot.notify();
        }
    }

    pub(crate) fn wake_for_control(&self, pool: &Pool<T>) {
        let shutdown = pool.ctl.shutdown.load(Relaxed);
        let mut woken = Vec::new();
        {
            let mut g = lock(&self.synced);
            while let Some(slot) = self.claim_first_idle(&mut g, pool) {
                woken.push(slot);
                if !shutdown {
                    break;
                }
            }
        }
        for slot in woken {
            slot.notify();
        }
    }

    pub(crate) fn next_work(&self, pool: &Pool<T>, me: &WorkerSlot<T>) -> Next<T> {
        let mut g = lock(&self.synced);
        let mut woken = false;
        loop {
            if let Some(reason) = pool.ctl.claim_exit(&pool.counters) {
                let next = if !g.queue.is_empty() || pool.ctl.control_pending() {
                    self.claim_first_idle(&mut g, pool)
                } else {
                    None
                };
                drop(g);
                if let Some(slot) = next {
                    slot.notify();
                }
                return Next::Exit(reason);
            }
            if let Some(task) = g.queue.pop_front() {
                return Next::Work(task);
            }
            if woken {
                me.stats.wasted_wakeups.fetch_add(1, Relaxed);
            }
            me.listed_idle.store(true, Relaxed);
            g.idle += 1;
            self.mirror(&g);
            drop(g);
            loop {
                if me.park_until_notified(pool.ctl.retire_timeout()) {
                    break;
                }
                if self.try_retire(pool, me) {
                    pool.counters.retired.fetch_add(1, Relaxed);
                    return Next::Exit(ExitReason::Retired);
                }
            }
            g = lock(&self.synced);
            g.waking -= 1;
            self.mirror(&g);
            woken = true;
        }
    }

    fn try_retire(&self, pool: &Pool<T>, me: &WorkerSlot<T>) -> bool {
        if !pool.ctl.reserve_retirement() {
            return false;
        }
        let mut g = lock(&self.synced);
        if me.listed_idle.load(Relaxed) {
            me.listed_idle.store(false, Relaxed);
            g.idle -= 1;
            self.mirror(&g);
            return true;
        }
        drop(g);
        pool.ctl.cancel_retirement();
        false
    }
}
