//! A client that sends calls but never reads its replies must not stall anyone
//! else, hold a thread, or make the server buffer without bound.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a test failure"
)]

mod common;

use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use rnfs_client::SyncConnection;
use rnfs_nfs3::{
    CreateArgs, CreateHow3, CreateRes, DirOpArgs3, FileHandle, NfsProc3, ReadArgs, ReadRes, Sattr3,
    StableHow, WriteArgs, WriteRes,
};
use rnfs_rpc::{encode_call, Auth};
use rnfs_server::nfs::exports::{Access, BackendKind, Squash};
use rnfs_server::nfs::{self, ExportConfig, Exports, HandleKey};
use rnfs_server::Server;
use rnfs_xdr::{Decode, Encode, Reader, Writer};
use socket2::{Domain, Socket, Type};

const CAP: u32 = 8;

/// Connects with a tiny receive buffer, so the replies it never reads fill the
/// path quickly.
fn connect_small_rcvbuf(addr: SocketAddr) -> TcpStream {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&addr.into()).unwrap();
    let s: TcpStream = socket.into();
    s.set_write_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    s
}

#[test]
fn client_that_never_reads_cannot_stall_others() {
    let mut config = config();
    config.limits.max_in_flight_per_conn = CAP;
    // Small socket buffers on both ends, so unread replies back up quickly.
    config.send_buffer_size = Some(4096);
    let server = Server::start(config).unwrap();
    let addr = addr(&server);

    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let blaster = {
        let (stop, sent) = (Arc::clone(&stop), Arc::clone(&sent));
        std::thread::spawn(move || {
            let mut s = connect_small_rcvbuf(addr);
            let mut batch = Vec::new();
            for i in 0..256 {
                batch.extend(call_bytes(i, NFS, 3, 0));
            }
            let mut pos = 0;
            while !stop.load(Ordering::Relaxed) {
                match s.write(&batch[pos..]) {
                    Ok(n) => {
                        sent.fetch_add(n as u64, Ordering::Relaxed);
                        pos = (pos + n) % batch.len();
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) => {}
                    Err(e) => {
                        // The server closing it would be a failure: reported below.
                        eprintln!("blaster write failed: {e}");
                        break;
                    }
                }
            }
            s // keep the connection open until the end of the test
        })
    };

    // Back-pressure engages: the server stopped reading the blaster.
    assert!(
        wait_until(Duration::from_secs(10), || server.stats().throttled > 0),
        "the in-flight limit never engaged: {:?}, {} bytes sent",
        server.stats(),
        sent.load(Ordering::Relaxed)
    );

    // Meanwhile another client is served normally.
    let started = Instant::now();
    let mut s = connect(addr);
    for xid in 0..1000 {
        null_ok(&mut s, xid, NFS);
    }
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "1,000 NULL calls took {took:?}"
    );

    // The blaster holds no service thread while its calls back up...
    assert!(
        wait_until(Duration::from_secs(5), || all_threads_idle(&server)),
        "{:?}",
        server.scheduler().stats()
    );
    // ...and bounded server memory: never more than CAP calls in flight, so at
    // most CAP small replies buffered.
    let stats = server.stats();
    assert_eq!(
        stats.connections, 2,
        "the blaster was not closed: {stats:?}"
    );
    assert!(stats.peak_in_flight <= CAP, "{stats:?}");
    assert!(
        stats.peak_output_buffered <= u64::from(CAP) * 64,
        "{stats:?}"
    );

    stop.store(true, Ordering::Relaxed);
    let blaster_conn = blaster.join().unwrap();
    drop(blaster_conn);
    server.shutdown();
}

#[test]
fn throttled_connection_resumes_when_its_client_reads() {
    const CALLS: u32 = 5000;
    let mut config = config();
    config.limits.max_in_flight_per_conn = CAP;
    config.send_buffer_size = Some(4096);
    let server = Server::start(config).unwrap();
    let mut s = connect_small_rcvbuf(addr(&server));
    s.set_write_timeout(None).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // Write every call before reading anything (from another thread: the writes
    // block once the server stops reading), then read every reply. Each pause
    // of the server's reading must end when replies drain: a lost resume would
    // stall here until the read timeout.
    let mut writer = s.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        let mut batch = Vec::new();
        for xid in 0..CALLS {
            batch.extend(call_bytes(xid, MOUNT, 3, 0));
        }
        writer.write_all(&batch).unwrap();
    });
    // Let the server stall on us before reading.
    assert!(wait_until(Duration::from_secs(10), || server
        .stats()
        .throttled
        > 0));
    let mut seen = vec![false; CALLS as usize];
    for i in 0..CALLS {
        let record = read_record(&mut s).unwrap_or_else(|e| panic!("after {i} replies: {e}"));
        let xid = rnfs_rpc::decode_reply(&record).unwrap().header.xid;
        assert!(!std::mem::replace(&mut seen[xid as usize], true));
    }
    sender.join().unwrap();
    assert!(server.stats().peak_in_flight <= CAP);
}

/// Output cap for [`client_that_never_reads_large_replies_holds_bounded_output`].
const OUTPUT_CAP: usize = 2 << 20;
/// Bytes each pipelined READ asks for: the server's `rtmax`.
const READ_SIZE: u32 = 1 << 20;
/// Largest READ reply: the data plus record mark, RPC and NFS headers.
const MAX_READ_REPLY: u64 = READ_SIZE as u64 + 4096;

