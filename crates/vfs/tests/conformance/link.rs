//! LINK.

use rnfs_vfs::{Filesystem, FsError};

use super::util::{assert_err, assert_wcc, getattr, lookup, mkdir, mkfile, read_all, root, write};
use super::Fixture;

/// A new link shares the object and counts in nlink; ctime does not go back.
pub fn link_increments_nlink<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let d = mkdir(fs, &root_h, b"d");
    let f = mkfile(fs, &root_h, b"f");
    let before = getattr(fs, &f);
    let (attr, wcc) = fs
        .link(&root(), &f, &d, b"g")
        .map_err(|(e, _, _)| e)
        .unwrap();
    assert_wcc(&wcc);
    let attr = attr.expect("post-op attributes");
    assert_eq!(attr.nlink, 2);
    assert!(attr.ctime >= before.ctime);
    assert_eq!(lookup(fs, &d, b"g"), Ok(f));
    fs.link(&root(), &f, &root_h, b"h")
        .map_err(|(e, _, _)| e)
        .unwrap();
    assert_eq!(getattr(fs, &f).nlink, 3);
    write(fs, &lookup(fs, &root_h, b"h").unwrap(), 0, b"shared");
    assert_eq!(read_all(fs, &f), b"shared");
}

/// Directories cannot be hard-linked.
pub fn link_to_directory_is_refused<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let d = mkdir(fs, &root_h, b"d");
    assert_err(
        fs.link(&root(), &d, &root_h, b"alias"),
        &[FsError::Perm, FsError::IsDir],
        |e| e.0,
    );
    assert_eq!(lookup(fs, &root_h, b"alias"), Err(FsError::NoEnt));
}

/// LINK into something that is not a directory is NotDir, the file itself
/// included (the memory backend once deadlocked on that: it read-locked the
/// file for the error's attributes while holding it as the "directory").
pub fn link_into_a_non_directory_is_notdir<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let f = mkfile(fs, &root_h, b"f");
    let g = mkfile(fs, &root_h, b"g");
    for dir in [&g, &f] {
        let (e, attr, _) = fs.link(&root(), &f, dir, b"x").unwrap_err();
        assert_eq!(e, FsError::NotDir);
        assert_eq!(attr.map(|a| a.nlink), Some(1));
    }
    assert_eq!(getattr(fs, &f).nlink, 1);
}

/// LINK onto an existing name is Exist.
pub fn link_existing_name_is_exist<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let f = mkfile(fs, &root_h, b"f");
    mkfile(fs, &root_h, b"g");
    let (e, _, wcc) = fs.link(&root(), &f, &root_h, b"g").unwrap_err();
    assert_eq!(e, FsError::Exist);
    assert!(wcc.after.is_some());
    assert_eq!(getattr(fs, &f).nlink, 1);
}

/// Removing one of two links keeps the file and its handle.
pub fn remove_one_link_keeps_the_file<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let f = mkfile(fs, &root_h, b"f");
    write(fs, &f, 0, b"still here");
    fs.link(&root(), &f, &root_h, b"g")
        .map_err(|(e, _, _)| e)
        .unwrap();
    fs.remove(&root(), &root_h, b"f")
        .map_err(|(e, _)| e)
        .unwrap();
    let attr = getattr(fs, &f);
    assert_eq!(attr.nlink, 1);
    assert_eq!(read_all(fs, &f), b"still here");
    assert_eq!(lookup(fs, &root_h, b"g"), Ok(f));
    fs.remove(&root(), &root_h, b"g")
        .map_err(|(e, _)| e)
        .unwrap();
    assert_eq!(fs.getattr(&root(), &f), Err(FsError::Stale));
}
