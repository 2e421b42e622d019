//! The RPC transport: one [`RpcClient`] multiplexes many concurrent calls over
//! TCP connections to one server (Linux's SUNRPC client transport, in user
//! space).
//!
//! - Each connection has a slot table (`slots.rs`): a call holds a slot from
//!   reservation to reply, its XID carries the slot index, and when every
//!   slot is taken callers queue in a FIFO backlog that is handed freed slots
//!   directly.
//! - Sends go through a lock-free queue drained by whoever holds the send
//!   lock (`conn.rs`). Replies are read by whoever holds the read role
//!   (`lead.rs`): a blocking caller waiting for its reply reads the socket
//!   itself (no thread switch), delivering other calls' replies to their
//!   slots on the way; the connection's reader thread reads for async and
//!   submitted calls, or, for async calls on a multi-thread tokio runtime, a
//!   reader task of that runtime (`reactor.rs`). The caller decodes its
//!   reply.
//! - A call without a reply after `timeout` is retransmitted with the same
//!   XID; a dropped connection is re-established and every outstanding call
//!   sent again (`call.rs`).
//! - With `connections` > 1 (nconnect), calls go round-robin over several
//!   connections, each with its own slot table.
//!
//! Locks on the per-call path: the send lock (once per drain, not per call
//! when calls are concurrent), the read role (once per stint of a blocking
//! reader) and the backlog mutex (only when every slot is in use);
//! [`crate::lockstat`] counts them.

mod call;
mod conn;
mod lead;
#[cfg(all(feature = "tokio", not(loom)))]
mod reactor;
mod slots;
mod socket;
mod sync;

#[cfg(all(test, loom))]
mod loom_tests;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering as StdOrdering};
use std::sync::Arc;
use std::time::Duration;

use rnfs_rpc::{begin_record, encode_call_header, finish_record, Auth, AuthSys, Gids};
use rnfs_xdr::{DecodeError, Encode, Reader, Writer};

use crate::error::ClientError;

#[cfg(all(feature = "async", not(loom)))]
pub use call::CallFuture;
pub use call::PendingCall;

use call::{reserve_blocking, CallState};
use conn::Conn;
use sync::Ordering;

/// Who a call is made as: an AUTH_SYS credential.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Credential {
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Supplementary groups (at most 16 are sent).
    pub gids: Vec<u32>,
    /// The machine name sent in the credential.
    pub machine_name: String,
}

impl Credential {
    /// uid 0, gid 0, no supplementary groups.
    pub fn root() -> Self {
        Self::new(0, 0, Vec::new())
    }

    /// The given ids, with this host's name.
    pub fn new(uid: u32, gid: u32, gids: Vec<u32>) -> Self {
        let machine_name = rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned();
        Self {
            uid,
            gid,
            gids,
            machine_name,
        }
    }

    /// The calling process's effective uid, gid and supplementary groups.
    pub fn current() -> Self {
        let uid = rustix::process::geteuid().as_raw();
        let gid = rustix::process::getegid().as_raw();
        let gids = rustix::process::getgroups()
            .map(|g| g.into_iter().map(|g| g.as_raw()).collect())
            .unwrap_or_default();
        Self::new(uid, gid, gids)
    }
}

