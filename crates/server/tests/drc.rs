//! The duplicate request cache: replay, waiting for a running original, forgetting,
//! both caps under a million keys, and exactly-once execution under contention.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use rnfs_rpc::{encode_call, Auth, AuthSys, Gids};
use rnfs_server::drc::{
    args_checksum, DrcBegin, DrcKey, DrcLimits, DrcStats, DuplicateRequestCache, CHECKSUM_BYTES,
};

const NFS: u32 = 100_003;
const WRITE: u32 = 7;

fn peer() -> SocketAddr {
    "192.0.2.7:801".parse().unwrap()
}

fn key(xid: u32) -> DrcKey {
    DrcKey::new(peer(), xid, NFS, 3, WRITE, &xid.to_be_bytes())
}

fn cache(limits: DrcLimits) -> DuplicateRequestCache {
    DuplicateRequestCache::new(limits)
}

/// Runs a new call to completion with `reply`; panics unless it was new.
fn run(drc: &DuplicateRequestCache, key: DrcKey, reply: &[u8]) {
    match drc.begin(key) {
        DrcBegin::Run(guard) => guard.finish(reply),
        other => panic!("expected Run for {key:?}, got {other:?}"),
    }
}

fn replay(drc: &DuplicateRequestCache, key: DrcKey) -> Vec<u8> {
    match drc.begin(key) {
        DrcBegin::Replay(reply) => reply.to_vec(),
        other => panic!("expected Replay for {key:?}, got {other:?}"),
    }
}

#[test]
fn a_retransmission_gets_the_cached_reply() {
    let drc = cache(DrcLimits::default());
    run(&drc, key(1), b"reply one");
    assert_eq!(replay(&drc, key(1)), b"reply one");
    assert_eq!(replay(&drc, key(1)), b"reply one");
    let st = drc.stats();
    assert_eq!((st.misses, st.hits, st.entries, st.bytes), (1, 2, 1, 9));
}

#[test]
fn every_key_field_tells_requests_apart() {
    let drc = cache(DrcLimits::default());
    let base = DrcKey::new(peer(), 5, NFS, 3, WRITE, b"args");
    run(&drc, base, b"base");
    let other_port: SocketAddr = "192.0.2.7:802".parse().unwrap();
    let other_ip: SocketAddr = "192.0.2.8:801".parse().unwrap();
    for k in [
        DrcKey::new(peer(), 5, NFS, 3, WRITE, b"other args"),
        DrcKey::new(peer(), 5, NFS, 3, WRITE, b"argz"),
        DrcKey::new(other_port, 5, NFS, 3, WRITE, b"args"),
        DrcKey::new(other_ip, 5, NFS, 3, WRITE, b"args"),
        DrcKey::new(peer(), 6, NFS, 3, WRITE, b"args"),
        DrcKey::new(peer(), 5, NFS + 2, 3, WRITE, b"args"),
        DrcKey::new(peer(), 5, NFS, 2, WRITE, b"args"),
        DrcKey::new(peer(), 5, NFS, 3, WRITE + 1, b"args"),
    ] {
        assert_ne!(k, base);
        run(&drc, k, b"other");
    }
    assert_eq!(replay(&drc, base), b"base");
}

#[test]
fn checksum_covers_length_and_the_first_256_bytes_only() {
    let a = vec![7u8; 1000];
    let mut b = a.clone();
    b[CHECKSUM_BYTES - 1] = 8;
    assert_ne!(args_checksum(&a), args_checksum(&b));
    let mut c = a.clone();
    c[CHECKSUM_BYTES] = 8; // past the checksummed prefix
    assert_eq!(args_checksum(&a), args_checksum(&c));
    assert_ne!(args_checksum(&a), args_checksum(&a[..999]), "length counts");
}

