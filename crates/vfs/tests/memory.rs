//! The memory backend: the whole conformance suite, then what is specific to
//! it (handle format, budget, sparse files, timestamps, locking under load).

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

#[macro_use]
mod conformance;

use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use conformance::util::{getattr, lookup, mkdir, mkfile, mode, names, read_all, root, user, write};
use conformance::{Caps, Fixture};
use rnfs_vfs::memory::{MemoryConfig, MemoryFs};
use rnfs_vfs::{
    BackendHandle, CreateHow, Cred, Filesystem, FsError, SetAttr, SetTime, SpecialNode, Stability,
};

fn fixture() -> Fixture<MemoryFs> {
    Fixture::new(MemoryFs::new(7), Caps::ALL)
}

conformance_tests!(fixture);
conformance_permission_tests!(fixture);

fn small(budget_bytes: u64, max_files: u64) -> MemoryFs {
    MemoryFs::with_config(
        1,
        MemoryConfig {
            budget_bytes,
            max_files,
            ..MemoryConfig::default()
        },
    )
}

fn free_bytes(fs: &MemoryFs) -> u64 {
    fs.fsstat(&root(), &fs.root()).unwrap().0.free_bytes
}

fn handle(ino: u64, generation: u32) -> BackendHandle {
    let mut b = ino.to_be_bytes().to_vec();
    b.extend_from_slice(&generation.to_be_bytes());
    BackendHandle::new(&b).unwrap()
}

#[test]
fn handle_format_and_generations() {
    let fs = MemoryFs::new(3);
    let root_h = fs.root();
    assert_eq!(root_h.as_bytes().len(), 12);
    assert_eq!(root_h.as_bytes()[..8], 1u64.to_be_bytes());
    for len in [11, 13, 40] {
        let bad = BackendHandle::new(&vec![0; len]).unwrap();
        assert_eq!(fs.getattr(&root(), &bad), Err(FsError::BadHandle));
    }
    assert_eq!(fs.getattr(&root(), &handle(0, 0)), Err(FsError::BadHandle));
    assert_eq!(fs.getattr(&root(), &handle(999, 0)), Err(FsError::Stale));
    assert_eq!(
        fs.getattr(&root(), &handle(u64::MAX, 0)),
        Err(FsError::Stale)
    );
    // A freed slot is reused with a new generation.
    let f = mkfile(&fs, &root_h, b"f");
    let ino = getattr(&fs, &f).fileid;
    fs.remove(&root(), &root_h, b"f").unwrap();
    let g = mkfile(&fs, &root_h, b"g");
    assert_eq!(getattr(&fs, &g).fileid, ino, "slot reused");
    assert_ne!(g, f);
    assert_eq!(f.as_bytes()[..8], g.as_bytes()[..8]);
    assert_eq!(fs.getattr(&root(), &f), Err(FsError::Stale));
    // Another instance's handles are stale here, the root's included.
    let other = MemoryFs::new(3);
    assert_ne!(other.root(), root_h);
    assert_eq!(other.getattr(&root(), &g), Err(FsError::Stale));
}

#[test]
fn root_owner_is_configurable() {
    let fs = MemoryFs::with_config(
        9,
        MemoryConfig {
            root_uid: 1000,
            root_gid: 100,
            root_mode: 0o700,
            ..MemoryConfig::default()
        },
    );
    let attr = getattr(&fs, &fs.root());
    assert_eq!(
        (attr.uid, attr.gid, attr.mode, attr.fsid),
        (1000, 100, 0o700, 9)
    );
    assert!(fs
        .create(&user(), &fs.root(), b"f", &CreateHow::Guarded(mode(0o600)))
        .is_ok());
    let stranger = Cred {
        uid: 2000,
        gid: 2000,
        groups: vec![],
    };
    assert_eq!(
        fs.lookup(&stranger, &fs.root(), b"f").unwrap_err().0,
        FsError::Access
    );
}

