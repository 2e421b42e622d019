//! A write-back error moves the write verifier before any COMMIT of the file
//! can answer without it.
//!
//! Linux reports a write-back error once per open file description
//! (`errseq_t`): the first `fsync` through a description after the error
//! sees it; later ones on that description do not, nor does any description
//! opened after someone saw it. Besides COMMIT, several calls here sync a
//! regular file and can be the one that sees it: a stable WRITE
//! (`RWF_DSYNC`, or its `fdatasync` fallback), a SETATTR or CREATE that
//! commits the file (`durable.rs`), and the idle-writer sweep's flush before
//! it closes a descriptor. Each then moves the verifier
//! ([`super::write_failed`]), but only after its system call returned. A
//! COMMIT of the file whose `fsync` ran in that gap would find no error,
//! read the old verifier, and tell the client that data the server lost is
//! on disk. (knfsd closes the same gap by asking the page cache whether an
//! error was recorded since before its `fsync`, `filemap_check_wb_err`;
//! userspace cannot ask.)
//!
//! So every such sync holds its file's *stripe* shared, from before its
//! system call until it has moved the verifier ([`syncing`]); so does a
//! COMMIT's own `fsync`, since another COMMIT of the file may hold another
//! descriptor of it (one the open-file cache let go of). A COMMIT whose
//! `fsync` succeeded then takes the stripe exclusively and lets go at once
//! ([`settle`]) before the verifier is read for its reply. Syncs share the
//! stripe: they wait only while a COMMIT waits in `settle` (the lock prefers
//! writers), and then only for the syncs of that stripe already running. A
//! COMMIT waits only for the syncs of its stripe that were running when its
//! own `fsync` ended, so its cost is an uncontended lock and unlock or two,
//! whatever the number of files. A sync that sees an error before the
//! COMMIT's `fsync` looked is running then (the kernel orders the two system
//! calls: each goes through the file's `errseq_t` with atomic
//! read-modify-writes), so the COMMIT waits for it.
//!
//! The stripes are process-wide and keyed by device and inode. A COMMIT may
//! wait for an unrelated file's sync that hashes to its stripe: rare with
//! [`STRIPES`] of them, and bounded by that one sync. Two exports of one
//! file system (nested exports) each hold their own descriptors of a file,
//! so an error that one export's sync sees first is not reported to a
//! descriptor the other opens afterwards; the server's exports therefore
//! share one verifier ([`LocalOptions::verifier`](super::LocalOptions::verifier)),
//! as knfsd has one per network namespace.

use std::sync::{PoisonError, RwLock, RwLockReadGuard};

use rustix::fs::Stat;

/// How many stripes: a COMMIT waits for another file's sync one time in
/// this many, at most, when syncs are in flight.
pub(super) const STRIPES: usize = 128;

/// One stripe on its own cache line(s): COMMITs of different files do not
/// write each other's lines.
#[repr(align(128))]
struct Stripe(RwLock<()>);

static LOCKS: [Stripe; STRIPES] = [const { Stripe(RwLock::new(())) }; STRIPES];

/// Which file: its device and inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FileKey {
    dev: u64,
    ino: u64,
}

impl FileKey {
    #[allow(clippy::useless_conversion, reason = "stat field widths vary by arch")]
    pub(super) fn of(stat: &Stat) -> Self {
        Self {
            dev: u64::from(stat.st_dev),
            ino: u64::from(stat.st_ino),
        }
    }

    fn stripe(self) -> &'static RwLock<()> {
        // Fibonacci hashing: inodes are often consecutive.
        let mixed = (self.ino ^ self.dev.rotate_left(32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let index = (mixed >> (64 - STRIPES.trailing_zeros())) as usize;
        &LOCKS[index].0
    }
}

/// Held by a sync of `key`'s file other than COMMIT's, from before its
/// system call until it has moved the verifier if that failed.
pub(super) fn syncing(key: FileKey) -> RwLockReadGuard<'static, ()> {
    // Nothing under the lock panics, and it guards no data.
    key.stripe().read().unwrap_or_else(PoisonError::into_inner)
}

/// Called by a COMMIT of `key`'s file after its `fsync` succeeded, before
/// the verifier for its reply is read: returns once every sync of the
/// stripe that was running has moved the verifier, if it had to.
pub(super) fn settle(key: FileKey) {
    drop(key.stripe().write().unwrap_or_else(PoisonError::into_inner));
}

/// Holds `key`'s stripe as a COMMIT's [`settle`] would, for tests to see
/// which calls sync under it.
#[cfg(test)]
pub(super) fn exclusive(key: FileKey) -> std::sync::RwLockWriteGuard<'static, ()> {
    key.stripe().write().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{mpsc, Barrier};
    use std::thread;
    use std::time::Duration;

    use super::*;

    fn key(ino: u64) -> FileKey {
        FileKey { dev: 66306, ino }
    }

    /// A COMMIT settling on a file whose other sync failed but has not yet
    /// moved the verifier waits for the move, and so reads the new one.
    #[test]
    fn a_commit_reads_the_verifier_a_failed_sync_moved() {
        let verifier = AtomicU64::new(7);
        let barrier = Barrier::new(2);
        thread::scope(|s| {
            s.spawn(|| {
                let _held = syncing(key(1));
                barrier.wait();
                // The sync's system call failed; the move comes late.
                thread::sleep(Duration::from_millis(100));
                verifier.fetch_add(1, Ordering::Relaxed);
            });
            barrier.wait();
            settle(key(1));
            assert_eq!(verifier.load(Ordering::Relaxed), 8, "read the old verifier");
        });
    }

    /// Syncs of one file share the stripe; a COMMIT of a file in another
    /// stripe does not wait for them.
    #[test]
    fn syncs_share_and_other_stripes_do_not_wait() {
        let first = key(1);
        let other = (2..)
            .map(key)
            .find(|k| !std::ptr::eq(k.stripe(), first.stripe()))
            .unwrap();
        let _a = syncing(first);
        let (done, finished) = mpsc::channel();
        thread::scope(|s| {
            s.spawn(move || {
                let _b = syncing(first);
                settle(other);
                done.send(()).unwrap();
            });
            finished
                .recv_timeout(Duration::from_secs(10))
                .expect("a second sync or another stripe's COMMIT waited");
        });
    }

    /// Consecutive inodes spread over the stripes.
    #[test]
    fn consecutive_inodes_spread() {
        let mut used = [0u32; STRIPES];
        for ino in 1000..1000 + STRIPES as u64 * 8 {
            let stripe = key(ino).stripe();
            let index = LOCKS
                .iter()
                .position(|l| std::ptr::eq(&l.0, stripe))
                .unwrap();
            used[index] += 1;
        }
        assert!(used.iter().all(|&n| (1..=32).contains(&n)), "{used:?}");
    }
}
