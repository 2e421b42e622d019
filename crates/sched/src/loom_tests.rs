//! loom models of the wake protocol (run with `ci/loom.sh`):
//! going idle loses no wake-up, at most one thread waking (and, with a
//! bound of 2, a second one only for a queued task), a woken thread
//! always has work (direct hand-off), the busy flag admits one reader, a
//! shrink request has exactly one victim and passes the work on, an idle
//! timeout racing a shrink leaves the pool its minimum, and shutdown wakes
//! everyone.

use std::sync::Arc;
use std::time::{Duration, Instant};

use loom::sync::{Condvar, Mutex};
use loom::thread;

use crate::pool::{ExitReason, Next, Pool, PoolCtl};
use crate::task::{Marked, Released, Task};
use crate::Policy;

fn pool(threads: usize, min: usize, max_waking: usize) -> Arc<Pool<u32>> {
    pool_with(Policy::Lwq, threads, min, max_waking)
}

fn pool_with(policy: Policy, threads: usize, min: usize, max_waking: usize) -> Arc<Pool<u32>> {
    let ctl = PoolCtl::new(threads, min, threads, Duration::from_secs(5));
    Arc::new(Pool::new(
        Vec::new(),
        policy,
        max_waking,
        ctl,
        Instant::now(),
    ))
}

fn produce(pool: &Pool<u32>, task: &Arc<Task<u32>>) {
    if task.mark_data() == Marked::MustQueue {
        pool.enqueue(Arc::clone(task));
    }
}

/// A count that the main thread can wait on without spinning.
#[derive(Default)]
struct Done {
    n: Mutex<usize>,
    cv: Condvar,
}

impl Done {
    fn add(&self) {
        *self.n.lock().unwrap() += 1;
        self.cv.notify_all();
    }
    fn wait_for(&self, target: usize) {
        let mut n = self.n.lock().unwrap();
        while *n < target {
            n = self.cv.wait(n).unwrap();
        }
    }
}

fn shutdown(pool: &Pool<u32>) {
    pool.ctl.shutdown.store(true, crate::sync::Ordering::SeqCst);
    pool.wake_for_control();
}

/// Runs a worker until it is told to exit; returns why, and what it did.
fn worker(pool: Arc<Pool<u32>>, done: Arc<Done>) -> thread::JoinHandle<ExitReason> {
    thread::spawn(move || {
        let me = pool.register();
        loop {
            match pool.next_work(&me) {
                Next::Work(task) => {
                    task.take_data();
                    if task.release(false) == Released::MustRequeue {
                        pool.enqueue(task);
                    }
                    done.add();
                }
                Next::Exit(reason) => {
                    pool.unregister(&me);
                    return reason;
                }
            }
        }
    })
}

#[test]
fn going_idle_loses_no_wakeup() {
    going_idle_loses_no_wakeup_with(Policy::Lwq);
}

#[test]
fn going_idle_loses_no_wakeup_handoff() {
    going_idle_loses_no_wakeup_with(Policy::LwqHandoff);
}

fn going_idle_loses_no_wakeup_with(policy: Policy) {
    loom::model(move || {
        let pool = pool_with(policy, 1, 1, 1);
        let done = Arc::new(Done::default());
        let w = worker(Arc::clone(&pool), Arc::clone(&done));
        produce(&pool, &Arc::new(Task::new(7, 0)));
        // A lost wake-up leaves the worker parked for ever: loom reports a
        // deadlock here.
        done.wait_for(1);
        shutdown(&pool);
        assert_eq!(w.join().unwrap(), ExitReason::Shutdown);
    });
}

/// Two workers on `pool`, and two producers each queueing one task; returns
/// once both tasks ran, with the workers still running.
fn two_workers_two_producers(pool: &Arc<Pool<u32>>) -> Vec<thread::JoinHandle<ExitReason>> {
    let done = Arc::new(Done::default());
    let workers = (0..2)
        .map(|_| worker(Arc::clone(pool), Arc::clone(&done)))
        .collect();
    let p = Arc::clone(pool);
    let producer = thread::spawn(move || produce(&p, &Arc::new(Task::new(1, 0))));
    produce(pool, &Arc::new(Task::new(2, 0)));
    producer.join().unwrap();
    done.wait_for(2);
    workers
}

