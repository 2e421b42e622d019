//! A client that sends calls but never reads its replies must not stall anyone
//! else, hold a thread, or make the server buffer without bound.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a test failure"
)]

mod common;

use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use rnfs_server::Server;
use socket2::{Domain, Socket, Type};

const CAP: u32 = 8;

/// Connects with a tiny receive buffer, so the replies it never reads fill the
/// path quickly.
fn connect_small_rcvbuf(addr: SocketAddr) -> TcpStream {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&addr.into()).unwrap();
    let s: TcpStream = socket.into();
    s.set_write_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    s
}

#[test]
fn client_that_never_reads_cannot_stall_others() {
    let mut config = config();
    config.limits.max_in_flight_per_conn = CAP;
    // Small socket buffers on both ends, so unread replies back up quickly.
    config.send_buffer_size = Some(4096);
    let server = Server::start(config).unwrap();
    let addr = addr(&server);

    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let blaster = {
        let (stop, sent) = (Arc::clone(&stop), Arc::clone(&sent));
        std::thread::spawn(move || {
            let mut s = connect_small_rcvbuf(addr);
            let mut batch = Vec::new();
            for i in 0..256 {
                batch.extend(call_bytes(i, NFS, 3, 0));
            }
            let mut pos = 0;
            while !stop.load(Ordering::Relaxed) {
                match s.write(&batch[pos..]) {
                    Ok(n) => {
                        sent.fetch_add(n as u64, Ordering::Relaxed);
                        pos = (pos + n) % batch.len();
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) => {}
                    Err(e) => {
                        // The server closing it would be a failure: reported below.
                        eprintln!("blaster write failed: {e}");
                        break;
                    }
                }
            }
            s // keep the connection open until the end of the test
        })
    };

    // Back-pressure engages: the server stopped reading the blaster.
    assert!(
        wait_until(Duration::from_secs(10), || server.stats().throttled > 0),
        "the in-flight limit never engaged: {:?}, {} bytes sent",
        server.stats(),
        sent.load(Ordering::Relaxed)
    );

    // Meanwhile another client is served normally.
    let started = Instant::now();
    let mut s = connect(addr);
    for xid in 0..1000 {
        null_ok(&mut s, xid, NFS);
    }
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "1,000 NULL calls took {took:?}"
    );

    // The blaster holds no service thread while its calls back up...
    assert!(
        wait_until(Duration::from_secs(5), || all_threads_idle(&server)),
        "{:?}",
        server.scheduler().stats()
    );
    // ...and bounded server memory: never more than CAP calls in flight, so at
    // most CAP small replies buffered.
    let stats = server.stats();
    assert_eq!(
        stats.connections, 2,
        "the blaster was not closed: {stats:?}"
    );
    assert!(stats.peak_in_flight <= CAP, "{stats:?}");
    assert!(
        stats.peak_output_buffered <= u64::from(CAP) * 64,
        "{stats:?}"
    );

    stop.store(true, Ordering::Relaxed);
    let blaster_conn = blaster.join().unwrap();
    drop(blaster_conn);
    server.shutdown();
}

#[test]
fn throttled_connection_resumes_when_its_client_reads() {
    const CALLS: u32 = 5000;
    let mut config = config();
    config.limits.max_in_flight_per_conn = CAP;
    config.send_buffer_size = Some(4096);
    let server = Server::start(config).unwrap();
    let mut s = connect_small_rcvbuf(addr(&server));
    s.set_write_timeout(None).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // Write every call before reading anything (from another thread: the writes
    // block once the server stops reading), then read every reply. Each pause
    // of the server's reading must end when replies drain: a lost resume would
    // stall here until the read timeout.
    let mut writer = s.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        let mut batch = Vec::new();
        for xid in 0..CALLS {
            batch.extend(call_bytes(xid, MOUNT, 3, 0));
        }
        writer.write_all(&batch).unwrap();
    });
    // Let the server stall on us before reading.
    assert!(wait_until(Duration::from_secs(10), || server
        .stats()
        .throttled
        > 0));
    let mut seen = vec![false; CALLS as usize];
    for i in 0..CALLS {
        let record = read_record(&mut s).unwrap_or_else(|e| panic!("after {i} replies: {e}"));
        let xid = rnfs_rpc::decode_reply(&record).unwrap().header.xid;
        assert!(!std::mem::replace(&mut seen[xid as usize], true));
    }
    sender.join().unwrap();
    assert!(server.stats().peak_in_flight <= CAP);
}
