//! `rnfs bench load` and `rnfs bench echo-server` against in-process servers:
//! every op runs clean against rnfs, the echo server answers NULL, and the
//! failures a user meets (a wrong export, a server that hangs up) end the run
//! with a clear error instead of a hang.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rnfs_bench::echo::EchoServer;
use rnfs_bench::load::{self, LoadError, LoadOp, LoadParams, LoadResult};
use rnfs_client::{ClientOptions, Credential, NfsUrl, Session};
use rnfs_server::nfs::exports::{Access, BackendKind, ExportConfig, Exports, Squash};
use rnfs_server::nfs::{self, HandleKey};
use rnfs_server::{Server, ServerConfig};
use rnfs_vfs::Filesystem;

/// An rnfs server with one memory-backed export at `/export`.
struct TestServer {
    server: Option<Server>,
    _dir: tempfile::TempDir,
}

impl TestServer {
    fn start() -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let mut c = ExportConfig::new(dir.path());
        c.mount_path = Some("/export".into());
        c.backend = BackendKind::Memory;
        c.access = Access::Rw;
        c.squash = Squash::None;
        let exports = Exports::new(
            &[c],
            Box::new(|c: &ExportConfig| {
                Ok(
                    Arc::new(rnfs_vfs::memory::MemoryFs::new(u64::from(c.export_id())))
                        as Arc<dyn Filesystem>,
                )
            }),
        )
        .unwrap();
        let d = nfs::dispatcher(Arc::new(exports), HandleKey::ephemeral().unwrap()).unwrap();
        let mut config = ServerConfig::new(vec!["127.0.0.1:0".parse().unwrap()]);
        let mut sched = rnfs_sched::Config::fixed(4);
        sched.name = "load-test".into();
        sched.pool_mode = rnfs_sched::PoolMode::Global;
        sched.pin_threads = false;
        config.sched = sched;
        config.drc = Some(nfs::drc_config());
        let server = Server::start_with_dispatcher(config, Arc::new(d)).unwrap();
        TestServer {
            server: Some(server),
            _dir: dir,
        }
    }

    fn port(&self) -> u16 {
        self.server.as_ref().unwrap().local_addrs()[0].port()
    }

    fn url(&self, path: &str) -> String {
        format!("nfs://127.0.0.1{path}?nfsport={}", self.port())
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown();
        }
    }
}

/// Short runs: 2 connections x 4 calls in flight, 0.3 s measured.
fn params(url: String, op: LoadOp) -> LoadParams {
    let mut p = LoadParams::new(url, op);
    p.connections = 2;
    p.depth = 4;
    p.warmup = Duration::from_millis(100);
    p.duration = Duration::from_millis(300);
    p.file_size = 1 << 20;
    p.dir_entries = 100;
    p.commit_every = 16;
    p.server_pid = Some(std::process::id());
    p.dma_latency = false;
    p
}

fn assert_clean(r: &LoadResult) {
    assert!(r.calls > 0, "{r}");
    assert_eq!(r.error_calls, 0, "{r}");
    assert!(r.errors.is_empty(), "{r}");
    assert_eq!(r.errors_outside_window, 0, "{r}");
    let l = &r.latency_us;
    assert!(l.min > 0.0, "{r}");
    assert!(l.min <= l.p50 && l.p50 <= l.p90 && l.p90 <= l.p99, "{r}");
    assert!(l.p99 <= l.p999 && l.p999 <= l.max, "{r}");
    assert!((r.calls_per_s - r.calls as f64 / 0.3).abs() < 1e-6);
    let server = r.server.expect("server CPU from /proc/self");
    assert_eq!(server.pid, std::process::id());
    assert!(server.rss_kib_end > 0);
    assert!(r.loadgen.cpu_s > 0.0, "{r}");
    let cdf = &r.latency_cdf;
    assert!(!cdf.is_empty() && cdf.len() <= 200);
    assert_eq!(cdf.last().unwrap()[1], 1.0);
}

fn run_op(op: LoadOp) -> LoadResult {
    let s = TestServer::start();
    let r = load::run(&params(s.url("/export"), op)).unwrap();
    assert_clean(&r);
    assert_eq!(r.op, op);
    r
}

