//! The async fast path on tokio (`transport/reactor.rs`): replies read and
//! requests written by a task of a multi-thread runtime; the reader thread
//! taking back over when that runtime ends or its workers all block; blocking
//! callers beside it; a reconnect under it.
#![cfg(feature = "tokio")]
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

#[path = "support/calls.rs"]
mod calls;
#[path = "support/fake_server.rs"]
mod fake_server;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use calls::{call_u32, options, PROG};
use fake_server::fake_server;
use rnfs_client::{ClientError, ClientOptions, Credential, RpcClient};
use tokio::runtime::{Builder, Runtime};

/// Answers every call with its argument, in order.
fn echo_server() -> SocketAddr {
    fake_server(|_, mut peer| {
        while let Some(c) = peer.next_call() {
            peer.reply(c.xid, c.arg);
        }
    })
}

async fn call_async_u32(rpc: &RpcClient, arg: u32) -> Result<u32, ClientError> {
    rpc.call_async(&Credential::root(), PROG, 1, 1, &arg, |r| r.read_u32())
        .await
}

fn multi_thread(workers: usize) -> Runtime {
    Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap()
}

/// `tasks` tasks of `calls` echo calls each on `rt`; checks every answer.
fn echo_load(rt: &Runtime, rpc: &RpcClient, tasks: u32, calls: u32) {
    rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for t in 0..tasks {
            let rpc = rpc.clone();
            set.spawn(async move {
                for i in 0..calls {
                    let arg = t << 16 | i;
                    assert_eq!(call_async_u32(&rpc, arg).await.unwrap(), arg);
                }
            });
        }
        while let Some(r) = set.join_next().await {
            r.unwrap();
        }
    });
}

#[test]
fn replies_are_read_on_a_multi_thread_runtime() {
    let rpc = RpcClient::connect(echo_server(), options(10_000, 2, 64)).unwrap();
    echo_load(&multi_thread(1), &rpc, 32, 50);
    let stats = rpc.stats();
    assert_eq!(stats.calls, 32 * 50);
    assert!(stats.runtime_reads > 0, "{stats:?}");
    // Replies come in batches: fewer reads than calls.
    assert!(stats.runtime_reads < stats.calls, "{stats:?}");
}

#[test]
fn each_connection_of_an_nconnect_client_reads_on_the_runtime() {
    let opts = ClientOptions {
        connections: 3,
        ..options(10_000, 2, 16)
    };
    let rpc = RpcClient::connect(echo_server(), opts).unwrap();
    // One call per connection first (round-robin), so that each has a task.
    echo_load(&multi_thread(2), &rpc, 3, 1);
    let reads = rpc.stats().runtime_reads;
    assert!(
        reads >= 3,
        "each connection's reply read on the runtime: {reads}"
    );
    echo_load(&multi_thread(2), &rpc, 24, 30);
    assert_eq!(rpc.stats().calls, 3 + 24 * 30);
}

#[test]
fn dropping_the_client_fails_async_calls_waiting_on_the_reader_task() {
    let (eof_tx, eof_rx) = mpsc::channel();
    let addr = fake_server(move |_, mut peer| {
        // Answers 1, never 2; reports when the client closes the connection.
        while let Some(c) = peer.next_call() {
            if c.arg == 1 {
                peer.reply(c.xid, 1);
            }
        }
        let _ = eof_tx.send(());
    });
    let rpc = RpcClient::connect(addr, options(30_000, 2, 8)).unwrap();
    let rt = multi_thread(1);
    echo_load_one(&rt, &rpc);
    // The future owns what it needs; it does not borrow the client.
    let call = rpc.call_async(&Credential::root(), PROG, 1, 1, &2u32, |r| r.read_u32());
    let waiting = rt.spawn(call);
    thread::sleep(Duration::from_millis(100));
    let t0 = Instant::now();
    drop(rpc);
    let got = rt.block_on(async { tokio::time::timeout(Duration::from_secs(5), waiting).await });
    let err = got.expect("failed at once").unwrap().unwrap_err();
    assert!(matches!(err, ClientError::Shutdown), "{err:?}");
    assert!(t0.elapsed() < Duration::from_secs(5));
    eof_rx.recv_timeout(Duration::from_secs(5)).unwrap();
}

/// One call answered 1 (starts the connection's reader task on `rt`).
fn echo_load_one(rt: &Runtime, rpc: &RpcClient) {
    rt.block_on(async { assert_eq!(call_async_u32(rpc, 1).await.unwrap(), 1) });
    assert!(rpc.stats().runtime_reads > 0);
}

/// Each decoded reply's buffer holds a later reply, for blocking and async
/// calls alike: after the first few, no reply needs a fresh allocation.
#[test]
fn reply_buffers_are_reused() {
    let rpc = RpcClient::connect(echo_server(), options(10_000, 2, 64)).unwrap();
    for i in 0..100 {
        assert_eq!(call_u32(&rpc, i).unwrap(), i);
    }
    let blocking = rpc.stats().reused_reply_buffers;
    assert!(blocking >= 98, "{:?}", rpc.stats());
    echo_load(&multi_thread(2), &rpc, 8, 20);
    let stats = rpc.stats();
    assert!(stats.runtime_reads > 0, "{stats:?}");
    assert!(
        stats.reused_reply_buffers >= blocking + 160 - 16,
        "{stats:?}"
    );
}

