//! RPC over TCP: NULL calls, the RPC-level refusals, pipelining, IPv6.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a test failure"
)]

#[path = "../../../tests/support/cannot_run.rs"]
mod cannot_run;
mod common;
use cannot_run::cannot_run;

use std::collections::HashSet;
use std::io::Write;
use std::net::SocketAddr;

use common::*;
use rnfs_rpc::{decode_reply, ReplyStatus};
use rnfs_server::{Server, ServerError};

#[test]
fn null_round_trip_on_nfs_and_mount() {
    let server = start();
    let mut s = connect(addr(&server));
    null_ok(&mut s, 1, NFS);
    null_ok(&mut s, 2, MOUNT);
    null_ok(&mut s, 3, NFS);
    server.shutdown();
}

#[test]
fn nfsacl_is_prog_unavail() {
    let server = start();
    let mut s = connect(addr(&server));
    let (xid, status, _) = call(&mut s, 7, NFSACL, 3, 0);
    assert_eq!((xid, status), (7, ReplyStatus::ProgUnavail));
    // The connection stays usable.
    null_ok(&mut s, 8, NFS);
}

#[test]
fn nfs_v4_is_prog_mismatch_3_to_3() {
    let server = start();
    let mut s = connect(addr(&server));
    let (_, status, _) = call(&mut s, 9, NFS, 4, 0);
    assert_eq!(status, ReplyStatus::ProgMismatch { low: 3, high: 3 });
    let (_, status, _) = call(&mut s, 10, MOUNT, 1, 0);
    assert_eq!(status, ReplyStatus::ProgMismatch { low: 3, high: 3 });
}

#[test]
fn unimplemented_procedure_is_proc_unavail() {
    let server = start();
    let mut s = connect(addr(&server));
    // NFSv3 GETATTR and MOUNT MNT: not implemented yet.
    assert_eq!(call(&mut s, 11, NFS, 3, 1).1, ReplyStatus::ProcUnavail);
    assert_eq!(call(&mut s, 12, MOUNT, 3, 1).1, ReplyStatus::ProcUnavail);
    assert_eq!(call(&mut s, 13, NFS, 3, 9999).1, ReplyStatus::ProcUnavail);
}

#[test]
fn pipelined_calls_on_one_connection_are_all_answered() {
    const CALLS: u32 = 500;
    let server = start();
    let mut s = connect(addr(&server));
    // Every call in one write, so threads hand the connection to each other
    // mid-stream and replies may come back in any order.
    let mut batch = Vec::new();
    for xid in 0..CALLS {
        batch.extend(call_bytes(
            1000 + xid,
            if xid % 2 == 0 { NFS } else { MOUNT },
            3,
            0,
        ));
    }
    s.write_all(&batch).unwrap();
    let mut seen = HashSet::new();
    for _ in 0..CALLS {
        let record = read_record(&mut s).unwrap();
        let reply = decode_reply(&record).unwrap();
        assert_eq!(reply.header.status, ReplyStatus::Success);
        assert!(
            seen.insert(reply.header.xid),
            "duplicate reply {}",
            reply.header.xid
        );
    }
    assert_eq!(seen, (1000..1000 + CALLS).collect());
    assert!(server.stats().peak_in_flight <= rnfs_server::Limits::DEFAULT_MAX_IN_FLIGHT_PER_CONN);
}

