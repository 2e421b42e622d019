//! Group commit for one file: concurrent COMMITs share `fsync`s.
//!
//! Clients send COMMITs of the same file close together (every writer of a
//! shared file, or one client's several flushing threads), and each `fsync`
//! of a file with dirty pages waits for the ones before it. A COMMIT needs
//! *an* `fsync` that started after it arrived: that one covers every write
//! answered before the COMMIT was sent. So at most one `fsync` of the file
//! runs at a time, and every COMMIT that arrives while it runs waits for it and
//! then shares the next one: N COMMITs arriving together cost two `fsync`s,
//! not N. Each still returns only once its data is on storage.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use rustix::io::Errno;

/// See the module docs. One per cached open file.
#[derive(Debug, Default)]
pub(super) struct GroupSync {
    state: Mutex<SyncState>,
    finished: Condvar,
}

#[derive(Debug, Default)]
struct SyncState {
    /// Generations started (the running one included).
    started: u64,
    /// The last generation finished; `finished == started` unless `running`.
    finished: u64,
    running: bool,
    /// The last generation that failed, with its error.
    failed: Option<(u64, Errno)>,
}

impl GroupSync {
    /// Returns once an `fsync` that started after this call began has
    /// finished: its result, or the error of any later one. Runs `fsync`
    /// itself when no other caller is running one; else waits.
    pub(super) fn sync(&self, fsync: impl FnOnce() -> Result<(), Errno>) -> Result<(), Errno> {
        let mut st = self.lock();
        // A generation running now started before this call: the next one.
        let target = st.started + 1;
        while st.running {
            st = self
                .finished
                .wait(st)
                .unwrap_or_else(PoisonError::into_inner);
            if st.finished >= target {
                return match st.failed {
                    Some((generation, e)) if generation >= target => Err(e),
                    _ => Ok(()),
                };
            }
        }
        // Lead generation `target`: nothing runs, so `started == finished`,
        // and neither passed `target - 1` (else the loop returned).
        st.running = true;
        st.started = target;
        drop(st);
        let result = fsync();
        let mut st = self.lock();
        st.running = false;
        st.finished = target;
        if let Err(e) = result {
            st.failed = Some((target, e));
        }
        self.finished.notify_all();
        result
    }

    fn lock(&self) -> MutexGuard<'_, SyncState> {
        // Nothing under the lock panics; the state stays consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Barrier};
    use std::time::Duration;

    use super::*;

    #[test]
    fn one_caller_runs_its_own_fsync() {
        let group = GroupSync::default();
        let mut ran = 0;
        group
            .sync(|| {
                ran += 1;
                Ok(())
            })
            .unwrap();
        assert_eq!(ran, 1);
        assert_eq!(group.sync(|| Err(Errno::IO)), Err(Errno::IO));
        // A failure is not reported to a caller that arrived after it.
        assert_eq!(group.sync(|| Ok(())), Ok(()));
    }

    /// Every caller returns only after an fsync that started after the caller
    /// arrived has finished, and concurrent callers share fsyncs.
    #[test]
    fn concurrent_callers_share_fsyncs_that_started_after_they_arrived() {
        const THREADS: usize = 16;
        const ROUNDS: usize = 50;
        let group = Arc::new(GroupSync::default());
        // A logical clock: callers note when they arrive; fsyncs note when
        // they start and finish.
        let clock = Arc::new(AtomicU64::new(0));
        let fsyncs = Arc::new(AtomicU64::new(0));
        // When the last fsync to finish started: fsyncs never overlap, so a
        // caller that returns sees the start of the one that covered it or of
        // a later one.
        let last_finished_start = Arc::new(AtomicU64::new(0));
        let barrier = Arc::new(Barrier::new(THREADS));
        let threads: Vec<_> = (0..THREADS)
            .map(|_| {
                let (group, clock, fsyncs, last, barrier) = (
                    Arc::clone(&group),
                    Arc::clone(&clock),
                    Arc::clone(&fsyncs),
                    Arc::clone(&last_finished_start),
                    Arc::clone(&barrier),
                );
                std::thread::spawn(move || {
                    for _ in 0..ROUNDS {
                        barrier.wait();
                        let arrived = clock.fetch_add(1, Ordering::SeqCst);
                        group
                            .sync(|| {
                                let started = clock.fetch_add(1, Ordering::SeqCst);
                                fsyncs.fetch_add(1, Ordering::SeqCst);
                                std::thread::sleep(Duration::from_micros(200));
                                last.store(started, Ordering::SeqCst);
                                Ok(())
                            })
                            .unwrap();
                        assert!(
                            last.load(Ordering::SeqCst) > arrived,
                            "returned before an fsync that started after it arrived"
                        );
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let fsyncs = fsyncs.load(Ordering::SeqCst) as usize;
        // Each round: the first arrival leads one fsync, everyone else shares
        // at most one more (give the scheduler slack, not N per round).
        assert!(
            fsyncs <= ROUNDS * 4,
            "{fsyncs} fsyncs for {} commits",
            THREADS * ROUNDS
        );
        assert!(fsyncs >= ROUNDS);
    }

    /// A follower that arrives while an fsync runs does not return with it:
    /// it waits for the next one, which starts after it arrived.
    #[test]
    fn a_caller_arriving_during_an_fsync_waits_for_the_next_one() {
        let group = Arc::new(GroupSync::default());
        let (in_fsync_tx, in_fsync_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let leader = {
            let group = Arc::clone(&group);
            std::thread::spawn(move || {
                group
                    .sync(|| {
                        in_fsync_tx.send(()).unwrap();
                        release_rx.recv().unwrap();
                        Ok(())
                    })
                    .unwrap();
            })
        };
        in_fsync_rx.recv().unwrap();
        let second_ran = Arc::new(AtomicU64::new(0));
        let follower = {
            let (group, second_ran) = (Arc::clone(&group), Arc::clone(&second_ran));
            std::thread::spawn(move || {
                group
                    .sync(|| {
                        second_ran.fetch_add(1, Ordering::SeqCst);
                        Ok(())
                    })
                    .unwrap();
            })
        };
        // Let the follower arrive and wait, then finish the first fsync.
        std::thread::sleep(Duration::from_millis(50));
        release_tx.send(()).unwrap();
        leader.join().unwrap();
        follower.join().unwrap();
        assert_eq!(
            second_ran.load(Ordering::SeqCst),
            1,
            "the follower ran a second fsync"
        );
    }
}
