//! Server statistics end to end: a server with [`Metrics`] over a local export,
//! driven by the blocking client; the snapshot must count exactly what was sent.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod common;

use common::{lookup, opener};

use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use rnfs_client::{CallError, SyncConnection};
use rnfs_nfs3::*;
use rnfs_rpc::ReplyStatus;
use rnfs_server::metrics::{
    ClientSnapshot, Metrics, MetricsConfig, ProcedureSnapshot, StatsSnapshot,
};
use rnfs_server::nfs::exports::{Access, BackendKind, Squash};
use rnfs_server::nfs::{self, ExportConfig, Exports, HandleKey};
use rnfs_server::Server;
use rnfs_vfs::Filesystem;
use rnfs_xdr::{Decode, Reader};

const KEY: [u8; 16] = *b"rnfs-test-key-16";

struct Fixture {
    server: Server,
    dir: tempfile::TempDir,
}

impl Fixture {
    /// A server with metrics over a read-write local export mounted as /export.
    fn start(config: MetricsConfig) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut c = ExportConfig::new(dir.path());
        c.mount_path = Some("/export".into());
        c.backend = BackendKind::Local;
        c.access = Access::Rw;
        c.squash = Squash::None;
        let exports = Arc::new(Exports::new(&[c], Box::new(opener)).unwrap());
        let metrics = Arc::new(Metrics::new(config));
        let d = nfs::dispatcher_with_metrics(
            exports,
            HandleKey::from_bytes(KEY),
            Some(Arc::clone(&metrics)),
        )
        .unwrap();
        let mut config = common::config();
        config.drc = Some(nfs::drc_config());
        config.metrics = Some(metrics);
        let server = Server::start_with_dispatcher(config, Arc::new(d)).unwrap();
        wait_for_threads(&server);
        Self { server, dir }
    }

    fn addr(&self) -> SocketAddr {
        self.server.local_addrs()[0]
    }

    /// A snapshot once `calls` calls have been counted. A call is counted just
    /// after its reply is sent, so the client may see the reply first.
    fn snapshot_after(&self, calls: u64) -> StatsSnapshot {
        let mut last = None;
        let settled = common::wait_until(Duration::from_secs(10), || {
            let s = self.server.stats_snapshot();
            let counted: u64 = s.procedures.iter().map(|p| p.calls).sum();
            let done = counted >= calls;
            last = Some(s);
            done
        });
        let s = last.unwrap();
        assert!(settled, "counted fewer than {calls} calls: {s:#?}");
        assert_eq!(
            s.procedures.iter().map(|p| p.calls).sum::<u64>(),
            calls,
            "{s:#?}"
        );
        s
    }
}

/// Waits until every service thread has started (they start asynchronously).
fn wait_for_threads(server: &Server) {
    assert!(common::wait_until(Duration::from_secs(10), || {
        server.scheduler().stats().total().threads == common::THREADS as u64
    }));
}

fn procedure<'a>(s: &'a StatsSnapshot, program: &str, name: &str) -> &'a ProcedureSnapshot {
    s.procedures
        .iter()
        .find(|p| p.program == program && p.procedure == name)
        .unwrap_or_else(|| panic!("no row for {program} {name}: {:#?}", s.procedures))
}

fn client<'a>(s: &'a StatsSnapshot, addr: &str) -> Option<&'a ClientSnapshot> {
    s.clients.iter().find(|c| c.addr == addr)
}

fn read(c: &mut SyncConnection, fh: &FileHandle, offset: u64, count: u32) -> usize {
    let raw = c
        .nfs_raw(
            NfsProc3::Read,
            &ReadArgs {
                file: fh.as_fh3(),
                offset,
                count,
            },
        )
        .unwrap();
    match ReadRes::decode(&mut Reader::new(&raw)).unwrap() {
        ReadRes::Ok(ok) => ok.data.len(),
        other => panic!("read: {other:?}"),
    }
}

