//! Opening a connection's TCP socket (socket2). Every socket gets
//! `SO_REUSEADDR`, and a reconnect first binds to the previous local address:
//! keeping the source port (as Linux's client does) lets the server's
//! duplicate request cache, keyed on the client's address and port,
//! recognise the retransmissions. When the server closed first, our old
//! socket may hold the port for a moment (LAST_ACK), so the bind is retried
//! briefly; when the port cannot be had (still in use, or in `TIME_WAIT`
//! towards the same server), the caller falls back to any port. The first
//! connection takes its port with `bind` (port 0), so that no other socket
//! shares it and the reconnect's bind can succeed.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// How long a reconnect keeps trying to get its previous port back.
const SAME_PORT_PATIENCE: Duration = Duration::from_millis(200);

/// Connects to `peer` from `local` (any port if `None`), giving up after
/// `timeout` (never if zero).
pub(crate) fn connect(
    peer: SocketAddr,
    local: Option<SocketAddr>,
    timeout: Duration,
) -> io::Result<TcpStream> {
    let Some(local) = local else {
        return connect_from(peer, None, timeout);
    };
    let deadline = Instant::now() + SAME_PORT_PATIENCE;
    loop {
        match connect_from(peer, Some(local), timeout) {
            Err(e) if port_busy(&e) && Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

fn port_busy(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EADDRINUSE) | Some(libc::EADDRNOTAVAIL)
    )
}

fn connect_from(
    peer: SocketAddr,
    local: Option<SocketAddr>,
    timeout: Duration,
) -> io::Result<TcpStream> {
    let socket = Socket::new(Domain::for_address(peer), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    // A first connection binds port 0 explicitly rather than letting
    // `connect` pick one: `connect` may hand out a port that sockets towards
    // other peers still hold (in TIME_WAIT, without SO_REUSEADDR), and our
    // reconnect's bind to it would then fail for a minute. `bind` picks a port
    // nobody holds, and `connect` never shares a port taken by `bind`.
    let local = local.unwrap_or_else(|| match peer {
        SocketAddr::V4(_) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
        SocketAddr::V6(_) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
    });
    socket.bind(&SockAddr::from(local))?;
    let peer = SockAddr::from(peer);
    if timeout.is_zero() {
        socket.connect(&peer)?;
    } else {
        socket.connect_timeout(&peer, timeout)?;
    }
    Ok(socket.into())
}

/// One `recvmsg` filling up to `room` bytes of `direct`'s spare capacity,
/// then `buf`: the rest of a large reply lands in its record and what follows
/// it in the read buffer, in one system call
/// ([`rnfs_rpc::RecordDecoder::read_targets`]). Grows `direct` by the bytes
/// it received; returns the bytes received in all.
pub(crate) fn recv_into_two(
    stream: &TcpStream,
    direct: &mut Vec<u8>,
    room: usize,
    buf: &mut [u8],
    flags: libc::c_int,
) -> io::Result<usize> {
    use std::mem::MaybeUninit;

    let spare = direct.spare_capacity_mut();
    let room = room.min(spare.len());
    let spare = &mut spare[..room];
    #[allow(unsafe_code)]
    // SAFETY: a `[u8]` seen as `[MaybeUninit<u8>]` has the same layout, and
    // `recvmsg` only ever writes initialised bytes into it, so `buf` stays
    // initialised.
    let buf = unsafe { &mut *(std::ptr::from_mut::<[u8]>(buf) as *mut [MaybeUninit<u8>]) };
    let mut targets = [
        socket2::MaybeUninitSlice::new(spare),
        socket2::MaybeUninitSlice::new(buf),
    ];
    let (n, _) = socket2::SockRef::from(stream).recv_vectored_with_flags(&mut targets, flags)?;
    let len = direct.len() + n.min(room);
    #[allow(unsafe_code)]
    // SAFETY: `recvmsg` fills its buffers in order, so it initialised the
    // first `min(n, room)` bytes of `direct`'s spare capacity, and `len` is
    // within its capacity.
    unsafe {
        direct.set_len(len)
    };
    Ok(n)
}
