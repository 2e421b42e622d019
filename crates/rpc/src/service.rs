//! Call dispatch: one [`Dispatcher`] serves every RPC program on a port (NFS, MOUNT,
//! later NLM), each program version implemented by a [`Service`].
//!
//! For each record, [`Dispatcher::dispatch`]:
//! 1. reads `xid` and `msg_type`; a message too short for both, or that is not a
//!    CALL, is dropped ([`DispatchOutcome::Dropped`]) and nothing is written;
//! 2. checks `rpcvers` (RPC_MISMATCH unless 2), reads `prog`, `vers`, `proc`
//!    (GARBAGE_ARGS if truncated; Linux drops such calls, we answer so the client
//!    fails fast instead of retransmitting);
//! 3. validates the credential and verifier ([`Auth::from_call`]: AUTH_BADCRED or
//!    AUTH_BADVERF);
//! 4. finds the service: PROG_UNAVAIL, or PROG_MISMATCH with the lowest and highest
//!    versions registered for the program;
//! 5. writes an accepted SUCCESS header and lets the service decode its arguments
//!    and append its results; a [`ServiceError`] rolls the reply back to the header
//!    and replaces it with the matching status.
//!
//! Every failure is an [`RpcError`], turned into a reply in one place
//! (`TryFrom<&RpcError> for ReplyStatus`). Reply verifiers are AUTH_NONE. Besides
//! the growth of `out`, dispatching allocates nothing.

use std::net::SocketAddr;
use std::sync::Arc;

use rnfs_xdr::{Decode, DecodeError, Encode, Reader, Writer};

use crate::auth::{Auth, AuthError, AuthStat, OpaqueAuth};
use crate::error::RpcError;
use crate::message::{
    peek_call_ids, CallHeader, ReplyHeader, ReplyStatus, CALL, REPLY, RPC_VERSION,
};
use crate::record::{begin_record, finish_record};

/// One version range of one RPC program.
pub trait Service: Send + Sync {
    /// The program number (e.g. 100003 for NFS).
    fn program(&self) -> u32;
    /// Lowest and highest version implemented, inclusive.
    fn versions(&self) -> (u32, u32);
    /// Name for logs, e.g. `"nfs"`.
    fn name(&self) -> &'static str;
    /// Decodes the arguments of procedure `ctx.proc_` from `args` and appends ONLY
    /// its results to `reply`: the dispatcher has already written the accepted
    /// reply header. On `Err`, whatever was appended is discarded. Trailing bytes
    /// after the arguments are the service's call (use [`Reader::finish`] to refuse
    /// them).
    fn call(
        &self,
        ctx: &CallContext<'_>,
        args: &mut Reader<'_>,
        reply: &mut Writer<'_>,
    ) -> Result<(), ServiceError>;

    /// Whether procedure `proc_` of version `vers` is *quick*: answered from
    /// memory or file system metadata, with no data I/O whose size the client
    /// chooses. A transport may hold a connection's earlier replies back for a
    /// quick call already received, to send them with its reply in one write
    /// (see [`Dispatcher::is_quick_call`]). The default, `false`, never delays a
    /// reply behind this service's calls.
    fn is_quick(&self, vers: u32, proc_: u32) -> bool {
        let _ = (vers, proc_);
        false
    }

    /// Whether procedure `proc_` of version `vers` is *quick among its peers*:
    /// usually quick, but it may wait now and then (a buffered write the kernel
    /// throttles), and clients send it in long pipelined runs (write-behind). A
    /// transport may hold the reply of one such call back for the next such
    /// call already received, and never any other reply: a run of them is
    /// answered in batches while nothing else waits behind one. Consulted only
    /// when [`is_quick`](Self::is_quick) says no. The default, `false`, never
    /// delays a reply behind this service's calls.
    fn is_quick_among_peers(&self, vers: u32, proc_: u32) -> bool {
        let _ = (vers, proc_);
        false
    }
}

/// How long a call is expected to take, for reply coalescing: whether earlier
/// replies of its connection may be held back for it (see
/// [`Dispatcher::call_pace`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// May take long (or is not a call of a registered service): no reply is
    /// held back for it.
    Slow,
    /// Quick ([`Service::is_quick`]): any earlier reply may wait for it.
    Quick,
    /// Quick among its peers ([`Service::is_quick_among_peers`]): only the
    /// reply of an earlier call of this pace may wait for it.
    QuickAmongPeers,
}

