//! Shared helpers for the server integration tests: plain blocking `std` clients.
#![allow(dead_code)] // Each test binary uses a different subset.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use rnfs_rpc::{decode_reply, encode_call, Auth, ReplyStatus};
use rnfs_sched::{Config, PoolMode};
use std::sync::Arc;

use rnfs_client::SyncConnection;
use rnfs_nfs3::{DirOpArgs3, FileHandle, LookupArgs, LookupRes, NfsProc3};
use rnfs_server::nfs::exports::BackendKind;
use rnfs_server::nfs::ExportConfig;
use rnfs_server::{Server, ServerConfig};
use rnfs_vfs::Filesystem;

pub(crate) const NFS: u32 = 100_003;
pub(crate) const MOUNT: u32 = 100_005;
pub(crate) const NFSACL: u32 = 100_227;

/// Service threads in test servers.
pub(crate) const THREADS: usize = 4;

/// A loopback config with a small fixed thread pool.
pub(crate) fn config() -> ServerConfig {
    let mut c = ServerConfig::new(vec!["127.0.0.1:0".parse().unwrap()]);
    let mut sched = Config::fixed(THREADS);
    sched.name = "rnfs-test".into();
    sched.pool_mode = PoolMode::Global;
    sched.pin_threads = false;
    c.sched = sched;
    c
}

pub(crate) fn start() -> Server {
    Server::start(config()).unwrap()
}

pub(crate) fn addr(server: &Server) -> SocketAddr {
    server.local_addrs()[0]
}

pub(crate) fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// A record-marked call with AUTH_NONE and no arguments.
pub(crate) fn call_bytes(xid: u32, prog: u32, vers: u32, proc_: u32) -> Vec<u8> {
    let mut out = Vec::new();
    encode_call(xid, prog, vers, proc_, &Auth::None, &[], &mut out);
    out
}

/// Reads one single-fragment record.
pub(crate) fn read_record(s: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut mark = [0; 4];
    s.read_exact(&mut mark)?;
    let mark = u32::from_be_bytes(mark);
    assert!(mark & 0x8000_0000 != 0, "test replies are single-fragment");
    let mut body = vec![0; (mark & 0x7FFF_FFFF) as usize];
    s.read_exact(&mut body)?;
    Ok(body)
}

/// Sends one call and returns the reply's xid, status and results.
pub(crate) fn call(
    s: &mut TcpStream,
    xid: u32,
    prog: u32,
    vers: u32,
    proc_: u32,
) -> (u32, ReplyStatus, Vec<u8>) {
    s.write_all(&call_bytes(xid, prog, vers, proc_)).unwrap();
    let record = read_record(s).unwrap();
    let reply = decode_reply(&record).unwrap();
    (
        reply.header.xid,
        reply.header.status,
        reply.results.to_vec(),
    )
}

/// A NULL call that must succeed with empty results.
pub(crate) fn null_ok(s: &mut TcpStream, xid: u32, prog: u32) {
    let (got_xid, status, results) = call(s, xid, prog, 3, 0);
    assert_eq!(got_xid, xid);
    assert_eq!(status, ReplyStatus::Success);
    assert!(results.is_empty());
}

/// Polls `cond` every millisecond until it holds or `timeout` passes.
pub(crate) fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Whether every service thread is idle (none is held by a connection).
pub(crate) fn all_threads_idle(server: &Server) -> bool {
    let st = server.scheduler().stats().total();
    st.threads > 0 && st.idle == st.threads
}

/// Waits for the server to close `s`: EOF or a reset, not a timeout.
pub(crate) fn assert_closed_by_server(s: &mut TcpStream) {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => continue, // e.g. replies to calls before the bad one
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return,
            Err(e) => panic!("expected the server to close the connection, got {e}"),
        }
    }
}

/// Whether `s` is still open with nothing to read (a short read timeout expires).
pub(crate) fn still_open(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let mut buf = [0; 16];
    let open = matches!(s.read(&mut buf), Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    open
}

/// Opens an export's backend (memory or local), as `rnfs serve` does.
pub(crate) fn opener(c: &ExportConfig) -> Result<Arc<dyn Filesystem>, String> {
    match c.backend {
        BackendKind::Memory => Ok(Arc::new(rnfs_vfs::memory::MemoryFs::new(u64::from(
            c.export_id(),
        )))),
        BackendKind::Local => rnfs_vfs::local::LocalFs::open(&c.path, Default::default())
            .map(|fs| Arc::new(fs) as Arc<dyn Filesystem>)
            .map_err(|e| e.to_string()),
    }
}

/// LOOKUP of `name` in `dir`.
pub(crate) fn lookup(c: &mut SyncConnection, dir: &FileHandle, name: &[u8]) -> LookupRes {
    c.nfs(
        NfsProc3::Lookup,
        &LookupArgs {
            what: DirOpArgs3 {
                dir: dir.as_fh3(),
                name,
            },
        },
    )
    .unwrap()
}
