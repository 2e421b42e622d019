//! Errors from starting a server.

use std::io;
use std::net::SocketAddr;

/// Why [`Server::start`](crate::Server::start) failed. Nothing keeps running after
/// an error: threads already started are stopped again.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The configuration lists no address to listen on.
    #[error("no listen address given")]
    NoListenAddress,
    /// A limit or setting is out of range.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// Creating, binding or listening on a socket failed.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address that could not be bound.
        addr: SocketAddr,
        /// The socket error.
        #[source]
        source: io::Error,
    },
    /// Creating an epoll instance or its waker failed.
    #[error("cannot create an event poller")]
    Poll(#[source] io::Error),
    /// Spawning the acceptor or a poller thread failed.
    #[error("cannot spawn thread {name}")]
    Spawn {
        /// The thread's name.
        name: String,
        /// The spawn error.
        #[source]
        source: io::Error,
    },
    /// The service-thread scheduler failed to start.
    #[error("cannot start the service threads")]
    Sched(#[from] rnfs_sched::StartError),
}
