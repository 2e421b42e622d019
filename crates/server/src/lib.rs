//! The rnfs server: TCP transports on mio feeding the service-thread scheduler
//! ([`rnfs_sched`]), which runs the RPC services ([`rnfs_rpc::Dispatcher`]).
//!
//! ```no_run
//! use rnfs_server::{Server, ServerConfig};
//!
//! let server = Server::start(ServerConfig::new(vec!["127.0.0.1:20490".parse().unwrap()]))?;
//! println!("listening on {:?}", server.local_addrs());
//! server.shutdown();
//! # Ok::<(), rnfs_server::ServerError>(())
//! ```
//!
//! How a call travels from the socket to a service thread and back is described in
//! the [`transport`] module.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod config;
pub mod drc;
mod error;
mod handler;
pub mod metrics;
pub mod nfs;
pub mod portmap;
mod server;
pub mod services;
mod stats;
pub mod transport;

pub use config::{DrcConfig, Limits, ServerConfig, NFS_PORT};
pub use error::ServerError;
pub use handler::{before_blocking, ServerHandler, ThreadState};
pub use metrics::{Metrics, MetricsConfig, StatsSnapshot};
pub use server::{DrainOutcome, Server};
pub use stats::ServerStats;
pub use transport::Connection;
