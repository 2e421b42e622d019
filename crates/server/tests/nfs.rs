//! NFSv3 and MOUNT end to end over TCP: a real server with the memory and local
//! backends, driven by the blocking client.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

#[path = "../../../tests/support/cannot_run.rs"]
mod cannot_run;
mod common;
use cannot_run::cannot_run;

use common::{lookup, opener};

use std::sync::Arc;

use rnfs_client::{CallError, SyncConnection};
use rnfs_nfs3::*;
use rnfs_rpc::ReplyStatus;
use rnfs_server::nfs::exports::{Access, BackendKind};
use rnfs_server::nfs::{self, ExportConfig, Exports, HandleKey};
use rnfs_server::Server;
use rnfs_xdr::{Decode, Reader};

const KEY: [u8; 16] = *b"rnfs-test-key-16";

struct Fixture {
    server: Server,
    exports: Arc<Exports>,
    _dir: Option<tempfile::TempDir>,
}

impl Fixture {
    fn with(configs: Vec<ExportConfig>, dir: Option<tempfile::TempDir>) -> Self {
        let exports = Arc::new(Exports::new(&configs, Box::new(opener)).unwrap());
        let d = nfs::dispatcher(Arc::clone(&exports), HandleKey::from_bytes(KEY)).unwrap();
        let mut config = common::config();
        config.drc = Some(nfs::drc_config());
        let server = Server::start_with_dispatcher(config, Arc::new(d)).unwrap();
        Self {
            server,
            exports,
            _dir: dir,
        }
    }

    /// One read-write memory export mounted as /mem.
    fn memory() -> Self {
        let mut c = ExportConfig::new("/mem");
        c.backend = BackendKind::Memory;
        c.access = Access::Rw;
        c.squash = nfs::exports::Squash::None;
        Self::with(vec![c], None)
    }

    fn connect(&self) -> SyncConnection {
        SyncConnection::connect(self.server.local_addrs()[0]).unwrap()
    }
}

fn create(c: &mut SyncConnection, dir: &FileHandle, name: &[u8]) -> FileHandle {
    let res: CreateRes = c
        .nfs(
            NfsProc3::Create,
            &CreateArgs {
                where_: DirOpArgs3 {
                    dir: dir.as_fh3(),
                    name,
                },
                how: CreateHow3::Guarded(Sattr3 {
                    mode: Some(0o644),
                    ..Default::default()
                }),
            },
        )
        .unwrap();
    match res {
        CreateRes::Ok(ok) => ok.obj.unwrap(),
        other => panic!("create {name:?}: {other:?}"),
    }
}

fn write(c: &mut SyncConnection, fh: &FileHandle, offset: u64, data: &[u8]) -> WriteResOk {
    let res: WriteRes = c
        .nfs(
            NfsProc3::Write,
            &WriteArgs {
                file: fh.as_fh3(),
                offset,
                count: data.len() as u32,
                stable: StableHow::Unstable,
                data,
            },
        )
        .unwrap();
    match res {
        WriteRes::Ok(ok) => ok,
        other => panic!("write: {other:?}"),
    }
}

fn read(c: &mut SyncConnection, fh: &FileHandle, offset: u64, count: u32) -> (Vec<u8>, bool) {
    let raw = c
        .nfs_raw(
            NfsProc3::Read,
            &ReadArgs {
                file: fh.as_fh3(),
                offset,
                count,
            },
        )
        .unwrap();
    match ReadRes::decode(&mut Reader::new(&raw)).unwrap() {
        ReadRes::Ok(ok) => (ok.data.to_vec(), ok.eof),
        other => panic!("read: {other:?}"),
    }
}

fn status_of_getattr(c: &mut SyncConnection, fh: &[u8]) -> Nfsstat3 {
    let res: GetattrRes = c
        .nfs(
            NfsProc3::Getattr,
            &GetattrArgs {
                object: NfsFh3::new(fh).unwrap(),
            },
        )
        .unwrap();
    res.status()
}