#[test]
fn key_from_a_call_record_checksums_the_arguments_not_the_credential() {
    let sys = |stamp| {
        Auth::Sys(AuthSys {
            stamp,
            machine_name: b"client",
            uid: 0,
            gid: 0,
            gids: Gids::new(&[1, 2]).unwrap(),
        })
    };
    let record = |auth: &Auth<'_>, args: &[u8]| {
        let mut out = Vec::new();
        encode_call(42, NFS, 3, WRITE, auth, args, &mut out);
        out.split_off(4) // without the record mark
    };
    let args = [9u8; 64];
    let k = DrcKey::from_call(peer(), &record(&sys(1), &args)).unwrap();
    assert_eq!(
        (k.peer(), k.xid(), k.prog(), k.vers(), k.proc_()),
        (peer(), 42, NFS, 3, WRITE)
    );
    assert_eq!(k.args_sum(), args_checksum(&args));
    assert_eq!(k, DrcKey::new(peer(), 42, NFS, 3, WRITE, &args));
    assert_eq!(
        DrcKey::from_call(peer(), &record(&sys(2), &args)),
        Some(k),
        "the credential is not part of the key"
    );
    assert_ne!(
        DrcKey::from_call(peer(), &record(&Auth::None, &[8u8; 64])),
        Some(k)
    );
    assert_eq!(DrcKey::from_call(peer(), &[0, 0, 0, 1]), None);
    assert_eq!(
        DrcKey::from_call(peer(), &record(&Auth::None, &[])[..20]),
        None
    );
}

