//! A server that misbehaves never panics or hangs the client: each case ends
//! in a clear `ClientError` within a bounded time (or succeeds, when the bad
//! input is only noise that the client drops and counts).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

#[path = "support/fake_server.rs"]
mod fake_server;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fake_server::{eventually, fake_server, fake_server_accepting, record, reply};
use rnfs_client::{ClientError, ClientOptions, Credential, RpcClient};
use rnfs_rpc::ReplyStatus;

const PROG: u32 = 400_124;
/// Every case must end well within this.
const BOUND: Duration = Duration::from_secs(5);
/// The call timeout where the case ends in one.
const SHORT: Duration = Duration::from_millis(200);
/// The call timeout where the server answers: a loaded machine may take more
/// than [`SHORT`], which would retransmit or time the call out.
const PATIENT: Duration = Duration::from_secs(10);

fn client(addr: SocketAddr, timeout: Duration, max_reply: usize) -> RpcClient {
    let opts = ClientOptions {
        timeout,
        retrans: 1,
        max_reply,
        ..ClientOptions::default()
    };
    RpcClient::connect(addr, opts).unwrap()
}

/// One call expecting a `u32` result, with how long it took.
fn call(rpc: &RpcClient) -> (Result<u32, ClientError>, Duration) {
    let start = Instant::now();
    let r = rpc.call(&Credential::root(), PROG, 1, 1, &0u32, |r| r.read_u32());
    let took = start.elapsed();
    assert!(took < BOUND, "took {took:?}");
    (r, took)
}

#[test]
fn a_server_that_never_answers_times_out_after_the_retransmissions() {
    let xids = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&xids);
    let addr = fake_server(move |_, mut peer| {
        while let Some(xid) = peer.next_xid() {
            seen.lock().unwrap().push(xid);
        }
    });
    let rpc = client(addr, SHORT, 1 << 20);
    let (r, took) = call(&rpc);
    assert!(matches!(r, Err(ClientError::TimedOut)), "{r:?}");
    assert!(took >= Duration::from_millis(400), "two timeouts: {took:?}");
    // The server's thread may not have read the retransmission yet.
    eventually("the retransmission read", || {
        xids.lock().unwrap().len() >= 2
    });
    let xids = xids.lock().unwrap().clone();
    assert_eq!(xids.len(), 2, "the call and one retransmission");
    assert_eq!(xids[0], xids[1]);
}

#[test]
fn a_truncated_record_times_out() {
    // The record's last bytes never come (later calls are ignored: their
    // bytes would complete it).
    let addr = fake_server(|_, mut peer| {
        if let Some(xid) = peer.next_xid() {
            let full = reply(xid, ReplyStatus::Success, &[0, 0, 0, 1]);
            peer.send(&full[..full.len() - 3]);
        }
        while peer.next_xid().is_some() {}
    });
    let (r, _) = call(&client(addr, SHORT, 1 << 20));
    assert!(matches!(r, Err(ClientError::TimedOut)), "{r:?}");
}

#[test]
fn garbage_records_are_dropped_and_counted() {
    let addr = fake_server(|_, mut peer| {
        while let Some(xid) = peer.next_xid() {
            peer.send(&record(&[0xde, 0xad]));
            peer.send(&record(&[0x5a; 37]));
            peer.send(&record(&[]));
            peer.send(&reply(xid, ReplyStatus::Success, &[0, 0, 0, 42]));
        }
    });
    let rpc = client(addr, PATIENT, 1 << 20);
    let (r, _) = call(&rpc);
    assert_eq!(r.unwrap(), 42);
    assert_eq!(rpc.stats().unknown_replies, 3);
}

#[test]
fn a_garbage_byte_stream_fails_the_call_as_a_bad_reply() {
    // Not record marked at all: the first "mark" announces ~2 GiB.
    let addr = fake_server(|_, mut peer| {
        while peer.next_xid().is_some() {
            peer.send(b"HTTP/1.1 400 Bad Request\r\n\r\n");
        }
    });
    let (r, _) = call(&client(addr, PATIENT, 1 << 20));
    assert!(
        matches!(&r, Err(ClientError::BadReply(m)) if m.contains("exceeds")),
        "{r:?}"
    );
}

