//! READDIR and READDIRPLUS: completeness, paging, stable cookies.

use std::collections::{BTreeSet, HashSet};

use rnfs_vfs::{DirEntry, Filesystem, FsError, SetAttr};

use super::util::{getattr, list, list_paged, mkdir, mkfile, names, readdir_page, root, Listed};
use super::Fixture;

fn name(i: usize) -> Vec<u8> {
    format!("entry-{i:04}").into_bytes()
}

/// `.` and `..` come first with the right file ids; every cookie is non-zero,
/// distinct and a non-negative `loff_t`: Linux clients hand cookies to
/// applications as `telldir` positions, and `lseek` refuses a negative one.
pub fn readdir_lists_dot_entries_first<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let d = mkdir(fs, &root_h, b"d");
    mkfile(fs, &d, b"a");
    mkdir(fs, &d, b"b");
    let all = list(fs, &d);
    assert_eq!(all.len(), 4, "{all:?}");
    assert_eq!(all[0].name, b".");
    assert_eq!(all[0].fileid, getattr(fs, &d).fileid);
    assert_eq!(all[1].name, b"..");
    assert_eq!(all[1].fileid, getattr(fs, &root_h).fileid);
    let rest: BTreeSet<_> = all[2..].iter().map(|e| e.name.clone()).collect();
    assert_eq!(rest, BTreeSet::from([b"a".to_vec(), b"b".to_vec()]));
    let cookies: HashSet<u64> = all.iter().map(|e| e.cookie).collect();
    assert_eq!(cookies.len(), all.len(), "duplicate cookies: {all:?}");
    assert!(!cookies.contains(&0), "cookie 0 handed out");
    for e in &all {
        assert!(i64::try_from(e.cookie).is_ok(), "negative position: {e:?}");
    }
    // An empty directory lists only the two.
    let e = mkdir(fs, &root_h, b"empty");
    let all = list(fs, &e);
    let got: Vec<_> = all.iter().map(|e| e.name.as_slice()).collect();
    assert_eq!(got, [&b"."[..], b".."]);
}

/// 1000 names come back exactly once each, whatever the page size.
pub fn readdir_paged_returns_each_name_once<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let d = mkdir(fs, &fs.root(), b"d");
    let want: BTreeSet<Vec<u8>> = (0..1000).map(name).collect();
    for n in &want {
        mkfile(fs, &d, n);
    }
    for (page, plus) in [
        (7, false),
        (1, false),
        (64, true),
        (1002, false),
        (5000, true),
    ] {
        let got = list_paged(fs, &d, plus, page);
        let mut seen = HashSet::new();
        for e in &got {
            assert!(
                seen.insert(e.name.clone()),
                "page {page}: {:?} twice",
                e.name
            );
        }
        let real: BTreeSet<Vec<u8>> = got
            .iter()
            .map(|e| e.name.clone())
            .filter(|n| n != b"." && n != b"..")
            .collect();
        assert_eq!(real.len(), want.len(), "page size {page}");
        assert!(real == want, "page size {page}: names differ");
    }
}

/// An entry the sink refused is the first one of the next call.
pub fn readdir_refused_entry_comes_again<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let d = mkdir(fs, &fs.root(), b"d");
    for i in 0..10 {
        mkfile(fs, &d, &name(i));
    }
    let mut cookie = 0;
    let mut verifier = [0; 8];
    let mut all = Vec::new();
    loop {
        let mut accepted: Vec<(Vec<u8>, u64)> = Vec::new();
        let mut refused = None;
        let mut sink = |e: DirEntry<'_>| {
            if accepted.len() == 3 {
                refused = Some(e.name.to_vec());
                return false;
            }
            accepted.push((e.name.to_vec(), e.cookie));
            true
        };
        let end = fs
            .readdir(&root(), &d, cookie, verifier, false, &mut sink)
            .map_err(|(e, _)| e)
            .unwrap();
        all.extend(accepted.iter().map(|(n, _)| n.clone()));
        if end.eof {
            assert!(refused.is_none());
            break;
        }
        let refused = refused.expect("not eof, so an entry was refused");
        let (_, last) = accepted.last().cloned().expect("accepted some");
        cookie = last;
        verifier = end.verifier;
        let (next, _, _) = readdir_page(fs, &d, cookie, verifier, false, 1).unwrap();
        assert_eq!(next.first().map(|e| &e.name), Some(&refused));
    }
    assert_eq!(all.len(), 12);
}

