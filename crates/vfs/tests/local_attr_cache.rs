//! READDIRPLUS answers from cached attributes and cached `getdents` chunks
//! only while nothing reported a change: every change a local process or
//! rnfs itself makes shows in the next listing exactly as GETATTR and the
//! kernel's own listing show it, and what the kernel does not report
//! (writes through a shared mapping) shows within `attr_max_age`.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

#[path = "../../../tests/support/cannot_run.rs"]
mod cannot_run;
use cannot_run::cannot_run;

use std::collections::{HashMap, HashSet};
use std::fs::OpenOptions;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use rnfs_vfs::local::{LocalFs, LocalOptions};
use rnfs_vfs::{Attr, BackendHandle, CreateHow, Cred, Filesystem, SetAttr, Stability};

fn root() -> Cred {
    Cred::root()
}

/// Every entry of `dir` but `.` and `..`, with its READDIRPLUS handle and
/// attributes, in pages of 7 entries.
fn list(fs: &LocalFs, dir: &BackendHandle) -> HashMap<Vec<u8>, (BackendHandle, Attr)> {
    let mut out = HashMap::new();
    let mut cookie = 0;
    loop {
        let mut taken = 0;
        let end = fs
            .readdir(&root(), dir, cookie, [0; 8], true, &mut |e| {
                if taken == 7 {
                    return false;
                }
                taken += 1;
                cookie = e.cookie;
                if e.name != b"." && e.name != b".." {
                    let plus = e.plus.expect("plus data");
                    out.insert(e.name.to_vec(), plus);
                }
                true
            })
            .unwrap();
        if end.eof {
            return out;
        }
    }
}

/// The names in `path`, as the kernel lists them.
fn kernel_names(path: &Path) -> HashSet<Vec<u8>> {
    std::fs::read_dir(path)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_encoded_bytes())
        .collect()
}

/// Lists the export's root (`path`), checks its names against the kernel's
/// listing and every entry against LOOKUP of its name.
fn assert_listing_is_current(fs: &LocalFs, path: &Path, what: &str) {
    let dir = &fs.root();
    let listed = list(fs, dir);
    let names: HashSet<_> = listed.keys().cloned().collect();
    assert_eq!(names, kernel_names(path), "{what}: names");
    for (name, (fh, attr)) in listed {
        let (l_fh, l_attr, _) = fs.lookup(&root(), dir, &name).unwrap();
        let name = String::from_utf8_lossy(&name);
        assert_eq!(fh, l_fh, "{what}: handle of {name}");
        assert_eq!(attr, l_attr, "{what}: attributes of {name}");
    }
}

/// One test at a time: the process has one inotify queue, and a listing in
/// another test would drain what `lost_events_show_no_stale_attributes`
/// fills.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

fn backend(dir: &Path, attr_max_age: u32) -> Option<LocalFs> {
    let fs = LocalFs::open(
        dir,
        LocalOptions {
            attr_max_age,
            ..LocalOptions::default()
        },
    )
    .unwrap();
    if !fs.privileged() {
        cannot_run("cached attributes are for privileged backends");
        return None;
    }
    Some(fs)
}

fn populate(dir: &Path) {
    for i in 0..20 {
        std::fs::write(dir.join(format!("f{i}")), b"0123456789").unwrap();
    }
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::os::unix::fs::symlink("f0", dir.join("link")).unwrap();
}

/// A named change to the export.
type Change<'a> = (&'a str, Box<dyn FnMut() + 'a>);

