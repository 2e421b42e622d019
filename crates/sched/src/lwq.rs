//! The pending-work queue: Linux's lwq ("light-weight queue", lib/lwq.c) in Rust.
//!
//! Producers push onto `new`, a Treiber stack, with one CAS and no lock.
//! Consumers take the lock, and when `ready` is empty move the whole of `new`
//! over with one swap, reversing it so the oldest task comes out first. Pops
//! are O(1) amortised and a consumer holds the lock for a few instructions.
//!
//! Invariants:
//! - every task in `ready` is older than every task in `new`;
//! - producers touch only `new`'s head; `ready` changes only under `lock`;
//! - a task is on the queue at most once (its owner holds `BUSY`, see
//!   `task.rs`), so a push never races a pop of the same node: no ABA;
//! - empty ⇔ `new` and `ready` are both null. While `new` is being moved,
//!   `ready` holds [`REFILLING`], so [`Lwq::is_empty`] never sees a false empty.
//!
//! [`Lwq::len_estimate`] counts pushes and pops (only in a queue made
//! [`Lwq::counted`]: the default `lwq` bound of 1 never reads the count and
//! pays nothing for it): a producer counts before it
//! pushes (on the line of `new`, which it is about to write anyway), a
//! consumer after it pops, under the lock (a plain store, not a read-modify-
//! write). It is a hint: it may be off by the pushes and pops in flight.

use std::ptr::{self, NonNull};
use std::sync::Arc;

use crate::sync::{lock, AtomicPtr, AtomicU64, Mutex, Ordering};
use crate::task::Task;

/// The queue. Owns one `Arc<Task<T>>` strong count per queued task, held as
/// a raw pointer from `Arc::into_raw`.
pub(crate) struct Lwq<T> {
    /// Producers' LIFO. Written by producers (CAS) and by the consumer that
    /// swaps it out under `lock`.
    new: AtomicPtr<Task<T>>,
    /// Tasks ever pushed: incremented by producers before their push.
    pushed: AtomicU64,
    /// Consumers' FIFO head, or `REFILLING`. Written only under `lock`; read
    /// without it by `is_empty`.
    ready: AtomicPtr<Task<T>>,
    /// Tasks ever popped: stored only under `lock`, after a pop.
    popped: AtomicU64,
    /// Whether `pushed` and `popped` are kept.
    counted: bool,
    lock: Mutex<()>,
}

// SAFETY: the raw pointers are owned `Arc<Task<T>>`s; moving them between
// threads is sending an `Arc<Task<T>>`, which is Send + Sync when T is.
unsafe impl<T: Send + Sync> Send for Lwq<T> {}
// SAFETY: as above; all shared mutation goes through atomics or `lock`.
unsafe impl<T: Send + Sync> Sync for Lwq<T> {}

fn refilling<T>() -> *mut Task<T> {
    // Never dereferenced: only compared. A real allocation is never at the
    // dangling address (it is below the first page).
    NonNull::dangling().as_ptr()
}

impl<T> Lwq<T> {
    /// An empty queue that keeps no count ([`Lwq::len_estimate`] is 0).
    pub(crate) fn new() -> Self {
        Self::with_count(false)
    }

    /// An empty queue that counts its pushes and pops for
    /// [`Lwq::len_estimate`].
    pub(crate) fn counted() -> Self {
        Self::with_count(true)
    }

    fn with_count(counted: bool) -> Self {
        Lwq {
            new: AtomicPtr::new(ptr::null_mut()),
            pushed: AtomicU64::new(0),
            ready: AtomicPtr::new(ptr::null_mut()),
            popped: AtomicU64::new(0),
            counted,
            lock: Mutex::new(()),
        }
    }

    /// Pushes `task` (whose owner holds `BUSY`). Never blocks, never locks.
    pub(crate) fn push(&self, task: Arc<Task<T>>) {
        if self.counted {
            // Relaxed: the count is a hint (`len_estimate`); the release CAS
            // below orders it before the task's pop and so before the pop's count.
            self.pushed.fetch_add(1, Ordering::Relaxed);
        }
        let node = Arc::into_raw(task).cast_mut();
        let mut head = self.new.load(Ordering::Relaxed);
        loop {
            // SAFETY: `node` came from `Arc::into_raw` above and is not yet
            // published, so we are its only user and it is alive.
            unsafe { (*node).next.store(head, Ordering::Relaxed) };
            // Release: the consumer's acquire swap sees `next` and the
            // task's `enqueued_at` written before this CAS.
            match self
                .new
                .compare_exchange_weak(head, node, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(actual) => head = actual,
            }
        }
    }

