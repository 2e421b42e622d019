//! Opening a connection's TCP socket. Every socket gets `SO_REUSEADDR`, and a
//! reconnect first binds to the previous local address: keeping the source
//! port (as Linux's client does) lets the server's duplicate request cache,
//! keyed on the client's address and port, recognise the retransmissions.
//! When that port cannot be had (still in use, or in our `TIME_WAIT` towards
//! the same server), the caller falls back to any port.

use std::io;
use std::mem;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// Connects to `peer` from `local` (any port if `None`), giving up after
/// `timeout` (never if zero).
pub(crate) fn connect(
    peer: SocketAddr,
    local: Option<SocketAddr>,
    timeout: Duration,
) -> io::Result<TcpStream> {
    let domain = match peer {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    #[allow(unsafe_code)]
    // SAFETY: socket(2) takes no pointers.
    let fd = unsafe { libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    #[allow(unsafe_code)]
    // SAFETY: `fd` is a new descriptor that nothing else owns.
    let stream = TcpStream::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let one: libc::c_int = 1;
    #[allow(unsafe_code)]
    // SAFETY: `one` lives across the call and its exact size is passed.
    check(unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&raw const one).cast(),
            socklen_of::<libc::c_int>(),
        )
    })?;
    if let Some(local) = local {
        let (addr, len) = sockaddr(local);
        #[allow(unsafe_code)]
        // SAFETY: `addr` holds a valid socket address of `len` bytes.
        check(unsafe { libc::bind(fd, (&raw const addr).cast(), len) })?;
    }
    stream.set_nonblocking(true)?;
    let (addr, len) = sockaddr(peer);
    #[allow(unsafe_code)]
    // SAFETY: as for `bind`.
    if unsafe { libc::connect(fd, (&raw const addr).cast(), len) } != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(e);
        }
        wait_writable(stream.as_raw_fd(), timeout)?;
        if let Some(e) = stream.take_error()? {
            return Err(e);
        }
    }
    stream.set_nonblocking(false)?;
    Ok(stream)
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn socklen_of<T>() -> libc::socklen_t {
    // A socket address is a few dozen bytes: never truncates.
    size_of::<T>() as libc::socklen_t
}

/// Waits until a non-blocking connect on `fd` finished (or `timeout`).
fn wait_writable(fd: RawFd, timeout: Duration) -> io::Result<()> {
    let deadline = (!timeout.is_zero()).then(|| Instant::now() + timeout);
    loop {
        let wait_ms = match deadline {
            None => -1,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(io::ErrorKind::TimedOut.into());
                }
                libc::c_int::try_from(left.as_millis() + 1).unwrap_or(libc::c_int::MAX)
            }
        };
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLOUT,
            revents: 0,
        };
        #[allow(unsafe_code)]
        // SAFETY: one valid `pollfd`, and its count.
        let rc = unsafe { libc::poll(&raw mut pfd, 1, wait_ms) };
        if rc > 0 {
            return Ok(());
        }
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// `a` as a C socket address and its length.
fn sockaddr(a: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    #[allow(unsafe_code)]
    // SAFETY: all-zero bytes are a valid `sockaddr_storage`.
    let mut storage: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let len = match a {
        SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(v4.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            #[allow(unsafe_code)]
            // SAFETY: `sockaddr_storage` is large and aligned enough for
            // every socket address type.
            unsafe {
                (&raw mut storage).cast::<libc::sockaddr_in>().write(sin);
            }
            socklen_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.ip().octets(),
                },
                sin6_scope_id: v6.scope_id(),
            };
            #[allow(unsafe_code)]
            // SAFETY: as above.
            unsafe {
                (&raw mut storage).cast::<libc::sockaddr_in6>().write(sin6);
            }
            socklen_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len)
}