#[test]
fn a_forgotten_call_runs_again() {
    let drc = cache(DrcLimits::default());
    match drc.begin(key(1)) {
        DrcBegin::Run(guard) => {
            assert!(guard.is_cached());
            drop(guard);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(drc.stats().entries, 0);
    run(&drc, key(1), b"second try");
    assert_eq!(replay(&drc, key(1)), b"second try");
}

#[test]
fn a_duplicate_waits_for_its_running_original() {
    let drc = cache(DrcLimits::default());
    let DrcBegin::Run(guard) = drc.begin(key(1)) else {
        panic!("new call")
    };
    thread::scope(|s| {
        let dup = s.spawn(|| {
            let start = Instant::now();
            let got = drc.begin(key(1));
            (
                start.elapsed(),
                format!("{got:?}"),
                matches!(got, DrcBegin::Replay(ref r) if &r[..] == b"done"),
            )
        });
        // Let the duplicate block, then complete the original.
        assert!(wait_until(|| drc.stats().in_progress_waits == 1));
        thread::sleep(Duration::from_millis(50));
        guard.finish(b"done");
        let (waited, got, replayed) = dup.join().unwrap();
        assert!(replayed, "duplicate got {got}");
        assert!(waited >= Duration::from_millis(50), "{waited:?}");
    });
    let st = drc.stats();
    assert_eq!(
        (st.misses, st.hits, st.in_progress_waits, st.drops),
        (1, 1, 1, 0)
    );
}

#[test]
fn a_duplicate_is_dropped_after_the_bounded_wait() {
    let drc = cache(DrcLimits {
        in_progress_wait: Duration::from_millis(100),
        ..DrcLimits::default()
    });
    let DrcBegin::Run(guard) = drc.begin(key(1)) else {
        panic!("new call")
    };
    let start = Instant::now();
    assert!(matches!(drc.begin(key(1)), DrcBegin::Drop));
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(100), "{waited:?}");
    assert!(waited < Duration::from_secs(3), "{waited:?}");
    // The original still completes and later retransmissions replay it.
    guard.finish(b"late");
    assert_eq!(replay(&drc, key(1)), b"late");
    assert_eq!(drc.stats().drops, 1);
}

#[test]
fn a_waiting_duplicate_runs_if_the_original_is_forgotten() {
    let drc = cache(DrcLimits::default());
    let DrcBegin::Run(guard) = drc.begin(key(1)) else {
        panic!("new call")
    };
    thread::scope(|s| {
        let dup = s.spawn(|| match drc.begin(key(1)) {
            DrcBegin::Run(g) => g.finish(b"from the duplicate"),
            other => panic!("{other:?}"),
        });
        assert!(wait_until(|| drc.stats().in_progress_waits == 1));
        drop(guard);
        dup.join().unwrap();
    });
    assert_eq!(replay(&drc, key(1)), b"from the duplicate");
}

#[test]
fn an_uncacheable_reply_drops_waiters_and_reruns_later_retransmissions() {
    let drc = cache(DrcLimits {
        max_reply_bytes: 16,
        ..DrcLimits::default()
    });
    let big = [1u8; 17];
    let DrcBegin::Run(guard) = drc.begin(key(1)) else {
        panic!("new call")
    };
    thread::scope(|s| {
        let dup = s.spawn(|| matches!(drc.begin(key(1)), DrcBegin::Drop));
        assert!(wait_until(|| drc.stats().in_progress_waits == 1));
        guard.finish(&big);
        assert!(dup.join().unwrap(), "the concurrent duplicate is dropped");
    });
    assert_eq!(drc.stats().bytes, 0);
    // A retransmission after completion runs again, as knfsd does (RC_NOCACHE).
    run(&drc, key(1), b"small now");
    assert_eq!(replay(&drc, key(1)), b"small now");
    // Exactly at the limit is cached.
    run(&drc, key(2), &[2u8; 16]);
    assert_eq!(replay(&drc, key(2)), [2u8; 16]);
}

#[test]
fn oldest_completed_entry_is_evicted_first() {
    let drc = cache(DrcLimits {
        max_entries: 4,
        shards: 1,
        ..DrcLimits::default()
    });
    for xid in 1..=4 {
        run(&drc, key(xid), &[xid as u8]);
    }
    // A hit does not refresh an entry: 1 is still the oldest.
    assert_eq!(replay(&drc, key(1)), [1]);
    run(&drc, key(5), b"5");
    assert_eq!(drc.stats().evictions, 1);
    for xid in 2..=5 {
        replay(&drc, key(xid));
    }
    run(&drc, key(1), b"again"); // evicted, so it runs (and evicts 2)
    run(&drc, key(2), b"again");
}

#[test]
fn completion_not_arrival_orders_eviction_and_running_calls_are_never_evicted() {
    let drc = cache(DrcLimits {
        max_entries: 3,
        shards: 1,
        ..DrcLimits::default()
    });
    let DrcBegin::Run(long) = drc.begin(key(1)) else {
        panic!()
    };
    run(&drc, key(2), b"2");
    run(&drc, key(3), b"3");
    long.finish(b"1"); // completes last: newest
    run(&drc, key(4), b"4"); // evicts 2, the oldest completed
    replay(&drc, key(1));
    replay(&drc, key(3));
    replay(&drc, key(4));
    run(&drc, key(2), b"2 again"); // evicts 3

    // Fill the shard with running calls: a new call runs without an entry.
    let drc = cache(DrcLimits {
        max_entries: 2,
        shards: 1,
        ..DrcLimits::default()
    });
    let (DrcBegin::Run(a), DrcBegin::Run(b)) = (drc.begin(key(1)), drc.begin(key(2))) else {
        panic!()
    };
    let DrcBegin::Run(c) = drc.begin(key(3)) else {
        panic!()
    };
    assert!(!c.is_cached());
    c.finish(b"not cached");
    assert_eq!(drc.stats().overflows, 1);
    a.finish(b"a");
    b.finish(b"b");
    assert_eq!(replay(&drc, key(1)), b"a");
    assert_eq!(replay(&drc, key(2)), b"b");
    assert!(matches!(drc.begin(key(3)), DrcBegin::Run(_)));
}

fn assert_within(st: &DrcStats, limits: &DrcLimits) {
    assert!(st.entries <= limits.max_entries, "{st:?} over {limits:?}");
    assert!(st.bytes <= limits.max_bytes, "{st:?} over {limits:?}");
}

#[test]
fn a_million_keys_stay_within_the_entry_cap() {
    let drc = cache(DrcLimits {
        max_entries: 1000,
        shards: 8,
        ..DrcLimits::default()
    });
    let limits = drc.limits();
    assert_eq!((limits.max_entries, limits.shards), (1000, 8));
    for xid in 0..1_000_000 {
        run(&drc, key(xid), b"small");
        if xid % 4096 == 0 {
            assert_within(&drc.stats(), &limits);
        }
    }
    let st = drc.stats();
    assert_within(&st, &limits);
    assert_eq!(st.entries, 1000, "every shard full");
    assert_eq!(st.evictions, 1_000_000 - 1000);
    // The newest are cached; the oldest are gone.
    replay(&drc, key(999_999));
    run(&drc, key(0), b"small");
}

#[test]
fn a_million_keys_stay_within_the_byte_cap() {
    let drc = cache(DrcLimits {
        max_bytes: 64 << 10,
        max_entries: 1 << 20,
        shards: 4,
        ..DrcLimits::default()
    });
    let limits = drc.limits();
    let reply = [0xA5u8; 1000];
    for xid in 0..1_000_000u32 {
        run(&drc, key(xid), &reply[..(xid % 1000 + 1) as usize]);
        if xid % 4096 == 0 {
            assert_within(&drc.stats(), &limits);
        }
    }
    let st = drc.stats();
    assert_within(&st, &limits);
    assert!(
        st.bytes > limits.max_bytes - 4 * 1000,
        "shards are nearly full: {st:?}"
    );
    assert!(st.entries < 1000, "bytes, not entries, bound it: {st:?}");
}

#[test]
fn limits_are_rounded_to_whole_shards() {
    let drc = cache(DrcLimits {
        max_entries: 3,
        max_bytes: 100,
        max_reply_bytes: 4096,
        shards: 64,
        ..DrcLimits::default()
    });
    let l = drc.limits();
    assert_eq!(
        (l.shards, l.max_entries, l.max_bytes, l.max_reply_bytes),
        (2, 2, 100, 50)
    );
    // A zero-entry cache runs everything without caching.
    let off = cache(DrcLimits {
        max_entries: 0,
        ..DrcLimits::default()
    });
    let DrcBegin::Run(g) = off.begin(key(1)) else {
        panic!()
    };
    assert!(!g.is_cached());
    g.finish(b"x");
    assert!(matches!(off.begin(key(1)), DrcBegin::Run(_)));
}

#[test]
fn hammering_the_same_keys_runs_each_exactly_once() {
    const THREADS: usize = 8;
    const KEYS: u32 = 300;
    const ROUNDS: usize = 4;
    let drc = cache(DrcLimits::default());
    let runs: Vec<AtomicU32> = (0..KEYS).map(|_| AtomicU32::new(0)).collect();
    let barrier = Barrier::new(THREADS);
    let replays = AtomicU32::new(0);
    thread::scope(|s| {
        for t in 0..THREADS {
            let (drc, runs, barrier, replays) = (&drc, &runs, &barrier, &replays);
            s.spawn(move || {
                barrier.wait();
                for round in 0..ROUNDS {
                    for i in 0..KEYS {
                        // Each thread walks the keys from a different offset.
                        let xid = (i + (t * 37 + round * 11) as u32) % KEYS;
                        match drc.begin(key(xid)) {
                            DrcBegin::Run(guard) => {
                                runs[xid as usize].fetch_add(1, Ordering::SeqCst);
                                if xid % 7 == 0 {
                                    thread::sleep(Duration::from_micros(200)); // let duplicates queue up
                                }
                                guard.finish(&xid.to_be_bytes());
                            }
                            DrcBegin::Replay(reply) => {
                                assert_eq!(&reply[..], &xid.to_be_bytes(), "another key's reply");
                                replays.fetch_add(1, Ordering::Relaxed);
                            }
                            DrcBegin::Drop => panic!("dropped {xid} within the wait"),
                        }
                    }
                }
            });
        }
    });
    for (xid, n) in runs.iter().enumerate() {
        assert_eq!(n.load(Ordering::SeqCst), 1, "key {xid} ran {n:?} times");
    }
    let st = drc.stats();
    let total = (THREADS * ROUNDS) as u64 * u64::from(KEYS);
    assert_eq!(st.misses, u64::from(KEYS));
    assert_eq!(st.hits, total - u64::from(KEYS));
    assert_eq!(u64::from(replays.load(Ordering::Relaxed)), st.hits);
    assert_eq!((st.drops, st.evictions, st.overflows), (0, 0, 0));
}

#[test]
fn the_cache_is_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<DuplicateRequestCache>();
    let drc = Arc::new(cache(DrcLimits::default()));
    let d = Arc::clone(&drc);
    thread::spawn(move || run(&d, key(9), b"9")).join().unwrap();
    assert_eq!(replay(&drc, key(9)), b"9");
}

fn wait_until(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        thread::sleep(Duration::from_millis(1));
    }
    false
}
