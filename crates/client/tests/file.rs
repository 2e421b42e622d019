//! `NfsFile` against the test server: write-behind, flow control, reads of
//! this client's own data, getattr during writes, truncate, errors.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{open, TestServer};
use rnfs_client::{ClientOptions, DirtyBudget, IoConfig, NfsFile, Session};
use rnfs_nfs3::{CreateHow3, FileHandle, Sattr3};

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

fn config(wsize: u32, cap: u32) -> IoConfig {
    IoConfig {
        rsize: 64 * KIB as u32,
        wsize,
        max_outstanding_writes: cap,
        max_outstanding_write_bytes: IoConfig::DEFAULT_MAX_OUTSTANDING_WRITE_BYTES,
        max_read_ahead: 512 * KIB as u32,
        dirty_expire: Duration::from_secs(3600),
    }
}

fn create(s: &Session, dir: &FileHandle, name: &str) -> FileHandle {
    let c = s
        .nfs()
        .create(
            dir,
            name.as_bytes(),
            CreateHow3::Unchecked(Sattr3::default()),
        )
        .unwrap();
    c.handle
        .unwrap_or_else(|| s.nfs().lookup(dir, name.as_bytes()).unwrap().0)
}

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 13) as u8)
        .collect()
}

fn read_all(f: &NfsFile, chunk: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; chunk];
    loop {
        let n = f.read(out.len() as u64, &mut buf).unwrap();
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&buf[..n]);
    }
}

struct Fixture {
    _server: TestServer,
    s: Session,
    dir: FileHandle,
    budget: Arc<DirtyBudget>,
}

fn fixture() -> Fixture {
    let server = TestServer::start();
    let s = server.session();
    let dir = server.scratch(&s);
    Fixture {
        _server: server,
        s,
        dir,
        budget: DirtyBudget::new(DirtyBudget::DEFAULT_MAX_BYTES),
    }
}

#[test]
fn a_sequential_writer_sends_writes_before_close_within_the_cap() {
    let fx = fixture();
    let fh = create(&fx.s, &fx.dir, "seq");
    let f = open(&fx.s, fh, config(64 * KIB as u32, 4), &fx.budget);
    let data = pattern(8 * MIB, 1);
    for (i, piece) in data.chunks(32 * KIB).enumerate() {
        assert_eq!(f.write((i * 32 * KIB) as u64, piece).unwrap(), piece.len());
    }
    let before = f.stats();
    // Every full 64 KiB chunk went out as soon as it was complete.
    assert_eq!(before.early_writes, 128, "{before:?}");
    assert_eq!(before.writes_sent, 128);
    assert!(before.max_outstanding <= 4, "{before:?}");
    // Committed every 2 x cap x wsize, so little is held.
    assert!(before.commits_sent >= 8, "{before:?}");
    assert!(f.held_bytes() <= 3 * 4 * 64 * KIB as u64);
    f.close().unwrap();
    let after = f.stats();
    assert_eq!(after.writes_sent, 128, "nothing was left to flush");
    assert!(after.commits_sent >= 1);
    assert_eq!(f.held_bytes(), 0);
    assert_eq!(fx.budget.dirty_bytes(), 0);
    drop(f);
    let fresh = open(&fx.s, fh, IoConfig::default(), &fx.budget);
    assert_eq!(fresh.size(), data.len() as u64);
    assert!(
        read_all(&fresh, 100_000) == data,
        "fresh open reads the same bytes"
    );
}

