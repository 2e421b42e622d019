//! Writes back the data of open files that nobody touches.
//!
//! `NfsFile` sends expired dirty data only at the file's next operation, so a
//! program that writes and keeps its file open without `fsync` (a log, a
//! database that syncs rarely) would leave the data in this process alone for
//! as long as it stays idle: lost if the mount dies, and counted in the
//! mount's dirty budget, which then makes every other writer flush and commit
//! at each write. Linux's flusher writes back and commits dirty pages older
//! than `dirty_expire_centisecs` (30 s) every `dirty_writeback_centisecs`
//! (5 s); this thread does the same for the mount's open files.
//!
//! Cost: a write marks its file queued (one atomic swap; the queue's mutex
//! only the first time). Each tick visits the queued files only, that is
//! the files holding data, and drops those that no longer do.

use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::data::OpenFile;

/// The longest pause between two rounds (Linux's `dirty_writeback_centisecs`).
const MAX_TICK: Duration = Duration::from_secs(5);
/// The shortest (for a tiny `wb_expire`).
const MIN_TICK: Duration = Duration::from_millis(100);

/// The files holding data, for the flusher thread.
#[derive(Debug, Default)]
pub(crate) struct FlushQueue {
    files: Mutex<Vec<Weak<OpenFile>>>,
}

impl FlushQueue {
    /// After a write to `file`: queue it unless it is queued.
    pub(crate) fn note_write(&self, file: &Arc<OpenFile>) {
        // AcqRel: pairs with the flusher's clearing store and its later
        // check of the file's data (see `round`): either this swap sees
        // `false` and queues the file, or the flusher sees the data.
        if !file.queued.swap(true, Ordering::AcqRel) {
            lock(&self.files).push(Arc::downgrade(file));
        }
    }

    /// Visits every queued file once: writes back what expired, keeps the
    /// files that still hold data.
    fn round(&self) {
        let files = std::mem::take(&mut *lock(&self.files));
        let mut keep = Vec::with_capacity(files.len());
        for weak in files {
            let Some(file) = weak.upgrade() else {
                continue; // closed: its last close wrote it back
            };
            match file.write_back_expired() {
                Ok(true) => keep.push(weak),
                Ok(false) => {
                    // SeqCst store then load: a write that raced with this
                    // round either finds `queued` false and queues the
                    // file itself, or its data is seen here.
                    file.queued.store(false, Ordering::SeqCst);
                    if file.holds_data() && !file.queued.swap(true, Ordering::AcqRel) {
                        keep.push(weak);
                    }
                }
                Err(e) => {
                    tracing::warn!("write-back of an idle file failed: {e}");
                    keep.push(weak);
                }
            }
        }
        lock(&self.files).extend(keep);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Stops the flusher thread when dropped (with the mount's core).
#[derive(Debug)]
pub(crate) struct FlusherHandle {
    _stop: mpsc::Sender<()>,
}

/// Starts the flusher of `queue`: a round every `expire / 6` (100 ms to 5 s)
/// until the handle is dropped.
pub(crate) fn spawn(queue: Arc<FlushQueue>, expire: Duration) -> std::io::Result<FlusherHandle> {
    let (stop, stopped) = mpsc::channel::<()>();
    let tick = (expire / 6).clamp(MIN_TICK, MAX_TICK);
    std::thread::Builder::new()
        .name("rnfs-flusher".into())
        .spawn(move || loop {
            match stopped.recv_timeout(tick) {
                Err(RecvTimeoutError::Timeout) => queue.round(),
                Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
            }
        })?;
    Ok(FlusherHandle { _stop: stop })
}