#[test]
fn budget_refuses_growth_and_returns_when_freed() {
    let fs = small(1 << 20, 100);
    let root_h = fs.root();
    let initial = free_bytes(&fs);
    assert_eq!(initial, 1 << 20);
    let f = mkfile(&fs, &root_h, b"f");
    write(&fs, &f, 0, &vec![1; 512 * 1024]);
    let (e, wcc) = fs
        .write(
            &root(),
            &f,
            512 * 1024,
            &vec![2; 600 * 1024],
            Stability::FileSync,
        )
        .unwrap_err();
    assert_eq!(e, FsError::NoSpc);
    assert_eq!(wcc.after.unwrap().size, 512 * 1024, "nothing written");
    // Sparse growth costs nothing, even far past the budget.
    fs.setattr(
        &root(),
        &f,
        &SetAttr {
            size: Some(10 << 30),
            ..SetAttr::default()
        },
        None,
    )
    .unwrap();
    assert_eq!(getattr(&fs, &f).size, 10 << 30);
    let before = free_bytes(&fs);
    let mut out = Vec::new();
    let ok = fs.read(&root(), &f, 5 << 30, 1 << 20, &mut out).unwrap();
    assert_eq!(ok.count, 1 << 20);
    assert!(out.iter().all(|&b| b == 0));
    assert_eq!(free_bytes(&fs), before);
    // Truncation frees; so does removal.
    fs.setattr(
        &root(),
        &f,
        &SetAttr {
            size: Some(1000),
            ..SetAttr::default()
        },
        None,
    )
    .unwrap();
    assert!(free_bytes(&fs) > before + 500 * 1024);
    fs.remove(&root(), &root_h, b"f").unwrap();
    assert_eq!(free_bytes(&fs), initial);
}

#[test]
fn object_limit_is_nospc() {
    let fs = small(1 << 30, 10);
    let root_h = fs.root();
    for i in 0..9 {
        mkfile(&fs, &root_h, format!("f{i}").as_bytes());
    }
    let (e, _) = fs
        .create(
            &root(),
            &root_h,
            b"one-too-many",
            &CreateHow::Guarded(mode(0o644)),
        )
        .unwrap_err();
    assert_eq!(e, FsError::NoSpc);
    let st = fs.fsstat(&root(), &root_h).unwrap().0;
    assert_eq!((st.total_files, st.free_files), (10, 0));
    fs.remove(&root(), &root_h, b"f0").unwrap();
    mkfile(&fs, &root_h, b"now-fits");
}

#[test]
fn budget_accounting_is_exact_over_a_workload() {
    let fs = MemoryFs::new(1);
    let root_h = fs.root();
    let initial = free_bytes(&fs);
    let d = mkdir(&fs, &root_h, b"d");
    let f = mkfile(&fs, &d, b"f");
    write(&fs, &f, 100_000, b"tail");
    fs.link(&root(), &f, &root_h, b"a-much-longer-link-name")
        .unwrap();
    fs.symlink(&root(), &d, b"s", b"../target", &SetAttr::default())
        .unwrap();
    fs.mknod(&root(), &d, b"p", &SpecialNode::Fifo, &SetAttr::default())
        .unwrap();
    fs.rename(&root(), &d, b"s", &root_h, b"renamed-symlink")
        .unwrap();
    fs.rename(&root(), &root_h, b"renamed-symlink", &d, b"p")
        .unwrap();
    mkdir(&fs, &root_h, b"e");
    fs.rename(&root(), &root_h, b"e", &d, b"e").unwrap();
    assert!(free_bytes(&fs) < initial);
    for (dir, name) in [
        (&d, &b"f"[..]),
        (&root_h, b"a-much-longer-link-name"),
        (&d, b"p"),
    ] {
        fs.remove(&root(), dir, name).unwrap();
    }
    fs.rmdir(&root(), &d, b"e").unwrap();
    fs.rmdir(&root(), &root_h, b"d").unwrap();
    assert_eq!(free_bytes(&fs), initial);
    let st = fs.fsstat(&root(), &root_h).unwrap().0;
    assert_eq!(st.total_files - st.free_files, 1, "only the root is left");
}

#[test]
fn offsets_past_max_file_size_are_fbig() {
    let fs = MemoryFs::new(1);
    let f = mkfile(&fs, &fs.root(), b"f");
    let max = fs.info().max_file_size;
    assert_eq!(max, 16 << 30);
    write(&fs, &f, max - 1, b"x");
    let e = fs
        .write(&root(), &f, max, b"x", Stability::FileSync)
        .unwrap_err()
        .0;
    assert_eq!(e, FsError::FBig);
    let e = fs
        .write(&root(), &f, u64::MAX, b"x", Stability::FileSync)
        .unwrap_err()
        .0;
    assert_eq!(e, FsError::FBig);
    let set = SetAttr {
        size: Some(max + 1),
        ..SetAttr::default()
    };
    assert_eq!(
        fs.setattr(&root(), &f, &set, None).unwrap_err().0,
        FsError::FBig
    );
    assert!(getattr(&fs, &f).used <= 64 * 1024);
}

