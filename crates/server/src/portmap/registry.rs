//! The table of mappings `(program, version, netid) → universal address` that the
//! port mapper serves, shared between the server (which registers its own programs)
//! and the [`PortmapService`](super::PortmapService).

use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::uaddr::{format_uaddr, parse_uaddr};

/// Mappings a [`PortRegistry::new`] holds at most.
pub const DEFAULT_REGISTRY_CAPACITY: usize = 1024;

/// Owner recorded for the mappings rnfs registers itself.
pub const RNFS_OWNER: &str = "rnfs";

/// A transport protocol with an IP netid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// TCP: netids `tcp` and `tcp6`, `IPPROTO_TCP`.
    Tcp,
    /// UDP: netids `udp` and `udp6`, `IPPROTO_UDP`.
    Udp,
}

/// `IPPROTO_TCP`, the `prot` of a version 2 mapping.
pub const IPPROTO_TCP: u32 = 6;
/// `IPPROTO_UDP`, the `prot` of a version 2 mapping.
pub const IPPROTO_UDP: u32 = 17;

impl Protocol {
    /// The IP protocol number used by port mapper version 2.
    pub fn ipproto(self) -> u32 {
        match self {
            Self::Tcp => IPPROTO_TCP,
            Self::Udp => IPPROTO_UDP,
        }
    }

    /// The protocol with IP protocol number `prot`, if it is TCP or UDP.
    pub fn from_ipproto(prot: u32) -> Option<Self> {
        match prot {
            IPPROTO_TCP => Some(Self::Tcp),
            IPPROTO_UDP => Some(Self::Udp),
            _ => None,
        }
    }

    /// The netid for this protocol over IPv4 (`ipv6 == false`) or IPv6.
    pub fn netid(self, ipv6: bool) -> &'static str {
        match (self, ipv6) {
            (Self::Tcp, false) => "tcp",
            (Self::Tcp, true) => "tcp6",
            (Self::Udp, false) => "udp",
            (Self::Udp, true) => "udp6",
        }
    }

    /// The protocol and address family (`true` for IPv6) of an IP netid.
    pub fn from_netid(netid: &str) -> Option<(Self, bool)> {
        [
            ("tcp", Self::Tcp, false),
            ("tcp6", Self::Tcp, true),
            ("udp", Self::Udp, false),
            ("udp6", Self::Udp, true),
        ]
        .into_iter()
        .find(|(name, ..)| netid.eq_ignore_ascii_case(name))
        .map(|(_, p, v6)| (p, v6))
    }
}

/// One registration: `rpcb` of RFC 1833 (the version 2 `mapping` is the special
/// case of netid `tcp` or `udp`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mapping {
    /// Program number.
    pub prog: u32,
    /// Program version.
    pub vers: u32,
    /// Network id, e.g. `tcp`, `tcp6`, `udp`; compared without regard to case.
    pub netid: String,
    /// Universal address (see [`uaddr`](super::uaddr)) for IP netids; opaque for
    /// others (e.g. a socket path for `local`).
    pub uaddr: String,
    /// Who registered it (informational; rpcbind writes `superuser` or a uid).
    pub owner: String,
}

impl Mapping {
    /// A mapping of `prog` version `vers` on `protocol` at `addr` (netid from the
    /// address family), owned by [`RNFS_OWNER`].
    pub fn new(prog: u32, vers: u32, protocol: Protocol, addr: SocketAddr) -> Self {
        Self {
            prog,
            vers,
            netid: protocol.netid(addr.is_ipv6()).to_owned(),
            uaddr: format_uaddr(addr),
            owner: RNFS_OWNER.to_owned(),
        }
    }

    /// A TCP mapping: `Mapping::new(prog, vers, Protocol::Tcp, addr)`.
    pub fn tcp(prog: u32, vers: u32, addr: SocketAddr) -> Self {
        Self::new(prog, vers, Protocol::Tcp, addr)
    }

    /// The protocol and address, for an IP netid whose address parses and has the
    /// netid's family.
    pub fn inet(&self) -> Option<(Protocol, SocketAddr)> {
        let (protocol, ipv6) = Protocol::from_netid(&self.netid)?;
        let addr = parse_uaddr(&self.uaddr).ok()?;
        (addr.is_ipv6() == ipv6).then_some((protocol, addr))
    }

    /// Whether this mapping is for `(prog, vers, netid)`.
    fn is(&self, prog: u32, vers: u32, netid: &str) -> bool {
        self.prog == prog && self.vers == vers && self.netid.eq_ignore_ascii_case(netid)
    }
}

/// TCP mappings of `prog` for every version in `versions` on every address in
/// `listen`, one per netid: a second address of the same family is skipped (a
/// `(prog, vers, netid)` has one address). Feed them to [`PortRegistry::set`] or to
/// [`register_with_rpcbind`](super::register_with_rpcbind).
pub fn tcp_mappings(
    prog: u32,
    versions: RangeInclusive<u32>,
    listen: &[SocketAddr],
) -> Vec<Mapping> {
    let mut out: Vec<Mapping> = Vec::new();
    for vers in versions {
        for &addr in listen {
            let m = Mapping::tcp(prog, vers, addr);
            if !out.iter().any(|o| o.is(prog, vers, &m.netid)) {
                out.push(m);
            }
        }
    }
    out
}

