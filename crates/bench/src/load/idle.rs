//! Idle connections for the connection sweep: each is opened, sends one
//! NULL, reads its reply and then stays silent for the run.
//!
//! One source address has about 28,000 ephemeral ports per server port, so
//! when the server is on 127.x (loopback answers all of 127/8) the idle
//! connections come from 127.0.0.2, 127.0.0.3, ..., `PER_SOURCE` each.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::LoadError;

/// Connections per source address.
const PER_SOURCE: u32 = 20_000;
/// Connections opened (and their NULL answered) per round.
const BATCH: usize = 1000;
/// Longest wait for one NULL reply.
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// The idle connections, closed on drop.
#[derive(Debug, Default)]
pub(crate) struct IdleConns(Vec<TcpStream>);

impl IdleConns {
    /// How many are open.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

/// The source address of idle connection `i`, if the server is on loopback.
fn source(server: SocketAddr, i: u32) -> Option<IpAddr> {
    match server.ip() {
        IpAddr::V4(v4) if v4.is_loopback() => {
            let n = 2 + i / PER_SOURCE;
            Some(IpAddr::V4(Ipv4Addr::new(
                127,
                (n >> 16) as u8,
                (n >> 8) as u8,
                n as u8,
            )))
        }
        _ => None,
    }
}

fn connect_one(server: SocketAddr, i: u32) -> std::io::Result<TcpStream> {
    let sock = Socket::new(
        Domain::for_address(server),
        Type::STREAM,
        Some(Protocol::TCP),
    )?;
    if let Some(ip) = source(server, i) {
        // Pick the port at connect time, by the whole 4-tuple: a bind to port
        // 0 would reserve one (and skip ports still in TIME_WAIT).
        nix::sys::socket::setsockopt(&sock, nix::sys::socket::sockopt::IpBindAddressNoPort, &true)
            .map_err(std::io::Error::from)?;
        sock.bind(&SockAddr::from(SocketAddr::new(ip, 0)))?;
    }
    sock.connect(&SockAddr::from(server))?;
    let s = TcpStream::from(sock);
    s.set_nodelay(true)?;
    Ok(s)
}

/// Reads one record-marked reply (its mark's length, then the body).
fn read_reply(s: &mut TcpStream) -> std::io::Result<()> {
    let mut mark = [0u8; 4];
    s.read_exact(&mut mark)?;
    let len = (u32::from_be_bytes(mark) & 0x7fff_ffff) as usize;
    if len > 4096 {
        return Err(std::io::Error::other("NULL reply larger than 4 KiB"));
    }
    let mut body = [0u8; 4096];
    s.read_exact(&mut body[..len])
}

/// Opens `n` idle connections to `server`, each answering one NULL call
/// (`null_call`, a record-marked call whose XID is replaced).
pub(crate) fn open(server: SocketAddr, n: u32, null_call: &[u8]) -> Result<IdleConns, LoadError> {
    let err = |source| LoadError::Connect {
        addr: server,
        source,
    };
    let mut conns = Vec::with_capacity(n as usize);
    let started = Instant::now();
    let mut last_note = started;
    let mut call = null_call.to_vec();
    while conns.len() < n as usize {
        let first = conns.len();
        let batch = BATCH.min(n as usize - first);
        for i in first..first + batch {
            conns.push(connect_one(server, i as u32).map_err(err)?);
        }
        for (i, s) in conns[first..].iter_mut().enumerate() {
            if let Some(xid) = call.get_mut(4..8) {
                xid.copy_from_slice(&((first + i) as u32).to_be_bytes());
            }
            s.write_all(&call).map_err(err)?;
        }
        for s in &mut conns[first..] {
            s.set_read_timeout(Some(REPLY_TIMEOUT)).map_err(err)?;
            read_reply(s).map_err(err)?;
        }
        if last_note.elapsed() >= Duration::from_secs(2) {
            last_note = Instant::now();
            eprintln!(
                "rnfs bench load: {} of {n} idle connections open ({:.0} s)",
                conns.len(),
                started.elapsed().as_secs_f64()
            );
        }
    }
    Ok(IdleConns(conns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_sources_change_every_per_source_connections() {
        let lo: SocketAddr = "127.0.0.1:2049".parse().unwrap_or_else(|_| unreachable!());
        assert_eq!(source(lo, 0), Some(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2))));
        assert_eq!(
            source(lo, PER_SOURCE - 1),
            Some(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)))
        );
        assert_eq!(
            source(lo, PER_SOURCE * 300),
            Some(IpAddr::V4(Ipv4Addr::new(127, 0, 1, 46)))
        );
        let remote: SocketAddr = "10.0.0.1:2049".parse().unwrap_or_else(|_| unreachable!());
        assert_eq!(source(remote, 5), None);
    }
}