/// What a service knows about the call it is handling.
#[derive(Debug, Clone, Copy)]
pub struct CallContext<'a> {
    /// Transaction id.
    pub xid: u32,
    /// Program number.
    pub prog: u32,
    /// Program version, within the service's [`Service::versions`].
    pub vers: u32,
    /// Procedure number.
    pub proc_: u32,
    /// The validated credential.
    pub auth: &'a Auth<'a>,
    /// The caller's address, if the transport knows it.
    pub peer: Option<SocketAddr>,
}

impl CallContext<'_> {
    /// The caller's address for a log line: `ADDR:PORT`, or `unknown`.
    pub fn peer_name(&self) -> String {
        self.peer
            .map_or_else(|| "unknown".to_owned(), |p| p.to_string())
    }
}

/// How a service refuses or fails a call; each maps to one reply status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ServiceError {
    /// PROC_UNAVAIL: no such procedure in this version.
    #[error("procedure unavailable")]
    ProcUnavail,
    /// GARBAGE_ARGS: the arguments could not be decoded.
    #[error("arguments could not be decoded")]
    GarbageArgs,
    /// SYSTEM_ERR: the server failed (not the caller's fault).
    #[error("system error")]
    SystemErr,
    /// MSG_DENIED / AUTH_ERROR, e.g. [`AuthStat::TooWeak`] for AUTH_NONE where a
    /// real identity is required.
    #[error("authentication error {0:?}")]
    AuthError(AuthStat),
}

/// Argument decoding errors are GARBAGE_ARGS, so services can use `?`.
impl From<DecodeError> for ServiceError {
    fn from(_: DecodeError) -> Self {
        Self::GarbageArgs
    }
}

/// What [`Dispatcher::dispatch`] did with a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DispatchOutcome {
    /// A record-marked reply was appended to `out`. Header fields that could not be
    /// decoded (RPC_MISMATCH, GARBAGE_ARGS for a truncated header) are 0.
    Replied {
        /// Transaction id.
        xid: u32,
        /// Program called.
        prog: u32,
        /// Version called.
        vers: u32,
        /// Procedure called.
        proc_: u32,
        /// The reply's status.
        status: ReplyStatus,
    },
    /// Nothing was written.
    Dropped(DropReason),
}

/// Why a record got no reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DropReason {
    /// The record ended before its `xid` and `msg_type`.
    #[error("record too short for an RPC header")]
    Truncated,
    /// The message is not a CALL (e.g. a REPLY, or garbage).
    #[error("msg_type {msg_type} is not CALL")]
    NotACall {
        /// The `msg_type` found.
        msg_type: u32,
    },
}

/// Why a service could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegisterError {
    /// `versions()` returned `low > high`.
    #[error("{name}: empty version range {low}..={high}")]
    EmptyVersions {
        /// The service's name.
        name: &'static str,
        /// Lowest version.
        low: u32,
        /// Highest version.
        high: u32,
    },
    /// Another service already implements one of the versions.
    #[error("{name}: program {prog} versions {low}..={high} overlap {existing}")]
    Overlap {
        /// The service being registered.
        name: &'static str,
        /// The program number.
        prog: u32,
        /// Lowest version being registered.
        low: u32,
        /// Highest version being registered.
        high: u32,
        /// The service already registered.
        existing: &'static str,
    },
}

#[derive(Clone)]
struct Program {
    prog: u32,
    /// Over all `services`.
    low: u32,
    high: u32,
    /// Disjoint version ranges.
    services: Vec<Arc<dyn Service>>,
}

/// Routes calls to registered [`Service`]s and writes replies. Build it once, then
/// share it (`&self` dispatch, `Send + Sync`).
#[derive(Clone, Default)]
pub struct Dispatcher {
    /// Few entries (one per program), so a linear scan is the fastest lookup.
    programs: Vec<Program>,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut list = f.debug_list();
        for p in &self.programs {
            for s in &p.services {
                let (low, high) = s.versions();
                list.entry(&format_args!("{} {}v{}..={}", s.name(), p.prog, low, high));
            }
        }
        list.finish()
    }
}

