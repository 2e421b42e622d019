//! The local backend: the shared conformance suite on a fresh temporary
//! directory per case, then cases only a host directory has (escapes, restarts,
//! identities, the kernel's own handles).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]
#![allow(
    unreachable_pub,
    reason = "the shared conformance module is pub for every backend's test crate"
)]

#[path = "../../../tests/support/cannot_run.rs"]
mod cannot_run;
use cannot_run::cannot_run;

#[path = "support/mounted.rs"]
mod mounted;
use mounted::Mounted;

#[macro_use]
mod conformance;

use std::collections::HashSet;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use conformance::{Caps, Fixture};
use rnfs_vfs::local::{LocalFs, LocalOptions};
use rnfs_vfs::{
    access, identity, BackendHandle, CreateHow, Cred, DirEntry, FileType, Filesystem, FsError,
    SetAttr, SetTime, Stability, Time,
};
use tempfile::TempDir;

fn temp_dir() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    // Other identities must be able to reach the export.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn is_root() -> bool {
    identity::can_switch()
}

fn fixture() -> Fixture<LocalFs> {
    let dir = temp_dir();
    let fs = LocalFs::open(dir.path(), LocalOptions::default()).unwrap();
    let caps = if is_root() { Caps::ALL } else { Caps::NONE };
    Fixture::new(fs, caps).with_guard(dir)
}

conformance_tests!(fixture);

/// The server's view when it runs as root: every call switches the thread's
/// fsuid/fsgid/groups to the caller first. With it, the permission cases check
/// the kernel's permission logic through the backend.
#[derive(Debug)]
struct AsCaller(LocalFs);

fn switched(cred: &Cred) {
    identity::switch_to(cred).unwrap();
}

impl Drop for AsCaller {
    fn drop(&mut self) {
        // Root again, so the fixture's temporary directory can be deleted.
        identity::switch_to(&Cred::root()).unwrap();
    }
}

impl Filesystem for AsCaller {
    fn root(&self) -> BackendHandle {
        self.0.root()
    }
    fn getattr(&self, c: &Cred, fh: &BackendHandle) -> rnfs_vfs::FsResult<rnfs_vfs::Attr> {
        switched(c);
        self.0.getattr(c, fh)
    }
    fn setattr(
        &self,
        c: &Cred,
        fh: &BackendHandle,
        set: &SetAttr,
        guard: Option<Time>,
    ) -> Result<rnfs_vfs::Wcc, (FsError, rnfs_vfs::Wcc)> {
        switched(c);
        self.0.setattr(c, fh, set, guard)
    }
    fn lookup(
        &self,
        c: &Cred,
        dir: &BackendHandle,
        name: &[u8],
    ) -> Result<
        (BackendHandle, rnfs_vfs::Attr, Option<rnfs_vfs::Attr>),
        (FsError, Option<rnfs_vfs::Attr>),
    > {
        switched(c);
        self.0.lookup(c, dir, name)
    }
    fn access(
        &self,
        c: &Cred,
        fh: &BackendHandle,
        mask: u32,
    ) -> rnfs_vfs::FsResult<(u32, rnfs_vfs::Attr)> {
        switched(c);
        self.0.access(c, fh, mask)
    }
    fn readlink(
        &self,
        c: &Cred,
        fh: &BackendHandle,
        out: &mut Vec<u8>,
    ) -> rnfs_vfs::FsResult<rnfs_vfs::Attr> {
        switched(c);
        self.0.readlink(c, fh, out)
    }
    fn read(
        &self,
        c: &Cred,
        fh: &BackendHandle,
        offset: u64,
        count: u32,
        out: &mut Vec<u8>,
    ) -> rnfs_vfs::FsResult<rnfs_vfs::ReadOk> {
        switched(c);
        self.0.read(c, fh, offset, count, out)
    }
    fn write(
        &self,
        c: &Cred,
        fh: &BackendHandle,
        offset: u64,
        data: &[u8],
        stable: Stability,
    ) -> Result<rnfs_vfs::WriteOk, (FsError, rnfs_vfs::Wcc)> {
        switched(c);
        self.0.write(c, fh, offset, data, stable)
    }
    fn create(
        &self,
        c: &Cred,
        dir: &BackendHandle,
        name: &[u8],
        how: &CreateHow,
    ) -> Result<rnfs_vfs::Created, (FsError, rnfs_vfs::Wcc)> {
        switched(c);
        self.0.create(c, dir, name, how)
    }
    fn mkdir(
        &self,
        c: &Cred,
        dir: &BackendHandle,
        name: &[u8],
        attr: &SetAttr,
    ) -> Result<rnfs_vfs::Created, (FsError, rnfs_vfs::Wcc)> {
        switched(c);
        self.0.mkdir(c, dir, name, attr)
    }
    fn symlink(
        &self,
        c: &Cred,
        dir: &BackendHandle,
        name: &[u8],
        target: &[u8],
        attr: &SetAttr,
    ) -> Result<rnfs_vfs::Created, (FsError, rnfs_vfs::Wcc)> {
        switched(c);
        self.0.symlink(c, dir, name, target, attr)
    }
    fn mknod(
        &self,
        c: &Cred,
        dir: &BackendHandle,
        name: &[u8],
        node: &rnfs_vfs::SpecialNode,
        attr: &SetAttr,
    ) -> Result<rnfs_vfs::Created, (FsError, rnfs_vfs::Wcc)> {
        switched(c);
        self.0.mknod(c, dir, name, node, attr)
    }
    fn remove(
        &self,
        c: &Cred,
        dir: &BackendHandle,
        name: &[u8],
    ) -> Result<rnfs_vfs::Wcc, (FsError, rnfs_vfs::Wcc)> {
        switched(c);
        self.0.remove(c, dir, name)
    }
    fn rmdir(
        &self,
        c: &Cred,
        dir: &BackendHandle,
        name: &[u8],
    ) -> Result<rnfs_vfs::Wcc, (FsError, rnfs_vfs::Wcc)> {
        switched(c);
        self.0.rmdir(c, dir, name)
    }
    fn rename(
        &self,
        c: &Cred,
        from_dir: &BackendHandle,
        from_name: &[u8],
        to_dir: &BackendHandle,
        to_name: &[u8],
    ) -> Result<(rnfs_vfs::Wcc, rnfs_vfs::Wcc), (FsError, rnfs_vfs::Wcc, rnfs_vfs::Wcc)> {
        switched(c);
        self.0.rename(c, from_dir, from_name, to_dir, to_name)
    }
    fn link(
        &self,
        c: &Cred,
        fh: &BackendHandle,
        dir: &BackendHandle,
        name: &[u8],
    ) -> Result<
        (Option<rnfs_vfs::Attr>, rnfs_vfs::Wcc),
        (FsError, Option<rnfs_vfs::Attr>, rnfs_vfs::Wcc),
    > {
        switched(c);
        self.0.link(c, fh, dir, name)
    }
    fn readdir(
        &self,
        c: &Cred,
        dir: &BackendHandle,
        cookie: u64,
        verifier: rnfs_vfs::CookieVerifier,
        plus: bool,
        sink: &mut dyn FnMut(DirEntry<'_>) -> bool,
    ) -> Result<rnfs_vfs::ReaddirEnd, (FsError, Option<rnfs_vfs::Attr>)> {
        switched(c);
        self.0.readdir(c, dir, cookie, verifier, plus, sink)
    }
    fn fsstat(
        &self,
        c: &Cred,
        fh: &BackendHandle,
    ) -> rnfs_vfs::FsResult<(rnfs_vfs::FsStat, rnfs_vfs::Attr)> {
        switched(c);
        self.0.fsstat(c, fh)
    }
    fn info(&self) -> rnfs_vfs::FsInfo {
        self.0.info()
    }
    fn commit(
        &self,
        c: &Cred,
        fh: &BackendHandle,
        offset: u64,
        count: u32,
    ) -> Result<rnfs_vfs::Wcc, (FsError, rnfs_vfs::Wcc)> {
        switched(c);
        self.0.commit(c, fh, offset, count)
    }
    fn write_verifier(&self) -> rnfs_vfs::WriteVerifier {
        self.0.write_verifier()
    }
}

mod as_caller {
    use super::*;