#[test]
fn every_change_gets_a_later_time() {
    let fs = MemoryFs::new(1);
    let root_h = fs.root();
    let f = mkfile(&fs, &root_h, b"f");
    let mut last = getattr(&fs, &f).mtime;
    for i in 0..100 {
        let ok = fs.write(&root(), &f, i, b"x", Stability::Unstable).unwrap();
        assert_eq!(ok.committed, Stability::FileSync);
        let after = ok.wcc.after.unwrap();
        assert!(ok.wcc.before.unwrap().mtime < after.mtime);
        assert!(after.mtime > last);
        assert_eq!(after.mtime, after.ctime);
        last = after.mtime;
    }
    let c = fs
        .create(&root(), &root_h, b"g", &CreateHow::Guarded(mode(0o644)))
        .unwrap();
    let dir_after = c.dir_wcc.after.unwrap();
    assert!(c.dir_wcc.before.unwrap().mtime < dir_after.mtime);
    assert_eq!(
        dir_after.mtime, c.attr.ctime,
        "one instant for the whole change"
    );
    // Reads leave atime alone.
    let atime = getattr(&fs, &f).atime;
    read_all(&fs, &f);
    assert_eq!(getattr(&fs, &f).atime, atime);
}

#[test]
fn directory_link_counts() {
    let fs = MemoryFs::new(1);
    let root_h = fs.root();
    assert_eq!(getattr(&fs, &root_h).nlink, 2);
    let a = mkdir(&fs, &root_h, b"a");
    let b = mkdir(&fs, &root_h, b"b");
    mkdir(&fs, &a, b"sub");
    mkfile(&fs, &a, b"file");
    assert_eq!(getattr(&fs, &root_h).nlink, 4);
    assert_eq!(getattr(&fs, &a).nlink, 3);
    fs.rename(&root(), &a, b"sub", &b, b"sub").unwrap();
    assert_eq!(getattr(&fs, &a).nlink, 2);
    assert_eq!(getattr(&fs, &b).nlink, 3);
    // Replacing an empty directory: the parent loses one subdirectory.
    mkdir(&fs, &b, b"empty");
    assert_eq!(getattr(&fs, &b).nlink, 4);
    fs.rename(&root(), &b, b"sub", &b, b"empty").unwrap();
    assert_eq!(getattr(&fs, &b).nlink, 3);
    fs.rmdir(&root(), &b, b"empty").unwrap();
    assert_eq!(getattr(&fs, &b).nlink, 2);
}

#[test]
fn rename_over_an_ancestor_is_notempty() {
    let fs = MemoryFs::new(1);
    let root_h = fs.root();
    let a = mkdir(&fs, &root_h, b"a");
    let b = mkdir(&fs, &a, b"b");
    mkdir(&fs, &b, b"c");
    let e = fs.rename(&root(), &b, b"c", &root_h, b"a").unwrap_err().0;
    assert_eq!(e, FsError::NotEmpty);
    assert_eq!(lookup(&fs, &root_h, b"a"), Ok(a));
}

#[test]
fn exclusive_verifier_survives_setattr() {
    let fs = MemoryFs::new(1);
    let root_h = fs.root();
    let c = fs
        .create(&root(), &root_h, b"x", &CreateHow::Exclusive(*b"12345678"))
        .unwrap();
    assert_eq!(c.attr.mode, 0o600);
    let set = SetAttr {
        mode: Some(0o644),
        atime: SetTime::ServerTime,
        mtime: SetTime::ServerTime,
        ..SetAttr::default()
    };
    fs.setattr(&root(), &c.handle, &set, None).unwrap();
    let again = fs
        .create(&root(), &root_h, b"x", &CreateHow::Exclusive(*b"12345678"))
        .unwrap();
    assert_eq!(again.handle, c.handle);
    assert_eq!(again.attr.mode, 0o644);
}