#[test]
fn counts_procedures_errors_bytes_exports_and_clients() {
    let mut config = MetricsConfig::default();
    // Every call is "slow": exercises the warning path.
    config.slow_call = Some(Duration::ZERO);
    let f = Fixture::start(config);
    let mut c = SyncConnection::connect(f.addr()).unwrap();
    let root = c.mount("/export").unwrap();
    for _ in 0..3 {
        c.call_raw(NFS_PROGRAM, 3, 0, &[]).unwrap();
    }
    for _ in 0..2 {
        let res: GetattrRes = c
            .nfs(
                NfsProc3::Getattr,
                &GetattrArgs {
                    object: root.as_fh3(),
                },
            )
            .unwrap();
        assert_eq!(res.status(), Nfsstat3::Ok);
    }
    assert_eq!(lookup(&mut c, &root, b"missing").status(), Nfsstat3::Noent);
    // LOOKUP without arguments: GARBAGE_ARGS, counted as LOOKUP.
    assert!(matches!(
        c.call_raw(NFS_PROGRAM, 3, 3, &[]),
        Err(CallError::Rpc(ReplyStatus::GarbageArgs))
    ));
    // A procedure NFSv3 does not have: PROC_UNAVAIL.
    assert!(matches!(
        c.call_raw(NFS_PROGRAM, 3, 99, &[]),
        Err(CallError::Rpc(ReplyStatus::ProcUnavail))
    ));
    let created: CreateRes = c
        .nfs(
            NfsProc3::Create,
            &CreateArgs {
                where_: DirOpArgs3 {
                    dir: root.as_fh3(),
                    name: b"data",
                },
                how: CreateHow3::Unchecked(Sattr3 {
                    mode: Some(0o644),
                    ..Default::default()
                }),
            },
        )
        .unwrap();
    let CreateRes::Ok(created) = created else {
        panic!("{created:?}")
    };
    let fh = created.obj.unwrap();
    let data = vec![0x5a; 3000];
    let written: WriteRes = c
        .nfs(
            NfsProc3::Write,
            &WriteArgs {
                file: fh.as_fh3(),
                offset: 0,
                count: data.len() as u32,
                stable: StableHow::FileSync,
                data: &data,
            },
        )
        .unwrap();
    assert!(matches!(written, WriteRes::Ok(ref ok) if ok.count == 3000));
    assert_eq!(read(&mut c, &fh, 0, 1000), 1000);
    // A short read at the end of the file counts what was returned.
    assert_eq!(read(&mut c, &fh, 2500, 1000), 500);

    // MNT, NULL x3, GETATTR x2, LOOKUP x2, UNKNOWN, CREATE, WRITE, READ x2.
    let calls = 13;
    let s = f.snapshot_after(calls);
    let row = |name| procedure(&s, "nfs", name);
    assert_eq!(row("NULL").calls, 3);
    assert_eq!(row("GETATTR").calls, 2);
    assert!(row("GETATTR").errors.is_empty());
    assert_eq!(row("LOOKUP").calls, 2);
    assert_eq!(
        row("LOOKUP").errors,
        [
            ("GARBAGE_ARGS".to_owned(), 1),
            ("NFS3ERR_NOENT".to_owned(), 1)
        ]
        .into()
    );
    assert_eq!(row("UNKNOWN").version, 3);
    assert_eq!(
        row("UNKNOWN").errors,
        [("PROC_UNAVAIL".to_owned(), 1)].into()
    );
    assert_eq!((row("CREATE").calls, row("WRITE").calls), (1, 1));
    assert_eq!(row("READ").calls, 2);
    let mnt = procedure(&s, "mount", "MNT");
    assert_eq!((mnt.version, mnt.calls), (3, 1));
    assert!(mnt.errors.is_empty());
    for p in &s.procedures {
        assert_eq!(p.latency.count, p.calls, "{p:?}");
        assert!(p.latency.max_us > 0.0, "{p:?}");
        assert!(p.latency.p50_us <= p.latency.max_us, "{p:?}");
        assert!(p.latency.mean_us <= p.latency.max_us, "{p:?}");
    }
    assert_eq!((s.bytes_read, s.bytes_written), (1500, 3000));

    // Calls that opened a handle of the export: GETATTR x2, LOOKUP (the one that
    // decoded), CREATE, WRITE, READ x2.
    assert_eq!(s.exports.len(), 1);
    let e = &s.exports[0];
    assert_eq!(e.mount_path, "/export");
    assert_eq!(e.path, f.dir.path().display().to_string());
    assert_eq!(e.access, "rw");
    assert_eq!((e.calls, e.bytes_read, e.bytes_written), (7, 1500, 3000));

    assert_eq!(s.clients.len(), 1, "{:?}", s.clients);
    let me = client(&s, "127.0.0.1").unwrap();
    assert_eq!(me.connections, 1);
    assert_eq!(me.calls, calls);
    assert_eq!((me.bytes_read, me.bytes_written), (1500, 3000));
    assert_eq!(me.mounts, ["/export"]);

    // Server-wide figures come with the call figures.
    assert!(!s.version.is_empty());
    assert!(s.uptime_secs > 0.0);
    assert_eq!(s.transport.connections, 1);
    assert_eq!(s.transport.accepted, 1);
    assert_eq!(s.sched.policy, "lwq");
    assert_eq!(
        s.sched.pools.iter().map(|p| p.threads).sum::<u64>(),
        common::THREADS as u64
    );
    assert!(s.sched.handoff.count >= calls);
    assert_eq!(
        s.sched.handoff_bins_300ns.iter().sum::<u64>(),
        s.sched.handoff.count
    );
    let drc = s.drc.as_ref().unwrap();
    // CREATE and WRITE go through the cache.
    assert_eq!(drc.misses, 2);

    // The snapshot is what the admin socket sends: it survives JSON.
    let json = serde_json::to_string(&s).unwrap();
    let back: StatsSnapshot = serde_json::from_str(&json).unwrap();
    assert_eq!(back, s);

    // UMNT removes the mount from the client's row; closing the connection
    // keeps the client's totals.
    let _: () = c
        .call(
            MOUNT_PROGRAM,
            3,
            3,
            &UmntArgs {
                dirpath: b"/export",
            },
        )
        .unwrap();
    let s = f.snapshot_after(calls + 1);
    assert!(client(&s, "127.0.0.1").unwrap().mounts.is_empty());
    drop(c);
    assert!(common::wait_until(Duration::from_secs(10), || {
        let s = f.server.stats_snapshot();
        client(&s, "127.0.0.1").unwrap().connections == 0
    }));
    let s = f.server.stats_snapshot();
    assert_eq!(client(&s, "127.0.0.1").unwrap().calls, calls + 1);
    assert_eq!(procedure(&s, "mount", "UMNT").calls, 1);
}