    fn fixture() -> Fixture<AsCaller> {
        let dir = temp_dir();
        let fs = LocalFs::open(dir.path(), LocalOptions::default()).unwrap();
        Fixture::new(AsCaller(fs), Caps::ALL).with_guard(dir)
    }

    // Needs root (as CI runs): the identities are real.
    conformance_permission_tests!(fixture);
}

// ---- Backend-specific cases ----------------------------------------------

fn open(dir: &Path) -> LocalFs {
    LocalFs::open(dir, LocalOptions::default()).unwrap()
}

fn root() -> Cred {
    Cred::root()
}

fn guarded(mode: u32) -> CreateHow {
    CreateHow::Guarded(SetAttr {
        mode: Some(mode),
        ..SetAttr::default()
    })
}

fn create(fs: &LocalFs, dir: &BackendHandle, name: &[u8]) -> BackendHandle {
    fs.create(&root(), dir, name, &guarded(0o644))
        .unwrap()
        .handle
}

fn lookup(fs: &LocalFs, dir: &BackendHandle, name: &[u8]) -> Result<BackendHandle, FsError> {
    fs.lookup(&root(), dir, name).map(|r| r.0).map_err(|e| e.0)
}

fn write(fs: &LocalFs, fh: &BackendHandle, offset: u64, data: &[u8]) {
    let ok = fs
        .write(&root(), fh, offset, data, Stability::Unstable)
        .unwrap();
    assert_eq!(ok.count as usize, data.len());
}

fn read(fs: &LocalFs, fh: &BackendHandle, len: u32) -> Result<Vec<u8>, FsError> {
    let mut out = Vec::new();
    fs.read(&root(), fh, 0, len, &mut out)?;
    Ok(out)
}

#[test]
fn symlink_to_etc_is_returned_not_followed() {
    let dir = temp_dir();
    symlink("/etc", dir.path().join("etc")).unwrap();
    symlink("/etc/passwd", dir.path().join("passwd")).unwrap();
    let fs = open(dir.path());
    let r = fs.root();
    for name in [&b"etc"[..], b"passwd"] {
        let link = lookup(&fs, &r, name).unwrap();
        assert_eq!(fs.getattr(&root(), &link).unwrap().ftype, FileType::Symlink);
        let mut target = Vec::new();
        fs.readlink(&root(), &link, &mut target).unwrap();
        assert!(target.starts_with(b"/etc"));
        // Nothing reaches through the link.
        assert_eq!(lookup(&fs, &link, b"passwd"), Err(FsError::NotDir));
        assert_eq!(read(&fs, &link, 100), Err(FsError::Inval));
        let w = fs.write(&root(), &link, 0, b"x", Stability::FileSync);
        assert_eq!(w.unwrap_err().0, FsError::Inval);
        let c = fs.create(&root(), &link, b"x", &guarded(0o644));
        assert_eq!(c.unwrap_err().0, FsError::NotDir);
        let l = fs.readdir(&root(), &link, 0, [0; 8], true, &mut |_| true);
        assert_eq!(l.unwrap_err().0, FsError::NotDir);
        // SETATTR acts on the link itself: /etc keeps its times.
        let set = SetAttr {
            mtime: SetTime::ClientTime(Time {
                secs: 1000,
                nsecs: 0,
            }),
            ..SetAttr::default()
        };
        let before = std::fs::metadata("/etc").unwrap();
        fs.setattr(&root(), &link, &set, None).unwrap();
        let after = std::fs::metadata("/etc").unwrap();
        assert_eq!(before.modified().unwrap(), after.modified().unwrap());
        assert_eq!(fs.getattr(&root(), &link).unwrap().mtime.secs, 1000);
    }
    // Nothing was written under /etc.
    assert!(!Path::new("/etc/x").exists());
}

#[test]
fn dotdot_and_slashes_stay_inside() {
    let dir = temp_dir();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let fs = open(dir.path());
    let r = fs.root();
    assert_eq!(lookup(&fs, &r, b".."), Ok(r));
    let sub = lookup(&fs, &r, b"sub").unwrap();
    assert_eq!(lookup(&fs, &sub, b".."), Ok(r));
    for name in [&b"../etc"[..], b"/etc", b"sub/..", b"a/b", b"a\0b", b""] {
        assert_eq!(lookup(&fs, &r, name), Err(FsError::Inval), "{name:?}");
        let c = fs.create(&root(), &r, name, &guarded(0o644));
        assert_eq!(c.unwrap_err().0, FsError::Inval, "{name:?}");
        let m = fs.mkdir(&root(), &r, name, &SetAttr::default());
        assert_eq!(m.unwrap_err().0, FsError::Inval, "{name:?}");
        let s = fs.symlink(&root(), &r, name, b"/etc", &SetAttr::default());
        assert_eq!(s.unwrap_err().0, FsError::Inval, "{name:?}");
        assert_eq!(fs.remove(&root(), &r, name).unwrap_err().0, FsError::Inval);
        let mv = fs.rename(&root(), &sub, b"..", &r, name);
        assert_eq!(mv.unwrap_err().0, FsError::Inval);
    }
    assert_eq!(lookup(&fs, &r, &[b'x'; 256]), Err(FsError::NameTooLong));
    // The root's ".." in a listing is the root itself, by file id: `..`
    // carries no handle.
    let mut dotdot = None;
    fs.readdir(&root(), &r, 0, [0; 8], true, &mut |e| {
        if e.name == b".." {
            dotdot = Some((e.fileid, e.plus.map(|p| p.0)));
        }
        true
    })
    .unwrap();
    let root_id = fs.getattr(&root(), &r).unwrap().fileid;
    assert_eq!(dotdot, Some((root_id, None)));
}

/// The `..` entry of a READDIRPLUS of `dir`: its fileid and handle (which
/// it never has: see `listings_open_no_dotdot_whatever_the_depth` in
/// `readdir.rs`).
fn listed_dotdot(fs: &LocalFs, dir: &BackendHandle) -> (u64, Option<BackendHandle>) {
    let mut dotdot = None;
    fs.readdir(&root(), dir, 0, [0; 8], true, &mut |e| {
        if e.name == b".." {
            dotdot = Some((e.fileid, e.plus.map(|p| p.0)));
        }
        true
    })
    .unwrap();
    dotdot.unwrap()
}

/// `..` of nested directories is their parent; of one right under the root,
/// the root. A listing names it by file id, with no handle: LOOKUP hands
/// the handle out after its walk up to the root, which no listing pays.
#[test]
fn dotdot_of_nested_directories() {
    let dir = temp_dir();
    std::fs::create_dir_all(dir.path().join("a/b/c")).unwrap();
    let fs = open(dir.path());
    let r = fs.root();
    let a = lookup(&fs, &r, b"a").unwrap();
    let b = lookup(&fs, &a, b"b").unwrap();
    let c = lookup(&fs, &b, b"c").unwrap();
    assert_eq!(lookup(&fs, &c, b".."), Ok(b));
    assert_eq!(lookup(&fs, &b, b".."), Ok(a));
    assert_eq!(lookup(&fs, &a, b".."), Ok(r));
    let ino = |p: &str| std::fs::metadata(dir.path().join(p)).unwrap().ino();
    assert_eq!(listed_dotdot(&fs, &c), (ino("a/b"), None));
    assert_eq!(listed_dotdot(&fs, &b), (ino("a"), None));
    assert_eq!(listed_dotdot(&fs, &a), (ino("."), None));
}

/// A directory moved out of the export keeps its handle, but `..` from it
/// never leaves the export: LOOKUP says `Stale` and READDIRPLUS's `..` entry
/// carries no handle (none does). Without the check, `..` climbed to the
/// directory the export is in, and from there anywhere on the file system.
/// The listing still names `..` by its file id, as READDIR always did: it
/// looks no further than the directory's own `..`.
#[test]
fn dotdot_of_a_directory_moved_out_stays_inside() {
    let top = temp_dir();
    let export = top.path().join("export");
    std::fs::create_dir_all(export.join("sub")).unwrap();
    std::fs::create_dir_all(export.join("a/b/c")).unwrap();
    std::fs::create_dir(top.path().join("away")).unwrap();
    std::fs::write(top.path().join("secret"), b"outside").unwrap();
    let fs = open(&export);
    let r = fs.root();
    let sub = lookup(&fs, &r, b"sub").unwrap();
    let a = lookup(&fs, &r, b"a").unwrap();
    let b = lookup(&fs, &a, b"b").unwrap();
    let c = lookup(&fs, &b, b"c").unwrap();
    // Cached descriptors of the parents too, as after a listing.
    assert_eq!(lookup(&fs, &c, b".."), Ok(b));
    // Directly to the directory holding the export, and deeper away.
    std::fs::rename(export.join("sub"), top.path().join("sub")).unwrap();
    std::fs::rename(export.join("a"), top.path().join("away/a")).unwrap();
    let ino = |p: &str| std::fs::metadata(top.path().join(p)).unwrap().ino();
    for (dir, name, parent) in [
        (sub, "sub", "."),
        (c, "c", "away/a/b"),
        (b, "b", "away/a"),
        (a, "a", "away"),
    ] {
        // The handle itself still works.
        assert_eq!(
            fs.getattr(&root(), &dir).unwrap().ftype,
            FileType::Directory
        );
        assert_eq!(lookup(&fs, &dir, b".."), Err(FsError::Stale), "{name}");
        assert_eq!(listed_dotdot(&fs, &dir), (ino(parent), None), "{name}");
    }
    // Nothing outside was reached: the file next to the export has no handle
    // from any of them.
    assert_eq!(lookup(&fs, &sub, b"secret"), Err(FsError::NoEnt));
    // Moved back in, `..` works again.
    std::fs::rename(top.path().join("away/a"), export.join("a")).unwrap();
    assert_eq!(lookup(&fs, &c, b".."), Ok(b));
    assert_eq!(lookup(&fs, &a, b".."), Ok(r));
}

/// The same for an unprivileged backend, whose handles resolve through the
/// descriptors its lookups cached.
#[test]
fn unprivileged_dotdot_of_a_directory_moved_out_stays_inside() {
    if !is_root() {
        cannot_run("needs root to play an ordinary user");
        return;
    }
    let top = temp_dir();
    let export = top.path().join("export");
    std::fs::create_dir_all(export.join("a/b")).unwrap();
    let user = Cred {
        uid: 4242,
        gid: 4242,
        groups: vec![],
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            identity::switch_to(&user).unwrap();
            let fs = open(&export);
            assert!(!fs.privileged());
            let r = fs.root();
            let a = fs.lookup(&user, &r, b"a").unwrap().0;
            let b = fs.lookup(&user, &a, b"b").unwrap().0;
            assert_eq!(fs.lookup(&user, &b, b"..").unwrap().0, a);
            identity::switch_to(&Cred::root()).unwrap();
            std::fs::rename(export.join("a"), top.path().join("a")).unwrap();
            identity::switch_to(&user).unwrap();
            let up = fs.lookup(&user, &b, b"..").map(|r| r.0).map_err(|e| e.0);
            assert_eq!(up, Err(FsError::Stale));
            let up = fs.lookup(&user, &a, b"..").map(|r| r.0).map_err(|e| e.0);
            assert_eq!(up, Err(FsError::Stale));
        });
    });
}

