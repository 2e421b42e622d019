//! RENAME, with POSIX `rename` semantics.

use rnfs_vfs::{FileType, Filesystem, FsError};

use super::util::{
    assert_err, assert_wcc, getattr, lookup, mkdir, mkfile, names, read_all, root, write,
};
use super::Fixture;

fn rename(
    fs: &dyn Filesystem,
    from: &rnfs_vfs::BackendHandle,
    from_name: &[u8],
    to: &rnfs_vfs::BackendHandle,
    to_name: &[u8],
) -> Result<(), FsError> {
    fs.rename(&root(), from, from_name, to, to_name)
        .map(|(a, b)| {
            assert_wcc(&a);
            assert_wcc(&b);
        })
        .map_err(|(e, a, b)| {
            assert!(
                a.after.is_some() && b.after.is_some(),
                "error wcc: {a:?} {b:?}"
            );
            e
        })
}

/// A rename within one directory keeps the object (same handle and data).
pub fn rename_within_directory<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let f = mkfile(fs, &root_h, b"a");
    write(fs, &f, 0, b"data");
    let (from_wcc, to_wcc) = fs
        .rename(&root(), &root_h, b"a", &root_h, b"b")
        .map_err(|(e, _, _)| e)
        .unwrap();
    assert_wcc(&from_wcc);
    assert_wcc(&to_wcc);
    assert_eq!(lookup(fs, &root_h, b"a"), Err(FsError::NoEnt));
    assert_eq!(lookup(fs, &root_h, b"b"), Ok(f));
    assert_eq!(read_all(fs, &f), b"data");
    assert_eq!(names(fs, &root_h), [b"b".to_vec()]);
}

/// Renaming over a file replaces it; the replaced file (no other link) is Stale.
pub fn rename_over_file_replaces_it<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let d = mkdir(fs, &root_h, b"d");
    let src = mkfile(fs, &root_h, b"src");
    write(fs, &src, 0, b"new");
    let old = mkfile(fs, &d, b"dst");
    write(fs, &old, 0, b"old");
    rename(fs, &root_h, b"src", &d, b"dst").unwrap();
    assert_eq!(lookup(fs, &d, b"dst"), Ok(src));
    assert_eq!(read_all(fs, &src), b"new");
    assert_eq!(fs.getattr(&root(), &old), Err(FsError::Stale));
    assert_eq!(names(fs, &root_h), [b"d".to_vec()]);
    assert_eq!(names(fs, &d), [b"dst".to_vec()]);
}

/// A directory may replace an empty directory.
pub fn rename_dir_over_empty_dir<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let a = mkdir(fs, &root_h, b"a");
    mkfile(fs, &a, b"inside");
    let b = mkdir(fs, &root_h, b"b");
    rename(fs, &root_h, b"a", &root_h, b"b").unwrap();
    assert_eq!(lookup(fs, &root_h, b"b"), Ok(a));
    assert_eq!(fs.getattr(&root(), &b), Err(FsError::Stale));
    assert_eq!(names(fs, &a), [b"inside".to_vec()]);
    assert_eq!(names(fs, &root_h), [b"b".to_vec()]);
}

/// A directory may not replace a non-empty directory.
pub fn rename_dir_over_non_empty_dir_is_notempty<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let a = mkdir(fs, &root_h, b"a");
    let b = mkdir(fs, &root_h, b"b");
    mkfile(fs, &b, b"f");
    assert_eq!(
        rename(fs, &root_h, b"a", &root_h, b"b"),
        Err(FsError::NotEmpty)
    );
    assert_eq!(lookup(fs, &root_h, b"a"), Ok(a));
    assert_eq!(lookup(fs, &root_h, b"b"), Ok(b));
}

/// A directory may not replace a file.
pub fn rename_dir_over_file_is_notdir<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    mkdir(fs, &root_h, b"d");
    let f = mkfile(fs, &root_h, b"f");
    assert_eq!(
        rename(fs, &root_h, b"d", &root_h, b"f"),
        Err(FsError::NotDir)
    );
    assert_eq!(lookup(fs, &root_h, b"f"), Ok(f));
}

