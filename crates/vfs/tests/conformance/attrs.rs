//! GETATTR and SETATTR.

use rnfs_vfs::{FileType, Filesystem, FsError, SetAttr, SetTime, Time};

use super::util::{assert_err, assert_wcc, getattr, mkdir, mkfile, read_all, root, write};
use super::Fixture;

/// The root is a directory with a sane link count.
pub fn getattr_root_is_directory<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let attr = getattr(fs, &fs.root());
    assert_eq!(attr.ftype, FileType::Directory);
    assert!(attr.nlink >= 1);
    assert_eq!(attr.mode & !0o7777, 0, "mode carries only permission bits");
    assert_eq!(attr.rdev, (0, 0));
}

/// One fsid for every object; distinct objects have distinct file ids.
pub fn getattr_fsid_and_fileids<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root = fs.root();
    let a = mkfile(fs, &root, b"a");
    let b = mkfile(fs, &root, b"b");
    let d = mkdir(fs, &root, b"d");
    let attrs = [
        getattr(fs, &root),
        getattr(fs, &a),
        getattr(fs, &b),
        getattr(fs, &d),
    ];
    for attr in &attrs {
        assert_eq!(attr.fsid, attrs[0].fsid);
    }
    let mut ids: Vec<u64> = attrs.iter().map(|a| a.fileid).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 4, "file ids collide: {attrs:?}");
    assert_eq!(attrs[1].ftype, FileType::Regular);
    assert_eq!(attrs[1].nlink, 1);
    assert_eq!(attrs[1].size, 0);
}

/// Mode changes are applied, ctime does not go backwards, wcc has both sides.
pub fn setattr_mode<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    for mode in [0o640, 0o4755, 0o000, 0o777] {
        let before = getattr(fs, &f);
        let set = SetAttr {
            mode: Some(mode),
            ..SetAttr::default()
        };
        let wcc = fs
            .setattr(&root(), &f, &set, None)
            .map_err(|(e, _)| e)
            .unwrap();
        assert_wcc(&wcc);
        let after = wcc.after.unwrap();
        assert_eq!(after.mode, mode);
        assert!(after.ctime >= before.ctime);
        assert_eq!(getattr(fs, &f).mode, mode);
    }
}

/// Root gives a file to another user and group.
pub fn setattr_owner<F: Filesystem>(fx: &Fixture<F>) {
    if !fx.caps.chown {
        eprintln!("skipped: backend cannot chown");
        return;
    }
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    let set = SetAttr {
        uid: Some(1000),
        gid: Some(2000),
        ..SetAttr::default()
    };
    let wcc = fs
        .setattr(&root(), &f, &set, None)
        .map_err(|(e, _)| e)
        .unwrap();
    assert_wcc(&wcc);
    let attr = getattr(fs, &f);
    assert_eq!((attr.uid, attr.gid), (1000, 2000));
}

/// A chown with a mode in the same SETATTR drops setuid from that mode, and
/// setgid when the group may execute, of a non-directory (knfsd's
/// `nfsd_sanitize_attrs`): root giving away a setuid program keeps no
/// setuid bit. A directory keeps them.
pub fn setattr_chown_with_a_set_id_mode_drops_it<F: Filesystem>(fx: &Fixture<F>) {
    if !fx.caps.chown {
        eprintln!("skipped: backend cannot chown");
        return;
    }
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    let d = mkdir(fs, &fs.root(), b"d");
    for (fh, asked, kept) in [
        (&f, 0o4755, 0o755),
        (&f, 0o6755, 0o755),
        (&f, 0o2745, 0o2745),
        (&d, 0o2755, 0o2755),
    ] {
        let set = SetAttr {
            uid: Some(1000),
            mode: Some(asked),
            ..SetAttr::default()
        };
        fs.setattr(&root(), fh, &set, None)
            .map_err(|(e, _)| e)
            .unwrap();
        assert_eq!(getattr(fs, fh).mode, kept, "asked {asked:o}");
    }
}