#[test]
fn random_writes_are_not_sent_early() {
    let fx = fixture();
    let fh = create(&fx.s, &fx.dir, "random");
    let f = open(&fx.s, fh, config(16 * KIB as u32, 16), &fx.budget);
    let mut model = vec![0u8; MIB];
    for i in 0..200u64 {
        let off = (i * 7919 * 4096) % (MIB as u64 - 4096);
        let piece = pattern(4096, i as u32);
        f.write(off, &piece).unwrap();
        model[off as usize..off as usize + 4096].copy_from_slice(&piece);
    }
    assert_eq!(f.stats().writes_sent, 0);
    assert!(f.held_bytes() > 0);
    f.flush().unwrap();
    assert!(f.stats().writes_sent > 0);
    assert_eq!(f.stats().early_writes, 0);
    f.close().unwrap();
    let end = model.iter().rposition(|b| *b != 0).map_or(0, |p| p + 1);
    let got = read_all(&open(&fx.s, fh, IoConfig::default(), &fx.budget), 64 * KIB);
    assert!(got.len() >= end && got == model[..got.len()]);
}

#[test]
fn legacy_mode_sends_nothing_before_a_flush() {
    let fx = fixture();
    let fh = create(&fx.s, &fx.dir, "legacy");
    let f = open(&fx.s, fh, config(64 * KIB as u32, 0), &fx.budget);
    let data = pattern(MIB, 2);
    for (i, piece) in data.chunks(10_000).enumerate() {
        f.write((i * 10_000) as u64, piece).unwrap();
    }
    assert_eq!(f.stats().writes_sent, 0);
    assert_eq!(f.held_bytes() as usize, MIB);
    // getattr flushes everything (legacy: unbounded) and sees the size.
    assert_eq!(f.getattr().unwrap().size, data.len() as u64);
    assert_eq!(f.stats().writes_sent, 16);
    assert_eq!(f.stats().commits_sent, 0, "getattr does not commit");
    f.close().unwrap();
    assert_eq!(read_all(&f, 128 * KIB), data);
}

#[test]
fn reads_see_this_clients_unwritten_data() {
    let fx = fixture();
    let fh = create(&fx.s, &fx.dir, "ryw");
    let base = pattern(300 * KIB, 3);
    fx.s.nfs()
        .write(&fh, 0, &base, rnfs_nfs3::StableHow::FileSync)
        .unwrap();
    let f = open(&fx.s, fh, config(64 * KIB as u32, 16), &fx.budget);
    let mut model = base.clone();
    // Dirty bytes in the middle, across a chunk boundary, and past the end.
    for (off, len, seed) in [(1000, 10, 9), (65_000, 2000, 10), (350 * KIB, 5000, 11)] {
        let p = pattern(len, seed);
        f.write(off as u64, &p).unwrap();
        if model.len() < off + len {
            model.resize(off + len, 0);
        }
        model[off..off + len].copy_from_slice(&p);
    }
    assert_eq!(f.stats().writes_sent, 0, "random: all still dirty");
    assert_eq!(f.size(), model.len() as u64);
    assert_eq!(read_all(&f, 7000), model);
    let mut small = [0u8; 30];
    assert_eq!(f.read(995, &mut small).unwrap(), 30);
    assert_eq!(&small[..], &model[995..1025]);
    assert_eq!(f.read(model.len() as u64, &mut small).unwrap(), 0);
    f.close().unwrap();
    assert_eq!(read_all(&f, 64 * KIB), model);
}

#[test]
fn sequential_reads_are_read_ahead() {
    let fx = fixture();
    let fh = create(&fx.s, &fx.dir, "ra");
    let data = pattern(4 * MIB, 4);
    for (i, piece) in data.chunks(MIB).enumerate() {
        fx.s.nfs()
            .write(&fh, (i * MIB) as u64, piece, rnfs_nfs3::StableHow::FileSync)
            .unwrap();
    }
    let f = open(&fx.s, fh, config(64 * KIB as u32, 16), &fx.budget);
    assert_eq!(read_all(&f, 16 * KIB), data);
    let st = f.stats();
    assert!(st.read_ahead_reads > 0, "{st:?}");
    assert!(
        st.read_ahead_hit_bytes as usize > 3 * MIB,
        "most bytes came from read-ahead: {st:?}"
    );
    // Random reads are correct and do not prefetch more.
    let ahead = st.read_ahead_reads;
    let mut buf = vec![0u8; 1000];
    for off in [3 * MIB + 17, 5, 2 * MIB + 4097, MIB] {
        let n = f.read(off as u64, &mut buf).unwrap();
        assert_eq!(&buf[..n], &data[off..off + n]);
    }
    assert!(f.stats().read_ahead_reads <= ahead + 1);
}

