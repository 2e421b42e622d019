//! Permission checks from mode bits, owner and groups, as POSIX does them.
//! Every case acts as uid 1000 (gid 1000) on objects root set up.

use rnfs_vfs::{
    access, BackendHandle, CreateHow, Cred, FileType, Filesystem, FsError, SetAttr, SetTime,
    SpecialNode, Stability, Time,
};

use super::util::{
    assert_err, chown_chmod, getattr, lookup, mkdir, mkfile, mode, names, root, setattr, user,
    write,
};
use super::Fixture;

fn cred(uid: u32, gid: u32, groups: &[u32]) -> Cred {
    Cred {
        uid,
        gid,
        groups: groups.to_vec(),
    }
}

fn read(fs: &dyn Filesystem, who: &Cred, fh: &BackendHandle) -> Result<(), FsError> {
    let mut out = Vec::new();
    fs.read(who, fh, 0, 10, &mut out).map(drop)
}

fn write_as(fs: &dyn Filesystem, who: &Cred, fh: &BackendHandle) -> Result<(), FsError> {
    fs.write(who, fh, 0, b"x", Stability::FileSync)
        .map(drop)
        .map_err(|e| e.0)
}

fn create_as(
    fs: &dyn Filesystem,
    who: &Cred,
    dir: &BackendHandle,
    name: &[u8],
) -> Result<BackendHandle, FsError> {
    fs.create(who, dir, name, &CreateHow::Guarded(mode(0o644)))
        .map(|c| c.handle)
        .map_err(|e| e.0)
}

fn set_as(
    fs: &dyn Filesystem,
    who: &Cred,
    fh: &BackendHandle,
    set: SetAttr,
) -> Result<(), FsError> {
    fs.setattr(who, fh, &set, None).map(drop).map_err(|e| e.0)
}

/// LOOKUP needs search (x) permission on the directory; GETATTR needs none.
pub fn perm_lookup_needs_search<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let d = mkdir(fs, &fs.root(), b"d");
    let f = mkfile(fs, &d, b"f");
    setattr(fs, &d, mode(0o744));
    let (e, dir_attr) = fs.lookup(&user(), &d, b"f").unwrap_err();
    assert_eq!(e, FsError::Access);
    assert!(dir_attr.is_some());
    // "." too (knfsd checks search permission before any name).
    let (e, _) = fs.lookup(&user(), &d, b".").unwrap_err();
    assert_eq!(e, FsError::Access, "LOOKUP . without search permission");
    assert!(fs.getattr(&user(), &d).is_ok());
    setattr(fs, &d, mode(0o711));
    assert_eq!(fs.lookup(&user(), &d, b"f").map(|r| r.0), Ok(f));
    assert_eq!(fs.lookup(&user(), &d, b".").map(|r| r.0), Ok(d));
    // Root searches without any x bit.
    setattr(fs, &d, mode(0o000));
    assert_eq!(lookup(fs, &d, b"f"), Ok(f));
}

/// Making a name needs write and search permission on the directory; the new
/// object belongs to the caller.
pub fn perm_create_needs_write_and_search<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let d = mkdir(fs, &root_h, b"d");
    let target = mkfile(fs, &root_h, b"target");
    setattr(fs, &target, mode(0o666));
    let u = user();
    for dir_mode in [0o755, 0o766, 0o711] {
        setattr(fs, &d, mode(dir_mode));
        assert_eq!(
            create_as(fs, &u, &d, b"f").map(drop),
            Err(FsError::Access),
            "{dir_mode:o}"
        );
        assert_err(
            fs.mkdir(&u, &d, b"x", &mode(0o755)),
            &[FsError::Access],
            |e| e.0,
        );
        assert_err(
            fs.symlink(&u, &d, b"x", b"t", &SetAttr::default()),
            &[FsError::Access],
            |e| e.0,
        );
        assert_err(
            fs.mknod(&u, &d, b"x", &SpecialNode::Fifo, &mode(0o644)),
            &[FsError::Access],
            |e| e.0,
        );
        assert_err(fs.link(&u, &target, &d, b"x"), &[FsError::Access], |e| e.0);
    }
    assert!(names(fs, &d).is_empty());
    setattr(fs, &d, mode(0o733));
    let f = create_as(fs, &u, &d, b"f").unwrap();
    let attr = getattr(fs, &f);
    assert_eq!((attr.uid, attr.gid), (1000, 1000));
    let sub = fs
        .mkdir(&u, &d, b"sub", &mode(0o755))
        .map_err(|e| e.0)
        .unwrap();
    assert_eq!(sub.attr.uid, 1000);
}

