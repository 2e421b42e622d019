//! The output buffer under pressure: pipelined calls whose replies range
//! from empty to 40 KiB (held for coalescing up to 16.5 KiB, written at once
//! beyond), answered in parallel by several threads to a client that reads
//! slowly through a tiny receive buffer, so replies pile up in the output
//! buffer, are written in pieces and the buffer is compacted as it drains.
//! Every reply must arrive once, whole and byte for byte what its call asked
//! for.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod common;

use std::collections::HashSet;
use std::io::Write;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use rnfs_rpc::{decode_reply, CallContext, Dispatcher, ReplyStatus, Service, ServiceError};
use rnfs_sched::Config;
use rnfs_server::{Server, ServerConfig};
use rnfs_xdr::{Reader, Writer};
use socket2::{Domain, Socket, Type};

/// The test program (in the range RFC 5531 leaves to users).
const PROG: u32 = 0x2000_0C0B;
/// Result sizes, picked by xid: small, page-sized, and around the 16.5 KiB
/// hold limit.
const SIZES: [usize; 9] = [0, 4, 100, 1020, 1024, 4096, 16_400, 17_000, 40_000];

/// Answers procedure 1 with `SIZES[xid % 9]` bytes derived from the xid.
struct Blob;

fn blob(xid: u32) -> Vec<u8> {
    let len = SIZES[xid as usize % SIZES.len()];
    (0..len)
        .map(|i| (xid as usize).wrapping_mul(31).wrapping_add(i) as u8)
        .collect()
}

impl Service for Blob {
    fn program(&self) -> u32 {
        PROG
    }
    fn versions(&self) -> (u32, u32) {
        (1, 1)
    }
    fn name(&self) -> &'static str {
        "reply-queue-probe"
    }
    fn call(
        &self,
        ctx: &CallContext<'_>,
        _args: &mut Reader<'_>,
        reply: &mut Writer<'_>,
    ) -> Result<(), ServiceError> {
        if ctx.proc_ != 1 {
            return Err(ServiceError::ProcUnavail);
        }
        reply.write_fixed_opaque(&blob(ctx.xid));
        Ok(())
    }
    // Quick: every finished reply may wait for the next call received.
    fn is_quick(&self, _vers: u32, _proc: u32) -> bool {
        true
    }
}

fn start(threads: usize) -> Server {
    let mut config: ServerConfig = config();
    let mut sched = Config::fixed(threads);
    sched.name = "rnfs-replyq".into();
    sched.pin_threads = false;
    config.sched = sched;
    config.limits.max_reply_hold = Duration::from_millis(20);
    let mut d = Dispatcher::new();
    d.register(Arc::new(Blob)).unwrap();
    Server::start_with_dispatcher(config, Arc::new(d)).unwrap()
}

/// Reads every reply of `xids` from `s`, slowly at first, and checks each.
fn read_all(s: &mut TcpStream, xids: std::ops::Range<u32>) {
    let mut seen = HashSet::new();
    for n in 0..xids.len() {
        if n % 64 == 0 && n < 512 {
            // Let the server's queue fill against the small receive buffer.
            std::thread::sleep(Duration::from_millis(5));
        }
        let record = read_record(s).unwrap();
        let reply = decode_reply(&record).unwrap();
        assert_eq!(reply.header.status, ReplyStatus::Success);
        let xid = reply.header.xid;
        assert!(xids.contains(&xid), "unknown xid {xid}");
        assert!(seen.insert(xid), "xid {xid} answered twice");
        assert_eq!(reply.results, &blob(xid)[..], "reply {xid} damaged");
    }
}

#[test]
fn pipelined_replies_of_every_size_arrive_whole_through_a_slow_reader() {
    let server = start(4);
    let addr = addr(&server);
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&addr.into()).unwrap();
    let mut s: TcpStream = socket.into();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // Batches of 32 calls in one write each, so the server takes several
    // complete records at once and holds replies for the ones behind.
    const CALLS: u32 = 2_000;
    let writer = {
        let mut w = s.try_clone().unwrap();
        std::thread::spawn(move || {
            for first in (0..CALLS).step_by(32) {
                let mut batch = Vec::new();
                for xid in first..(first + 32).min(CALLS) {
                    batch.extend(call_bytes(xid, PROG, 1, 1));
                }
                w.write_all(&batch).unwrap();
            }
        })
    };
    read_all(&mut s, 0..CALLS);
    writer.join().unwrap();
    // The connection still works afterwards.
    s.write_all(&call_bytes(CALLS, PROG, 1, 1)).unwrap();
    read_all(&mut s, CALLS..CALLS + 1);
    server.shutdown();
}
