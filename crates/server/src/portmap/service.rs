//! [`PortmapService`]: port mapper version 2 and rpcbind versions 3 and 4 over a
//! [`PortRegistry`].

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use rnfs_rpc::{AuthStat, CallContext, Service, ServiceError};
use rnfs_xdr::{Reader, Writer};

use super::proto::{pmapproc, rpcbproc, PmapMapping, Rpcb, PMAP_PROGRAM, PMAP_V2, RPCB_V4};
use super::registry::{Mapping, PortRegistry, Protocol};
use super::uaddr::format_uaddr;

/// Who may change the registry over the network (SET and UNSET).
///
/// rpcbind accepts them only from the host itself: its unix socket, and in some
/// builds loopback TCP from any port. rnfs serves TCP only, and any local user can
/// connect from 127.0.0.1, so the default asks for what the unix socket's peer
/// credentials would prove, as closely as TCP can: a loopback peer whose source port
/// is privileged, i.e. a root process on this host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistrationPolicy {
    /// A loopback peer (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104) with a source port
    /// below 1024. Such a caller owns its mappings as `superuser`.
    #[default]
    LocalPrivileged,
    /// Any loopback peer. Unprivileged callers own their mappings as `unknown` and
    /// cannot unset others' (rpcbind's owner rule).
    Local,
    /// Nobody: the registry changes only through [`PortRegistry`] calls in-process.
    Never,
}

/// Owner recorded for mappings set by a privileged local caller (as rpcbind).
const SUPERUSER: &str = "superuser";
/// Owner recorded for mappings set by an unprivileged local caller.
const UNKNOWN_OWNER: &str = "unknown";

/// Ports below this are privileged (`IPPORT_RESERVED`).
const IPPORT_RESERVED: u16 = 1024;

/// `r_nc_semantics` of `rpcb_entry`: connectionless.
const NC_TPI_CLTS: u32 = 1;
/// `r_nc_semantics` of `rpcb_entry`: connection-oriented with orderly release.
const NC_TPI_COTS_ORD: u32 = 3;

/// The port mapper: program 100000, versions 2 to 4, answering from a shared
/// [`PortRegistry`].
///
/// | version | served | PROC_UNAVAIL |
/// |---|---|---|
/// | 2 | NULL, SET, UNSET, GETPORT, DUMP | CALLIT |
/// | 3 | NULL, SET, UNSET, GETADDR, DUMP, GETTIME | CALLIT, UADDR2TADDR, TADDR2UADDR |
/// | 4 | version 3 plus GETVERSADDR, GETADDRLIST | BCAST, INDIRECT, GETSTAT, and as 3 |
///
/// SET and UNSET follow the [`RegistrationPolicy`]; a refused caller gets
/// AUTH_ERROR / AUTH_TOOWEAK, as from rpcbind. Indirect calls are not forwarded at
/// all (rpcbind forwards them over UDP only, and they are a classic amplification
/// and access-control bypass). Trailing bytes after the arguments are ignored, as
/// libtirpc's decoders do.
///
/// Lookups use the netid in the request (`tcp` for a version 2 `IPPROTO_TCP`); an
/// empty netid means the caller's own transport (`tcp`, or `tcp6` for an IPv6
/// peer). A registered wildcard address (`0.0.0.0`, `::`) is answered with this
/// host's address towards the caller, as rpcbind's `mergeaddr` does.
#[derive(Debug, Clone)]
pub struct PortmapService {
    registry: Arc<PortRegistry>,
    policy: RegistrationPolicy,
}

impl PortmapService {
    /// A port mapper over `registry` with the default [`RegistrationPolicy`].
    pub fn new(registry: Arc<PortRegistry>) -> Self {
        Self {
            registry,
            policy: RegistrationPolicy::default(),
        }
    }

