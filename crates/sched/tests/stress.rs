//! Millions of enqueues from many producers while the thread count changes
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]
//! at random: every item is processed exactly once. Then, with the thread
//! count fixed (no resizes, no idle timeouts: nothing else wakes a thread),
//! short bursts each of which must drain: no thread sleeps while work is
//! pending. Release builds run 2,000,000 items per policy run; debug builds
//! 100,000. `RNFS_STRESS_ITEMS` overrides.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{processed, push, Counting, Inbox};
use rnfs_sched::{Config, Policy, Scheduler};

fn items() -> usize {
    std::env::var("RNFS_STRESS_ITEMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) {
            100_000
        } else {
            2_000_000
        })
}

/// Deterministic xorshift, so a failure can be replayed with its seed.
fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// Bursts in the final phase, each of 1 to 16 items.
const BURSTS: usize = 1_000;
/// How long a burst (or the resized run) may go without progress.
const STALL: Duration = Duration::from_secs(10);

fn run(policy: Policy, max_waking: usize, total: usize) {
    const PRODUCERS: usize = 6;
    const TASKS: usize = 256;
    let capacity = total + BURSTS * 16;
    let config = Config {
        policy,
        max_waking,
        initial_threads: 8,
        min_threads: 1,
        max_threads: 64,
        idle_timeout: Duration::from_millis(20),
        ..Config::default()
    };
    let s = Scheduler::start(config, Counting::new(capacity, Duration::ZERO)).unwrap();
    let tasks: Arc<Vec<_>> = Arc::new(
        (0..TASKS)
            .map(|_| s.new_task(Inbox::default(), 0))
            .collect(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let resizes = Arc::new(AtomicU64::new(0));

    let resizer = {
        let (s, stop, resizes) = (Arc::clone(&s), Arc::clone(&stop), Arc::clone(&resizes));
        std::thread::spawn(move || {
            let mut seed = 0x9E37_79B9_7F4A_7C15u64;
            while !stop.load(Ordering::Relaxed) {
                let r = rng(&mut seed);
                let n = 1 + (r % 48) as usize;
                if r & 1 == 0 {
                    s.set_threads(n).unwrap();
                } else {
                    s.set_limits(n, n + (r >> 8) as usize % 16).unwrap();
                }
                resizes.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_micros(20 + (r >> 16) % 100));
            }
        })
    };
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let (s, tasks, resizes) = (Arc::clone(&s), Arc::clone(&tasks), Arc::clone(&resizes));
            std::thread::spawn(move || {
                let mut seed = 0x2545_F491_4F6C_DD1D ^ (p as u64 + 1);
                for i in (p..total).step_by(PRODUCERS) {
                    // Every 20,000 items, let at least one resize happen, so
                    // the thread count changes throughout the run.
                    if i % 20_000 < PRODUCERS {
                        let seen = resizes.load(Ordering::SeqCst);
                        let start = Instant::now();
                        while resizes.load(Ordering::SeqCst) == seen
                            && start.elapsed() < Duration::from_secs(1)
                        {
                            std::thread::yield_now();
                        }
                    }
                    let t = &tasks[(rng(&mut seed) % TASKS as u64) as usize];
                    push(s.enqueuer(), t, i as u64);
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }

    // The resized run must complete. (Not a lost wake-up check: each resize
    // wakes or starts threads, which would rescue one within microseconds.)
    let mut last = (processed(&s), Instant::now());
    while processed(&s) < total {
        std::thread::sleep(Duration::from_millis(5));
        let now = processed(&s);
        if now != last.0 {
            last = (now, Instant::now());
            continue;
        }
        assert!(
            last.1.elapsed() < STALL,
            "{policy}: stalled at {now}/{total} with work pending: {:?}",
            s.stats().pools
        );
    }
    stop.store(true, Ordering::Relaxed);
    resizer.join().unwrap();
    let resizes = resizes.load(Ordering::SeqCst);

    // No thread asleep while work is pending. The thread count is fixed now,
    // so no resize and no idle timeout wakes anyone: only enqueues do. Each
    // burst lands after the pool has (most likely) gone to sleep, and must
    // drain; a lost wake-up leaves its items pending for ever.
    let fixed = 2 * s.pools();
    s.set_threads(fixed).unwrap();
    assert!(
        common::wait_until(STALL, || s
            .stats()
            .pools
            .iter()
            .map(|p| p.threads)
            .sum::<u64>()
            == fixed as u64),
        "{policy}: the pools did not shrink to {fixed} threads: {:?}",
        s.stats().pools
    );
    let mut seed = 0x5851_F42D_4C95_7F2Du64;
    let mut next = total;
    for burst in 0..BURSTS {
        let r = rng(&mut seed);
        // Let the threads fall asleep (most bursts) or catch them going to.
        std::thread::sleep(Duration::from_micros(r % 200));
        for _ in 0..1 + (r >> 8) % 16 {
            let t = &tasks[(rng(&mut seed) % TASKS as u64) as usize];
            push(s.enqueuer(), t, next as u64);
            next += 1;
        }
        let start = Instant::now();
        while processed(&s) < next {
            assert!(
                start.elapsed() < STALL,
                "{policy}: burst {burst} stalled at {}/{next} with {fixed} threads, \
                 no resizes: a lost wake-up: {:?}",
                processed(&s),
                s.stats().pools
            );
            std::thread::yield_now();
        }
    }

    let duplicates = s
        .handler()
        .seen
        .iter()
        .take(next)
        .filter(|c| c.load(Ordering::SeqCst) != 1)
        .count();
    assert_eq!(duplicates, 0, "{policy}: items not processed exactly once");
    let st = s.stats().total();
    if matches!(policy, Policy::Lwq | Policy::LwqHandoff) {
        assert!(st.peak_waking <= max_waking as u64, "{policy}: {st:?}");
    }
    let expected = (total / 20_000) as u64;
    assert!(
        resizes >= expected,
        "only {resizes} resizes, expected {expected}"
    );
    eprintln!(
        "{policy} max_waking={max_waking}: {total} items, {resizes} resizes, then {} in \
         {BURSTS} bursts: {st:?}",
        next - total
    );
}

#[test]
fn stress_lwq_one_waker() {
    run(Policy::Lwq, 1, items());
}

#[test]
fn stress_lwq_bounded_wakers() {
    run(Policy::Lwq, 4, items() / 2);
}

#[test]
fn stress_lwq_handoff() {
    run(Policy::LwqHandoff, 1, items() / 2);
}

#[test]
fn stress_listwalk() {
    run(Policy::ListWalk, 1, items() / 4);
}

#[test]
fn stress_wakeall() {
    run(Policy::WakeAll, 1, items() / 8);
}
