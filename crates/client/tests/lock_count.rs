//! Lock traffic per call (needs the `lock-stats` feature): 64 threads of
//! mixed NULL/GETATTR/LOOKUP/READ/WRITE over one connection to the
//! in-process rnfs server. Every call must succeed, the run must finish
//! (no deadlock), and the call path must take at most 2 locks per call.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod common;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use common::{Backend, TestServer};
use rnfs_client::{lockstat, ClientOptions};
use rnfs_nfs3::{CreateHow3, Sattr3, StableHow};

const THREADS: usize = 64;
const CALLS_PER_THREAD: usize = 300;
/// Generous: the run takes well under a second in release builds.
const DEADLINE: Duration = Duration::from_secs(120);

#[test]
fn sixty_four_threads_take_at_most_two_locks_per_call() {
    assert!(lockstat::enabled());
    let server = TestServer::rnfs(Backend::Memory);
    let opts = ClientOptions {
        connections: 1,
        max_slots: 128,
        ..ClientOptions::default()
    };
    let s = server.session_with(opts);
    let dir = server.scratch(&s);
    let files: Vec<_> = (0..THREADS)
        .map(|t| {
            let name = format!("f{t}");
            let fh = s
                .nfs()
                .create(
                    &dir,
                    name.as_bytes(),
                    CreateHow3::Unchecked(Sattr3::default()),
                )
                .unwrap()
                .handle
                .unwrap();
            s.nfs()
                .write(&fh, 0, &[t as u8; 4096], StableHow::FileSync)
                .unwrap();
            (name, fh)
        })
        .collect();

    let before = lockstat::snapshot();
    let start = Instant::now();
    let (done_tx, done_rx) = mpsc::channel();
    for (t, (name, fh)) in files.into_iter().enumerate() {
        let nfs = s.nfs().clone();
        let done = done_tx.clone();
        thread::spawn(move || {
            let mut buf = [0u8; 4096];
            for i in 0..CALLS_PER_THREAD {
                match i % 5 {
                    0 => nfs.null().unwrap(),
                    1 => assert_eq!(nfs.getattr(&fh).unwrap().size, 4096),
                    2 => assert_eq!(nfs.lookup(&dir, name.as_bytes()).unwrap().0, fh),
                    3 => {
                        let r = nfs.read(&fh, 0, &mut buf).unwrap();
                        assert_eq!(r.count, 4096);
                        assert!(buf.iter().all(|b| *b == t as u8), "thread {t} read");
                    }
                    _ => {
                        let w = nfs
                            .write(&fh, 0, &[t as u8; 4096], StableHow::Unstable)
                            .unwrap();
                        assert_eq!(w.count, 4096);
                    }
                }
            }
            done.send(()).unwrap();
        });
    }
    drop(done_tx);
    for n in 0..THREADS {
        let left = DEADLINE.saturating_sub(start.elapsed());
        done_rx
            .recv_timeout(left)
            .unwrap_or_else(|e| panic!("{n} of {THREADS} threads finished: {e}"));
    }
    let took = start.elapsed();
    let stats = lockstat::snapshot().since(&before);
    println!(
        "{} calls in {took:?} from {THREADS} threads on one connection: \
         {:.3} lock acquisitions per call ({} send lock, {} backlog, {} read role; \
         {} control)",
        stats.calls,
        stats.per_call(),
        stats.send_lock,
        stats.backlog,
        stats.read_role,
        stats.control
    );
    assert_eq!(stats.calls, (THREADS * CALLS_PER_THREAD) as u64);
    assert!(stats.per_call() <= 2.0, "{stats:?}");
    let rpc = s.nfs().rpc().stats();
    assert_eq!(rpc.connections, 1);
    assert!(rpc.slots <= 128);
}
