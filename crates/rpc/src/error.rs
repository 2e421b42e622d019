//! [`RpcError`], the RPC layer's error, and its one mapping to a reply.

use rnfs_xdr::DecodeError;

use crate::auth::{AuthError, AuthStat};
use crate::message::{ReplyStatus, RPC_VERSION};
use crate::service::{DropReason, ServiceError};

/// Why an RPC message could not be processed.
///
/// On the server every variant but [`UnexpectedMsgType`](Self::UnexpectedMsgType)
/// becomes a reply; the mapping is `TryFrom<&RpcError> for ReplyStatus`, below.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RpcError {
    /// The message header could not be decoded (truncated or garbage).
    #[error("malformed RPC header: {0}")]
    Decode(#[from] DecodeError),
    /// `msg_type` was not the one expected (a REPLY sent to a server, or vice versa).
    #[error("unexpected msg_type {got}, expected {expected}")]
    UnexpectedMsgType {
        /// The `msg_type` wanted (CALL = 0, REPLY = 1).
        expected: u32,
        /// The value found.
        got: u32,
    },
    /// `rpcvers` was not 2.
    #[error("unsupported RPC version {rpcvers}")]
    RpcMismatch {
        /// The version the caller used.
        rpcvers: u32,
    },
    /// The credential or verifier was refused.
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// No service is registered for the program.
    #[error("program {prog} unavailable")]
    ProgUnavail {
        /// The program number called.
        prog: u32,
    },
    /// The program is registered, but not in the version called.
    #[error("program {prog} version {vers} unavailable (supported {low}..={high})")]
    ProgMismatch {
        /// The program number called.
        prog: u32,
        /// The version called.
        vers: u32,
        /// Lowest version registered.
        low: u32,
        /// Highest version registered.
        high: u32,
    },
    /// The service refused or failed the call.
    #[error("service error: {0}")]
    Service(#[from] ServiceError),
}

/// The single mapping from a failed call to the reply it gets (RFC 5531 §9).
/// `Err` means no reply can be sent and the message is dropped.
impl TryFrom<&RpcError> for ReplyStatus {
    type Error = DropReason;

    fn try_from(e: &RpcError) -> Result<Self, DropReason> {
        Ok(match e {
            // The xid was read (the dispatcher drops earlier otherwise), so answer
            // rather than leave the client to retransmit; Linux drops instead.
            RpcError::Decode(_) => Self::GarbageArgs,
            RpcError::UnexpectedMsgType { got, .. } => {
                return Err(DropReason::NotACall { msg_type: *got })
            }
            RpcError::RpcMismatch { .. } => Self::RpcMismatch {
                low: RPC_VERSION,
                high: RPC_VERSION,
            },
            RpcError::Auth(e) => Self::AuthError(AuthStat::from(e)),
            RpcError::ProgUnavail { .. } => Self::ProgUnavail,
            RpcError::ProgMismatch { low, high, .. } => Self::ProgMismatch {
                low: *low,
                high: *high,
            },
            RpcError::Service(ServiceError::ProcUnavail) => Self::ProcUnavail,
            RpcError::Service(ServiceError::GarbageArgs) => Self::GarbageArgs,
            RpcError::Service(ServiceError::SystemErr) => Self::SystemErr,
            RpcError::Service(ServiceError::AuthError(stat)) => Self::AuthError(*stat),
        })
    }
}