    /// The same service with another registration policy.
    pub fn with_policy(mut self, policy: RegistrationPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The registry it serves.
    pub fn registry(&self) -> &Arc<PortRegistry> {
        &self.registry
    }

    /// The owner a registering caller gets, or AUTH_TOOWEAK.
    fn registrant(&self, ctx: &CallContext<'_>) -> Result<&'static str, ServiceError> {
        let refuse = || {
            tracing::debug!(peer = %ctx.peer_name(), vers = ctx.vers, proc_ = ctx.proc_, "port mapper: SET/UNSET refused");
            Err(ServiceError::AuthError(AuthStat::TooWeak))
        };
        let Some(peer) = ctx.peer.filter(|p| is_loopback(p.ip())) else {
            return refuse();
        };
        let privileged = peer.port() < IPPORT_RESERVED;
        match self.policy {
            RegistrationPolicy::LocalPrivileged | RegistrationPolicy::Local if privileged => {
                Ok(SUPERUSER)
            }
            RegistrationPolicy::Local => Ok(UNKNOWN_OWNER),
            RegistrationPolicy::LocalPrivileged | RegistrationPolicy::Never => refuse(),
        }
    }

    fn pmap(
        &self,
        ctx: &CallContext<'_>,
        args: &mut Reader<'_>,
        w: &mut Writer<'_>,
    ) -> Result<(), ServiceError> {
        match ctx.proc_ {
            pmapproc::NULL => {}
            pmapproc::SET => {
                let m = PmapMapping::decode(args)?;
                let owner = self.registrant(ctx)?;
                w.write_bool(self.pmap_set(m, owner));
            }
            pmapproc::UNSET => {
                let m = PmapMapping::decode(args)?;
                let owner = self.registrant(ctx)?;
                // Like rpcbind: prot and port are ignored, TCP and UDP both go.
                let unset = |netid| {
                    self.registry
                        .unset_owned(m.prog, m.vers, Some(netid), owner_filter(owner))
                        .is_some()
                };
                let tcp = unset(Protocol::Tcp.netid(false));
                let udp = unset(Protocol::Udp.netid(false));
                w.write_bool(tcp || udp);
            }
            pmapproc::GETPORT => {
                let m = PmapMapping::decode(args)?;
                let port = Protocol::from_ipproto(m.prot)
                    .and_then(|p| {
                        self.registry
                            .lookup_any_version(m.prog, m.vers, p.netid(false))
                    })
                    .and_then(|found| found.inet())
                    .map_or(0, |(_, addr)| addr.port());
                w.write_u32(port.into());
            }
            pmapproc::DUMP => self.registry.with_mappings(|mappings| {
                for mapping in mappings.iter().filter_map(PmapMapping::from_mapping) {
                    w.write_bool(true);
                    mapping.encode(w);
                }
                w.write_bool(false);
            }),
            _ => return Err(ServiceError::ProcUnavail),
        }
        Ok(())
    }

    fn pmap_set(&self, m: PmapMapping, owner: &str) -> bool {
        let (Some(protocol), Ok(port)) = (Protocol::from_ipproto(m.prot), u16::try_from(m.port))
        else {
            return false;
        };
        let mut mapping = Mapping::new(
            m.prog,
            m.vers,
            protocol,
            SocketAddr::from(([0, 0, 0, 0], port)),
        );
        owner.clone_into(&mut mapping.owner);
        self.registry.set(mapping).is_ok()
    }

    fn rpcb(
        &self,
        ctx: &CallContext<'_>,
        args: &mut Reader<'_>,
        w: &mut Writer<'_>,
    ) -> Result<(), ServiceError> {
        let v4 = ctx.vers == RPCB_V4;
        match ctx.proc_ {
            rpcbproc::NULL => {}
            rpcbproc::SET => {
                let r = Rpcb::decode(args)?;
                let owner = self.registrant(ctx)?;
                w.write_bool(self.rpcb_set(&r, owner));
            }
            rpcbproc::UNSET => {
                let r = Rpcb::decode(args)?;
                let owner = self.registrant(ctx)?;
                let done = match std::str::from_utf8(r.netid) {
                    Ok(netid) => self
                        .registry
                        .unset_owned(
                            r.prog,
                            r.vers,
                            Some(netid).filter(|n| !n.is_empty()),
                            owner_filter(owner),
                        )
                        .is_some(),
                    // No registered netid is invalid UTF-8: nothing to remove.
                    Err(_) => true,
                };
                w.write_bool(done);
            }
            rpcbproc::GETADDR => {
                let r = Rpcb::decode(args)?;
                w.write_string(self.getaddr(&r, ctx.peer, false).as_bytes());
            }
            rpcbproc::GETVERSADDR if v4 => {
                let r = Rpcb::decode(args)?;
                w.write_string(self.getaddr(&r, ctx.peer, true).as_bytes());
            }
            rpcbproc::DUMP => self.registry.with_mappings(|mappings| {
                for m in mappings {
                    w.write_bool(true);
                    Rpcb::from_mapping(m).encode(w);
                }
                w.write_bool(false);
            }),
            rpcbproc::GETTIME => {
                let secs = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                // `unsigned int` on the wire: wraps in 2106, as rpcbind's.
                w.write_u32(secs as u32);
            }
            rpcbproc::GETADDRLIST if v4 => {
                let r = Rpcb::decode(args)?;
                self.getaddrlist(&r, ctx.peer, w);
            }
            _ => return Err(ServiceError::ProcUnavail),
        }
        Ok(())
    }

    fn rpcb_set(&self, r: &Rpcb<'_>, owner: &str) -> bool {
        let (Ok(netid), Ok(uaddr)) = (std::str::from_utf8(r.netid), std::str::from_utf8(r.uaddr))
        else {
            return false;
        };
        if netid.is_empty() || uaddr.is_empty() {
            return false;
        }
        self.registry
            .set(Mapping {
                prog: r.prog,
                vers: r.vers,
                netid: netid.to_owned(),
                uaddr: uaddr.to_owned(),
                // The caller's r_owner is ignored, as by rpcbind.
                owner: owner.to_owned(),
            })
            .is_ok()
    }

    /// GETADDR (`exact == false`) and GETVERSADDR: the merged universal address, or
    /// an empty string.
    fn getaddr(&self, r: &Rpcb<'_>, peer: Option<SocketAddr>, exact: bool) -> String {
        let netid = match std::str::from_utf8(r.netid) {
            Ok("") => transport_netid(peer),
            Ok(netid) => netid,
            Err(_) => return String::new(),
        };
        let found = if exact {
            self.registry.lookup(r.prog, r.vers, netid)
        } else {
            self.registry.lookup_any_version(r.prog, r.vers, netid)
        };
        found.map_or_else(String::new, |m| merged_uaddr(&m, peer))
    }

    fn getaddrlist(&self, r: &Rpcb<'_>, peer: Option<SocketAddr>, w: &mut Writer<'_>) {
        let found: Vec<Mapping> = self.registry.with_mappings(|mappings| {
            mappings
                .iter()
                .filter(|m| m.prog == r.prog && m.vers == r.vers && m.inet().is_some())
                .cloned()
                .collect()
        });
        for m in &found {
            let Some((protocol, addr)) = m.inet() else {
                continue;
            };
            w.write_bool(true);
            w.write_string(merged_uaddr(m, peer).as_bytes());
            w.write_string(m.netid.as_bytes());
            w.write_u32(match protocol {
                Protocol::Tcp => NC_TPI_COTS_ORD,
                Protocol::Udp => NC_TPI_CLTS,
            });
            w.write_string(if addr.is_ipv6() { b"inet6" } else { b"inet" });
            w.write_string(protocol.netid(false).as_bytes());
        }
        w.write_bool(false);
    }
}

impl Service for PortmapService {
    fn program(&self) -> u32 {
        PMAP_PROGRAM
    }

    fn versions(&self) -> (u32, u32) {
        (PMAP_V2, RPCB_V4)
    }

    fn name(&self) -> &'static str {
        "portmap"
    }

    fn call(
        &self,
        ctx: &CallContext<'_>,
        args: &mut Reader<'_>,
        reply: &mut Writer<'_>,
    ) -> Result<(), ServiceError> {
        if ctx.vers == PMAP_V2 {
            self.pmap(ctx, args, reply)
        } else {
            self.rpcb(ctx, args, reply)
        }
    }
}

/// `unset_owned`'s owner: the superuser may remove anything.
fn owner_filter(owner: &str) -> Option<&str> {
    (owner != SUPERUSER).then_some(owner)
}

/// 127.0.0.0/8, ::1, or an IPv4-mapped 127.0.0.0/8.
fn is_loopback(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

/// The netid of the transport the call came in on: rnfs serves TCP only.
fn transport_netid(peer: Option<SocketAddr>) -> &'static str {
    let ipv6 = peer.is_some_and(|p| p.ip().to_canonical().is_ipv6());
    Protocol::Tcp.netid(ipv6)
}

/// `m`'s universal address, with a wildcard host replaced by this host's address
/// on the route towards `peer` (same family only); unchanged when that is unknown.
fn merged_uaddr(m: &Mapping, peer: Option<SocketAddr>) -> String {
    let Some((_, addr)) = m.inet().filter(|(_, a)| a.ip().is_unspecified()) else {
        return m.uaddr.clone();
    };
    peer.map(|p| SocketAddr::new(p.ip().to_canonical(), p.port()))
        .filter(|p| p.is_ipv6() == addr.is_ipv6())
        .and_then(local_ip_towards)
        .map_or_else(
            || m.uaddr.clone(),
            |ip| format_uaddr(SocketAddr::new(ip, addr.port())),
        )
}

/// The source address the kernel would use to reach `peer`: a connected UDP socket
/// sends nothing but is routed, so its local address is the answer.
fn local_ip_towards(peer: SocketAddr) -> Option<IpAddr> {
    let any = SocketAddr::new(
        match peer {
            SocketAddr::V4(_) => IpAddr::from([0, 0, 0, 0]),
            SocketAddr::V6(_) => IpAddr::from([0u16; 8]),
        },
        0,
    );
    let socket = UdpSocket::bind(any).ok()?;
    socket.connect(peer).ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_unspecified()).then_some(ip)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use rnfs_rpc::Auth;

