//! `rnfs bench echo-server`: the physical floor of an RPC server's cost per
//! call. It answers every call, of any program, with an accepted SUCCESS
//! reply (AUTH_NONE verifier, no results) and does nothing else: one `read`
//! and one `write` per batch of calls.
//!
//! Each of `threads` threads runs a mio event loop with its own listening
//! socket on the same port (SO_REUSEPORT: the kernel spreads connections).
//! Records are parsed as they stream through a fixed 64 KiB buffer: only a
//! record mark and the XID are ever kept, so a 1 MiB WRITE costs the same
//! memory as a NULL. Records shorter than an XID get no reply.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

const LISTENER: Token = Token(usize::MAX - 1);
const WAKER: Token = Token(usize::MAX - 2);
const READ_BUF: usize = 64 << 10;
/// `reply_body` of an accepted SUCCESS reply after the XID: REPLY,
/// MSG_ACCEPTED, AUTH_NONE, empty verifier body, SUCCESS.
const REPLY_TAIL: [u32; 5] = [1, 0, 0, 0, 0];

/// A running echo server; [`shutdown`](Self::shutdown) stops it.
#[derive(Debug)]
pub struct EchoServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    wakers: Vec<Arc<Waker>>,
    threads: Vec<JoinHandle<()>>,
}

impl EchoServer {
    /// Listens on `addr` (port 0: any) with `threads` event-loop threads.
    pub fn start(addr: SocketAddr, threads: usize) -> io::Result<EchoServer> {
        let first = listener(addr)?;
        let addr = first.local_addr()?.as_socket().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "not an IP socket address")
        })?;
        let mut sockets = vec![first];
        for _ in 1..threads.max(1) {
            sockets.push(listener(addr)?);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let mut server = EchoServer {
            addr,
            stop: Arc::clone(&stop),
            wakers: Vec::new(),
            threads: Vec::new(),
        };
        for (i, sock) in sockets.into_iter().enumerate() {
            let poll = Poll::new()?;
            let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
            server.wakers.push(waker);
            let std_listener: std::net::TcpListener = sock.into();
            let listener = TcpListener::from_std(std_listener);
            let stop = Arc::clone(&stop);
            let handle = thread::Builder::new()
                .name(format!("echo-{i}"))
                .spawn(move || {
                    if let Err(e) = event_loop(poll, listener, &stop) {
                        eprintln!("rnfs bench echo-server: thread {i}: {e}");
                    }
                })?;
            server.threads.push(handle);
        }
        Ok(server)
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops every thread and closes every connection.
    pub fn shutdown(mut self) {
        self.stop_threads();
    }

    fn stop_threads(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for w in &self.wakers {
            let _ = w.wake();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.stop_threads();
    }
}

fn listener(addr: SocketAddr) -> io::Result<Socket> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    s.set_nonblocking(true)?;
    s.bind(&SockAddr::from(addr))?;
    s.listen(1024)?;
    Ok(s)
}

/// Streaming record parser: keeps only the mark being read and the XID.
#[derive(Debug, Default)]
struct Deframer {
    /// Bytes of the current mark read so far (`mark_len` of 4).
    mark: [u8; 4],
    mark_len: usize,
    /// Body bytes of the current fragment still to come; `None` while a
    /// mark is being read.
    left: Option<usize>,
    last: bool,
    /// The record's first four bytes and how many of them arrived.
    xid: [u8; 4],
    record_len: usize,
}

impl Deframer {
    /// Consumes `data`, appending one reply to `out` per complete record.
    fn feed(&mut self, mut data: &[u8], out: &mut Vec<u8>) {
        while !data.is_empty() {
            let Some(left) = self.left else {
                let take = (4 - self.mark_len).min(data.len());
                self.mark[self.mark_len..self.mark_len + take].copy_from_slice(&data[..take]);
                self.mark_len += take;
                data = &data[take..];
                if self.mark_len == 4 {
                    let mark = u32::from_be_bytes(self.mark);
                    self.mark_len = 0;
                    self.last = mark & 0x8000_0000 != 0;
                    self.left = Some((mark & 0x7fff_ffff) as usize);
                    self.end_fragment_if_empty(out);
                }
                continue;
            };
            let mut take = left.min(data.len());
            if self.record_len < 4 {
                let n = (4 - self.record_len).min(take);
                self.xid[self.record_len..self.record_len + n].copy_from_slice(&data[..n]);
            }
            // Skip the rest of the body without looking at it.
            take = take.min(data.len());
            self.record_len = self.record_len.saturating_add(take);
            data = &data[take..];
            self.left = Some(left - take);
            self.end_fragment_if_empty(out);
        }
    }