/// Entries added and removed between pages never make an untouched entry come
/// back twice or go missing.
pub fn readdir_resume_survives_changes<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let d = mkdir(fs, &fs.root(), b"d");
    for i in 0..300 {
        mkfile(fs, &d, &name(i));
    }
    let (first, mut verifier, eof) = readdir_page(fs, &d, 0, [0; 8], false, 100).unwrap();
    assert!(!eof);
    let seen: BTreeSet<Vec<u8>> = first.iter().map(|e| e.name.clone()).collect();
    let unseen: BTreeSet<Vec<u8>> = (0..300).map(name).filter(|n| !seen.contains(n)).collect();
    assert_eq!(unseen.len(), 202, "first page had . and .. and 98 names");
    // Remove 20 seen and 20 unseen names, then add 20 new ones.
    let removed_seen: Vec<_> = seen
        .iter()
        .filter(|n| n.starts_with(b"entry"))
        .take(20)
        .cloned()
        .collect();
    let removed_unseen: Vec<_> = unseen.iter().step_by(7).take(20).cloned().collect();
    for n in removed_seen.iter().chain(&removed_unseen) {
        fs.remove(&root(), &d, n).map_err(|(e, _)| e).unwrap();
    }
    // The entry of the last cookie itself may go too.
    let last = first.last().unwrap().clone();
    if last.name.starts_with(b"entry") && !removed_seen.contains(&last.name) {
        fs.remove(&root(), &d, &last.name)
            .map_err(|(e, _)| e)
            .unwrap();
    }
    for i in 1000..1020 {
        mkfile(fs, &d, &name(i));
    }
    let mut cookie = last.cookie;
    let mut rest: Vec<Listed> = Vec::new();
    loop {
        let (page, verf, eof) = readdir_page(fs, &d, cookie, verifier, false, 9).unwrap();
        if let Some(e) = page.last() {
            cookie = e.cookie;
        }
        verifier = verf;
        rest.extend(page);
        if eof {
            break;
        }
    }
    let mut later = HashSet::new();
    for e in &rest {
        assert!(later.insert(e.name.clone()), "{:?} listed twice", e.name);
        assert!(
            !seen.contains(&e.name),
            "{:?} was on the first page",
            e.name
        );
        assert!(
            !removed_unseen.contains(&e.name),
            "{:?} was removed",
            e.name
        );
    }
    for n in unseen.iter().filter(|n| !removed_unseen.contains(n)) {
        assert!(later.contains(n), "untouched {n:?} missing after resume");
    }
}

/// READDIRPLUS hands out handles that resolve to the listed objects.
pub fn readdirplus_handles_resolve<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let d = mkdir(fs, &root_h, b"d");
    mkfile(fs, &d, b"file");
    mkdir(fs, &d, b"dir");
    fs.symlink(&root(), &d, b"link", b"file", &SetAttr::default())
        .map_err(|(e, _)| e)
        .unwrap();
    let all = list_paged(fs, &d, true, 2);
    assert_eq!(all.len(), 5);
    for e in &all {
        let Some((h, attr)) = e.plus else {
            assert!(
                e.name == b"." || e.name == b"..",
                "{:?} has no handle",
                e.name
            );
            continue;
        };
        assert_eq!(attr.fileid, e.fileid, "{:?}", e.name);
        assert_eq!(getattr(fs, &h).fileid, e.fileid, "{:?}", e.name);
        if e.name != b"." && e.name != b".." {
            assert_eq!(fs.lookup(&root(), &d, &e.name).map(|r| r.0), Ok(h));
        }
    }
}

/// READDIRPLUS lists `.` with its handle and attributes, and `..` by its
/// file id with neither (a local backend would walk up to the export root
/// for them, on every listing), at the root and below.
pub fn readdirplus_dotdot_carries_no_handle<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let d = mkdir(fs, &root_h, b"d");
    let e = mkdir(fs, &d, b"e");
    for (dir, parent) in [(root_h, root_h), (d, root_h), (e, d)] {
        let all = list_paged(fs, &dir, true, usize::MAX);
        assert_eq!(all[0].name, b".");
        assert_eq!(all[0].plus.map(|p| p.0), Some(dir));
        assert_eq!(all[1].name, b"..");
        assert_eq!(all[1].fileid, getattr(fs, &parent).fileid);
        assert_eq!(all[1].plus, None, "{:?}", all[1]);
    }
}

/// READDIR of a file is NotDir.
pub fn readdir_of_file_is_notdir<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    assert_eq!(
        readdir_page(fs, &f, 0, [0; 8], false, 10).map(|_| ()),
        Err(FsError::NotDir)
    );
}

/// Resuming with the verifier handed out works; with a made-up non-zero one it
/// is BadCookie for backends that check verifiers.
pub fn readdir_bad_verifier<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let d = mkdir(fs, &fs.root(), b"d");
    for i in 0..5 {
        mkfile(fs, &d, &name(i));
    }
    let (page, verifier, _) = readdir_page(fs, &d, 0, [0; 8], false, 3).unwrap();
    let cookie = page.last().unwrap().cookie;
    let (next, _, _) = readdir_page(fs, &d, cookie, verifier, false, 100).unwrap();
    assert_eq!(next.len(), 4);
    if !fx.caps.checks_cookie_verifier {
        eprintln!("skipped: backend does not check cookie verifiers");
        return;
    }
    let mut wrong = verifier;
    wrong[7] ^= 0x5a;
    wrong[0] ^= 0xa5;
    assert_eq!(
        readdir_page(fs, &d, cookie, wrong, false, 100).map(|_| ()),
        Err(FsError::BadCookie)
    );
    assert_eq!(names(fs, &d).len(), 5);
}