#[test]
fn current_thread_runtimes_and_the_option_off_keep_the_reader_thread() {
    let rpc = RpcClient::connect(echo_server(), options(10_000, 2, 64)).unwrap();
    let current = Builder::new_current_thread().enable_all().build().unwrap();
    echo_load(&current, &rpc, 8, 20);
    assert_eq!(rpc.stats().runtime_reads, 0);

    let off = ClientOptions {
        runtime_reader: false,
        ..options(10_000, 2, 64)
    };
    let rpc = RpcClient::connect(echo_server(), off).unwrap();
    echo_load(&multi_thread(2), &rpc, 8, 20);
    let stats = rpc.stats();
    assert_eq!((stats.calls, stats.runtime_reads), (160, 0), "{stats:?}");
}

#[test]
fn blocking_and_async_callers_share_one_connection() {
    let rpc = RpcClient::connect(echo_server(), options(10_000, 2, 32)).unwrap();
    let rt = multi_thread(2);
    let blocking: Vec<_> = (0..4u32)
        .map(|t| {
            let rpc = rpc.clone();
            thread::spawn(move || {
                for i in 0..300u32 {
                    let arg = 0x8000_0000 | t << 16 | i;
                    assert_eq!(call_u32(&rpc, arg).unwrap(), arg);
                }
            })
        })
        .collect();
    echo_load(&rt, &rpc, 64, 40);
    for t in blocking {
        t.join().unwrap();
    }
    let stats = rpc.stats();
    assert_eq!(stats.calls, 4 * 300 + 64 * 40);
    assert!(stats.runtime_reads > 0, "{stats:?}");
}

#[test]
fn the_reader_thread_takes_over_when_the_runtime_ends() {
    // Replies to argument 7 come 300 ms late.
    let addr = fake_server(|_, mut peer| {
        while let Some(c) = peer.next_call() {
            if c.arg == 7 {
                thread::sleep(Duration::from_millis(300));
            }
            peer.reply(c.xid, c.arg);
        }
    });
    let rpc = RpcClient::connect(addr, options(30_000, 2, 8)).unwrap();
    let rt = multi_thread(1);
    echo_load(&rt, &rpc, 1, 1);
    assert!(rpc.stats().runtime_reads > 0, "the runtime's task reads");
    // A call from another executor, read by that task, in flight while the
    // task's runtime ends.
    let (tx, rx) = mpsc::channel();
    let other = {
        let rpc = rpc.clone();
        thread::spawn(move || {
            let current = Builder::new_current_thread().enable_all().build().unwrap();
            let t0 = Instant::now();
            let got = current.block_on(async {
                tokio::time::timeout(Duration::from_secs(5), call_async_u32(&rpc, 7)).await
            });
            tx.send((got, t0.elapsed())).unwrap();
        })
    };
    thread::sleep(Duration::from_millis(100));
    drop(rt);
    let (got, took) = rx.recv().unwrap();
    other.join().unwrap();
    assert_eq!(got.expect("answered").unwrap(), 7);
    assert!(took < Duration::from_secs(5), "{took:?}");
    // Later calls from anywhere still work.
    assert_eq!(call_u32(&rpc, 8).unwrap(), 8);
    echo_load(&multi_thread(1), &rpc, 4, 10);
}

/// Wakes a thread.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `fut` to completion on this thread, parking in between (blocks a
/// runtime worker when called on one: the misuse the watchdog covers).
fn block_here<F: Future>(fut: F) -> F::Output {
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
        thread::park();
    }
}

#[test]
fn a_runtime_whose_workers_all_block_is_covered_by_the_reader_thread() {
    // 2 s timeout, no retransmission: the reader thread's tick is 250 ms.
    let rpc = RpcClient::connect(echo_server(), options(2_000, 0, 8)).unwrap();
    let rt = multi_thread(1);
    echo_load(&rt, &rpc, 1, 1);
    let before = rpc.stats();
    assert!(before.runtime_reads > 0);
    // The only worker blocks on an async call: the task that would write and
    // read for it cannot run.
    let (tx, rx) = mpsc::channel();
    let rpc2 = rpc.clone();
    rt.spawn(async move {
        let t0 = Instant::now();
        let got = block_here(call_async_u32(&rpc2, 41));
        tx.send((got, t0.elapsed())).unwrap();
    });
    let (got, took) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(got.unwrap(), 41, "answered before the 2 s timeout");
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert_eq!(rpc.stats().retransmits, 0);
}

#[test]
fn async_calls_survive_a_reconnect_under_the_runtime_reader() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen2 = Arc::clone(&seen);
    let addr = fake_server(move |conn, mut peer| {
        while let Some(c) = peer.next_call() {
            seen2.lock().unwrap().push((conn, c.xid));
            if conn == 0 && c.arg == 2 {
                return; // drop the connection without answering
            }
            peer.reply(c.xid, c.arg);
        }
    });
    // A long timeout: only the reconnect can explain a quick resend.
    let rpc = RpcClient::connect(addr, options(30_000, 2, 4)).unwrap();
    let rt = multi_thread(1);
    let t0 = Instant::now();
    rt.block_on(async {
        assert_eq!(call_async_u32(&rpc, 1).await.unwrap(), 1);
        assert_eq!(call_async_u32(&rpc, 2).await.unwrap(), 2);
    });
    assert!(t0.elapsed() < Duration::from_secs(5));
    let stats = rpc.stats();
    assert_eq!(stats.reconnects, 1);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!(seen[1].1, seen[2].1, "same XID after reconnecting");
    // The task reads the new socket.
    echo_load(&rt, &rpc, 8, 20);
    assert!(rpc.stats().runtime_reads > stats.runtime_reads);
}
