//! Closing descriptors opened for writing once they are idle.
//!
//! A descriptor open for writing is not harmless to keep: while it is open,
//! the file cannot be run on the server (`execve` fails with `ETXTBSY`, "Text
//! file busy"), a read lease on it (`fcntl(F_SETLEASE, F_RDLCK)`, as Samba
//! takes for an oplock) is refused, and `swapon` refuses it. The
//! open-file cache would keep one until it is under pressure, in practice as
//! long as the server lives. So, as knfsd's file cache does (its garbage
//! collector closes files unused for about 2 s), descriptors opened for
//! writing that no call has used for
//! [`LocalOptions::idle_writer_close`](super::LocalOptions::idle_writer_close) are
//! flushed (`fdatasync`) and closed. If that flush reports an error, the
//! write verifier changes exactly as for a failed COMMIT, so clients resend
//! their uncommitted writes (knfsd's `nfsd_file_free` resets the verifier the
//! same way). The flush comes first because a write-back error is kept by
//! the inode, and an inode nobody holds open may leave the kernel's inode
//! cache, error and all, before any later `fsync` could report it.
//! Descriptors open for reading only stay cached.
//!
//! **Cost per call.** None that grows with anything: a READ, WRITE, COMMIT
//! or truncating SETATTR that finds a writable descriptor cached compares
//! its *last used* tick with the current one (two loads) and stores only
//! when they differ, once a tick (see
//! [`OpenFile::touch`](super::OpenFile::touch)). Calls that only resolve
//! the handle through it (GETATTR, ACCESS, ...) do not count as use: a
//! client polling a file's attributes would otherwise keep it busy.
//!
//! **The sweep** runs off the call path, on one thread for the whole process
//! (a server may have a thousand exports), started by the first backend that
//! asks for it and gone when no backend is left. It wakes once a [`TICK`],
//! advances the tick, and scans every live backend's open-file cache (it
//! holds only `Weak` references, so a dropped backend is forgotten at its
//! next wake): O(cached descriptors) once a second, one cache shard locked
//! at a time. A descriptor is taken out of the cache when it is writable,
//! idle long enough, and no call holds it (the cache's reference is the
//! only one: a call gets its reference under the shard's lock, which the
//! scan holds, so none can appear while it decides); the flushes and closes
//! then run with no lock held. A descriptor in use is looked at again at
//! the next wake. A call that wants the file after the scan took it opens
//! it again, as after an eviction.
//!
//! **Evicted writers.** A writable descriptor the cache lets go of on a
//! call's path (evicted by another file, or replaced by one that can do
//! more) is not closed there unflushed, which would leave its inode free
//! to leave the kernel's cache with a write-back error that no later
//! `fsync` could then report: it goes to the backend's [`Retired`] list,
//! which the sweep flushes and closes like an idle writer at its next wake
//! (once no call holds it). The list is bounded ([`RETIRED_MAX`]); past
//! that, the call that evicted flushes and closes the descriptor itself.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use rustix::fs as rfs;

use super::cache::ClockCache;
use super::wb_errors::{self, FileKey};
use super::OpenFile;

/// How often the sweeper wakes: the length of one tick.
pub(super) const TICK: Duration = Duration::from_secs(1);

/// Ticks since the sweeper first ran (wrapping). Written by the sweeper
/// alone, once a tick; read by every call that uses a writable descriptor.
/// `Relaxed` everywhere: the value orders no other memory, it only says
/// roughly when a descriptor was last used (see [`OpenFile::touch`]).
static NOW: AtomicU32 = AtomicU32::new(0);

/// The current tick.
pub(super) fn now() -> u32 {
    NOW.load(Ordering::Relaxed)
}

/// Most evicted writers waiting for the sweep, per backend: each holds a
/// descriptor beyond the cache's bound.
pub(super) const RETIRED_MAX: usize = 256;

/// Writable descriptors the open-file cache let go of, waiting for the
/// sweep to flush and close them (see *Evicted writers* above).
#[derive(Debug, Default)]
pub(super) struct Retired(Mutex<Vec<Arc<OpenFile>>>);

impl Retired {
    /// Takes `file` to be flushed and closed by the sweep; gives it back
    /// when [`RETIRED_MAX`] already wait.
    pub(super) fn push(&self, file: Arc<OpenFile>) -> Result<(), Arc<OpenFile>> {
        let mut list = self.lock();
        if list.len() >= RETIRED_MAX {
            return Err(file);
        }
        list.push(file);
        Ok(())
    }