#[test]
fn owner_reads_and_writes_whatever_the_mode() {
    let fs = MemoryFs::new(1);
    let root_h = fs.root();
    fs.setattr(&root(), &root_h, &mode(0o777), None).unwrap();
    let u = user();
    let f = fs
        .create(&u, &root_h, b"ro", &CreateHow::Guarded(mode(0o444)))
        .unwrap()
        .handle;
    fs.write(&u, &f, 0, b"written", Stability::FileSync)
        .unwrap();
    fs.setattr(&root(), &f, &mode(0o000), None).unwrap();
    let mut out = Vec::new();
    fs.read(&u, &f, 0, 100, &mut out).unwrap();
    assert_eq!(out, b"written");
    // ACCESS stays strict.
    assert_eq!(fs.access(&u, &f, rnfs_vfs::access::ALL).unwrap().0, 0);
}

#[test]
fn setuid_is_dropped_on_write_and_chown() {
    let fs = MemoryFs::new(1);
    let root_h = fs.root();
    let f = mkfile(&fs, &root_h, b"f");
    fs.setattr(&root(), &f, &mode(0o6777), None).unwrap();
    fs.write(&user(), &f, 0, b"x", Stability::FileSync).unwrap();
    assert_eq!(getattr(&fs, &f).mode, 0o0777);
    fs.setattr(&root(), &f, &mode(0o6755), None).unwrap();
    write(&fs, &f, 0, b"root keeps them");
    assert_eq!(getattr(&fs, &f).mode, 0o6755);
    let chown = SetAttr {
        uid: Some(5),
        ..SetAttr::default()
    };
    fs.setattr(&root(), &f, &chown, None).unwrap();
    assert_eq!(getattr(&fs, &f).mode, 0o0755);
}

#[test]
fn readdir_cookie_rules() {
    let fs = MemoryFs::new(1);
    let root_h = fs.root();
    let d = mkdir(&fs, &root_h, b"d");
    for name in [&b"a"[..], b"b", b"c"] {
        mkfile(&fs, &d, name);
    }
    let mut cookies = Vec::new();
    let end = fs
        .readdir(&root(), &d, 0, [0; 8], false, &mut |e| {
            cookies.push((e.name.to_vec(), e.cookie));
            true
        })
        .unwrap();
    assert_eq!(
        cookies,
        [
            (b".".to_vec(), 1),
            (b"..".to_vec(), 2),
            (b"a".to_vec(), 3),
            (b"b".to_vec(), 4),
            (b"c".to_vec(), 5)
        ]
    );
    assert_ne!(end.verifier, [0; 8]);
    // A cookie never handed out is bad; a zero verifier is accepted.
    let res = fs.readdir(&root(), &d, 6, end.verifier, false, &mut |_| true);
    assert_eq!(res.unwrap_err().0, FsError::BadCookie);
    let mut n = 0;
    fs.readdir(&root(), &d, 4, [0; 8], false, &mut |_| {
        n += 1;
        true
    })
    .unwrap();
    assert_eq!(n, 1);
    // A removed entry's cookie resumes after it; a new name gets a new cookie,
    // even when it reuses a removed name.
    fs.remove(&root(), &d, b"b").unwrap();
    mkfile(&fs, &d, b"b");
    let mut after = Vec::new();
    fs.readdir(&root(), &d, 4, end.verifier, false, &mut |e| {
        after.push((e.name.to_vec(), e.cookie));
        true
    })
    .unwrap();
    assert_eq!(after, [(b"c".to_vec(), 5), (b"b".to_vec(), 6)]);
    // Verifiers differ between directories.
    let other = fs
        .readdir(&root(), &root_h, 0, [0; 8], false, &mut |_| true)
        .unwrap();
    assert_ne!(other.verifier, end.verifier);
}

/// READDIRPLUS names `..` by the parent's file id, with no handle, as the
/// local backend does (which would have to walk up to the root for one).
#[test]
fn readdirplus_dotdot_has_the_parents_id_and_no_handle() {
    let fs = MemoryFs::new(1);
    let root_h = fs.root();
    let a = mkdir(&fs, &root_h, b"a");
    let mut seen = Vec::new();
    fs.readdir(&root(), &a, 0, [0; 8], true, &mut |e| {
        seen.push((e.name.to_vec(), e.fileid, e.plus.map(|p| p.0)));
        true
    })
    .unwrap();
    let id = |h| getattr(&fs, h).fileid;
    assert_eq!(
        seen,
        [
            (b".".to_vec(), id(&a), Some(a)),
            (b"..".to_vec(), id(&root_h), None)
        ]
    );
}

