//! Real replies, mutated on the way: a proxy between the client and an
//! in-process rnfs server applies random edits (`rnfs_xdr::fuzzing::mutate`)
//! to the results of half of the server's replies, and every call, through
//! the typed client and through an open file with write-behind, must end in a
//! result or an error within a bound: never a panic, never a hang.
//!
//! The decoders themselves are fuzzed in `rnfs-nfs3`; this covers what the
//! client does with replies that decode but say odd things (a READ longer than
//! asked, a count past the data, a directory page with strange cookies, a
//! changed write verifier).
//!
//! `MUTATION_SEED` and `MUTATION_ROUNDS` (default 150) override the run, for
//! longer searches.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod common;
#[path = "support/mutating_proxy.rs"]
mod mutating_proxy;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Backend, TestServer};
use mutating_proxy::{mutating_proxy, ProxyStats};
use rnfs_client::{
    ClientOptions, Credential, DirtyBudget, IoConfig, NfsClient, NfsError, NfsFile, RpcClient,
};
use rnfs_nfs3::{CreateHow3, FileHandle, Nfsstat3, Sattr3, StableHow};
use rnfs_xdr::fuzzing::env_or;

/// Every call must end well within this.
const BOUND: Duration = Duration::from_secs(10);

/// Runs `op`, which must end within [`BOUND`]; returns whether it succeeded.
fn bounded<T>(what: &str, op: impl FnOnce() -> Result<T, NfsError>) -> bool {
    let start = Instant::now();
    let ok = op().is_ok();
    let took = start.elapsed();
    assert!(took < BOUND, "{what} took {took:?}");
    ok
}

#[test]
fn mutated_replies_end_in_a_result_or_an_error() {
    let server = TestServer::rnfs(Backend::Memory);
    let direct = server.session();
    let dir = server.scratch(&direct);
    let nfs = direct.nfs();
    let data: Vec<u8> = (0..64 << 10).map(|i| (i * 7 % 251) as u8).collect();
    let file = nfs
        .create(&dir, b"f", CreateHow3::Unchecked(Sattr3::default()))
        .unwrap()
        .handle
        .unwrap();
    nfs.write(&file, 0, &data, StableHow::FileSync).unwrap();
    nfs.symlink(&dir, b"l", b"f", &Sattr3::default()).unwrap();
    for i in 0..20 {
        nfs.create(
            &dir,
            format!("entry-{i}").as_bytes(),
            CreateHow3::Unchecked(Sattr3::default()),
        )
        .unwrap();
    }
    let link = nfs.lookup(&dir, b"l").unwrap().0;
    let root = direct.root();

    let stats = ProxyStats::new(true);
    let port = server.url.nfs_port.unwrap();
    let proxy = mutating_proxy(
        SocketAddr::from(([127, 0, 0, 1], port)),
        env_or("MUTATION_SEED", 0x5eed_0001),
        Arc::clone(&stats),
    );
    let options = ClientOptions {
        timeout: Duration::from_secs(2),
        retrans: 1,
        ..ClientOptions::default()
    };
    let rpc = RpcClient::connect(proxy, options).unwrap();
    let client = NfsClient::new(rpc, Credential::root());
    let budget = DirtyBudget::new(64 << 20);
    let (mut ok, mut failed) = (0u32, 0u32);
    let mut tally = |succeeded: bool| {
        if succeeded {
            ok += 1;
        } else {
            failed += 1;
        }
    };
    let mut buf = vec![0u8; 16 << 10];
    for round in 0..env_or("MUTATION_ROUNDS", 150) {
        let c = &client;
        tally(bounded("getattr", || c.getattr(&file)));
        tally(bounded("lookup", || c.lookup(&dir, b"f")));
        tally(bounded("access", || c.access(&file, 0x3f)));
        tally(bounded("readlink", || c.readlink(&link)));
        tally(bounded("read", || c.read(&file, round * 512, &mut buf)));
        tally(bounded("read, pending", || {
            c.start_read(&file, 0, 4096)?.wait_into(&mut buf[..100])
        }));
        tally(bounded("readdir", || c.readdir(&dir, 0, [0; 8], 1024)));
        tally(bounded("readdirplus", || {
            c.readdirplus(&dir, 0, [0; 8], 1024, 8192)
        }));
        tally(bounded("fsstat", || c.fsstat(&root)));
        let name = format!("new-{round}");
        tally(bounded("create", || {
            c.create(
                &dir,
                name.as_bytes(),
                CreateHow3::Unchecked(Sattr3::default()),
            )
        }));
        tally(bounded("write", || {
            c.write(&file, 70_000, &data[..5000], StableHow::Unstable)
        }));
        tally(bounded("remove", || c.remove(&dir, name.as_bytes())));
        // An open file with write-behind: writes, fsync (COMMIT), read, close.
        if round % 10 == 0 {
            let opened = bounded("open", || {
                let attr = c.getattr(&file)?;
                let f = NfsFile::new(
                    c.clone(),
                    FileHandle::clone(&file),
                    &attr,
                    IoConfig {
                        wsize: 8192,
                        ..IoConfig::default()
                    },
                    Arc::clone(&budget),
                );
                let mut errors = 0;
                for (i, chunk) in data.chunks(8192).enumerate() {
                    errors += u32::from(f.write(i as u64 * 8192, chunk).is_err());
                }
                errors += u32::from(f.fsync().is_err());
                errors += u32::from(f.read(0, &mut buf).is_err());
                errors += u32::from(f.close().is_err());
                if errors == 0 {
                    Ok(())
                } else {
                    Err(NfsError::Status(Nfsstat3::Io))
                }
            });
            tally(opened);
        }
    }
    let (replies, mutated) = (
        stats.replies.load(Ordering::Relaxed),
        stats.mutated.load(Ordering::Relaxed),
    );
    println!("{ok} calls succeeded, {failed} failed; {mutated} of {replies} replies mutated");
    // Not vacuous: replies were mutated, some calls failed, and the
    // unmutated half still works through the same client.
    assert!(mutated > 500, "{mutated} mutated replies");
    assert!(failed > 50 && ok > 500, "{ok} ok, {failed} failed");
    // And the server was not harmed by what the client sent after odd replies.
    // (The file is as long as the proxied WRITE past its end made it.)
    assert_eq!(nfs.getattr(&file).unwrap().size, 70_000 + 5000);
}
