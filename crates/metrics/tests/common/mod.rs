//! Shared by the integration tests: a synthetic statistics source and a tiny
//! HTTP/1.1 client.

#![allow(dead_code, reason = "each test binary uses a part")]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rnfs_server::metrics::{
    ClientSnapshot, DrcSnapshot, ExportSnapshot, LatencySnapshot, PoolSnapshot, ProcedureSnapshot,
    SchedSnapshot, StatsSnapshot, TransportSnapshot,
};

fn latency(p50: f64, count: u64) -> LatencySnapshot {
    LatencySnapshot {
        count,
        mean_us: p50 * 1.3,
        p50_us: p50,
        p90_us: p50 * 2.0,
        p99_us: p50 * 3.5,
        p999_us: p50 * 6.0,
        max_us: p50 * 20.0,
    }
}

/// The snapshot a server would show after `tick` seconds of a varying load.
/// Counters only grow; rates, latencies and thread counts move with `tick`.
#[allow(
    clippy::needless_update,
    reason = "the snapshot types may gain fields; they keep their defaults here"
)]
pub(crate) fn snapshot_at(tick: u64) -> StatsSnapshot {
    let t = tick as f64;
    let wave =
        |period: f64, phase: f64| 1.0 + 0.5 * ((t + phase) * std::f64::consts::TAU / period).sin();
    // Totals grow by a varying amount per tick: sum of per-tick rates.
    let total = |base: f64, period: f64, phase: f64| -> u64 {
        (0..=tick)
            .map(|k| {
                let k = k as f64;
                base * (1.0 + 0.5 * ((k + phase) * std::f64::consts::TAU / period).sin())
            })
            .sum::<f64>() as u64
    };
    let proc = |name: &str, base: f64, phase: f64, p50: f64| {
        let calls = total(base, 12.0, phase);
        let mut errors = BTreeMap::new();
        if name == "LOOKUP" {
            errors.insert("NFS3ERR_NOENT".to_owned(), calls / 10);
        }
        ProcedureSnapshot {
            program: "nfs".into(),
            version: 3,
            procedure: name.into(),
            calls,
            errors,
            latency: latency(p50 * wave(9.0, phase), calls),
        }
    };
    let mut procedures = vec![
        proc("GETATTR", 9000.0, 0.0, 11.0),
        proc("READ", 5000.0, 3.0, 48.0),
        proc("WRITE", 3000.0, 6.0, 95.0),
        proc("LOOKUP", 2000.0, 8.0, 17.0),
        proc("ACCESS", 800.0, 2.0, 9.0),
    ];
    procedures.push(ProcedureSnapshot {
        program: "mount".into(),
        version: 3,
        procedure: "MNT".into(),
        calls: 2,
        errors: BTreeMap::new(),
        latency: latency(120.0, 2),
    });
    let calls: u64 = procedures.iter().map(|p| p.calls).sum();
    let bytes_read = procedures[1].calls * 65536;
    let bytes_written = procedures[2].calls * 32768;
    let dispatches = calls;
    let handoffs = dispatches;
    // A hand-off histogram shaped like the seed's: most under 1.5 µs, a tail.
    let shape = [
        3.0, 14.0, 22.0, 18.0, 11.0, 7.0, 4.0, 3.0, 2.0, 1.5, 1.0, 0.8, 0.6, 0.5, 0.4, 0.3,
    ];
    let weight: f64 = shape.iter().sum();
    let mut bins: Vec<u64> = shape
        .iter()
        .map(|w| (handoffs as f64 * w / weight) as u64)
        .collect();
    bins.extend([0; 15]);
    bins.push(handoffs / 500);
    let threads = 8 + (4.0 * wave(40.0, 0.0)) as u64;
    let idle = (threads as f64 * 0.4 * wave(7.0, 1.0)) as u64;
    StatsSnapshot {
        uptime_secs: t,
        version: "0.1.0-test".into(),
        transport: TransportSnapshot {
            connections: 12 + tick % 5,
            accepted: 20 + tick / 3,
            rejected: 0,
            closed_bad_input: 1,
            throttled: tick / 7,
            peak_in_flight: 16,
            ..TransportSnapshot::default()
        },
        sched: SchedSnapshot {
            policy: "lwq".into(),
            pool_mode: "global".into(),
            max_waking: 1,
            min_threads: 4,
            max_threads: 16,
            pools: vec![PoolSnapshot {
                threads,
                idle,
                waking: tick % 2,
                peak_waking: 1,
                enqueues: dispatches,
                wakeups: dispatches / 3,
                wasted_wakeups: dispatches / 40,
                dispatches,
                ..PoolSnapshot::default()
            }],
            handoff: latency(0.9 * wave(11.0, 2.0), handoffs),
            handoff_bins_300ns: bins,
        },
        procedures,
        bytes_read,
        bytes_written,
        replies_held: calls / 2,
        clients: vec![
            ClientSnapshot {
                addr: "192.168.122.10".into(),
                connections: 8,
                calls: calls * 3 / 4,
                bytes_read: bytes_read * 3 / 4,
                bytes_written: bytes_written / 2,
                mounts: vec!["/data".into()],
            },
            ClientSnapshot {
                addr: "10.0.0.7".into(),
                connections: 4,
                calls: calls / 4,
                bytes_read: bytes_read / 4,
                bytes_written: bytes_written / 2,
                mounts: vec!["/data".into(), "/scratch".into()],
            },
        ],
        exports: vec![ExportSnapshot {
            id: 1,
            mount_path: "/data".into(),
            path: "/srv/data".into(),
            access: "rw".into(),
            calls,
            bytes_read,
            bytes_written,
            listing_attrs_cached: tick * 170,
            listing_attrs_read: tick * 2,
            listing_chunk_calls: tick,
            listing_chunks_read: 4,
        }],
        drc: Some(DrcSnapshot {
            hits: tick,
            misses: tick * 3000,
            entries: 1024,
            bytes: 1 << 20,
            evictions: tick * 3,
            ..DrcSnapshot::default()
        }),
    }
}

/// A source whose every call is one second of server time later than the last,
/// so a page polling it sees growing counters however fast it polls.
pub(crate) fn growing_source() -> Arc<dyn Fn() -> StatsSnapshot + Send + Sync> {
    let ticks = Arc::new(AtomicU64::new(0));
    Arc::new(move || snapshot_at(ticks.fetch_add(1, Ordering::Relaxed) + 1))
}

/// A response: status, headers (names in lower case), body.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: BTreeMap<String, String>,
    pub(crate) body: Vec<u8>,
}

impl Reply {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8(self.body.clone()).expect("UTF-8 body")
    }
}

/// Sends `raw` as it is and reads the whole response (the server closes).
pub(crate) fn exchange(addr: SocketAddr, raw: &[u8]) -> Reply {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(raw).unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).expect("read response");
    parse_reply(&buf)
}

/// `METHOD path` over a fresh connection.
pub(crate) fn request(addr: SocketAddr, method: &str, path: &str) -> Reply {
    exchange(
        addr,
        format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\n\r\n").as_bytes(),
    )
}

pub(crate) fn parse_reply(buf: &[u8]) -> Reply {
    let end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(buf)));
    let head = std::str::from_utf8(&buf[..end]).expect("ASCII head");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let headers = lines
        .map(|l| {
            let (k, v) = l.split_once(':').expect("header without ':'");
            (k.trim().to_ascii_lowercase(), v.trim().to_owned())
        })
        .collect();
    Reply {
        status,
        headers,
        body: buf[end + 4..].to_vec(),
    }
}
