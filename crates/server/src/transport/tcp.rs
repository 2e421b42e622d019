//! Listening sockets and the acceptor thread.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};
use socket2::{Domain, Protocol, SockRef, Socket, Type};

use super::conn::ConnSlot;
use super::poller::PollerHandle;
use crate::error::ServerError;
use crate::stats::Counters;

/// Listen backlog, as Linux nfsd uses (`SOMAXCONN` may cap it lower).
const LISTEN_BACKLOG: i32 = 1024;

/// The acceptor's waker; listeners use tokens 0..n.
const WAKER: Token = Token(usize::MAX);

/// After running out of file descriptors or memory, retry accepting this often
/// (an edge-triggered listener raises no new edge for connections already queued).
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// At most one warning per this interval for each kind of accept trouble.
const WARN_INTERVAL: Duration = Duration::from_secs(1);

/// Creates a non-blocking listening socket on `addr`: `SO_REUSEADDR`, and
/// `IPV6_V6ONLY` for IPv6 so `[::]` and `0.0.0.0` can share a port.
pub(crate) fn bind_listener(addr: SocketAddr) -> Result<TcpListener, ServerError> {
    let bind = || -> io::Result<TcpListener> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_reuse_address(true)?;
        if addr.is_ipv6() {
            socket.set_only_v6(true)?;
        }
        socket.set_nonblocking(true)?;
        socket.bind(&addr.into())?;
        socket.listen(LISTEN_BACKLOG)?;
        Ok(TcpListener::from_std(socket.into()))
    };
    bind().map_err(|source| ServerError::Bind { addr, source })
}

/// Stops the acceptor thread.
#[derive(Debug)]
pub(crate) struct AcceptorHandle {
    stop: Arc<AtomicBool>,
    waker: Waker,
    thread: Option<JoinHandle<()>>,
}

impl AcceptorHandle {
    /// Stops accepting and closes the listeners; returns when the thread has exited.
    pub(crate) fn stop(&mut self) {
        // Release: pairs with the acceptor's Acquire load after its wake-up; nothing
        // else is published through it.
        self.stop.store(true, Ordering::Release);
        if let Err(e) = self.waker.wake() {
            tracing::error!("cannot wake the acceptor: {e}");
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

struct Acceptor {
    poll: Poll,
    listeners: Vec<TcpListener>,
    pollers: Vec<Arc<PollerHandle>>,
    counters: Arc<Counters>,
    max_connections: usize,
    send_buffer_size: Option<usize>,
    stop: Arc<AtomicBool>,
    next_poller: usize,
    next_id: u64,
    over_limit: RateLimited,
    accept_error: RateLimited,
}

/// Starts the acceptor on `listeners`, handing connections round-robin to `pollers`.
pub(crate) fn spawn_acceptor(
    mut listeners: Vec<TcpListener>,
    pollers: Vec<Arc<PollerHandle>>,
    counters: Arc<Counters>,
    max_connections: usize,
    send_buffer_size: Option<usize>,
) -> Result<AcceptorHandle, ServerError> {
    let poll = Poll::new().map_err(ServerError::Poll)?;
    for (i, listener) in listeners.iter_mut().enumerate() {
        let addr = listener.local_addr().map_err(ServerError::Poll)?;
        poll.registry()
            .register(listener, Token(i), Interest::READABLE)
            .map_err(|source| ServerError::Bind { addr, source })?;
    }
    let waker = Waker::new(poll.registry(), WAKER).map_err(ServerError::Poll)?;
    let stop = Arc::new(AtomicBool::new(false));
    let acceptor = Acceptor {
        poll,
        listeners,
        pollers,
        counters,
        max_connections,
        send_buffer_size,
        stop: Arc::clone(&stop),
        next_poller: 0,
        next_id: 0,
        over_limit: RateLimited::default(),
        accept_error: RateLimited::default(),
    };
    let name = "rnfs-accept".to_string();
    let thread = std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || acceptor.run())
        .map_err(|source| ServerError::Spawn { name, source })?;
    Ok(AcceptorHandle {
        stop,
        waker,
        thread: Some(thread),
    })
}

impl Acceptor {
    fn run(mut self) {
        let mut events = Events::with_capacity(64);
        let mut retry = None;
        loop {
            if let Err(e) = self.poll.poll(&mut events, retry) {
                if e.kind() != io::ErrorKind::Interrupted {
                    tracing::error!(
                        "acceptor epoll_wait failed, no more connections accepted: {e}"
                    );
                    return;
                }
            }
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            // Few listeners: try them all on any wake-up (also covers the retry timer).
            retry = None;
            for i in 0..self.listeners.len() {
                if self.accept_all(i) == Backlog::Stuck {
                    retry = Some(ACCEPT_RETRY);
                }
            }
        }
    }

    /// Accepts until the backlog is empty, or until out of resources.
    fn accept_all(&mut self, i: usize) -> Backlog {
        loop {
            let (stream, peer) = match self.listeners[i].accept() {
                Ok(accepted) => accepted,
                Err(e) => match e.kind() {
                    io::ErrorKind::WouldBlock => return Backlog::Empty,
                    io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted => continue,
                    _ => {
                        // EMFILE, ENFILE, ENOBUFS, ENOMEM: the connection stays queued;
                        // try again shortly.
                        if let Some(suppressed) = self.accept_error.check() {
                            tracing::warn!(suppressed, "accept failed: {e}");
                        }
                        return Backlog::Stuck;
                    }
                },
            };
            self.counters.accepted.fetch_add(1, Ordering::Relaxed);
            if self.counters.connections.load(Ordering::Relaxed) >= self.max_connections {
                self.counters.rejected.fetch_add(1, Ordering::Relaxed);
                if let Some(suppressed) = self.over_limit.check() {
                    tracing::warn!(
                        %peer,
                        suppressed,
                        max = self.max_connections,
                        "connection limit reached, closing new connection"
                    );
                }
                drop(stream);
                continue;
            }
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!(%peer, "cannot set TCP_NODELAY: {e}");
            }
            if let Some(size) = self.send_buffer_size {
                if let Err(e) = SockRef::from(&stream).set_send_buffer_size(size) {
                    tracing::debug!(%peer, "cannot set SO_SNDBUF: {e}");
                }
            }
            let slot = ConnSlot::new(Arc::clone(&self.counters));
            let id = self.next_id;
            self.next_id += 1;
            let poller = &self.pollers[self.next_poller];
            self.next_poller = (self.next_poller + 1) % self.pollers.len();
            poller.add(id, stream, peer, slot);
        }
    }
}

/// Where [`Acceptor::accept_all`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backlog {
    /// Every queued connection was accepted.
    Empty,
    /// Accepting failed for lack of descriptors or memory; connections may remain.
    Stuck,
}

/// Lets one event through per [`WARN_INTERVAL`] and counts the ones held back.
#[derive(Debug, Default)]
struct RateLimited {
    last: Option<Instant>,
    suppressed: u64,
}

impl RateLimited {
    /// `Some(number suppressed since the last one)` if this event may be logged.
    fn check(&mut self) -> Option<u64> {
        let now = Instant::now();
        match self.last {
            Some(last) if now.duration_since(last) < WARN_INTERVAL => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limit_lets_the_first_through_and_counts_the_rest() {
        let mut r = RateLimited::default();
        assert_eq!(r.check(), Some(0));
        assert_eq!(r.check(), None);
        assert_eq!(r.check(), None);
        r.last = Some(Instant::now() - WARN_INTERVAL);
        assert_eq!(r.check(), Some(2));
    }
}