#[test]
fn mount_create_write_read_commit() {
    let f = Fixture::memory();
    let mut c = f.connect();
    let root = c.mount("/mem").unwrap();
    assert_eq!(status_of_getattr(&mut c, root.as_bytes()), Nfsstat3::Ok);

    let fh = create(&mut c, &root, b"hello.txt");
    let w = write(&mut c, &fh, 0, b"hello, world");
    assert_eq!(w.count, 12);
    assert!(w.file_wcc.after.is_some());
    let (data, eof) = read(&mut c, &fh, 0, 100);
    assert_eq!((data.as_slice(), eof), (&b"hello, world"[..], true));
    let (data, eof) = read(&mut c, &fh, 7, 2);
    assert_eq!((data.as_slice(), eof), (&b"wo"[..], false));

    let commit: CommitRes = c
        .nfs(
            NfsProc3::Commit,
            &CommitArgs {
                file: fh.as_fh3(),
                offset: 0,
                count: 0,
            },
        )
        .unwrap();
    let CommitRes::Ok(ok) = commit else {
        panic!("{commit:?}")
    };
    assert_eq!(ok.verf, w.verf, "the write verifier is stable within a run");

    match lookup(&mut c, &root, b"hello.txt") {
        LookupRes::Ok(ok) => {
            assert_eq!(ok.object, fh);
            assert_eq!(ok.obj_attributes.unwrap().size, 12);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(lookup(&mut c, &root, b"nope").status(), Nfsstat3::Noent);
}

#[test]
fn every_namespace_procedure() {
    let f = Fixture::memory();
    let mut c = f.connect();
    let root = c.mount("/mem").unwrap();
    let dir_args = |name: &'static [u8]| DirOpArgs3 {
        dir: root.as_fh3(),
        name,
    };

    let mkdir: MkdirRes = c
        .nfs(
            NfsProc3::Mkdir,
            &MkdirArgs {
                where_: dir_args(b"sub"),
                attributes: Sattr3::default(),
            },
        )
        .unwrap();
    let MkdirRes::Ok(sub) = mkdir else {
        panic!("{mkdir:?}")
    };
    assert_eq!(sub.obj_attributes.unwrap().ftype, Ftype3::Dir);
    assert!(sub.dir_wcc.before.is_some() && sub.dir_wcc.after.is_some());

    let sym: SymlinkRes = c
        .nfs(
            NfsProc3::Symlink,
            &SymlinkArgs {
                where_: dir_args(b"link"),
                symlink: Symlinkdata3 {
                    symlink_attributes: Sattr3::default(),
                    symlink_data: b"../../etc/passwd",
                },
            },
        )
        .unwrap();
    let SymlinkRes::Ok(sym) = sym else {
        panic!("{sym:?}")
    };
    let raw = c
        .nfs_raw(
            NfsProc3::Readlink,
            &ReadlinkArgs {
                symlink: sym.obj.unwrap().as_fh3(),
            },
        )
        .unwrap();
    match ReadlinkRes::decode(&mut Reader::new(&raw)).unwrap() {
        ReadlinkRes::Ok(ok) => assert_eq!(ok.data, b"../../etc/passwd"),
        other => panic!("{other:?}"),
    }

    let fifo: MknodRes = c
        .nfs(
            NfsProc3::Mknod,
            &MknodArgs {
                where_: dir_args(b"fifo"),
                what: Mknoddata3::Fifo(Sattr3::default()),
            },
        )
        .unwrap();
    let MknodRes::Ok(fifo) = fifo else {
        panic!("{fifo:?}")
    };
    assert_eq!(fifo.obj_attributes.unwrap().ftype, Ftype3::Fifo);
    let bad: MknodRes = c
        .nfs(
            NfsProc3::Mknod,
            &MknodArgs {
                where_: dir_args(b"reg"),
                what: Mknoddata3::Other(Ftype3::Reg),
            },
        )
        .unwrap();
    assert_eq!(bad.status(), Nfsstat3::Badtype);

    let file = create(&mut c, &root, b"a");
    let link: LinkRes = c
        .nfs(
            NfsProc3::Link,
            &LinkArgs {
                file: file.as_fh3(),
                link: dir_args(b"b"),
            },
        )
        .unwrap();
    let LinkRes::Ok(link) = link else {
        panic!("{link:?}")
    };
    assert_eq!(link.file_attributes.unwrap().nlink, 2);

    // RENAME over an existing target.
    let other = create(&mut c, &root, b"c");
    let ren: RenameRes = c
        .nfs(
            NfsProc3::Rename,
            &RenameArgs {
                from: dir_args(b"c"),
                to: dir_args(b"a"),
            },
        )
        .unwrap();
    assert_eq!(ren.status(), Nfsstat3::Ok);
    match lookup(&mut c, &root, b"a") {
        LookupRes::Ok(ok) => assert_eq!(ok.object, other),
        r => panic!("{r:?}"),
    }

    let rm: RemoveRes = c
        .nfs(
            NfsProc3::Remove,
            &RemoveArgs {
                object: dir_args(b"a"),
            },
        )
        .unwrap();
    assert_eq!(rm.status(), Nfsstat3::Ok);
    assert_eq!(
        status_of_getattr(&mut c, other.as_bytes()),
        Nfsstat3::Stale,
        "a removed file's handle is stale"
    );
    let rmdir: RmdirRes = c
        .nfs(
            NfsProc3::Rmdir,
            &RmdirArgs {
                object: dir_args(b"sub"),
            },
        )
        .unwrap();
    assert_eq!(rmdir.status(), Nfsstat3::Ok);

    let fsstat: FsstatRes = c
        .nfs(
            NfsProc3::Fsstat,
            &FsstatArgs {
                fsroot: root.as_fh3(),
            },
        )
        .unwrap();
    assert_eq!(fsstat.status(), Nfsstat3::Ok);
    let fsinfo: FsinfoRes = c
        .nfs(
            NfsProc3::Fsinfo,
            &FsinfoArgs {
                fsroot: root.as_fh3(),
            },
        )
        .unwrap();
    let FsinfoRes::Ok(info) = fsinfo else {
        panic!("{fsinfo:?}")
    };
    assert_eq!((info.rtmax, info.wtmax), (1 << 20, 1 << 20));
    let pc: PathconfRes = c
        .nfs(
            NfsProc3::Pathconf,
            &PathconfArgs {
                object: root.as_fh3(),
            },
        )
        .unwrap();
    let PathconfRes::Ok(pc) = pc else {
        panic!("{pc:?}")
    };
    assert_eq!(pc.name_max, 255);
    let acc: AccessRes = c
        .nfs(
            NfsProc3::Access,
            &AccessArgs {
                object: root.as_fh3(),
                access: 0x3f,
            },
        )
        .unwrap();
    assert_eq!(acc.status(), Nfsstat3::Ok);

    let set: SetattrRes = c
        .nfs(
            NfsProc3::Setattr,
            &SetattrArgs {
                object: file.as_fh3(),
                new_attributes: Sattr3 {
                    size: Some(3),
                    mode: Some(0o600),
                    ..Default::default()
                },
                guard: None,
            },
        )
        .unwrap();
    let SetattrRes::Ok(set) = set else {
        panic!("{set:?}")
    };
    let after = set.obj_wcc.after.unwrap();
    assert_eq!((after.size, after.mode), (3, 0o600));
    // A stale ctime guard.
    let set: SetattrRes = c
        .nfs(
            NfsProc3::Setattr,
            &SetattrArgs {
                object: file.as_fh3(),
                new_attributes: Sattr3 {
                    size: Some(0),
                    ..Default::default()
                },
                guard: Some(Nfstime3 {
                    seconds: 1,
                    nseconds: 0,
                }),
            },
        )
        .unwrap();
    assert_eq!(set.status(), Nfsstat3::NotSync);
}

/// Lists `dir` with READDIRPLUS (or READDIR) in pages of `count` bytes and
/// returns every name, checking that handles resolve.
fn list_all(c: &mut SyncConnection, dir: &FileHandle, plus: bool, count: u32) -> Vec<Vec<u8>> {
    let mut names = Vec::new();
    let mut cookie = 0;
    let mut verf = [0; 8];
    loop {
        let raw = if plus {
            c.nfs_raw(
                NfsProc3::Readdirplus,
                &ReaddirplusArgs {
                    dir: dir.as_fh3(),
                    cookie,
                    cookieverf: verf,
                    dircount: count,
                    maxcount: count,
                },
            )
            .unwrap()
        } else {
            c.nfs_raw(
                NfsProc3::Readdir,
                &ReaddirArgs {
                    dir: dir.as_fh3(),
                    cookie,
                    cookieverf: verf,
                    count,
                },
            )
            .unwrap()
        };
        assert!(
            raw.len() <= count as usize + 200,
            "reply {} > count {count}",
            raw.len()
        );
        let eof = if plus {
            let ReaddirplusRes::Ok(ok) = ReaddirplusRes::decode(&mut Reader::new(&raw)).unwrap()
            else {
                panic!("readdirplus failed")
            };
            assert!(!ok.entries.is_empty() || ok.eof);
            for e in &ok.entries {
                names.push(e.name.to_vec());
                cookie = e.cookie;
                if e.name != b"." && e.name != b".." {
                    let h = e.name_handle.as_ref().expect("plus entries carry handles");
                    assert_eq!(status_of_getattr(c, h.as_bytes()), Nfsstat3::Ok);
                }
            }
            verf = ok.cookieverf;
            ok.eof
        } else {
            let ReaddirRes::Ok(ok) = ReaddirRes::decode(&mut Reader::new(&raw)).unwrap() else {
                panic!("readdir failed")
            };
            for e in &ok.entries {
                names.push(e.name.to_vec());
                cookie = e.cookie;
            }
            verf = ok.cookieverf;
            ok.eof
        };
        if eof {
            return names;
        }
    }
}

fn check_listing(backend_dir: &mut SyncConnection, root: &FileHandle, n: usize) {
    for (plus, count) in [(false, 1024), (true, 4096), (true, 65536)] {
        let mut names = list_all(backend_dir, root, plus, count);
        names.retain(|n| n != b"." && n != b"..");
        names.sort();
        let mut want: Vec<Vec<u8>> = (0..n).map(|i| format!("f{i:05}").into_bytes()).collect();
        want.push(b"caf\xe9".to_vec());
        want.sort();
        assert_eq!(names, want, "plus={plus} count={count}");
    }
}

/// READDIRPLUS fills `maxcount` whatever `dircount` says, as knfsd: the
/// Linux client's `dircount` (a `maxcount` / 8) would hold about two thirds
/// of the entries of short names.
#[test]
fn readdirplus_ignores_dircount_as_knfsd() {
    let f = Fixture::memory();
    let mut c = f.connect();
    let root = c.mount("/mem").unwrap();
    for i in 0..600 {
        create(&mut c, &root, format!("f{i:05}").as_bytes());
    }
    let maxcount = 64 << 10;
    let raw = c
        .nfs_raw(
            NfsProc3::Readdirplus,
            &ReaddirplusArgs {
                dir: root.as_fh3(),
                cookie: 0,
                cookieverf: [0; 8],
                dircount: maxcount / 8,
                maxcount,
            },
        )
        .unwrap();
    let ReaddirplusRes::Ok(ok) = ReaddirplusRes::decode(&mut Reader::new(&raw)).unwrap() else {
        panic!("readdirplus failed")
    };
    // 8 KiB of directory information (fileid, name, cookie: 28 bytes for
    // these names) holds 292 entries; the reply is as full as maxcount
    // allows, with more.
    let entries = ok.entries.len();
    assert!(entries > 8192 / 28 + 50, "{entries} entries");
    assert!(!ok.eof);
    assert!(raw.len() <= maxcount as usize, "{} bytes", raw.len());
    assert!(
        raw.len() > maxcount as usize * 9 / 10,
        "{} bytes",
        raw.len()
    );
}

#[test]
fn readdir_pages_return_every_name_once_memory() {
    let f = Fixture::memory();
    let mut c = f.connect();
    let root = c.mount("/mem").unwrap();
    for i in 0..300 {
        create(&mut c, &root, format!("f{i:05}").as_bytes());
    }
    create(&mut c, &root, b"caf\xe9"); // not UTF-8
    check_listing(&mut c, &root, 300);
    // Too small for one entry.
    let raw = c
        .nfs_raw(
            NfsProc3::Readdir,
            &ReaddirArgs {
                dir: root.as_fh3(),
                cookie: 0,
                cookieverf: [0; 8],
                count: 8,
            },
        )
        .unwrap();
    assert_eq!(
        ReaddirRes::decode(&mut Reader::new(&raw)).unwrap().status(),
        Nfsstat3::Toosmall
    );
}

/// READDIR(PLUS) of a file is NOTDIR with the file's attributes; of a
/// directory, the reply carries the directory's real attributes (the server
/// writes a placeholder first and overwrites it once the backend has listed).
fn check_list_attributes(c: &mut SyncConnection, root: &FileHandle) {
    let file = create(c, root, b"plain");
    let getattr = |c: &mut SyncConnection, fh: &FileHandle| -> Fattr3 {
        let res: GetattrRes = c
            .nfs(
                NfsProc3::Getattr,
                &GetattrArgs {
                    object: fh.as_fh3(),
                },
            )
            .unwrap();
        let GetattrRes::Ok(ok) = res else {
            panic!("getattr failed")
        };
        ok.obj_attributes
    };
    let (file_attr, root_attr) = (getattr(c, &file), getattr(c, root));
    for plus in [false, true] {
        for (fh, want) in [(&file, file_attr), (root, root_attr)] {
            let raw = if plus {
                c.nfs_raw(
                    NfsProc3::Readdirplus,
                    &ReaddirplusArgs {
                        dir: fh.as_fh3(),
                        cookie: 0,
                        cookieverf: [0; 8],
                        dircount: 4096,
                        maxcount: 8192,
                    },
                )
            } else {
                c.nfs_raw(
                    NfsProc3::Readdir,
                    &ReaddirArgs {
                        dir: fh.as_fh3(),
                        cookie: 0,
                        cookieverf: [0; 8],
                        count: 8192,
                    },
                )
            }
            .unwrap();
            let (status, attr) = if plus {
                match ReaddirplusRes::decode(&mut Reader::new(&raw)).unwrap() {
                    ReaddirplusRes::Ok(ok) => (Nfsstat3::Ok, ok.dir_attributes),
                    ReaddirplusRes::Fail {
                        status,
                        dir_attributes,
                    } => (status, dir_attributes),
                }
            } else {
                match ReaddirRes::decode(&mut Reader::new(&raw)).unwrap() {
                    ReaddirRes::Ok(ok) => (Nfsstat3::Ok, ok.dir_attributes),
                    ReaddirRes::Fail {
                        status,
                        dir_attributes,
                    } => (status, dir_attributes),
                }
            };
            let is_file = std::ptr::eq(fh, &file);
            let want_status = if is_file {
                Nfsstat3::Notdir
            } else {
                Nfsstat3::Ok
            };
            assert_eq!(status, want_status, "plus={plus}");
            let attr = attr.expect("attributes in the reply");
            // atime may move when the directory is read; the rest may not.
            assert_eq!(
                (attr.ftype, attr.fileid, attr.mode, attr.nlink, attr.mtime),
                (want.ftype, want.fileid, want.mode, want.nlink, want.mtime),
                "plus={plus} file={is_file}"
            );
        }
    }
}

#[test]
fn readdir_reports_notdir_and_real_directory_attributes() {
    let f = Fixture::memory();
    let mut c = f.connect();
    let root = c.mount("/mem").unwrap();
    check_list_attributes(&mut c, &root);
    let (f, path) = local_fixture(Access::Rw);
    let mut c = f.connect();
    let root = c.mount(&path).unwrap();
    check_list_attributes(&mut c, &root);
}

fn local_fixture(access: Access) -> (Fixture, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_owned();
    let mut c = ExportConfig::new(&path);
    c.access = access;
    c.squash = nfs::exports::Squash::None;
    (Fixture::with(vec![c], Some(dir)), path)
}

#[test]
fn local_backend_end_to_end() {
    let (f, path) = local_fixture(Access::Rw);
    let mut c = f.connect();
    let root = c.mount(&path).unwrap();
    for i in 0..300 {
        create(&mut c, &root, format!("f{i:05}").as_bytes());
    }
    create(&mut c, &root, b"caf\xe9");
    check_listing(&mut c, &root, 300);
    let fh = create(&mut c, &root, b"data");
    let chunk: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    write(&mut c, &fh, 0, &chunk);
    let (back, eof) = read(&mut c, &fh, 0, 1 << 20);
    assert!(eof);
    assert_eq!(back, chunk);
    assert_eq!(
        std::fs::read(std::path::Path::new(&path).join("data")).unwrap(),
        chunk,
        "the data is in the exported directory"
    );
    // A READ larger than rtmax is clamped, not refused.
    let big = vec![7u8; (1 << 20) + 4096];
    std::fs::write(std::path::Path::new(&path).join("big"), &big).unwrap();
    let LookupRes::Ok(b) = lookup(&mut c, &root, b"big") else {
        panic!()
    };
    let (got, eof) = read(&mut c, &b.object, 0, 4 << 20);
    assert_eq!((got.len(), eof), (1 << 20, false));
}

#[test]
fn read_only_export_refuses_changes_with_rofs() {
    let (f, path) = local_fixture(Access::Ro);
    std::fs::write(std::path::Path::new(&path).join("f"), b"x").unwrap();
    let mut c = f.connect();
    let root = c.mount(&path).unwrap();
    let LookupRes::Ok(file) = lookup(&mut c, &root, b"f") else {
        panic!()
    };
    let res: WriteRes = c
        .nfs(
            NfsProc3::Write,
            &WriteArgs {
                file: file.object.as_fh3(),
                offset: 0,
                count: 1,
                stable: StableHow::FileSync,
                data: b"y",
            },
        )
        .unwrap();
    assert_eq!(res.status(), Nfsstat3::Rofs);
    let res: CreateRes = c
        .nfs(
            NfsProc3::Create,
            &CreateArgs {
                where_: DirOpArgs3 {
                    dir: root.as_fh3(),
                    name: b"new",
                },
                how: CreateHow3::Unchecked(Sattr3::default()),
            },
        )
        .unwrap();
    assert_eq!(res.status(), Nfsstat3::Rofs);
    let acc: AccessRes = c
        .nfs(
            NfsProc3::Access,
            &AccessArgs {
                object: file.object.as_fh3(),
                access: 0x3f,
            },
        )
        .unwrap();
    let AccessRes::Ok(acc) = acc else { panic!() };
    assert_eq!(
        acc.access & 0x1c,
        0,
        "no MODIFY/EXTEND/DELETE on a read-only export"
    );
    let (data, _) = read(&mut c, &file.object, 0, 10);
    assert_eq!(data, b"x");
}

#[test]
fn forged_foreign_and_bad_handles() {
    let f = Fixture::memory();
    let mut c = f.connect();
    let root = c.mount("/mem").unwrap();
    let mut forged = root.as_bytes().to_vec();
    forged[6] ^= 1;
    assert_eq!(status_of_getattr(&mut c, &forged), Nfsstat3::Badhandle);
    assert_eq!(status_of_getattr(&mut c, &[]), Nfsstat3::Badhandle);
    assert_eq!(status_of_getattr(&mut c, &[1; 64]), Nfsstat3::Badhandle);
    // Signed with another server's key.
    let table = f.exports.load();
    let export = table.iter().next().unwrap();
    let other_key = HandleKey::from_bytes([9; 16]);
    let foreign = other_key.seal(export.stamp(), &export.fs.root());
    assert_eq!(
        status_of_getattr(&mut c, foreign.as_bytes()),
        Nfsstat3::Badhandle
    );
    // Correctly signed, for an export that does not exist (any more).
    let key = HandleKey::from_bytes(KEY);
    let mut gone_stamp = export.stamp();
    gone_stamp.id ^= 1;
    let gone = key.seal(gone_stamp, &export.fs.root());
    assert_eq!(status_of_getattr(&mut c, gone.as_bytes()), Nfsstat3::Stale);
}

/// A reload that points an export (same id, same mount path) at another
/// directory makes the handles issued under the old one STALE, as knfsd's
/// after `exportfs -r`: they once kept opening objects outside the new root,
/// and `..` from the old root climbed above it.
#[test]
fn handles_of_an_export_moved_by_a_reload_are_stale() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("public")).unwrap();
    std::fs::write(dir.path().join("secret"), b"s").unwrap();
    let config = |path: &std::path::Path| {
        let mut c = ExportConfig::new(path.to_str().unwrap());
        c.mount_path = Some("/data".into());
        c.id = Some(7);
        c.access = Access::Rw;
        c.squash = nfs::exports::Squash::None;
        c
    };
    let f = Fixture::with(vec![config(dir.path())], None);
    let mut c = f.connect();
    let old_root = c.mount("/data").unwrap();
    let found = |c: &mut SyncConnection, dir: &FileHandle, name: &[u8]| match lookup(c, dir, name) {
        LookupRes::Ok(ok) => ok.object,
        other => panic!("LOOKUP {name:?}: {:?}", other.status()),
    };
    let public = found(&mut c, &old_root, b"public");
    let secret = found(&mut c, &old_root, b"secret");
    f.exports
        .reload(&[config(&dir.path().join("public"))])
        .unwrap();
    for (what, fh) in [
        ("root", &old_root),
        ("public", &public),
        ("secret", &secret),
    ] {
        assert_eq!(
            status_of_getattr(&mut c, fh.as_bytes()),
            Nfsstat3::Stale,
            "the old {what}"
        );
    }
    // The new root works, and `..` stops there.
    let root = c.mount("/data").unwrap();
    let up = found(&mut c, &root, b"..");
    assert_eq!(up.as_bytes(), root.as_bytes());
    assert_eq!(lookup(&mut c, &root, b"secret").status(), Nfsstat3::Noent);
}