/// A handle of a file outside the export on the same file system resolves:
/// the kernel cannot tell, and the backend does not walk `..` (O(depth)). The
/// server's MAC over every handle it issues is what keeps clients from forging
/// one. A handle of another file system resolves to nothing.
#[test]
fn foreign_handles() {
    if !is_root() {
        cannot_run("open_by_handle_at needs root");
        return;
    }
    let dir = temp_dir();
    let fs = open(dir.path());
    let export_dev = std::fs::metadata(dir.path()).unwrap().dev();

    let etc = open(Path::new("/etc"));
    let passwd = lookup(&etc, &etc.root(), b"passwd").unwrap();
    let passwd_meta = std::fs::symlink_metadata("/etc/passwd").unwrap();
    match fs.getattr(&root(), &passwd) {
        Ok(attr) => {
            assert_eq!(
                passwd_meta.dev(),
                export_dev,
                "resolved across file systems"
            );
            assert_eq!(attr.fileid, passwd_meta.ino());
        }
        Err(e) => {
            assert_ne!(passwd_meta.dev(), export_dev, "{e:?}");
            assert!(matches!(e, FsError::Stale | FsError::BadHandle), "{e:?}");
        }
    }

    let mut tried = 0;
    for other in ["/dev/shm", "/dev", "/run", "/sys/fs/cgroup", "/"] {
        let Ok(meta) = std::fs::metadata(other) else {
            continue;
        };
        if meta.dev() == export_dev {
            continue;
        }
        let Ok(foreign) = LocalFs::open(Path::new(other), LocalOptions::default()) else {
            continue;
        };
        let mut handles = vec![foreign.root()];
        foreign
            .readdir(&root(), &foreign.root(), 0, [0; 8], true, &mut |e| {
                handles.extend(e.plus.map(|p| p.0));
                handles.len() < 50
            })
            .unwrap();
        for fh in &handles {
            let got = fs.getattr(&root(), fh);
            assert!(
                matches!(got, Err(FsError::Stale | FsError::BadHandle)),
                "{other}: handle {fh:?} resolved: {got:?}"
            );
        }
        tried += 1;
    }
    if tried == 0 {
        eprintln!("note: no other file system with handles to try");
    }
}

/// A file system mounted inside the export is not entered: its kernel handles
/// would be decoded against the export's file system.
#[test]
fn mount_points_inside_the_export_are_xdev() {
    let dir = temp_dir();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "rnfs-test", mnt.to_str().unwrap()])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        cannot_run("cannot mount a tmpfs here");
        return;
    }
    let _guard = Mounted(&mnt);
    std::fs::write(mnt.join("inside"), b"x").unwrap();
    let fs = open(dir.path());
    let r = fs.root();
    assert_eq!(lookup(&fs, &r, b"mnt"), Err(FsError::XDev));
    let mut plus_of_mnt = None;
    fs.readdir(&root(), &r, 0, [0; 8], true, &mut |e| {
        if e.name == b"mnt" {
            plus_of_mnt = Some(e.plus.map(|p| p.0));
        }
        true
    })
    .unwrap();
    assert_eq!(plus_of_mnt, Some(None), "listed, without a handle");
}

#[test]
fn handles_survive_a_restart() {
    let dir = temp_dir();
    let (file, sub, link, root_h) = {
        let fs = open(dir.path());
        let r = fs.root();
        let file = create(&fs, &r, b"f");
        write(&fs, &file, 0, b"hello");
        fs.commit(&root(), &file, 0, 0).unwrap();
        let sub = fs
            .mkdir(&root(), &r, b"d", &SetAttr::default())
            .unwrap()
            .handle;
        let link = fs
            .symlink(&root(), &sub, b"l", b"../f", &SetAttr::default())
            .unwrap()
            .handle;
        (file, sub, link, r)
    };
    let fs = open(dir.path());
    assert_eq!(fs.root(), root_h);
    if !fs.privileged() {
        cannot_run("unprivileged handles do not survive restarts");
        return;
    }
    assert_eq!(read(&fs, &file, 100).unwrap(), b"hello");
    assert_eq!(
        fs.getattr(&root(), &sub).unwrap().ftype,
        FileType::Directory
    );
    let mut target = Vec::new();
    fs.readlink(&root(), &link, &mut target).unwrap();
    assert_eq!(target, b"../f");
    assert_eq!(lookup(&fs, &sub, b"l"), Ok(link));
    assert_eq!(lookup(&fs, &sub, b".."), Ok(root_h));
}

#[test]
fn stale_after_unlink_by_another_process() {
    let dir = temp_dir();
    let fs = open(dir.path());
    let r = fs.root();
    let file = create(&fs, &r, b"f");
    write(&fs, &file, 0, b"data"); // the descriptor is now cached
    std::fs::remove_file(dir.path().join("f")).unwrap();
    assert_eq!(fs.getattr(&root(), &file), Err(FsError::Stale));
    assert_eq!(read(&fs, &file, 4), Err(FsError::Stale));
    let w = fs.write(&root(), &file, 0, b"x", Stability::Unstable);
    assert_eq!(w.unwrap_err().0, FsError::Stale);
    // A new file of the same name is a new object.
    std::fs::write(dir.path().join("f"), b"new").unwrap();
    let again = lookup(&fs, &r, b"f").unwrap();
    assert_ne!(again, file);
    assert_eq!(read(&fs, &again, 10).unwrap(), b"new");
    assert_eq!(fs.getattr(&root(), &file), Err(FsError::Stale));
}

