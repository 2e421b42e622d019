//! Sizes the kernel's futex hash for the process's thread count.
//!
//! Every parked thread waits on a futex (`std::thread::park`), and a wake-up
//! walks the hash bucket of the futex it wakes. Since Linux 6.16 a process
//! gets a private hash of `4 * min(threads, online CPUs)` buckets, at least
//! 16: on a 2-CPU machine, 16 buckets whatever the thread count, so with 2,048
//! idle threads each wake-up walks about 128 waiters (`futex_wake` went from
//! 1% to 16% of the in-process benchmark's samples between 8 and 2,048
//! threads). `PR_FUTEX_HASH_SET_SLOTS` sets the bucket count: we ask for four
//! per thread, as the kernel's own rule would without the CPU cap, so a
//! wake-up costs the same at any thread count. Kernels without the call
//! (`EINVAL`) keep the global hash, sized by CPUs, as before.

use std::sync::atomic::{AtomicUsize, Ordering};

/// `prctl` option and sub-command (linux/prctl.h, Linux 6.16).
const PR_FUTEX_HASH: libc::c_int = 78;
const PR_FUTEX_HASH_SET_SLOTS: libc::c_ulong = 1;

/// Buckets per thread: the kernel's own factor.
const SLOTS_PER_THREAD: usize = 4;
/// The kernel's floor, and our ceiling (16 MiB of buckets at most).
const MIN_SLOTS: usize = 16;
const MAX_SLOTS: usize = 1 << 18;
/// Threads of the process that are not service threads (poller, signal
/// handling, admin, the main thread), counted so they do not crowd the table.
const OTHER_THREADS: usize = 64;

/// Buckets last set (0: never). Only grows: a process that once ran many
/// threads keeps the larger table, which costs memory only.
static SET_SLOTS: AtomicUsize = AtomicUsize::new(0);

/// The bucket count for `threads` service threads.
pub(crate) fn slots_for(threads: usize) -> usize {
    threads
        .saturating_add(OTHER_THREADS)
        .saturating_mul(SLOTS_PER_THREAD)
        .checked_next_power_of_two()
        .unwrap_or(MAX_SLOTS)
        .clamp(MIN_SLOTS, MAX_SLOTS)
}

/// Makes the process's futex hash large enough for `threads` threads that
/// park (the scheduler calls it for its service threads; any program with
/// many parked threads may). Best effort: an error only means wake-ups cost
/// what the kernel's default makes them cost.
pub fn fit(threads: usize) {
    let slots = slots_for(threads);
    // Relaxed: a racing caller at worst repeats the call (the kernel
    // serialises resizes); nothing else is published through this value.
    if SET_SLOTS.load(Ordering::Relaxed) >= slots {
        return;
    }
    // SAFETY: PR_FUTEX_HASH_SET_SLOTS takes a bucket count (a power of two)
    // and changes only this process's futex hash; unused arguments are 0.
    let rc = unsafe {
        libc::prctl(
            PR_FUTEX_HASH,
            PR_FUTEX_HASH_SET_SLOTS,
            slots as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if rc == 0 {
        tracing::debug!(slots, threads, "futex hash sized");
    } else {
        tracing::debug!(
            slots,
            error = %std::io::Error::last_os_error(),
            "futex hash left as the kernel sized it"
        );
    }
    // Failed or not, this size is not asked for again.
    SET_SLOTS.fetch_max(slots, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_buckets_per_thread_rounded_up_and_bounded() {
        assert_eq!(slots_for(0), 256);
        assert_eq!(slots_for(2048), 16_384);
        assert_eq!(slots_for(4096 - OTHER_THREADS), 16_384);
        assert_eq!(slots_for(4097 - OTHER_THREADS), 32_768);
        assert_eq!(slots_for(usize::MAX), MAX_SLOTS);
    }

    #[test]
    fn the_kernel_takes_the_size_where_it_has_the_call() {
        const PR_FUTEX_HASH_GET_SLOTS: libc::c_ulong = 2;
        fit(1000);
        // SAFETY: GET_SLOTS reads this process's bucket count.
        let got = unsafe { libc::prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_GET_SLOTS, 0, 0, 0) };
        if got < 0 {
            crate::cannot_run::cannot_run("kernel without PR_FUTEX_HASH");
            return;
        }
        assert!(
            usize::try_from(got).unwrap_or(0) >= slots_for(1000),
            "{got} buckets"
        );
    }
}
