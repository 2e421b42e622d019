//! READDIR and READDIRPLUS resumed from cached `getdents` chunks and from
//! cached directory streams give what a fresh descriptor per call gives
//! (`dir_streams: 0`, `attr_max_age: 0`): in order, out of order,
//! interleaved, across changes, for another caller (who must be allowed to
//! read the directory) and for a directory replaced under the same name.
//! Each case runs with the defaults (chunks, and streams where chunks have
//! no resume point) and with streams alone (`attr_max_age: 0`).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

#[path = "../../../tests/support/cannot_run.rs"]
mod cannot_run;
use cannot_run::cannot_run;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use rnfs_vfs::local::{LocalFs, LocalOptions};
use rnfs_vfs::{identity, BackendHandle, Cred, Filesystem, FsError};
use tempfile::TempDir;

/// Entries in the big test directory.
const ENTRIES: usize = 5000;
/// Entries per page: small, so a listing takes many calls.
const PAGE: usize = 37;

/// One listed entry: name, cookie, file id and (READDIRPLUS) handle.
type Entry = (Vec<u8>, u64, u64, Option<BackendHandle>);

fn export() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    // Other identities must be able to reach the export.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn populate(d: &Path, prefix: &str, count: usize) {
    std::fs::create_dir_all(d).unwrap();
    for i in 0..count {
        std::fs::write(d.join(format!("{prefix}{i:05}")), b"").unwrap();
    }
    settle();
}

/// Waits until a directory's last change is old enough for its streams to be
/// kept (its ctime must tell the next change apart).
fn settle() {
    std::thread::sleep(std::time::Duration::from_millis(100));
}

/// Which caches a backend lists with.
#[derive(Debug, Clone, Copy)]
enum Cached {
    /// The defaults: chunks, and streams where chunks have no resume point.
    Chunks,
    /// Streams alone.
    Streams,
}

const MODES: [Cached; 2] = [Cached::Chunks, Cached::Streams];

fn cached(dir: &Path, mode: Cached) -> LocalFs {
    let options = match mode {
        Cached::Chunks => LocalOptions::default(),
        Cached::Streams => LocalOptions {
            attr_max_age: 0,
            ..LocalOptions::default()
        },
    };
    LocalFs::open(dir, options).unwrap()
}

fn uncached(dir: &Path) -> LocalFs {
    let options = LocalOptions {
        dir_streams: 0,
        attr_max_age: 0,
        ..LocalOptions::default()
    };
    LocalFs::open(dir, options).unwrap()
}

fn user() -> Cred {
    Cred {
        uid: 4242,
        gid: 4242,
        groups: vec![],
    }
}

/// One call from `cookie`, taking at most `take` entries: the entries and
/// whether the directory ended.
fn page(
    fs: &LocalFs,
    cred: &Cred,
    dir: &BackendHandle,
    cookie: u64,
    take: usize,
    plus: bool,
) -> Result<(Vec<Entry>, bool), FsError> {
    let mut got = Vec::new();
    let end = fs
        .readdir(cred, dir, cookie, [0; 8], plus, &mut |e| {
            if got.len() == take {
                return false;
            }
            got.push((e.name.to_vec(), e.cookie, e.fileid, e.plus.map(|p| p.0)));
            true
        })
        .map_err(|(e, _)| e)?;
    Ok((got, end.eof))
}

/// A whole listing in pages of `take`, as (start cookie, entries) per call.
fn pages(
    fs: &LocalFs,
    cred: &Cred,
    dir: &BackendHandle,
    take: usize,
    plus: bool,
) -> Vec<(u64, Vec<Entry>)> {
    let mut out = Vec::new();
    let mut cookie = 0;
    loop {
        let (got, eof) = page(fs, cred, dir, cookie, take, plus).unwrap();
        let next = got.last().map_or(cookie, |e| e.1);
        out.push((cookie, got));
        if eof {
            return out;
        }
        cookie = next;
    }
}

fn flat(pages: &[(u64, Vec<Entry>)]) -> Vec<Entry> {
    pages.iter().flat_map(|(_, p)| p.iter().cloned()).collect()
}

