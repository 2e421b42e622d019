//! A proxy between an NFS client and server on loopback that holds the
//! calls (or the replies) of one NFSv3 procedure for a while before relaying
//! them, so that calls made after one reach the server first (or are
//! answered first): for tests of races between a call on the wire and the
//! client's other calls.
//! Use: `#[path = "support/holding_proxy.rs"] mod holding_proxy;`
#![allow(dead_code, reason = "each test binary uses a different subset")]
#![allow(clippy::unwrap_used, reason = "tests")]

use std::collections::HashMap;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use rnfs_rpc::peek_call_ids;

#[path = "records.rs"]
mod records;
use records::{relay, write_record};

const NFS_PROGRAM: u32 = 100_003;

/// Which calls are held, for how long, and how many were.
pub(crate) struct Hold {
    proc_: u32,
    hold: Duration,
    held: AtomicU32,
    /// Hold the replies, not the calls.
    replies: bool,
}

impl Hold {
    /// Calls of NFSv3 procedure `proc_` are relayed `hold` after they came.
    pub(crate) fn new(proc_: u32, hold: Duration) -> Arc<Self> {
        Arc::new(Self {
            proc_,
            hold,
            held: AtomicU32::new(0),
            replies: false,
        })
    }

    /// Calls of NFSv3 procedure `proc_` are relayed at once, and their
    /// replies `hold` after they came: the server has answered, the client
    /// does not know yet.
    pub(crate) fn replies(proc_: u32, hold: Duration) -> Arc<Self> {
        Arc::new(Self {
            replies: true,
            ..Arc::into_inner(Self::new(proc_, hold)).unwrap()
        })
    }

    /// How many calls were held so far (counted as they come).
    pub(crate) fn held(&self) -> u32 {
        self.held.load(Ordering::SeqCst)
    }
}

/// Listens on loopback; each connection is relayed to `server`, the calls
/// `hold` names (or their replies) after a delay, everything else at once.
pub(crate) fn holding_proxy(server: SocketAddr, hold: Arc<Hold>) -> SocketAddr {
    holding_proxy_of(server, vec![hold])
}

/// [`holding_proxy`] with several holds (one per procedure).
pub(crate) fn holding_proxy_of(server: SocketAddr, holds: Vec<Arc<Hold>>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let upstream = TcpStream::connect(server).unwrap();
            let (s_in, s_out) = (upstream.try_clone().unwrap(), upstream);
            let to_server = Arc::new(Mutex::new(s_out));
            let to_client = Arc::new(Mutex::new(client.try_clone().unwrap()));
            // XIDs of the calls whose replies are held.
            let xids = Arc::new(Mutex::new(HashMap::new()));
            thread::spawn({
                let xids = Arc::clone(&xids);
                move || {
                    relay(s_in, |rec| {
                        let held = xid(rec).and_then(|x| xids.lock().unwrap().remove(&x));
                        match held {
                            Some(delay) => {
                                later(delay, rec, &to_client);
                                true
                            }
                            None => write_record(&mut to_client.lock().unwrap(), rec),
                        }
                    })
                }
            });
            let holds = holds.clone();
            thread::spawn(move || {
                relay(client, |rec| {
                    let hold = match peek_call_ids(rec) {
                        Some((NFS_PROGRAM, 3, proc_)) => holds.iter().find(|h| h.proc_ == proc_),
                        _ => None,
                    };
                    let Some(hold) = hold else {
                        return write_record(&mut to_server.lock().unwrap(), rec);
                    };
                    hold.held.fetch_add(1, Ordering::SeqCst);
                    if hold.replies {
                        if let Some(x) = xid(rec) {
                            xids.lock().unwrap().insert(x, hold.hold);
                        }
                        write_record(&mut to_server.lock().unwrap(), rec)
                    } else {
                        later(hold.hold, rec, &to_server);
                        true
                    }
                });
                let _ = to_server.lock().unwrap().shutdown(Shutdown::Write);
            });
        }
    });
    addr
}

/// A record's XID.
fn xid(record: &[u8]) -> Option<u32> {
    record.first_chunk::<4>().map(|b| u32::from_be_bytes(*b))
}

/// Writes `record` to `to` after `delay`, from a thread of its own.
fn later(delay: Duration, record: &[u8], to: &Arc<Mutex<TcpStream>>) {
    let (record, to) = (record.to_vec(), Arc::clone(to));
    thread::spawn(move || {
        thread::sleep(delay);
        write_record(&mut to.lock().unwrap(), &record);
    });
}
