//! ONC RPC version 2 (RFC 5531), sans-IO: message headers, authentication, record
//! marking and call dispatch.
//!
//! Layers, bottom up:
//! - [`record`]: splits a TCP byte stream into records and frames replies;
//! - [`message`]: call and reply headers;
//! - [`auth`]: credentials (AUTH_NONE, AUTH_SYS) and their limits;
//! - [`service`]: the [`Dispatcher`] that turns one call record into one reply
//!   record by way of a registered [`Service`];
//! - [`error`]: [`RpcError`] and its single mapping to reply statuses.
//!
//! Nothing here touches a socket, a thread or a clock: the server's transports feed
//! bytes in and write the bytes that come out.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod auth;
pub mod error;
pub mod fuzzing;
pub mod message;
pub mod record;
pub mod service;

pub use auth::{Auth, AuthError, AuthFlavor, AuthStat, AuthSys, Gids, OpaqueAuth};
pub use error::RpcError;
pub use message::{peek_call_ids, CallHeader, ReplyHeader, ReplyStatus, RPC_VERSION};
pub use record::{
    begin_record, encode_record, finish_record, ReadTargets, RecordDecoder, RecordError,
};
pub use service::{
    decode_call, decode_reply, encode_call, encode_call_header, CallContext, DispatchOutcome,
    Dispatcher, DropReason, Pace, RegisterError, Reply, Service, ServiceError,
};
