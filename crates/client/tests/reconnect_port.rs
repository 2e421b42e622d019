//! A reconnect keeps its source port, so the server's duplicate request cache
//! (keyed on the client's address and port) recognises the retransmissions.
//!
//! This failed in clean-clone CI runs, after the earlier test binaries had
//! left thousands of sockets in TIME_WAIT: the client's first connection let
//! `connect` choose its port, and `connect` shares a port with TIME_WAIT
//! sockets towards other peers, so the reconnect's `bind` to that port failed
//! (they lack SO_REUSEADDR) and the client fell back to another port. With
//! 12,000 TIME_WAIT sockets on the host it failed 8 times in 10; since the
//! first connection binds port 0 itself (`transport/socket.rs`), 0 in 10.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

#[path = "support/calls.rs"]
mod calls;
#[path = "support/fake_server.rs"]
mod fake_server;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use calls::{call_u32, options};
use fake_server::fake_server;
use rnfs_client::RpcClient;

#[test]
fn a_retransmission_after_reconnecting_comes_from_the_same_source_port() {
    // The server's duplicate request cache is keyed on the client's address
    // and port: the retransmission must come from where the call came from.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = Arc::clone(&seen);
    let addr = fake_server(move |conn, mut peer| {
        let from = peer.stream.peer_addr().unwrap();
        while let Some(c) = peer.next_call() {
            seen2.lock().unwrap().push((conn, from, c.xid));
            if conn == 0 {
                // The server resets the connection (as a restarted server
                // does): no TIME_WAIT on its side for this address pair, so
                // the kernel lets the client have its port again.
                socket2::SockRef::from(&peer.stream)
                    .set_linger(Some(Duration::ZERO))
                    .unwrap();
                return;
            }
            peer.reply(c.xid, 4);
        }
    });
    let rpc = RpcClient::connect(addr, options(30_000, 2, 4)).unwrap();
    assert_eq!(call_u32(&rpc, 1).unwrap(), 4);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!((seen[0].0, seen[1].0), (0, 1), "two connections");
    assert_eq!(seen[0].2, seen[1].2, "same XID");
    assert_eq!(seen[0].1, seen[1].1, "same source address and port");
    assert_eq!(rpc.stats().reconnects, 1);
}