/// How an [`RpcClient`] behaves. `Default` gives the Linux TCP mount defaults
/// except `soft`: a library call or a command should fail when the server is
/// gone, not wait for ever. `rnfs mount` mounts `hard`, as mount.nfs does.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// How long to wait for a reply before retransmitting (Linux `timeo`, 60 s).
    pub timeout: Duration,
    /// Retransmissions before a call fails with [`ClientError::TimedOut`]
    /// (Linux `retrans`, 2). Ignored when `hard`.
    pub retrans: u32,
    /// Retry for ever instead of failing (Linux `hard`).
    pub hard: bool,
    /// The most calls in flight per connection; the slot table grows on
    /// demand up to this (Linux `tcp_max_slot_table_entries`, there 65536;
    /// 1024 here). A submitted call holds its slot until it is collected;
    /// background calls (write-behind, read-ahead) hold at most three
    /// quarters of them ([`RpcClient::submit_background`]).
    pub max_slots: u32,
    /// TCP connections per client, used round-robin (Linux `nconnect`).
    pub connections: u32,
    /// The largest reply record accepted.
    pub max_reply: usize,
    /// How long connecting may take.
    pub connect_timeout: Duration,
    /// With the `tokio` feature: async calls polled on a multi-thread tokio
    /// runtime have their replies read by a task of that runtime, woken by
    /// its reactor, instead of handed over by the connection's reader thread
    /// (a thread switch per reply). On by default. If every worker of the
    /// runtime may block waiting for calls, turn it off: the reader thread
    /// then stands in only after a tick (`timeout / 8`, at most 1 s) without
    /// progress.
    pub runtime_reader: bool,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(60),
            retrans: 2,
            hard: false,
            max_slots: 1024,
            connections: 1,
            max_reply: (1 << 20) + (64 << 10),
            connect_timeout: Duration::from_secs(10),
            runtime_reader: true,
        }
    }
}

/// A thread-safe RPC client for one server. Cloning is cheap and shares the
/// connections; when the last clone is dropped the connections close, their
/// reader threads exit, and calls still waiting get [`ClientError::Shutdown`].
#[derive(Debug, Clone)]
pub struct RpcClient {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    peer: SocketAddr,
    options: ClientOptions,
    conns: Box<[Arc<Conn>]>,
    /// Round-robin cursor over `conns` (Relaxed: any spread is fine).
    next_conn: AtomicUsize,
}

impl Drop for Shared {
    fn drop(&mut self) {
        for conn in self.conns.iter() {
            conn.close();
        }
    }
}

/// Transport counters of one [`RpcClient`], summed over its connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransportStats {
    /// Calls that finished (replied, failed or timed out).
    pub calls: u64,
    /// Retransmissions after a timeout.
    pub retransmits: u64,
    /// Connections re-established after a failure.
    pub reconnects: u64,
    /// Replies dropped because no call waited for their XID (late, duplicate
    /// or unknown).
    pub unknown_replies: u64,
    /// Calls that waited in a backlog for a free slot.
    pub backlog_waits: u64,
    /// Socket reads made by a reader task on a tokio runtime (the async
    /// fast path, [`ClientOptions::runtime_reader`]).
    pub runtime_reads: u64,
    /// Replies assembled in the buffer of an earlier, decoded reply rather
    /// than a fresh allocation.
    pub reused_reply_buffers: u64,
    /// Slots in circulation (grown on demand up to `max_slots` per connection).
    pub slots: u64,
    /// TCP connections.
    pub connections: u64,
}

impl RpcClient {
    /// Connects to the RPC server at `addr` (`options.connections` TCP
    /// connections, at least one).
    pub fn connect(addr: SocketAddr, options: ClientOptions) -> Result<Self, ClientError> {
        let n = options.connections.max(1);
        let seed = xid_seed();
        let mut conns = Vec::with_capacity(n as usize);
        for i in 0..n {
            let conn_seed = seed.wrapping_add(i.wrapping_mul(0x9e37_79b9));
            match Conn::connect(addr, options.clone(), conn_seed) {
                Ok(c) => conns.push(c),
                Err(e) => {
                    // Stop the reader threads of those already connected.
                    conns.iter().for_each(|c: &Arc<Conn>| c.close());
                    return Err(e);
                }
            }
        }
        Ok(Self {
            shared: Arc::new(Shared {
                peer: addr,
                options,
                conns: conns.into_boxed_slice(),
                next_conn: AtomicUsize::new(0),
            }),
        })
    }

    /// The server's address.
    pub fn peer(&self) -> SocketAddr {
        self.shared.peer
    }

    /// The options this client was made with.
    pub fn options(&self) -> &ClientOptions {
        &self.shared.options
    }