/// Exactly one class applies: the owner's bits, else the group's, else the
/// others'; a group member is refused what only others may do.
pub fn perm_mode_class_is_exclusive<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    write(fs, &f, 0, b"data");
    let member = user();
    let stranger = cred(3000, 3000, &[]);
    let in_supplementary = cred(1001, 1001, &[5, 1000]);
    chown_chmod(fs, &f, 2000, 1000, 0o606);
    assert_eq!(read(fs, &member, &f), Err(FsError::Access));
    assert_eq!(write_as(fs, &member, &f), Err(FsError::Access));
    assert_eq!(read(fs, &in_supplementary, &f), Err(FsError::Access));
    assert_eq!(read(fs, &stranger, &f), Ok(()));
    assert_eq!(write_as(fs, &stranger, &f), Ok(()));
    chown_chmod(fs, &f, 2000, 1000, 0o640);
    assert_eq!(read(fs, &member, &f), Ok(()));
    assert_eq!(read(fs, &in_supplementary, &f), Ok(()));
    assert_eq!(write_as(fs, &member, &f), Err(FsError::Access));
    assert_eq!(read(fs, &stranger, &f), Err(FsError::Access));
    chown_chmod(fs, &f, 2000, 1000, 0o620);
    assert_eq!(write_as(fs, &member, &f), Ok(()));
    assert_eq!(read(fs, &member, &f), Err(FsError::Access));
    // The owner's class: owner bits only.
    chown_chmod(fs, &f, 1000, 4000, 0o604);
    assert_eq!(read(fs, &member, &f), Ok(()));
    assert_eq!(read(fs, &stranger, &f), Ok(()));
    // Root reads and writes whatever the mode.
    chown_chmod(fs, &f, 2000, 2000, 0o000);
    assert_eq!(read(fs, &root(), &f), Ok(()));
    assert_eq!(write_as(fs, &root(), &f), Ok(()));
}

/// Only the owner (or root) may chmod.
pub fn perm_chmod_owner_only<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    setattr(fs, &f, mode(0o666));
    assert_eq!(set_as(fs, &user(), &f, mode(0o777)), Err(FsError::Perm));
    assert_eq!(getattr(fs, &f).mode, 0o666);
    chown_chmod(fs, &f, 1000, 1000, 0o644);
    assert_eq!(set_as(fs, &user(), &f, mode(0o600)), Ok(()));
    assert_eq!(getattr(fs, &f).mode, 0o600);
}

/// Only root gives a file to another user.
pub fn perm_chown_root_only<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    chown_chmod(fs, &f, 1000, 1000, 0o644);
    let to = |uid| SetAttr {
        uid: Some(uid),
        ..SetAttr::default()
    };
    assert_eq!(set_as(fs, &user(), &f, to(2000)), Err(FsError::Perm));
    assert_eq!(
        set_as(fs, &user(), &f, to(1000)),
        Ok(()),
        "to oneself is a no-op"
    );
    assert_eq!(
        set_as(fs, &cred(3000, 3000, &[]), &f, to(1000)),
        Err(FsError::Perm)
    );
    assert_eq!(getattr(fs, &f).uid, 1000);
    assert_eq!(set_as(fs, &root(), &f, to(2000)), Ok(()));
    assert_eq!(getattr(fs, &f).uid, 2000);
}

/// The owner may change the group to one of their own groups only.
pub fn perm_chgrp_to_own_group<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    chown_chmod(fs, &f, 1000, 1000, 0o644);
    let owner = cred(1000, 1000, &[2000]);
    let to = |gid| SetAttr {
        gid: Some(gid),
        ..SetAttr::default()
    };
    assert_eq!(set_as(fs, &owner, &f, to(2000)), Ok(()));
    assert_eq!(getattr(fs, &f).gid, 2000);
    assert_eq!(set_as(fs, &owner, &f, to(1000)), Ok(()));
    assert_eq!(set_as(fs, &owner, &f, to(3000)), Err(FsError::Perm));
    assert_eq!(getattr(fs, &f).gid, 1000);
    let not_owner = cred(1001, 1000, &[2000]);
    assert_eq!(set_as(fs, &not_owner, &f, to(2000)), Err(FsError::Perm));
}