/// A change the kernel reports to the directory, made by another process
/// (here, this one without rnfs), shows in the very next listing.
#[test]
fn local_changes_show_in_the_next_listing() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path());
    let Some(fs) = backend(dir.path(), 3600) else {
        return;
    };
    let p = |name: &str| dir.path().join(name);
    // Kept open across listings: writes through it are reported too.
    let mut early = OpenOptions::new().append(true).open(p("f9")).unwrap();
    assert_listing_is_current(&fs, dir.path(), "first listing");
    assert_listing_is_current(&fs, dir.path(), "second listing");

    let mut changes: Vec<Change<'_>> = vec![
        (
            "write",
            Box::new(|| std::fs::write(p("f1"), b"longer than before").unwrap()),
        ),
        (
            "truncate",
            Box::new(|| {
                OpenOptions::new()
                    .write(true)
                    .open(p("f2"))
                    .unwrap()
                    .set_len(3)
                    .unwrap()
            }),
        ),
        (
            "chmod",
            Box::new(|| {
                std::fs::set_permissions(p("f3"), std::fs::Permissions::from_mode(0o600)).unwrap()
            }),
        ),
        (
            "utimes",
            Box::new(|| {
                let file = OpenOptions::new().write(true).open(p("f4")).unwrap();
                file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000))
                    .unwrap();
            }),
        ),
        (
            "chown",
            Box::new(|| std::os::unix::fs::lchown(p("f5"), Some(1234), Some(5678)).unwrap()),
        ),
        (
            "rename over",
            Box::new(|| {
                std::fs::write(p("new"), b"new").unwrap();
                std::fs::rename(p("new"), p("f6")).unwrap();
            }),
        ),
        (
            "remove and re-create",
            Box::new(|| {
                std::fs::remove_file(p("f7")).unwrap();
                std::fs::write(p("f7"), b"again, longer").unwrap();
            }),
        ),
        (
            "symlink's times",
            Box::new(|| {
                let times = [libc::timespec {
                    tv_sec: 5,
                    tv_nsec: 0,
                }; 2];
                let path = std::ffi::CString::new(p("link").into_os_string().into_encoded_bytes())
                    .unwrap();
                // SAFETY: a NUL-terminated path and two timespecs, as
                // utimensat(2) takes them.
                let rc = unsafe {
                    libc::utimensat(
                        libc::AT_FDCWD,
                        path.as_ptr(),
                        times.as_ptr(),
                        libc::AT_SYMLINK_NOFOLLOW,
                    )
                };
                assert_eq!(rc, 0);
            }),
        ),
        (
            "append through an earlier descriptor",
            Box::new(|| early.write_all(b"appended").unwrap()),
        ),
        (
            "a file in a subdirectory",
            Box::new(|| std::fs::write(p("sub/x"), b"x").unwrap()),
        ),
    ];
    for (what, change) in &mut changes {
        change();
        assert_listing_is_current(&fs, dir.path(), what);
    }
}

/// rnfs's own WRITE, SETATTR and LINK, through handles, show in the next
/// listing, including in a listing that began before the change.
#[test]
fn own_changes_show_in_the_next_listing() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path());
    let Some(fs) = backend(dir.path(), 3600) else {
        return;
    };
    let r = fs.root();
    assert_listing_is_current(&fs, dir.path(), "first listing");
    let fh = |name: &[u8]| fs.lookup(&root(), &r, name).unwrap().0;

    fs.write(
        &root(),
        &fh(b"f1"),
        100,
        b"past the end",
        Stability::Unstable,
    )
    .unwrap();
    assert_listing_is_current(&fs, dir.path(), "WRITE");
    let set = SetAttr {
        mode: Some(0o640),
        ..SetAttr::default()
    };
    fs.setattr(&root(), &fh(b"f2"), &set, None).unwrap();
    assert_listing_is_current(&fs, dir.path(), "SETATTR");
    let sub = fh(b"sub");
    fs.link(&root(), &fh(b"f3"), &sub, b"second name").unwrap();
    assert_listing_is_current(&fs, dir.path(), "LINK");
    // A file with two links is never answered from the cache: a change
    // through its other name is reported to the other directory only.
    std::fs::write(
        dir.path().join("sub/second name"),
        b"through the other name",
    )
    .unwrap();
    assert_listing_is_current(&fs, dir.path(), "write through the other link");
}