/// Descriptors this process holds on deleted files whose path was `path`.
fn open_deleted(path: &Path) -> usize {
    let want = format!("{} (deleted)", path.display());
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.as_os_str() == want.as_str())
        .count()
}

/// REMOVE (and RENAME over a file) drops the cached descriptor of a file whose
/// last link went away, so its space is freed at once; other links keep it.
#[test]
fn removing_the_last_link_closes_cached_descriptors() {
    let dir = temp_dir();
    let fs = open(dir.path());
    let r = fs.root();
    let f = create(&fs, &r, b"f");
    write(&fs, &f, 0, &[1; 8192]);
    fs.link(&root(), &f, &r, b"g").unwrap();
    fs.remove(&root(), &r, b"g").unwrap();
    assert_eq!(read(&fs, &f, 1).unwrap(), [1], "still linked as f");
    fs.remove(&root(), &r, b"f").unwrap();
    assert_eq!(open_deleted(&dir.path().join("f")), 0);
    assert_eq!(fs.getattr(&root(), &f), Err(FsError::Stale));
    // Replaced by a rename.
    let a = create(&fs, &r, b"a");
    write(&fs, &a, 0, b"old");
    create(&fs, &r, b"b");
    fs.rename(&root(), &r, b"b", &r, b"a").unwrap();
    assert_eq!(open_deleted(&dir.path().join("a")), 0);
    assert_eq!(fs.getattr(&root(), &a), Err(FsError::Stale));
}

#[test]
fn read_only_export_refuses_every_change() {
    let dir = temp_dir();
    std::fs::write(dir.path().join("f"), b"keep").unwrap();
    std::fs::create_dir(dir.path().join("d")).unwrap();
    let options = LocalOptions {
        read_only: true,
        ..LocalOptions::default()
    };
    let fs = LocalFs::open(dir.path(), options).unwrap();
    assert!(fs.read_only());
    let r = fs.root();
    let f = lookup(&fs, &r, b"f").unwrap();
    let ro = |e: FsError| assert_eq!(e, FsError::RoFs);
    let set = SetAttr {
        size: Some(0),
        ..SetAttr::default()
    };
    ro(fs.setattr(&root(), &f, &set, None).unwrap_err().0);
    ro(fs
        .write(&root(), &f, 0, b"x", Stability::FileSync)
        .unwrap_err()
        .0);
    ro(fs.create(&root(), &r, b"n", &guarded(0o644)).unwrap_err().0);
    ro(fs
        .mkdir(&root(), &r, b"n", &SetAttr::default())
        .unwrap_err()
        .0);
    ro(fs
        .symlink(&root(), &r, b"n", b"t", &SetAttr::default())
        .unwrap_err()
        .0);
    let fifo = rnfs_vfs::SpecialNode::Fifo;
    ro(fs
        .mknod(&root(), &r, b"n", &fifo, &SetAttr::default())
        .unwrap_err()
        .0);
    ro(fs.remove(&root(), &r, b"f").unwrap_err().0);
    ro(fs.rmdir(&root(), &r, b"d").unwrap_err().0);
    ro(fs.rename(&root(), &r, b"f", &r, b"g").unwrap_err().0);
    ro(fs.link(&root(), &f, &r, b"g").unwrap_err().0);
    ro(fs.commit(&root(), &f, 0, 0).unwrap_err().0);
    // Reading still works; ACCESS grants no change.
    assert_eq!(read(&fs, &f, 10).unwrap(), b"keep");
    let (granted, _) = fs.access(&root(), &r, access::ALL).unwrap();
    assert_eq!(
        granted & (access::MODIFY | access::EXTEND | access::DELETE),
        0
    );
    assert_ne!(granted & access::READ, 0);
    assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"keep");
    assert!(dir.path().join("d").is_dir());
}

#[test]
fn durability_calls_and_verifier() {
    let dir = temp_dir();
    let fs = open(dir.path());
    let r = fs.root();
    let f = create(&fs, &r, b"f");
    let verifier = fs.write_verifier();
    for (i, stable) in [
        Stability::Unstable,
        Stability::DataSync,
        Stability::FileSync,
    ]
    .into_iter()
    .enumerate()
    {
        let data = vec![b'a' + i as u8; 4096];
        let ok = fs
            .write(&root(), &f, (i * 4096) as u64, &data, stable)
            .unwrap();
        assert_eq!(ok.count, 4096);
        assert!(ok.committed >= stable);
        let after = ok.wcc.after.unwrap();
        assert_eq!(after.size, ((i + 1) * 4096) as u64);
    }
    // An empty stable write still syncs and succeeds.
    let ok = fs.write(&root(), &f, 0, b"", Stability::FileSync).unwrap();
    assert_eq!(ok.count, 0);
    let wcc = fs.commit(&root(), &f, 0, 0).unwrap();
    assert_eq!(wcc.after.unwrap().size, 3 * 4096);
    assert_eq!(fs.write_verifier(), verifier, "no error, no new verifier");
    let on_disk = std::fs::read(dir.path().join("f")).unwrap();
    assert_eq!(on_disk.len(), 3 * 4096);
    assert!(on_disk[4096..8192].iter().all(|&b| b == b'b'));
    // A new instance (a restart) has a new verifier.
    drop(fs);
    assert_ne!(open(dir.path()).write_verifier(), verifier);
    // COMMIT of a directory.
    let fs = open(dir.path());
    assert_eq!(
        fs.commit(&root(), &fs.root(), 0, 0).unwrap_err().0,
        FsError::IsDir
    );
    // Writes past the largest offset are FBig, not a panic or EINVAL.
    let w = fs.write(&root(), &f, u64::MAX - 1, b"xy", Stability::Unstable);
    assert_eq!(w.unwrap_err().0, FsError::FBig);
}

/// RFC 1813's synchronous procedures (and SETATTR, as knfsd) commit what
/// they changed before answering: the directory whose entries changed, and
/// a new or changed regular file or directory itself. `sync_metadata:
/// false` (exports(5) `async`) commits nothing.
#[test]
fn metadata_changes_are_committed_before_the_reply() {
    let dir = temp_dir();
    for sync in [true, false] {
        let fs = LocalFs::open(
            dir.path(),
            LocalOptions {
                sync_metadata: sync,
                ..LocalOptions::default()
            },
        )
        .unwrap();
        let r = fs.root();
        let tag = if sync { "s" } else { "a" };
        let name = |n: &str| format!("{tag}-{n}").into_bytes();
        let syncs = std::cell::Cell::new(fs.metadata_syncs());
        // How many objects the last step committed.
        let committed = || {
            let now = fs.metadata_syncs();
            now - syncs.replace(now)
        };
        let expect = |what: &str, n: u64| {
            let want = if sync { n } else { 0 };
            assert_eq!(committed(), want, "{what} (sync = {sync})");
        };
        // A directory other than the root: its cached descriptor is O_PATH.
        let sub = fs
            .mkdir(&root(), &r, &name("d"), &SetAttr::default())
            .unwrap()
            .handle;
        expect("MKDIR: the new directory and its parent", 2);
        let f = create(&fs, &sub, b"f");
        expect("CREATE: the new file and its directory", 2);
        let again = CreateHow::Unchecked(SetAttr {
            size: Some(0),
            ..SetAttr::default()
        });
        fs.create(&root(), &sub, b"f", &again).unwrap();
        expect("CREATE UNCHECKED truncating: the file and its directory", 2);
        fs.symlink(&root(), &sub, b"l", b"f", &SetAttr::default())
            .unwrap();
        expect("SYMLINK: the directory (a link has no descriptor)", 1);
        fs.link(&root(), &f, &r, &name("hard")).unwrap();
        expect("LINK: the directory", 1);
        let chmod = SetAttr {
            mode: Some(0o600),
            ..SetAttr::default()
        };
        fs.setattr(&root(), &f, &chmod, None).unwrap();
        expect("SETATTR of a file", 1);
        fs.setattr(&root(), &sub, &chmod, None).unwrap();
        expect("SETATTR of a directory", 1);
        fs.setattr(&root(), &f, &SetAttr::default(), None).unwrap();
        expect("SETATTR changing nothing", 0);
        fs.rename(&root(), &sub, b"f", &sub, b"g").unwrap();
        expect("RENAME within one directory", 1);
        fs.rename(&root(), &sub, b"g", &r, &name("g")).unwrap();
        expect("RENAME between directories: both", 2);
        fs.remove(&root(), &r, &name("g")).unwrap();
        expect("REMOVE", 1);
        write(&fs, &f, 0, b"unstable");
        expect("an UNSTABLE WRITE (COMMIT's business)", 0);
        fs.remove(&root(), &sub, b"l").unwrap();
        expect("REMOVE of the link", 1);
        fs.rmdir(&root(), &r, &name("d")).unwrap();
        expect("RMDIR", 1);
        assert_eq!(
            fs.remove(&root(), &r, &name("missing")).unwrap_err().0,
            FsError::NoEnt
        );
        expect("a REMOVE that failed", 0);
    }
}