/// Shrinking drops data; growing reads back as zeros.
pub fn setattr_size_truncates_and_extends_with_zeros<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    write(fs, &f, 0, b"hello world");
    let set = |size| SetAttr {
        size: Some(size),
        ..SetAttr::default()
    };
    let wcc = fs
        .setattr(&root(), &f, &set(5), None)
        .map_err(|(e, _)| e)
        .unwrap();
    assert_wcc(&wcc);
    assert_eq!(wcc.before.unwrap().size, 11);
    assert_eq!(wcc.after.unwrap().size, 5);
    assert_eq!(read_all(fs, &f), b"hello");
    fs.setattr(&root(), &f, &set(20), None)
        .map_err(|(e, _)| e)
        .unwrap();
    let mut want = b"hello".to_vec();
    want.resize(20, 0);
    assert_eq!(read_all(fs, &f), want);
    assert_eq!(getattr(fs, &f).size, 20);
    // Data written past a hole left by truncation is still read back right.
    write(fs, &f, 30, b"!");
    want.resize(30, 0);
    want.push(b'!');
    assert_eq!(read_all(fs, &f), want);
}

/// A directory has no size to set.
pub fn setattr_size_on_directory_is_isdir<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let d = mkdir(fs, &fs.root(), b"d");
    let set = SetAttr {
        size: Some(0),
        ..SetAttr::default()
    };
    assert_err(
        fs.setattr(&root(), &d, &set, None),
        &[FsError::IsDir],
        |e| e.0,
    );
}

/// Client-chosen times are stored as given.
pub fn setattr_client_times<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    let atime = Time {
        secs: 1_000_000_000,
        nsecs: 0,
    };
    let mtime = Time {
        secs: 1_100_000_000,
        nsecs: 0,
    };
    let set = SetAttr {
        atime: SetTime::ClientTime(atime),
        mtime: SetTime::ClientTime(mtime),
        ..SetAttr::default()
    };
    fs.setattr(&root(), &f, &set, None)
        .map_err(|(e, _)| e)
        .unwrap();
    let attr = getattr(fs, &f);
    assert_eq!(attr.atime, atime);
    assert_eq!(attr.mtime, mtime);
    assert!(
        attr.ctime > mtime,
        "ctime is the server's clock, not the client's"
    );
}

/// Server time replaces an old client time with a current one.
pub fn setattr_server_time<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    let old = Time {
        secs: 1_000_000,
        nsecs: 0,
    };
    let set = SetAttr {
        atime: SetTime::ClientTime(old),
        mtime: SetTime::ClientTime(old),
        ..SetAttr::default()
    };
    fs.setattr(&root(), &f, &set, None)
        .map_err(|(e, _)| e)
        .unwrap();
    let set = SetAttr {
        atime: SetTime::ServerTime,
        mtime: SetTime::ServerTime,
        ..SetAttr::default()
    };
    fs.setattr(&root(), &f, &set, None)
        .map_err(|(e, _)| e)
        .unwrap();
    let attr = getattr(fs, &f);
    assert!(attr.mtime > old && attr.atime > old, "{attr:?}");
}

/// The ctime guard: a matching guard applies, a stale one is NotSync and
/// changes nothing.
pub fn setattr_ctime_guard<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    let ctime = getattr(fs, &f).ctime;
    let set = |mode| SetAttr {
        mode: Some(mode),
        ..SetAttr::default()
    };
    fs.setattr(&root(), &f, &set(0o600), Some(ctime))
        .map_err(|(e, _)| e)
        .unwrap();
    assert_eq!(getattr(fs, &f).mode, 0o600);
    let wrong = Time { secs: 1, nsecs: 2 };
    let res = fs.setattr(&root(), &f, &set(0o666), Some(wrong));
    assert_err(res, &[FsError::NotSync], |e| e.0);
    assert_eq!(getattr(fs, &f).mode, 0o600);
}

/// A SETATTR that sets nothing succeeds and leaves the attributes alone.
pub fn setattr_empty_changes_nothing<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    write(fs, &f, 0, b"data");
    let before = getattr(fs, &f);
    fs.setattr(&root(), &f, &SetAttr::default(), None)
        .map_err(|(e, _)| e)
        .unwrap();
    let after = getattr(fs, &f);
    assert_eq!(
        (before.mode, before.size, before.mtime),
        (after.mode, after.size, after.mtime)
    );
    assert_eq!(read_all(fs, &f), b"data");
}
