//! Behaviour of the scheduler with real threads, for every policy.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use common::{processed, push, wait_until, Counting, Inbox};
use rnfs_sched::{Config, Policy, PoolMode, ResizeError, Scheduler};

const LIMIT: Duration = Duration::from_secs(30);

fn start(policy: Policy, threads: usize, items: usize, work: Duration) -> Arc<Scheduler<Counting>> {
    let config = Config {
        policy,
        ..Config::fixed(threads)
    };
    Scheduler::start(config, Counting::new(items, work)).unwrap()
}

#[test]
fn every_policy_processes_every_item_once() {
    for policy in Policy::ALL {
        let s = start(policy, 4, 2000, Duration::ZERO);
        let tasks: Vec<_> = (0..16).map(|_| s.new_task(Inbox::default(), 0)).collect();
        for i in 0..2000u64 {
            push(s.enqueuer(), &tasks[(i % 16) as usize], i);
        }
        assert!(
            wait_until(LIMIT, || processed(&s) == 2000),
            "{policy}: {}",
            processed(&s)
        );
        assert!(s
            .handler()
            .seen
            .iter()
            .all(|c| c.load(Ordering::SeqCst) == 1));
        let st = s.stats().total();
        assert_eq!(st.dispatches, st.enqueues, "{policy}: {st:?}");
        assert!(
            wait_until(LIMIT, || s.stats().total().idle == 4),
            "{policy}"
        );
        s.shutdown();
        assert_eq!(s.stats().total().threads, 0);
    }
}

#[test]
fn release_lets_the_next_record_of_one_transport_run_in_parallel() {
    let s = start(Policy::Lwq, 4, 4, Duration::from_millis(100));
    let t = s.new_task(Inbox::default(), 0);
    for i in 0..4 {
        push(s.enqueuer(), &t, i);
    }
    assert!(wait_until(LIMIT, || processed(&s) == 4));
    let peak = s.handler().peak_in_flight.load(Ordering::SeqCst);
    assert!(
        peak >= 2,
        "records of one transport never overlapped (peak {peak})"
    );
}

#[test]
fn lwq_wakes_at_most_once_per_task_and_never_exceeds_the_waking_bound() {
    for max_waking in [1, 3] {
        let config = Config {
            max_waking,
            ..Config::fixed(32)
        };
        let s = Scheduler::start(config, Counting::new(20_000, Duration::ZERO)).unwrap();
        let tasks: Vec<_> = (0..64).map(|_| s.new_task(Inbox::default(), 0)).collect();
        for i in 0..20_000u64 {
            push(s.enqueuer(), &tasks[(i % 64) as usize], i);
        }
        assert!(wait_until(LIMIT, || processed(&s) == 20_000));
        let st = s.stats().total();
        assert!(st.peak_waking <= max_waking as u64, "{st:?}");
        assert!(st.wakeups <= st.enqueues, "{st:?}");
    }
}

#[test]
fn wakeall_herd_is_visible_in_the_counters() {
    let s = start(Policy::WakeAll, 16, 200, Duration::ZERO);
    let t = s.new_task(Inbox::default(), 0);
    assert!(wait_until(LIMIT, || s.stats().total().idle == 16));
    for i in 0..200u64 {
        push(s.enqueuer(), &t, i);
        assert!(wait_until(LIMIT, || processed(&s) == i as usize + 1));
        assert!(wait_until(LIMIT, || s.stats().total().idle == 16));
    }
    let st = s.stats().total();
    // Every enqueue found 16 waiters and woke them all.
    assert!(st.wakeups >= 200 * 15, "{st:?}");
    assert!(st.wasted_wakeups >= 200 * 14, "{st:?}");
    assert!(st.peak_waking >= 15, "{st:?}");
}

#[test]
fn shrink_stops_exactly_the_surplus_and_grow_starts_threads() {
    for policy in Policy::ALL {
        let s = start(policy, 8, 1, Duration::ZERO);
        s.set_threads(5).unwrap();
        // A victim leaves the thread count before it is counted as a victim:
        // wait for both, then check no thread beyond the surplus stopped.
        assert!(
            wait_until(LIMIT, || {
                let st = s.stats().total();
                st.threads == 5 && st.victims >= 3
            }),
            "{policy}: {:?}",
            s.stats().total()
        );
        std::thread::sleep(Duration::from_millis(20));
        let st = s.stats().total();
        assert_eq!((st.threads, st.victims), (5, 3), "{policy}: {st:?}");
        s.set_threads(12).unwrap();
        assert!(
            wait_until(LIMIT, || s.stats().total().threads == 12),
            "{policy}"
        );
        // Shrink then grow before the victims run: requests are withdrawn.
        s.set_threads(1).unwrap();
        s.set_threads(12).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            wait_until(LIMIT, || s.stats().total().threads == 12),
            "{policy}"
        );
        assert!(matches!(s.set_threads(0), Err(ResizeError::TooFew { .. })));
        assert!(matches!(s.set_limits(4, 2), Err(ResizeError::Order { .. })));
    }
}

