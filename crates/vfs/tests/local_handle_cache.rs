//! Privileged handle resolution through the bounded cache of `O_PATH`
//! descriptors: a cached handle still tells the truth about its file, a
//! removed file is neither resolved nor kept allocated, and the cache holds at
//! most its bound. Descriptors are counted by what they point at (inside each
//! test's own directory), so the tests may run in parallel.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

#[path = "../../../tests/support/cannot_run.rs"]
mod cannot_run;
use cannot_run::cannot_run;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use rnfs_vfs::local::{LocalFs, LocalOptions};
use rnfs_vfs::{identity, BackendHandle, Cred, Filesystem, FsError};

fn privileged() -> bool {
    if identity::can_switch() {
        true
    } else {
        cannot_run("handles resolve through open_by_handle_at only as root");
        false
    }
}

fn lookup(fs: &LocalFs, name: &str) -> BackendHandle {
    fs.lookup(&Cred::root(), &fs.root(), name.as_bytes())
        .unwrap()
        .0
}

/// Targets of this process's descriptors that lie below `dir` (the export
/// directory's own descriptor is not counted).
fn descriptors_under(dir: &Path) -> Vec<String> {
    let dir = format!("{}/", dir.to_string_lossy());
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .map(|target| target.to_string_lossy().into_owned())
        .filter(|target| target.starts_with(&dir))
        .collect()
}

/// An export holding one file `f` of 3 bytes, and the file's handle.
fn one_file() -> (
    tempfile::TempDir,
    std::path::PathBuf,
    LocalFs,
    BackendHandle,
) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    std::fs::write(&path, b"abc").unwrap();
    let fs = LocalFs::open(dir.path(), LocalOptions::default()).unwrap();
    let fh = lookup(&fs, "f");
    (dir, path, fs, fh)
}

#[test]
fn cached_handle_reports_changes_made_beside_the_server() {
    if !privileged() {
        return;
    }
    let (dir, path, fs, fh) = one_file();
    let root = Cred::root();
    assert_eq!(fs.getattr(&root, &fh).unwrap().size, 3);
    assert_eq!(
        descriptors_under(dir.path()),
        [path.to_string_lossy()],
        "the first GETATTR keeps the file's descriptor"
    );

    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    std::fs::write(&path, b"abcdefgh").unwrap();
    let attr = fs.getattr(&root, &fh).unwrap();
    assert_eq!((attr.mode, attr.size), (0o640, 8));

    // Renamed by someone else: the handle (and its descriptor) follow the file.
    std::fs::rename(&path, dir.path().join("g")).unwrap();
    let attr = fs.getattr(&root, &fh).unwrap();
    assert_eq!(
        attr.fileid,
        std::fs::metadata(dir.path().join("g")).unwrap().ino()
    );
}

#[test]
fn file_removed_beside_the_server_is_stale_and_released() {
    if !privileged() {
        return;
    }
    let (dir, path, fs, fh) = one_file();
    let root = Cred::root();
    fs.getattr(&root, &fh).unwrap();

    std::fs::remove_file(&path).unwrap();
    assert_eq!(fs.getattr(&root, &fh), Err(FsError::Stale));
    assert_eq!(
        descriptors_under(dir.path()),
        Vec::<String>::new(),
        "the removed file's descriptor is closed"
    );
    // A new file of the same name is another file, with its own handle.
    std::fs::write(&path, b"new").unwrap();
    let fresh = lookup(&fs, "f");
    assert_ne!(fresh, fh);
    assert_eq!(fs.getattr(&root, &fresh).unwrap().size, 3);
    assert_eq!(fs.getattr(&root, &fh), Err(FsError::Stale));
}

#[test]
fn remove_through_the_server_closes_the_cached_descriptor() {
    if !privileged() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), b"abc").unwrap();
    std::fs::create_dir(dir.path().join("d")).unwrap();
    let fs = LocalFs::open(dir.path(), LocalOptions::default()).unwrap();
    let root = Cred::root();
    for name in ["f", "d"] {
        let fh = lookup(&fs, name);
        fs.getattr(&root, &fh).unwrap();
    }
    assert_eq!(descriptors_under(dir.path()).len(), 2);
    fs.remove(&root, &fs.root(), b"f").unwrap();
    fs.rmdir(&root, &fs.root(), b"d").unwrap();
    assert_eq!(
        descriptors_under(dir.path()),
        Vec::<String>::new(),
        "no descriptor keeps a removed object allocated"
    );
}

#[test]
fn cache_holds_at_most_its_bound_and_every_handle_resolves() {
    if !privileged() {
        return;
    }
    const BOUND: usize = 32;
    let dir = tempfile::tempdir().unwrap();
    let files = 10 * BOUND;
    for i in 0..files {
        std::fs::write(dir.path().join(format!("f{i}")), i.to_string()).unwrap();
    }
    let options = LocalOptions {
        handle_cache: BOUND,
        ..LocalOptions::default()
    };
    let fs = LocalFs::open(dir.path(), options).unwrap();
    let root = Cred::root();
    let handles: Vec<_> = (0..files).map(|i| lookup(&fs, &format!("f{i}"))).collect();
    let mut most = 0;
    for _round in 0..2 {
        for (i, fh) in handles.iter().enumerate() {
            let attr = fs.getattr(&root, fh).unwrap();
            let meta = std::fs::metadata(dir.path().join(format!("f{i}"))).unwrap();
            assert_eq!((attr.fileid, attr.size), (meta.ino(), meta.len()));
            most = most.max(descriptors_under(dir.path()).len());
        }
    }
    assert!(
        most <= BOUND,
        "{most} descriptors held for a bound of {BOUND}"
    );
    assert!(most >= BOUND / 2, "only {most} descriptors kept");
    drop(fs);
    assert_eq!(descriptors_under(dir.path()), Vec::<String>::new());
}
