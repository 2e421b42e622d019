//! Server configuration: listen addresses, scheduler settings and resource limits.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use crate::metrics::Metrics;

/// The NFS port. Binding it needs root (or `CAP_NET_BIND_SERVICE`).
pub const NFS_PORT: u16 = 2049;

/// Resource limits. Every one of them bounds what a single hostile or broken client
/// can make the server hold.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Largest RPC record accepted, in bytes (after reassembling record-marking
    /// fragments). A larger record closes the connection. Default: 1 MiB + 64 KiB,
    /// so an NFSv3 WRITE of 1 MiB plus its headers fits.
    pub max_record_size: usize,
    /// Most connections open at once. Beyond it a new connection is accepted and
    /// closed at once, with a rate-limited warning. Default: 65,536.
    pub max_connections: usize,
    /// Most calls of one connection that are read but not yet answered, where a
    /// reply still sitting in the connection's output buffer counts as unanswered.
    /// At the limit the server stops reading the connection until a reply goes out
    /// (back-pressure), so a client that never reads its replies holds no thread
    /// and bounded memory. Default: 64.
    pub max_in_flight_per_conn: u32,
    /// Most bytes of replies one connection may have waiting unsent (the socket
    /// would not take them) before the server stops reading it; reading resumes
    /// when a reply goes out with the output back under this. The in-flight limit
    /// alone would let 64 READs of 1 MiB buffer 64 MiB for a client that does not
    /// read. A reply being produced is always queued, so a connection's output
    /// buffer stays under this plus one reply per service thread. Default: 4 MiB.
    pub max_output_per_conn: usize,
    /// Reply coalescing: how long replies may keep gathering on a connection to
    /// leave in one write. A finished reply is held only while the connection's
    /// next call is already received and quick
    /// ([`Service::is_quick`](rnfs_rpc::Service::is_quick)), or, for a WRITE
    /// reply, while the next call is a WRITE
    /// ([`Service::is_quick_among_peers`](rnfs_rpc::Service::is_quick_among_peers));
    /// the thread that answers that call writes it along, unless it may hold in
    /// turn. Holding stops once the oldest held reply is this old, so a reply
    /// waits at most this long plus one quick call's turn in the queue; only a
    /// WRITE reply ever waits for another WRITE's buffered write, and none
    /// waits for storage. Zero sends every reply at once. Default: 1 ms.
    pub max_reply_hold: Duration,
    /// A connection on which no call arrives for this long, with nothing in
    /// flight and no reply unsent, is closed, as knfsd closes idle connections
    /// after 6 minutes: a client that vanished without a FIN (or one that sent
    /// half a record and stopped) gives its slot back, and a live client
    /// reconnects on its next call. Checked once per timeout by each poller,
    /// so a connection goes after between one and two timeouts of quiet.
    /// `None`: never. Default: 6 minutes.
    pub conn_idle_timeout: Option<Duration>,
}

impl Limits {
    /// 1 MiB of payload plus 64 KiB for RPC and NFS headers.
    pub const DEFAULT_MAX_RECORD_SIZE: usize = (1 << 20) + (64 << 10);
    /// Default for [`Limits::max_connections`].
    pub const DEFAULT_MAX_CONNECTIONS: usize = 65_536;
    /// Default for [`Limits::max_in_flight_per_conn`].
    pub const DEFAULT_MAX_IN_FLIGHT_PER_CONN: u32 = 64;
    /// Default for [`Limits::max_output_per_conn`].
    pub const DEFAULT_MAX_OUTPUT_PER_CONN: usize = 4 << 20;
    /// Default for [`Limits::max_reply_hold`].
    pub const DEFAULT_MAX_REPLY_HOLD: Duration = Duration::from_millis(1);
    /// Default for [`Limits::conn_idle_timeout`] (knfsd's `svc_conn_age_period`).
    pub const DEFAULT_CONN_IDLE_TIMEOUT: Duration = Duration::from_secs(360);
    /// The smallest `max_record_size` accepted: room for an RPC call header with
    /// AUTH_SYS credentials and a few arguments.
    pub const MIN_RECORD_SIZE: usize = 1024;

    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.max_record_size < Self::MIN_RECORD_SIZE {
            return Err(format!(
                "max record size {} is below the minimum of {} bytes",
                self.max_record_size,
                Self::MIN_RECORD_SIZE
            ));
        }
        if self.max_connections == 0 {
            return Err("max connections must be at least 1".into());
        }
        if self.max_in_flight_per_conn == 0 {
            return Err("max in-flight calls per connection must be at least 1".into());
        }
        if self.conn_idle_timeout.is_some_and(|t| t.is_zero()) {
            return Err("the connection idle timeout must be positive (None: never)".into());
        }
        Ok(())
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_record_size: Self::DEFAULT_MAX_RECORD_SIZE,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            max_in_flight_per_conn: Self::DEFAULT_MAX_IN_FLIGHT_PER_CONN,
            max_output_per_conn: Self::DEFAULT_MAX_OUTPUT_PER_CONN,
            max_reply_hold: Self::DEFAULT_MAX_REPLY_HOLD,
            conn_idle_timeout: Some(Self::DEFAULT_CONN_IDLE_TIMEOUT),
        }
    }
}