/// Each name once, and `count` of them besides `.` and `..`.
fn check_complete(listing: &[Entry], count: usize) {
    let names: BTreeSet<_> = listing.iter().map(|e| &e.0).collect();
    assert_eq!(names.len(), listing.len(), "a name listed twice");
    assert_eq!(listing.len(), count + 2);
}

struct Big {
    _dir: TempDir,
    /// One backend per mode of `MODES`.
    on: [LocalFs; 2],
    off: LocalFs,
    d: BackendHandle,
}

fn big() -> Big {
    let dir = export();
    populate(&dir.path().join("d"), "f", ENTRIES);
    let on = MODES.map(|mode| cached(dir.path(), mode));
    let off = uncached(dir.path());
    let d = on[0].lookup(&Cred::root(), &on[0].root(), b"d").unwrap().0;
    assert_eq!(off.lookup(&Cred::root(), &off.root(), b"d").unwrap().0, d);
    Big {
        _dir: dir,
        on,
        off,
        d,
    }
}

#[test]
fn in_order_the_same_with_and_without_the_cache() {
    let b = big();
    let root = Cred::root();
    for (plus, on) in [false, true]
        .into_iter()
        .flat_map(|p| b.on.iter().map(move |on| (p, on)))
    {
        let reference = pages(&b.off, &root, &b.d, PAGE, plus);
        check_complete(&flat(&reference), ENTRIES);
        assert!(reference.len() > ENTRIES / PAGE);
        // Twice: the second listing starts where cached streams may linger.
        for _ in 0..2 {
            assert_eq!(pages(on, &root, &b.d, PAGE, plus), reference, "plus {plus}");
        }
        // Pages of 1 (every call served from what the previous one read) and
        // of 700 (several buffers per call).
        for take in [1, 700] {
            let off = flat(&pages(&b.off, &root, &b.d, take, plus));
            assert_eq!(flat(&pages(on, &root, &b.d, take, plus)), off);
            assert_eq!(off, flat(&reference));
        }
    }
}

#[test]
fn out_of_order_pages_are_the_pages_at_their_cookies() {
    let b = big();
    let root = Cred::root();
    for (plus, on) in [false, true]
        .into_iter()
        .flat_map(|p| b.on.iter().map(move |on| (p, on)))
    {
        let reference = pages(&b.off, &root, &b.d, PAGE, plus);
        let n = reference.len();
        // 3, 1, 4, 2: 4 and 2 resume where 3 and 1 stopped; then the rest,
        // backwards, each resuming from a stream the previous one left
        // nowhere near.
        let mut order = vec![3, 1, 4, 2, 5];
        order.extend((6..n).rev());
        order.push(0);
        for i in order {
            let (start, want) = &reference[i];
            let (got, eof) = page(on, &root, &b.d, *start, PAGE, plus).unwrap();
            assert_eq!(&got, want, "page {i}, plus {plus}");
            assert_eq!(eof, i == n - 1);
        }
        // The same page twice in a row: the first took the stream at its
        // cookie, the second opens afresh.
        let (start, want) = &reference[7];
        for _ in 0..2 {
            assert_eq!(&page(on, &root, &b.d, *start, PAGE, plus).unwrap().0, want);
        }
    }
}

#[test]
fn interleaved_listings_of_one_directory() {
    let b = big();
    let root = Cred::root();
    for (plus, on) in [false, true]
        .into_iter()
        .flat_map(|p| b.on.iter().map(move |on| (p, on)))
    {
        let reference = flat(&pages(&b.off, &root, &b.d, PAGE, plus));
        // Same page size (both listings stop at the same cookies and
        // take each other's streams), then different sizes.
        for (take_a, take_b) in [(PAGE, PAGE), (PAGE, 53)] {
            let mut a = (0, Vec::new(), false);
            let mut b_ = (0, Vec::new(), false);
            while !(a.2 && b_.2) {
                for (state, take) in [(&mut a, take_a), (&mut b_, take_b)] {
                    if state.2 {
                        continue;
                    }
                    let (got, eof) = page(on, &root, &b.d, state.0, take, plus).unwrap();
                    state.0 = got.last().map_or(state.0, |e| e.1);
                    state.1.extend(got);
                    state.2 = eof;
                }
            }
            assert_eq!(a.1, reference, "a: {take_a}/{take_b}, plus {plus}");
            assert_eq!(b_.1, reference, "b: {take_a}/{take_b}, plus {plus}");
        }
    }
}

