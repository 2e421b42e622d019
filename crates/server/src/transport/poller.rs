//! Poller threads: one epoll per scheduler pool, turning readiness into scheduler
//! calls. A poller never reads a socket and never runs RPC code; the only socket
//! work it does is flushing buffered replies on writable edges.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use rnfs_sched::{Enqueuer, Task};

use super::conn::{ConnSlot, Connection};
use crate::error::ServerError;
use crate::handler::{close, complete};
use crate::metrics::Metrics;

/// The poller's own waker; connection tokens are connection ids, which start at 0
/// and never reach this.
const WAKER: Token = Token(usize::MAX);

/// Events fetched per `epoll_wait`.
const EVENTS_CAPACITY: usize = 1024;

pub(crate) enum PollerMsg {
    /// A freshly accepted connection for this poller.
    Add {
        id: u64,
        stream: TcpStream,
        peer: SocketAddr,
        slot: ConnSlot,
    },
    /// A torn-down connection: deregister it and drop the poller's reference.
    Remove(u64),
    /// Server draining: stop reading every connection (and any added later), then
    /// acknowledge on the channel.
    StopReading(Sender<()>),
    /// Close every connection and exit.
    Shutdown,
}

/// How other threads talk to a poller: a channel plus a waker to interrupt its
/// `epoll_wait`.
pub(crate) struct PollerHandle {
    index: usize,
    tx: Sender<PollerMsg>,
    waker: Waker,
}

impl PollerHandle {
    /// Sends `msg`; false if the poller has exited (server shutting down), in which
    /// case `msg` (and any socket in it) is dropped.
    fn send(&self, msg: PollerMsg) -> bool {
        if self.tx.send(msg).is_err() {
            return false;
        }
        if let Err(e) = self.waker.wake() {
            tracing::error!(poller = self.index, "cannot wake poller: {e}");
            return false;
        }
        true
    }

    pub(crate) fn add(&self, id: u64, stream: TcpStream, peer: SocketAddr, slot: ConnSlot) {
        self.send(PollerMsg::Add {
            id,
            stream,
            peer,
            slot,
        });
    }

    pub(crate) fn remove(&self, id: u64) {
        self.send(PollerMsg::Remove(id));
    }

    pub(crate) fn shutdown(&self) {
        self.send(PollerMsg::Shutdown);
    }

    /// Asks the poller to stop reading its connections; `done` gets `()` once
    /// it has. False if the poller has exited (its connections are closed).
    pub(crate) fn stop_reading(&self, done: Sender<()>) -> bool {
        self.send(PollerMsg::StopReading(done))
    }
}

impl fmt::Debug for PollerHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PollerHandle")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

struct Poller {
    index: usize,
    poll: Poll,
    rx: Receiver<PollerMsg>,
    handle: Arc<PollerHandle>,
    sched: Enqueuer<Connection>,
    max_record_size: usize,
    conns: HashMap<u64, Arc<Task<Connection>>>,
    metrics: Option<Arc<Metrics>>,
    /// Set by [`PollerMsg::StopReading`]: connections added later are stopped too.
    reading_stopped: bool,
    /// [`Limits::conn_idle_timeout`](crate::Limits::conn_idle_timeout), and
    /// when the next idle sweep is due.
    idle_timeout: Option<Duration>,
    next_sweep: Option<Instant>,
}

/// Starts poller `index`, whose connections are scheduled on pool `index`.
pub(crate) fn spawn_poller(
    index: usize,
    sched: Enqueuer<Connection>,
    max_record_size: usize,
    idle_timeout: Option<Duration>,
    metrics: Option<Arc<Metrics>>,
) -> Result<(Arc<PollerHandle>, JoinHandle<()>), ServerError> {
    let poll = Poll::new().map_err(ServerError::Poll)?;
    let waker = Waker::new(poll.registry(), WAKER).map_err(ServerError::Poll)?;
    let (tx, rx) = mpsc::channel();
    let handle = Arc::new(PollerHandle { index, tx, waker });
    let poller = Poller {
        index,
        poll,
        rx,
        handle: Arc::clone(&handle),
        sched,
        max_record_size,
        conns: HashMap::new(),
        metrics,
        reading_stopped: false,
        idle_timeout,
        next_sweep: idle_timeout.map(|t| Instant::now() + t),
    };
    let name = format!("rnfs-poll-{index}");
    let thread = std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || poller.run())
        .map_err(|source| ServerError::Spawn { name, source })?;
    Ok((handle, thread))
}

