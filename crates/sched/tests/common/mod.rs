//! Shared test handler: each task is a transport with an inbox of items;
//! one handle takes one item ("one record"), releases, then processes it.

#![allow(dead_code, unreachable_pub)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rnfs_sched::{Claim, Enqueuer, Handler, Scheduler, Task};

#[derive(Debug, Default)]
pub struct Inbox {
    pub items: Mutex<VecDeque<u64>>,
    pub owner: AtomicBool,
}

#[derive(Debug)]
pub struct Counting {
    /// `seen[item]` counts how often each item was processed.
    pub seen: Vec<AtomicU8>,
    pub processed: AtomicUsize,
    pub in_flight: AtomicUsize,
    pub peak_in_flight: AtomicUsize,
    pub work: Duration,
    pub panic_on: Option<u64>,
}

impl Counting {
    pub fn new(items: usize, work: Duration) -> Self {
        Counting {
            seen: (0..items).map(|_| AtomicU8::new(0)).collect(),
            processed: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            peak_in_flight: AtomicUsize::new(0),
            work,
            panic_on: None,
        }
    }
}

impl Handler for Counting {
    type Item = Inbox;
    type ThreadState = ();

    fn thread_state(&self, _pool: usize) {}

    fn handle(&self, claim: Claim<'_, Inbox>, _: &mut ()) {
        assert!(
            !claim.owner.swap(true, Ordering::SeqCst),
            "two owners of one task"
        );
        claim.take_data();
        let (item, more) = {
            let mut q = claim.items.lock().unwrap();
            (q.pop_front(), !q.is_empty())
        };
        claim.owner.store(false, Ordering::SeqCst);
        claim.release(more);
        let Some(item) = item else { return };
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak_in_flight.fetch_max(now, Ordering::SeqCst);
        if Some(item) == self.panic_on {
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            self.seen[item as usize].fetch_add(1, Ordering::SeqCst);
            self.processed.fetch_add(1, Ordering::SeqCst);
            panic!("injected handler panic");
        }
        if !self.work.is_zero() {
            std::thread::sleep(self.work);
        }
        self.seen[item as usize].fetch_add(1, Ordering::SeqCst);
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.processed.fetch_add(1, Ordering::SeqCst);
    }
}

pub fn push(enq: &Enqueuer<Inbox>, task: &Arc<Task<Inbox>>, item: u64) {
    task.items.lock().unwrap().push_back(item);
    enq.notify(task);
}

/// Polls `cond` until it holds or `limit` passes.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    cond()
}

pub fn processed(s: &Scheduler<Counting>) -> usize {
    s.handler().processed.load(Ordering::SeqCst)
}
