//! A scripted fake RPC server on loopback (std `TcpListener`), for transport
//! tests: each accepted connection runs a closure over a [`Peer`].
//! Use: `#[path = "support/fake_server.rs"] mod fake_server;`
#![allow(dead_code, reason = "each test binary uses a different subset")]
#![allow(clippy::unwrap_used, reason = "tests")]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rnfs_rpc::{decode_call, encode_record, OpaqueAuth, RecordDecoder, ReplyHeader, ReplyStatus};
use rnfs_xdr::{Encode, Reader, Writer};

/// One call as a fake server sees it.
pub(crate) struct Call {
    pub(crate) xid: u32,
    /// The first argument word (0 if there is none).
    pub(crate) arg: u32,
}

/// A fake server's end of one connection.
pub(crate) struct Peer {
    pub(crate) stream: TcpStream,
    decoder: RecordDecoder,
}

impl Peer {
    /// The next call, `None` at end of stream, on a read timeout or on a
    /// record that is not a call.
    pub(crate) fn next_call(&mut self) -> Option<Call> {
        loop {
            if let Some(rec) = self.decoder.next_record().ok()? {
                let mut r = Reader::new(&rec);
                let h = decode_call(&mut r).ok()?;
                let arg = r.read_u32().unwrap_or(0);
                return Some(Call { xid: h.xid, arg });
            }
            let n = self.stream.read(self.decoder.read_buf()).ok()?;
            if n == 0 {
                return None;
            }
            self.decoder.advance(n);
        }
    }

    /// The next call's XID (see [`next_call`](Self::next_call)).
    pub(crate) fn next_xid(&mut self) -> Option<u32> {
        self.next_call().map(|c| c.xid)
    }

    /// Writes `bytes` (errors ignored: the client may be gone).
    pub(crate) fn send(&mut self, bytes: &[u8]) {
        let _ = self.stream.write_all(bytes);
    }

    /// A SUCCESS reply to `xid` whose results are the one word `result`.
    pub(crate) fn reply(&mut self, xid: u32, result: u32) {
        self.send(&reply(xid, ReplyStatus::Success, &result.to_be_bytes()));
    }
}

/// A reply record: header with `status`, then `results`.
pub(crate) fn reply(xid: u32, status: ReplyStatus, results: &[u8]) -> Vec<u8> {
    let mut msg = Vec::new();
    ReplyHeader {
        xid,
        verf: OpaqueAuth::NONE,
        status,
    }
    .encode(&mut Writer::new(&mut msg));
    msg.extend_from_slice(results);
    record(&msg)
}

/// `msg` as one record-marked fragment.
pub(crate) fn record(msg: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_record(msg, &mut out);
    out
}

/// Listens on loopback; runs `serve(connection number, peer)` on a thread
/// per accepted connection.
pub(crate) fn fake_server(serve: impl Fn(usize, Peer) + Send + Sync + 'static) -> SocketAddr {
    fake_server_accepting(usize::MAX, serve)
}

/// [`fake_server`] that accepts `at_most` connections, then closes the port.
pub(crate) fn fake_server_accepting(
    at_most: usize,
    serve: impl Fn(usize, Peer) + Send + Sync + 'static,
) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let serve = Arc::new(serve);
    thread::spawn(move || {
        for n in 0..at_most {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            let serve = Arc::clone(&serve);
            thread::spawn(move || {
                serve(
                    n,
                    Peer {
                        stream,
                        decoder: RecordDecoder::new(1 << 20),
                    },
                )
            });
        }
    });
    addr
}

/// Waits until `cond` holds (at most 10 s): what a fake server's thread has
/// seen may trail what the client already returned.
pub(crate) fn eventually(what: &str, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(10), "never: {what}");
        thread::sleep(Duration::from_millis(2));
    }
}