    /// Pops the oldest task, if any.
    pub(crate) fn pop(&self) -> Option<Arc<Task<T>>> {
        if self.is_empty() {
            return None;
        }
        let _guard = lock(&self.lock);
        let mut head = self.ready.load(Ordering::Relaxed);
        if head.is_null() {
            if self.new.load(Ordering::Relaxed).is_null() {
                return None;
            }
            // Release: a reader that sees `new` emptied by the swap below
            // (the swap is AcqRel) then sees REFILLING or later here.
            self.ready.store(refilling(), Ordering::Release);
            // AcqRel: acquire the producers' pushes; release REFILLING.
            let chain = self.new.swap(ptr::null_mut(), Ordering::AcqRel);
            // SAFETY: the swap detached the chain; every node in it is a live
            // `Arc` that only this lock holder can reach now.
            head = unsafe { reverse(chain) };
        }
        debug_assert!(!head.is_null() && head != refilling());
        // SAFETY: `head` is a live node of `ready`, reachable only under the lock.
        let next = unsafe { (*head).next.load(Ordering::Relaxed) };
        // Release: pairs with `is_empty`'s acquire load.
        self.ready.store(next, Ordering::Release);
        if self.counted {
            // Only lock holders write `popped`. Release: a reader that sees
            // this count also sees the pushes counted before the tasks it covers.
            let popped = self.popped.load(Ordering::Relaxed);
            self.popped.store(popped + 1, Ordering::Release);
        }
        // SAFETY: `head` came from `Arc::into_raw` in `push` and has been
        // unlinked, so this takes back the strong count the queue held.
        Some(unsafe { Arc::from_raw(head) })
    }

    /// About how many tasks are queued: pushes counted minus pops counted,
    /// off by the pushes and pops in flight. A hint for how many threads to
    /// wake, never a reason to skip a wake-up the protocol needs.
    pub(crate) fn len_estimate(&self) -> u64 {
        // Acquire: the pushes of the tasks whose pops we see are seen below,
        // so the difference does not go below zero (saturating regardless).
        let popped = self.popped.load(Ordering::Acquire);
        self.pushed.load(Ordering::Relaxed).saturating_sub(popped)
    }

    /// Whether the queue looks empty. Exact when nothing runs concurrently;
    /// under concurrency it never reports a false empty for a task pushed
    /// before a `SeqCst` fence that precedes this call (see module docs).
    pub(crate) fn is_empty(&self) -> bool {
        // `new` first: if it was emptied by a consumer's swap (acquired
        // here), that consumer's earlier REFILLING store is visible below.
        self.new.load(Ordering::Acquire).is_null() && self.ready.load(Ordering::Acquire).is_null()
    }
}

/// Reverses a `next`-linked chain in place, returning the new head.
///
/// # Safety
/// Every node in the chain must be alive and exclusively owned by the caller.
unsafe fn reverse<T>(mut node: *mut Task<T>) -> *mut Task<T> {
    let mut reversed = ptr::null_mut();
    while !node.is_null() {
        // SAFETY: guaranteed by the caller for every node of the chain.
        let next = unsafe { (*node).next.load(Ordering::Relaxed) };
        // SAFETY: as above.
        unsafe { (*node).next.store(reversed, Ordering::Relaxed) };
        reversed = node;
        node = next;
    }
    reversed
}

impl<T> Drop for Lwq<T> {
    fn drop(&mut self) {
        while self.pop().is_some() {}
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn task(n: u32) -> Arc<Task<u32>> {
        Arc::new(Task::new(n, 0))
    }

    #[test]
    fn fifo_across_refills() {
        let q = Lwq::new();
        assert!(q.is_empty());
        for n in 0..5 {
            q.push(task(n));
        }
        assert_eq!(q.pop().map(|t| **t), Some(0));
        q.push(task(5));
        q.push(task(6));
        let rest: Vec<u32> = std::iter::from_fn(|| q.pop().map(|t| **t)).collect();
        assert_eq!(rest, vec![1, 2, 3, 4, 5, 6]);
        assert!(q.is_empty());
        assert!(q.pop().is_none());
    }

    #[test]
    fn len_estimate_counts_pushes_less_pops() {
        let q = Lwq::counted();
        assert_eq!(q.len_estimate(), 0);
        for n in 0..3 {
            q.push(task(n));
        }
        assert_eq!(q.len_estimate(), 3);
        assert!(q.pop().is_some());
        q.push(task(3));
        assert_eq!(q.len_estimate(), 3);
        while q.pop().is_some() {}
        assert_eq!(q.len_estimate(), 0);
    }

    #[test]
    fn drop_releases_queued_tasks() {
        let t = task(1);
        let q = Lwq::new();
        q.push(Arc::clone(&t));
        assert_eq!(Arc::strong_count(&t), 2);
        drop(q);
        assert_eq!(Arc::strong_count(&t), 1);
    }

    #[test]
    fn concurrent_producers_and_consumers_lose_nothing() {
        const PRODUCERS: u32 = 4;
        const PER: u32 = 20_000;
        let q = Arc::new(Lwq::new());
        let seen = Arc::new(Mutex::new(vec![0u8; (PRODUCERS * PER) as usize]));
        let done = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let mut handles = Vec::new();
        for p in 0..PRODUCERS {
            let q = Arc::clone(&q);
            handles.push(std::thread::spawn(move || {
                for i in 0..PER {
                    q.push(task(p * PER + i));
                }
            }));
        }
        for _ in 0..2 {
            let (q, seen, done) = (Arc::clone(&q), Arc::clone(&seen), Arc::clone(&done));
            handles.push(std::thread::spawn(move || {
                while done.load(Ordering::Relaxed) < PRODUCERS * PER {
                    if let Some(t) = q.pop() {
                        seen.lock().unwrap()[**t as usize] += 1;
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
        for h in handles {
            h.join().unwrap();
        }
        assert!(seen.lock().unwrap().iter().all(|&c| c == 1));
        assert!(q.is_empty());
    }
}
