//! A proxy between an NFS client and server on loopback that answers some
//! NFSv3 calls itself with NFS3ERR_JUKEBOX ("try again later": the server did
//! nothing) instead of relaying them, for tests that a client retries them
//! (or, with [`JukeboxPlan::failing`], with another error status; or, with
//! [`JukeboxPlan::unanswered`], not at all).
//! Use: `#[path = "support/jukebox_proxy.rs"] mod jukebox_proxy;`
#![allow(dead_code, reason = "each test binary uses a different subset")]
#![allow(clippy::unwrap_used, reason = "tests")]

use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use rnfs_rpc::peek_call_ids;

#[path = "records.rs"]
mod records;
use records::{relay, write_record};

const NFS_PROGRAM: u32 = 100_003;
const JUKEBOX: u32 = 10_008;
const PROCEDURES: usize = 22;

/// Which calls get NFS3ERR_JUKEBOX: per NFSv3 procedure, how many more, and
/// how many did. One call of a procedure in `every` is answered while some
/// are left, starting with the first.
pub(crate) struct JukeboxPlan {
    every: u32,
    /// With [`JukeboxPlan::unanswered`]: what becomes of a picked call.
    silence: Option<Silence>,
    /// The xids of the picked calls whose replies are dropped.
    silenced: Mutex<Vec<u32>>,
    /// The status answered (NFS3ERR_JUKEBOX unless `failing`).
    status: u32,
    left: [AtomicU32; PROCEDURES],
    seen: [AtomicU32; PROCEDURES],
    answered: [AtomicU32; PROCEDURES],
}

impl JukeboxPlan {
    /// `counts`: (procedure number, how many calls of it to answer), every
    /// other call (so a retry goes through).
    pub(crate) fn new(counts: &[(u32, u32)]) -> Arc<Self> {
        Self::every(2, counts)
    }

    /// `counts`: (procedure number, how many calls of it to answer), every
    /// call until they are spent.
    pub(crate) fn always(counts: &[(u32, u32)]) -> Arc<Self> {
        Self::every(1, counts)
    }

    /// `counts`: (procedure number, how many calls of it to answer), every
    /// call until they are spent, with the error `status` (an `Nfsstat3`
    /// number) rather than NFS3ERR_JUKEBOX.
    pub(crate) fn failing(status: u32, counts: &[(u32, u32)]) -> Arc<Self> {
        Self::with_status(1, status, counts)
    }

    /// `counts`: (procedure number, how many calls of it to pick), every
    /// call until they are spent; a picked call gets no reply ever, its
    /// retransmissions included: `Silence::Call` drops it, `Silence::Reply`
    /// relays it (the server carries it out) and drops the replies.
    pub(crate) fn unanswered(silence: Silence, counts: &[(u32, u32)]) -> Arc<Self> {
        let mut plan = Self::with_status(1, JUKEBOX, counts);
        Arc::get_mut(&mut plan).unwrap().silence = Some(silence);
        plan
    }

    fn every(every: u32, counts: &[(u32, u32)]) -> Arc<Self> {
        Self::with_status(every, JUKEBOX, counts)
    }

    fn with_status(every: u32, status: u32, counts: &[(u32, u32)]) -> Arc<Self> {
        let plan = Self {
            every,
            silence: None,
            silenced: Mutex::new(Vec::new()),
            status,
            left: std::array::from_fn(|_| AtomicU32::new(0)),
            seen: std::array::from_fn(|_| AtomicU32::new(0)),
            answered: std::array::from_fn(|_| AtomicU32::new(0)),
        };
        for &(proc_, n) in counts {
            assert!(failure_words(proc_).is_some(), "procedure {proc_}");
            plan.left[proc_ as usize].store(n, Ordering::Relaxed);
        }
        Arc::new(plan)
    }

    /// How many calls of `proc_` went through the proxy, answered or not.
    pub(crate) fn seen(&self, proc_: u32) -> u32 {
        self.seen[proc_ as usize].load(Ordering::Relaxed)
    }

