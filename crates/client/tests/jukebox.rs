//! NFS3ERR_JUKEBOX ("try again later": the server did nothing) is retried,
//! as the Linux client does: synchronous calls, pending READs and WRITEs, and
//! write-behind lose nothing to it. A proxy in front of an in-process rnfs
//! server answers chosen calls with it (`support/jukebox_proxy.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod common;
#[path = "support/jukebox_proxy.rs"]
mod jukebox_proxy;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Backend, TestServer};
use jukebox_proxy::{jukebox_proxy, JukeboxPlan, Silence};
use rnfs_client::{
    ClientOptions, Credential, DirtyBudget, IoConfig, NfsClient, NfsError, NfsFile, RpcClient,
};
use rnfs_nfs3::{CreateHow3, FileHandle, Nfsstat3, Sattr3};

const GETATTR: u32 = 1;
const READ: u32 = 6;
const WRITE: u32 = 7;
const CREATE: u32 = 8;
const COMMIT: u32 = 21;

/// A client of `server` through a proxy that follows `plan`.
fn client_through(
    server: &TestServer,
    plan: &Arc<JukeboxPlan>,
    options: ClientOptions,
) -> NfsClient {
    let port = server.url.nfs_port.unwrap();
    let proxy = jukebox_proxy(SocketAddr::from(([127, 0, 0, 1], port)), Arc::clone(plan));
    NfsClient::new(
        RpcClient::connect(proxy, options).unwrap(),
        Credential::root(),
    )
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
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

#[test]
fn jukebox_replies_are_retried_and_write_behind_loses_no_data() {
    let server = TestServer::rnfs(Backend::Local);
    let direct = server.session();
    let dir = server.scratch(&direct);
    let plan = JukeboxPlan::new(&[
        (CREATE, 1),
        (GETATTR, 2),
        (WRITE, 6),
        (COMMIT, 1),
        (READ, 2),
    ]);
    let c = client_through(&server, &plan, ClientOptions::default());

    // CREATE is not idempotent: the retry is what creates the file.
    let how = CreateHow3::Guarded(Sattr3::default());
    let fh = c.create(&dir, b"f", how).unwrap().handle.unwrap();
    let attr = c.getattr(&fh).unwrap();
    let config = IoConfig {
        wsize: 64 << 10,
        max_outstanding_writes: 4,
        ..IoConfig::default()
    };
    let budget = DirtyBudget::new(DirtyBudget::DEFAULT_MAX_BYTES);
    let f = NfsFile::new(c.clone(), FileHandle::clone(&fh), &attr, config, budget);
    let data = pattern(1 << 20);
    for (i, chunk) in data.chunks(64 << 10).enumerate() {
        f.write(i as u64 * (64 << 10), chunk).unwrap();
    }
    f.fsync().unwrap();
    let stats = f.stats();
    assert_eq!(stats.write_errors, 0, "{stats:?}");
    assert!(stats.writes_sent >= 16, "{stats:?}");
    f.close().unwrap();
    assert_eq!(c.getattr(&fh).unwrap().size, 1 << 20);
    assert_eq!(read_direct(direct.nfs(), &fh), data);

    // A pending READ and a synchronous one, each answered JUKEBOX first.
    let mut buf = vec![0u8; 4096];
    let got = c
        .start_read(&fh, 0, 4096)
        .unwrap()
        .wait_into(&mut buf)
        .unwrap();
    assert_eq!((got.count, &buf[..]), (4096, &data[..4096]));
    let got = c.read(&fh, 8192, &mut buf).unwrap();
    assert_eq!((got.count, &buf[..]), (4096, &data[8192..12288]));

    for (proc_, want) in [
        (CREATE, 1),
        (GETATTR, 2),
        (WRITE, 6),
        (COMMIT, 1),
        (READ, 2),
    ] {
        assert_eq!(plan.answered(proc_), want, "procedure {proc_}");
    }
}

#[test]
fn a_soft_client_gives_up_on_jukebox_at_its_time_limit_a_hard_one_never() {
    let server = TestServer::rnfs(Backend::Memory);
    let root = server.session().root();
    // Soft: 200 ms x (1 + 1) = 400 ms of patience; pauses of 100 and 200 ms
    // fit, the third (400 ms) does not.
    let soft = ClientOptions {
        timeout: Duration::from_millis(200),
        retrans: 1,
        hard: false,
        ..ClientOptions::default()
    };
    let plan = JukeboxPlan::always(&[(GETATTR, 1000)]);
    let c = client_through(&server, &plan, soft.clone());
    let start = Instant::now();
    let got = c.getattr(&root);
    let took = start.elapsed();
    assert!(
        matches!(got, Err(NfsError::Status(Nfsstat3::Jukebox))),
        "{got:?}"
    );
    // A timeout to a POSIX caller, never "try again" (EAGAIN): a WRITE
    // given up on may have carried data.
    assert_eq!(got.unwrap_err().errno(), libc::ETIMEDOUT);
    assert_eq!(plan.answered(GETATTR), 3);
    assert!(took >= Duration::from_millis(300), "{took:?}");

    // Hard: past the soft limit (100 + 200 + 400 + 800 ms), then the answer.
    let plan = JukeboxPlan::always(&[(GETATTR, 5)]);
    let hard = ClientOptions { hard: true, ..soft };
    let c = client_through(&server, &plan, hard);
    let start = Instant::now();
    c.getattr(&root).unwrap();
    assert_eq!(plan.answered(GETATTR), 5);
    assert!(
        start.elapsed() >= Duration::from_millis(1500),
        "{:?}",
        start.elapsed()
    );
}

/// A truncate whose SETATTR fails leaves the file as it was: the data written
/// beyond the new size is still the application's, written back at the next
/// `fsync`, and the size does not shrink. It used to be dropped before the
/// SETATTR and never put back, and that `fsync` succeeded with the server
/// holding the new bytes below the cut and the old ones above it.
#[test]
fn a_truncate_whose_setattr_fails_loses_no_data() {
    const SETATTR: u32 = 2;
    const NFS3ERR_IO: u32 = 5;
    let server = TestServer::rnfs(Backend::Local);
    let direct = server.session();
    let dir = server.scratch(&direct);
    let how = CreateHow3::Unchecked(Sattr3::default());
    let fh = direct
        .nfs()
        .create(&dir, b"t", how)
        .unwrap()
        .handle
        .unwrap();
    direct
        .nfs()
        .write(&fh, 0, &[b'A'; 8192], rnfs_nfs3::StableHow::FileSync)
        .unwrap();
    let plan = JukeboxPlan::failing(NFS3ERR_IO, &[(SETATTR, 2)]);
    let c = client_through(&server, &plan, ClientOptions::default());
    let attr = c.getattr(&fh).unwrap();
    // Held dirty (no early WRITEs), then sent early: the data beyond the
    // cut is in flight or acknowledged UNSTABLE when the truncate comes.
    for (round, max_outstanding_writes) in [(1u8, 0), (2, 4)] {
        let config = IoConfig {
            wsize: 4096,
            max_outstanding_writes,
            ..IoConfig::default()
        };
        let budget = DirtyBudget::new(DirtyBudget::DEFAULT_MAX_BYTES);
        let f = NfsFile::new(c.clone(), FileHandle::clone(&fh), &attr, config, budget);
        let data: Vec<u8> = pattern(8192).iter().map(|b| b ^ round).collect();
        f.write(0, &data).unwrap();
        let e = f.truncate(4096).unwrap_err();
        assert!(matches!(e, NfsError::Status(Nfsstat3::Io)), "{e:?}");
        assert_eq!(
            f.size(),
            8192,
            "the size shrank though the file was not cut"
        );
        f.fsync().unwrap();
        f.close().unwrap();
        assert_eq!(read_direct(direct.nfs(), &fh), data, "round {round}");
    }
    assert_eq!(plan.answered(SETATTR), 2);
}

/// A soft client's truncate whose SETATTR got no answer is decided by the
/// file's size on the server: cut to the size asked for, the truncate
/// stands (putting back the data beyond would leave a file no sequence of
/// writes makes: the server's bytes between the cut and that data gone);
/// not cut, it is undone and the caller gets the timeout.
#[test]
fn a_truncate_whose_setattr_goes_unanswered_is_decided_by_the_servers_size() {
    const SETATTR: u32 = 2;
    let server = TestServer::rnfs(Backend::Local);
    let direct = server.session();
    let dir = server.scratch(&direct);
    let soft = ClientOptions {
        timeout: Duration::from_millis(200),
        retrans: 1,
        hard: false,
        ..ClientOptions::default()
    };
    let config = IoConfig {
        wsize: 4096,
        max_outstanding_writes: 0,
        ..IoConfig::default()
    };
    for (name, silence) in [
        (&b"carried-out"[..], Silence::Reply),
        (b"lost", Silence::Call),
    ] {
        let how = CreateHow3::Unchecked(Sattr3::default());
        let fh = direct
            .nfs()
            .create(&dir, name, how)
            .unwrap()
            .handle
            .unwrap();
        let stable = pattern(12288);
        direct
            .nfs()
            .write(&fh, 0, &stable, rnfs_nfs3::StableHow::FileSync)
            .unwrap();
        let plan = JukeboxPlan::unanswered(silence, &[(SETATTR, 1)]);
        let c = client_through(&server, &plan, soft.clone());
        let attr = c.getattr(&fh).unwrap();
        let budget = DirtyBudget::new(DirtyBudget::DEFAULT_MAX_BYTES);
        let f = NfsFile::new(
            c.clone(),
            FileHandle::clone(&fh),
            &attr,
            config.clone(),
            budget,
        );
        // Only the last 4 KiB are the client's; the middle is the server's.
        f.write(8192, &[b'N'; 4096]).unwrap();
        let got = f.truncate(4096);
        assert_eq!(plan.answered(SETATTR), 1);
        let mut want = stable[..4096].to_vec();
        match silence {
            Silence::Reply => {
                assert_eq!(got.unwrap().size, 4096);
                assert_eq!(f.size(), 4096);
            }
            Silence::Call => {
                assert_eq!(got.unwrap_err().errno(), libc::ETIMEDOUT);
                assert_eq!(f.size(), 12288, "the data beyond the cut was dropped");
                want.extend_from_slice(&stable[4096..8192]);
                want.extend_from_slice(&[b'N'; 4096]);
            }
        }
        f.fsync().unwrap();
        f.close().unwrap();
        assert_eq!(
            read_direct(direct.nfs(), &fh),
            want,
            "{}",
            String::from_utf8_lossy(name)
        );
    }
}

/// A failed WRITE is counted when its reply arrives, before any call takes
/// its error (which the next `fsync` does, once): a layer reporting each
/// failure to several openers (the FUSE mount) compares counts, so an
/// opener's `fsync` that returns after the failure sees it whichever caller
/// takes the error.
#[test]
fn write_back_failures_count_when_the_reply_arrives() {
    const NFS3ERR_NOSPC: u32 = 28;
    let server = TestServer::rnfs(Backend::Local);
    let direct = server.session();
    let dir = server.scratch(&direct);
    let how = CreateHow3::Unchecked(Sattr3::default());
    let fh = direct
        .nfs()
        .create(&dir, b"w", how)
        .unwrap()
        .handle
        .unwrap();
    let plan = JukeboxPlan::failing(NFS3ERR_NOSPC, &[(WRITE, 1)]);
    let c = client_through(&server, &plan, ClientOptions::default());
    let attr = c.getattr(&fh).unwrap();
    let config = IoConfig {
        wsize: 4096,
        max_outstanding_writes: 4,
        ..IoConfig::default()
    };
    let budget = DirtyBudget::new(DirtyBudget::DEFAULT_MAX_BYTES);
    let f = NfsFile::new(c.clone(), FileHandle::clone(&fh), &attr, config, budget);
    assert_eq!(f.write_back_failures(), (0, 0));
    // A whole chunk: sent at once.
    f.write(0, &[7; 4096]).unwrap();
    // GETATTR's flush collects the reply and takes no error.
    f.getattr().unwrap();
    assert_eq!(plan.answered(WRITE), 1);
    assert_eq!(f.write_back_failures(), (1, libc::ENOSPC));
    let e = f.fsync().unwrap_err();
    assert_eq!(e.errno(), libc::ENOSPC);
    f.fsync().unwrap();
    assert_eq!(f.write_back_failures(), (1, libc::ENOSPC));
}
