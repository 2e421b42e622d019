//! A fixed pool of threads that run the blocking NFS work of FUSE requests.
//!
//! fuser's session loop reads and dispatches one request at a time; each
//! handler hands its work and the (`Send`) reply object to this pool and
//! returns, so slow calls (a WRITE waiting for flow control, a COMMIT) do
//! not hold up other requests.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A queued request: what it is (for the slow-request warning) and its work.
struct Job {
    what: &'static str,
    ino: u64,
    run: Box<dyn FnOnce() + Send + 'static>,
}

/// What one worker is doing: `(request, node, since)`.
type Slot = Mutex<Option<(&'static str, u64, Instant)>>;

/// A request running longer than this is logged (once per check).
const SLOW: Duration = Duration::from_secs(15);

/// The worker threads and the queue that feeds them.
#[derive(Debug)]
pub(crate) struct Pool {
    tx: Option<Sender<Job>>,
    threads: Vec<JoinHandle<()>>,
    /// Stops the watchdog when dropped.
    stop: Option<Sender<()>>,
}

impl Pool {
    /// Starts `n` threads (at least one) and a watchdog that warns about
    /// requests the server takes more than 15 s to serve.
    pub(crate) fn new(n: usize) -> std::io::Result<Self> {
        let (tx, rx) = channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let slots: Arc<Vec<Slot>> = Arc::new((0..n.max(1)).map(|_| Mutex::new(None)).collect());
        let mut threads = Vec::with_capacity(n.max(1) + 1);
        for i in 0..n.max(1) {
            let (rx, slots) = (rx.clone(), slots.clone());
            threads.push(
                std::thread::Builder::new()
                    .name(format!("rnfs-fuse-{i}"))
                    .spawn(move || worker(&rx, &slots[i]))?,
            );
        }
        let (stop, stopped) = channel::<()>();
        threads.push(
            std::thread::Builder::new()
                .name("rnfs-fuse-watch".into())
                .spawn(move || watchdog(&stopped, &slots))?,
        );
        Ok(Self {
            tx: Some(tx),
            threads,
            stop: Some(stop),
        })
    }

    /// Queues `job`, request `what` on node `ino`. After
    /// [`shutdown`](Self::shutdown) it runs at once.
    pub(crate) fn spawn(&self, what: &'static str, ino: u64, job: impl FnOnce() + Send + 'static) {
        let job = Job {
            what,
            ino,
            run: Box::new(job),
        };
        match &self.tx {
            Some(tx) => {
                if let Err(e) = tx.send(job) {
                    (e.0.run)();
                }
            }
            None => (job.run)(),
        }
    }

    /// Runs what is queued and stops the threads.
    pub(crate) fn shutdown(&mut self) {
        self.tx = None;
        self.stop = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn worker(rx: &Mutex<Receiver<Job>>, slot: &Slot) {
    loop {
        let job = match rx.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok(job) = job else {
            return;
        };
        set(slot, Some((job.what, job.ino, Instant::now())));
        // A panicking job drops its reply, which answers EIO.
        if catch_unwind(AssertUnwindSafe(job.run)).is_err() {
            tracing::error!("FUSE {} on node {} panicked", job.what, job.ino);
        }
        set(slot, None);
    }
}

fn set(slot: &Slot, v: Option<(&'static str, u64, Instant)>) {
    *slot.lock().unwrap_or_else(|e| e.into_inner()) = v;
}

fn watchdog(stop: &Receiver<()>, slots: &[Slot]) {
    while let Err(RecvTimeoutError::Timeout) = stop.recv_timeout(SLOW) {
        for slot in slots {
            let busy = *slot.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((what, ino, since)) = busy {
                let secs = since.elapsed().as_secs();
                if secs >= SLOW.as_secs() {
                    tracing::warn!("FUSE {what} on node {ino} running for {secs} s");
                    if std::env::var_os("RNFS_FUSE_DEBUG").is_some() {
                        eprintln!("rnfs-fuse: {what} on node {ino} running for {secs} s");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Barrier;

    #[test]
    fn jobs_run_in_parallel_and_shutdown_drains() {
        let mut pool = Pool::new(4).unwrap();
        let barrier = Arc::new(Barrier::new(4));
        let done = Arc::new(AtomicUsize::new(0));
        for _ in 0..4 {
            let (b, d) = (barrier.clone(), done.clone());
            // Deadlocks unless the four jobs run at the same time.
            pool.spawn("test", 0, move || {
                b.wait();
                d.fetch_add(1, Ordering::SeqCst);
            });
        }
        pool.spawn("test", 0, || panic!("a job may panic"));
        let d = done.clone();
        pool.spawn("test", 0, move || {
            d.fetch_add(1, Ordering::SeqCst);
        });
        pool.shutdown();
        assert_eq!(done.load(Ordering::SeqCst), 5);
    }
}