#[test]
fn resumed_after_changes_lists_every_unchanged_entry_once() {
    for (plus, mode) in [false, true]
        .into_iter()
        .flat_map(|p| MODES.map(|m| (p, m)))
    {
        let dir = export();
        let d_path = dir.path().join("d");
        populate(&d_path, "f", ENTRIES);
        let fs = cached(dir.path(), mode);
        let root = Cred::root();
        let d = fs.lookup(&root, &fs.root(), b"d").unwrap().0;

        let mut listed: Vec<Vec<u8>> = Vec::new();
        let mut cookie = 0;
        for _ in 0..(ENTRIES / 2 / PAGE) {
            let (got, eof) = page(&fs, &root, &d, cookie, PAGE, plus).unwrap();
            assert!(!eof);
            cookie = got.last().unwrap().1;
            listed.extend(got.into_iter().map(|e| e.0));
        }
        let listed_before_change = listed.len();
        // Remove every 7th entry, listed or not, and add new ones.
        let before: BTreeSet<Vec<u8>> = (0..ENTRIES)
            .map(|i| format!("f{i:05}").into_bytes())
            .collect();
        let mut removed = BTreeSet::new();
        for i in (0..ENTRIES).step_by(7) {
            let name = format!("f{i:05}");
            std::fs::remove_file(d_path.join(&name)).unwrap();
            removed.insert(name.into_bytes());
        }
        let mut added = BTreeSet::new();
        for i in 0..700 {
            let name = format!("n{i:05}");
            std::fs::write(d_path.join(&name), b"").unwrap();
            added.insert(name.into_bytes());
        }
        if plus {
            // Streams kept again from here on.
            settle();
        }
        loop {
            let (got, eof) = page(&fs, &root, &d, cookie, PAGE, plus).unwrap();
            cookie = got.last().map_or(cookie, |e| e.1);
            listed.extend(got.into_iter().map(|e| e.0));
            if eof {
                break;
            }
        }

        let mut seen: BTreeMap<&[u8], usize> = BTreeMap::new();
        for name in &listed {
            *seen.entry(name).or_default() += 1;
        }
        assert!(seen.values().all(|&n| n == 1), "a name listed twice");
        for name in before.difference(&removed) {
            assert_eq!(seen.get(&name[..]), Some(&1), "{name:?} missing");
        }
        for name in seen.keys() {
            let known = [&b"."[..], b".."].contains(name)
                || before.contains(*name)
                || added.contains(*name);
            assert!(known, "{name:?} never existed");
        }
        // Nor is a name removed before it was reached, even if it was read
        // ahead before the change.
        let listed_before: BTreeSet<_> = listed[..listed_before_change].iter().collect();
        for name in &removed {
            if !listed_before.contains(name) {
                assert!(!seen.contains_key(&name[..]), "removed {name:?} listed");
            }
        }
    }
}

