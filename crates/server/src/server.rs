//! [`Server`]: binds the listeners and runs the acceptor, pollers and service
//! threads until shut down.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use rnfs_rpc::Dispatcher;
use rnfs_sched::Scheduler;

use crate::config::ServerConfig;
use crate::error::ServerError;
use crate::handler::ServerHandler;
use crate::metrics::{DrcSnapshot, SchedSnapshot, StatsSnapshot, TransportSnapshot};
use crate::services;
use crate::stats::{Counters, ServerStats};
use crate::transport::{bind_listener, spawn_acceptor, spawn_poller, AcceptorHandle, PollerHandle};

/// A running server. Dropping it shuts it down, as [`Server::shutdown`] does.
pub struct Server {
    sched: Arc<Scheduler<ServerHandler>>,
    local_addrs: Vec<SocketAddr>,
    counters: Arc<Counters>,
    acceptor: Option<AcceptorHandle>,
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
            config.drc,
            config.metrics.clone(),
        );
        let sched = Scheduler::start(config.sched.clone(), handler)?;

        let mut server = Server {
            sched,
            local_addrs,
            counters: Arc::new(Counters::default()),
            acceptor: None,
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
                config.metrics.clone(),
            )?;
            server.pollers.push(handle);
            server.poller_threads.push(thread);
        }
        server.acceptor = Some(spawn_acceptor(
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
        s.drc = handler.drc_stats().as_ref().map(DrcSnapshot::from);
        s
    }

    /// Stops accepting, closes every connection, and stops the service threads.
    /// Returns when all the server's threads have exited.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        if let Some(mut acceptor) = self.acceptor.take() {
            acceptor.stop();
        }
        for poller in &self.pollers {
            poller.shutdown();
        }
        for thread in self.poller_threads.drain(..) {
            let _ = thread.join();
        }
        self.pollers.clear();
        self.sched.shutdown();
    }
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