/// A caller who may create in a directory without reading it (a drop box,
/// mode 0733) still gets its CREATE committed: the directory is opened for
/// the `fsync` as root.
#[test]
fn a_drop_box_create_is_committed() {
    if !is_root() {
        cannot_run("needs root to switch identities");
        return;
    }
    let dir = temp_dir();
    let drop_box = dir.path().join("box");
    std::fs::create_dir(&drop_box).unwrap();
    std::fs::set_permissions(&drop_box, std::fs::Permissions::from_mode(0o733)).unwrap();
    let fs = open(dir.path());
    let b = lookup(&fs, &fs.root(), b"box").unwrap();
    let caller = Cred {
        uid: 4242,
        gid: 4242,
        groups: vec![],
    };
    let before = fs.metadata_syncs();
    identity::switch_to(&caller).unwrap();
    let created = fs.create(&caller, &b, b"letter", &guarded(0o644));
    identity::switch_to(&Cred::root()).unwrap();
    created.unwrap();
    assert_eq!(fs.metadata_syncs() - before, 2);
    assert!(drop_box.join("letter").exists());
}

#[test]
fn readdir_ten_thousand_entries_paged() {
    let dir = temp_dir();
    let big = dir.path().join("big");
    std::fs::create_dir(&big).unwrap();
    let want: HashSet<Vec<u8>> = (0..10_000).map(|i| format!("n{i}").into_bytes()).collect();
    for name in &want {
        std::fs::File::create(big.join(std::str::from_utf8(name).unwrap())).unwrap();
    }
    let fs = open(dir.path());
    let d = lookup(&fs, &fs.root(), b"big").unwrap();
    for (page, plus) in [(3usize, false), (50, true), (1000, false)] {
        let mut seen = HashSet::new();
        let mut cookie = 0;
        let mut calls = 0;
        loop {
            calls += 1;
            let mut accepted = 0;
            let mut last = cookie;
            let end = fs
                .readdir(&root(), &d, cookie, [0; 8], plus, &mut |e| {
                    if accepted == page {
                        return false;
                    }
                    accepted += 1;
                    last = e.cookie;
                    assert!(seen.insert(e.name.to_vec()), "{:?} twice", e.name);
                    if plus && e.name != b".." {
                        assert!(e.plus.is_some(), "{:?} without plus", e.name);
                    }
                    true
                })
                .unwrap();
            cookie = last;
            if end.eof {
                break;
            }
        }
        assert!(seen.remove(&b"."[..]) && seen.remove(&b".."[..]));
        assert_eq!(seen, want, "page {page}");
        assert!(calls >= 10_002 / page, "page {page}: {calls} calls");
    }
}

#[test]
fn exclusive_create_retransmit() {
    let dir = temp_dir();
    let fs = open(dir.path());
    let r = fs.root();
    let verf = *b"\x01\x02\x03\x04\x05\x06\x07\x08";
    let first = fs
        .create(&root(), &r, b"x", &CreateHow::Exclusive(verf))
        .unwrap();
    let again = fs
        .create(&root(), &r, b"x", &CreateHow::Exclusive(verf))
        .unwrap();
    assert_eq!(first.handle, again.handle);
    let other = fs.create(&root(), &r, b"x", &CreateHow::Exclusive(*b"zzzzzzzz"));
    assert_eq!(other.unwrap_err().0, FsError::Exist);
    // Once the client set the real attributes, a late retransmission is refused.
    let set = SetAttr {
        mode: Some(0o640),
        atime: SetTime::ServerTime,
        mtime: SetTime::ServerTime,
        ..SetAttr::default()
    };
    fs.setattr(&root(), &first.handle, &set, None).unwrap();
    let late = fs.create(&root(), &r, b"x", &CreateHow::Exclusive(verf));
    assert_eq!(late.unwrap_err().0, FsError::Exist);
    // A non-empty file with the verifier's times is not ours either.
    let y = fs
        .create(&root(), &r, b"y", &CreateHow::Exclusive(verf))
        .unwrap();
    write(&fs, &y.handle, 0, b"data");
    let set_back = SetAttr {
        atime: SetTime::ClientTime(y.attr.atime),
        mtime: SetTime::ClientTime(y.attr.mtime),
        ..SetAttr::default()
    };
    fs.setattr(&root(), &y.handle, &set_back, None).unwrap();
    let retry = fs.create(&root(), &r, b"y", &CreateHow::Exclusive(verf));
    assert_eq!(retry.unwrap_err().0, FsError::Exist);
}

/// The process umask (often 022) must not cut the modes clients ask for.
#[test]
fn modes_are_exact_despite_umask() {
    let dir = temp_dir();
    let fs = open(dir.path());
    let r = fs.root();
    let f = fs.create(&root(), &r, b"f", &guarded(0o666)).unwrap();
    assert_eq!(f.attr.mode, 0o666);
    let set = SetAttr {
        mode: Some(0o777),
        ..SetAttr::default()
    };
    let d = fs.mkdir(&root(), &r, b"d", &set).unwrap();
    assert_eq!(d.attr.mode, 0o777);
    let meta = std::fs::metadata(dir.path().join("d")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o777);
}

/// In a directory with a default ACL the kernel masks a new object's mode
/// by that ACL instead of the umask, for knfsd as for any process, and the
/// backend keeps what the kernel decided: it once put back every bit the
/// creation cut, taking them all for the umask's, and so made files in a
/// private directory (`o::---`) readable by everyone. Also as a caller who
/// is not root, whose fsuid cannot read the server's `/proc/self/fd`.
#[test]
fn a_default_acl_masks_new_modes() {
    let dir = temp_dir();
    let shared = dir.path().join("private");
    std::fs::create_dir(&shared).unwrap();
    // u::rwx g::r-x o::--- as a default ACL (the kernel's xattr format:
    // version 2, then (tag, perm, id) entries in tag order).
    let mut acl = 2u32.to_le_bytes().to_vec();
    for (tag, perm) in [(0x01u16, 7u16), (0x04, 5), (0x20, 0)] {
        acl.extend_from_slice(&tag.to_le_bytes());
        acl.extend_from_slice(&perm.to_le_bytes());
        acl.extend_from_slice(&u32::MAX.to_le_bytes());
    }
    let set_acl = rustix::fs::setxattr(
        &shared,
        "system.posix_acl_default",
        &acl,
        rustix::fs::XattrFlags::empty(),
    );
    if let Err(e) = set_acl {
        cannot_run(&format!("no POSIX ACLs here ({e})"));
        return;
    }
    let fs = open(dir.path());
    let r = fs.root();
    let private = lookup(&fs, &r, b"private").unwrap();
    let f = fs.create(&root(), &private, b"f", &guarded(0o666)).unwrap();
    assert_eq!(
        f.attr.mode, 0o640,
        "the file's mode ignores the default ACL"
    );
    let set = SetAttr {
        mode: Some(0o777),
        ..SetAttr::default()
    };
    let d = fs.mkdir(&root(), &private, b"d", &set).unwrap();
    assert_eq!(d.attr.mode, 0o750);
    let meta = std::fs::metadata(shared.join("d")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o750);
    if is_root() {
        std::os::unix::fs::chown(&shared, Some(4242), Some(4242)).unwrap();
        let caller = Cred {
            uid: 4242,
            gid: 4242,
            groups: Vec::new(),
        };
        switched(&caller);
        let made = fs.create(&caller, &private, b"g", &guarded(0o666));
        identity::switch_to(&Cred::root()).unwrap();
        assert_eq!(made.unwrap().attr.mode, 0o640);
    }
}

