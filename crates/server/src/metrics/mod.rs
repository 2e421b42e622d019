//! Server statistics: what is counted on the call path and the [`StatsSnapshot`]
//! built from it for `rnfs stats`, Prometheus and the dashboard.
//!
//! ```no_run
//! use std::sync::Arc;
//! use rnfs_server::metrics::{Metrics, MetricsConfig};
//! # fn demo(exports: Arc<rnfs_server::nfs::Exports>, key: rnfs_server::nfs::HandleKey)
//! #     -> Result<(), Box<dyn std::error::Error>> {
//! let metrics = Arc::new(Metrics::new(MetricsConfig::default()));
//! let dispatcher =
//!     rnfs_server::nfs::dispatcher_with_metrics(exports, key, Some(Arc::clone(&metrics)))?;
//! let mut config = rnfs_server::ServerConfig::default();
//! config.metrics = Some(metrics);
//! let server = rnfs_server::Server::start_with_dispatcher(config, Arc::new(dispatcher))?;
//! println!("{:?}", server.stats_snapshot().procedures);
//! # Ok(()) }
//! ```
//!
//! # What one call costs
//!
//! The handler takes the time when a record has been read and again when its
//! reply has been sent, then:
//! - reads the error, if any, from the reply bytes (`status.rs`): the RPC accept or
//!   reject status, or the first result word of an NFS or MOUNT reply, so no
//!   procedure reports its own status;
//! - takes what the NFS service noted in a thread-local cell (`note.rs`): the
//!   export and the READ/WRITE byte counts;
//! - counts the call in its thread's shard (`shard.rs`): the slot of its
//!   (program, version, procedure) in a fixed table (`procs.rs`), a log-linear
//!   latency bucket (`histogram.rs`), the error, the export's cell; plain loads
//!   and stores on memory only this thread writes;
//! - bumps its connection's counter block (`clients.rs`): one relaxed
//!   read-modify-write on a line only threads serving that connection share.
//!
//! Nothing on the call path takes a lock, looks up a map or writes a line shared
//! by all threads. Locks are taken when a thread starts or exits, when a
//! connection opens or closes, on MNT/UMNT, and by snapshots.

mod clients;
mod histogram;
pub(crate) mod note;
mod procs;
mod shard;
mod snapshot;
mod status;

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use snapshot::*;

pub(crate) use clients::{ClientConn, ConnCounters};
pub(crate) use shard::{export_index, ShardHandle};

use crate::nfs::exports::{Access, BackendKind};
use crate::nfs::{Exports, MountList};
use clients::ClientTable;
use shard::Registry;

/// What [`Metrics`] keeps and logs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MetricsConfig {
    /// Most per-client rows; calls of further clients are summed in the row
    /// `other`. Default: [`MetricsConfig::DEFAULT_MAX_CLIENTS`].
    pub max_clients: usize,
    /// Log a warning for every call whose service time (record read to reply
    /// sent) exceeds this. Default: `None` (off).
    pub slow_call: Option<Duration>,
}

impl MetricsConfig {
    /// Default for [`MetricsConfig::max_clients`].
    pub const DEFAULT_MAX_CLIENTS: usize = 256;
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            max_clients: Self::DEFAULT_MAX_CLIENTS,
            slow_call: None,
        }
    }
}

/// The server's call statistics. Create one, give it to
/// [`ServerConfig::metrics`](crate::ServerConfig::metrics) and to
/// [`dispatcher_with_metrics`](crate::nfs::dispatcher_with_metrics), and read it
/// with [`Server::stats_snapshot`](crate::Server::stats_snapshot) (or
/// [`Metrics::snapshot`] for the call figures alone).
pub struct Metrics {
    config: MetricsConfig,
    registry: Arc<Registry>,
    clients: Arc<ClientTable>,
    mounts: Arc<MountList>,
    /// The export table, for names in snapshots (set by the dispatcher).
    exports: Mutex<Option<Arc<Exports>>>,
}

/// Program, version and procedure of a call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallIds {
    pub(crate) prog: u32,
    pub(crate) vers: u32,
    pub(crate) proc_: u32,
}