/// Runs `work` on a thread and fails if it has not finished in a minute:
/// a client that runs out of slots waits in the backlog for ever.
fn within_a_minute(what: &str, work: impl FnOnce() + Send + 'static) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        work();
        let _ = tx.send(());
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(()) => {}
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("{what}: hung"),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: panicked"),
    }
}

/// A connection of 8 slots, so that background calls can fill it.
fn eight_slots() -> ClientOptions {
    ClientOptions {
        max_slots: 8,
        ..ClientOptions::default()
    }
}

#[test]
fn one_thread_writing_many_files_in_turn_never_runs_out_of_slots() {
    // Each file's early WRITEs stay uncollected until that file is written
    // again: 24 files x up to 4 of them is far more than 8 slots.
    let server = TestServer::start();
    let s = Arc::new(server.session_with(eight_slots()));
    let dir = server.scratch(&s);
    let budget = DirtyBudget::new(DirtyBudget::DEFAULT_MAX_BYTES);
    let handles: Vec<_> = (0..24)
        .map(|i| create(&s, &dir, &format!("w{i}")))
        .collect();
    let files: Vec<_> = handles
        .iter()
        .map(|fh| open(&s, *fh, config(4 * KIB as u32, 4), &budget))
        .collect();
    let files = Arc::new(files);
    let writer = Arc::clone(&files);
    within_a_minute("round-robin writer", move || {
        for round in 0..8u32 {
            for (i, f) in writer.iter().enumerate() {
                let piece = pattern(8 * KIB, round * 100 + i as u32);
                let at = u64::from(round) * 8 * KIB as u64;
                assert_eq!(f.write(at, &piece).unwrap(), piece.len());
            }
        }
        for f in writer.iter() {
            f.close().unwrap();
        }
    });
    let synchronous: u64 = files.iter().map(|f| f.stats().synchronous_writes).sum();
    let sent: u64 = files.iter().map(|f| f.stats().writes_sent).sum();
    assert!(synchronous > 0, "the background share was reached");
    assert!(synchronous < sent, "but most WRITEs were background ones");
    for (i, fh) in handles.iter().enumerate() {
        let f = open(&s, *fh, IoConfig::default(), &budget);
        let want: Vec<u8> = (0..8u32)
            .flat_map(|round| pattern(8 * KIB, round * 100 + i as u32))
            .collect();
        assert!(read_all(&f, 64 * KIB) == want, "file w{i} reads back");
    }
}

/// With one slot, background calls may hold none of it: every WRITE is
/// made synchronously. A background WRITE once took the only slot, and the
/// next file's WRITE waited for it in the backlog for ever.
#[test]
fn a_connection_of_one_slot_keeps_it_for_calls_that_are_waited_for() {
    let server = TestServer::start();
    let one_slot = ClientOptions {
        max_slots: 1,
        ..ClientOptions::default()
    };
    let s = Arc::new(server.session_with(one_slot));
    let dir = server.scratch(&s);
    let budget = DirtyBudget::new(DirtyBudget::DEFAULT_MAX_BYTES);
    let handles: Vec<_> = (0..2)
        .map(|i| create(&s, &dir, &format!("one{i}")))
        .collect();
    let files: Vec<_> = handles
        .iter()
        .map(|fh| open(&s, *fh, config(4 * KIB as u32, 4), &budget))
        .collect();
    let files = Arc::new(files);
    let writer = Arc::clone(&files);
    within_a_minute("writer over one slot", move || {
        for round in 0..4u32 {
            for (i, f) in writer.iter().enumerate() {
                let piece = pattern(8 * KIB, round * 100 + i as u32);
                let at = u64::from(round) * 8 * KIB as u64;
                assert_eq!(f.write(at, &piece).unwrap(), piece.len());
            }
        }
        for f in writer.iter() {
            f.close().unwrap();
        }
    });
    for f in files.iter() {
        let stats = f.stats();
        assert!(stats.writes_sent > 0);
        assert_eq!(stats.synchronous_writes, stats.writes_sent, "{stats:?}");
    }
}

