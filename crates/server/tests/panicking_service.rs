//! A service that panics must cost only the call that panicked: the call is
//! answered SYSTEM_ERR and retired, its connection keeps serving, replies held
//! for it go out, and a drain completes.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a test failure"
)]

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use rnfs_rpc::{decode_reply, CallContext, Dispatcher, ReplyStatus, Service, ServiceError};
use rnfs_sched::Config;
use rnfs_server::Server;
use rnfs_xdr::{Reader, Writer};

const PROG: u32 = 0x2000_0C0B;
const OK: u32 = 0;
const PANIC: u32 = 1;
/// Writes the replies held for it (`before_blocking`), then panics.
const BLOCK_THEN_PANIC: u32 = 2;

struct PanickingService;

impl Service for PanickingService {
    fn program(&self) -> u32 {
        PROG
    }
    fn versions(&self) -> (u32, u32) {
        (1, 1)
    }
    fn name(&self) -> &'static str {
        "panic-probe"
    }
    fn call(
        &self,
        ctx: &CallContext<'_>,
        _args: &mut Reader<'_>,
        _reply: &mut Writer<'_>,
    ) -> Result<(), ServiceError> {
        match ctx.proc_ {
            OK => Ok(()),
            PANIC => panic!("probe: call {} panics", ctx.xid),
            BLOCK_THEN_PANIC => {
                rnfs_server::before_blocking();
                panic!("probe: call {} panics after before_blocking", ctx.xid)
            }
            _ => Err(ServiceError::ProcUnavail),
        }
    }
    fn is_quick(&self, _vers: u32, _proc_: u32) -> bool {
        true
    }
}

fn start(threads: usize, max_in_flight: u32, hold: Duration) -> Server {
    let mut config = config();
    let mut sched = Config::fixed(threads);
    sched.name = "rnfs-panic".into();
    sched.pin_threads = false;
    config.sched = sched;
    config.limits.max_in_flight_per_conn = max_in_flight;
    config.limits.max_reply_hold = hold;
    let mut d = Dispatcher::new();
    d.register(Arc::new(PanickingService)).unwrap();
    Server::start_with_dispatcher(config, Arc::new(d)).unwrap()
}

/// Sends the calls `(xid, proc)` in one write, so they arrive together.
fn send_together(s: &mut TcpStream, calls: &[(u32, u32)]) {
    let mut batch = Vec::new();
    for &(xid, proc_) in calls {
        batch.extend(call_bytes(xid, PROG, 1, proc_));
    }
    s.write_all(&batch).unwrap();
}

/// Reads one reply: its xid and status.
fn reply(s: &mut TcpStream) -> (u32, ReplyStatus) {
    let record = read_record(s).unwrap();
    let reply = decode_reply(&record).unwrap();
    (reply.header.xid, reply.header.status)
}

/// Drains `server` and checks that no call was left in flight.
fn drain_completes(server: &Server) {
    let outcome = server.drain(Duration::from_secs(5));
    assert_eq!(outcome.remaining, 0, "{outcome:?}");
    assert_eq!(server.stats().in_flight, 0, "{:?}", server.stats());
}

#[test]
fn a_panicking_call_is_answered_system_err_and_retired() {
    // A window of 2: two calls leaked in flight would stop the connection.
    let server = start(THREADS, 2, Duration::ZERO);
    let mut s = connect(addr(&server));
    for round in 0..4 {
        let xid = round * 2;
        s.write_all(&call_bytes(xid, PROG, 1, PANIC)).unwrap();
        assert_eq!(
            reply(&mut s),
            (xid, ReplyStatus::SystemErr),
            "round {round}"
        );
        s.write_all(&call_bytes(xid + 1, PROG, 1, OK)).unwrap();
        assert_eq!(
            reply(&mut s),
            (xid + 1, ReplyStatus::Success),
            "round {round}"
        );
    }
    // Pipelined past the window: panicking calls free their slots too.
    let calls: Vec<(u32, u32)> = (100..110)
        .map(|xid| (xid, if xid % 2 == 0 { PANIC } else { OK }))
        .collect();
    send_together(&mut s, &calls);
    let mut got: Vec<(u32, ReplyStatus)> = (0..calls.len()).map(|_| reply(&mut s)).collect();
    got.sort_by_key(|&(xid, _)| xid);
    let want: Vec<(u32, ReplyStatus)> = calls
        .iter()
        .map(|&(xid, proc_)| {
            let status = if proc_ == PANIC {
                ReplyStatus::SystemErr
            } else {
                ReplyStatus::Success
            };
            (xid, status)
        })
        .collect();
    assert_eq!(got, want);
    assert!(
        wait_until(Duration::from_secs(5), || server.stats().in_flight == 0),
        "{:?}",
        server.stats()
    );
    drain_completes(&server);
}

/// A call that writes the replies held for it (`before_blocking`) and then
/// panics: those replies are retired on its own connection, not on the next
/// connection the thread serves, and the panicking call is answered.
#[test]
fn a_panic_after_before_blocking_retires_on_its_own_connection() {
    // One thread, so the next call it serves is on the other connection; a
    // long hold, so the first reply waits for the panicking call.
    let server = start(1, 4, Duration::from_secs(10));
    let mut a = connect(addr(&server));
    send_together(&mut a, &[(1, OK), (2, BLOCK_THEN_PANIC)]);
    assert_eq!(reply(&mut a), (1, ReplyStatus::Success));
    assert_eq!(reply(&mut a), (2, ReplyStatus::SystemErr));

    // Another connection, served by the same thread, keeps its full window.
    let mut b = connect(addr(&server));
    for xid in 0..20 {
        b.write_all(&call_bytes(xid, PROG, 1, OK)).unwrap();
        assert_eq!(reply(&mut b), (xid, ReplyStatus::Success));
    }
    // And the first connection still serves.
    a.write_all(&call_bytes(3, PROG, 1, OK)).unwrap();
    assert_eq!(reply(&mut a), (3, ReplyStatus::Success));
    assert!(
        wait_until(Duration::from_secs(5), || server.stats().in_flight == 0),
        "{:?}",
        server.stats()
    );
    drain_completes(&server);
}