    /// How many calls of `proc_` were answered NFS3ERR_JUKEBOX.
    pub(crate) fn answered(&self, proc_: u32) -> u32 {
        self.answered[proc_ as usize].load(Ordering::Relaxed)
    }

    /// Whether the reply `record` must be dropped.
    fn silences(&self, record: &[u8]) -> bool {
        xid(record).is_some_and(|x| self.silenced.lock().unwrap().contains(&x))
    }

    fn take(&self, proc_: u32) -> bool {
        let i = proc_ as usize;
        if i >= PROCEDURES || self.seen[i].fetch_add(1, Ordering::Relaxed) % self.every != 0 {
            return false;
        }
        let took = self.left[i]
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok();
        if took {
            self.answered[i].fetch_add(1, Ordering::Relaxed);
        }
        took
    }
}

/// A record's xid, its first word (calls and replies alike).
fn xid(record: &[u8]) -> Option<u32> {
    record.first_chunk::<4>().map(|x| u32::from_be_bytes(*x))
}

/// What [`JukeboxPlan::unanswered`] does with a picked call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Silence {
    /// Dropped: the server never sees it.
    Call,
    /// Relayed; the server's replies are dropped.
    Reply,
}

/// The words of a failed result after its status, all zero ("no
/// attributes"), for the procedures a plan may name.
fn failure_words(proc_: u32) -> Option<usize> {
    match proc_ {
        1 => Some(0),              // GETATTR
        3 | 4 | 6 => Some(1),      // LOOKUP, ACCESS, READ: post_op_attr
        2 | 7 | 8 | 21 => Some(2), // SETATTR, WRITE, CREATE, COMMIT: wcc_data
        _ => None,
    }
}

/// Listens on loopback; each connection is relayed to `server`, except the
/// calls `plan` picks, which the proxy answers with NFS3ERR_JUKEBOX.
pub(crate) fn jukebox_proxy(server: SocketAddr, plan: Arc<JukeboxPlan>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let upstream = TcpStream::connect(server).unwrap();
            let to_client = Arc::new(Mutex::new(client.try_clone().unwrap()));
            let plan = Arc::clone(&plan);
            let (s_in, s_out) = (upstream.try_clone().unwrap(), upstream);
            let replies = Arc::clone(&to_client);
            let reply_plan = Arc::clone(&plan);
            thread::spawn(move || {
                relay(s_in, |rec| reply_plan.silences(rec) || send(&replies, rec))
            });
            thread::spawn(move || {
                let mut s_out = s_out;
                relay(client, |rec| match peek_call_ids(rec) {
                    Some((NFS_PROGRAM, 3, _)) if plan.silences(rec) => {
                        plan.silence == Some(Silence::Call) || write_record(&mut s_out, rec)
                    }
                    Some((NFS_PROGRAM, 3, proc_)) if plan.take(proc_) => match plan.silence {
                        Some(silence) => {
                            plan.silenced.lock().unwrap().extend(xid(rec));
                            silence == Silence::Call || write_record(&mut s_out, rec)
                        }
                        None => send(&to_client, &jukebox_reply(rec, proc_, plan.status)),
                    },
                    _ => write_record(&mut s_out, rec),
                });
                let _ = s_out.shutdown(Shutdown::Write);
            });
        }
    });
    addr
}

fn jukebox_reply(call: &[u8], proc_: u32, status: u32) -> Vec<u8> {
    // xid, REPLY, MSG_ACCEPTED, AUTH_NONE verifier, SUCCESS, the status.
    let mut reply = call[..4].to_vec();
    for word in [1, 0, 0, 0, 0, status] {
        reply.extend_from_slice(&u32::to_be_bytes(word));
    }
    reply.resize(reply.len() + 4 * failure_words(proc_).unwrap_or(0), 0);
    reply
}

fn send(to: &Mutex<TcpStream>, record: &[u8]) -> bool {
    write_record(&mut to.lock().unwrap(), record)
}