#[test]
fn null_getattr_access_lookup_run_clean() {
    for op in [
        LoadOp::Null,
        LoadOp::Getattr,
        LoadOp::Access,
        LoadOp::Lookup,
    ] {
        let r = run_op(op);
        assert_eq!(r.mb_per_s, 0.0);
        let name = match op {
            LoadOp::Null => "NULL",
            LoadOp::Getattr => "GETATTR",
            LoadOp::Access => "ACCESS",
            _ => "LOOKUP",
        };
        assert_eq!(r.calls_by_proc.get(name), Some(&r.calls), "{r}");
    }
}

#[test]
fn read_and_write_move_bytes_and_writes_commit() {
    let r = run_op(LoadOp::Read);
    assert!(
        (r.mb_per_s * 1e6 * 0.3 - r.calls as f64 * 4096.0).abs() < 1.0,
        "{r}"
    );
    let w = run_op(LoadOp::Write);
    let writes = w.calls_by_proc["WRITE"];
    let commits = w.calls_by_proc.get("COMMIT").copied().unwrap_or(0);
    assert!(commits > 0, "{w}");
    assert_eq!(writes + commits, w.calls);
    assert!(
        (w.mb_per_s * 1e6 * 0.3 - writes as f64 * 4096.0).abs() < 1.0,
        "{w}"
    );
}

#[test]
fn create_remove_pairs_leave_no_files_behind() {
    let s = TestServer::start();
    let r = load::run(&params(s.url("/export"), LoadOp::CreateRemove)).unwrap();
    assert_clean(&r);
    // A pair's two RPCs may fall on either side of the window's edges.
    for rpc in ["CREATE", "REMOVE"] {
        assert!(r.calls_by_proc[rpc].abs_diff(r.calls) <= 8, "{r}");
    }
    // Pairs in flight at the end were finished during the drain.
    let url = NfsUrl::parse(&s.url("/export")).unwrap();
    let (session, _) =
        Session::connect(&url, ClientOptions::default(), Credential::root()).unwrap();
    let top = session.resolve("rnfs-bench-load").unwrap().0;
    for conn in 0..2 {
        let dir = session
            .nfs()
            .lookup(&top, format!("cr-{conn}").as_bytes())
            .unwrap()
            .0;
        let page = session
            .nfs()
            .readdirplus(&dir, 0, [0; 8], 8192, 65536)
            .unwrap();
        let left: Vec<_> = page
            .entries
            .iter()
            .filter(|e| e.name != b"." && e.name != b"..")
            .collect();
        assert!(left.is_empty(), "cr-{conn} holds {left:?}");
    }
}

#[test]
fn readdirplus_lists_and_mix_spreads_its_calls() {
    let r = run_op(LoadOp::Readdirplus);
    assert!(r.listings > 0 && r.entries >= 100 * r.listings, "{r}");
    assert!(r.us_per_entry.unwrap() > 0.0);
    let m = run_op(LoadOp::Mix);
    for name in ["READDIRPLUS", "GETATTR", "LOOKUP", "ACCESS"] {
        assert!(m.calls_by_proc.get(name).copied().unwrap_or(0) > 0, "{m}");
    }
    // 1 : 7 : 4 : 4 per slot cycle.
    let rdp = m.calls_by_proc["READDIRPLUS"] as f64;
    let getattr = m.calls_by_proc["GETATTR"] as f64;
    assert!((getattr / rdp - 7.0).abs() < 1.0, "{m}");
}

