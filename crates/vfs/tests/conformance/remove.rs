//! REMOVE and RMDIR.

use rnfs_vfs::{Filesystem, FsError};

use super::util::{assert_err, assert_wcc, lookup, mkdir, mkfile, names, root};
use super::Fixture;

/// A removed file's name is gone and its handle is Stale.
pub fn remove_file_then_stale<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let f = mkfile(fs, &root_h, b"f");
    mkfile(fs, &root_h, b"g");
    let wcc = fs
        .remove(&root(), &root_h, b"f")
        .map_err(|(e, _)| e)
        .unwrap();
    assert_wcc(&wcc);
    assert_eq!(lookup(fs, &root_h, b"f"), Err(FsError::NoEnt));
    assert_eq!(fs.getattr(&root(), &f), Err(FsError::Stale));
    assert_eq!(names(fs, &root_h), [b"g".to_vec()]);
}

/// Removing a missing name is NoEnt, with the directory's wcc.
pub fn remove_missing_is_noent<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let (e, wcc) = fs.remove(&root(), &root_h, b"nope").unwrap_err();
    assert_eq!(e, FsError::NoEnt);
    assert!(wcc.after.is_some());
    assert_err(
        fs.rmdir(&root(), &root_h, b"nope"),
        &[FsError::NoEnt],
        |e| e.0,
    );
}

/// REMOVE does not remove directories.
pub fn remove_directory_is_isdir<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let d = mkdir(fs, &root_h, b"d");
    assert_err(fs.remove(&root(), &root_h, b"d"), &[FsError::IsDir], |e| {
        e.0
    });
    assert_eq!(lookup(fs, &root_h, b"d"), Ok(d));
}

/// RMDIR does not remove files.
pub fn rmdir_file_is_notdir<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let f = mkfile(fs, &root_h, b"f");
    assert_err(fs.rmdir(&root(), &root_h, b"f"), &[FsError::NotDir], |e| {
        e.0
    });
    assert_eq!(lookup(fs, &root_h, b"f"), Ok(f));
}

/// RMDIR of a directory with entries is NotEmpty.
pub fn rmdir_non_empty_is_notempty<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let d = mkdir(fs, &root_h, b"d");
    mkfile(fs, &d, b"f");
    let (e, wcc) = fs.rmdir(&root(), &root_h, b"d").unwrap_err();
    assert_eq!(e, FsError::NotEmpty);
    assert!(wcc.after.is_some());
    fs.remove(&root(), &d, b"f").map_err(|(e, _)| e).unwrap();
    fs.rmdir(&root(), &root_h, b"d")
        .map_err(|(e, _)| e)
        .unwrap();
}

/// RMDIR of an empty directory; its handle becomes Stale.
pub fn rmdir_empty_then_stale<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let d = mkdir(fs, &root_h, b"d");
    let sub = mkdir(fs, &d, b"sub");
    let wcc = fs.rmdir(&root(), &d, b"sub").map_err(|(e, _)| e).unwrap();
    assert_wcc(&wcc);
    assert_eq!(fs.getattr(&root(), &sub), Err(FsError::Stale));
    fs.rmdir(&root(), &root_h, b"d")
        .map_err(|(e, _)| e)
        .unwrap();
    assert_eq!(fs.getattr(&root(), &d), Err(FsError::Stale));
    assert!(names(fs, &root_h).is_empty());
}