/// Lists the directory `dir` and checks every entry against LOOKUP of its
/// name.
fn assert_dir_listing_is_current(fs: &LocalFs, dir: &BackendHandle, what: &str) {
    for (name, (fh, attr)) in list(fs, dir) {
        let (l_fh, l_attr, _) = fs.lookup(&root(), dir, &name).unwrap();
        let name = String::from_utf8_lossy(&name);
        assert_eq!(fh, l_fh, "{what}: handle of {name}");
        assert_eq!(attr, l_attr, "{what}: attributes of {name}");
    }
}

/// CREATE UNCHECKED with a size truncates an existing file through a
/// descriptor that may be reported to another directory's watch, or to
/// none: here the descriptor rnfs's WRITE cached when the file's only name
/// was `a/f`, which was then linked as `b/g` and removed. The truncation
/// shows in the next listing of `b` all the same.
#[test]
fn create_with_a_size_shows_in_the_next_listing() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("a")).unwrap();
    std::fs::create_dir(dir.path().join("b")).unwrap();
    let Some(fs) = backend(dir.path(), 3600) else {
        return;
    };
    let r = fs.root();
    let a = fs.lookup(&root(), &r, b"a").unwrap().0;
    let b = fs.lookup(&root(), &r, b"b").unwrap().0;
    let f = fs
        .create(&root(), &a, b"f", &CreateHow::Guarded(SetAttr::default()))
        .unwrap()
        .handle;
    fs.write(&root(), &f, 0, &[7; 100], Stability::Unstable)
        .unwrap();
    fs.link(&root(), &f, &b, b"g").unwrap();
    fs.remove(&root(), &a, b"f").unwrap();
    // The second listing answers from the attributes the first cached.
    assert_dir_listing_is_current(&fs, &b, "first listing");
    assert_dir_listing_is_current(&fs, &b, "second listing");
    assert_eq!(list(&fs, &b)[&b"g"[..]].1.size, 100);
    let how = CreateHow::Unchecked(SetAttr {
        size: Some(0),
        ..SetAttr::default()
    });
    let created = fs.create(&root(), &b, b"g", &how).unwrap();
    assert_eq!((created.handle, created.attr.size), (f, 0));
    assert_eq!(list(&fs, &b)[&b"g"[..]].1.size, 0);
    assert_dir_listing_is_current(&fs, &b, "CREATE UNCHECKED with a size");
}

/// A write through a shared mapping is reported to no one; the listing shows
/// it once the attributes are older than `attr_max_age`.
#[test]
fn unreported_changes_show_within_the_max_age() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path());
    let Some(fs) = backend(dir.path(), 1) else {
        return;
    };
    let r = fs.root();
    assert_listing_is_current(&fs, dir.path(), "first listing");
    // Apart from the listing's ctime by a timestamp tick.
    std::thread::sleep(Duration::from_millis(20));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.path().join("f1"))
        .unwrap();
    // SAFETY: a fresh shared mapping of the file's first 10 bytes (the file
    // has 10), written once and unmapped here; nothing else maps it.
    unsafe {
        let map = libc::mmap(
            std::ptr::null_mut(),
            10,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        );
        assert_ne!(map, libc::MAP_FAILED);
        map.cast::<u8>().write(b'X');
        assert_eq!(libc::munmap(map, 10), 0);
    }
    let before = list(&fs, &r)[&b"f1"[..]].1;
    let now = fs.lookup(&root(), &r, b"f1").unwrap().1;
    assert_ne!(
        before.mtime, now.mtime,
        "the mapping's write moves the mtime"
    );
    std::thread::sleep(Duration::from_millis(2100));
    assert_listing_is_current(&fs, dir.path(), "after the max age");
}