#[test]
fn names_too_long_and_with_slashes_are_refused() {
    let f = Fixture::memory();
    let mut c = f.connect();
    let root = c.mount("/mem").unwrap();
    let long = vec![b'x'; 256];
    let res: CreateRes = c
        .nfs(
            NfsProc3::Create,
            &CreateArgs {
                where_: DirOpArgs3 {
                    dir: root.as_fh3(),
                    name: &long,
                },
                how: CreateHow3::Unchecked(Sattr3::default()),
            },
        )
        .unwrap();
    assert_eq!(res.status(), Nfsstat3::Nametoolong);
    for bad in [&b"a/b"[..], b".", b"..", b""] {
        let res: CreateRes = c
            .nfs(
                NfsProc3::Create,
                &CreateArgs {
                    where_: DirOpArgs3 {
                        dir: root.as_fh3(),
                        name: bad,
                    },
                    how: CreateHow3::Unchecked(Sattr3::default()),
                },
            )
            .unwrap();
        assert_ne!(res.status(), Nfsstat3::Ok, "{bad:?}");
    }
    // A name longer than the decoder's limit is GARBAGE_ARGS, not a panic.
    let huge = vec![b'y'; 2000];
    let err = c
        .nfs::<_, LookupRes>(
            NfsProc3::Lookup,
            &LookupArgs {
                what: DirOpArgs3 {
                    dir: root.as_fh3(),
                    name: &huge,
                },
            },
        )
        .unwrap_err();
    assert!(
        matches!(err, CallError::Rpc(ReplyStatus::GarbageArgs)),
        "{err:?}"
    );
}