/// A connection from `ip` (127.0.0.x) to `server`.
fn connect_from(ip: [u8; 4], server: SocketAddr) -> TcpStream {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::from((ip, 0)).into()).unwrap();
    socket.connect(&server.into()).unwrap();
    let s: TcpStream = socket.into();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

#[test]
fn clients_beyond_the_cap_are_summed_in_other() {
    let mut config = MetricsConfig::default();
    config.max_clients = 2;
    let f = Fixture::start(config);
    // Clients 127.0.0.2..=6 make 1..=5 NULL calls, one after the other, and
    // stay connected: the first two get rows.
    let mut streams = Vec::new();
    let mut xid = 1;
    for (i, last) in (2..=6u8).enumerate() {
        let mut s = connect_from([127, 0, 0, last], f.addr());
        for _ in 0..=i {
            common::null_ok(&mut s, xid, common::NFS);
            xid += 1;
        }
        streams.push(s);
    }
    let s = f.snapshot_after(15);
    assert_eq!(s.clients.len(), 3, "{:#?}", s.clients);
    // Busiest first, `other` last.
    assert_eq!(s.clients[0].addr, "127.0.0.3");
    assert_eq!((s.clients[0].calls, s.clients[0].connections), (2, 1));
    assert_eq!(s.clients[1].addr, "127.0.0.2");
    assert_eq!((s.clients[1].calls, s.clients[1].connections), (1, 1));
    let other = &s.clients[2];
    assert_eq!(other.addr, "other");
    assert_eq!((other.calls, other.connections), (3 + 4 + 5, 3));
    drop(streams);
}

