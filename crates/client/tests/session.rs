//! Mounting by URL and the typed calls, against the test server.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod common;

use common::TestServer;
use rnfs_client::{NfsError, NfsUrl, Session};
use rnfs_nfs3::{CreateHow3, Ftype3, Nfsstat3, Sattr3, StableHow};

#[test]
fn mounts_the_longest_export_and_resolves_the_rest() {
    let server = TestServer::start();
    let s = server.session();
    let dir = server.scratch(&s);
    let sub = s.nfs().mkdir(&dir, b"sub", &Sattr3::default()).unwrap();
    assert!(sub.handle.is_some());
    let page = s
        .nfs()
        .readdirplus(&s.root(), 0, [0; 8], 4096, 65536)
        .unwrap();
    let entry = page
        .entries
        .into_iter()
        .find(|e| e.handle == Some(dir))
        .unwrap();
    let dir_name = String::from_utf8(entry.name).unwrap();
    let url = server.url.join(&format!("{dir_name}/sub")).unwrap();
    let (s2, rest) =
        Session::connect(&url, Default::default(), rnfs_client::Credential::root()).unwrap();
    assert_eq!(s2.export(), server.url.path);
    assert_eq!(rest, format!("{dir_name}/sub"));
    let (fh, attr) = s2.resolve(&rest).unwrap();
    assert_eq!(Some(fh), sub.handle);
    assert_eq!(attr.ftype, Ftype3::Dir);
}

#[test]
fn typed_calls_round_trip_data_and_map_errors() {
    let server = TestServer::start();
    let s = server.session();
    let dir = server.scratch(&s);
    let f = s
        .nfs()
        .create(&dir, b"f", CreateHow3::Guarded(Sattr3::default()))
        .unwrap()
        .handle
        .unwrap();
    let w = s
        .nfs()
        .write(&f, 0, b"hello world", StableHow::Unstable)
        .unwrap();
    assert_eq!(w.count, 11);
    let (verf, _) = s.nfs().commit(&f, 0, 0).unwrap();
    assert_eq!(verf, w.verf);
    let mut buf = [0u8; 64];
    let r = s.nfs().read(&f, 6, &mut buf).unwrap();
    assert_eq!(&buf[..r.count], b"world");
    assert!(r.eof);
    let err = s
        .nfs()
        .create(&dir, b"f", CreateHow3::Guarded(Sattr3::default()))
        .unwrap_err();
    assert!(matches!(err, NfsError::Status(Nfsstat3::Exist)), "{err:?}");
    assert_eq!(err.errno(), libc::EEXIST);
    let err = s.nfs().lookup(&dir, b"missing").unwrap_err();
    assert_eq!(err.errno(), libc::ENOENT);
    assert_eq!(err.to_string(), "No such file or directory (os error 2)");
}

#[test]
fn unknown_export_is_refused() {
    let server = TestServer::rnfs(common::Backend::Memory);
    let mut url = server.url.clone();
    url.path = "/nope".into();
    let err =
        Session::connect(&url, Default::default(), rnfs_client::Credential::root()).unwrap_err();
    assert!(matches!(err, NfsError::Mount(_)), "{err:?}");
    let _ = NfsUrl::parse("nfs://x/y").unwrap();
}

#[test]
fn unmount_returns_soon_when_the_server_is_gone() {
    let mut server = TestServer::rnfs(common::Backend::Memory);
    assert!(server.is_in_process());
    // A hard session would retry its own calls for ever; the advisory UMNT
    // must not.
    let options = rnfs_client::ClientOptions {
        hard: true,
        ..Default::default()
    };
    let session = server.session_with(options);
    server.stop();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        session.unmount();
        let _ = done.send(());
    });
    assert!(
        finished
            .recv_timeout(std::time::Duration::from_secs(20))
            .is_ok(),
        "unmount still waiting for a stopped server after 20 s"
    );
}
