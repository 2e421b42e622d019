//! RPC message headers (RFC 5531 §9): [`CallHeader`] and [`ReplyHeader`] with their
//! XDR encodings.
//!
//! A call on the wire is `xid, CALL, rpcvers, prog, vers, proc, cred, verf` followed
//! by the procedure's arguments; a reply is `xid, REPLY` then either
//! `MSG_ACCEPTED, verf, accept_stat[, mismatch_info]` (results follow SUCCESS) or
//! `MSG_DENIED, reject_stat, mismatch_info | auth_stat`. [`ReplyStatus`] flattens the
//! accepted and denied arms into one enum.

use rnfs_xdr::{Decode, DecodeError, Encode, Reader, Writer};

use crate::auth::{AuthStat, OpaqueAuth};

/// The only ONC RPC version (RFC 5531 §9: `rpcvers` must be 2).
pub const RPC_VERSION: u32 = 2;

/// `msg_type`: CALL.
pub const CALL: u32 = 0;
/// `msg_type`: REPLY.
pub const REPLY: u32 = 1;

/// Program, version and procedure of the call whose record starts with `head`,
/// read from its fixed first 24 bytes (xid, message type, RPC version,
/// program, version, procedure) without decoding the rest: `None` when `head`
/// is shorter, or is not a CALL of RPC version 2.
pub fn peek_call_ids(head: &[u8]) -> Option<(u32, u32, u32)> {
    let word = |i: usize| {
        head.get(i * 4..i * 4 + 4)
            .and_then(|b| b.first_chunk::<4>())
            .map(|b| u32::from_be_bytes(*b))
    };
    match (word(1)?, word(2)?) {
        (CALL, RPC_VERSION) => Some((word(3)?, word(4)?, word(5)?)),
        _ => None,
    }
}

const MSG_ACCEPTED: u32 = 0;
const MSG_DENIED: u32 = 1;

const SUCCESS: u32 = 0;
const PROG_UNAVAIL: u32 = 1;
const PROG_MISMATCH: u32 = 2;
const PROC_UNAVAIL: u32 = 3;
const GARBAGE_ARGS: u32 = 4;
const SYSTEM_ERR: u32 = 5;

const RPC_MISMATCH: u32 = 0;
const AUTH_ERROR: u32 = 1;

/// The header of a call message (`call_body` with its `xid`), borrowing the
/// credential and verifier bodies. The procedure's arguments follow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallHeader<'a> {
    /// Transaction id, echoed in the reply.
    pub xid: u32,
    /// RPC protocol version; [`RPC_VERSION`] for every call this crate accepts.
    pub rpcvers: u32,
    /// Program number.
    pub prog: u32,
    /// Program version.
    pub vers: u32,
    /// Procedure number.
    pub proc_: u32,
    /// Credential, not yet validated (see [`Auth::from_call`](crate::Auth::from_call)).
    pub cred: OpaqueAuth<'a>,
    /// Verifier.
    pub verf: OpaqueAuth<'a>,
}

impl<'a> Decode<'a> for CallHeader<'a> {
    /// Decodes a whole call header. Unlike the dispatcher, this does not stop at an
    /// `rpcvers` other than 2; it is meant for clients and tests.
    fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        r.named("call_body", |r| {
            let xid = r.read_u32()?;
            match r.read_enum()? {
                CALL => {}
                value => {
                    return Err(DecodeError::BadDiscriminant {
                        type_name: "msg_type",
                        value,
                    })
                }
            }
            Ok(Self {
                xid,
                rpcvers: r.read_u32()?,
                prog: r.read_u32()?,
                vers: r.read_u32()?,
                proc_: r.read_u32()?,
                cred: OpaqueAuth::decode(r)?,
                verf: OpaqueAuth::decode(r)?,
            })
        })
    }
}

impl Encode for CallHeader<'_> {
    fn encode(&self, w: &mut Writer<'_>) {
        w.write_u32(self.xid);
        w.write_u32(CALL);
        w.write_u32(self.rpcvers);
        w.write_u32(self.prog);
        w.write_u32(self.vers);
        w.write_u32(self.proc_);
        self.cred.encode(w);
        self.verf.encode(w);
    }
}

/// The outcome carried by a reply: the `accept_stat` arms of an accepted reply and
/// the `reject_stat` arms of a denied one, flattened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReplyStatus {
    /// MSG_ACCEPTED / SUCCESS: the procedure's results follow.
    Success,
    /// MSG_ACCEPTED / PROG_UNAVAIL: program not exported here.
    ProgUnavail,
    /// MSG_ACCEPTED / PROG_MISMATCH: versions `low..=high` are supported.
    ProgMismatch {
        /// Lowest supported version.
        low: u32,
        /// Highest supported version.
        high: u32,
    },
    /// MSG_ACCEPTED / PROC_UNAVAIL: no such procedure.
    ProcUnavail,
    /// MSG_ACCEPTED / GARBAGE_ARGS: the arguments (or the header) could not be decoded.
    GarbageArgs,
    /// MSG_ACCEPTED / SYSTEM_ERR: e.g. memory allocation failure.
    SystemErr,
    /// MSG_DENIED / RPC_MISMATCH: RPC versions `low..=high` are supported.
    RpcMismatch {
        /// Lowest supported RPC version.
        low: u32,
        /// Highest supported RPC version.
        high: u32,
    },
    /// MSG_DENIED / AUTH_ERROR.
    AuthError(AuthStat),
}