/// Program, version and procedure of a call, as far as they were decoded.
#[derive(Debug, Default, Clone, Copy)]
struct CallIds {
    prog: u32,
    vers: u32,
    proc_: u32,
}

impl Dispatcher {
    /// A dispatcher with no services.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a service. Several services may implement different versions of one
    /// program; their version ranges must not overlap.
    pub fn register(&mut self, service: Arc<dyn Service>) -> Result<(), RegisterError> {
        let (prog, (low, high), name) = (service.program(), service.versions(), service.name());
        if low > high {
            return Err(RegisterError::EmptyVersions { name, low, high });
        }
        let Some(program) = self.programs.iter_mut().find(|p| p.prog == prog) else {
            self.programs.push(Program {
                prog,
                low,
                high,
                services: vec![service],
            });
            return Ok(());
        };
        if let Some(existing) = program.services.iter().find(|s| {
            let (l, h) = s.versions();
            l <= high && low <= h
        }) {
            return Err(RegisterError::Overlap {
                name,
                prog,
                low,
                high,
                existing: existing.name(),
            });
        }
        program.low = program.low.min(low);
        program.high = program.high.max(high);
        program.services.push(service);
        Ok(())
    }

    /// Handles one complete record (without its record marks) and appends the
    /// record-marked reply to `out`, or nothing if the call is dropped.
    pub fn dispatch(
        &self,
        record: &[u8],
        peer: Option<SocketAddr>,
        out: &mut Vec<u8>,
    ) -> DispatchOutcome {
        let mut r = Reader::new(record);
        let (Ok(xid), Ok(msg_type)) = (r.read_u32(), r.read_enum()) else {
            return DispatchOutcome::Dropped(DropReason::Truncated);
        };
        let mark = begin_record(out);
        let header_start = out.len();
        let mut ids = CallIds::default();
        let mut w = Writer::new(out);
        let result = self.process(xid, msg_type, &mut r, peer, &mut w, &mut ids);
        let status = match result.as_ref().map_err(ReplyStatus::try_from) {
            Ok(()) => ReplyStatus::Success,
            Err(Ok(status)) => {
                w.truncate(header_start);
                ReplyHeader {
                    xid,
                    verf: OpaqueAuth::NONE,
                    status,
                }
                .encode(&mut w);
                status
            }
            Err(Err(reason)) => {
                out.truncate(mark);
                return DispatchOutcome::Dropped(reason);
            }
        };
        finish_record(out, mark);
        DispatchOutcome::Replied {
            xid,
            prog: ids.prog,
            vers: ids.vers,
            proc_: ids.proc_,
            status,
        }
    }

    /// Steps 2–5 of the module docs; on success the whole reply is in `w`.
    fn process(
        &self,
        xid: u32,
        msg_type: u32,
        r: &mut Reader<'_>,
        peer: Option<SocketAddr>,
        w: &mut Writer<'_>,
        ids: &mut CallIds,
    ) -> Result<(), RpcError> {
        if msg_type != CALL {
            return Err(RpcError::UnexpectedMsgType {
                expected: CALL,
                got: msg_type,
            });
        }
        let rpcvers = r.read_u32()?;
        if rpcvers != RPC_VERSION {
            return Err(RpcError::RpcMismatch { rpcvers });
        }
        ids.prog = r.read_u32()?;
        ids.vers = r.read_u32()?;
        ids.proc_ = r.read_u32()?;
        let cred = OpaqueAuth::decode(r).map_err(AuthError::BadCredential)?;
        let verf = OpaqueAuth::decode(r).map_err(AuthError::BadVerifier)?;
        let auth = Auth::from_call(&cred, &verf)?;
        let service = self.lookup(ids.prog, ids.vers)?;
        ReplyHeader {
            xid,
            verf: OpaqueAuth::NONE,
            status: ReplyStatus::Success,
        }
        .encode(w);
        let ctx = CallContext {
            xid,
            prog: ids.prog,
            vers: ids.vers,
            proc_: ids.proc_,
            auth: &auth,
            peer,
        };
        service.call(&ctx, r, w)?;
        Ok(())
    }

