//! A small blocking client that registers rnfs's programs with the host's rpcbind
//! (`rnfs serve --register`) and removes them at shutdown.
//!
//! rpcbind takes SET and UNSET from local callers only. Its unix socket
//! ([`RPCBIND_SOCKET`]) always qualifies; loopback TCP does in some builds
//! (Debian's 1.2.6) and is answered AUTH_TOOWEAK by others. So
//! [`RpcbindEndpoint::system`] picks the socket when it exists, as libtirpc does,
//! and 127.0.0.1:111 otherwise (an older portmap, or rnfs's own
//! [`PortmapService`](super::PortmapService), which wants a privileged source port:
//! over TCP this client binds one when it may).
//!
//! The client speaks rpcbind version 4 and falls back to 3, then to port mapper
//! version 2 (IPv4 `tcp`/`udp` mappings only), when the server answers
//! PROG_MISMATCH. Every socket operation has a timeout; this runs at start-up and
//! shutdown, never on a service thread.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rnfs_rpc::{decode_reply, encode_call, Auth, RecordDecoder, ReplyStatus, RpcError};
use rnfs_xdr::{DecodeError, Reader, Writer};
use socket2::{Domain, Socket, Type};

use super::proto::{
    pmapproc, rpcbproc, PmapMapping, Rpcb, PMAP_PORT, PMAP_PROGRAM, PMAP_V2, RPCB_V3, RPCB_V4,
};
use super::registry::Mapping;

/// Where Linux rpcbind listens for local registrations.
pub const RPCBIND_SOCKET: &str = "/run/rpcbind.sock";

/// Timeout of the connect and of each read and write.
pub const RPCBIND_TIMEOUT: Duration = Duration::from_secs(5);

/// Largest reply accepted (SET and UNSET answer one `bool`).
const MAX_REPLY: usize = 64 << 10;

/// How to reach an rpcbind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RpcbindEndpoint {
    /// A unix stream socket, e.g. [`RPCBIND_SOCKET`].
    Unix(PathBuf),
    /// TCP, e.g. 127.0.0.1:111.
    Tcp(SocketAddr),
}

impl RpcbindEndpoint {
    /// [`RPCBIND_SOCKET`] if it exists, else TCP to 127.0.0.1:[`PMAP_PORT`].
    pub fn system() -> Self {
        if Path::new(RPCBIND_SOCKET).exists() {
            Self::Unix(PathBuf::from(RPCBIND_SOCKET))
        } else {
            Self::Tcp(SocketAddr::from(([127, 0, 0, 1], PMAP_PORT)))
        }
    }
}

impl From<SocketAddr> for RpcbindEndpoint {
    fn from(addr: SocketAddr) -> Self {
        Self::Tcp(addr)
    }
}

impl From<PathBuf> for RpcbindEndpoint {
    fn from(path: PathBuf) -> Self {
        Self::Unix(path)
    }
}

impl std::fmt::Display for RpcbindEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unix(path) => write!(f, "{}", path.display()),
            Self::Tcp(addr) => write!(f, "{addr}"),
        }
    }
}