#[test]
fn clients_outside_the_export_networks_are_refused_at_mnt_and_every_call() {
    let mut allowed = ExportConfig::new("/open");
    allowed.backend = BackendKind::Memory;
    let mut closed = ExportConfig::new("/closed");
    closed.backend = BackendKind::Memory;
    closed.clients = Some(vec!["10.0.0.0/8".into()]);
    let f = Fixture::with(vec![allowed, closed], None);
    let mut c = f.connect();
    assert!(matches!(
        c.mount("/closed"),
        Err(CallError::Mount(Mountstat3::Acces))
    ));
    assert!(matches!(
        c.mount("/nonexistent"),
        Err(CallError::Mount(Mountstat3::Noent))
    ));
    c.mount("/open").unwrap();
    // A handle of the closed export, obtained out of band, is refused too.
    let table = f.exports.load();
    let export = table.by_mount_path("/closed").unwrap();
    let key = HandleKey::from_bytes(KEY);
    let fh = key.seal(export.stamp(), &export.fs.root());
    assert_eq!(status_of_getattr(&mut c, fh.as_bytes()), Nfsstat3::Acces);
}

fn mkdir(c: &mut SyncConnection, dir: &FileHandle, name: &[u8]) -> FileHandle {
    let res: MkdirRes = c
        .nfs(
            NfsProc3::Mkdir,
            &MkdirArgs {
                where_: DirOpArgs3 {
                    dir: dir.as_fh3(),
                    name,
                },
                attributes: Sattr3::default(),
            },
        )
        .unwrap();
    match res {
        MkdirRes::Ok(ok) => ok.obj.unwrap(),
        other => panic!("mkdir {name:?}: {other:?}"),
    }
}