/// Events lost to a full inotify queue cannot vouch for anything: a change
/// whose event was dropped still shows in the next listing.
#[test]
fn lost_events_show_no_stale_attributes() {
    let _serial = serial();
    let max_queued: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(16_384);
    if max_queued > 1 << 20 {
        cannot_run(&format!(
            "an event queue of {max_queued} takes too long to fill"
        ));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path());
    let Some(fs) = backend(dir.path(), 3600) else {
        return;
    };
    let r = fs.root();
    let sub = fs.lookup(&root(), &r, b"sub").unwrap().0;
    std::fs::write(dir.path().join("sub/a"), b"a").unwrap();
    std::fs::write(dir.path().join("sub/b"), b"b").unwrap();
    assert_listing_is_current(&fs, dir.path(), "first listing");
    // Watch `sub`, then fill the queue with its events: alternating names,
    // which inotify does not merge.
    let _ = list(&fs, &sub);
    for i in 0..max_queued + 16 {
        let name = if i % 2 == 0 { "sub/a" } else { "sub/b" };
        let mode = 0o600 | (i as u32 & 0o44);
        std::fs::set_permissions(dir.path().join(name), std::fs::Permissions::from_mode(mode))
            .unwrap();
    }
    // This event is dropped.
    std::fs::write(dir.path().join("f1"), b"changed after the overflow").unwrap();
    assert_listing_is_current(&fs, dir.path(), "after the overflow");
}

/// Names created, removed and renamed between the pages of one listing: a
/// name there all along comes exactly once, none comes twice, and only
/// names that existed at some point come at all; the next listing is the
/// kernel's.
#[test]
fn names_changing_between_pages() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    for i in 0..300 {
        std::fs::write(dir.path().join(format!("f{i}")), b"").unwrap();
    }
    let Some(fs) = backend(dir.path(), 3600) else {
        return;
    };
    let r = fs.root();
    // Twice each, so that the second listing runs on cached chunks; with
    // and without attributes (READDIRPLUS and READDIR).
    for (round, plus) in [(0, true), (1, true), (2, false), (3, false)] {
        assert_listing_is_current(&fs, dir.path(), "before");
        let mut seen = HashMap::<Vec<u8>, usize>::new();
        let mut cookie = 0;
        let mut page = 0;
        let mut ever = kernel_names(dir.path());
        loop {
            let mut taken = 0;
            let end = fs
                .readdir(&root(), &r, cookie, [0; 8], plus, &mut |e| {
                    if taken == 13 {
                        return false;
                    }
                    taken += 1;
                    cookie = e.cookie;
                    *seen.entry(e.name.to_vec()).or_default() += 1;
                    true
                })
                .unwrap();
            if end.eof {
                break;
            }
            page += 1;
            let p = |name: String| dir.path().join(name);
            match page % 3 {
                0 => std::fs::write(p(format!("new{round}-{page}")), b"").unwrap(),
                1 => std::fs::remove_file(p(format!("f{}", page * 7 % 300))).unwrap_or(()),
                _ => {
                    let from = p(format!("f{}", (page * 11 + 5) % 300));
                    if from.exists() {
                        std::fs::rename(from, p(format!("moved{round}-{page}"))).unwrap();
                    }
                }
            }
            ever.extend(kernel_names(dir.path()));
        }
        let now = kernel_names(dir.path());
        for (name, count) in &seen {
            let shown = String::from_utf8_lossy(name);
            assert_eq!(*count, 1, "round {round}: {shown} listed {count} times");
            assert!(
                ever.contains(name) || name == b"." || name == b"..",
                "round {round}: {shown} never existed"
            );
        }
        // Untouched throughout: listed.
        let before: HashSet<_> = (0..300).map(|i| format!("f{i}").into_bytes()).collect();
        for name in before.intersection(&now) {
            assert!(seen.contains_key(name), "round {round}: {name:?} missed");
        }
    }
    assert_listing_is_current(&fs, dir.path(), "after");
}