/// Many threads create, rename (across directories, directories included),
/// link, remove, list and look up in a small tree. Deadlock shows as a
/// timeout; at the end the tree is emptied and the budget must be back where
/// it started.
#[test]
fn concurrent_namespace_changes_neither_deadlock_nor_leak() {
    const THREADS: u64 = 8;
    const OPS: u64 = 30_000;
    let fs = Arc::new(MemoryFs::new(1));
    let root_h = fs.root();
    let initial = free_bytes(&fs);
    let dirs: Vec<BackendHandle> = (0..4)
        .map(|i| mkdir(&*fs, &root_h, format!("d{i}").as_bytes()))
        .collect();
    let nested = mkdir(&*fs, &dirs[0], b"nested");
    let mut all_dirs = dirs.clone();
    all_dirs.push(nested);
    let all_dirs = Arc::new(all_dirs);
    let (done_tx, done_rx) = mpsc::channel();
    for t in 0..THREADS {
        let fs = Arc::clone(&fs);
        let dirs = Arc::clone(&all_dirs);
        let done = done_tx.clone();
        thread::spawn(move || {
            let mut x = t.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
            let mut rand = move |n: u64| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % n
            };
            for _ in 0..OPS {
                let d1 = &dirs[rand(dirs.len() as u64) as usize];
                let d2 = &dirs[rand(dirs.len() as u64) as usize];
                let n1 = format!("n{}", rand(6)).into_bytes();
                let n2 = format!("n{}", rand(6)).into_bytes();
                // Errors (NoEnt, Exist, NotEmpty, Inval, Stale...) are expected
                // from the races; only hangs, panics and leaks are failures.
                match rand(9) {
                    0 => {
                        let _ = fs.create(&root(), d1, &n1, &CreateHow::Unchecked(mode(0o644)));
                    }
                    1 => {
                        let _ = fs.mkdir(&root(), d1, &n1, &mode(0o755));
                    }
                    2 | 3 => {
                        let _ = fs.rename(&root(), d1, &n1, d2, &n2);
                    }
                    4 => {
                        if let Ok((h, _, _)) = fs.lookup(&root(), d1, &n1) {
                            let _ = fs.link(&root(), &h, d2, &n2);
                            let _ =
                                fs.write(&root(), &h, rand(100_000), b"data", Stability::Unstable);
                        }
                    }
                    5 => {
                        let _ = fs.remove(&root(), d1, &n1);
                    }
                    6 => {
                        let _ = fs.rmdir(&root(), d1, &n1);
                    }
                    7 => {
                        let _ = fs.readdir(&root(), d1, 0, [0; 8], true, &mut |_| true);
                    }
                    _ => {
                        if let Ok((h, _, _)) = fs.lookup(&root(), d1, &n1) {
                            let _ = fs.lookup(&root(), &h, b"..");
                            let _ = fs.readdir(&root(), &h, 0, [0; 8], true, &mut |_| true);
                        }
                    }
                }
            }
            done.send(()).unwrap();
        });
    }
    for _ in 0..THREADS {
        done_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("a worker hung: deadlock?");
    }
    // Empty the tree, depth first, and check the books.
    fn empty(fs: &MemoryFs, dir: &BackendHandle) {
        for name in names(fs, dir) {
            let h = lookup(fs, dir, &name).unwrap();
            if getattr(fs, &h).ftype == rnfs_vfs::FileType::Directory {
                empty(fs, &h);
                fs.rmdir(&root(), dir, &name).unwrap();
            } else {
                fs.remove(&root(), dir, &name).unwrap();
            }
        }
    }
    empty(&fs, &root_h);
    assert_eq!(free_bytes(&fs), initial);
    assert_eq!(getattr(&*fs, &root_h).nlink, 2);
    let st = fs.fsstat(&root(), &root_h).unwrap().0;
    assert_eq!(st.total_files - st.free_files, 1);
}
