//! The multiplexed transport: concurrency, slots and backlog, retransmission,
//! reconnection, nconnect, shutdown and the async API, against fake servers
//! (std `TcpListener`) and the in-process rnfs server.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

#[path = "support/calls.rs"]
mod calls;
mod common;
#[path = "support/fake_server.rs"]
mod fake_server;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use calls::{call_u32, options, PROG};
use common::{Backend, TestServer};
use fake_server::{eventually, fake_server, Call};
use rnfs_client::{ClientError, ClientOptions, Credential, RpcClient};
use rnfs_nfs3::{CreateHow3, Sattr3, StableHow};

#[test]
fn out_of_order_replies_reach_their_own_callers() {
    // Replies go back in reverse order of arrival, in batches of up to 8.
    let addr = fake_server(|_, mut peer| loop {
        peer.stream.set_read_timeout(None).unwrap();
        let Some(first) = peer.next_call() else {
            return;
        };
        let mut batch = vec![first];
        peer.stream
            .set_read_timeout(Some(Duration::from_millis(3)))
            .unwrap();
        while batch.len() < 8 {
            match peer.next_call() {
                Some(c) => batch.push(c),
                None => break,
            }
        }
        for c in batch.iter().rev() {
            peer.reply(c.xid, c.arg.wrapping_mul(3));
        }
    });
    let rpc = RpcClient::connect(addr, options(10_000, 2, 8)).unwrap();
    let threads: Vec<_> = (0..16u32)
        .map(|t| {
            let rpc = rpc.clone();
            thread::spawn(move || {
                for i in 0..200u32 {
                    let arg = t << 16 | i;
                    assert_eq!(call_u32(&rpc, arg).unwrap(), arg.wrapping_mul(3));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let stats = rpc.stats();
    assert_eq!(stats.calls, 16 * 200);
    assert!(stats.slots <= 8, "{stats:?}");
    assert!(stats.backlog_waits > 0, "16 callers on 8 slots: {stats:?}");
    assert_eq!(stats.unknown_replies, 0);
    assert_eq!(stats.retransmits, 0);
}

#[test]
fn a_full_slot_table_hands_freed_slots_to_the_backlog_in_order() {
    // Calls with arg < 10 are held until the test says so; others answered.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = Arc::new(Mutex::new(release_rx));
    let seen2 = Arc::clone(&seen);
    let addr = fake_server(move |_, mut peer| {
        let mut held = std::collections::VecDeque::new();
        peer.stream
            .set_read_timeout(Some(Duration::from_millis(5)))
            .unwrap();
        loop {
            if let Some(c) = peer.next_call() {
                seen2.lock().unwrap().push(c.arg);
                if c.arg < 10 {
                    held.push_back(c);
                } else {
                    peer.reply(c.xid, c.arg);
                }
            }
            if release_rx.lock().unwrap().try_recv().is_ok() {
                let c: Call = held.pop_front().unwrap();
                peer.reply(c.xid, c.arg);
            }
        }
    });
    let rpc = RpcClient::connect(addr, options(30_000, 2, 2)).unwrap();
    let cred = Credential::root();
    let p1 = rpc.submit(&cred, PROG, 1, 1, &1u32).unwrap();
    let p2 = rpc.submit(&cred, PROG, 1, 1, &2u32).unwrap();
    assert_eq!(rpc.stats().slots, 2);
    let mut waiters = Vec::new();
    for (n, arg) in (10u32..14).enumerate() {
        let rpc2 = rpc.clone();
        waiters.push(thread::spawn(move || call_u32(&rpc2, arg).unwrap()));
        // Each caller is queued before the next one starts.
        eventually("caller queued", || {
            rpc.stats().backlog_waits == n as u64 + 1
        });
    }
    // The server may not have read the first two calls yet (a loaded machine):
    // wait for them, then check nothing else was sent while both were held.
    eventually("held calls seen", || seen.lock().unwrap().len() >= 2);
    assert_eq!(*seen.lock().unwrap(), vec![1, 2], "no slot while both held");
    release_tx.send(()).unwrap();
    assert_eq!(p1.wait(|r| r.read_u32()).unwrap(), 1);
    for (w, arg) in waiters.into_iter().zip(10u32..) {
        assert_eq!(w.join().unwrap(), arg);
    }
    assert_eq!(*seen.lock().unwrap(), vec![1, 2, 10, 11, 12, 13], "FIFO");
    release_tx.send(()).unwrap();
    assert_eq!(p2.wait(|r| r.read_u32()).unwrap(), 2);
    assert_eq!(rpc.stats().slots, 2, "never more than max_slots");
}

#[test]
fn a_lost_call_is_retransmitted_with_the_same_xid() {
    let xids = Arc::new(Mutex::new(Vec::new()));
    let xids2 = Arc::clone(&xids);
    let addr = fake_server(move |_, mut peer| {
        while let Some(c) = peer.next_call() {
            let mut xids = xids2.lock().unwrap();
            xids.push(c.xid);
            // Ignore the first copy of each XID.
            if xids.iter().filter(|x| **x == c.xid).count() >= 2 {
                peer.reply(c.xid, 77);
            }
        }
    });
    // Many retransmissions: a loaded machine may answer the second copy only
    // after the third has gone out.
    let rpc = RpcClient::connect(addr, options(200, 50, 4)).unwrap();
    let start = Instant::now();
    assert_eq!(call_u32(&rpc, 5).unwrap(), 77);
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(200));
    // At least one, and none before its timeout.
    let retransmits = rpc.stats().retransmits;
    assert!(retransmits >= 1);
    assert!(
        u128::from(retransmits) <= took.as_millis() / 200,
        "{retransmits} in {took:?}"
    );
    // The server gets every copy, all with the same XID.
    eventually("every copy read", || {
        xids.lock().unwrap().len() as u64 == retransmits + 1
    });
    let xids = xids.lock().unwrap().clone();
    assert!(xids.iter().all(|x| *x == xids[0]), "{xids:?}");
}

#[test]
fn a_dropped_connection_is_reestablished_and_the_call_sent_again() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = Arc::clone(&seen);
    let addr = fake_server(move |conn, mut peer| {
        while let Some(c) = peer.next_call() {
            seen2.lock().unwrap().push((conn, c.xid));
            if conn == 0 {
                return; // drop the connection without answering
            }
            peer.reply(c.xid, 9);
        }
    });
    // A long timeout: only the reconnect can explain a quick retransmission.
    let rpc = RpcClient::connect(addr, options(30_000, 2, 4)).unwrap();
    let start = Instant::now();
    assert_eq!(call_u32(&rpc, 1).unwrap(), 9);
    assert!(start.elapsed() < Duration::from_secs(5));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!((seen[0].0, seen[1].0), (0, 1));
    assert_eq!(seen[0].1, seen[1].1, "same XID after reconnecting");
    assert_eq!(rpc.stats().reconnects, 1);
    // The new connection keeps working.
    assert_eq!(call_u32(&rpc, 2).unwrap(), 9);
}

#[test]
fn nconnect_spreads_calls_round_robin() {
    let per_conn: Arc<Vec<AtomicUsize>> = Arc::new((0..3).map(|_| AtomicUsize::new(0)).collect());
    let counts = Arc::clone(&per_conn);
    let addr = fake_server(move |conn, mut peer| {
        while let Some(c) = peer.next_call() {
            counts[conn].fetch_add(1, Ordering::SeqCst);
            peer.reply(c.xid, c.arg);
        }
    });
    let opts = ClientOptions {
        connections: 3,
        ..options(10_000, 2, 4)
    };
    let rpc = RpcClient::connect(addr, opts).unwrap();
    for i in 0..30 {
        assert_eq!(call_u32(&rpc, i).unwrap(), i);
    }
    let counts: Vec<usize> = per_conn.iter().map(|c| c.load(Ordering::SeqCst)).collect();
    assert_eq!(counts, vec![10, 10, 10]);
    assert_eq!(rpc.stats().connections, 3);
}

#[test]
fn dropping_the_last_client_closes_sockets_and_fails_waiting_calls() {
    let (eof_tx, eof_rx) = mpsc::channel();
    let addr = fake_server(move |_, mut peer| {
        // Never answer; report when the client closes the connection.
        while peer.next_call().is_some() {}
        let _ = eof_tx.send(());
    });
    let rpc = RpcClient::connect(addr, options(30_000, 2, 4)).unwrap();
    let pending = rpc.submit(&Credential::root(), PROG, 1, 1, &1u32).unwrap();
    let waiter = thread::spawn(move || pending.wait(|r| r.read_u32()));
    thread::sleep(Duration::from_millis(50));
    let clone = rpc.clone();
    drop(rpc);
    thread::sleep(Duration::from_millis(50));
    assert!(!waiter.is_finished(), "a clone still holds the client");
    let start = Instant::now();
    drop(clone);
    let err = waiter.join().unwrap().unwrap_err();
    assert!(matches!(err, ClientError::Shutdown), "{err:?}");
    eof_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn many_threads_share_one_connection_to_rnfs() {
    let server = TestServer::rnfs(Backend::Memory);
    let opts = ClientOptions {
        connections: 1,
        max_slots: 8,
        ..ClientOptions::default()
    };
    let s = server.session_with(opts);
    let dir = server.scratch(&s);
    let threads: Vec<_> = (0..16u8)
        .map(|t| {
            let s = s.clone();
            thread::spawn(move || {
                let nfs = s.nfs();
                let name = format!("f{t}");
                let fh = nfs
                    .create(
                        &dir,
                        name.as_bytes(),
                        CreateHow3::Unchecked(Sattr3::default()),
                    )
                    .unwrap()
                    .handle
                    .unwrap();
                for round in 0..20u32 {
                    let data = vec![t.wrapping_add(round as u8); 512];
                    let off = u64::from(round) * 512;
                    assert_eq!(
                        nfs.write(&fh, off, &data, StableHow::Unstable)
                            .unwrap()
                            .count,
                        512
                    );
                    let mut buf = [0u8; 512];
                    let r = nfs.read(&fh, off, &mut buf).unwrap();
                    assert_eq!(&buf[..r.count], &data[..], "thread {t} round {round}");
                    let (found, _) = nfs.lookup(&dir, name.as_bytes()).unwrap();
                    assert_eq!(found, fh);
                }
                assert_eq!(nfs.getattr(&fh).unwrap().size, 20 * 512);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let stats = s.nfs().rpc().stats();
    assert_eq!(stats.connections, 1);
    assert!(stats.slots <= 8);
    assert_eq!(stats.unknown_replies, 0);
}

#[cfg(feature = "async")]
fn decode_getattr(
    r: &mut rnfs_xdr::Reader<'_>,
) -> Result<rnfs_nfs3::GetattrRes, rnfs_xdr::DecodeError> {
    rnfs_xdr::Decode::decode(r)
}

#[cfg(feature = "async")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_calls_run_concurrently_under_tokio() {
    use rnfs_nfs3::{GetattrArgs, GetattrRes, NfsProc3, NFS_PROGRAM, NFS_V3};

    let server = TestServer::rnfs(Backend::Memory);
    let opts = ClientOptions {
        max_slots: 4,
        ..ClientOptions::default()
    };
    let s = server.session_with(opts);
    let root = s.root();
    let rpc = s.nfs().rpc().clone();
    let mut tasks = Vec::new();
    for i in 0..200u32 {
        let rpc = rpc.clone();
        tasks.push(tokio::spawn(async move {
            let cred = Credential::root();
            if i % 2 == 0 {
                rpc.call_async(
                    &cred,
                    NFS_PROGRAM,
                    NFS_V3,
                    u32::from(NfsProc3::Null),
                    &(),
                    |_| Ok(()),
                )
                .await
                .map(|()| None)
            } else {
                let args = GetattrArgs {
                    object: root.as_fh3(),
                };
                rpc.call_async(
                    &cred,
                    NFS_PROGRAM,
                    NFS_V3,
                    u32::from(NfsProc3::Getattr),
                    &args,
                    decode_getattr,
                )
                .await
                .map(|res| match res {
                    GetattrRes::Ok(ok) => Some(ok.obj_attributes.fileid),
                    GetattrRes::Fail { status } => panic!("{status:?}"),
                })
            }
        }));
    }
    let root_id = s.nfs().getattr(&root).unwrap().fileid;
    for (i, t) in tasks.into_iter().enumerate() {
        let got = t.await.unwrap().unwrap();
        assert_eq!(got, (i % 2 == 1).then_some(root_id));
    }
    let stats = rpc.stats();
    assert!(stats.slots <= 4);
    assert!(stats.backlog_waits > 0, "200 futures on 4 slots: {stats:?}");
}

#[cfg(feature = "async")]
#[tokio::test]
async fn a_dropped_async_call_gives_its_slot_back() {
    use std::future::Future;

    // The server answers only calls with an odd argument.
    let addr = fake_server(|_, mut peer| {
        while let Some(c) = peer.next_call() {
            if c.arg % 2 == 1 {
                peer.reply(c.xid, c.arg);
            }
        }
    });
    let rpc = RpcClient::connect(addr, options(30_000, 2, 1)).unwrap();
    let cred = Credential::root();
    let mut sent = Box::pin(rpc.call_async(&cred, PROG, 1, 1, &2u32, |r| r.read_u32()));
    let mut queued = Box::pin(rpc.call_async(&cred, PROG, 1, 1, &4u32, |r| r.read_u32()));
    // Poll both once: the first is sent, the second waits for the only slot.
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    assert!(sent.as_mut().poll(&mut cx).is_pending());
    assert!(queued.as_mut().poll(&mut cx).is_pending());
    assert_eq!(rpc.stats().backlog_waits, 1);
    drop(queued);
    drop(sent);
    let got = tokio::time::timeout(
        Duration::from_secs(5),
        rpc.call_async(&cred, PROG, 1, 1, &3u32, |r| r.read_u32()),
    )
    .await
    .expect("the slot was given back");
    assert_eq!(got.unwrap(), 3);
}

#[test]
fn try_submit_never_waits_for_a_slot() {
    let server = TestServer::rnfs(Backend::Memory);
    // Two slots (background calls may hold one; with one slot, none).
    let s = server.session_with(options(5000, 2, 2));
    let rpc = s.nfs().rpc().clone();
    let cred = Credential::root();
    // Both slots are held until their calls are collected, reply or not.
    let held = rpc.submit(&cred, 100_003, 3, 0, &()).unwrap();
    let also_held = rpc.submit(&cred, 100_003, 3, 0, &()).unwrap();
    let t0 = Instant::now();
    assert!(rpc.try_submit(&cred, 100_003, 3, 0, &()).unwrap().is_none());
    assert!(t0.elapsed() < Duration::from_secs(1), "try_submit waited");
    held.wait(|_| Ok(())).unwrap();
    also_held.wait(|_| Ok(())).unwrap();
    let next = rpc.try_submit(&cred, 100_003, 3, 0, &()).unwrap();
    next.expect("a slot is free again")
        .wait(|_| Ok(()))
        .unwrap();
}