/// Replies written by many threads to one socket: every reply arrives exactly
/// once and whole, including when the client reads late and the socket fills
/// (replies then wait in the output buffer for the poller), and every call is
/// retired (in flight back to 0).
#[test]
fn replies_from_many_threads_arrive_whole_and_are_all_retired() {
    const CONNS: u32 = 4;
    const CALLS: u32 = 3000;
    let server = start();
    let addr = addr(&server);
    let clients: Vec<_> = (0..CONNS)
        .map(|c| {
            std::thread::spawn(move || {
                let mut s = connect(addr);
                let base = c * 100_000;
                let mut batch = Vec::new();
                for xid in 0..CALLS {
                    batch.extend(call_bytes(base + xid, NFS, 3, 0));
                }
                let mut writer = s.try_clone().unwrap();
                let sender = std::thread::spawn(move || writer.write_all(&batch).unwrap());
                // Read late: the server's socket buffer fills and replies queue.
                std::thread::sleep(std::time::Duration::from_millis(300));
                let mut seen = HashSet::new();
                for _ in 0..CALLS {
                    let record = read_record(&mut s).unwrap();
                    let reply = decode_reply(&record).unwrap();
                    assert_eq!(reply.header.status, ReplyStatus::Success);
                    assert!(seen.insert(reply.header.xid), "duplicate reply");
                }
                sender.join().unwrap();
                assert_eq!(seen, (base..base + CALLS).collect());
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while server.in_flight() != 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(server.in_flight(), 0, "calls answered but never retired");
}

#[test]
fn many_clients_in_parallel() {
    let server = start();
    let addr = addr(&server);
    let clients: Vec<_> = (0..8u32)
        .map(|c| {
            std::thread::spawn(move || {
                let mut s = connect(addr);
                for i in 0..200 {
                    null_ok(&mut s, c * 1000 + i, NFS);
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
}

#[test]
fn ipv6_loopback() {
    let mut config = config();
    config.listen = vec!["[::1]:0".parse().unwrap()];
    let server = match Server::start(config) {
        Ok(server) => server,
        Err(ServerError::Bind { source, .. }) => {
            cannot_run(&format!(
                "cannot bind [::1] (no IPv6 loopback here?): {source}"
            ));
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let addr = addr(&server);
    assert!(addr.is_ipv6());
    let mut s = connect(addr);
    null_ok(&mut s, 1, NFS);
}

#[test]
fn ipv4_and_ipv6_wildcards_share_a_port() {
    // Pick a free port on the IPv4 wildcard, then ask for both families on it.
    let mut first = config();
    first.listen = vec!["0.0.0.0:0".parse().unwrap()];
    let port = Server::start(first).unwrap().local_addrs()[0].port();
    let mut config = config();
    config.listen = vec![
        SocketAddr::from(([0, 0, 0, 0], port)),
        SocketAddr::from(([0u16; 8], port)),
    ];
    // Where the host has an IPv6 loopback, the IPv6 side must bind and serve.
    let ipv6 = std::net::TcpListener::bind((std::net::Ipv6Addr::LOCALHOST, 0)).is_ok();
    let server = match Server::start(config) {
        Ok(server) => server,
        Err(ServerError::Bind { addr, source }) if addr.is_ipv6() && !ipv6 => {
            cannot_run(&format!(
                "no IPv6 loopback here; cannot bind {addr}: {source}"
            ));
            return;
        }
        Err(e) => panic!("{e}"),
    };
    null_ok(
        &mut connect(SocketAddr::from(([127, 0, 0, 1], port))),
        1,
        NFS,
    );
    if ipv6 {
        null_ok(
            &mut connect(SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port))),
            2,
            MOUNT,
        );
    } else {
        cannot_run("the IPv6 side: no IPv6 loopback here");
    }
    drop(server);
}

#[test]
fn bind_error_names_the_address() {
    let server = start();
    let taken = addr(&server);
    let mut config = config();
    config.listen = vec![taken];
    let err = Server::start(config).unwrap_err();
    assert!(
        matches!(err, ServerError::Bind { addr, .. } if addr == taken),
        "{err:?}"
    );
    assert!(err.to_string().contains(&taken.to_string()), "{err}");
}

#[test]
fn no_listen_address_and_bad_limits_are_refused() {
    let mut config = config();
    config.listen.clear();
    assert!(matches!(
        Server::start(config),
        Err(ServerError::NoListenAddress)
    ));
    let mut config = common::config();
    config.limits.max_in_flight_per_conn = 0;
    assert!(matches!(
        Server::start(config),
        Err(ServerError::InvalidConfig(_))
    ));
}