/// Why [`PortRegistry::set`] refused a mapping.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SetError {
    /// `(prog, vers, netid)` is already mapped to another address.
    #[error("program {prog} version {vers} on {netid} is already registered at {existing}")]
    Conflict {
        /// Program number.
        prog: u32,
        /// Program version.
        vers: u32,
        /// Netid.
        netid: String,
        /// The address already registered.
        existing: String,
    },
    /// The registry holds its maximum number of mappings.
    #[error("port registry full ({capacity} mappings)")]
    Full {
        /// The registry's capacity.
        capacity: usize,
    },
    /// An IP netid (`tcp`, `udp6`, ...) with an address that is not a universal
    /// address of that family.
    #[error("{uaddr:?} is not a {netid} universal address")]
    BadAddress {
        /// Netid.
        netid: String,
        /// The address given.
        uaddr: String,
    },
}

/// The port mapper's table: thread-safe and bounded. Lookups take a read lock and
/// scan linearly, which at a few dozen entries beats any index.
#[derive(Debug)]
pub struct PortRegistry {
    mappings: RwLock<Vec<Mapping>>,
    capacity: usize,
}

impl Default for PortRegistry {
    fn default() -> Self {
        Self::new()
    }
}

impl PortRegistry {
    /// An empty registry of [`DEFAULT_REGISTRY_CAPACITY`] mappings.
    pub fn new() -> Self {
        Self::with_capacity(DEFAULT_REGISTRY_CAPACITY)
    }

