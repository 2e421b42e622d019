//! `NfsFile` operations racing with calls still on the wire: a proxy in
//! front of an in-process rnfs server holds the calls of one procedure for a
//! while (`support/holding_proxy.rs`), so that later calls reach the server
//! first, and the test checks that the client's view and the server's agree
//! once everything returned.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod common;
#[path = "support/holding_proxy.rs"]
mod holding_proxy;

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{Backend, TestServer};
use holding_proxy::{holding_proxy_of, Hold};
use rnfs_client::{
    ClientOptions, Credential, DirtyBudget, IoConfig, NfsClient, NfsFile, RpcClient,
};
use rnfs_nfs3::{CreateHow3, Fattr3, FileHandle, Sattr3, StableHow};

const GETATTR: u32 = 1;
const SETATTR: u32 = 2;

/// A client of `server` through a proxy that holds what `hold` names.
fn client_through(server: &TestServer, hold: &Arc<Hold>) -> NfsClient {
    client_through_all(server, vec![Arc::clone(hold)])
}

/// A client of `server` through a proxy with several `holds`.
fn client_through_all(server: &TestServer, holds: Vec<Arc<Hold>>) -> NfsClient {
    let port = server.url.nfs_port.unwrap();
    let proxy = holding_proxy_of(SocketAddr::from(([127, 0, 0, 1], port)), holds);
    NfsClient::new(
        RpcClient::connect(proxy, ClientOptions::default()).unwrap(),
        Credential::root(),
    )
}

/// `fh` opened through `nfs` (default I/O, no dirty budget), shareable
/// between threads.
fn shared_file(nfs: NfsClient, fh: FileHandle, attr: &Fattr3) -> Arc<NfsFile> {
    Arc::new(NfsFile::new(
        nfs,
        fh,
        attr,
        IoConfig::default(),
        DirtyBudget::new(0),
    ))
}

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 13) as u8)
        .collect()
}

/// A new file holding `data`, written straight to the server.
fn file_with(server: &TestServer, nfs: &NfsClient, name: &str, data: &[u8]) -> FileHandle {
    let s = server.session();
    let dir = server.scratch(&s);
    let c = nfs
        .create(
            &dir,
            name.as_bytes(),
            CreateHow3::Unchecked(Sattr3::default()),
        )
        .unwrap();
    let fh = c
        .handle
        .unwrap_or_else(|| nfs.lookup(&dir, name.as_bytes()).unwrap().0);
    nfs.write(&fh, 0, data, StableHow::FileSync).unwrap();
    fh
}

/// The whole file, read without the proxy.
fn read_direct(nfs: &NfsClient, fh: &FileHandle) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let got = nfs.read(fh, out.len() as u64, &mut buf).unwrap();
        out.extend_from_slice(&buf[..got.count]);
        if got.count == 0 || got.eof {
            return out;
        }
    }
}

/// The whole file as `f` reads it.
fn read_all(f: &NfsFile) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 4096];
    loop {
        let n = f.read(out.len() as u64, &mut buf).unwrap();
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&buf[..n]);
    }
}

fn wait_for(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(1));
    }
}

/// A write made while a truncate's SETATTR is on the wire comes after the
/// truncate: its data must not reach the server first, where the SETATTR
/// would cut it while the client goes on believing the file holds it (the
/// local backend acknowledges WRITEs UNSTABLE, so the client keeps the data
/// until a COMMIT, past the SETATTR's reply).
#[test]
fn a_write_during_a_truncate_is_not_cut_by_its_setattr() {
    let server = TestServer::rnfs(Backend::Local);
    let direct = server.session().nfs().clone();
    let fh = file_with(&server, &direct, "f", &pattern(8000, 1));
    let hold = Hold::new(SETATTR, Duration::from_millis(500));
    let nfs = client_through(&server, &hold);
    let attr = nfs.getattr(&fh).unwrap();
    let f = shared_file(nfs, fh, &attr);
    let truncate = thread::spawn({
        let f = Arc::clone(&f);
        move || f.truncate(1000)
    });
    wait_for("the SETATTR", || hold.held() == 1);
    // The truncate has started; this write (and its WRITE) comes after it.
    f.write(2000, &[7; 100]).unwrap();
    f.flush().unwrap();
    let attr = truncate.join().unwrap().unwrap();
    f.fsync().unwrap();
    let mut want = pattern(1000, 1);
    want.resize(2000, 0);
    want.extend_from_slice(&[7; 100]);
    let client_has = read_all(&f);
    let server_has = read_direct(&direct, &fh);
    assert_eq!(
        (client_has.len(), server_has.len()),
        (want.len(), want.len()),
        "sizes (client, server): the write reached the server before the \
         SETATTR, which cut it (the truncate said {} bytes)",
        attr.size
    );
    assert!(client_has == want, "the client's bytes");
    assert!(server_has == want, "the server's bytes");
}

/// A GETATTR the server answered before a truncate, whose reply comes back
/// after the truncate returned, does not set the file's size back: the file
/// once went on believing it held 8000 bytes, and read them.
#[test]
fn a_getattr_answered_before_a_truncate_does_not_undo_it() {
    let server = TestServer::rnfs(Backend::Local);
    let direct = server.session().nfs().clone();
    let fh = file_with(&server, &direct, "f", &pattern(8000, 1));
    let hold = Hold::replies(GETATTR, Duration::from_millis(500));
    let nfs = client_through(&server, &hold);
    let attr = direct.getattr(&fh).unwrap();
    let f = shared_file(nfs, fh, &attr);
    let getattr = thread::spawn({
        let f = Arc::clone(&f);
        move || f.getattr()
    });
    wait_for("the GETATTR", || hold.held() == 1);
    // The server answers at once; the proxy holds the reply.
    thread::sleep(Duration::from_millis(100));
    assert_eq!(f.truncate(1000).unwrap().size, 1000);
    let seen = getattr.join().unwrap().unwrap();
    assert_eq!(
        (f.size(), seen.size),
        (1000, 1000),
        "the GETATTR's old size was taken after the truncate"
    );
    assert_eq!(read_all(&f), pattern(1000, 1));
}

/// A GETATTR sent while a truncate's SETATTR is on its way, whose reply
/// comes back after the truncate returned, does not set the size back
/// either: the truncate's end counts as a change too.
#[test]
fn a_getattr_sent_during_a_truncate_does_not_undo_it() {
    let server = TestServer::rnfs(Backend::Local);
    let direct = server.session().nfs().clone();
    let fh = file_with(&server, &direct, "f", &pattern(8000, 1));
    let setattrs = Hold::new(SETATTR, Duration::from_millis(300));
    let getattrs = Hold::replies(GETATTR, Duration::from_millis(700));
    let nfs = client_through_all(&server, vec![Arc::clone(&setattrs), Arc::clone(&getattrs)]);
    let attr = direct.getattr(&fh).unwrap();
    let f = shared_file(nfs, fh, &attr);
    let truncate = thread::spawn({
        let f = Arc::clone(&f);
        move || f.truncate(1000)
    });
    wait_for("the SETATTR", || setattrs.held() == 1);
    // The server answers 8000 now; the reply comes after the truncate.
    let seen = f.getattr().unwrap();
    assert_eq!(truncate.join().unwrap().unwrap().size, 1000);
    assert_eq!(getattrs.held(), 1);
    assert_eq!(
        (f.size(), seen.size),
        (1000, 1000),
        "the GETATTR's old size was taken after the truncate"
    );
}
