//! READDIRPLUS on a local export: every entry but `..` carries the handle and
//! attributes LOOKUP gives for its name, whichever path produced them (by name
//! when privileged, through a descriptor when not), and an entry with a mount
//! on it carries none.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

#[path = "../../../tests/support/cannot_run.rs"]
mod cannot_run;
use cannot_run::cannot_run;

#[path = "support/mounted.rs"]
mod mounted;
use mounted::Mounted;

use std::collections::BTreeMap;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::Path;

use rnfs_vfs::local::{LocalFs, LocalOptions};
use rnfs_vfs::{identity, Attr, BackendHandle, Cred, FileType, Filesystem, FsError};
use rustix::fs::{self as rfs, FileType as RawType, Mode, CWD};
use tempfile::TempDir;

/// Entries in the test directory (besides `.` and `..`).
const ENTRIES: usize = 320;
/// Entries a sink takes per call: many calls, resumed by cookie.
const PAGE: usize = 7;

fn export() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    // Other identities must be able to reach the export.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn user() -> Cred {
    Cred {
        uid: 4242,
        gid: 4242,
        groups: vec![],
    }
}

/// `ENTRIES` names in `d` of every kind an unprivileged process can make:
/// files of varied size and mode, directories, symlinks (outside, inside,
/// dangling), fifos, sockets and hard links.
fn populate(d: &Path) {
    for i in 0..ENTRIES {
        let path = d.join(format!("e{i:03}"));
        match i % 8 {
            0 => {
                std::fs::write(&path, vec![b'x'; i]).unwrap();
                let mode = 0o600 | (i as u32 & 0o077);
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            }
            1 => std::fs::create_dir(&path).unwrap(),
            2 => symlink("/etc", &path).unwrap(),
            3 => symlink(format!("e{:03}", i - 2), &path).unwrap(),
            4 => symlink("nowhere/at/all", &path).unwrap(),
            5 => rfs::mknodat(CWD, &path, RawType::Fifo, Mode::from_raw_mode(0o640), 0).unwrap(),
            6 => rfs::mknodat(CWD, &path, RawType::Socket, Mode::from_raw_mode(0o600), 0).unwrap(),
            _ => std::fs::hard_link(d.join(format!("e{:03}", i - 7)), &path).unwrap(),
        }
    }
}

/// One listed entry: file id and plus data.
type Listed = (u64, Option<(BackendHandle, Attr)>);

/// READDIRPLUS of `dir` in pages of `PAGE` entries; checks each name comes once.
fn list_plus(fs: &LocalFs, cred: &Cred, dir: &BackendHandle) -> BTreeMap<Vec<u8>, Listed> {
    let mut all = BTreeMap::new();
    let (mut cookie, mut verifier, mut calls) = (0, [0; 8], 0);
    loop {
        calls += 1;
        let mut taken = 0;
        let end = fs
            .readdir(cred, dir, cookie, verifier, true, &mut |e| {
                if taken == PAGE {
                    return false;
                }
                taken += 1;
                cookie = e.cookie;
                let old = all.insert(e.name.to_vec(), (e.fileid, e.plus));
                assert!(old.is_none(), "{:?} twice", e.name);
                true
            })
            .unwrap();
        verifier = end.verifier;
        if end.eof {
            break;
        }
    }
    assert!(calls >= (ENTRIES + 2) / PAGE, "{calls} calls");
    all
}

/// Every entry of a READDIRPLUS of `d` against LOOKUP of its name, as `cred`.
/// Returns the handles, by name.
fn check_against_lookup(
    fs: &LocalFs,
    cred: &Cred,
    d: &BackendHandle,
) -> BTreeMap<Vec<u8>, BackendHandle> {
    let listed = list_plus(fs, cred, d);
    assert_eq!(listed.len(), ENTRIES + 2);
    let mut kinds = BTreeMap::new();
    let mut handles = BTreeMap::new();
    for (name, (fileid, plus)) in &listed {
        let (fh, attr, _) = fs.lookup(cred, d, name).unwrap();
        if name == b"." {
            // Listing changes the directory's atime; its handle must match.
            assert_eq!(plus.map(|p| p.0), Some(fh), "{name:?}");
            continue;
        }
        if name == b".." {
            // Named by its file id only: its handle costs a walk to the
            // export root, which LOOKUP pays and no listing does.
            assert_eq!((*fileid, plus.is_some()), (attr.fileid, false));
            continue;
        }
        let (plus_fh, plus_attr) = plus.unwrap_or_else(|| panic!("{name:?} without plus data"));
        assert_eq!(plus_fh, fh, "{name:?}: handle");
        assert_eq!(plus_attr, attr, "{name:?}: attributes");
        assert_eq!(*fileid, attr.fileid, "{name:?}: file id");
        *kinds.entry(format!("{:?}", attr.ftype)).or_insert(0) += 1;
        handles.insert(name.clone(), fh);
    }
    let by_kind = |t: FileType| kinds.get(&format!("{t:?}")).copied().unwrap_or(0);
    assert_eq!(by_kind(FileType::Symlink), 3 * ENTRIES / 8);
    assert_eq!(by_kind(FileType::Fifo), ENTRIES / 8);
    assert_eq!(by_kind(FileType::Socket), ENTRIES / 8);
    assert_eq!(by_kind(FileType::Directory), ENTRIES / 8);
    assert_eq!(by_kind(FileType::Regular), 2 * ENTRIES / 8);
    handles
}