#[test]
fn at_most_one_thread_waking() {
    waking_stays_within(1);
}

/// `lwq` with a bound of 2: a second thread is woken only while more tasks
/// are queued than threads waking. That gate never loses a wake-up (both
/// tasks run: a lost one leaves a worker parked and loom reports the
/// deadlock), and the bound holds.
#[test]
fn waking_beyond_one_only_for_queued_tasks_loses_no_wakeup() {
    waking_stays_within(2);
}

/// Two workers, two producers: both tasks run and never more than `bound`
/// threads are woken but not yet running.
fn waking_stays_within(bound: usize) {
    loom::model(move || {
        let pool = pool(2, 2, bound);
        let workers = two_workers_two_producers(&pool);
        let peak = pool
            .counters
            .peak_waking
            .load(std::sync::atomic::Ordering::Relaxed);
        assert!(
            peak <= bound as u64,
            "peak woken-but-not-running {peak} > {bound}"
        );
        shutdown(&pool);
        for w in workers {
            assert_eq!(w.join().unwrap(), ExitReason::Shutdown);
        }
    });
}

/// `lwq-handoff`: two workers, two producers, two tasks: whatever the
/// interleaving (a running worker finishing and looking at the queue while
/// another is being woken for the next task), no worker is woken to find
/// nothing. With `lwq` this model fails (wasted_wakeups = 1): the running
/// worker takes the task the woken one was woken for.
#[test]
fn handoff_woken_threads_always_have_work() {
    loom::model(|| {
        let pool = pool_with(Policy::LwqHandoff, 2, 2, 2);
        let workers = two_workers_two_producers(&pool);
        let (before_shutdown, _) = pool.stats();
        assert!(before_shutdown.wakeups <= 2, "{before_shutdown:?}");
        shutdown(&pool);
        for w in workers {
            assert_eq!(w.join().unwrap(), ExitReason::Shutdown);
        }
        let (stats, _) = pool.stats();
        assert_eq!(stats.wasted_wakeups, 0, "{stats:?}");
    });
}

#[test]
fn busy_flag_admits_one_reader() {
    loom::model(|| {
        let pool = pool(2, 2, 2);
        let in_handler = Arc::new(loom::sync::atomic::AtomicBool::new(false));
        let task = Arc::new(Task::new(0, 0));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (pool, in_handler) = (Arc::clone(&pool), Arc::clone(&in_handler));
                thread::spawn(move || {
                    let me = pool.register();
                    while let Next::Work(t) = pool.next_work(&me) {
                        assert!(
                            !in_handler.swap(true, loom::sync::atomic::Ordering::SeqCst),
                            "two threads own one task"
                        );
                        t.take_data();
                        in_handler.store(false, loom::sync::atomic::Ordering::SeqCst);
                        if t.release(false) == Released::MustRequeue {
                            pool.enqueue(t);
                        }
                    }
                    pool.unregister(&me);
                })
            })
            .collect();
        let (p, t) = (Arc::clone(&pool), Arc::clone(&task));
        let producer = thread::spawn(move || produce(&p, &t));
        produce(&pool, &task);
        producer.join().unwrap();
        shutdown(&pool);
        for w in workers {
            w.join().unwrap();
        }
        // Data flagged but nobody owning or queueing the task would be a
        // lost notification.
        let (busy, data) = task.busy_and_data();
        assert!(!data || busy, "DATA set on an idle task");
    });
}