#[test]
fn automatic_sizing_grows_under_load_and_retires_when_idle() {
    for policy in Policy::ALL {
        let config = Config {
            policy,
            initial_threads: 2,
            min_threads: 2,
            max_threads: 16,
            idle_timeout: Duration::from_millis(200),
            ..Config::default()
        };
        let s = Scheduler::start(config, Counting::new(400, Duration::from_millis(5))).unwrap();
        let tasks: Vec<_> = (0..64).map(|_| s.new_task(Inbox::default(), 0)).collect();
        for i in 0..400u64 {
            push(s.enqueuer(), &tasks[(i % 64) as usize], i);
        }
        assert!(wait_until(LIMIT, || processed(&s) == 400), "{policy}");
        // Counted by the new thread itself once it runs. Not `threads > 2`:
        // on a loaded machine the extra threads may retire (200 ms idle) before
        // this line runs.
        let grown = s.stats().total();
        assert!(grown.spawned >= 1, "{policy}: {grown:?}");
        assert!(grown.threads <= 16, "{policy}: {grown:?}");
        assert!(
            wait_until(LIMIT, || s.stats().total().threads == 2),
            "{policy}: {:?}",
            s.stats().total()
        );
        assert!(s.stats().total().retired >= 1);
    }
}

#[test]
fn closing_task_is_torn_down_once_and_never_dispatched_again() {
    use std::sync::atomic::AtomicUsize;
    struct Closer(AtomicUsize, AtomicUsize);
    impl rnfs_sched::Handler for Closer {
        type Item = ();
        type ThreadState = ();
        fn thread_state(&self, _: usize) {}
        fn handle(&self, claim: rnfs_sched::Claim<'_, ()>, _: &mut ()) {
            if claim.is_closing() {
                self.0.fetch_add(1, Ordering::SeqCst);
            } else {
                self.1.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
    let s = Scheduler::start(
        Config::fixed(2),
        Closer(AtomicUsize::new(0), AtomicUsize::new(0)),
    )
    .unwrap();
    let t = s.new_task((), 0);
    s.close(&t);
    assert!(wait_until(LIMIT, || s.handler().0.load(Ordering::SeqCst) == 1));
    s.notify(&t);
    s.close(&t);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(s.handler().0.load(Ordering::SeqCst), 1);
    assert_eq!(s.handler().1.load(Ordering::SeqCst), 0);
    assert!(t.is_busy(), "a closed task stays BUSY for ever");
}

#[test]
fn a_panicking_handler_releases_the_task_and_the_thread_carries_on() {
    let mut h = Counting::new(10, Duration::ZERO);
    h.panic_on = Some(3);
    let s = Scheduler::start(Config::fixed(1), h).unwrap();
    let t = s.new_task(Inbox::default(), 0);
    for i in 0..10 {
        push(s.enqueuer(), &t, i);
    }
    assert!(wait_until(LIMIT, || processed(&s) == 10));
    assert_eq!(s.stats().total().threads, 1);
}

#[test]
fn per_cpu_pools_pin_threads_and_route_by_task_pool() {
    let config = Config {
        pool_mode: PoolMode::PerCpu,
        ..Config::fixed(std::thread::available_parallelism().map_or(1, |n| n.get()) * 2)
    };
    let s = Scheduler::start(config, Counting::new(1000, Duration::ZERO)).unwrap();
    assert!(s.pools() >= 1);
    let tasks: Vec<_> = (0..s.pools())
        .map(|p| s.new_task(Inbox::default(), p))
        .collect();
    for i in 0..1000u64 {
        push(s.enqueuer(), &tasks[i as usize % tasks.len()], i);
    }
    assert!(wait_until(LIMIT, || processed(&s) == 1000));
    let stats = s.stats();
    for (i, p) in stats.pools.iter().enumerate() {
        assert!(p.threads >= 1, "pool {i} has no thread");
        assert!(p.dispatches > 0, "pool {i} got no work: {:?}", stats.pools);
    }
}

#[test]
fn bad_configurations_are_refused_with_reasons() {
    let mut c = Config::fixed(4);
    c.max_waking = 0;
    let err = Scheduler::start(c, Counting::new(0, Duration::ZERO)).unwrap_err();
    assert!(err.to_string().contains("max_waking"), "{err}");
    let c = Config {
        min_threads: 5,
        ..Config::fixed(4)
    };
    let err = Scheduler::start(c, Counting::new(0, Duration::ZERO)).unwrap_err();
    assert!(err.to_string().contains("min (5)"), "{err}");
}