impl Metrics {
    /// Empty statistics.
    pub fn new(config: MetricsConfig) -> Self {
        let mounts = Arc::new(MountList::default());
        Metrics {
            clients: Arc::new(ClientTable::new(config.max_clients, Arc::clone(&mounts))),
            config,
            registry: Arc::default(),
            mounts,
            exports: Mutex::new(None),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &MetricsConfig {
        &self.config
    }

    /// The call figures: procedures, bytes, clients and exports. Transport,
    /// scheduler and cache figures are left empty; [`Server::stats_snapshot`]
    /// fills them.
    ///
    /// [`Server::stats_snapshot`]: crate::Server::stats_snapshot
    pub fn snapshot(&self) -> StatsSnapshot {
        let totals = self.registry.totals();
        let procedures = totals
            .slots
            .iter()
            .enumerate()
            .filter_map(|(slot, t)| {
                let calls = t.calls();
                (calls > 0).then(|| procedure_snapshot(slot, t, calls))
            })
            .collect();
        let table = self
            .exports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let exports = table
            .map(|e| {
                e.load()
                    .iter()
                    .map(|e| {
                        let t = totals.exports.get(&e.id).copied().unwrap_or_default();
                        let listing = e.fs.listing_stats();
                        ExportSnapshot {
                            id: e.id,
                            mount_path: e.mount_path.clone(),
                            path: match e.config.backend {
                                BackendKind::Memory => "memory".to_owned(),
                                BackendKind::Local => e.config.path.display().to_string(),
                            },
                            access: match e.options.access {
                                Access::Ro => "ro",
                                Access::Rw => "rw",
                            }
                            .to_owned(),
                            calls: t.calls,
                            bytes_read: t.bytes_read,
                            bytes_written: t.bytes_written,
                            listing_attrs_cached: listing.attrs_cached,
                            listing_attrs_read: listing.attrs_read,
                            listing_chunk_calls: listing.chunk_calls,
                            listing_chunks_read: listing.chunks_read,
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        StatsSnapshot {
            procedures,
            bytes_read: totals.bytes_read,
            bytes_written: totals.bytes_written,
            replies_held: totals.replies_held,
            clients: self.clients.snapshot(),
            exports,
            ..StatsSnapshot::default()
        }
    }

    /// A shard for a new service thread.
    pub(crate) fn register_thread(&self) -> ShardHandle {
        self.registry.register()
    }

    /// Registers a new connection of `ip` in the client table.
    pub(crate) fn open_connection(&self, ip: IpAddr, id: u64) -> ClientConn {
        self.clients.open(ip, id)
    }

    /// The MOUNT service's mount list.
    pub(crate) fn mount_list(&self) -> Arc<MountList> {
        Arc::clone(&self.mounts)
    }

    /// The export table listed in snapshots.
    pub(crate) fn set_exports(&self, exports: Arc<Exports>) {
        *self
            .exports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(exports);
    }

    /// Counts one answered call: `note` is what the service noted, `reply` the
    /// record-marked reply sent, `elapsed` the time from the record read to the
    /// reply sent.
    #[inline]
    #[allow(
        clippy::too_many_arguments,
        reason = "one call's facts, from the handler"
    )]
    pub(crate) fn record(
        &self,
        shard: &ShardHandle,
        conn: Option<&ConnCounters>,
        ids: CallIds,
        note: &note::CallNote,
        reply: &[u8],
        elapsed: Duration,
        peer: SocketAddr,
    ) {
        let slot = procs::slot(ids.prog, ids.vers, ids.proc_);
        let error = status::classify(reply, procs::STATUS[slot]);
        let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        shard.record(slot, error, ns, note);
        if let Some(conn) = conn {
            conn.record(note);
        }
        if let Some(limit) = self.config.slow_call {
            if elapsed > limit {
                let info = procs::info(slot);
                tracing::warn!(
                    program = info.program,
                    procedure = info.procedure,
                    %peer,
                    duration_ms = elapsed.as_secs_f64() * 1e3,
                    "slow call"
                );
            }
        }
    }
}

fn procedure_snapshot(slot: usize, t: &shard::SlotTotals, calls: u64) -> ProcedureSnapshot {
    let info = procs::info(slot);
    let buckets = &t.counts[..histogram::BUCKETS];
    let q = |q| histogram::quantile(buckets, calls, q, t.max_ns) as f64 / 1e3;
    ProcedureSnapshot {
        program: info.program.to_owned(),
        version: info.version,
        procedure: info.procedure.to_owned(),
        calls,
        errors: t.counts[histogram::BUCKETS..]
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(code, &n)| (status::name(info.status, code).to_owned(), n))
            .collect(),
        latency: LatencySnapshot {
            count: calls,
            // Whole nanoseconds: short decimals, which JSON readers parse back exactly.
            mean_us: (t.sum_ns as f64 / calls as f64).round() / 1e3,
            p50_us: q(0.5),
            p90_us: q(0.9),
            p99_us: q(0.99),
            p999_us: q(0.999),
            max_us: t.max_ns as f64 / 1e3,
        },
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record-marked accepted reply whose first result word is `status`.
    fn reply(status: u32) -> Vec<u8> {
        [0x8000_0000u32, 7, 1, 0, 0, 0, 0, status, 0, 0]
            .iter()
            .flat_map(|w| w.to_be_bytes())
            .collect()
    }

    #[test]
    fn record_counts_into_the_snapshot() {
        let m = Metrics::new(MetricsConfig::default());
        let shard = m.register_thread();
        let conn = m.open_connection(IpAddr::from([10, 0, 0, 1]), 1);
        let peer = SocketAddr::from(([10, 0, 0, 1], 700));
        let getattr = CallIds {
            prog: crate::services::NFS_PROGRAM,
            vers: 3,
            proc_: 1,
        };
        let note = note::CallNote {
            export: Some((1, export_index(1))),
            bytes_read: 0,
            bytes_written: 0,
            reply_held: false,
        };
        let ok = reply(0);
        let noent = reply(2);
        for _ in 0..3 {
            m.record(
                &shard,
                Some(conn.counters()),
                getattr,
                &note,
                &ok,
                Duration::from_micros(5),
                peer,
            );
        }
        m.record(
            &shard,
            Some(conn.counters()),
            getattr,
            &note,
            &noent,
            Duration::from_micros(50),
            peer,
        );
        let s = m.snapshot();
        assert_eq!(s.procedures.len(), 1);
        let p = &s.procedures[0];
        assert_eq!(
            (p.program.as_str(), p.procedure.as_str(), p.calls),
            ("nfs", "GETATTR", 4)
        );
        assert_eq!(p.errors, [("NFS3ERR_NOENT".to_owned(), 1)].into());
        assert_eq!(p.latency.count, 4);
        assert!(
            (p.latency.p50_us - 5.0).abs() < 5.0 * 0.0625,
            "{:?}",
            p.latency
        );
        assert_eq!(p.latency.max_us, 50.0);
        assert!((p.latency.mean_us - 16.25).abs() < 1e-9);
        assert_eq!(s.clients[0].calls, 4);
    }

    /// This thread's CPU time so far, in nanoseconds.
    fn thread_cpu_ns() -> u64 {
        std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }

    /// What recording costs per call, in CPU time: the two clock reads alone,
    /// then everything the handler does per call with metrics. Run in release:
    /// `cargo test --release -p rnfs-server --lib record_cost -- --ignored --nocapture`
    #[test]
    #[ignore = "benchmark"]
    fn record_cost() {
        let m = Metrics::new(MetricsConfig::default());
        let shard = m.register_thread();
        let conn = m.open_connection(IpAddr::from([10, 0, 0, 1]), 1);
        let peer = SocketAddr::from(([10, 0, 0, 1], 700));
        let ok = reply(0);
        let n = 10_000_000u32;
        let per_call = |cpu0: u64| (thread_cpu_ns() - cpu0) as f64 / f64::from(n);

        let cpu0 = thread_cpu_ns();
        let mut sum = Duration::ZERO;
        for _ in 0..n {
            sum += std::hint::black_box(std::time::Instant::now()).elapsed();
        }
        let clocks = per_call(cpu0);
        assert!(sum > Duration::ZERO);

        let cpu0 = thread_cpu_ns();
        for i in 0..n {
            let read_at = std::time::Instant::now();
            note::export(1, export_index(1));
            let ids = CallIds {
                prog: crate::services::NFS_PROGRAM,
                vers: 3,
                proc_: 1 + (i & 3),
            };
            let note = note::take();
            m.record(
                &shard,
                Some(conn.counters()),
                ids,
                &note,
                std::hint::black_box(&ok),
                read_at.elapsed(),
                peer,
            );
        }
        let total = per_call(cpu0);
        println!(
            "per call: {total:.1} ns CPU, of which two clock reads {clocks:.1} ns, counting {:.1} ns",
            total - clocks
        );
        let calls: u64 = m.snapshot().procedures.iter().map(|p| p.calls).sum();
        assert_eq!(calls, u64::from(n));
    }
}