/// A listing from cached chunks checks, as opening the directory would,
/// that the caller may read it.
#[test]
fn cached_chunks_answer_only_callers_who_may_read() {
    let _serial = serial();
    if !rnfs_vfs::identity::can_switch() {
        cannot_run("needs root to switch identities");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let private = dir.path().join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::write(private.join("a"), b"a").unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let Some(fs) = backend(dir.path(), 3600) else {
        return;
    };
    let private = fs.lookup(&root(), &fs.root(), b"private").unwrap().0;
    // Root's listings fill the cache.
    assert_eq!(list(&fs, &private).len(), 1);
    assert_eq!(list(&fs, &private).len(), 1);
    let user = Cred {
        uid: 4242,
        gid: 4242,
        groups: vec![],
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            rnfs_vfs::identity::switch_to(&user).unwrap();
            let l = fs.readdir(&user, &private, 0, [0; 8], true, &mut |_| true);
            assert_eq!(l.unwrap_err().0, rnfs_vfs::FsError::Access);
        });
    });
}

/// A caller who may read a directory but not search it gets its names
/// without handles or attributes, though root's listings filled the caches:
/// it could not look any of them up.
#[test]
fn callers_who_may_not_search_get_no_handles_from_the_caches() {
    let _serial = serial();
    if !rnfs_vfs::identity::can_switch() {
        cannot_run("needs root to switch identities");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let readable = dir.path().join("readable");
    std::fs::create_dir(&readable).unwrap();
    std::fs::write(readable.join("secret"), b"s").unwrap();
    for i in 0..20 {
        std::fs::write(readable.join(format!("f{i}")), b"f").unwrap();
    }
    std::fs::set_permissions(&readable, std::fs::Permissions::from_mode(0o744)).unwrap();
    let Some(fs) = backend(dir.path(), 3600) else {
        return;
    };
    let readable = fs.lookup(&root(), &fs.root(), b"readable").unwrap().0;
    // Root's listings fill the caches.
    assert_eq!(list(&fs, &readable).len(), 21);
    assert_eq!(list(&fs, &readable).len(), 21);
    let user = Cred {
        uid: 4242,
        gid: 4242,
        groups: vec![],
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            rnfs_vfs::identity::switch_to(&user).unwrap();
            let mut names = Vec::new();
            for _ in 0..2 {
                fs.readdir(&user, &readable, 0, [0; 8], true, &mut |e| {
                    assert!(e.plus.is_none(), "{:?} came with a handle", e.name);
                    names.push(e.name.to_vec());
                    true
                })
                .unwrap();
            }
            assert!(names.contains(&b"secret".to_vec()), "the names are listed");
        });
    });
}

/// `listing_stats` counts what the caches answered and what was read.
#[test]
fn listing_stats_count_what_the_caches_answered() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path());
    let Some(fs) = backend(dir.path(), 3600) else {
        return;
    };
    let r = fs.root();
    assert_eq!(fs.listing_stats(), rnfs_vfs::ListingStats::default());
    // 20 files, a symlink and a directory, in pages of 7: 4 calls. An entry
    // a full reply refused is described again by the next call, from the
    // cache if it can be.
    let _ = list(&fs, &r);
    let first = fs.listing_stats();
    assert!((22..=25).contains(&first.attrs_read), "{first:?}");
    assert!(first.chunks_read >= 1);
    let _ = list(&fs, &r);
    let second = fs.listing_stats();
    // The 21 non-directories with one link come from the cache; the
    // directory is read.
    assert!(second.attrs_cached - first.attrs_cached >= 21, "{second:?}");
    assert!((1..=2).contains(&(second.attrs_read - first.attrs_read)));
    assert_eq!(second.chunks_read, first.chunks_read);
    assert_eq!(second.chunk_calls - first.chunk_calls, 4);
    // A change retires the directory's attributes: all read again.
    std::fs::write(dir.path().join("f1"), b"changed").unwrap();
    let _ = list(&fs, &r);
    let third = fs.listing_stats();
    assert!(third.attrs_read - second.attrs_read >= 22, "{third:?}");
    assert!(third.attrs_cached - second.attrs_cached <= 3);
}