/// As the server runs it: the thread's fsuid is the caller's. Handles still
/// resolve (the backend asks for root only for that), and the kernel checks
/// every access.
#[test]
fn switched_identity_uses_kernel_permissions() {
    if !is_root() {
        cannot_run("needs root");
        return;
    }
    let dir = temp_dir();
    std::fs::write(dir.path().join("secret"), b"s").unwrap();
    std::fs::set_permissions(
        dir.path().join("secret"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("private")).unwrap();
    std::fs::set_permissions(
        dir.path().join("private"),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    let fs = open(dir.path());
    assert!(fs.privileged());
    let r = fs.root();
    let secret = lookup(&fs, &r, b"secret").unwrap();
    let private = lookup(&fs, &r, b"private").unwrap();
    let user = Cred {
        uid: 4242,
        gid: 4242,
        groups: vec![],
    };
    let shared = lookup(&fs, &r, b"secret").unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            identity::switch_to(&user).unwrap();
            // Resolution works, access does not.
            assert_eq!(fs.getattr(&user, &secret).unwrap().mode, 0o600);
            let mut out = Vec::new();
            assert_eq!(
                fs.read(&user, &secret, 0, 1, &mut out).unwrap_err(),
                FsError::Access
            );
            let l = fs.readdir(&user, &private, 0, [0; 8], false, &mut |_| true);
            assert_eq!(l.unwrap_err().0, FsError::Access);
            let c = fs.create(&user, &r, b"mine", &guarded(0o644));
            assert_eq!(c.unwrap_err().0, FsError::Access);
            let c = fs.create(&user, &private, b"mine", &guarded(0o644));
            assert_eq!(c.unwrap_err().0, FsError::Access);
        });
    });
    // Root caches a descriptor for the secret; the user still may not read it.
    assert_eq!(read(&fs, &shared, 1).unwrap(), b"s");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            identity::switch_to(&user).unwrap();
            let mut out = Vec::new();
            assert_eq!(
                fs.read(&user, &secret, 0, 1, &mut out).unwrap_err(),
                FsError::Access
            );
            // A file the user creates read-only stays writable by its creator
            // while its descriptor is cached (git objects, cp -p).
            let mine = fs.create(&user, &r, b"mine", &guarded(0o444)).unwrap();
            assert_eq!(mine.attr.uid, 4242);
            assert_eq!(mine.attr.mode, 0o444);
            // An owner or group asked for at creation is root's to give
            // (knfsd): anyone else's object is made as theirs, with no PERM.
            let others = SetAttr {
                mode: Some(0o644),
                uid: Some(4343),
                gid: Some(4343),
                ..SetAttr::default()
            };
            let theirs = fs.mkdir(&user, &r, b"theirs", &others).unwrap();
            assert_eq!((theirs.attr.uid, theirs.attr.gid), (4242, 4242));
            let sl = fs.symlink(&user, &r, b"theirs-sl", b"x", &others).unwrap();
            assert_eq!((sl.attr.uid, sl.attr.gid), (4242, 4242));
            let w = fs
                .write(&user, &mine.handle, 0, b"object", Stability::FileSync)
                .unwrap();
            assert_eq!(w.count, 6);
            let linked = fs.link(&user, &mine.handle, &r, b"mine2");
            assert_eq!(linked.unwrap().0.unwrap().nlink, 2);
            // Without CAP_DAC_READ_SEARCH, LINK goes through /proc: a symlink
            // is linked itself, not its target.
            let sl = fs.symlink(&user, &r, b"sl", b"/etc/passwd", &SetAttr::default());
            let sl = sl.unwrap().handle;
            let (attr, _) = fs.link(&user, &sl, &r, b"sl2").unwrap();
            assert_eq!(attr.unwrap().ftype, FileType::Symlink);
            assert_eq!(attr.unwrap().nlink, 2);
        });
    });
    assert_eq!(std::fs::read(dir.path().join("mine2")).unwrap(), b"object");
}

/// A caller who may write a file but not read it (mode 0620, a member of its
/// group) can WRITE it, as on knfsd, and still may not READ it.
#[test]
fn a_write_only_caller_can_write() {
    if !is_root() {
        cannot_run("needs root to play an ordinary user");
        return;
    }
    let dir = temp_dir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.path().join("log");
    std::fs::write(&path, b"").unwrap();
    std::os::unix::fs::chown(&path, Some(0), Some(4343)).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o620)).unwrap();
    let fs = open(dir.path());
    let r = fs.root();
    let log = lookup(&fs, &r, b"log").unwrap();
    let member = Cred {
        uid: 4242,
        gid: 4242,
        groups: vec![4343],
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            identity::switch_to(&member).unwrap();
            let w = fs.write(&member, &log, 0, b"entry", Stability::FileSync);
            assert_eq!(w.unwrap().count, 5);
            let mut out = Vec::new();
            let r = fs.read(&member, &log, 0, 5, &mut out);
            assert_eq!(r.unwrap_err(), FsError::Access);
            // Again, from the cached write-only descriptor.
            let w = fs.write(&member, &log, 5, b"s", Stability::Unstable);
            assert_eq!(w.unwrap().count, 1);
        });
    });
    assert_eq!(std::fs::read(&path).unwrap(), b"entrys");
    assert_eq!(descriptor_modes(&path), [libc::O_WRONLY]);
    // Root reads through a descriptor of its own, not the write-only one,
    // and it replaces the write-only one in the cache: later READs find it.
    assert_eq!(read(&fs, &log, 6).unwrap(), b"entrys");
    assert_eq!(descriptor_modes(&path), [libc::O_RDWR]);
}

/// The access modes of this process's descriptors open on `path`.
fn descriptor_modes(path: &Path) -> Vec<i32> {
    let mut modes = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        if std::fs::read_link(entry.path()).ok().as_deref() != Some(path) {
            continue;
        }
        let info = std::fs::read_to_string(Path::new("/proc/self/fdinfo").join(entry.file_name()));
        let Ok(info) = info else { continue };
        let flags = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .and_then(|f| i32::from_str_radix(f.trim(), 8).ok())
            .unwrap();
        // O_PATH descriptors (the handle cache's) open nothing.
        if flags & libc::O_PATH == 0 {
            modes.push(flags & libc::O_ACCMODE);
        }
    }
    modes
}

/// Writes `path` with `contents`, owned by `uid` (user and group), mode `mode`.
fn owned_file(path: &Path, contents: &[u8], uid: u32, mode: u32) {
    std::fs::write(path, contents).unwrap();
    std::os::unix::fs::chown(path, Some(uid), Some(uid)).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// knfsd's owner override holds for a file whose descriptor is not cached:
/// its owner may write, truncate and read it whatever its mode; others may
/// not.
#[test]
fn the_owner_may_write_a_read_only_file_opened_afresh() {
    if !is_root() {
        cannot_run("needs root to play an ordinary user");
        return;
    }
    let dir = temp_dir();
    let path = dir.path().join("ro");
    owned_file(&path, b"0123456789", 4242, 0o444);
    let locked = dir.path().join("locked");
    owned_file(&locked, b"secret", 4242, 0o000);
    let fs = open(dir.path());
    let r = fs.root();
    let ro = lookup(&fs, &r, b"ro").unwrap();
    let locked_fh = lookup(&fs, &r, b"locked").unwrap();
    let owner = Cred {
        uid: 4242,
        gid: 4242,
        groups: vec![],
    };
    let other = Cred {
        uid: 4343,
        gid: 4242,
        groups: vec![],
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            // Someone else first: refused, and nothing gets cached.
            identity::switch_to(&other).unwrap();
            let w = fs.write(&other, &ro, 0, b"x", Stability::Unstable);
            assert_eq!(w.unwrap_err().0, FsError::Access);
            let truncate = SetAttr {
                size: Some(4),
                ..SetAttr::default()
            };
            let t = fs.setattr(&other, &ro, &truncate, None);
            assert_eq!(t.unwrap_err().0, FsError::Access);

            identity::switch_to(&owner).unwrap();
            fs.setattr(&owner, &ro, &truncate, None).unwrap();
            let w = fs.write(&owner, &ro, 4, b"AB", Stability::FileSync);
            assert_eq!(w.unwrap().count, 2);
            let mut out = Vec::new();
            fs.read(&owner, &locked_fh, 0, 100, &mut out).unwrap();
            assert_eq!(out, b"secret");
            // The caller's identity is back after the override.
            assert_eq!(identity::fs_uid(), 4242);
            assert_eq!(
                std::fs::File::open(dir.path().join("locked"))
                    .unwrap_err()
                    .kind(),
                std::io::ErrorKind::PermissionDenied
            );

            // The descriptors are cached now; another user still may not.
            identity::switch_to(&other).unwrap();
            let w = fs.write(&other, &ro, 0, b"x", Stability::Unstable);
            assert_eq!(w.unwrap_err().0, FsError::Access);
        });
    });
    assert_eq!(std::fs::read(&path).unwrap(), b"0123AB");
}