#[test]
fn one_thread_reading_many_files_in_turn_never_runs_out_of_slots() {
    // Read-ahead READs stay cached, holding their slots, until their file is
    // read again: 16 files x up to 8 of them is far more than 8 slots.
    let server = TestServer::start();
    let s = Arc::new(server.session_with(eight_slots()));
    let dir = server.scratch(&s);
    let budget = DirtyBudget::new(DirtyBudget::DEFAULT_MAX_BYTES);
    let mut want = Vec::new();
    let mut files = Vec::new();
    for i in 0..16u32 {
        let fh = create(&s, &dir, &format!("r{i}"));
        let data = pattern(MIB, i);
        s.nfs()
            .write(&fh, 0, &data, rnfs_nfs3::StableHow::FileSync)
            .unwrap();
        files.push(open(&s, fh, config(64 * KIB as u32, 4), &budget));
        want.push(data);
    }
    let files = Arc::new(files);
    let reader = Arc::clone(&files);
    within_a_minute("round-robin reader", move || {
        let mut buf = vec![0u8; 32 * KIB];
        for at in (0..MIB).step_by(32 * KIB) {
            for (f, data) in reader.iter().zip(&want) {
                let n = f.read(at as u64, &mut buf).unwrap();
                assert!(buf[..n] == data[at..at + n], "read at {at}");
                assert_eq!(n, 32 * KIB);
            }
        }
    });
    let ahead: u64 = files.iter().map(|f| f.stats().read_ahead_reads).sum();
    assert!(ahead > 0, "read-ahead still ran");
}

#[test]
fn getattr_during_writes_is_current_and_bounded() {
    let fx = fixture();
    let fh = create(&fx.s, &fx.dir, "getattr");
    let f = Arc::new(open(&fx.s, fh, config(64 * KIB as u32, 4), &fx.budget));
    let total = 16 * MIB;
    let writer = {
        let f = Arc::clone(&f);
        std::thread::spawn(move || {
            let data = pattern(total, 5);
            let mut max_held = 0;
            for (i, piece) in data.chunks(48 * KIB).enumerate() {
                f.write((i * 48 * KIB) as u64, piece).unwrap();
                max_held = max_held.max(f.held_bytes());
            }
            f.close().unwrap();
            max_held
        })
    };
    let mut last = 0;
    let mut calls = 0;
    while !writer.is_finished() {
        let a = f.getattr().unwrap();
        assert!(a.size >= last, "the size never goes back");
        assert!(a.size <= total as u64);
        last = a.size;
        calls += 1;
    }
    let max_held = writer.join().unwrap();
    // 4 WRITEs in flight, two chunks dirty, at most twice the commit
    // threshold (2 x 4 x 64 KiB) unstable.
    assert!(max_held <= 2 * MIB as u64, "{max_held}");
    assert!(calls > 0);
    assert_eq!(f.getattr().unwrap().size, total as u64);
    assert_eq!(read_all(&f, 256 * KIB), pattern(total, 5));
}