#[test]
fn shrink_has_one_victim_and_hands_work_on() {
    loom::model(|| {
        let pool = pool(2, 1, 1);
        let done = Arc::new(Done::default());
        let workers: Vec<_> = (0..2)
            .map(|_| worker(Arc::clone(&pool), Arc::clone(&done)))
            .collect();
        // threads 1: one victim request.
        assert_eq!(pool.ctl.resize(1, 1).victims_added, 1);
        pool.wake_for_control();
        produce(&pool, &Arc::new(Task::new(1, 0)));
        done.wait_for(1);
        shutdown(&pool);
        let reasons: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        // The request may still be outstanding if shutdown came first, but
        // it is never won twice.
        let victims = reasons.iter().filter(|r| **r == ExitReason::Victim).count();
        let outstanding = pool.ctl.counts().victims();
        assert_eq!(victims + outstanding, 1, "{reasons:?}");
    });
}

/// `--min-threads 1 --max-threads 2`, two idle threads, then `threads 1`
/// while either thread's idle timeout may fire at any point (loom fires it
/// when the thread parks without a wake-up token, so every order of the
/// timeout, the shrink request and the victim's wake-up is explored). The
/// retirement and the victim request must not both exit: at least one
/// thread stays, and a task queued afterwards runs (if none stayed, the
/// main thread waits for ever and loom reports the deadlock).
#[test]
fn idle_timeout_racing_a_shrink_keeps_the_minimum() {
    loom::model(|| {
        let pool = pool(2, 1, 1);
        pool.ctl
            .loom_timeouts
            .store(1, crate::sync::Ordering::Relaxed);
        let done = Arc::new(Done::default());
        let workers: Vec<_> = (0..2)
            .map(|_| worker(Arc::clone(&pool), Arc::clone(&done)))
            .collect();
        if pool.ctl.resize(1, 1).victims_added > 0 {
            pool.wake_for_control();
        }
        produce(&pool, &Arc::new(Task::new(1, 0)));
        done.wait_for(1);
        let counts = pool.ctl.counts();
        assert!(counts.effective() >= 1, "{counts:?}");
        shutdown(&pool);
        let reasons: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        let stayed = reasons
            .iter()
            .filter(|r| **r == ExitReason::Shutdown)
            .count();
        // Threads exiting on shutdown stay counted; the others were uncounted.
        let left = pool.ctl.counts();
        assert_eq!(left.nthreads(), stayed, "{reasons:?} {left:?}");
        assert!(stayed >= 1, "{reasons:?} {left:?}");
    });
}

fn ctl(threads: usize, min: usize, max: usize) -> Arc<PoolCtl> {
    Arc::new(PoolCtl::new(threads, min, max, Duration::from_secs(5)))
}

/// `threads 1` while a victim of an earlier `threads 1` exits: the resize
/// reads the live count and the outstanding requests as one, so it sees the
/// victim either still counted with its request or gone with it, never gone
/// from one count only (which made one request too many: the pool ended
/// one below its target).
#[test]
fn resize_racing_a_victims_exit_counts_it_once() {
    loom::model(|| {
        let ctl = ctl(2, 1, 2);
        assert_eq!(ctl.resize(1, 1).victims_added, 1);
        let c = Arc::clone(&ctl);
        let victim = thread::spawn(move || c.claim_exit(&crate::stats::PoolCounters::default()));
        let plan = ctl.resize(1, 1);
        assert_eq!(victim.join().unwrap(), Some(ExitReason::Victim));
        let counts = ctl.counts();
        assert_eq!(counts.effective(), 1, "{plan:?} {counts:?}");
        assert_eq!(plan.spawn, 0, "{counts:?}");
    });
}

/// A growth racing a resize that lowers the maximum: the growth is checked
/// against the new maximum, or counted by the resize (which then asks a
/// thread to exit). It was checked against a maximum loaded before the
/// resize stored the new one, and the pool stayed one above it.
#[test]
fn growth_racing_a_lower_maximum_stays_within_it() {
    loom::model(|| {
        let ctl = ctl(1, 1, 2);
        let c = Arc::clone(&ctl);
        let grower = thread::spawn(move || {
            let grew = c.reserve_growth();
            if grew {
                c.finish_growth();
            }
            grew
        });
        let plan = ctl.resize(1, 1);
        let grew = grower.join().unwrap();
        let counts = ctl.counts();
        assert_eq!(counts.effective(), 1, "grew: {grew}, {plan:?} {counts:?}");
    });
}
