//! A proxy between an NFS client and server on loopback that mutates the
//! results of half of the server's successful replies on the way back
//! (`rnfs_xdr::fuzzing::mutate`), for tests that real replies saying odd
//! things never panic or hang a client.
//! Use: `#[path = "support/mutating_proxy.rs"] mod mutating_proxy;`
#![allow(dead_code, reason = "each test binary uses a different subset")]
#![allow(clippy::unwrap_used, reason = "tests")]

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use rnfs_rpc::{decode_reply, encode_record, RecordDecoder, ReplyStatus};
use rnfs_xdr::fuzzing::{mutate, Edit, XorShift};

/// What the proxy does and did: the switch, and counts to show a test is not
/// vacuous.
pub(crate) struct ProxyStats {
    /// Whether replies are mutated now (relayed unchanged while false).
    pub(crate) enabled: AtomicBool,
    /// Replies relayed.
    pub(crate) replies: AtomicU64,
    /// Replies mutated.
    pub(crate) mutated: AtomicU64,
}

impl ProxyStats {
    /// Mutating from the start (`true`) or from when a test enables it.
    pub(crate) fn new(enabled: bool) -> Arc<Self> {
        Arc::new(Self {
            enabled: AtomicBool::new(enabled),
            replies: AtomicU64::new(0),
            mutated: AtomicU64::new(0),
        })
    }
}

/// Listens on loopback; each connection is relayed to `server`, calls as
/// they are, replies with their results mutated half of the time.
pub(crate) fn mutating_proxy(server: SocketAddr, seed: u64, stats: Arc<ProxyStats>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for (n, client) in listener.incoming().enumerate() {
            let Ok(client) = client else { return };
            let upstream = TcpStream::connect(server).unwrap();
            let (mut c_in, mut s_out) =
                (client.try_clone().unwrap(), upstream.try_clone().unwrap());
            thread::spawn(move || {
                let _ = std::io::copy(&mut c_in, &mut s_out);
                let _ = s_out.shutdown(Shutdown::Write);
            });
            let stats = Arc::clone(&stats);
            let rng = XorShift::new(
                seed.wrapping_add(n as u64)
                    .wrapping_mul(0x9e37_79b9_7f4a_7c15),
            );
            thread::spawn(move || relay_replies(upstream, client, rng, &stats));
        }
    });
    addr
}

fn relay_replies(mut from: TcpStream, mut to: TcpStream, mut rng: XorShift, stats: &ProxyStats) {
    let mut decoder = RecordDecoder::new(4 << 20);
    loop {
        while let Ok(Some(rec)) = decoder.next_record() {
            stats.replies.fetch_add(1, Ordering::Relaxed);
            let out = match decode_reply(&rec) {
                Ok(reply)
                    if reply.header.status == ReplyStatus::Success
                        && stats.enabled.load(Ordering::Relaxed)
                        && rng.below(2) == 0 =>
                {
                    stats.mutated.fetch_add(1, Ordering::Relaxed);
                    let edits: Vec<Edit> = (0..1 + rng.below(3))
                        .map(|_| Edit::random(&mut rng))
                        .collect();
                    let (header, results) = rec.split_at(reply.results_offset);
                    [header, &mutate(results, results, &edits)].concat()
                }
                _ => rec,
            };
            let mut framed = Vec::with_capacity(out.len() + 4);
            encode_record(&out, &mut framed);
            if to.write_all(&framed).is_err() {
                return;
            }
        }
        match from.read(decoder.read_buf()) {
            Ok(0) | Err(_) => {
                let _ = to.shutdown(Shutdown::Both);
                return;
            }
            Ok(n) => decoder.advance(n),
        }
    }
}
