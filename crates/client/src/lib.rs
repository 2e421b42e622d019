//! rnfs client library.
//!
//! Today: [`SyncConnection`], a blocking, one-call-at-a-time ONC RPC connection
//! over TCP with typed NFSv3 and MOUNT helpers. Tests and benchmarks use it to
//! drive servers. The multiplexing client with write-behind builds on the same
//! sans-IO crates.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod sync;

pub use sync::{CallError, SyncConnection};
