//! rnfs client library: NFSv3 and MOUNT v3 over TCP.
//!
//! - [`RpcClient`]: a thread-safe transport; many calls share one connection.
//!   Blocking calls, or futures (`call_async`) that run on any executor; on a
//!   multi-thread tokio runtime (feature `tokio`, on by default) their
//!   replies are read by a task of that runtime, woken by its reactor.
//! - [`NfsClient`]: one typed method per NFSv3 and MOUNT procedure.
//! - [`Session`]: an export mounted from an `nfs://` [`NfsUrl`].
//! - [`SyncConnection`]: a minimal one-call-at-a-time connection for tests
//!   that need to control XIDs or send raw bytes.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod error;
pub mod file;
pub mod lockstat;
pub mod nfs;
pub mod readahead;
pub mod session;
mod sync;
pub mod transport;
pub mod url;
pub mod writeback;

pub use error::{nfsstat_errno, ClientError, NfsError};
pub use file::{DirtyBudget, FileStats, IoConfig, NfsFile};
pub use nfs::{
    CollectedWrite, Created, DirEntry, DirPage, DirPlusEntry, Export, NfsClient, PendingRead,
    PendingWrite, ReadOutcome, WriteOutcome,
};
pub use session::{longest_export, Session};
pub use sync::{CallError, SyncConnection};
pub use transport::{ClientOptions, Credential, PendingCall, RpcClient};
pub use url::{NfsUrl, UrlError};