#[test]
fn totals_survive_service_threads_exiting() {
    let f = Fixture::start(MetricsConfig::default());
    let mut c = SyncConnection::connect(f.addr()).unwrap();
    for _ in 0..40 {
        c.call_raw(NFS_PROGRAM, 3, 0, &[]).unwrap();
    }
    assert_eq!(procedure(&f.snapshot_after(40), "nfs", "NULL").calls, 40);
    f.server.scheduler().set_threads(1).unwrap();
    assert!(common::wait_until(Duration::from_secs(10), || {
        f.server.scheduler().stats().total().threads == 1
    }));
    let s = f.snapshot_after(40);
    assert_eq!(procedure(&s, "nfs", "NULL").latency.count, 40);
    assert_eq!(s.replies_held, 0, "one call at a time: nothing to coalesce");
    c.call_raw(NFS_PROGRAM, 3, 0, &[]).unwrap();
    assert_eq!(procedure(&f.snapshot_after(41), "nfs", "NULL").calls, 41);
}

#[test]
fn replies_held_for_coalescing_are_counted() {
    use std::io::Write;
    const CALLS: u32 = 64;
    let f = Fixture::start(MetricsConfig::default());
    let mut s = common::connect(f.addr());
    let batch: Vec<u8> = (0..CALLS)
        .flat_map(|xid| common::call_bytes(xid, NFS_PROGRAM, 3, 0))
        .collect();
    // One write: every call is received before the first is answered, so at
    // least the first reply is held for the next.
    s.write_all(&batch).unwrap();
    for _ in 0..CALLS {
        common::read_record(&mut s).unwrap();
    }
    let snap = f.snapshot_after(u64::from(CALLS));
    assert!(
        (1..u64::from(CALLS)).contains(&snap.replies_held),
        "the last reply is never held: {}",
        snap.replies_held
    );
}

/// UNSTABLE WRITEs pipelined on one connection: each reply may wait for the
/// next WRITE (quick among its peers), so some leave together, and every one
/// arrives, with the data written.
#[test]
fn pipelined_unstable_writes_are_answered_in_batches() {
    use std::io::Write;
    const CALLS: u32 = 64;
    const SIZE: usize = 4096;
    let f = Fixture::start(MetricsConfig::default());
    std::fs::write(f.dir.path().join("w"), b"").unwrap();
    // The calls are AUTH_NONE (anonymous): let anyone write.
    std::fs::set_permissions(
        f.dir.path().join("w"),
        std::os::unix::fs::PermissionsExt::from_mode(0o666),
    )
    .unwrap();
    let mut c = SyncConnection::connect(f.addr()).unwrap();
    let root = c.mount("/export").unwrap();
    let LookupRes::Ok(found) = lookup(&mut c, &root, b"w") else {
        panic!("no file")
    };
    let batch = |stable: StableHow| -> Vec<u8> {
        let mut batch = Vec::new();
        for i in 0..CALLS {
            let data = vec![i as u8; SIZE];
            let mut args = Vec::new();
            rnfs_xdr::Encode::encode(
                &WriteArgs {
                    file: found.object.as_fh3(),
                    offset: u64::from(i) * SIZE as u64,
                    count: SIZE as u32,
                    stable,
                    data: &data,
                },
                &mut rnfs_xdr::Writer::new(&mut args),
            );
            rnfs_rpc::encode_call(
                i,
                NFS_PROGRAM,
                3,
                NfsProc3::Write as u32,
                &rnfs_rpc::Auth::None,
                &args,
                &mut batch,
            );
        }
        batch
    };
    let mut s = common::connect(f.addr());
    let mut replies = |batch: &[u8]| {
        s.write_all(batch).unwrap();
        let mut xids = std::collections::BTreeSet::new();
        for _ in 0..CALLS {
            let record = common::read_record(&mut s).unwrap();
            let reply = rnfs_rpc::decode_reply(&record).unwrap();
            assert!(xids.insert(reply.header.xid), "one reply per call");
            let res = WriteRes::decode(&mut Reader::new(reply.results)).unwrap();
            assert!(
                matches!(res, WriteRes::Ok(ref ok) if ok.count == SIZE as u32),
                "{res:?}"
            );
        }
        assert_eq!(xids, (0..CALLS).collect());
    };
    // Earlier calls: the mount, the lookup.
    let before = 2;
    replies(&batch(StableHow::Unstable));
    let held = f.snapshot_after(before + u64::from(CALLS)).replies_held;
    assert!(
        (1..u64::from(CALLS)).contains(&held),
        "some held, never the last: {held}"
    );
    let file = std::fs::read(f.dir.path().join("w")).unwrap();
    assert_eq!(file.len(), CALLS as usize * SIZE);
    assert!(file
        .chunks(SIZE)
        .enumerate()
        .all(|(i, chunk)| chunk.iter().all(|&b| b == i as u8)));
    // FILE_SYNC: each WRITE lets the replies held for it go before it waits
    // for storage (`before_blocking`); every one is answered.
    replies(&batch(StableHow::FileSync));
    f.snapshot_after(before + 2 * u64::from(CALLS));
}