    /// Whether the call whose record starts with `head` (at least the first 24
    /// bytes: xid, message type, RPC version, program, version, procedure) is a
    /// quick call of a registered service ([`Service::is_quick`]). Anything else,
    /// including a head too short or not a CALL, is not quick. Reads six words
    /// and scans the few registered programs: cheap enough for every record.
    pub fn is_quick_call(&self, head: &[u8]) -> bool {
        self.call_pace(head) == Pace::Quick
    }

    /// The [`Pace`] of the call whose record starts with `head` (at least the
    /// first 24 bytes, as for [`is_quick_call`](Self::is_quick_call)); anything
    /// that is not a call of a registered service is [`Pace::Slow`].
    pub fn call_pace(&self, head: &[u8]) -> Pace {
        peek_call_ids(head).map_or(Pace::Slow, |(prog, vers, proc_)| {
            self.pace(prog, vers, proc_)
        })
    }

    /// The [`Pace`] of procedure `proc_` of program `prog`, version `vers`.
    pub fn pace(&self, prog: u32, vers: u32, proc_: u32) -> Pace {
        match self.lookup(prog, vers) {
            Ok(service) if service.is_quick(vers, proc_) => Pace::Quick,
            Ok(service) if service.is_quick_among_peers(vers, proc_) => Pace::QuickAmongPeers,
            _ => Pace::Slow,
        }
    }

    fn lookup(&self, prog: u32, vers: u32) -> Result<&dyn Service, RpcError> {
        let program = self
            .programs
            .iter()
            .find(|p| p.prog == prog)
            .ok_or(RpcError::ProgUnavail { prog })?;
        program
            .services
            .iter()
            .find(|s| {
                let (low, high) = s.versions();
                (low..=high).contains(&vers)
            })
            .map(|s| &**s)
            .ok_or(RpcError::ProgMismatch {
                prog,
                vers,
                low: program.low,
                high: program.high,
            })
    }
}

/// Appends a record-marked call (AUTH_NONE verifier) with already-encoded `args`.
pub fn encode_call(
    xid: u32,
    prog: u32,
    vers: u32,
    proc_: u32,
    auth: &Auth<'_>,
    args: &[u8],
    out: &mut Vec<u8>,
) {
    let mark = begin_record(out);
    let mut w = Writer::new(out);
    encode_call_header(&mut w, xid, prog, vers, proc_, auth);
    w.write_fixed_opaque(args);
    // `write_fixed_opaque` pads; XDR arguments are already a multiple of 4.
    finish_record(out, mark);
}

/// Writes a call header (AUTH_NONE verifier); the caller appends the arguments.
pub fn encode_call_header(
    w: &mut Writer<'_>,
    xid: u32,
    prog: u32,
    vers: u32,
    proc_: u32,
    auth: &Auth<'_>,
) {
    w.write_u32(xid);
    w.write_u32(CALL);
    w.write_u32(RPC_VERSION);
    w.write_u32(prog);
    w.write_u32(vers);
    w.write_u32(proc_);
    auth.encode_opaque(w);
    OpaqueAuth::NONE.encode(w);
}

/// A decoded reply: its header and the bytes after it (the results, for SUCCESS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply<'a> {
    /// The reply header.
    pub header: ReplyHeader<'a>,
    /// Everything after the header.
    pub results: &'a [u8],
    /// Offset of `results` within the record.
    pub results_offset: usize,
}

/// Decodes the header of a reply record (without record marks).
pub fn decode_reply(record: &[u8]) -> Result<Reply<'_>, RpcError> {
    let mut r = Reader::new(record);
    let mut peek = r.clone();
    peek.read_u32()?;
    let msg_type = peek.read_enum()?;
    if msg_type != REPLY {
        return Err(RpcError::UnexpectedMsgType {
            expected: REPLY,
            got: msg_type,
        });
    }
    let header = ReplyHeader::decode(&mut r)?;
    let results_offset = r.position();
    Ok(Reply {
        header,
        results: r.read_rest(),
        results_offset,
    })
}

/// Decodes a call record's header; the arguments start at the reader's position.
/// For tests and tools: the dispatcher decodes step by step to map each failure.
pub fn decode_call<'a>(r: &mut Reader<'a>) -> Result<CallHeader<'a>, RpcError> {
    Ok(CallHeader::decode(r)?)
}