    /// How many wait.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<OpenFile>>> {
        // Nothing under the lock panics; the list stays consistent.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Flushes `file` (`fdatasync`) and closes it, unless another reference
/// keeps it open; moves `verifier` if the flush fails, as a failed COMMIT.
pub(super) fn flush_and_close(file: Arc<OpenFile>, verifier: &AtomicU64) {
    // A COMMIT of the file must not answer between a failed flush and the
    // verifier's move (`wb_errors.rs`). `fstat` of an open descriptor does
    // not fail; if it did, the flush would still run, unguarded.
    let key = rfs::fstat(&file.fd).map(|stat| FileKey::of(&stat));
    let syncing = key.ok().map(wb_errors::syncing);
    if let Err(e) = rfs::fdatasync(&file.fd) {
        super::write_failed(verifier, e);
    }
    drop(syncing);
    drop(file);
}

/// What the sweeper needs of one backend.
struct Backend {
    files: Weak<ClockCache<Arc<OpenFile>>>,
    retired: Weak<Retired>,
    verifier: Weak<AtomicU64>,
    /// Ticks a descriptor must have gone unused before it is closed.
    idle_ticks: u32,
}

struct Registry {
    backends: Vec<Backend>,
    /// Whether the sweeper thread runs.
    running: bool,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    backends: Vec::new(),
    running: false,
});

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    // Nothing under the lock panics; the list stays consistent.
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How many ticks a descriptor must go unused for `idle` to have passed.
/// A descriptor stamped with tick `k` was last used before tick `k + 1`
/// began, and ticks last at least [`TICK`] (the sweeper sleeps that long
/// between them), so at tick `m` it has been idle for more than
/// `(m - k - 1) * TICK`: `m - k` must reach `1 + ceil(idle / TICK)`. With
/// the default 2 s, a descriptor is closed 2 to 3 s after its last use.
pub(super) fn idle_ticks(idle: Duration) -> u32 {
    let ticks = idle.as_nanos().div_ceil(TICK.as_nanos());
    u32::try_from(ticks).unwrap_or(u32::MAX).saturating_add(1)
}

/// Has the sweeper close `files`' idle writable descriptors after `idle`,
/// flushing each first and moving `verifier` if a flush fails. Starts the
/// sweeper thread if it is not running. If the thread cannot be started,
/// descriptors stay cached as they would without this (the next
/// registration tries again).
pub(super) fn register(
    files: &Arc<ClockCache<Arc<OpenFile>>>,
    retired: &Arc<Retired>,
    verifier: &Arc<AtomicU64>,
    idle: Duration,
) {
    let mut reg = registry();
    reg.backends.push(Backend {
        files: Arc::downgrade(files),
        retired: Arc::downgrade(retired),
        verifier: Arc::downgrade(verifier),
        idle_ticks: idle_ticks(idle),
    });
    if !reg.running {
        let spawned = std::thread::Builder::new()
            .name("rnfs-idle-writers".into())
            .spawn(run);
        reg.running = spawned.is_ok();
    }
}

/// The sweeper thread: once a tick, every live backend's cache.
fn run() {
    let mut live = Vec::new();
    loop {
        std::thread::sleep(TICK);
        NOW.fetch_add(1, Ordering::Relaxed);
        {
            let mut reg = registry();
            reg.backends
                .retain(|b| b.files.strong_count() > 0 && b.verifier.strong_count() > 0);
            if reg.backends.is_empty() {
                // Decided under the lock `register` takes: a backend
                // registered from now on starts a new thread.
                reg.running = false;
                return;
            }
            // Taken out of the lock, so a backend opening meanwhile does not
            // wait for flushes.
            live.extend(reg.backends.iter().map(|b| {
                (
                    b.files.clone(),
                    b.retired.clone(),
                    b.verifier.clone(),
                    b.idle_ticks,
                )
            }));
        }
        let mut taken = Vec::new();
        for (files, retired, verifier, idle) in live.drain(..) {
            if let (Some(files), Some(retired), Some(verifier)) =
                (files.upgrade(), retired.upgrade(), verifier.upgrade())
            {
                sweep(&files, &retired, &verifier, idle, &mut taken);
            }
        }
    }
}

/// Takes out of `files` every writable descriptor unused for `idle_ticks`
/// that no call holds, and out of `retired` every one no call holds, then
/// flushes and closes each (no lock held), moving `verifier` as a failed
/// COMMIT does if a flush fails. `taken` is scratch space, left empty.
pub(super) fn sweep(
    files: &ClockCache<Arc<OpenFile>>,
    retired: &Retired,
    verifier: &AtomicU64,
    idle_ticks: u32,
    taken: &mut Vec<Arc<OpenFile>>,
) {
    {
        // A retired descriptor is referenced only by the list and by calls
        // that got it from the cache before it left, so a count of 1 stays
        // 1 (as below).
        let mut list = retired.lock();
        let mut i = 0;
        while i < list.len() {
            if Arc::strong_count(&list[i]) == 1 {
                taken.push(list.swap_remove(i));
            } else {
                i += 1;
            }
        }
    }
    let now = now();
    files.take_if(
        |file| {
            // `Relaxed` for the stamp: see `OpenFile::touch`. The count is
            // read under the shard's lock, which every call takes to get
            // its reference (`ClockCache::get` clones under it), so a
            // reference handed out before is seen; a reference dropped
            // just now may not be, which only defers this one to the next
            // tick. No other reference can be made but from an existing
            // one, so a count of 1 means no call holds the descriptor.
            file.writable
                && now.wrapping_sub(file.last_used.load(Ordering::Relaxed)) >= idle_ticks
                && Arc::strong_count(file) == 1
        },
        taken,
    );
    for file in taken.drain(..) {
        flush_and_close(file, verifier);
    }
}