    /// An empty registry of at most `capacity` mappings.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            mappings: RwLock::new(Vec::new()),
            capacity,
        }
    }

    /// The most mappings it holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// How many mappings it holds.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether it holds no mapping.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// Adds a mapping. Registering the same address again for `(prog, vers, netid)`
    /// succeeds and changes nothing (as rpcbind); another address is a
    /// [`SetError::Conflict`].
    pub fn set(&self, mapping: Mapping) -> Result<(), SetError> {
        if Protocol::from_netid(&mapping.netid).is_some() && mapping.inet().is_none() {
            return Err(SetError::BadAddress {
                netid: mapping.netid,
                uaddr: mapping.uaddr,
            });
        }
        let mut mappings = self.write();
        if let Some(existing) = mappings
            .iter()
            .find(|m| m.is(mapping.prog, mapping.vers, &mapping.netid))
        {
            return if existing.uaddr == mapping.uaddr {
                Ok(())
            } else {
                Err(SetError::Conflict {
                    prog: mapping.prog,
                    vers: mapping.vers,
                    netid: mapping.netid,
                    existing: existing.uaddr.clone(),
                })
            };
        }
        if mappings.len() >= self.capacity {
            return Err(SetError::Full {
                capacity: self.capacity,
            });
        }
        mappings.push(mapping);
        Ok(())
    }

    /// [`set`](Self::set) for each mapping in turn; stops at the first error.
    pub fn set_all(&self, mappings: impl IntoIterator<Item = Mapping>) -> Result<(), SetError> {
        mappings.into_iter().try_for_each(|m| self.set(m))
    }

    /// Removes the mappings of `(prog, vers)` on `netid`, or on every netid if
    /// `netid` is `None`; returns how many were removed.
    pub fn unset(&self, prog: u32, vers: u32, netid: Option<&str>) -> usize {
        self.unset_owned(prog, vers, netid, None).unwrap_or(0)
    }

    /// [`unset`](Self::unset) on behalf of `owner` (`None`: the superuser, who may
    /// remove anything). Removes nothing and returns `None` if a matching mapping
    /// belongs to someone else, as rpcbind's `map_unset`.
    pub(crate) fn unset_owned(
        &self,
        prog: u32,
        vers: u32,
        netid: Option<&str>,
        owner: Option<&str>,
    ) -> Option<usize> {
        let matches = |m: &Mapping| {
            m.prog == prog
                && m.vers == vers
                && netid.is_none_or(|n| m.netid.eq_ignore_ascii_case(n))
        };
        let mut mappings = self.write();
        if let Some(owner) = owner {
            if mappings.iter().any(|m| matches(m) && m.owner != owner) {
                return None;
            }
        }
        let before = mappings.len();
        mappings.retain(|m| !matches(m));
        Some(before - mappings.len())
    }

    /// The mapping of `(prog, vers, netid)`, if registered.
    pub fn lookup(&self, prog: u32, vers: u32, netid: &str) -> Option<Mapping> {
        self.read()
            .iter()
            .find(|m| m.is(prog, vers, netid))
            .cloned()
    }

    /// The mapping of `(prog, vers, netid)` or, failing that, the first one
    /// registered for `prog` on `netid` with any version: rpcbind's `find_service`,
    /// used by GETPORT and GETADDR so that a client asking for an unregistered
    /// version reaches the server and learns the supported ones from PROG_MISMATCH.
    pub fn lookup_any_version(&self, prog: u32, vers: u32, netid: &str) -> Option<Mapping> {
        let mappings = self.read();
        let mut on_netid = mappings
            .iter()
            .filter(|m| m.prog == prog && m.netid.eq_ignore_ascii_case(netid));
        let first = on_netid.clone().next();
        on_netid.find(|m| m.vers == vers).or(first).cloned()
    }

    /// A copy of every mapping, in registration order.
    pub fn mappings(&self) -> Vec<Mapping> {
        self.read().clone()
    }

    /// Runs `f` over the mappings under the read lock (DUMP encodes in place).
    pub(crate) fn with_mappings<R>(&self, f: impl FnOnce(&[Mapping]) -> R) -> R {
        f(&self.read())
    }

    fn read(&self) -> RwLockReadGuard<'_, Vec<Mapping>> {
        // A panic while holding the lock leaves a consistent Vec: every change is a
        // single push or retain.
        self.mappings.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Vec<Mapping>> {
        self.mappings
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn set_is_idempotent_for_the_same_address_and_refuses_another() {
        let r = PortRegistry::new();
        r.set(Mapping::tcp(100_003, 3, addr("0.0.0.0:2049")))
            .unwrap();
        r.set(Mapping::tcp(100_003, 3, addr("0.0.0.0:2049")))
            .unwrap();
        assert_eq!(r.len(), 1);
        let err = r
            .set(Mapping::tcp(100_003, 3, addr("0.0.0.0:2050")))
            .unwrap_err();
        assert!(
            matches!(err, SetError::Conflict { ref existing, .. } if existing == "0.0.0.0.8.1")
        );
        // Another netid or version is another mapping.
        r.set(Mapping::tcp(100_003, 3, addr("[::]:2050"))).unwrap();
        r.set(Mapping::tcp(100_003, 4, addr("0.0.0.0:2050")))
            .unwrap();
        assert_eq!(r.len(), 3);
    }

    #[test]
    fn capacity_is_enforced() {
        let r = PortRegistry::with_capacity(2);
        r.set(Mapping::tcp(1, 1, addr("0.0.0.0:1"))).unwrap();
        r.set(Mapping::tcp(1, 2, addr("0.0.0.0:1"))).unwrap();
        assert_eq!(
            r.set(Mapping::tcp(1, 3, addr("0.0.0.0:1"))),
            Err(SetError::Full { capacity: 2 })
        );
        // Re-registering an existing mapping still succeeds when full.
        r.set(Mapping::tcp(1, 2, addr("0.0.0.0:1"))).unwrap();
    }

    #[test]
    fn ip_netids_need_a_matching_universal_address() {
        let r = PortRegistry::new();
        let mut m = Mapping::tcp(1, 1, addr("127.0.0.1:1"));
        m.uaddr = "::1.0.1".into();
        assert!(matches!(r.set(m.clone()), Err(SetError::BadAddress { .. })));
        m.netid = "tcp6".into();
        r.set(m).unwrap();
        // Other netids are opaque.
        r.set(Mapping {
            prog: 1,
            vers: 1,
            netid: "local".into(),
            uaddr: "/run/x.sock".into(),
            owner: "superuser".into(),
        })
        .unwrap();
    }

    #[test]
    fn unset_by_netid_or_all_and_owner_rules() {
        let r = PortRegistry::new();
        r.set_all(tcp_mappings(
            7,
            1..=2,
            &[addr("0.0.0.0:9"), addr("[::]:9"), addr("127.0.0.1:10")],
        ))
        .unwrap();
        assert_eq!(r.len(), 4, "one address per netid");
        assert_eq!(r.unset(7, 1, Some("TCP6")), 1);
        assert_eq!(r.unset_owned(7, 2, None, Some("someone")), None);
        assert_eq!(r.len(), 3);
        assert_eq!(r.unset_owned(7, 2, None, Some(RNFS_OWNER)), Some(2));
        assert_eq!(r.unset(7, 1, None), 1);
        assert!(r.is_empty());
    }

    #[test]
    fn lookup_any_version_prefers_the_exact_one() {
        let r = PortRegistry::new();
        r.set(Mapping::tcp(5, 1, addr("0.0.0.0:1"))).unwrap();
        r.set(Mapping::tcp(5, 3, addr("0.0.0.0:3"))).unwrap();
        assert_eq!(r.lookup_any_version(5, 3, "tcp").unwrap().vers, 3);
        assert_eq!(r.lookup_any_version(5, 9, "tcp").unwrap().vers, 1);
        assert!(r.lookup_any_version(5, 3, "udp").is_none());
        assert!(r.lookup(5, 9, "tcp").is_none());
    }
}