#[test]
fn a_directory_below_an_export_can_be_mounted() {
    let f = Fixture::memory();
    let mut c = f.connect();
    let root = c.mount("/mem").unwrap();
    let sub = mkdir(&mut c, &root, b"sub");
    let deeper = mkdir(&mut c, &sub, b"deeper");
    create(&mut c, &root, b"file");

    // The handle is the one LOOKUP gives, whatever the slashes and dots.
    assert_eq!(c.mount("/mem/sub/deeper").unwrap(), deeper);
    assert_eq!(c.mount("/mem//sub/./deeper/").unwrap(), deeper);
    assert_eq!(c.mount("/mem/sub").unwrap(), sub);
    let in_deeper = create(&mut c, &deeper, b"inside");
    let mounted = c.mount("/mem/sub/deeper").unwrap();
    let LookupRes::Ok(found) = lookup(&mut c, &mounted, b"inside") else {
        panic!("lookup below a mounted subdirectory")
    };
    assert_eq!(found.object, in_deeper);

    // DUMP lists the path mounted.
    let raw = c.call_raw(MOUNT_PROGRAM, 3, 2, &[]).unwrap();
    let dump = DumpRes::decode(&mut Reader::new(&raw)).unwrap();
    let dirs: Vec<&[u8]> = dump.mounts.iter().map(|m| m.directory).collect();
    assert!(dirs.contains(&&b"/mem/sub/deeper"[..]), "{dirs:?}");
    assert!(
        !dirs.iter().any(|d| d.windows(2).any(|w| w == b"//")),
        "{dirs:?}"
    );
    // UMNT with another spelling of the path removes the entry.
    let _: () = c
        .call(
            MOUNT_PROGRAM,
            3,
            3,
            &UmntArgs {
                dirpath: b"/mem//sub/./deeper/",
            },
        )
        .unwrap();
    let raw = c.call_raw(MOUNT_PROGRAM, 3, 2, &[]).unwrap();
    let dump = DumpRes::decode(&mut Reader::new(&raw)).unwrap();
    assert!(
        !dump
            .mounts
            .iter()
            .any(|m| m.directory == b"/mem/sub/deeper"),
        "{:?}",
        dump.mounts
    );

    for (path, want) in [
        ("/mem/file", Mountstat3::Notdir),
        ("/mem/file/x", Mountstat3::Notdir),
        ("/mem/missing", Mountstat3::Noent),
        ("/mem/sub/missing/deeper", Mountstat3::Noent),
        // Never resolved upwards: the walk stays inside the export.
        ("/mem/sub/..", Mountstat3::Inval),
        ("/mem/sub/deeper/../../..", Mountstat3::Inval),
        // A prefix that is not a whole component is another name.
        ("/memory", Mountstat3::Noent),
        ("/me", Mountstat3::Noent),
        ("mem/sub", Mountstat3::Noent),
    ] {
        match c.mount(path) {
            Err(CallError::Mount(got)) => assert_eq!(got, want, "{path}"),
            other => panic!("MNT {path}: {other:?}"),
        }
    }
    let long = format!("/mem/{}", "n".repeat(300));
    assert!(matches!(
        c.mount(&long),
        Err(CallError::Mount(Mountstat3::Nametoolong))
    ));

    // A name that is not UTF-8 is looked up as its bytes.
    let odd = mkdir(&mut c, &sub, b"\xff\xfe");
    let res: Mountres3 = c
        .call(
            MOUNT_PROGRAM,
            3,
            1,
            &MntArgs {
                dirpath: b"/mem/sub/\xff\xfe",
            },
        )
        .unwrap();
    let Mountres3::Ok(ok) = res else {
        panic!("MNT of a non-UTF-8 name: {res:?}")
    };
    assert_eq!(ok.fhandle, odd);
}

