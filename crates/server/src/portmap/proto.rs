//! Program, version and procedure numbers of the port mapper (RFC 1833), and the
//! XDR of the two argument types both the service and the client exchange:
//! version 2's `mapping` and versions 3–4's `rpcb`.

use std::net::SocketAddr;

use rnfs_xdr::{DecodeError, Reader, Writer};

use super::registry::Mapping;

/// The port mapper / rpcbind program number.
pub const PMAP_PROGRAM: u32 = 100_000;
/// The port the port mapper listens on.
pub const PMAP_PORT: u16 = 111;
/// Port mapper version 2 (`PMAP_*`, IPv4 ports).
pub const PMAP_V2: u32 = 2;
/// rpcbind version 3 (`RPCBPROC_*`, universal addresses).
pub const RPCB_V3: u32 = 3;
/// rpcbind version 4 (version 3 plus GETVERSADDR, GETADDRLIST, ...).
pub const RPCB_V4: u32 = 4;

/// Version 2 procedures.
pub mod pmapproc {
    /// No arguments, no results.
    pub const NULL: u32 = 0;
    /// `mapping` → `bool`.
    pub const SET: u32 = 1;
    /// `mapping` → `bool`; unsets TCP and UDP of `(prog, vers)`.
    pub const UNSET: u32 = 2;
    /// `mapping` → `unsigned int` port (0 when not registered).
    pub const GETPORT: u32 = 3;
    /// void → `pmaplist *`.
    pub const DUMP: u32 = 4;
    /// Indirect call (not served: PROC_UNAVAIL).
    pub const CALLIT: u32 = 5;
}

/// Version 3 and 4 procedures.
pub mod rpcbproc {
    /// No arguments, no results.
    pub const NULL: u32 = 0;
    /// `rpcb` → `bool`.
    pub const SET: u32 = 1;
    /// `rpcb` → `bool`; an empty netid unsets every netid.
    pub const UNSET: u32 = 2;
    /// `rpcb` → universal address (empty when not registered).
    pub const GETADDR: u32 = 3;
    /// void → `rpcblist *`.
    pub const DUMP: u32 = 4;
    /// Indirect call, BCAST in version 4 (not served: PROC_UNAVAIL).
    pub const CALLIT: u32 = 5;
    /// void → seconds since 1970 (`unsigned int`).
    pub const GETTIME: u32 = 6;
    /// Not served: PROC_UNAVAIL (host-specific `netbuf` layout).
    pub const UADDR2TADDR: u32 = 7;
    /// Not served: PROC_UNAVAIL.
    pub const TADDR2UADDR: u32 = 8;
    /// Version 4: `rpcb` → universal address of exactly that version.
    pub const GETVERSADDR: u32 = 9;
    /// Version 4: indirect call (not served: PROC_UNAVAIL).
    pub const INDIRECT: u32 = 10;
    /// Version 4: `rpcb` → `rpcb_entry_list *`.
    pub const GETADDRLIST: u32 = 11;
    /// Version 4: statistics (not served: PROC_UNAVAIL).
    pub const GETSTAT: u32 = 12;
}

/// Longest netid accepted in an `rpcb` (rpcbind sets none; netids are short words).
pub const MAX_NETID_LEN: u32 = 128;
/// Longest universal address accepted in an `rpcb` (a `local` socket path fits).
pub const MAX_UADDR_LEN: u32 = 256;
/// Longest owner accepted in an `rpcb`.
pub const MAX_OWNER_LEN: u32 = 256;

/// `struct mapping` of version 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PmapMapping {
    pub(crate) prog: u32,
    pub(crate) vers: u32,
    /// `IPPROTO_TCP` or `IPPROTO_UDP`.
    pub(crate) prot: u32,
    /// A port, on the wire as `unsigned int`.
    pub(crate) port: u32,
}

impl PmapMapping {
    /// The version 2 form of `m`: only IPv4 `tcp` and `udp` mappings have one.
    pub(crate) fn from_mapping(m: &Mapping) -> Option<Self> {
        let Some((protocol, SocketAddr::V4(addr))) = m.inet() else {
            return None;
        };
        Some(Self {
            prog: m.prog,
            vers: m.vers,
            prot: protocol.ipproto(),
            port: addr.port().into(),
        })
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.named("mapping", |r| {
            Ok(Self {
                prog: r.read_u32()?,
                vers: r.read_u32()?,
                prot: r.read_u32()?,
                port: r.read_u32()?,
            })
        })
    }

    pub(crate) fn encode(&self, w: &mut Writer<'_>) {
        w.write_u32(self.prog);
        w.write_u32(self.vers);
        w.write_u32(self.prot);
        w.write_u32(self.port);
    }
}

/// `struct rpcb` of versions 3 and 4, borrowing its strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rpcb<'a> {
    pub(crate) prog: u32,
    pub(crate) vers: u32,
    pub(crate) netid: &'a [u8],
    pub(crate) uaddr: &'a [u8],
    pub(crate) owner: &'a [u8],
}

impl<'a> Rpcb<'a> {
    pub(crate) fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        r.named("rpcb", |r| {
            Ok(Self {
                prog: r.read_u32()?,
                vers: r.read_u32()?,
                netid: r.read_string(MAX_NETID_LEN)?,
                uaddr: r.read_string(MAX_UADDR_LEN)?,
                owner: r.read_string(MAX_OWNER_LEN)?,
            })
        })
    }

    pub(crate) fn from_mapping(m: &'a Mapping) -> Self {
        Self {
            prog: m.prog,
            vers: m.vers,
            netid: m.netid.as_bytes(),
            uaddr: m.uaddr.as_bytes(),
            owner: m.owner.as_bytes(),
        }
    }

    pub(crate) fn encode(&self, w: &mut Writer<'_>) {
        w.write_u32(self.prog);
        w.write_u32(self.vers);
        w.write_string(self.netid);
        w.write_string(self.uaddr);
        w.write_string(self.owner);
    }
}
