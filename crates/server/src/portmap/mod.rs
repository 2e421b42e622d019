//! The port mapper (RFC 1833): how clients find rnfs's ports, and how rnfs tells
//! the host's rpcbind about them.
//!
//! Two roles, pick one per host:
//! - **Serve it** on port 111 where no rpcbind runs, so that a plain
//!   `mount -t nfs host:/export /mnt` (which asks the port mapper for the MOUNT and
//!   NFS ports) works: register a [`PortmapService`] over a [`PortRegistry`] that
//!   holds rnfs's own programs.
//! - **Register with** an existing rpcbind: [`register_with_rpcbind`] at start-up,
//!   [`unregister_from_rpcbind`] at shutdown.
//!
//! ```no_run
//! use std::sync::Arc;
//! use rnfs_server::portmap::{tcp_mappings, PortRegistry, PortmapService, PMAP_PROGRAM};
//! use rnfs_server::services::{default_dispatcher, MOUNT_PROGRAM, NFS_PROGRAM};
//!
//! let listen = ["0.0.0.0:2049".parse().unwrap(), "0.0.0.0:111".parse().unwrap()];
//! let registry = Arc::new(PortRegistry::new());
//! registry.set_all(tcp_mappings(NFS_PROGRAM, 3..=3, &listen[..1]))?;
//! registry.set_all(tcp_mappings(MOUNT_PROGRAM, 1..=3, &listen[..1]))?;
//! registry.set_all(tcp_mappings(PMAP_PROGRAM, 2..=4, &listen[1..]))?;
//! let mut dispatcher = default_dispatcher();
//! dispatcher.register(Arc::new(PortmapService::new(registry))).unwrap();
//! // Server::start_with_dispatcher(config listening on both ports, dispatcher.into())
//! # Ok::<(), rnfs_server::portmap::SetError>(())
//! ```
//!
//! Files: [`uaddr`] (universal addresses), `registry` ([`PortRegistry`],
//! [`Mapping`]), `service` ([`PortmapService`]), `client` (registration with
//! rpcbind), `proto` (numbers and the shared XDR).

mod client;
mod proto;
mod registry;
mod service;
pub mod uaddr;

pub use client::{
    register_with_rpcbind, unregister_from_rpcbind, PortmapError, RpcbindEndpoint, RPCBIND_SOCKET,
    RPCBIND_TIMEOUT,
};
pub use proto::{
    pmapproc, rpcbproc, MAX_NETID_LEN, MAX_OWNER_LEN, MAX_UADDR_LEN, PMAP_PORT, PMAP_PROGRAM,
    PMAP_V2, RPCB_V3, RPCB_V4,
};
pub use registry::{
    tcp_mappings, Mapping, PortRegistry, Protocol, SetError, DEFAULT_REGISTRY_CAPACITY,
    IPPROTO_TCP, IPPROTO_UDP, RNFS_OWNER,
};
pub use service::{PortmapService, RegistrationPolicy};
pub use uaddr::{format_uaddr, parse_uaddr, UaddrError};
