//! SYMLINK and READLINK: targets are bytes, never resolved or followed.

use rnfs_vfs::{FileType, Filesystem, FsError, SetAttr};

use super::util::{assert_err, assert_wcc, getattr, lookup, mkdir, mkfile, root};
use super::Fixture;

/// The target comes back byte for byte, whatever it points at.
pub fn symlink_target_is_stored_verbatim<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let targets: [&[u8]; 5] = [
        b"../../etc/passwd",
        b"/etc/shadow",
        b"no/such/thing",
        b"\xff\xfe not utf-8",
        b"x",
    ];
    for (i, target) in targets.iter().enumerate() {
        let name = format!("link{i}");
        let created = fs
            .symlink(
                &root(),
                &root_h,
                name.as_bytes(),
                target,
                &SetAttr::default(),
            )
            .map_err(|(e, _)| e)
            .unwrap();
        assert_wcc(&created.dir_wcc);
        assert_eq!(created.attr.ftype, FileType::Symlink);
        let attr = getattr(fs, &created.handle);
        assert_eq!(attr.ftype, FileType::Symlink, "the link, not its target");
        assert_eq!(attr.size, target.len() as u64);
        let mut out = b"prefix:".to_vec();
        let la = fs.readlink(&root(), &created.handle, &mut out).unwrap();
        assert_eq!(&out[..7], b"prefix:", "readlink appends");
        assert_eq!(&out[7..], *target);
        assert_eq!(la.fileid, attr.fileid);
        assert_eq!(
            lookup(fs, &root_h, name.as_bytes()).unwrap(),
            created.handle
        );
    }
}

/// A symlink to a directory is not a directory: LOOKUP through it is NotDir,
/// and creating through it fails.
pub fn symlink_is_never_followed<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let d = mkdir(fs, &root_h, b"d");
    mkfile(fs, &d, b"inside");
    for target in [&b"d"[..], b".", b"/"] {
        let l = fs
            .symlink(&root(), &root_h, b"l", target, &SetAttr::default())
            .map_err(|(e, _)| e)
            .unwrap()
            .handle;
        assert_eq!(lookup(fs, &l, b"inside"), Err(FsError::NotDir));
        assert_eq!(lookup(fs, &l, b"d"), Err(FsError::NotDir));
        assert_err(
            fs.mkdir(&root(), &l, b"x", &SetAttr::default()),
            &[FsError::NotDir],
            |e| e.0,
        );
        assert_err(
            fs.readdir(&root(), &l, 0, [0; 8], false, &mut |_| true),
            &[FsError::NotDir],
            |e| e.0,
        );
        fs.remove(&root(), &root_h, b"l")
            .map_err(|(e, _)| e)
            .unwrap();
        assert_eq!(
            getattr(fs, &d).ftype,
            FileType::Directory,
            "removed the link only"
        );
    }
}

/// READLINK of something that is not a symlink is Inval.
pub fn readlink_of_non_symlink_is_inval<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    let mut out = Vec::new();
    assert_eq!(fs.readlink(&root(), &f, &mut out), Err(FsError::Inval));
    assert_eq!(
        fs.readlink(&root(), &fs.root(), &mut out),
        Err(FsError::Inval)
    );
    assert!(out.is_empty());
}
