//! LOOKUP.

use rnfs_vfs::{FileType, Filesystem, FsError};

use super::util::{getattr, lookup, mkdir, mkfile, root};
use super::Fixture;

/// `.` is the directory itself.
pub fn lookup_dot_is_self<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let d = mkdir(fs, &fs.root(), b"d");
    let (h, attr, dir_attr) = fs.lookup(&root(), &d, b".").map_err(|(e, _)| e).unwrap();
    assert_eq!(attr.fileid, getattr(fs, &d).fileid);
    assert_eq!(getattr(fs, &h).fileid, attr.fileid);
    assert_eq!(dir_attr.map(|a| a.fileid), Some(attr.fileid));
}

/// `..` is the parent, also two levels down.
pub fn lookup_dotdot_is_parent<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let a = mkdir(fs, &root_h, b"a");
    let b = mkdir(fs, &a, b"b");
    let (h, attr, _) = fs.lookup(&root(), &b, b"..").map_err(|(e, _)| e).unwrap();
    assert_eq!(attr.fileid, getattr(fs, &a).fileid);
    assert_eq!(getattr(fs, &h).fileid, attr.fileid);
    assert_eq!(attr.ftype, FileType::Directory);
    let up = lookup(fs, &a, b"..").unwrap();
    assert_eq!(getattr(fs, &up).fileid, getattr(fs, &root_h).fileid);
}

/// The export root's `..` is the root: nothing leaves the export.
pub fn lookup_dotdot_at_root_is_root<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let up = lookup(fs, &root_h, b"..").unwrap();
    assert_eq!(getattr(fs, &up).fileid, getattr(fs, &root_h).fileid);
    let up2 = lookup(fs, &up, b"..").unwrap();
    assert_eq!(getattr(fs, &up2).fileid, getattr(fs, &root_h).fileid);
}

/// A missing name is NoEnt, with the directory's attributes.
pub fn lookup_missing_is_noent<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let (e, dir_attr) = fs.lookup(&root(), &root_h, b"missing").unwrap_err();
    assert_eq!(e, FsError::NoEnt);
    assert_eq!(
        dir_attr.map(|a| a.fileid),
        Some(getattr(fs, &root_h).fileid)
    );
}

/// Looking up in a regular file is NotDir.
pub fn lookup_in_file_is_notdir<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    assert_eq!(lookup(fs, &f, b"x"), Err(FsError::NotDir));
}

/// The same object always has the same handle.
pub fn lookup_handle_is_stable<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let f = mkfile(fs, &root_h, b"f");
    let d = mkdir(fs, &root_h, b"d");
    assert_eq!(lookup(fs, &root_h, b"f").unwrap(), f);
    assert_eq!(lookup(fs, &root_h, b"f").unwrap(), f);
    assert_eq!(lookup(fs, &root_h, b"d").unwrap(), d);
    assert_eq!(lookup(fs, &d, b"..").unwrap(), root_h);
    assert_eq!(fs.root(), root_h);
}
