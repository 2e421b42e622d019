//! The FUSE mount over a proxy that mutates the results of half the server's
//! replies (`crates/client/tests/support/mutating_proxy.rs`): every file
//! operation ends, in a result or an error, within a bound; nothing in the
//! mount panics; and once the replies are clean again the mount still
//! works, so odd replies cost the calls that got them and never the mount.
//!
//! `MUTATION_SEED` and `MUTATION_ROUNDS` (default 40) override the run.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod common;
#[path = "../../client/tests/support/mutating_proxy.rs"]
mod mutating_proxy;

use std::fs;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use common::{skip, start_server};
use mutating_proxy::{mutating_proxy, ProxyStats};
use rnfs_client::NfsUrl;
use rnfs_fuse::MountOptions;
use rnfs_xdr::fuzzing::env_or;

/// Every file operation must end well within this (retransmissions included).
const BOUND: Duration = Duration::from_secs(30);

/// Opens without blocking: a mutated reply may have told the kernel that a
/// name is a FIFO, and opening a FIFO waits for a partner (the kernel's
/// semantics, not the mount's; regular files ignore `O_NONBLOCK`).
fn open(path: &Path, write: bool) -> std::io::Result<fs::File> {
    fs::OpenOptions::new()
        .read(!write)
        .write(write)
        .create(write)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

/// Runs `op` on its own thread (a stuck FUSE request blocks its caller) and
/// fails the test if it does not end within [`BOUND`].
fn bounded(what: &str, op: impl FnOnce() + Send + 'static) {
    let (done, ended) = mpsc::channel();
    thread::spawn(move || {
        op();
        let _ = done.send(());
    });
    if ended.recv_timeout(BOUND).is_err() {
        panic!("{what} did not end within {BOUND:?}");
    }
}

static PANICS: AtomicUsize = AtomicUsize::new(0);

#[test]
fn the_mount_survives_mutated_replies() {
    if skip("the_mount_survives_mutated_replies") {
        return;
    }
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::Relaxed);
        default_hook(info);
    }));

    let export = tempfile::tempdir().unwrap();
    let e = export.path().to_owned();
    let data: Vec<u8> = (0..64 << 10).map(|i| (i * 13 % 251) as u8).collect();
    fs::write(e.join("file"), &data).unwrap();
    fs::create_dir(e.join("dir")).unwrap();
    for i in 0..10 {
        fs::write(e.join("dir").join(format!("entry-{i}")), b"x").unwrap();
    }
    std::os::unix::fs::symlink("file", e.join("link")).unwrap();

    let (_server, url) = start_server(&e);
    let stats = ProxyStats::new(false);
    let server = SocketAddr::from(([127, 0, 0, 1], url.nfs_port.unwrap()));
    let proxy = mutating_proxy(server, env_or("MUTATION_SEED", 0x5eed_f5e1), stats.clone());
    let proxied = NfsUrl {
        nfs_port: Some(proxy.port()),
        mount_port: Some(proxy.port()),
        ..url
    };
    let mnt_dir = tempfile::tempdir().unwrap();
    let mut options = MountOptions::default();
    // No attribute cache: every stat reaches the server (and the proxy), and
    // the final check sees the server's state, not odd cached attributes.
    // Soft: a dropped reply must end in an error, not a wait for ever.
    options.apply("noac,soft,timeo=20,retrans=2").unwrap();
    let handle = rnfs_fuse::spawn(&proxied, mnt_dir.path(), options).unwrap();
    let m = handle.mountpoint().to_owned();
    stats.enabled.store(true, Ordering::Relaxed);

    let at = |rel: &str| -> PathBuf { m.join(rel) };
    for round in 0..env_or("MUTATION_ROUNDS", 40) {
        let (file, dir, link) = (at("file"), at("dir"), at("link"));
        let new = at(&format!("new-{round}"));
        let renamed = at(&format!("renamed-{round}"));
        let sub = at(&format!("sub-{round}"));
        let payload = data.clone();
        bounded("stat", {
            let (file, dir) = (file.clone(), dir.clone());
            move || {
                let _ = fs::metadata(&file);
                let _ = fs::symlink_metadata(&dir);
            }
        });
        bounded("readdir", {
            let dir = dir.clone();
            move || {
                if let Ok(entries) = fs::read_dir(&dir) {
                    for entry in entries.flatten() {
                        let _ = entry.metadata();
                    }
                }
            }
        });
        bounded("read", {
            let file = file.clone();
            move || {
                if let Ok(mut f) = open(&file, false) {
                    let _ = f.read_to_end(&mut Vec::new());
                }
                let _ = fs::read_link(&link);
            }
        });
        bounded("write, fsync, close", {
            let new = new.clone();
            move || {
                if let Ok(mut f) = open(&new, true) {
                    let _ = f.write_all(&payload);
                    let _ = f.sync_all();
                }
            }
        });
        bounded("truncate, rename, remove, mkdir, rmdir", move || {
            if let Ok(f) = open(&new, true) {
                let _ = f.set_len(1000);
            }
            let _ = fs::rename(&new, &renamed);
            let _ = fs::remove_file(&renamed);
            let _ = fs::remove_file(&new);
            let _ = fs::create_dir(&sub);
            let _ = fs::remove_dir(&sub);
        });
    }
    let (replies, mutated) = (
        stats.replies.load(Ordering::Relaxed),
        stats.mutated.load(Ordering::Relaxed),
    );
    println!("{mutated} of {replies} replies mutated");
    assert!(mutated > 100, "{mutated} mutated replies");
    assert_eq!(PANICS.load(Ordering::Relaxed), 0, "something panicked");

    // Clean replies again: the mount works as before.
    stats.enabled.store(false, Ordering::Relaxed);
    let check = at("after");
    bounded("the mount after", {
        let data = data.clone();
        move || {
            fs::write(&check, &data).unwrap();
            assert_eq!(fs::read(&check).unwrap(), data);
        }
    });
    assert_eq!(fs::read(e.join("after")).unwrap(), data);
    handle.unmount().unwrap();
}