#[test]
fn without_metrics_the_snapshot_has_server_figures() {
    let server = common::start();
    wait_for_threads(&server);
    let mut s = common::connect(common::addr(&server));
    common::null_ok(&mut s, 1, common::NFS);
    let snap = server.stats_snapshot();
    assert!(snap.procedures.is_empty());
    assert!(snap.clients.is_empty() && snap.exports.is_empty());
    assert_eq!(snap.transport.accepted, 1);
    assert_eq!(
        snap.sched.pools.iter().map(|p| p.threads).sum::<u64>(),
        common::THREADS as u64
    );
    assert!(snap.sched.handoff.count >= 1);
    assert!(snap.drc.is_none());
    assert!(!snap.version.is_empty());
}

/// CPU time so far of the threads whose names start with one of `prefixes`
/// (from `/proc/self/task/*/schedstat`, in nanoseconds).
fn threads_cpu_ns(prefixes: &[&str]) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = entry.unwrap().path();
        let Ok(comm) = std::fs::read_to_string(dir.join("comm")) else {
            continue;
        };
        if !prefixes.iter().any(|p| comm.starts_with(p)) {
            continue;
        }
        if let Ok(stat) = std::fs::read_to_string(dir.join("schedstat")) {
            total += stat
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    total
}

/// One measured run: calls per second and server CPU (service threads and
/// pollers) per call, in nanoseconds.
fn overhead_run(
    with_metrics: bool,
    proc_: u32,
    conns: usize,
    depth: usize,
    secs: f64,
) -> (f64, f64) {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    let mut c = ExportConfig::new("/mem");
    c.backend = BackendKind::Memory;
    c.access = Access::Rw;
    c.squash = Squash::None;
    let exports = Arc::new(
        Exports::new(
            &[c],
            Box::new(|_: &ExportConfig| {
                Ok(Arc::new(rnfs_vfs::memory::MemoryFs::new(1)) as Arc<dyn Filesystem>)
            }),
        )
        .unwrap(),
    );
    let metrics = with_metrics.then(|| Arc::new(Metrics::new(MetricsConfig::default())));
    let d =
        nfs::dispatcher_with_metrics(exports, HandleKey::from_bytes(KEY), metrics.clone()).unwrap();
    let mut config = common::config();
    let mut sched = rnfs_sched::Config::fixed(2);
    sched.name = "rnfs-bsvc".into();
    sched.pin_threads = false;
    config.sched = sched;
    config.drc = Some(nfs::drc_config());
    config.metrics = metrics;
    let server = Server::start_with_dispatcher(config, Arc::new(d)).unwrap();
    let addr = server.local_addrs()[0];

    // GETATTR of the root (AUTH_NONE), or NULL.
    let args = if proc_ == 1 {
        let root = SyncConnection::connect(addr)
            .unwrap()
            .mount("/mem")
            .unwrap();
        let mut a = Vec::new();
        rnfs_xdr::Encode::encode(
            &GetattrArgs {
                object: root.as_fh3(),
            },
            &mut rnfs_xdr::Writer::new(&mut a),
        );
        a
    } else {
        Vec::new()
    };
    let mut batch = Vec::new();
    for i in 0..depth {
        rnfs_rpc::encode_call(
            i as u32,
            NFS_PROGRAM,
            3,
            proc_,
            &rnfs_rpc::Auth::None,
            &args,
            &mut batch,
        );
    }
    let stop = Arc::new(AtomicBool::new(false));
    let counting = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..conns)
        .map(|_| {
            let mut s = common::connect(addr);
            let batch = batch.clone();
            let (stop, counting, calls) = (stop.clone(), counting.clone(), calls.clone());
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 << 10];
                while !stop.load(Ordering::Relaxed) {
                    s.write_all(&batch).unwrap();
                    // Read `depth` records (single-fragment replies).
                    let mut left = depth;
                    let mut have = 0;
                    while left > 0 {
                        let n = s.read(&mut buf[have..]).unwrap();
                        assert!(n > 0);
                        have += n;
                        let mut at = 0;
                        while have - at >= 4 {
                            let mark = u32::from_be_bytes(buf[at..at + 4].try_into().unwrap());
                            let len = (mark & 0x7fff_ffff) as usize + 4;
                            if have - at < len {
                                break;
                            }
                            at += len;
                            left -= 1;
                        }
                        buf.copy_within(at..have, 0);
                        have -= at;
                    }
                    if counting.load(Ordering::Relaxed) {
                        calls.fetch_add(depth as u64, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let server_threads = ["rnfs-bsvc", "rnfs-poll"];
    let cpu0 = threads_cpu_ns(&server_threads);
    let t0 = std::time::Instant::now();
    counting.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs_f64(secs));
    counting.store(false, Ordering::Relaxed);
    let elapsed = t0.elapsed().as_secs_f64();
    let cpu = threads_cpu_ns(&server_threads) - cpu0;
    let n = calls.load(Ordering::Relaxed) as f64;
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    if with_metrics {
        let s = server.stats_snapshot();
        let counted: u64 = s.procedures.iter().map(|p| p.calls).sum();
        assert!(counted as f64 >= n);
    }
    server.shutdown();
    (n / elapsed, cpu as f64 / n)
}

/// The cost of metrics on the call path: calls/s and server CPU per call with
/// metrics off and on, in alternating runs; also the median over pairs of runs of
/// the on/off CPU ratio. Run alone, in release:
/// `cargo test --release -p rnfs-server --test metrics metrics_overhead -- --ignored --nocapture`
/// (`RNFS_BENCH_SECS` per run, default 2; `RNFS_BENCH_RUNS` pairs, default 5).
#[test]
#[ignore = "benchmark"]
fn metrics_overhead() {
    let env = |name: &str, default: f64| {
        std::env::var(name)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default)
    };
    let secs = env("RNFS_BENCH_SECS", 2.0);
    let pairs = env("RNFS_BENCH_RUNS", 5.0) as usize;
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for (name, proc_, conns, depth) in [
        ("NULL     1 conn  depth 1 ", 0, 1, 1),
        ("GETATTR  1 conn  depth 1 ", 1, 1, 1),
        ("GETATTR  4 conns depth 16", 1, 4, 16),
    ] {
        let mut off = Vec::new();
        let mut on = Vec::new();
        for _ in 0..pairs {
            off.push(overhead_run(false, proc_, conns, depth, secs));
            on.push(overhead_run(true, proc_, conns, depth, secs));
        }
        let ratio = median(on.iter().zip(&off).map(|(a, b)| a.1 / b.1).collect());
        let summary = |runs: &[(f64, f64)]| {
            format!(
                "{:>7.0} calls/s {:>5.2} us CPU/call",
                median(runs.iter().map(|r| r.0).collect()),
                median(runs.iter().map(|r| r.1).collect()) / 1e3
            )
        };
        println!(
            "{name}: off {}  on {}  on/off CPU per call, median of pairs: {:+.1}%",
            summary(&off),
            summary(&on),
            (ratio - 1.0) * 100.0
        );
    }
}