/// Why talking to rpcbind failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PortmapError {
    /// The connection could not be made.
    #[error("cannot connect to rpcbind at {endpoint}")]
    Connect {
        /// Where.
        endpoint: String,
        /// The socket error.
        #[source]
        source: io::Error,
    },
    /// Sending a call or receiving its reply failed (or timed out).
    #[error("rpcbind connection failed")]
    Io(#[from] io::Error),
    /// The reply record exceeded the client's limit.
    #[error("rpcbind reply larger than {max} bytes")]
    ReplyTooLarge {
        /// The limit.
        max: usize,
    },
    /// The reply was not a decodable RPC reply.
    #[error("malformed rpcbind reply")]
    BadReply(#[from] RpcError),
    /// The reply's results could not be decoded.
    #[error("malformed rpcbind results")]
    BadResults(#[from] DecodeError),
    /// The reply answered another call.
    #[error("rpcbind replied to xid {got}, expected {expected}")]
    XidMismatch {
        /// The call's xid.
        expected: u32,
        /// The reply's xid.
        got: u32,
    },
    /// The call was rejected or not accepted, e.g. AUTH_TOOWEAK for a SET from a
    /// caller the server does not consider local.
    #[error("rpcbind version {vers} procedure {proc_} failed: {status:?}")]
    Rejected {
        /// The rpcbind version used.
        vers: u32,
        /// The procedure.
        proc_: u32,
        /// The reply's status.
        status: ReplyStatus,
    },
    /// rpcbind answered SET with FALSE: another address is registered, or the
    /// caller may not register.
    #[error("rpcbind refused to register program {prog} version {vers} on {netid}")]
    Refused {
        /// Program.
        prog: u32,
        /// Version.
        vers: u32,
        /// Netid.
        netid: String,
    },
    /// The server speaks only port mapper version 2, which cannot express this
    /// mapping (an IPv6 or non-IP netid).
    #[error("port mapper version 2 cannot register {netid} {uaddr}")]
    NotRepresentable {
        /// Netid.
        netid: String,
        /// Universal address.
        uaddr: String,
    },
}

/// Registers `mappings` with the rpcbind at `endpoint`, replacing whatever is
/// registered for the same `(prog, vers, netid)` (UNSET then SET, as rpc.mountd and
/// knfsd do, so a stale entry from an earlier run does not make SET fail).
///
/// Stops at the first failure; mappings already registered stay registered (call
/// [`unregister_from_rpcbind`] to clean up).
pub fn register_with_rpcbind(
    endpoint: impl Into<RpcbindEndpoint>,
    mappings: &[Mapping],
) -> Result<(), PortmapError> {
    let mut client = RpcbindClient::connect(&endpoint.into(), RPCBIND_TIMEOUT)?;
    for m in mappings {
        client.unset(m)?;
        if !client.set(m)? {
            return Err(PortmapError::Refused {
                prog: m.prog,
                vers: m.vers,
                netid: m.netid.clone(),
            });
        }
    }
    Ok(())
}

/// Removes the registrations of `mappings`' `(prog, vers, netid)` from the rpcbind
/// at `endpoint` (each address is ignored; with a version 2 server, TCP and UDP of
/// the `(prog, vers)` both go).
pub fn unregister_from_rpcbind(
    endpoint: impl Into<RpcbindEndpoint>,
    mappings: &[Mapping],
) -> Result<(), PortmapError> {
    let mut client = RpcbindClient::connect(&endpoint.into(), RPCBIND_TIMEOUT)?;
    for m in mappings {
        client.unset(m)?;
    }
    Ok(())
}

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Tcp(s) => s.read(buf),
            Self::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Self::Tcp(s) => s.write(buf),
            Self::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Self::Tcp(s) => s.flush(),
            Self::Unix(s) => s.flush(),
        }
    }
}

/// One connection to rpcbind and the protocol version it turned out to speak.
struct RpcbindClient {
    stream: Stream,
    xid: u32,
    /// [`RPCB_V4`] down to [`PMAP_V2`], lowered on PROG_MISMATCH.
    version: u32,
    buf: Vec<u8>,
    decoder: RecordDecoder,
}

impl RpcbindClient {
    fn connect(endpoint: &RpcbindEndpoint, timeout: Duration) -> Result<Self, PortmapError> {
        let connect_error = |source| PortmapError::Connect {
            endpoint: endpoint.to_string(),
            source,
        };
        let stream = match endpoint {
            RpcbindEndpoint::Unix(path) => {
                let s = UnixStream::connect(path).map_err(connect_error)?;
                s.set_read_timeout(Some(timeout)).map_err(connect_error)?;
                s.set_write_timeout(Some(timeout)).map_err(connect_error)?;
                Stream::Unix(s)
            }
            RpcbindEndpoint::Tcp(addr) => {
                let s = connect_tcp(*addr, timeout).map_err(connect_error)?;
                s.set_read_timeout(Some(timeout)).map_err(connect_error)?;
                s.set_write_timeout(Some(timeout)).map_err(connect_error)?;
                s.set_nodelay(true).map_err(connect_error)?;
                Stream::Tcp(s)
            }
        };
        // Distinct xids across runs, so a server-side duplicate cache never confuses
        // this run's calls with the last one's.
        let xid = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
            ^ std::process::id().rotate_left(16);
        Ok(Self {
            stream,
            xid,
            version: RPCB_V4,
            buf: Vec::new(),
            decoder: RecordDecoder::new(MAX_REPLY),
        })
    }

    fn set(&mut self, m: &Mapping) -> Result<bool, PortmapError> {
        self.negotiated(m, rpcbproc::SET, pmapproc::SET)
    }

    fn unset(&mut self, m: &Mapping) -> Result<bool, PortmapError> {
        self.negotiated(m, rpcbproc::UNSET, pmapproc::UNSET)
    }