/// With `name_width`, the directory is `dir-<K>-w<W>` and holds exactly the
/// padded names (LOOKUPs of them all succeed), and READDIRPLUS lists them;
/// a width too narrow for the count is refused before any call.
#[test]
fn padded_entry_names_make_their_own_directory() {
    let s = TestServer::start();
    for op in [LoadOp::Lookup, LoadOp::Readdirplus] {
        let mut p = params(s.url("/export"), op);
        p.name_width = 3;
        let r = load::run(&p).unwrap();
        assert_clean(&r);
        assert_eq!(r.name_width, 3);
    }
    let url = NfsUrl::parse(&s.url("/export")).unwrap();
    let (session, _) =
        Session::connect(&url, ClientOptions::default(), Credential::root()).unwrap();
    let dir = session.resolve("rnfs-bench-load/dir-100-w3").unwrap().0;
    let page = session
        .nfs()
        .readdirplus(&dir, 0, [0; 8], 64 << 10, 1 << 20)
        .unwrap();
    assert!(page.eof);
    let mut names: Vec<_> = page
        .entries
        .iter()
        .filter(|e| e.name != b"." && e.name != b"..")
        .map(|e| String::from_utf8(e.name.clone()).unwrap())
        .collect();
    names.sort();
    let want: Vec<_> = (0..100).map(|i| format!("f{i:03}")).collect();
    assert_eq!(names, want);
    // The unpadded layout is another directory, untouched by these runs.
    assert!(session.resolve("rnfs-bench-load/dir-100").is_err());

    let mut p = params(s.url("/export"), LoadOp::Lookup);
    p.name_width = 1;
    let err = load::run(&p).unwrap_err();
    assert!(matches!(err, LoadError::InvalidParam(_)), "{err:?}");
    assert!(err.to_string().contains("name-width"), "{err}");
}

#[test]
fn echo_server_answers_null_calls() {
    let echo = EchoServer::start("127.0.0.1:0".parse().unwrap(), 2).unwrap();
    let port = echo.local_addr().port();
    // One raw call: the reply is an accepted SUCCESS with the call's XID.
    let mut s = TcpStream::connect(echo.local_addr()).unwrap();
    let mut call = (0x8000_0000u32 | 40).to_be_bytes().to_vec();
    for w in [0x1234_5678u32, 0, 2, 100_003, 3, 0, 0, 0, 0, 0] {
        call.extend_from_slice(&w.to_be_bytes());
    }
    s.write_all(&call).unwrap();
    let mut reply = [0u8; 28];
    s.read_exact(&mut reply).unwrap();
    let words: Vec<u32> = reply
        .chunks(4)
        .map(|c| u32::from_be_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(words, [0x8000_0018, 0x1234_5678, 1, 0, 0, 0, 0]);
    // And the load generator drives it.
    let url = format!("nfs://127.0.0.1/?nfsport={port}&nomount=1");
    let r = load::run(&params(url, LoadOp::Null)).unwrap();
    assert_clean(&r);
    echo.shutdown();
}

#[test]
fn a_wrong_export_is_a_mount_error() {
    let s = TestServer::start();
    let err = load::run(&params(s.url("/no/such/export"), LoadOp::Getattr)).unwrap_err();
    assert!(matches!(err, LoadError::Mount { .. }), "{err:?}");
    assert!(err.to_string().contains("MNT3ERR_"), "{err}");
    let err = load::run(&params(
        format!("nfs://127.0.0.1/export?nfsport={}&nomount=1", s.port()),
        LoadOp::Getattr,
    ))
    .unwrap_err();
    assert!(matches!(err, LoadError::NoMountNeedsNull), "{err:?}");
}

#[test]
fn a_server_that_hangs_up_ends_the_run_with_an_error() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let hangup = {
        let done = Arc::clone(&done);
        thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                match listener.accept() {
                    // Read the first call, then close.
                    Ok((mut c, _)) => {
                        c.set_nonblocking(false).unwrap();
                        let _ = c.read(&mut [0u8; 64]);
                    }
                    Err(_) => thread::sleep(Duration::from_millis(1)),
                }
            }
        })
    };
    let mut p = params(
        format!("nfs://127.0.0.1/?nfsport={}&nomount=1", addr.port()),
        LoadOp::Null,
    );
    p.duration = Duration::from_secs(30);
    let started = Instant::now();
    let err = load::run(&p).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(matches!(err, LoadError::ConnectionClosed { .. }), "{err:?}");
    assert!(err.to_string().contains("closed connection"), "{err}");
    done.store(true, Ordering::Relaxed);
    hangup.join().unwrap();
}

#[test]
fn idle_connections_and_two_threads() {
    let s = TestServer::start();
    let mut p = params(s.url("/export"), LoadOp::Getattr);
    p.idle_connections = 50;
    p.threads = 2;
    let r = load::run(&p).unwrap();
    assert_clean(&r);
    assert_eq!(r.idle_connections, 50);
    assert_eq!(r.threads, 2);
}