/// Everything [`Server::start`](crate::Server::start) needs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerConfig {
    /// TCP addresses to listen on; at least one. Port 0 picks a free port (see
    /// [`Server::local_addrs`](crate::Server::local_addrs)). An IPv6 address is bound
    /// with `IPV6_V6ONLY`, so `0.0.0.0:P` and `[::]:P` can both be given.
    pub listen: Vec<SocketAddr>,
    /// Service-thread scheduler settings (policy, pools, thread counts).
    pub sched: rnfs_sched::Config,
    /// Resource limits.
    pub limits: Limits,
    /// `SO_SNDBUF` for accepted connections, in bytes (the kernel doubles it);
    /// `None` leaves the kernel's autotuning on. A small buffer makes a client that
    /// does not read its replies hit the in-flight limit sooner.
    pub send_buffer_size: Option<usize>,
    /// Duplicate request cache for the calls it selects; `None`: no cache.
    pub drc: Option<DrcConfig>,
    /// Call statistics: every call is counted here (see [`crate::metrics`]); give
    /// the same value to [`dispatcher_with_metrics`](crate::nfs::dispatcher_with_metrics).
    /// `None`: nothing is counted per call, and
    /// [`Server::stats_snapshot`](crate::Server::stats_snapshot) has transport and
    /// scheduler figures only.
    pub metrics: Option<Arc<Metrics>>,
}

/// Which calls go through the duplicate request cache, and its size.
#[derive(Debug, Clone, Copy)]
pub struct DrcConfig {
    /// Entry and byte limits.
    pub limits: crate::drc::DrcLimits,
    /// Whether a call (program, version, procedure) is cached: the non-idempotent
    /// ones.
    pub cached: fn(prog: u32, vers: u32, proc_: u32) -> bool,
}

impl ServerConfig {
    /// A configuration listening on `listen`, with default scheduler settings and
    /// limits.
    pub fn new(listen: Vec<SocketAddr>) -> Self {
        ServerConfig {
            listen,
            sched: rnfs_sched::Config::default(),
            limits: Limits::default(),
            send_buffer_size: None,
            drc: None,
            metrics: None,
        }
    }
}

impl Default for ServerConfig {
    /// `0.0.0.0:2049`, default scheduler settings and limits.
    fn default() -> Self {
        ServerConfig::new(vec![SocketAddr::from((Ipv4Addr::UNSPECIFIED, NFS_PORT))])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_fit_a_1mib_write() {
        let l = Limits::default();
        assert!(l.validate().is_ok());
        assert!(l.max_record_size >= (1 << 20) + 1024);
    }

    #[test]
    fn zero_limits_are_rejected() {
        for bad in [
            Limits {
                max_in_flight_per_conn: 0,
                ..Limits::default()
            },
            Limits {
                max_connections: 0,
                ..Limits::default()
            },
            Limits {
                max_record_size: 10,
                ..Limits::default()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
