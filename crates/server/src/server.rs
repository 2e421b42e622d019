//! [`Server`]: binds the listeners and runs the acceptor, pollers and service
//! threads until drained and shut down.
//!
//! # Stopping
//!
//! [`Server::drain`] stops the server taking work and waits for the work it took:
//!
//! 1. The acceptor stops and its listening sockets close: new connections are
//!    refused.
//! 2. Every poller marks each of its connections "stopped" under the
//!    connection's read lock, the lock under which a call is counted in flight as
//!    its record is taken off. Once all have acknowledged, the server-wide
//!    in-flight count covers every call ever read, and no more are read: unread
//!    bytes stay in the sockets.
//! 3. It sleeps until that count is zero (each reply handed to the kernel, or
//!    flushed from a connection's output buffer by its poller), or the timeout.
//!
//! [`Server::shutdown`] (or dropping the server) does steps 1 and 2 if no drain
//! did, stops the service threads (each finishes the call it is running and sends
//! its reply), lets each poller write what its connections still buffer, without
//! blocking, and only then closes the sockets.

use std::fmt;
use std::net::SocketAddr;
use std::sync::{mpsc, Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rnfs_rpc::Dispatcher;
use rnfs_sched::Scheduler;

use crate::config::ServerConfig;
use crate::error::ServerError;
use crate::handler::ServerHandler;
use crate::metrics::{DrcSnapshot, SchedSnapshot, StatsSnapshot, TransportSnapshot};
use crate::services;
use crate::stats::{Counters, ServerStats};
use crate::transport::{bind_listener, spawn_acceptor, spawn_poller, AcceptorHandle, PollerHandle};

/// How long stopping waits for the pollers to confirm they stopped reading. They
/// answer within microseconds (a poller never blocks), so this only bounds a
/// wedged one; it is not cut short by a drain's timeout, so even a zero timeout
/// reports an exact `in_flight_at_start`.
const STOP_READING_WAIT: Duration = Duration::from_secs(1);

/// What [`Server::drain`] found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DrainOutcome {
    /// Calls in flight when reading stopped: records taken off connections whose
    /// replies had not yet reached the kernel. These are the calls the drain
    /// waited for.
    pub in_flight_at_start: u64,
    /// Calls still in flight when the drain returned: 0, unless the timeout
    /// passed first.
    pub remaining: u64,
    /// How long the drain took.
    pub elapsed: Duration,
}

/// A running server. Dropping it shuts it down, as [`Server::shutdown`] does.
pub struct Server {
    sched: Arc<Scheduler<ServerHandler>>,
    local_addrs: Vec<SocketAddr>,
    counters: Arc<Counters>,
    /// `None` once stopped (by a drain or a shutdown).
    acceptor: Mutex<Option<AcceptorHandle>>,
    pollers: Vec<Arc<PollerHandle>>,
    poller_threads: Vec<JoinHandle<()>>,
    stopped: bool,
    started: Instant,
}

impl Server {
    /// Starts a server with the default services: NFSv3 and MOUNTv3 (NULL only, for
    /// now; see [`services`]).
    pub fn start(config: ServerConfig) -> Result<Server, ServerError> {
        Server::start_with_dispatcher(config, Arc::new(services::default_dispatcher()))
    }

    /// Starts a server that hands every call to `dispatcher`.
    ///
    /// Binds every listen address first, so a bind failure starts nothing; then
    /// starts the service threads, one poller per scheduler pool and the acceptor.
    pub fn start_with_dispatcher(
        config: ServerConfig,
        dispatcher: Arc<Dispatcher>,
    ) -> Result<Server, ServerError> {
        if config.listen.is_empty() {
            return Err(ServerError::NoListenAddress);
        }
        config
            .limits
            .validate()
            .map_err(ServerError::InvalidConfig)?;
        let listeners = config
            .listen
            .iter()
            .map(|&addr| bind_listener(addr))
            .collect::<Result<Vec<_>, _>>()?;
        let local_addrs = listeners
            .iter()
            .zip(&config.listen)
            .map(|(l, &addr)| {
                l.local_addr()
                    .map_err(|source| ServerError::Bind { addr, source })
            })
            .collect::<Result<Vec<_>, _>>()?;

        let handler = ServerHandler::new(
            dispatcher,
            config.limits.max_in_flight_per_conn,
            config.limits.max_output_per_conn,
            config.limits.max_reply_hold,
            config.drc,
            config.metrics.clone(),
        );
        let sched = Scheduler::start(config.sched.clone(), handler)?;

        let mut server = Server {
            sched,
            local_addrs,
            counters: Arc::new(Counters::default()),
            acceptor: Mutex::new(None),
            pollers: Vec::new(),
            poller_threads: Vec::new(),
            stopped: false,
            started: Instant::now(),
        };
        // On error from here on, dropping `server` stops what was started.
        for pool in 0..server.sched.pools().max(1) {
            let (handle, thread) = spawn_poller(
                pool,
                server.sched.enqueuer().clone(),
                config.limits.max_record_size,
                config.limits.conn_idle_timeout,
                config.metrics.clone(),
            )?;
            server.pollers.push(handle);
            server.poller_threads.push(thread);
        }
        *lock(&server.acceptor) = Some(spawn_acceptor(
            listeners,
            server.pollers.clone(),
            Arc::clone(&server.counters),
            config.limits.max_connections,
            config.send_buffer_size,
        )?);
        Ok(server)
    }