#[test]
fn truncate_drops_dirty_data_beyond_and_extends_with_zeros() {
    let fx = fixture();
    let fh = create(&fx.s, &fx.dir, "trunc");
    let f = open(&fx.s, fh, config(16 * KIB as u32, 2), &fx.budget);
    let data = pattern(100 * KIB, 6);
    f.write(0, &data).unwrap();
    let a = f.truncate(50 * KIB as u64).unwrap();
    assert_eq!(a.size, 50 * KIB as u64);
    assert_eq!(f.size(), 50 * KIB as u64);
    assert_eq!(read_all(&f, 8 * KIB), &data[..50 * KIB]);
    f.write(70 * KIB as u64, b"tail").unwrap();
    let mut model = data[..50 * KIB].to_vec();
    model.resize(70 * KIB, 0);
    model.extend_from_slice(b"tail");
    assert_eq!(read_all(&f, 8 * KIB), model);
    f.truncate(80 * KIB as u64).unwrap();
    model.resize(80 * KIB, 0);
    f.close().unwrap();
    drop(f);
    let fresh = open(&fx.s, fh, IoConfig::default(), &fx.budget);
    assert_eq!(fresh.getattr().unwrap().size, 80 * KIB as u64);
    assert_eq!(read_all(&fresh, 64 * KIB), model);
}

#[test]
fn errors_are_reported_at_the_next_write_or_fsync_once() {
    let fx = fixture();
    let fh = create(&fx.s, &fx.dir, "fbig");
    let f = open(&fx.s, fh, config(16 * KIB as u32, 16), &fx.budget);
    // Bytes past i64::MAX: the server refuses them (EFBIG).
    let limit = 1u64 << 63;
    f.write(limit - 4, b"buffered").unwrap();
    assert_eq!(f.stats().writes_sent, 0);
    let err = f.fsync().unwrap_err();
    assert_eq!(err.errno(), libc::EFBIG, "{err:?}");
    f.fsync().unwrap();
    // A chunk sent early fails in the background: the next write says so,
    // and writes nothing.
    f.write(limit - 16 * KIB as u64, &pattern(16 * KIB, 7))
        .unwrap();
    assert_eq!(f.stats().early_writes, 1, "{:?}", f.stats());
    // getattr waits for the reply but does not report the error.
    f.getattr().unwrap();
    let err = f.write(0, b"x").unwrap_err();
    assert_eq!(err.errno(), libc::EFBIG);
    f.write(0, b"y").unwrap();
    f.close().unwrap();
    let mut buf = [0u8; 1];
    f.read(0, &mut buf).unwrap();
    assert_eq!(&buf, b"y");
    assert!(f.stats().write_errors >= 2);
}

#[test]
fn a_congested_budget_makes_writers_flush() {
    let fx = fixture();
    let budget = DirtyBudget::new(256 * KIB as u64);
    let fh = create(&fx.s, &fx.dir, "budget");
    let f = open(&fx.s, fh, config(64 * KIB as u32, 0), &budget);
    let data = pattern(2 * MIB, 8);
    for (i, piece) in data.chunks(32 * KIB).enumerate() {
        f.write((i * 32 * KIB) as u64, piece).unwrap();
        assert!(budget.dirty_bytes() <= 256 * KIB as u64, "bounded");
    }
    let st = f.stats();
    assert!(st.budget_waits >= 7, "{st:?}");
    assert!(st.writes_sent > 0 && st.commits_sent > 0, "{st:?}");
    f.close().unwrap();
    assert_eq!(budget.dirty_bytes(), 0);
    assert_eq!(read_all(&f, MIB), data);
}