    use super::*;

    fn ctx(peer: &str) -> CallContext<'static> {
        CallContext {
            xid: 1,
            prog: PMAP_PROGRAM,
            vers: 2,
            proc_: pmapproc::SET,
            auth: &Auth::None,
            peer: Some(peer.parse().unwrap()),
        }
    }

    #[test]
    fn registration_policy() {
        let svc = PortmapService::new(Arc::new(PortRegistry::new()));
        let too_weak = Err(ServiceError::AuthError(AuthStat::TooWeak));
        assert_eq!(svc.registrant(&ctx("127.0.0.1:1023")), Ok(SUPERUSER));
        assert_eq!(svc.registrant(&ctx("127.3.2.1:600")), Ok(SUPERUSER));
        assert_eq!(svc.registrant(&ctx("[::1]:700")), Ok(SUPERUSER));
        assert_eq!(
            svc.registrant(&ctx("[::ffff:127.0.0.1]:700")),
            Ok(SUPERUSER)
        );
        assert_eq!(svc.registrant(&ctx("127.0.0.1:1024")), too_weak);
        assert_eq!(svc.registrant(&ctx("10.0.0.1:700")), too_weak);
        assert_eq!(svc.registrant(&ctx("[::ffff:10.0.0.1]:700")), too_weak);
        let mut no_peer = ctx("127.0.0.1:700");
        no_peer.peer = None;
        assert_eq!(svc.registrant(&no_peer), too_weak);

        let local = svc.clone().with_policy(RegistrationPolicy::Local);
        assert_eq!(local.registrant(&ctx("127.0.0.1:40000")), Ok(UNKNOWN_OWNER));
        assert_eq!(local.registrant(&ctx("127.0.0.1:111")), Ok(SUPERUSER));
        assert_eq!(local.registrant(&ctx("192.168.1.1:111")), too_weak);
        let never = svc.with_policy(RegistrationPolicy::Never);
        assert_eq!(never.registrant(&ctx("127.0.0.1:111")), too_weak);
    }

    #[test]
    fn wildcard_is_merged_with_the_route_to_the_peer() {
        let m = Mapping::tcp(1, 1, "0.0.0.0:2049".parse().unwrap());
        assert_eq!(
            merged_uaddr(&m, Some("127.0.0.1:999".parse().unwrap())),
            "127.0.0.1.8.1"
        );
        assert_eq!(
            merged_uaddr(&m, Some("[::ffff:127.0.0.1]:999".parse().unwrap())),
            "127.0.0.1.8.1"
        );
        // Other family or unknown peer: unchanged.
        assert_eq!(
            merged_uaddr(&m, Some("[::1]:999".parse().unwrap())),
            "0.0.0.0.8.1"
        );
        assert_eq!(merged_uaddr(&m, None), "0.0.0.0.8.1");
        let specific = Mapping::tcp(1, 1, "192.0.2.1:2049".parse().unwrap());
        assert_eq!(
            merged_uaddr(&specific, Some("127.0.0.1:9".parse().unwrap())),
            "192.0.2.1.8.1"
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

        /// Mutated `mapping` and `rpcb` arguments, to every procedure of every
        /// version from a local privileged peer (so SET and UNSET reach the
        /// registry): the service answers or refuses, never panics, and DUMP
        /// still lists what is registered.
        #[test]
        fn mutated_arguments_are_answered_or_refused(
            vers in 2u32..=4,
            proc_ in 0u32..=13,
            pick in 0usize..4,
            edits in proptest::collection::vec(
                proptest::prelude::any::<(u8, u32, u32)>(),
                0..6,
            ),
        ) {
            use rnfs_xdr::fuzzing::{mutate, Edit};
            let encoded = |f: &dyn Fn(&mut Writer<'_>)| {
                let mut out = Vec::new();
                f(&mut Writer::new(&mut out));
                out
            };
            let rpcb = |netid: &'static [u8], uaddr: &'static [u8]| Rpcb {
                prog: 100_003,
                vers: 3,
                netid,
                uaddr,
                owner: b"superuser",
            };
            let inputs = [
                encoded(&|w| PmapMapping { prog: 100_003, vers: 3, prot: 6, port: 2049 }.encode(w)),
                encoded(&|w| rpcb(b"tcp", b"127.0.0.1.8.1").encode(w)),
                encoded(&|w| rpcb(b"tcp6", b"::1.8.1").encode(w)),
                encoded(&|w| rpcb(b"", b"").encode(w)),
            ];
            let edits: Vec<Edit> = edits.into_iter().map(Edit::from).collect();
            let args = mutate(&inputs[pick], &inputs[(pick + 1) % 4], &edits);
            let svc = PortmapService::new(Arc::new(PortRegistry::new()));
            let call = |vers, proc_, args: &[u8]| {
                let ctx = CallContext { vers, proc_, ..ctx("127.0.0.1:700") };
                let mut out = Vec::new();
                let result = svc.call(&ctx, &mut Reader::new(args), &mut Writer::new(&mut out));
                (result, out)
            };
            let (result, out) = call(vers, proc_, &args);
            if result.is_ok() {
                proptest::prop_assert_eq!(out.len() % 4, 0);
            }
            let (dumped, list) = call(4, rpcbproc::DUMP, &[]);
            proptest::prop_assert!(dumped.is_ok());
            // The list decodes: entries, then FALSE.
            let mut r = Reader::new(&list);
            while r.read_bool().unwrap() {
                Rpcb::decode(&mut r).unwrap();
            }
            proptest::prop_assert_eq!(r.remaining(), 0);
        }
    }
}