    /// The counters so far.
    pub fn stats(&self) -> TransportStats {
        let mut t = TransportStats {
            connections: self.shared.conns.len() as u64,
            ..TransportStats::default()
        };
        for c in self.shared.conns.iter() {
            // Relaxed: statistics.
            let s = &c.stats;
            t.calls += s.calls.load(Ordering::Relaxed);
            t.retransmits += s.retransmits.load(Ordering::Relaxed);
            t.reconnects += s.reconnects.load(Ordering::Relaxed);
            t.unknown_replies += s.unknown_replies.load(Ordering::Relaxed);
            t.backlog_waits += s.backlog_waits.load(Ordering::Relaxed);
            t.runtime_reads += s.runtime_reads.load(Ordering::Relaxed);
            t.reused_reply_buffers += s.reused_reply_buffers.load(Ordering::Relaxed);
            t.slots += u64::from(c.slots.allocated());
        }
        t
    }

    /// Gives up on the server (`umount -f`'s abort of outstanding calls):
    /// closes the connections, and every call in flight or made later, on
    /// any clone, fails with [`ClientError::Shutdown`]. For a server that is
    /// gone while a hard client would retry for ever. Cannot be undone.
    pub fn abort(&self) {
        for conn in self.shared.conns.iter() {
            conn.close();
        }
    }

    /// The next connection, round-robin.
    fn pick(&self) -> &Arc<Conn> {
        let conns = &self.shared.conns;
        // Relaxed: only spreads calls; no data is published through it.
        let i = self.shared.next_conn.fetch_add(1, StdOrdering::Relaxed);
        &conns[i % conns.len()]
    }

    /// Sends `record` on the next connection once it has a free slot
    /// (waiting in the backlog if needed). `leads`: see `CallState::start`.
    fn start(&self, record: Vec<u8>, leads: bool) -> Result<PendingCall, ClientError> {
        let conn = self.pick();
        let idx = reserve_blocking(conn)?;
        Ok(PendingCall::new(CallState::start(
            Arc::clone(conn),
            idx,
            record,
            leads,
            false,
        )))
    }

