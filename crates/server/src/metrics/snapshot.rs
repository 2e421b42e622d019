//! [`StatsSnapshot`]: everything `rnfs stats`, the Prometheus endpoint and the
//! dashboard show, as one serialisable value. The admin socket sends it as JSON;
//! field names are part of that protocol (add fields, do not rename them).

use serde::{Deserialize, Serialize};

/// A point-in-time view of a running server. Counters are totals since start
/// (rates are computed by the reader from two snapshots).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StatsSnapshot {
    /// Seconds since the server started.
    pub uptime_secs: f64,
    /// rnfs version (`CARGO_PKG_VERSION`).
    pub version: String,
    /// Transport figures.
    pub transport: TransportSnapshot,
    /// Scheduler figures.
    pub sched: SchedSnapshot,
    /// One row per (program, version, procedure) that has been called at least once.
    pub procedures: Vec<ProcedureSnapshot>,
    /// Bytes of file data returned by READ.
    pub bytes_read: u64,
    /// Bytes of file data accepted by WRITE.
    pub bytes_written: u64,
    /// Replies held back to leave in one write with later ones (reply
    /// coalescing, [`Limits::max_reply_hold`](crate::Limits::max_reply_hold));
    /// the other replies were each written when their call finished.
    pub replies_held: u64,
    /// Per-client totals (by IP address), at most a bounded number of rows; calls
    /// of clients beyond the bound are summed in the row with `addr` = "other".
    pub clients: Vec<ClientSnapshot>,
    /// Per-export totals.
    pub exports: Vec<ExportSnapshot>,
    /// Duplicate request cache figures, when the server has one.
    pub drc: Option<DrcSnapshot>,
}

/// Connection-level figures.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TransportSnapshot {
    /// Connections open now.
    pub connections: u64,
    /// Connections accepted since start (including rejected ones).
    pub accepted: u64,
    /// Connections refused because `max_connections` was reached.
    pub rejected: u64,
    /// Connections closed because of a bad record or undecodable message.
    pub closed_bad_input: u64,
    /// Connections closed after the idle timeout without a call.
    pub closed_idle: u64,
    /// Times a connection hit its in-flight cap and reading stopped.
    pub throttled: u64,
    /// Largest number of calls in flight seen on any one connection.
    pub peak_in_flight: u64,
    /// Largest output buffer (reply bytes the socket would not take yet) seen on
    /// any one connection.
    pub peak_output_buffered: u64,
    /// Calls in flight now: read off a connection, reply not yet handed to the
    /// kernel.
    pub in_flight: u64,
}

/// Scheduler figures: per pool, plus the hand-off latency histogram.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SchedSnapshot {
    /// Policy name (`lwq`, `listwalk`, `wakeall`).
    pub policy: String,
    /// Pool mode name (`global`, `percpu`, `pernode`).
    pub pool_mode: String,
    /// Configured bound on woken-but-not-running threads per pool.
    pub max_waking: u64,
    /// Configured thread bounds (equal when the count is fixed).
    pub min_threads: u64,
    /// Configured maximum thread count.
    pub max_threads: u64,
    /// One entry per pool.
    pub pools: Vec<PoolSnapshot>,
    /// Enqueue-to-pickup latency of every dispatch.
    pub handoff: LatencySnapshot,
    /// Hand-off histogram in 300 ns bins (the seed's presentation): bin `i`
    /// counts hand-offs in `[300*i, 300*(i+1))` ns; the last bin holds the rest.
    pub handoff_bins_300ns: Vec<u64>,
}

/// One scheduler pool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PoolSnapshot {
    /// Live service threads.
    pub threads: u64,
    /// Idle threads.
    pub idle: u64,
    /// Threads woken but not yet running, now.
    pub waking: u64,
    /// Highest `waking` seen.
    pub peak_waking: u64,
    /// Transports queued.
    pub enqueues: u64,
    /// Threads woken.
    pub wakeups: u64,
    /// Wake-ups that found nothing to do.
    pub wasted_wakeups: u64,
    /// Work items handed to a thread.
    pub dispatches: u64,
}

/// Latency summary, in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LatencySnapshot {
    /// Samples.
    pub count: u64,
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Largest.
    pub max_us: f64,
}

/// One procedure's figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProcedureSnapshot {
    /// Program name: `nfs`, `mount`, `portmap`, or the number for others.
    pub program: String,
    /// Program version.
    pub version: u32,
    /// Procedure name in upper case as the RFC spells it (`GETATTR`, `MNT`).
    pub procedure: String,
    /// Calls answered.
    pub calls: u64,
    /// Calls whose result status was not OK, by status name (`NFS3ERR_NOENT`,
    /// RPC-level ones such as `GARBAGE_ARGS` too).
    pub errors: std::collections::BTreeMap<String, u64>,
    /// Service time: from the record being read to the reply being sent (or
    /// queued behind a quick call, when coalescing holds it).
    pub latency: LatencySnapshot,
}

