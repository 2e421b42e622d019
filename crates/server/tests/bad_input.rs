//! Hostile and broken clients: garbage, oversized records, half-sent records.
//! Each must cost the server at most its own connection, never a thread.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a test failure"
)]

mod common;

use std::io::Write;
use std::time::Duration;

use common::*;
use rnfs_server::Server;

#[test]
fn garbage_closes_the_connection_and_others_are_still_served() {
    let server = start();
    let addr = addr(&server);
    let mut good = connect(addr);
    null_ok(&mut good, 1, NFS);

    // Not RPC at all: "GET " read as a record mark announces a ~1.2 GB fragment.
    let mut http = connect(addr);
    http.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert_closed_by_server(&mut http);

    // Well-framed, but not a CALL: the dispatcher drops it.
    let mut not_a_call = connect(addr);
    let mut record = vec![0x80, 0, 0, 8];
    record.extend_from_slice(&[0, 0, 0, 42, 0, 0, 0, 7]); // xid 42, msg_type 7
    not_a_call.write_all(&record).unwrap();
    assert_closed_by_server(&mut not_a_call);

    // Too short for an RPC header at all.
    let mut short = connect(addr);
    short.write_all(&[0x80, 0, 0, 2, 1, 2]).unwrap();
    assert_closed_by_server(&mut short);

    null_ok(&mut good, 2, NFS);
    null_ok(&mut connect(addr), 3, MOUNT);
    assert_eq!(server.stats().closed_bad_input, 3);
}

#[test]
fn record_over_the_limit_closes_the_connection() {
    let mut config = config();
    config.limits.max_record_size = 4096;
    let server = Server::start(config).unwrap();
    let addr = addr(&server);
    let mut s = connect(addr);
    // Only the mark is needed: the limit is checked before buffering the body.
    s.write_all(&(0x8000_0000u32 | 8192).to_be_bytes()).unwrap();
    assert_closed_by_server(&mut s);
    // Multi-fragment records are summed: 3 × 2000 bytes.
    let mut s = connect(addr);
    for _ in 0..3 {
        s.write_all(&2000u32.to_be_bytes()).unwrap();
        let _ = s.write_all(&[0; 2000]); // may fail once the server has closed
    }
    assert_closed_by_server(&mut s);
    null_ok(&mut connect(addr), 1, NFS);
    assert_eq!(server.stats().closed_bad_input, 2);
}

#[test]
fn truncated_record_holds_no_thread_and_completes_later() {
    let server = start();
    let addr = addr(&server);
    let call = call_bytes(77, NFS, 3, 0);
    let mut s = connect(addr);
    s.write_all(&call[..10]).unwrap();
    // The thread that read the fragment returns at once; the partial record waits
    // in the connection's decoder without holding anything.
    assert!(
        wait_until(Duration::from_secs(5), || all_threads_idle(&server)),
        "a half-sent record holds a thread: {:?}",
        server.scheduler().stats()
    );
    assert!(still_open(&mut s));
    null_ok(&mut connect(addr), 1, MOUNT);
    // The rest arrives: the buffered prefix was kept.
    s.write_all(&call[10..]).unwrap();
    let reply = read_record(&mut s).unwrap();
    let reply = rnfs_rpc::decode_reply(&reply).unwrap();
    assert_eq!(reply.header.xid, 77);
}

#[test]
fn peer_closing_releases_the_connection() {
    let server = start();
    let addr = addr(&server);
    let mut s = connect(addr);
    null_ok(&mut s, 1, NFS);
    assert_eq!(server.stats().connections, 1);
    drop(s);
    assert!(wait_until(Duration::from_secs(5), || server
        .stats()
        .connections
        == 0));
    assert!(wait_until(Duration::from_secs(5), || all_threads_idle(
        &server
    )));
}

#[test]
fn quiet_connections_are_closed_after_the_idle_timeout_and_free_their_slots() {
    let mut config = config();
    config.limits.max_connections = 3;
    config.limits.conn_idle_timeout = Some(Duration::from_millis(500));
    let server = Server::start(config).unwrap();
    let addr = addr(&server);
    let mut live = connect(addr);
    let mut silent = connect(addr);
    let mut half = connect(addr);
    null_ok(&mut live, 1, NFS);
    null_ok(&mut silent, 2, NFS);
    // Half a record, then nothing: no call ever arrives.
    half.write_all(&call_bytes(3, NFS, 3, 0)[..10]).unwrap();
    assert_closed_by_server(&mut connect(addr)); // the limit
                                                 // The live client calls every 100 ms for 2 s (four timeouts) and keeps
                                                 // its connection; the two quiet ones are closed within two timeouts.
    for xid in 10..30 {
        std::thread::sleep(Duration::from_millis(100));
        null_ok(&mut live, xid, NFS);
    }
    assert_closed_by_server(&mut silent);
    assert_closed_by_server(&mut half);
    assert_eq!(server.stats().closed_idle, 2);
    assert!(wait_until(Duration::from_secs(5), || server
        .stats()
        .connections
        == 1));
    null_ok(&mut connect(addr), 40, NFS);
    null_ok(&mut live, 41, NFS);
}

#[test]
fn connection_limit_accepts_and_closes_extra_connections() {
    let mut config = config();
    config.limits.max_connections = 2;
    let server = Server::start(config).unwrap();
    let addr = addr(&server);
    let mut a = connect(addr);
    let mut b = connect(addr);
    null_ok(&mut a, 1, NFS);
    null_ok(&mut b, 2, NFS);
    let mut c = connect(addr);
    assert_closed_by_server(&mut c);
    assert_eq!(server.stats().rejected, 1);
    // Closing one frees its slot.
    drop(a);
    assert!(wait_until(Duration::from_secs(5), || server
        .stats()
        .connections
        == 1));
    null_ok(&mut connect(addr), 3, NFS);
}