    /// Calls `prog`/`vers`/`proc_` as `cred` with `args`, and decodes the
    /// results (the bytes after an accepted SUCCESS reply header) with `decode`,
    /// which may borrow from the reply.
    pub fn call<A, T, F>(
        &self,
        cred: &Credential,
        prog: u32,
        vers: u32,
        proc_: u32,
        args: &A,
        decode: F,
    ) -> Result<T, ClientError>
    where
        A: Encode + ?Sized,
        F: FnOnce(&mut Reader<'_>) -> Result<T, DecodeError>,
    {
        let record = encode_request(cred, prog, vers, proc_, args);
        // The caller waits at once: it reads its own reply (no reader wake-up).
        self.start(record, true)?.wait(decode)
    }

    /// Sends `request`, a record encoded for an earlier call, as a new call
    /// (a new XID) and waits for its reply: a call the server answered with
    /// "try again later" (NFS3ERR_JUKEBOX). The earlier call's record is
    /// shared with its send queue, so this copies it.
    pub(crate) fn call_again<T, F>(&self, request: &[u8], decode: F) -> Result<T, ClientError>
    where
        F: FnOnce(&mut Reader<'_>) -> Result<T, DecodeError>,
    {
        self.start(request.to_vec(), true)?.wait(decode)
    }

    /// Sends a call and returns at once; [`PendingCall::wait`] collects the
    /// reply. Many calls may be pending on one client (write-behind and
    /// read-ahead use this). Blocks only while every slot of the chosen
    /// connection is in use (the backlog).
    pub fn submit<A>(
        &self,
        cred: &Credential,
        prog: u32,
        vers: u32,
        proc_: u32,
        args: &A,
    ) -> Result<PendingCall, ClientError>
    where
        A: Encode + ?Sized,
    {
        let record = encode_request(cred, prog, vers, proc_, args);
        self.start(record, false)
    }

    /// [`submit`](Self::submit) for a background call (write-behind): one
    /// that may stay uncollected while its owner waits on other calls.
    /// Background calls hold at most three quarters of a connection's slots
    /// (all but one when it has fewer than eight); past that this returns
    /// `None` and the caller makes the call and waits for it instead. So a
    /// thread whose background calls on many files hold slots it will not
    /// collect until its current call returns can always get a slot for
    /// that call. May wait in the backlog, as `submit` does.
    pub fn submit_background<A>(
        &self,
        cred: &Credential,
        prog: u32,
        vers: u32,
        proc_: u32,
        args: &A,
    ) -> Result<Option<PendingCall>, ClientError>
    where
        A: Encode + ?Sized,
    {
        self.submit_counted(
            |conn| reserve_blocking(conn).map(Some),
            || encode_request(cred, prog, vers, proc_, args),
        )
    }

    /// [`submit_background`](Self::submit_background), but only if a slot
    /// is free now: `None` instead of waiting in the backlog. For optional
    /// calls such as read-ahead, which must not hold up (or wait behind)
    /// required ones.
    pub fn try_submit<A>(
        &self,
        cred: &Credential,
        prog: u32,
        vers: u32,
        proc_: u32,
        args: &A,
    ) -> Result<Option<PendingCall>, ClientError>
    where
        A: Encode + ?Sized,
    {
        self.submit_counted(
            |conn| Ok(conn.slots.try_reserve()),
            || encode_request(cred, prog, vers, proc_, args),
        )
    }

    /// A background call on the next connection: takes one of its
    /// background counts (`None` when they are spent), a slot from `reserve`
    /// (`None`: no slot now; the count goes back, as it does on an error),
    /// then encodes the `record` and sends it.
    fn submit_counted(
        &self,
        reserve: impl FnOnce(&Conn) -> Result<Option<u32>, ClientError>,
        record: impl FnOnce() -> Vec<u8>,
    ) -> Result<Option<PendingCall>, ClientError> {
        let conn = self.pick();
        if !conn.take_background() {
            return Ok(None);
        }
        let idx = match reserve(conn) {
            Ok(Some(idx)) => idx,
            other => {
                conn.give_back_background();
                return other.map(|_| None);
            }
        };
        Ok(Some(PendingCall::new(
            CallState::start(Arc::clone(conn), idx, record(), false, false).counted_as_background(),
        )))
    }

    /// [`call`](Self::call) as a future. The arguments are encoded now; the
    /// future waits for a slot (without blocking a thread), sends, and
    /// resolves to the decoded results. It needs no particular runtime.
    ///
    /// Polled on a multi-thread tokio runtime (feature `tokio`,
    /// [`ClientOptions::runtime_reader`]), it starts a reader task for the
    /// connection on that runtime: replies are then read by the runtime's own
    /// worker instead of handed over from the reader thread, and requests
    /// made together go out in one `writev`.
    #[cfg(all(feature = "async", not(loom)))]
    pub fn call_async<A, T, F>(
        &self,
        cred: &Credential,
        prog: u32,
        vers: u32,
        proc_: u32,
        args: &A,
        decode: F,
    ) -> CallFuture<T, F>
    where
        A: Encode + ?Sized,
        F: FnOnce(&mut Reader<'_>) -> Result<T, DecodeError>,
    {
        let record = encode_request(cred, prog, vers, proc_, args);
        CallFuture::new(Arc::clone(self.pick()), record, decode)
    }
}

/// Encodes a record-marked call with XID 0 (patched in once a slot is held).
fn encode_request<A: Encode + ?Sized>(
    cred: &Credential,
    prog: u32,
    vers: u32,
    proc_: u32,
    args: &A,
) -> Vec<u8> {
    let gids = Gids::new(&cred.gids[..cred.gids.len().min(16)]).unwrap_or_default();
    let auth = Auth::Sys(AuthSys {
        stamp: 0,
        machine_name: cred.machine_name.as_bytes(),
        uid: cred.uid,
        gid: cred.gid,
        gids,
    });
    let mut out = Vec::with_capacity(256);
    let mark = begin_record(&mut out);
    {
        let mut w = Writer::new(&mut out);
        encode_call_header(&mut w, 0, prog, vers, proc_, &auth);
        args.encode(&mut w);
    }
    finish_record(&mut out, mark);
    out
}

/// A starting XID that differs between clients and runs of the program (time
/// and process id), so a server's duplicate request cache does not mistake a
/// new client's calls for an earlier one's.
pub fn xid_seed() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() ^ (d.as_secs() as u32))
        .unwrap_or(0);
    nanos ^ std::process::id().rotate_left(16)
}