/// However the path is spelled, a directory is matched to the export with
/// the longest mount path above it, whose options then apply.
#[test]
fn mnt_picks_the_innermost_export_whatever_the_spelling() {
    let mut outer = ExportConfig::new("/mem");
    outer.backend = BackendKind::Memory;
    let mut inner = ExportConfig::new("/mem/inner");
    inner.backend = BackendKind::Memory;
    inner.clients = Some(vec!["10.0.0.0/8".into()]);
    let f = Fixture::with(vec![outer, inner], None);
    let mut c = f.connect();
    for path in [
        "/mem/inner",
        "/mem//inner",
        "/mem/./inner/",
        "//mem/inner/.",
    ] {
        match c.mount(path) {
            Err(CallError::Mount(got)) => assert_eq!(got, Mountstat3::Acces, "{path}"),
            other => panic!("MNT {path}: {other:?}"),
        }
    }
    c.mount("/mem").unwrap();
}

#[test]
fn mount_export_dump_umnt() {
    let f = Fixture::memory();
    let mut c = f.connect();
    let raw = c.call_raw(MOUNT_PROGRAM, 3, 5, &[]).unwrap();
    let exports = ExportRes::decode(&mut Reader::new(&raw)).unwrap();
    assert_eq!(exports.exports.len(), 1);
    assert_eq!(exports.exports[0].dir, b"/mem");
    c.mount("/mem").unwrap();
    let raw = c.call_raw(MOUNT_PROGRAM, 3, 2, &[]).unwrap();
    let dump = DumpRes::decode(&mut Reader::new(&raw)).unwrap();
    assert_eq!(dump.mounts.len(), 1);
    assert_eq!(dump.mounts[0].directory, b"/mem");
    let _: () = c
        .call(MOUNT_PROGRAM, 3, 3, &UmntArgs { dirpath: b"/mem" })
        .unwrap();
    let raw = c.call_raw(MOUNT_PROGRAM, 3, 2, &[]).unwrap();
    assert!(DumpRes::decode(&mut Reader::new(&raw))
        .unwrap()
        .mounts
        .is_empty());
    // showmount speaks MOUNT v1: EXPORT works, MNT (32-byte handles) does not.
    let raw = c.call_raw(MOUNT_PROGRAM, 1, 5, &[]).unwrap();
    assert_eq!(
        ExportRes::decode(&mut Reader::new(&raw))
            .unwrap()
            .exports
            .len(),
        1
    );
    assert!(matches!(
        c.call::<_, Mountres3>(MOUNT_PROGRAM, 1, 1, &MntArgs { dirpath: b"/mem" }),
        Err(CallError::Rpc(ReplyStatus::ProcUnavail))
    ));
}