impl Poller {
    fn run(mut self) {
        let mut events = Events::with_capacity(EVENTS_CAPACITY);
        loop {
            let timeout = self
                .next_sweep
                .map(|at| at.saturating_duration_since(Instant::now()));
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                tracing::error!(poller = self.index, "epoll_wait failed, poller exits: {e}");
                break;
            }
            let mut woken = false;
            for event in &events {
                if event.token() == WAKER {
                    woken = true;
                    continue;
                }
                let Some(task) = self.conns.get(&(event.token().0 as u64)) else {
                    continue; // removed while the event was pending
                };
                if event.is_error() {
                    close(&self.sched, task);
                    continue;
                }
                if event.is_writable() && task.write_pending() {
                    match task.flush() {
                        Ok(done) => complete(&self.sched, task, done),
                        Err(e) => {
                            tracing::debug!(peer = %task.peer(), "write failed, closing: {e}");
                            close(&self.sched, task);
                            continue;
                        }
                    }
                }
                // Hang-up is reported as readable too: the owner reads the remaining
                // bytes, then EOF, and closes. Once reading has stopped (draining),
                // no thread would read: wake none.
                if (event.is_readable() || event.is_read_closed()) && !self.reading_stopped {
                    self.sched.notify(task);
                }
            }
            if woken && self.drain_messages() {
                break;
            }
            if self.next_sweep.is_some_and(|at| at <= Instant::now()) {
                self.close_idle();
            }
        }
        self.close_all();
    }

    /// Closes the connections that had no call since the last sweep and
    /// nothing in flight, and marks the others; O(connections) once per idle
    /// timeout, off every call's path.
    fn close_idle(&mut self) {
        self.next_sweep = self.idle_timeout.map(|t| Instant::now() + t);
        if self.reading_stopped {
            return; // draining: the drain closes them
        }
        let mut closed = 0u64;
        for task in self.conns.values() {
            if task.age() && !task.is_busy() && !task.is_closing() {
                tracing::debug!(peer = %task.peer(), id = task.id(), "closing idle connection");
                // Relaxed: a statistic.
                task.counters()
                    .closed_idle
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                close(&self.sched, task);
                closed += 1;
            }
        }
        if closed > 0 {
            tracing::info!(poller = self.index, closed, "closed idle connections");
        }
    }

    /// Handles queued messages; returns true on shutdown.
    fn drain_messages(&mut self) -> bool {
        while let Ok(msg) = self.rx.try_recv() {
            match msg {
                PollerMsg::Add {
                    id,
                    stream,
                    peer,
                    slot,
                } => self.add(id, stream, peer, slot),
                PollerMsg::Remove(id) => {
                    if let Some(task) = self.conns.remove(&id) {
                        // Deregister by fd: other threads may still hold the
                        // connection, keeping the fd open for a while.
                        let fd = task.stream().as_raw_fd();
                        let _ = self.poll.registry().deregister(&mut SourceFd(&fd));
                    }
                }
                PollerMsg::StopReading(done) => {
                    self.reading_stopped = true;
                    for task in self.conns.values() {
                        task.stop_reading();
                    }
                    // The drain may have given up waiting: nothing to tell then.
                    let _ = done.send(());
                }
                PollerMsg::Shutdown => return true,
            }
        }
        false
    }

    fn add(&mut self, id: u64, mut stream: TcpStream, peer: SocketAddr, slot: ConnSlot) {
        // Registering reports readiness that is already there (epoll_ctl ADD polls
        // the socket), so bytes sent before this point are not missed.
        let token = Token(id as usize);
        if let Err(e) = self.poll.registry().register(
            &mut stream,
            token,
            Interest::READABLE | Interest::WRITABLE,
        ) {
            tracing::warn!(%peer, "cannot register connection, closing it: {e}");
            return;
        }
        let conn = Connection::new(
            id,
            peer,
            stream,
            Arc::clone(&self.handle),
            self.max_record_size,
            slot,
            self.metrics
                .as_ref()
                .map(|m| m.open_connection(peer.ip(), id)),
        );
        if self.reading_stopped {
            conn.stop_reading();
        }
        let task = self.sched.new_task(conn, self.index);
        tracing::debug!(%peer, id, poller = self.index, "connection accepted");
        self.conns.insert(id, task);
    }

    /// Makes a last attempt to write each connection's buffered replies (without
    /// blocking), shuts every socket and drops the poller's references; the
    /// scheduler's shutdown drops the rest.
    fn close_all(&mut self) {
        for task in self.conns.values() {
            if task.write_pending() {
                if let Ok(done) = task.flush() {
                    // Nothing is read any more: no need to lift back-pressure.
                    let _ = task.complete(done);
                }
            }
            task.shutdown_socket();
        }
        self.conns.clear();
    }
}