#[test]
fn replies_with_unknown_xids_are_dropped_not_fatal() {
    let addr = fake_server(|_, mut peer| {
        while let Some(xid) = peer.next_xid() {
            peer.send(&reply(
                xid ^ 0x8000_0000,
                ReplyStatus::Success,
                &[0, 0, 0, 1],
            ));
            peer.send(&reply(
                xid.wrapping_add(1),
                ReplyStatus::Success,
                &[0, 0, 0, 2],
            ));
            peer.send(&reply(xid, ReplyStatus::Success, &[0, 0, 0, 3]));
            // A duplicate of the real reply, after the call finished.
            peer.send(&reply(xid, ReplyStatus::Success, &[0, 0, 0, 4]));
        }
    });
    let rpc = client(addr, PATIENT, 1 << 20);
    assert_eq!(call(&rpc).0.unwrap(), 3);
    assert_eq!(call(&rpc).0.unwrap(), 3);
    eventually("6 unknown replies", || rpc.stats().unknown_replies >= 6);
    assert_eq!(rpc.stats().unknown_replies, 6);
}

#[test]
fn a_record_over_max_reply_is_a_bad_reply() {
    let addr = fake_server(|_, mut peer| {
        while let Some(xid) = peer.next_xid() {
            peer.send(&reply(xid, ReplyStatus::Success, &[7; 8192]));
        }
    });
    let (r, _) = call(&client(addr, PATIENT, 4096));
    assert!(
        matches!(&r, Err(ClientError::BadReply(m)) if m.contains("exceeds")),
        "{r:?}"
    );
}

#[test]
fn results_that_do_not_decode_are_a_bad_reply() {
    let addr = fake_server(|_, mut peer| {
        while let Some(xid) = peer.next_xid() {
            peer.send(&reply(xid, ReplyStatus::Success, &[0, 1]));
        }
    });
    let (r, _) = call(&client(addr, PATIENT, 1 << 20));
    assert!(matches!(r, Err(ClientError::BadReply(_))), "{r:?}");
}

#[test]
fn a_call_message_instead_of_a_reply_is_a_bad_reply() {
    let addr = fake_server(|_, mut peer| {
        while let Some(xid) = peer.next_xid() {
            // xid, msg_type CALL (0), then junk.
            let mut msg = xid.to_be_bytes().to_vec();
            msg.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 2]);
            peer.send(&record(&msg));
        }
    });
    let (r, _) = call(&client(addr, PATIENT, 1 << 20));
    assert!(matches!(r, Err(ClientError::BadReply(_))), "{r:?}");
}

#[test]
fn an_rpc_level_refusal_is_reported() {
    let addr = fake_server(|_, mut peer| {
        while let Some(xid) = peer.next_xid() {
            peer.send(&reply(xid, ReplyStatus::ProgUnavail, &[]));
        }
    });
    let (r, _) = call(&client(addr, PATIENT, 1 << 20));
    assert!(
        matches!(r, Err(ClientError::Rpc(ReplyStatus::ProgUnavail))),
        "{r:?}"
    );
}

#[test]
fn a_server_closing_mid_reply_every_time_fails_in_bounded_time() {
    let addr = fake_server(|_, mut peer| {
        if let Some(xid) = peer.next_xid() {
            let full = reply(xid, ReplyStatus::Success, &[0, 0, 0, 1]);
            peer.send(&full[..full.len() / 2]);
        }
        // Dropping `peer` closes the connection.
    });
    let rpc = client(addr, SHORT, 1 << 20);
    let (r, _) = call(&rpc);
    assert!(
        matches!(r, Err(ClientError::TimedOut | ClientError::Disconnected(_))),
        "{r:?}"
    );
    assert!(rpc.stats().reconnects >= 1);
}

#[test]
fn a_server_that_goes_away_gives_disconnected() {
    // One connection only: it is closed after the first call, and the port
    // then refuses connections.
    let addr = fake_server_accepting(1, |_, mut peer| {
        let _ = peer.next_xid();
    });
    let rpc = client(addr, SHORT, 1 << 20);
    let (r, _) = call(&rpc);
    assert!(matches!(&r, Err(ClientError::Disconnected(_))), "{r:?}");
}