/// COMMIT needs write permission, as on knfsd: a stranger who may not write
/// a file cannot make the server sync it, whether its descriptor is cached
/// or not; a reader neither. The owner may commit a 0444 file it wrote
/// (knfsd's owner override), cached or not.
#[test]
fn commit_needs_write_permission() {
    if !is_root() {
        cannot_run("needs root to play an ordinary user");
        return;
    }
    let dir = temp_dir();
    let private = dir.path().join("private");
    owned_file(&private, b"", 4242, 0o600);
    let shared = dir.path().join("shared");
    owned_file(&shared, b"readable", 4242, 0o644);
    let ro = dir.path().join("ro");
    owned_file(&ro, b"", 4242, 0o444);
    let owner = Cred {
        uid: 4242,
        gid: 4242,
        groups: vec![],
    };
    let stranger = Cred {
        uid: 4343,
        gid: 4343,
        groups: vec![],
    };
    let commit_as = |fs: &LocalFs, cred: &Cred, fh: &BackendHandle| {
        identity::switch_to(cred).unwrap();
        let result = fs.commit(cred, fh, 0, 0).map(drop).map_err(|e| e.0);
        identity::switch_to(&root()).unwrap();
        result
    };
    let fs = open(dir.path());
    let r = fs.root();
    let private_fh = lookup(&fs, &r, b"private").unwrap();
    let shared_fh = lookup(&fs, &r, b"shared").unwrap();
    let ro_fh = lookup(&fs, &r, b"ro").unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            // Nothing cached yet.
            let c = commit_as(&fs, &stranger, &private_fh);
            assert_eq!(c, Err(FsError::Access));
            let c = commit_as(&fs, &stranger, &shared_fh);
            assert_eq!(c, Err(FsError::Access), "a reader may not commit");
            // The owner writes and commits its 0444 file, from a fresh
            // descriptor, then from the cached one.
            assert_eq!(commit_as(&fs, &owner, &ro_fh), Ok(()));
            identity::switch_to(&owner).unwrap();
            let w = fs.write(&owner, &ro_fh, 0, b"data", Stability::Unstable);
            assert_eq!(w.unwrap().count, 4);
            identity::switch_to(&root()).unwrap();
            assert_eq!(commit_as(&fs, &owner, &ro_fh), Ok(()));
            // Descriptors cached (the owner's writes, a reader's read): the
            // stranger is still refused.
            identity::switch_to(&owner).unwrap();
            let w = fs.write(&owner, &private_fh, 0, b"x", Stability::Unstable);
            assert_eq!(w.unwrap().count, 1);
            identity::switch_to(&stranger).unwrap();
            let mut out = Vec::new();
            fs.read(&stranger, &shared_fh, 0, 100, &mut out).unwrap();
            identity::switch_to(&root()).unwrap();
            let c = commit_as(&fs, &stranger, &private_fh);
            assert_eq!(c, Err(FsError::Access));
            let c = commit_as(&fs, &stranger, &shared_fh);
            assert_eq!(c, Err(FsError::Access), "a reader may not commit");
            assert_eq!(commit_as(&fs, &owner, &private_fh), Ok(()));
            assert_eq!(commit_as(&fs, &owner, &shared_fh), Ok(()));
        });
    });
    assert_eq!(std::fs::read(&ro).unwrap(), b"data");
}

/// Without CAP_DAC_READ_SEARCH (here: opened by a thread whose fsuid is not
/// 0), handles resolve through the bounded cache filled by lookups.
#[test]
fn unprivileged_handles_come_from_the_cache() {
    if !is_root() {
        cannot_run("needs root to play an ordinary user");
        return;
    }
    let dir = temp_dir();
    std::fs::create_dir(dir.path().join("d")).unwrap();
    std::fs::write(dir.path().join("d/f"), b"content").unwrap();
    let privileged = open(dir.path());
    let d_handle = lookup(&privileged, &privileged.root(), b"d").unwrap();
    let user = Cred {
        uid: 4242,
        gid: 4242,
        groups: vec![],
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            identity::switch_to(&user).unwrap();
            let fs = open(dir.path());
            assert!(!fs.privileged());
            assert_eq!(fs.root(), privileged.root(), "same handle format");
            // Never looked up through this instance: unknown.
            assert_eq!(fs.getattr(&user, &d_handle), Err(FsError::Stale));
            let d = fs.lookup(&user, &fs.root(), b"d").unwrap().0;
            assert_eq!(d, d_handle);
            let f = fs.lookup(&user, &d, b"f").unwrap().0;
            let mut out = Vec::new();
            fs.read(&user, &f, 0, 100, &mut out).unwrap();
            assert_eq!(out, b"content");
            assert_eq!(fs.lookup(&user, &d, b"..").unwrap().0, fs.root());
            // READDIRPLUS fills the cache too.
            let mut handles = Vec::new();
            fs.readdir(&user, &fs.root(), 0, [0; 8], true, &mut |e| {
                handles.extend(e.plus.map(|p| p.0));
                true
            })
            .unwrap();
            assert!(handles.contains(&d));
            // Removing one link keeps the other's handle known.
            fs.link(&user, &f, &d, b"g").unwrap_err();
            identity::switch_to(&Cred::root()).unwrap();
            fs.link(&root(), &f, &d, b"g").unwrap();
            fs.remove(&root(), &d, b"g").unwrap();
            assert_eq!(fs.getattr(&root(), &f).unwrap().nlink, 1);
            fs.remove(&root(), &d, b"f").unwrap();
            assert_eq!(fs.getattr(&root(), &f), Err(FsError::Stale));
        });
    });
}

/// Many threads writing through a tiny descriptor cache: evictions under
/// concurrency lose no data.
#[test]
fn concurrent_writes_through_a_small_cache() {
    let dir = temp_dir();
    let options = LocalOptions {
        open_files: 4,
        ..LocalOptions::default()
    };
    let fs = LocalFs::open(dir.path(), options).unwrap();
    let r = fs.root();
    let files: Vec<_> = (0..16)
        .map(|i| create(&fs, &r, format!("f{i}").as_bytes()))
        .collect();
    std::thread::scope(|s| {
        for t in 0..8u8 {
            let (fs, files) = (&fs, &files);
            s.spawn(move || {
                for round in 0..50u64 {
                    for (i, f) in files.iter().enumerate() {
                        let byte = [t.wrapping_mul(31).wrapping_add(i as u8)];
                        let offset = u64::from(t) * 64 + round;
                        let ok = fs
                            .write(&root(), f, offset, &byte, Stability::Unstable)
                            .unwrap();
                        assert_eq!(ok.count, 1);
                    }
                }
            });
        }
    });
    for (i, f) in files.iter().enumerate() {
        fs.commit(&root(), f, 0, 0).unwrap();
        let data = std::fs::read(dir.path().join(format!("f{i}"))).unwrap();
        for t in 0..8u8 {
            let start = usize::from(t) * 64;
            let want = t.wrapping_mul(31).wrapping_add(i as u8);
            assert!(
                data[start..start + 50].iter().all(|&b| b == want),
                "file {i} thread {t}"
            );
        }
    }
}