#[test]
fn threads_writing_one_file_at_once() {
    let fx = fixture();
    let fh = create(&fx.s, &fx.dir, "threads");
    let f = Arc::new(open(&fx.s, fh, config(32 * KIB as u32, 3), &fx.budget));
    let part = MIB;
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let f = Arc::clone(&f);
            std::thread::spawn(move || {
                let data = pattern(part, 100 + t as u32);
                for (i, piece) in data.chunks(20_000).enumerate() {
                    f.write((t * part + i * 20_000) as u64, piece).unwrap();
                }
                if t % 2 == 0 {
                    f.fsync().unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    f.close().unwrap();
    assert!(f.stats().max_outstanding <= 3);
    let got = read_all(&open(&fx.s, fh, IoConfig::default(), &fx.budget), MIB);
    let want: Vec<u8> = (0..4).flat_map(|t| pattern(part, 100 + t)).collect();
    assert!(got == want);
}

#[test]
fn old_dirty_data_is_written_at_the_next_operation() {
    let fx = fixture();
    let fh = create(&fx.s, &fx.dir, "expire");
    let mut cfg = config(64 * KIB as u32, 16);
    cfg.dirty_expire = Duration::from_millis(50);
    let f = open(&fx.s, fh, cfg, &fx.budget);
    f.write(0, b"partial").unwrap();
    assert_eq!(f.stats().writes_sent, 0);
    std::thread::sleep(Duration::from_millis(80));
    assert_eq!(f.size(), 7, "size() does no I/O");
    let mut buf = [0u8; 7];
    f.read(0, &mut buf).unwrap();
    assert_eq!(&buf, b"partial");
    assert_eq!(f.stats().expired_writes, 1);
}

/// Not a timed test: prints getattr latency while writers stream, with
/// write-behind (cap 16) and without (cap 0). Run with
/// `cargo test --release -p rnfs-client --test file -- --ignored --nocapture`
/// (`EXPERIMENT_MIB`, `EXPERIMENT_WRITERS`, `EXPERIMENT_INTERVAL_MS`,
/// `EXPERIMENT_WSIZE` change the load, the getattr interval and wsize).
#[test]
#[ignore = "experiment: prints figures"]
fn experiment_getattr_latency_during_streaming_writes() {
    let env = |n: &str, d: usize| {
        std::env::var(n)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let mib = env("EXPERIMENT_MIB", 64);
    let writers = env("EXPERIMENT_WRITERS", 1);
    let interval = Duration::from_millis(env("EXPERIMENT_INTERVAL_MS", 10) as u64);
    for cap in [16, 0, 16, 0] {
        let fx = fixture();
        let session = IoConfig::for_session(&fx.s);
        let cfg = IoConfig {
            max_outstanding_writes: cap,
            wsize: env("EXPERIMENT_WSIZE", session.wsize as usize) as u32,
            ..session
        };
        let files: Vec<Arc<NfsFile>> = (0..writers)
            .map(|w| {
                let fh = create(&fx.s, &fx.dir, &format!("big{w}"));
                Arc::new(open(&fx.s, fh, cfg.clone(), &fx.budget))
            })
            .collect();
        let start = std::time::Instant::now();
        let handles: Vec<_> = files
            .iter()
            .map(|f| {
                let f = Arc::clone(f);
                std::thread::spawn(move || {
                    let piece = pattern(128 * KIB, 9);
                    for i in 0..mib * 8 {
                        f.write((i * 128 * KIB) as u64, &piece).unwrap();
                    }
                    let written = start.elapsed();
                    f.close().unwrap();
                    (written, start.elapsed())
                })
            })
            .collect();
        let mut lat = Vec::new();
        while handles.iter().any(|h| !h.is_finished()) {
            std::thread::sleep(interval);
            let t = std::time::Instant::now();
            files[0].getattr().unwrap();
            lat.push(t.elapsed());
        }
        let times: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let total = times.iter().map(|t| t.1).max().unwrap();
        lat.sort();
        let pct = |p: f64| lat[((lat.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e3;
        let st = files[0].stats();
        println!(
            "cap {cap:2} wsize {} writers {writers} x {mib} MiB: {:.1} MiB/s to close; \
             getattr n={} p50 {:.1} ms p99 {:.1} ms max {:.1} ms; file 0: {} writes \
             ({} early), {} commits, max outstanding {}, writer waits {}, budget waits {}",
            cfg.wsize,
            (writers * mib) as f64 / total.as_secs_f64(),
            lat.len(),
            pct(0.5),
            pct(0.99),
            pct(1.0),
            st.writes_sent,
            st.early_writes,
            st.commits_sent,
            st.max_outstanding,
            st.writer_waits,
            st.budget_waits,
        );
    }
}

#[test]
fn fsync_reports_the_data_lost_when_calls_are_aborted() {
    let mut server = TestServer::rnfs(common::Backend::Memory);
    let s = server.session_with(ClientOptions {
        hard: true,
        ..Default::default()
    });
    let dir = server.scratch(&s);
    let fh = create(&s, &dir, "f");
    let budget = DirtyBudget::new(64 * MIB as u64);
    let f = Arc::new(open(&s, fh, config(64 * KIB as u32, 16), &budget));
    // A partial chunk: held here until a flush.
    f.write(0, b"never reaches the server").unwrap();
    server.stop();
    // A stat of the file sends the chunk and waits for its reply, holding
    // the call, so the fsync below waits for that thread's progress.
    let statting = Arc::clone(&f);
    let stat = std::thread::spawn(move || statting.getattr());
    std::thread::sleep(Duration::from_millis(200));
    let (done, finished) = std::sync::mpsc::channel();
    let syncing = Arc::clone(&f);
    std::thread::spawn(move || {
        let _ = done.send(syncing.fsync());
    });
    // A hard client waits for the server for ever...
    assert!(finished.recv_timeout(Duration::from_millis(500)).is_err());
    // ...until it gives up on it: the fsync must then fail, not succeed.
    s.nfs().rpc().abort();
    let result = finished.recv_timeout(Duration::from_secs(20)).unwrap();
    assert!(result.is_err(), "fsync succeeded but its data was lost");
    assert!(stat.join().unwrap().is_err());
    assert!(f.fsync().is_err() || f.held_bytes() == 0);
}

/// A sequential reader whose reads arrive slightly out of order (a FUSE
/// mount serves the kernel's concurrent read-ahead requests on several
/// threads) still has each byte READ from the server about once.
#[test]
fn reads_slightly_out_of_order_fetch_each_byte_once() {
    let fx = fixture();
    let fh = create(&fx.s, &fx.dir, "ooo");
    let size = 32 * MIB;
    let data = pattern(size, 9);
    for (i, piece) in data.chunks(MIB).enumerate() {
        fx.s.nfs()
            .write(&fh, (i * MIB) as u64, piece, rnfs_nfs3::StableHow::Unstable)
            .unwrap();
    }
    let config = IoConfig {
        rsize: MIB as u32,
        max_read_ahead: 8 * MIB as u32,
        ..config(64 * KIB as u32, 16)
    };
    let f = open(&fx.s, fh, config, &fx.budget);
    let chunk = 128 * KIB;
    let mut buf = vec![0u8; chunk];
    let mut got = vec![0u8; size];
    // 128 KiB reads in order but for two swaps in every 16, as a FUSE
    // mount's threads happen to serve them: one inside a READ's piece
    // (1 MiB), one across two pieces.
    let mut order: Vec<usize> = (0..size / chunk).collect();
    for i in (0..order.len() - 1).filter(|i| i % 16 == 2 || i % 16 == 8) {
        order.swap(i, i + 1);
    }
    for i in order {
        let n = f.read((i * chunk) as u64, &mut buf).unwrap();
        assert_eq!(n, chunk);
        got[i * chunk..][..chunk].copy_from_slice(&buf);
    }
    assert!(got == data, "wrong data");
    let st = f.stats();
    let fetched = st.bytes_asked as usize;
    eprintln!("fetched {fetched} bytes for {size}");
    assert!(
        fetched <= size + chunk,
        "{} MiB fetched for {} MiB: {st:?}",
        fetched / MIB,
        size / MIB
    );
}
