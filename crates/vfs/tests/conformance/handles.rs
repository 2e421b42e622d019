//! Handles that never were (BadHandle) and handles whose object is gone (Stale).

use rnfs_vfs::{access, BackendHandle, CreateHow, Filesystem, FsError, SetAttr, Stability};

use super::util::{assert_err, mkdir, mkfile, mode, root};
use super::Fixture;

/// Handles too short to be anything are BadHandle for every operation.
pub fn bad_handle_bytes<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    assert!(root_h.as_bytes().len() <= BackendHandle::MAX_LEN);
    for bytes in [&[][..], &[0x42]] {
        let bad = BackendHandle::new(bytes).unwrap();
        let mut out = Vec::new();
        assert_eq!(fs.getattr(&root(), &bad), Err(FsError::BadHandle));
        assert_err(fs.lookup(&root(), &bad, b"x"), &[FsError::BadHandle], |e| {
            e.0
        });
        assert_eq!(
            fs.read(&root(), &bad, 0, 1, &mut out).map(drop),
            Err(FsError::BadHandle)
        );
        assert_err(
            fs.write(&root(), &bad, 0, b"x", Stability::FileSync),
            &[FsError::BadHandle],
            |e| e.0,
        );
        assert_err(
            fs.create(&root(), &bad, b"x", &CreateHow::Guarded(mode(0o644))),
            &[FsError::BadHandle],
            |e| e.0,
        );
        assert_err(
            fs.link(&root(), &bad, &root_h, b"x"),
            &[FsError::BadHandle],
            |e| e.0,
        );
        assert_err(
            fs.rename(&root(), &bad, b"x", &root_h, b"y"),
            &[FsError::BadHandle],
            |e| e.0,
        );
        assert_eq!(
            fs.access(&root(), &bad, access::READ).map(drop),
            Err(FsError::BadHandle)
        );
    }
}

/// Every operation on a removed object's handle is Stale.
pub fn stale_after_remove<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let f = mkfile(fs, &root_h, b"f");
    let d = mkdir(fs, &root_h, b"d");
    fs.remove(&root(), &root_h, b"f")
        .map_err(|(e, _)| e)
        .unwrap();
    fs.rmdir(&root(), &root_h, b"d")
        .map_err(|(e, _)| e)
        .unwrap();
    let mut out = Vec::new();
    assert_eq!(fs.getattr(&root(), &f), Err(FsError::Stale));
    assert_err(
        fs.setattr(&root(), &f, &mode(0o600), None),
        &[FsError::Stale],
        |e| e.0,
    );
    assert_eq!(
        fs.read(&root(), &f, 0, 1, &mut out).map(drop),
        Err(FsError::Stale)
    );
    assert_err(
        fs.write(&root(), &f, 0, b"x", Stability::FileSync),
        &[FsError::Stale],
        |e| e.0,
    );
    assert_eq!(
        fs.access(&root(), &f, access::READ).map(drop),
        Err(FsError::Stale)
    );
    assert_err(fs.commit(&root(), &f, 0, 0), &[FsError::Stale], |e| e.0);
    assert_err(
        fs.link(&root(), &f, &root_h, b"again"),
        &[FsError::Stale],
        |e| e.0,
    );
    assert_eq!(fs.getattr(&root(), &d), Err(FsError::Stale));
    assert_err(fs.lookup(&root(), &d, b"x"), &[FsError::Stale], |e| e.0);
    assert_err(
        fs.create(&root(), &d, b"x", &CreateHow::Guarded(mode(0o644))),
        &[FsError::Stale],
        |e| e.0,
    );
    assert_err(
        fs.mkdir(&root(), &d, b"x", &SetAttr::default()),
        &[FsError::Stale],
        |e| e.0,
    );
    assert_err(
        fs.readdir(&root(), &d, 0, [0; 8], false, &mut |_| true),
        &[FsError::Stale],
        |e| e.0,
    );
    assert_eq!(fs.fsstat(&root(), &d).map(drop), Err(FsError::Stale));
    // New objects do not bring the old handles back.
    let f2 = mkfile(fs, &root_h, b"f");
    let d2 = mkdir(fs, &root_h, b"d");
    assert_ne!(f2, f);
    assert_ne!(d2, d);
    assert_eq!(fs.getattr(&root(), &f), Err(FsError::Stale));
    assert_eq!(fs.getattr(&root(), &d), Err(FsError::Stale));
}