/// A program written through the backend can be run on the server once
/// its descriptor has gone unused for `idle_writer_close`: the descriptor
/// opened for writing is flushed and closed (while it is open, `execve`
/// fails with ETXTBSY, and before this fix it stayed open for as long as
/// the server lived). The next WRITE opens the file again, and no byte is
/// lost.
#[test]
fn a_program_written_through_the_backend_runs_once_its_writer_is_idle() {
    let program = std::fs::read("/bin/true").unwrap();
    let dir = temp_dir();
    let noexec = rustix::fs::statvfs(dir.path())
        .unwrap()
        .f_flag
        .contains(rustix::fs::StatVfsMountFlags::NOEXEC);
    if noexec {
        cannot_run("the temporary directory is on a noexec mount");
        return;
    }
    let options = LocalOptions {
        idle_writer_close: Some(Duration::from_millis(200)),
        ..LocalOptions::default()
    };
    let fs = LocalFs::open(dir.path(), options).unwrap();
    let r = fs.root();
    let fh = fs
        .create(&root(), &r, b"true", &guarded(0o755))
        .unwrap()
        .handle;
    for (i, chunk) in program.chunks(8192).enumerate() {
        write(&fs, &fh, (i * 8192) as u64, chunk);
    }
    let verifier = fs.write_verifier();
    let path = dir.path().join("true");
    let busy = |e: &std::io::Error| e.raw_os_error() == Some(libc::ETXTBSY);
    // The cached descriptor keeps the program from running for now.
    let first = std::process::Command::new(&path).status();
    assert!(first.as_ref().is_err_and(busy), "{first:?}");
    // Within 1 to 2 s it is closed; other tests' forks may hold a copy
    // for a moment, so look until a deadline well past that.
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        match std::process::Command::new(&path).status() {
            Err(e) if busy(&e) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100));
            }
            other => break other,
        }
    };
    assert!(status.as_ref().is_ok_and(|s| s.success()), "{status:?}");
    assert_eq!(descriptor_modes(&path), [], "the writer is still open");
    assert_eq!(
        fs.write_verifier(),
        verifier,
        "a good flush moved the verifier"
    );
    // Written again: a fresh descriptor, and the data is whole.
    write(&fs, &fh, program.len() as u64, b"tail");
    fs.commit(&root(), &fh, 0, 0).unwrap();
    assert_eq!(descriptor_modes(&path), [libc::O_RDWR]);
    let mut want = program.clone();
    want.extend_from_slice(b"tail");
    assert_eq!(std::fs::read(&path).unwrap(), want);
}

#[test]
fn open_errors_name_the_path() {
    let missing = Path::new("/nonexistent/rnfs-export");
    let e = LocalFs::open(missing, LocalOptions::default()).unwrap_err();
    assert!(e.to_string().contains("/nonexistent/rnfs-export"), "{e}");
    let dir = temp_dir();
    let file = dir.path().join("plain");
    std::fs::write(&file, b"").unwrap();
    let e = LocalFs::open(&file, LocalOptions::default()).unwrap_err();
    assert!(e.to_string().contains("plain"), "{e}");
}

#[test]
fn fsid_override_and_info() {
    let dir = temp_dir();
    let options = LocalOptions {
        fsid: Some(77),
        ..LocalOptions::default()
    };
    let fs = LocalFs::open(dir.path(), options).unwrap();
    assert_eq!(fs.getattr(&root(), &fs.root()).unwrap().fsid, 77);
    let info = fs.info();
    assert_eq!(info.max_name, 255);
    assert!(info.max_link >= 1);
    assert_eq!(info.time_delta, Time { secs: 0, nsecs: 1 });
}

#[test]
fn read_cached_answers_from_the_page_cache_only() {
    let dir = temp_dir();
    let fs = open(dir.path());
    let fh = create(&fs, &fs.root(), b"f");
    let data: Vec<u8> = (0..256u32 << 10).map(|i| (i % 251) as u8).collect();
    write(&fs, &fh, 0, &data);
    // Just written: in the page cache.
    let mut out = b"kept".to_vec();
    let ok = fs
        .read_cached(&root(), &fh, 100, 1000, &mut out)
        .unwrap()
        .expect("data in the page cache is answered");
    assert_eq!((ok.count, ok.eof), (1000, false));
    assert_eq!(&out[..4], b"kept");
    assert_eq!(&out[4..], &data[100..1100]);
    // Written back and dropped from the page cache: only `read` answers.
    // The kernel may keep a page now and then (a remote CPU's LRU batch, a
    // flusher holding it, readahead started by the previous miss), so drop
    // and ask again a few times: a `read_cached` that answers every time
    // does not look at the page cache. Whatever it answers must be right.
    let file = std::fs::File::open(dir.path().join("f")).unwrap();
    let in_memory_fs = rustix::fs::statfs(dir.path()).unwrap().f_type == 0x0102_1994; // tmpfs
    let mut declined = false;
    for _ in 0..10 {
        file.sync_all().unwrap();
        rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        let mut out = b"kept".to_vec();
        match fs
            .read_cached(&root(), &fh, 0, 256 << 10, &mut out)
            .unwrap()
        {
            None => {
                assert_eq!(out, b"kept", "nothing appended when not answered");
                declined = true;
                break;
            }
            Some(ok) => assert_eq!(&out[4..], &data[..ok.count as usize]),
        }
    }
    assert!(
        declined || in_memory_fs,
        "dropped pages were answered as cached 10 times in a row"
    );
    assert_eq!(read(&fs, &fh, 256 << 10).unwrap(), data);
}

/// Sets `path`'s POSIX access ACL: the owner `owner`, a named user `uid`
/// with `named`, the owning group `group`, the mask `mask` and others
/// nothing (the `system.posix_acl_access` format: version 2, then tag,
/// permissions and id per entry, little-endian).
fn set_acl(path: &Path, owner: u16, uid: u32, named: u16, group: u16, mask: u16) -> bool {
    const UNDEFINED: u32 = u32::MAX;
    let mut value = 2u32.to_le_bytes().to_vec();
    for (tag, perm, id) in [
        (0x01u16, owner, UNDEFINED),
        (0x02, named, uid),
        (0x04, group, UNDEFINED),
        (0x10, mask, UNDEFINED),
        (0x20, 0, UNDEFINED),
    ] {
        value.extend_from_slice(&tag.to_le_bytes());
        value.extend_from_slice(&perm.to_le_bytes());
        value.extend_from_slice(&id.to_le_bytes());
    }
    let path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: NUL-terminated path and name; `value` outlives the call.
    let rc = unsafe {
        libc::setxattr(
            path.as_ptr(),
            c"system.posix_acl_access".as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    rc == 0
}

/// ACCESS grants what a POSIX ACL grants beyond the mode bits (a named
/// user's entry), as the kernel and knfsd do, and no more.
#[test]
fn access_follows_posix_acls() {
    if !is_root() {
        cannot_run("needs root");
        return;
    }
    let dir = temp_dir();
    std::fs::write(dir.path().join("f"), b"f").unwrap();
    std::fs::create_dir(dir.path().join("d")).unwrap();
    // f: owner rw, user 4242 rw, group r, mask rw (mode 0660); d: owner
    // rwx, user 4242 r-x, group ---, mask r-x (mode 0750).
    if !set_acl(&dir.path().join("f"), 6, 4242, 6, 4, 6)
        || !set_acl(&dir.path().join("d"), 7, 4242, 5, 0, 5)
    {
        cannot_run("no POSIX ACLs here");
        return;
    }
    let fs = open(dir.path());
    let r = fs.root();
    let f = lookup(&fs, &r, b"f").unwrap();
    let d = lookup(&fs, &r, b"d").unwrap();
    let named = Cred {
        uid: 4242,
        gid: 4242,
        groups: vec![],
    };
    let stranger = Cred {
        uid: 4343,
        gid: 4343,
        groups: vec![],
    };
    let all = access::READ
        | access::LOOKUP
        | access::MODIFY
        | access::EXTEND
        | access::DELETE
        | access::EXECUTE;
    std::thread::scope(|s| {
        s.spawn(|| {
            identity::switch_to(&named).unwrap();
            let (got, attr) = fs.access(&named, &f, all).unwrap();
            assert_eq!(attr.mode, 0o660);
            assert_eq!(got, access::READ | access::MODIFY | access::EXTEND);
            let (got, attr) = fs.access(&named, &d, all).unwrap();
            assert_eq!(attr.mode, 0o750);
            assert_eq!(got, access::READ | access::LOOKUP);
        });
        s.spawn(|| {
            identity::switch_to(&stranger).unwrap();
            assert_eq!(fs.access(&stranger, &f, all).unwrap().0, 0);
            assert_eq!(fs.access(&stranger, &d, all).unwrap().0, 0);
        });
    });
}
