//! The cache of open directory streams holds at most its bound of
//! descriptors, and none once the backend is dropped. Alone in its binary:
//! it counts the process's open descriptors.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

#[path = "../../../tests/support/cannot_run.rs"]
mod cannot_run;
use cannot_run::cannot_run;

use rnfs_vfs::local::{LocalFs, LocalOptions};
use rnfs_vfs::{Cred, Filesystem};

const BOUND: usize = 32;

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn open_streams_are_bounded_and_closed_with_the_backend() {
    if !rnfs_vfs::identity::can_switch() {
        cannot_run("unprivileged, handles resolve only through their cache");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dirs = 3 * BOUND;
    for d in 0..dirs {
        let path = dir.path().join(format!("d{d}"));
        std::fs::create_dir(&path).unwrap();
        for i in 0..200 {
            std::fs::write(path.join(format!("f{i}")), b"").unwrap();
        }
    }
    // Streams of a directory changed in the last few ms are not kept.
    std::thread::sleep(std::time::Duration::from_millis(100));
    let before = open_fds();
    // No resolved handles kept: only streams hold descriptors here (the
    // process's one inotify descriptor, which cached attributes open for
    // good, would count too).
    let options = LocalOptions {
        dir_streams: BOUND,
        handle_cache: 0,
        attr_max_age: 0,
        ..LocalOptions::default()
    };
    let fs = LocalFs::open(dir.path(), options).unwrap();
    let root = Cred::root();
    let opened = open_fds();
    let mut most = 0;
    for d in 0..dirs {
        let fh = fs
            .lookup(&root, &fs.root(), format!("d{d}").as_bytes())
            .unwrap()
            .0;
        for plus in [false, true] {
            // Stops after 10 entries: each call leaves a stream.
            let mut taken = 0;
            fs.readdir(&root, &fh, 0, [0; 8], plus, &mut |_| {
                taken += 1;
                taken <= 10
            })
            .unwrap();
            most = most.max(open_fds() - opened);
        }
    }
    assert!(most <= BOUND, "{most} descriptors open for {BOUND} streams");
    // Streams were kept at all (each shard fills with 96 directories).
    assert!(most >= BOUND / 2, "only {most} descriptors kept");
    drop(fs);
    assert_eq!(open_fds(), before);
}