/// The link's own attributes, never its target's (`/etc`, a sibling file).
fn check_symlinks(fs: &LocalFs, cred: &Cred, d: &BackendHandle) {
    let listed = list_plus(fs, cred, d);
    for (name, target) in [(&b"e002"[..], &b"/etc"[..]), (b"e011", b"e009")] {
        let (_, plus) = listed[name];
        let attr = plus.unwrap().1;
        assert_eq!(attr.ftype, FileType::Symlink, "{name:?}");
        assert_eq!(attr.size, target.len() as u64, "{name:?}");
    }
}

#[test]
fn readdirplus_agrees_with_lookup() {
    let dir = export();
    let d_path = dir.path().join("d");
    std::fs::create_dir(&d_path).unwrap();
    populate(&d_path);
    let fs = LocalFs::open(dir.path(), LocalOptions::default()).unwrap();
    let as_root = Cred::root();
    let d = fs.lookup(&as_root, &fs.root(), b"d").unwrap().0;
    let handles = check_against_lookup(&fs, &as_root, &d);
    check_symlinks(&fs, &as_root, &d);
    // The hard links share one handle.
    assert_eq!(handles[&b"e007"[..]], handles[&b"e000"[..]]);

    if !identity::can_switch() {
        cannot_run("the other identities need root");
        return;
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            // A privileged backend serving an ordinary user, as the server does.
            identity::switch_to(&user()).unwrap();
            assert!(fs.privileged());
            assert_eq!(check_against_lookup(&fs, &user(), &d), handles);
            // Unprivileged: the descriptor path, which fills the handle cache.
            let unprivileged = LocalFs::open(dir.path(), LocalOptions::default()).unwrap();
            assert!(!unprivileged.privileged());
            let d = unprivileged
                .lookup(&user(), &unprivileged.root(), b"d")
                .unwrap()
                .0;
            assert_eq!(check_against_lookup(&unprivileged, &user(), &d), handles);
            check_symlinks(&unprivileged, &user(), &d);
            identity::switch_to(&Cred::root()).unwrap();
        });
    });
}

/// A directory bind-mounted on itself is the same inode on the same file
/// system, so only the mount tells: LOOKUP refuses it (`XDev`) and READDIRPLUS
/// lists it without plus data, while its siblings keep theirs.
#[test]
fn readdirplus_of_a_bind_mount_has_no_plus_data() {
    let dir = export();
    let b = dir.path().join("b");
    std::fs::create_dir(&b).unwrap();
    std::fs::write(dir.path().join("f"), b"x").unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["--bind", b.to_str().unwrap(), b.to_str().unwrap()])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        cannot_run("cannot bind-mount here");
        return;
    }
    let _guard = Mounted(&b);
    let fs = LocalFs::open(dir.path(), LocalOptions::default()).unwrap();
    let r = fs.root();
    let cred = Cred::root();
    assert_eq!(fs.lookup(&cred, &r, b"b").unwrap_err().0, FsError::XDev);
    let mut plus = BTreeMap::new();
    fs.readdir(&cred, &r, 0, [0; 8], true, &mut |e| {
        plus.insert(e.name.to_vec(), (e.fileid, e.plus.is_some()));
        true
    })
    .unwrap();
    let b_ino = std::fs::symlink_metadata(&b).unwrap().ino();
    assert_eq!(plus[&b"b"[..]], (b_ino, false), "listed, without plus data");
    assert!(plus[&b"f"[..]].1, "a sibling keeps its plus data");
}