    /// The addresses actually bound, in the order of [`ServerConfig::listen`] (with
    /// port 0 resolved).
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.local_addrs
    }

    /// The service-thread scheduler, for its statistics and thread-count controls.
    pub fn scheduler(&self) -> &Arc<Scheduler<ServerHandler>> {
        &self.sched
    }

    /// Transport counters.
    pub fn stats(&self) -> ServerStats {
        self.counters.snapshot()
    }

    /// Everything the server counts, as one serialisable value: uptime, version,
    /// transport, scheduler and duplicate request cache figures, and, when
    /// [`ServerConfig::metrics`] is set, the call figures (procedures, bytes,
    /// clients, exports). Takes a few locks briefly; meant for once a second or
    /// so, not per call.
    pub fn stats_snapshot(&self) -> StatsSnapshot {
        let handler = self.sched.handler();
        let mut s = match handler.metrics() {
            Some(m) => m.snapshot(),
            None => StatsSnapshot::default(),
        };
        // Whole microseconds: a short decimal, parsed back exactly from JSON.
        s.uptime_secs = self.started.elapsed().as_micros() as f64 / 1e6;
        s.version = env!("CARGO_PKG_VERSION").to_owned();
        s.transport = TransportSnapshot::from(&self.counters.snapshot());
        s.sched = SchedSnapshot::new(&self.sched.stats(), self.sched.config());
        // The bounds in force, which `set_limits` may have changed since start.
        let (min, max) = self.sched.limits();
        s.sched.min_threads = min as u64;
        s.sched.max_threads = max as u64;
        s.drc = handler.drc_stats().as_ref().map(DrcSnapshot::from);
        s
    }

    /// Calls in flight now: read off a connection, reply not yet handed to the
    /// kernel.
    pub fn in_flight(&self) -> u64 {
        self.counters.in_flight.get()
    }

    /// Stops taking work and waits, up to `timeout`, for the work taken: closes
    /// the listening sockets (new connections are refused), stops reading every
    /// connection (a record already taken off one is answered; bytes not yet read
    /// stay unread), then sleeps until every call in flight has handed its reply
    /// to the kernel, including replies a connection had to buffer, which its
    /// poller writes as the client reads. Connections stay open, unread, until
    /// [`Server::shutdown`]. See the module docs.
    ///
    /// Idempotent: a second drain waits for what is still in flight.
    pub fn drain(&self, timeout: Duration) -> DrainOutcome {
        let start = Instant::now();
        // A timeout too large for `Instant` means "no timeout"; a century will do.
        let deadline = start
            .checked_add(timeout)
            .or_else(|| start.checked_add(Duration::from_secs(100 * 365 * 86_400)))
            .unwrap_or(start);
        self.stop_accepting();
        self.stop_reading();
        let in_flight_at_start = self.counters.in_flight.get();
        let remaining = self.counters.in_flight.wait_zero(deadline);
        DrainOutcome {
            in_flight_at_start,
            remaining,
            elapsed: start.elapsed(),
        }
    }

    /// Stops the acceptor; its listening sockets close as it exits.
    fn stop_accepting(&self) {
        let acceptor = lock(&self.acceptor).take();
        if let Some(mut acceptor) = acceptor {
            acceptor.stop();
        }
    }

    /// Has every poller stop reading its connections, and waits (at most
    /// [`STOP_READING_WAIT`]) for each to confirm. The acceptor has stopped, so
    /// every connection it accepted is already queued to its poller ahead of this
    /// request.
    fn stop_reading(&self) {
        let deadline = Instant::now() + STOP_READING_WAIT;
        let (done_tx, done_rx) = mpsc::channel();
        let asked = self
            .pollers
            .iter()
            .filter(|poller| poller.stop_reading(done_tx.clone()))
            .count();
        drop(done_tx);
        for _ in 0..asked {
            let wait = deadline.saturating_duration_since(Instant::now());
            // Err: a poller exited (its connections are closed) or the deadline
            // passed; either way there is nothing more to wait for.
            if done_rx.recv_timeout(wait).is_err() {
                break;
            }
        }
    }

    /// Stops the server and returns when all its threads have exited, in an
    /// order that loses no reply of a call already read: stops accepting and
    /// reading (unless [`Server::drain`] did), stops the service threads, each
    /// after finishing and answering the call it runs, then has each poller write
    /// what its connections still buffer (without blocking) and close them.
    ///
    /// Bounded by the longest call still running: it does not wait for clients
    /// to read their replies (call [`Server::drain`] first for that).
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        self.stop_accepting();
        self.stop_reading();
        // Pollers keep flushing buffered replies while the running calls finish.
        self.sched.shutdown();
        for poller in &self.pollers {
            poller.shutdown();
        }
        for thread in self.poller_threads.drain(..) {
            let _ = thread.join();
        }
        self.pollers.clear();
    }
}

/// Locks `m`, ignoring poisoning (the acceptor handle is only ever taken).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("local_addrs", &self.local_addrs)
            .field("pollers", &self.pollers.len())
            .field("stopped", &self.stopped)
            .finish_non_exhaustive()
    }
}