    fn end_fragment_if_empty(&mut self, out: &mut Vec<u8>) {
        if self.left != Some(0) {
            return;
        }
        self.left = None;
        if self.last {
            if self.record_len >= 4 {
                out.extend_from_slice(&(0x8000_0000u32 | 24).to_be_bytes());
                out.extend_from_slice(&self.xid);
                for w in REPLY_TAIL {
                    out.extend_from_slice(&w.to_be_bytes());
                }
            }
            self.record_len = 0;
        }
    }
}

#[derive(Debug)]
struct EchoConn {
    stream: TcpStream,
    deframer: Deframer,
    /// Replies not yet taken by the socket, from `sent`.
    out: Vec<u8>,
    sent: usize,
}

impl EchoConn {
    /// Reads what is there and answers it; `Ok(false)` when the peer closed.
    fn on_readable(&mut self, buf: &mut [u8]) -> io::Result<bool> {
        loop {
            match self.stream.read(buf) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.deframer.feed(&buf[..n], &mut self.out);
                    if n < buf.len() {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.flush()?;
        Ok(true)
    }

    fn flush(&mut self) -> io::Result<()> {
        while self.sent < self.out.len() {
            match self.stream.write(&self.out[self.sent..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.out.clear();
        self.sent = 0;
        Ok(())
    }
}

fn event_loop(mut poll: Poll, mut listener: TcpListener, stop: &AtomicBool) -> io::Result<()> {
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let mut events = Events::with_capacity(1024);
    let mut conns: Vec<Option<EchoConn>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut buf = vec![0u8; READ_BUF];
    while !stop.load(Ordering::Relaxed) {
        match poll.poll(&mut events, None) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        for ev in events.iter() {
            match ev.token() {
                WAKER => {}
                LISTENER => loop {
                    match listener.accept() {
                        Ok((mut stream, _)) => {
                            let _ = stream.set_nodelay(true);
                            let slot = free.pop().unwrap_or_else(|| {
                                conns.push(None);
                                conns.len() - 1
                            });
                            poll.registry().register(
                                &mut stream,
                                Token(slot),
                                Interest::READABLE | Interest::WRITABLE,
                            )?;
                            conns[slot] = Some(EchoConn {
                                stream,
                                deframer: Deframer::default(),
                                out: Vec::new(),
                                sent: 0,
                            });
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        // Out of descriptors and the like: try again on the next event.
                        Err(_) => break,
                    }
                },
                Token(slot) => {
                    let Some(Some(conn)) = conns.get_mut(slot) else {
                        continue;
                    };
                    let mut open = true;
                    if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                        open = conn.on_readable(&mut buf).unwrap_or(false);
                    }
                    if open && ev.is_writable() {
                        open = conn.flush().is_ok();
                    }
                    if !open {
                        if let Some(mut c) = conns[slot].take() {
                            let _ = poll.registry().deregister(&mut c.stream);
                        }
                        free.push(slot);
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    fn record(fragments: &[&[u8]]) -> Vec<u8> {
        let mut v = Vec::new();
        for (i, f) in fragments.iter().enumerate() {
            let last = if i + 1 == fragments.len() {
                0x8000_0000
            } else {
                0
            };
            v.extend_from_slice(&(last | f.len() as u32).to_be_bytes());
            v.extend_from_slice(f);
        }
        v
    }

    fn xids(out: &[u8]) -> Vec<u32> {
        assert_eq!(out.len() % 28, 0);
        out.chunks(28)
            .map(|r| {
                assert_eq!(&r[..4], &(0x8000_0000u32 | 24).to_be_bytes());
                assert_eq!(
                    &r[8..],
                    &[0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
                );
                u32::from_be_bytes(r[4..8].try_into().unwrap())
            })
            .collect()
    }

    #[test]
    fn every_record_gets_one_reply_whatever_the_read_boundaries() {
        let mut stream = record(&[&[0, 0, 0, 7, 0, 0, 0, 0, 9, 9]]);
        stream.extend(record(&[&[0, 0], &[], &[0, 8, 1, 2, 3]]));
        stream.extend(record(&[&[1, 2]])); // too short for an XID: no reply
        stream.extend(record(&[&vec![0xab; 100_000]]));
        for chunk in [1, 2, 3, 5, 7, 4096, stream.len()] {
            let mut d = Deframer::default();
            let mut out = Vec::new();
            for c in stream.chunks(chunk) {
                d.feed(c, &mut out);
            }
            assert_eq!(xids(&out), vec![7, 8, 0xabab_abab], "chunk {chunk}");
        }
    }
}