#[test]
fn a_retransmitted_remove_gets_the_cached_reply() {
    let f = Fixture::memory();
    let mut c = f.connect();
    let root = c.mount("/mem").unwrap();
    create(&mut c, &root, b"victim");
    let remove = |c: &mut SyncConnection, xid| {
        c.set_next_xid(xid);
        let res: RemoveRes = c
            .nfs(
                NfsProc3::Remove,
                &RemoveArgs {
                    object: DirOpArgs3 {
                        dir: root.as_fh3(),
                        name: b"victim",
                    },
                },
            )
            .unwrap();
        res.status()
    };
    assert_eq!(remove(&mut c, 77_000), Nfsstat3::Ok);
    // Same client, xid and arguments: answered from the cache, not run again.
    assert_eq!(remove(&mut c, 77_000), Nfsstat3::Ok);
    // A new request (new xid) runs.
    assert_eq!(remove(&mut c, 77_001), Nfsstat3::Noent);
}

#[test]
fn calls_run_with_the_callers_identity_when_root() {
    if !rnfs_vfs::identity::can_switch() {
        cannot_run("not root");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let (f, path) = local_fixture(Access::Rw);
    let secret = std::path::Path::new(&path).join("secret");
    std::fs::write(&secret, b"root only").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut c = f.connect();
    let root = c.mount(&path).unwrap();
    let LookupRes::Ok(s) = lookup(&mut c, &root, b"secret") else {
        panic!()
    };
    c.set_identity(1000, 1000);
    let raw = c
        .nfs_raw(
            NfsProc3::Read,
            &ReadArgs {
                file: s.object.as_fh3(),
                offset: 0,
                count: 100,
            },
        )
        .unwrap();
    assert_eq!(
        ReadRes::decode(&mut Reader::new(&raw)).unwrap().status(),
        Nfsstat3::Acces
    );
    // A file created by uid 1000 in a directory it may write belongs to it.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
    let fh = create(&mut c, &root, b"mine");
    let attr: GetattrRes = c
        .nfs(
            NfsProc3::Getattr,
            &GetattrArgs {
                object: fh.as_fh3(),
            },
        )
        .unwrap();
    let GetattrRes::Ok(attr) = attr else { panic!() };
    assert_eq!(
        (attr.obj_attributes.uid, attr.obj_attributes.gid),
        (1000, 1000)
    );
    // Root (no_root_squash here) still reads the secret on the same threads.
    c.set_identity(0, 0);
    let (data, _) = read(&mut c, &s.object, 0, 100);
    assert_eq!(data, b"root only");
}