/// Setting times to "now" needs ownership or write permission; setting them to
/// a chosen time needs ownership.
pub fn perm_utimes_rules<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    let now = SetAttr {
        atime: SetTime::ServerTime,
        mtime: SetTime::ServerTime,
        ..SetAttr::default()
    };
    let chosen = SetAttr {
        mtime: SetTime::ClientTime(Time {
            secs: 1_000_000_000,
            nsecs: 0,
        }),
        ..SetAttr::default()
    };
    setattr(fs, &f, mode(0o666));
    assert_eq!(set_as(fs, &user(), &f, now), Ok(()));
    assert_eq!(set_as(fs, &user(), &f, chosen), Err(FsError::Perm));
    setattr(fs, &f, mode(0o644));
    assert_err(
        set_as(fs, &user(), &f, now),
        &[FsError::Access, FsError::Perm],
        |e| *e,
    );
    assert_eq!(set_as(fs, &user(), &f, chosen), Err(FsError::Perm));
    chown_chmod(fs, &f, 1000, 1000, 0o444);
    assert_eq!(set_as(fs, &user(), &f, chosen), Ok(()));
    assert_eq!(getattr(fs, &f).mtime.secs, 1_000_000_000);
    assert_eq!(set_as(fs, &user(), &f, now), Ok(()));
}

/// Changing the size needs write permission.
pub fn perm_truncate_needs_write<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    write(fs, &f, 0, b"data");
    let size0 = SetAttr {
        size: Some(0),
        ..SetAttr::default()
    };
    setattr(fs, &f, mode(0o644));
    assert_eq!(set_as(fs, &user(), &f, size0), Err(FsError::Access));
    assert_eq!(getattr(fs, &f).size, 4);
    setattr(fs, &f, mode(0o646));
    assert_eq!(set_as(fs, &user(), &f, size0), Ok(()));
    assert_eq!(getattr(fs, &f).size, 0);
}

/// In a sticky directory only the entry's owner, the directory's owner or
/// root may remove or rename an entry.
pub fn perm_sticky_directory<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let t = mkdir(fs, &fs.root(), b"tmp");
    setattr(fs, &t, mode(0o1777));
    let other = cred(1001, 1001, &[]);
    create_as(fs, &other, &t, b"theirs").unwrap();
    create_as(fs, &user(), &t, b"mine").unwrap();
    let denied = [FsError::Perm, FsError::Access];
    assert_err(fs.remove(&user(), &t, b"theirs"), &denied, |e| e.0);
    assert_err(
        fs.rename(&user(), &t, b"theirs", &t, b"stolen"),
        &denied,
        |e| e.0,
    );
    assert_err(
        fs.rename(&user(), &t, b"mine", &t, b"theirs"),
        &denied,
        |e| e.0,
    );
    assert_eq!(
        fs.rename(&user(), &t, b"mine", &t, b"mine2")
            .map(drop)
            .map_err(|e| e.0),
        Ok(())
    );
    assert_eq!(
        fs.remove(&user(), &t, b"mine2").map(drop).map_err(|e| e.0),
        Ok(())
    );
    assert_eq!(
        fs.remove(&other, &t, b"theirs").map(drop).map_err(|e| e.0),
        Ok(())
    );
    create_as(fs, &other, &t, b"theirs").unwrap();
    // The directory's owner may.
    chown_chmod(fs, &t, 1000, 1000, 0o1777);
    assert_eq!(
        fs.remove(&user(), &t, b"theirs").map(drop).map_err(|e| e.0),
        Ok(())
    );
}

/// ACCESS answers per class, without the owner-only bits for others.
pub fn perm_access_per_class<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    let d = mkdir(fs, &fs.root(), b"d");
    chown_chmod(fs, &f, 0, 1000, 0o640);
    chown_chmod(fs, &d, 0, 1000, 0o750);
    let stranger = cred(3000, 3000, &[]);
    assert_eq!(fs.access(&user(), &f, access::ALL).unwrap().0, access::READ);
    assert_eq!(fs.access(&stranger, &f, access::ALL).unwrap().0, 0);
    assert_eq!(
        fs.access(&user(), &d, access::ALL).unwrap().0 & !access::EXECUTE,
        access::READ | access::LOOKUP
    );
    assert_eq!(
        fs.access(&stranger, &d, access::ALL).unwrap().0 & !access::EXECUTE,
        0
    );
    chown_chmod(fs, &f, 0, 1000, 0o670);
    let got = fs.access(&user(), &f, access::ALL).unwrap().0;
    assert_eq!(
        got,
        access::READ | access::MODIFY | access::EXTEND | access::EXECUTE
    );
}