/// One client's totals.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClientSnapshot {
    /// Client IP address, or `other` for the overflow row.
    pub addr: String,
    /// Connections open now.
    pub connections: u64,
    /// Calls answered.
    pub calls: u64,
    /// READ bytes.
    pub bytes_read: u64,
    /// WRITE bytes.
    pub bytes_written: u64,
    /// Export paths this client has mounted (MNT without UMNT).
    pub mounts: Vec<String>,
}

/// One export's totals.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExportSnapshot {
    /// Export id (stable across restarts; part of file handles).
    pub id: u32,
    /// The path clients mount.
    pub mount_path: String,
    /// Host directory (or `memory`).
    pub path: String,
    /// `ro` or `rw`.
    pub access: String,
    /// NFS calls on this export's files.
    pub calls: u64,
    /// READ bytes.
    pub bytes_read: u64,
    /// WRITE bytes.
    pub bytes_written: u64,
    /// READDIRPLUS entries answered from cached attributes.
    pub listing_attrs_cached: u64,
    /// READDIRPLUS entries whose attributes were read from the file system.
    pub listing_attrs_read: u64,
    /// READDIR and READDIRPLUS calls answered from cached `getdents` chunks.
    pub listing_chunk_calls: u64,
    /// `getdents` chunks read into the listing cache.
    pub listing_chunks_read: u64,
}

/// Duplicate request cache figures.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DrcSnapshot {
    /// Retransmissions answered from the cache.
    pub hits: u64,
    /// Calls cached.
    pub misses: u64,
    /// Entries now.
    pub entries: u64,
    /// Bytes cached now.
    pub bytes: u64,
    /// Entries evicted.
    pub evictions: u64,
    /// Calls that waited for a running original.
    pub in_progress_waits: u64,
    /// Duplicates of a running call dropped after waiting.
    pub drops: u64,
    /// Calls run without an entry because their cache shard was full.
    pub overflows: u64,
}

impl From<&crate::ServerStats> for TransportSnapshot {
    fn from(s: &crate::ServerStats) -> Self {
        TransportSnapshot {
            connections: s.connections,
            accepted: s.accepted,
            rejected: s.rejected,
            closed_bad_input: s.closed_bad_input,
            closed_idle: s.closed_idle,
            throttled: s.throttled,
            peak_in_flight: u64::from(s.peak_in_flight),
            peak_output_buffered: s.peak_output_buffered,
            in_flight: s.in_flight,
        }
    }
}

impl From<&crate::drc::DrcStats> for DrcSnapshot {
    fn from(s: &crate::drc::DrcStats) -> Self {
        DrcSnapshot {
            hits: s.hits,
            misses: s.misses,
            entries: s.entries as u64,
            bytes: s.bytes as u64,
            evictions: s.evictions,
            in_progress_waits: s.in_progress_waits,
            drops: s.drops,
            overflows: s.overflows,
        }
    }
}

impl From<&rnfs_sched::PoolStats> for PoolSnapshot {
    fn from(p: &rnfs_sched::PoolStats) -> Self {
        PoolSnapshot {
            threads: p.threads,
            idle: p.idle,
            waking: p.waking,
            peak_waking: p.peak_waking,
            enqueues: p.enqueues,
            wakeups: p.wakeups,
            wasted_wakeups: p.wasted_wakeups,
            dispatches: p.dispatches,
        }
    }
}

/// Width of the hand-off bins (the seed's presentation).
const HANDOFF_BIN_NS: u64 = 300;
/// Hand-off bins reported individually; one more collects everything above.
const HANDOFF_BINS: u64 = 10;

impl SchedSnapshot {
    /// The scheduler's figures; `min_threads`/`max_threads` are the bounds it was
    /// started with.
    pub(crate) fn new(stats: &rnfs_sched::SchedStats, config: &rnfs_sched::Config) -> Self {
        let h = &stats.handoff_ns;
        let mut bins = vec![0u64; HANDOFF_BINS as usize + 1];
        for v in h.iter_recorded() {
            let bin = (v.value_iterated_to() / HANDOFF_BIN_NS).min(HANDOFF_BINS) as usize;
            bins[bin] += v.count_at_value();
        }
        let us = |ns: u64| ns as f64 / 1e3;
        let count = h.len();
        SchedSnapshot {
            policy: stats.policy.name().to_owned(),
            pool_mode: stats.pool_mode.name().to_owned(),
            max_waking: stats.max_waking,
            min_threads: config.min_threads as u64,
            max_threads: config.max_threads as u64,
            pools: stats.pools.iter().map(PoolSnapshot::from).collect(),
            handoff: LatencySnapshot {
                count,
                // Whole nanoseconds: short decimals, parsed back exactly.
                mean_us: if count == 0 {
                    0.0
                } else {
                    h.mean().round() / 1e3
                },
                p50_us: us(h.value_at_quantile(0.5)),
                p90_us: us(h.value_at_quantile(0.9)),
                p99_us: us(h.value_at_quantile(0.99)),
                p999_us: us(h.value_at_quantile(0.999)),
                max_us: us(h.max()),
            },
            handoff_bins_300ns: bins,
        }
    }
}
