//! A proxy between an NFS client and server on loopback that holds the
//! calls of one NFSv3 procedure for a while before relaying them, so that
//! calls made after one reach the server first: for tests of races between a
//! call on the wire and the client's other calls.
//! Use: `#[path = "support/holding_proxy.rs"] mod holding_proxy;`
#![allow(dead_code, reason = "each test binary uses a different subset")]
#![allow(clippy::unwrap_used, reason = "tests")]

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use rnfs_rpc::{encode_record, peek_call_ids, RecordDecoder};

const NFS_PROGRAM: u32 = 100_003;

/// Which calls are held, for how long, and how many were.
pub(crate) struct Hold {
    proc_: u32,
    hold: Duration,
    held: AtomicU32,
}

impl Hold {
    /// Calls of NFSv3 procedure `proc_` are relayed `hold` after they came.
    pub(crate) fn new(proc_: u32, hold: Duration) -> Arc<Self> {
        Arc::new(Self {
            proc_,
            hold,
            held: AtomicU32::new(0),
        })
    }

    /// How many calls were held so far (counted as they come).
    pub(crate) fn held(&self) -> u32 {
        self.held.load(Ordering::SeqCst)
    }
}

/// Listens on loopback; each connection is relayed to `server`, the calls
/// `hold` names after a delay, the others and all replies at once.
pub(crate) fn holding_proxy(server: SocketAddr, hold: Arc<Hold>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let upstream = TcpStream::connect(server).unwrap();
            let (s_in, s_out) = (upstream.try_clone().unwrap(), upstream);
            let to_server = Arc::new(Mutex::new(s_out));
            let mut to_client = client.try_clone().unwrap();
            thread::spawn(move || relay(s_in, |rec| write_record(&mut to_client, rec)));
            let hold = Arc::clone(&hold);
            thread::spawn(move || {
                relay(client, |rec| match peek_call_ids(rec) {
                    Some((NFS_PROGRAM, 3, proc_)) if proc_ == hold.proc_ => {
                        hold.held.fetch_add(1, Ordering::SeqCst);
                        let (rec, to, delay) = (rec.to_vec(), Arc::clone(&to_server), hold.hold);
                        thread::spawn(move || {
                            thread::sleep(delay);
                            write_record(&mut to.lock().unwrap(), &rec);
                        });
                        true
                    }
                    _ => write_record(&mut to_server.lock().unwrap(), rec),
                });
                let _ = to_server.lock().unwrap().shutdown(Shutdown::Write);
            });
        }
    });
    addr
}

fn write_record(to: &mut TcpStream, record: &[u8]) -> bool {
    let mut framed = Vec::with_capacity(record.len() + 4);
    encode_record(record, &mut framed);
    to.write_all(&framed).is_ok()
}

/// Reads records from `from` and hands each to `out` until either fails.
fn relay(mut from: TcpStream, mut out: impl FnMut(&[u8]) -> bool) {
    let mut decoder = RecordDecoder::new(4 << 20);
    loop {
        while let Ok(Some(rec)) = decoder.next_record() {
            if !out(&rec) {
                return;
            }
        }
        match from.read(decoder.read_buf()) {
            Ok(0) | Err(_) => return,
            Ok(n) => decoder.advance(n),
        }
    }
}