    /// Calls `rpcb_proc` (versions 4, 3) or `pmap_proc` (version 2) with `m` and
    /// decodes the `bool` result, stepping down a version on PROG_MISMATCH.
    fn negotiated(
        &mut self,
        m: &Mapping,
        rpcb_proc: u32,
        pmap_proc: u32,
    ) -> Result<bool, PortmapError> {
        loop {
            let mut args = Vec::new();
            let mut w = Writer::new(&mut args);
            let proc_ = if self.version >= RPCB_V3 {
                Rpcb::from_mapping(m).encode(&mut w);
                rpcb_proc
            } else {
                let Some(mapping) = PmapMapping::from_mapping(m) else {
                    return Err(PortmapError::NotRepresentable {
                        netid: m.netid.clone(),
                        uaddr: m.uaddr.clone(),
                    });
                };
                mapping.encode(&mut w);
                pmap_proc
            };
            match self.call(self.version, proc_, &args) {
                Err(PortmapError::Rejected {
                    status: ReplyStatus::ProgMismatch { .. },
                    ..
                }) if self.version > PMAP_V2 => self.version -= 1,
                Err(e) => return Err(e),
                Ok(results) => return Ok(Reader::new(&results).read_bool()?),
            }
        }
    }

    /// One call; returns the results of a SUCCESS reply.
    fn call(&mut self, vers: u32, proc_: u32, args: &[u8]) -> Result<Vec<u8>, PortmapError> {
        self.xid = self.xid.wrapping_add(1);
        let xid = self.xid;
        self.buf.clear();
        encode_call(
            xid,
            PMAP_PROGRAM,
            vers,
            proc_,
            &Auth::None,
            args,
            &mut self.buf,
        );
        self.stream.write_all(&self.buf)?;
        let record = read_record(&mut self.stream, &mut self.decoder)?;
        let reply = decode_reply(&record)?;
        if reply.header.xid != xid {
            return Err(PortmapError::XidMismatch {
                expected: xid,
                got: reply.header.xid,
            });
        }
        match reply.header.status {
            ReplyStatus::Success => Ok(reply.results.to_vec()),
            status => Err(PortmapError::Rejected {
                vers,
                proc_,
                status,
            }),
        }
    }
}

/// Reads one record (any number of fragments) of at most [`MAX_REPLY`] bytes,
/// deframed by the same [`RecordDecoder`] the server uses.
fn read_record(s: &mut impl Read, decoder: &mut RecordDecoder) -> Result<Vec<u8>, PortmapError> {
    loop {
        match decoder.next_record() {
            Ok(Some(record)) => return Ok(record),
            Ok(None) => {}
            Err(_) => return Err(PortmapError::ReplyTooLarge { max: MAX_REPLY }),
        }
        let n = s.read(decoder.read_buf())?;
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
        }
        decoder.advance(n);
    }
}

/// Lowest port tried by [`connect_tcp`]'s reserved-port bind (glibc's
/// `bindresvport` range is 600–1023).
const RESERVED_LOW: u16 = 600;

/// Connects from a privileged port when this process may bind one (a port mapper
/// that checks the source port then treats us as root), else from any port.
fn connect_tcp(addr: SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    let local_any = match addr {
        SocketAddr::V4(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
        SocketAddr::V6(_) => SocketAddr::from(([0u16; 8], 0)),
    };
    for port in (RESERVED_LOW..1024).rev() {
        match socket.bind(&SocketAddr::new(local_any.ip(), port).into()) {
            Ok(()) => break,
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => continue,
            // EACCES: not root. Connect from an ephemeral port.
            Err(_) => break,
        }
    }
    socket.connect_timeout(&addr.into(), timeout)?;
    Ok(socket.into())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn records_are_reassembled_and_capped() {
        let mut two = Vec::new();
        two.extend_from_slice(&2u32.to_be_bytes());
        two.extend_from_slice(b"ab");
        two.extend_from_slice(&(0x8000_0000u32 | 1).to_be_bytes());
        two.extend_from_slice(b"c");
        assert_eq!(
            read_record(&mut &two[..], &mut RecordDecoder::new(MAX_REPLY)).unwrap(),
            b"abc"
        );

        let huge = (0x8000_0000u32 | (MAX_REPLY as u32 + 1)).to_be_bytes();
        assert!(matches!(
            read_record(&mut &huge[..], &mut RecordDecoder::new(MAX_REPLY)),
            Err(PortmapError::ReplyTooLarge { .. })
        ));
        let truncated = [0x80, 0, 0, 8, 1, 2];
        assert!(matches!(
            read_record(&mut &truncated[..], &mut RecordDecoder::new(MAX_REPLY)),
            Err(PortmapError::Io(_))
        ));
    }
}