impl ReplyStatus {
    /// Whether this is a MSG_ACCEPTED reply (which carries a verifier).
    pub fn is_accepted(&self) -> bool {
        !matches!(self, Self::RpcMismatch { .. } | Self::AuthError(_))
    }
}

/// A reply header: the `xid`, the status and, for accepted replies, the verifier.
/// The procedure's results (SUCCESS only) follow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyHeader<'a> {
    /// Transaction id of the call being answered.
    pub xid: u32,
    /// Server's verifier; only on the wire for accepted replies, and
    /// [`OpaqueAuth::NONE`] after decoding a denied one.
    pub verf: OpaqueAuth<'a>,
    /// The outcome.
    pub status: ReplyStatus,
}

impl<'a> Decode<'a> for ReplyHeader<'a> {
    fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        r.named("reply_body", |r| {
            let xid = r.read_u32()?;
            match r.read_enum()? {
                REPLY => {}
                value => {
                    return Err(DecodeError::BadDiscriminant {
                        type_name: "msg_type",
                        value,
                    })
                }
            }
            let (verf, status) = match r.read_enum()? {
                MSG_ACCEPTED => {
                    let verf = OpaqueAuth::decode(r)?;
                    let status = match r.read_enum()? {
                        SUCCESS => ReplyStatus::Success,
                        PROG_UNAVAIL => ReplyStatus::ProgUnavail,
                        PROG_MISMATCH => ReplyStatus::ProgMismatch {
                            low: r.read_u32()?,
                            high: r.read_u32()?,
                        },
                        PROC_UNAVAIL => ReplyStatus::ProcUnavail,
                        GARBAGE_ARGS => ReplyStatus::GarbageArgs,
                        SYSTEM_ERR => ReplyStatus::SystemErr,
                        value => {
                            return Err(DecodeError::BadDiscriminant {
                                type_name: "accept_stat",
                                value,
                            })
                        }
                    };
                    (verf, status)
                }
                MSG_DENIED => {
                    let status = match r.read_enum()? {
                        RPC_MISMATCH => ReplyStatus::RpcMismatch {
                            low: r.read_u32()?,
                            high: r.read_u32()?,
                        },
                        AUTH_ERROR => ReplyStatus::AuthError(AuthStat::decode(r)?),
                        value => {
                            return Err(DecodeError::BadDiscriminant {
                                type_name: "reject_stat",
                                value,
                            })
                        }
                    };
                    (OpaqueAuth::NONE, status)
                }
                value => {
                    return Err(DecodeError::BadDiscriminant {
                        type_name: "reply_stat",
                        value,
                    })
                }
            };
            Ok(Self { xid, verf, status })
        })
    }
}

impl Encode for ReplyHeader<'_> {
    fn encode(&self, w: &mut Writer<'_>) {
        w.write_u32(self.xid);
        w.write_u32(REPLY);
        if self.status.is_accepted() {
            w.write_u32(MSG_ACCEPTED);
            self.verf.encode(w);
        } else {
            w.write_u32(MSG_DENIED);
        }
        encode_status(&self.status, w);
    }
}

/// Writes the part of a reply after the verifier (accepted) or `MSG_DENIED`.
pub(crate) fn encode_status(status: &ReplyStatus, w: &mut Writer<'_>) {
    match *status {
        ReplyStatus::Success => w.write_u32(SUCCESS),
        ReplyStatus::ProgUnavail => w.write_u32(PROG_UNAVAIL),
        ReplyStatus::ProgMismatch { low, high } => {
            w.write_u32(PROG_MISMATCH);
            w.write_u32(low);
            w.write_u32(high);
        }
        ReplyStatus::ProcUnavail => w.write_u32(PROC_UNAVAIL),
        ReplyStatus::GarbageArgs => w.write_u32(GARBAGE_ARGS),
        ReplyStatus::SystemErr => w.write_u32(SYSTEM_ERR),
        ReplyStatus::RpcMismatch { low, high } => {
            w.write_u32(RPC_MISMATCH);
            w.write_u32(low);
            w.write_u32(high);
        }
        ReplyStatus::AuthError(stat) => {
            w.write_u32(AUTH_ERROR);
            stat.encode(w);
        }
    }
}