/// A server with one read-write memory export, /mem, holding a file of
/// `READ_SIZE` bytes; returns the server and the file's handle.
fn start_with_big_file(config: rnfs_server::ServerConfig) -> (Server, FileHandle) {
    let mut export = ExportConfig::new("/mem");
    export.backend = BackendKind::Memory;
    export.access = Access::Rw;
    export.squash = Squash::None;
    let exports = Arc::new(Exports::new(&[export], Box::new(opener)).unwrap());
    let d = nfs::dispatcher(exports, HandleKey::from_bytes(*b"rnfs-test-key-16")).unwrap();
    let server = Server::start_with_dispatcher(config, Arc::new(d)).unwrap();

    let mut c = SyncConnection::connect(addr(&server)).unwrap();
    let root = c.mount("/mem").unwrap();
    let created: CreateRes = c
        .nfs(
            NfsProc3::Create,
            &CreateArgs {
                where_: DirOpArgs3 {
                    dir: root.as_fh3(),
                    name: b"big",
                },
                how: CreateHow3::Guarded(Sattr3 {
                    mode: Some(0o644),
                    ..Default::default()
                }),
            },
        )
        .unwrap();
    let CreateRes::Ok(ok) = created else {
        panic!("create: {created:?}")
    };
    let fh = ok.obj.unwrap();
    let data = vec![0x5a; READ_SIZE as usize];
    let written: WriteRes = c
        .nfs(
            NfsProc3::Write,
            &WriteArgs {
                file: fh.as_fh3(),
                offset: 0,
                count: READ_SIZE,
                stable: StableHow::FileSync,
                data: &data,
            },
        )
        .unwrap();
    let WriteRes::Ok(ok) = written else {
        panic!("write: {written:?}")
    };
    assert_eq!(ok.count, READ_SIZE);
    (server, fh)
}

/// A record-marked READ of `READ_SIZE` bytes at offset 0 of `fh` (AUTH_NONE).
fn read_call(xid: u32, fh: &FileHandle) -> Vec<u8> {
    let mut args = Vec::new();
    ReadArgs {
        file: fh.as_fh3(),
        offset: 0,
        count: READ_SIZE,
    }
    .encode(&mut Writer::new(&mut args));
    let mut out = Vec::new();
    encode_call(
        xid,
        NFS,
        3,
        NfsProc3::Read as u32,
        &Auth::None,
        &args,
        &mut out,
    );
    out
}

/// The in-flight limit counts calls, not bytes: 64 calls in flight may be 64
/// READ replies of 1 MiB. A client that pipelines them and never reads must
/// still make the server hold only about the output cap (plus one reply per
/// service thread, each producing a reply it read before the cap was reached),
/// while others are served; and reading it resumes once it reads.
#[test]
fn client_that_never_reads_large_replies_holds_bounded_output() {
    const READS: u32 = 64;
    let mut config = config();
    config.limits.max_in_flight_per_conn = READS;
    config.limits.max_output_per_conn = OUTPUT_CAP;
    config.send_buffer_size = Some(4096);
    let (server, fh) = start_with_big_file(config);
    let addr = addr(&server);
    let bound = OUTPUT_CAP as u64 + THREADS as u64 * MAX_READ_REPLY;

    // Every READ in one write (a few KiB: it fits the socket buffers), then
    // nothing read.
    let mut s = connect_small_rcvbuf(addr);
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut batch = Vec::new();
    for xid in 0..READS {
        batch.extend(read_call(xid, &fh));
    }
    s.write_all(&batch).unwrap();

    // Let the server read and answer all it will (it stops reading, or, were
    // nothing bounding it, buffers past the bound); then it holds no thread.
    wait_until(Duration::from_secs(10), || {
        let stats = server.stats();
        stats.throttled > 0 || stats.peak_output_buffered > bound
    });
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        wait_until(Duration::from_secs(10), || all_threads_idle(&server)),
        "{:?}",
        server.scheduler().stats()
    );
    let stats = server.stats();
    assert!(
        stats.peak_output_buffered <= bound,
        "{} bytes buffered for a client that reads nothing, over the cap {OUTPUT_CAP} \
         plus {THREADS} replies: {stats:?}",
        stats.peak_output_buffered
    );
    assert!(stats.throttled > 0, "reading never stopped: {stats:?}");
    assert!(
        stats.in_flight < u64::from(READS),
        "every READ was read: {stats:?}"
    );

    // Meanwhile another client is served.
    let mut other = connect(addr);
    for xid in 0..100 {
        null_ok(&mut other, xid, NFS);
    }

    // Once the client reads, the server reads it again and answers every READ
    // in full: no resume was lost.
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut seen = vec![false; READS as usize];
    for i in 0..READS {
        let record = read_record(&mut s).unwrap_or_else(|e| panic!("after {i} replies: {e}"));
        let reply = rnfs_rpc::decode_reply(&record).unwrap();
        let res = ReadRes::decode(&mut Reader::new(reply.results)).unwrap();
        let ReadRes::Ok(ok) = res else {
            panic!("read: {res:?}")
        };
        assert_eq!(ok.data.len(), READ_SIZE as usize);
        let xid = reply.header.xid as usize;
        assert!(!std::mem::replace(&mut seen[xid], true), "xid {xid} twice");
    }
    let stats = server.stats();
    assert!(stats.peak_output_buffered <= bound, "{stats:?}");
    server.shutdown();
}
