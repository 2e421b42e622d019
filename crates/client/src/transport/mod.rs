//! The RPC transport: one [`RpcClient`] multiplexes many concurrent calls over
//! TCP connections to one server.
//!
//! TEMPORARY: this first version serialises calls behind one mutex; the
//! multiplexed slot-table transport replaces the body, not the API.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rnfs_rpc::{decode_reply, encode_call, Auth, AuthSys, Gids, RecordDecoder, ReplyStatus};
use rnfs_xdr::{DecodeError, Encode, Reader, Writer};

use crate::error::ClientError;

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

/// How an [`RpcClient`] behaves. `Default` gives the Linux TCP mount defaults.
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
    /// demand up to this (Linux `tcp_max_slot_table_entries`).
    pub max_slots: u32,
    /// TCP connections per client, used round-robin (Linux `nconnect`).
    pub connections: u32,
    /// The largest reply record accepted.
    pub max_reply: usize,
    /// How long connecting may take.
    pub connect_timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(60),
            retrans: 2,
            hard: false,
            max_slots: 128,
            connections: 1,
            max_reply: (1 << 20) + (64 << 10),
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// A thread-safe RPC client for one server. Cloning is cheap and shares the
/// connections.
#[derive(Debug, Clone)]
pub struct RpcClient {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    peer: SocketAddr,
    options: ClientOptions,
    conn: Mutex<Conn>,
}

#[derive(Debug)]
struct Conn {
    stream: TcpStream,
    decoder: RecordDecoder,
    xid: u32,
    out: Vec<u8>,
}

impl RpcClient {
    /// Connects to the RPC server at `addr`.
    pub fn connect(addr: SocketAddr, options: ClientOptions) -> Result<Self, ClientError> {
        let stream = TcpStream::connect_timeout(&addr, options.connect_timeout)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(options.timeout))?;
        let decoder = RecordDecoder::new(options.max_reply);
        Ok(Self {
            inner: Arc::new(Inner {
                peer: addr,
                options,
                conn: Mutex::new(Conn {
                    stream,
                    decoder,
                    xid: 1,
                    out: Vec::new(),
                }),
            }),
        })
    }

    /// The server's address.
    pub fn peer(&self) -> SocketAddr {
        self.inner.peer
    }

    /// The options this client was made with.
    pub fn options(&self) -> &ClientOptions {
        &self.inner.options
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
        self.submit(cred, prog, vers, proc_, args)?.wait(decode)
    }

    /// Sends a call and returns at once; [`PendingCall::wait`] collects the
    /// reply. Many calls may be pending on one client (write-behind and
    /// read-ahead use this).
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
        let mut body = Vec::new();
        args.encode(&mut Writer::new(&mut body));
        let gids = Gids::new(&cred.gids[..cred.gids.len().min(16)]).unwrap_or_default();
        let auth = Auth::Sys(AuthSys {
            stamp: 0,
            machine_name: cred.machine_name.as_bytes(),
            uid: cred.uid,
            gid: cred.gid,
            gids,
        });
        let mut conn = self
            .inner
            .conn
            .lock()
            .map_err(|_| ClientError::Disconnected("poisoned".into()))?;
        let conn = &mut *conn;
        conn.xid = conn.xid.wrapping_add(1);
        let xid = conn.xid;
        conn.out.clear();
        encode_call(xid, prog, vers, proc_, &auth, &body, &mut conn.out);
        conn.stream.write_all(&conn.out)?;
        loop {
            if let Some(record) = conn
                .decoder
                .next_record()
                .map_err(|e| ClientError::BadReply(e.to_string()))?
            {
                let reply =
                    decode_reply(&record).map_err(|e| ClientError::BadReply(e.to_string()))?;
                if reply.header.xid != xid {
                    continue;
                }
                if reply.header.status != ReplyStatus::Success {
                    return Err(ClientError::Rpc(reply.header.status));
                }
                let results_at = reply.results_offset;
                return Ok(PendingCall { record, results_at });
            }
            let n = conn.stream.read(conn.decoder.read_buf())?;
            if n == 0 {
                return Err(ClientError::Disconnected(
                    "server closed the connection".into(),
                ));
            }
            conn.decoder.advance(n);
        }
    }
}

/// A call sent by [`RpcClient::submit`] whose reply has not been collected.
/// Dropping it abandons the call.
#[derive(Debug)]
pub struct PendingCall {
    record: Vec<u8>,
    results_at: usize,
}

impl PendingCall {
    /// Whether the reply has arrived ([`wait`](Self::wait) will not block).
    pub fn is_ready(&self) -> bool {
        true
    }

    /// Waits for the reply and decodes its results with `decode`.
    pub fn wait<T, F>(self, decode: F) -> Result<T, ClientError>
    where
        F: FnOnce(&mut Reader<'_>) -> Result<T, DecodeError>,
    {
        let mut r = Reader::new(&self.record[self.results_at..]);
        decode(&mut r).map_err(|e| ClientError::BadReply(e.to_string()))
    }
}