#[test]
fn another_caller_resumes_only_if_it_may_read_the_directory() {
    if !identity::can_switch() {
        cannot_run("the other identity needs root");
        return;
    }
    let dir = export();
    for (name, mode) in [("private", 0o700), ("public", 0o755)] {
        let path = dir.path().join(name);
        populate(&path, "f", 500);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    for mode in MODES {
        another_caller_in(&dir, mode);
    }
}

fn another_caller_in(dir: &TempDir, mode: Cached) {
    for name in ["private", "public"] {
        let path = dir.path().join(name);
        let bits = if name == "private" { 0o700 } else { 0o755 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(bits)).unwrap();
    }
    let fs = cached(dir.path(), mode);
    let off = uncached(dir.path());
    let root = Cred::root();
    let private = fs.lookup(&root, &fs.root(), b"private").unwrap().0;
    let public = fs.lookup(&root, &fs.root(), b"public").unwrap().0;
    let reference = pages(&off, &root, &public, PAGE, true);

    // Root stops part way through both: each leaves a stream opened as root.
    let (first, _) = page(&fs, &root, &private, 0, PAGE, false).unwrap();
    let private_cookie = first.last().unwrap().1;
    let (first, _) = page(&fs, &root, &public, 0, PAGE, true).unwrap();
    assert_eq!(first, reference[0].1);
    let public_cookie = first.last().unwrap().1;
    let public_path = dir.path().join("public");

    std::thread::scope(|s| {
        s.spawn(|| {
            identity::switch_to(&user()).unwrap();
            // No read permission: root's stream must not read for the user.
            for plus in [false, true] {
                let denied = page(&fs, &user(), &private, private_cookie, PAGE, plus);
                assert_eq!(denied.unwrap_err(), FsError::Access, "plus {plus}");
            }
            // Readable: root's stream goes on for the user.
            let (got, _) = page(&fs, &user(), &public, public_cookie, PAGE, true).unwrap();
            assert_eq!(got, reference[1].1);
            let user_cookie = got.last().unwrap().1;
            // Permission revoked between two calls of the user's listing: the
            // user's own stream must not outlive it.
            identity::switch_to(&root).unwrap();
            std::fs::set_permissions(&public_path, std::fs::Permissions::from_mode(0o700)).unwrap();
            identity::switch_to(&user()).unwrap();
            let denied = page(&fs, &user(), &public, user_cookie, PAGE, true);
            assert_eq!(denied.unwrap_err(), FsError::Access);
            identity::switch_to(&root).unwrap();
        });
    });
    // Root still may, from the same cookie.
    let (got, _) = page(&fs, &root, &private, private_cookie, PAGE, false).unwrap();
    let (want, _) = page(&off, &root, &private, private_cookie, PAGE, false).unwrap();
    assert_eq!(got, want);
}

#[test]
fn a_directory_replaced_under_its_name_lists_its_own_entries() {
    let dir = export();
    let d_path = dir.path().join("d");
    populate(&d_path, "a", 1000);
    let off = uncached(dir.path());
    let root = Cred::root();
    let fs_of = MODES.map(|mode| cached(dir.path(), mode));
    let cases = [
        (false, "b", 0),
        (true, "c", 0),
        (false, "d", 1),
        (true, "e", 1),
    ];
    for (plus, prefix, mode) in cases {
        let fs = &fs_of[mode];
        let old = fs.lookup(&root, &fs.root(), b"d").unwrap().0;
        let (first, _) = page(fs, &root, &old, 0, PAGE, plus).unwrap();
        let cookie = first.last().unwrap().1;

        std::fs::remove_dir_all(&d_path).unwrap();
        populate(&d_path, prefix, 1000);
        let new = fs.lookup(&root, &fs.root(), b"d").unwrap().0;
        assert_ne!(new, old);
        assert_eq!(
            page(fs, &root, &old, cookie, PAGE, plus).unwrap_err(),
            FsError::Stale
        );
        // The old cookie, as a position in the new directory: what a fresh
        // descriptor reads there, nothing of the old directory's.
        let (got, _) = page(fs, &root, &new, cookie, PAGE, plus).unwrap();
        let (want, _) = page(&off, &root, &new, cookie, PAGE, plus).unwrap();
        assert_eq!(got, want, "plus {plus}");
        let whole = flat(&pages(fs, &root, &new, PAGE, plus));
        assert_eq!(whole, flat(&pages(&off, &root, &new, PAGE, plus)));
        check_complete(&whole, 1000);
        for (name, ..) in got.iter().chain(&whole[2..]) {
            assert!(name.starts_with(prefix.as_bytes()), "{name:?}");
        }
    }
}

#[test]
fn unprivileged_backend_lists_the_same() {
    if !identity::can_switch() {
        cannot_run("an unprivileged backend as root needs a switch");
        return;
    }
    let dir = export();
    populate(&dir.path().join("d"), "f", 2000);
    std::thread::scope(|s| {
        s.spawn(|| {
            identity::switch_to(&user()).unwrap();
            let on = cached(dir.path(), Cached::Chunks);
            let off = uncached(dir.path());
            assert!(!on.privileged());
            for plus in [false, true] {
                let d_on = on.lookup(&user(), &on.root(), b"d").unwrap().0;
                let d_off = off.lookup(&user(), &off.root(), b"d").unwrap().0;
                let want = pages(&off, &user(), &d_off, PAGE, plus);
                check_complete(&flat(&want), 2000);
                assert_eq!(pages(&on, &user(), &d_on, PAGE, plus), want);
            }
            identity::switch_to(&Cred::root()).unwrap();
        });
    });
}