/// READDIR needs read permission; search alone is not enough.
pub fn perm_readdir_needs_read<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let d = mkdir(fs, &fs.root(), b"d");
    mkfile(fs, &d, b"f");
    setattr(fs, &d, mode(0o711));
    assert_err(
        fs.readdir(&user(), &d, 0, [0; 8], false, &mut |_| true),
        &[FsError::Access],
        |e| e.0,
    );
    assert!(fs.lookup(&user(), &d, b"f").is_ok());
    setattr(fs, &d, mode(0o744));
    let mut n = 0;
    fs.readdir(&user(), &d, 0, [0; 8], false, &mut |_| {
        n += 1;
        true
    })
    .map_err(|e| e.0)
    .unwrap();
    assert_eq!(n, 3);
}

/// REMOVE and RENAME need write permission on the directories involved, not on
/// the file.
pub fn perm_remove_and_rename_need_write<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let locked = mkdir(fs, &root_h, b"locked");
    let open = mkdir(fs, &root_h, b"open");
    setattr(fs, &open, mode(0o777));
    let f = mkfile(fs, &locked, b"f");
    setattr(fs, &f, mode(0o666));
    let u = user();
    assert_err(fs.remove(&u, &locked, b"f"), &[FsError::Access], |e| e.0);
    assert_err(
        fs.rename(&u, &locked, b"f", &locked, b"g"),
        &[FsError::Access],
        |e| e.0,
    );
    assert_err(
        fs.rename(&u, &locked, b"f", &open, b"g"),
        &[FsError::Access],
        |e| e.0,
    );
    let mine = create_as(fs, &u, &open, b"mine").unwrap();
    assert_err(
        fs.rename(&u, &open, b"mine", &locked, b"g"),
        &[FsError::Access],
        |e| e.0,
    );
    assert_eq!(lookup(fs, &locked, b"f"), Ok(f));
    assert_eq!(lookup(fs, &open, b"mine"), Ok(mine));
    // A read-only file in a writable directory can be removed.
    setattr(fs, &mine, mode(0o444));
    setattr(fs, &f, mode(0o000));
    let f2 = mkfile(fs, &open, b"roots");
    setattr(fs, &f2, mode(0o400));
    assert_eq!(
        fs.remove(&u, &open, b"roots").map(drop).map_err(|e| e.0),
        Ok(())
    );
    assert_eq!(
        fs.remove(&u, &open, b"mine").map(drop).map_err(|e| e.0),
        Ok(())
    );
}

/// A setgid directory hands its group to new entries, and the bit to new
/// subdirectories.
pub fn perm_setgid_directory_inherits_group<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let d = mkdir(fs, &fs.root(), b"d");
    chown_chmod(fs, &d, 0, 2000, 0o2777);
    let f = create_as(fs, &user(), &d, b"f").unwrap();
    assert_eq!(getattr(fs, &f).gid, 2000);
    let sub = fs
        .mkdir(&user(), &d, b"sub", &mode(0o755))
        .map_err(|e| e.0)
        .unwrap();
    let attr = getattr(fs, &sub.handle);
    assert_eq!(attr.ftype, FileType::Directory);
    assert_eq!(attr.gid, 2000);
    assert_eq!(attr.mode & 0o2000, 0o2000, "mode {:o}", attr.mode);
}

/// Only root makes device nodes; anyone with write permission makes FIFOs.
pub fn perm_devices_need_root<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let d = mkdir(fs, &fs.root(), b"d");
    setattr(fs, &d, mode(0o777));
    for node in [SpecialNode::Char(1, 3), SpecialNode::Block(8, 0)] {
        assert_err(
            fs.mknod(&user(), &d, b"dev", &node, &mode(0o600)),
            &[FsError::Perm],
            |e| e.0,
        );
    }
    let fifo = fs
        .mknod(&user(), &d, b"fifo", &SpecialNode::Fifo, &mode(0o600))
        .map_err(|e| e.0)
        .unwrap();
    assert_eq!(fifo.attr.uid, 1000);
}