/// A file may not replace a directory.
pub fn rename_file_over_dir_is_isdir<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let d = mkdir(fs, &root_h, b"d");
    mkfile(fs, &root_h, b"f");
    assert_eq!(
        rename(fs, &root_h, b"f", &root_h, b"d"),
        Err(FsError::IsDir)
    );
    assert_eq!(lookup(fs, &root_h, b"d"), Ok(d));
}

/// A directory cannot move into itself or below itself.
pub fn rename_into_own_subtree_is_inval<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let a = mkdir(fs, &root_h, b"a");
    let b = mkdir(fs, &a, b"b");
    let c = mkdir(fs, &b, b"c");
    assert_eq!(rename(fs, &root_h, b"a", &c, b"a"), Err(FsError::Inval));
    assert_eq!(rename(fs, &root_h, b"a", &a, b"x"), Err(FsError::Inval));
    assert_eq!(rename(fs, &a, b"b", &b, b"x"), Err(FsError::Inval));
    assert_eq!(lookup(fs, &root_h, b"a"), Ok(a));
    assert_eq!(lookup(fs, &b, b"c"), Ok(c));
    // Moving a directory up is fine.
    rename(fs, &b, b"c", &root_h, b"c").unwrap();
    assert_eq!(lookup(fs, &c, b".."), Ok(root_h));
}

/// Renaming a name onto itself succeeds and changes nothing.
pub fn rename_to_same_name_is_noop<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let f = mkfile(fs, &root_h, b"f");
    let d = mkdir(fs, &root_h, b"d");
    rename(fs, &root_h, b"f", &root_h, b"f").unwrap();
    rename(fs, &root_h, b"d", &root_h, b"d").unwrap();
    assert_eq!(lookup(fs, &root_h, b"f"), Ok(f));
    assert_eq!(lookup(fs, &root_h, b"d"), Ok(d));
    assert_eq!(getattr(fs, &f).nlink, 1);
}

/// Renaming one link of a file onto another link of it does nothing (POSIX).
pub fn rename_between_links_of_one_file_is_noop<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let d = mkdir(fs, &root_h, b"d");
    let f = mkfile(fs, &root_h, b"a");
    fs.link(&root(), &f, &d, b"b")
        .map_err(|(e, _, _)| e)
        .unwrap();
    rename(fs, &root_h, b"a", &d, b"b").unwrap();
    assert_eq!(lookup(fs, &root_h, b"a"), Ok(f));
    assert_eq!(lookup(fs, &d, b"b"), Ok(f));
    assert_eq!(getattr(fs, &f).nlink, 2);
}

/// A directory moved to another parent has that parent as `..`; its
/// contents move with it.
pub fn rename_across_directories_moves_dotdot<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let d1 = mkdir(fs, &root_h, b"d1");
    let d2 = mkdir(fs, &root_h, b"d2");
    let sub = mkdir(fs, &d1, b"sub");
    let f = mkfile(fs, &sub, b"f");
    rename(fs, &d1, b"sub", &d2, b"moved").unwrap();
    assert_eq!(lookup(fs, &sub, b".."), Ok(d2));
    assert_eq!(lookup(fs, &d2, b"moved"), Ok(sub));
    assert_eq!(lookup(fs, &sub, b"f"), Ok(f));
    assert!(names(fs, &d1).is_empty());
    let dotdot = super::util::list(fs, &sub)
        .into_iter()
        .find(|e| e.name == b"..")
        .expect("`..` listed");
    assert_eq!(dotdot.fileid, getattr(fs, &d2).fileid);
    assert_eq!(getattr(fs, &sub).ftype, FileType::Directory);
    // And a file across directories.
    rename(fs, &sub, b"f", &root_h, b"g").unwrap();
    assert_eq!(lookup(fs, &root_h, b"g"), Ok(f));
    assert_eq!(lookup(fs, &sub, b"f"), Err(FsError::NoEnt));
}

/// A missing source is NoEnt; the target is untouched.
pub fn rename_missing_source_is_noent<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let f = mkfile(fs, &root_h, b"target");
    assert_eq!(
        rename(fs, &root_h, b"nope", &root_h, b"target"),
        Err(FsError::NoEnt)
    );
    assert_eq!(lookup(fs, &root_h, b"target"), Ok(f));
    let file_as_dir = fs.rename(&root(), &f, b"x", &root_h, b"y");
    assert_err(file_as_dir, &[FsError::NotDir], |e| e.0);
}
