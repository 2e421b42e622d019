//! Helpers shared by the cases: setup as root, listing, wcc checks.

use rnfs_vfs::{
    Attr, BackendHandle, CookieVerifier, CreateHow, Cred, DirEntry, FileType, Filesystem, FsError,
    SetAttr, Stability, Wcc,
};

/// The non-root identity of the permission cases.
pub fn user() -> Cred {
    Cred {
        uid: 1000,
        gid: 1000,
        groups: vec![],
    }
}

/// Root's credentials.
pub fn root() -> Cred {
    Cred::root()
}

/// `SetAttr` with only a mode.
pub fn mode(mode: u32) -> SetAttr {
    SetAttr {
        mode: Some(mode),
        ..SetAttr::default()
    }
}

/// Creates a regular file (guarded, mode 0o644) as root.
pub fn mkfile(fs: &dyn Filesystem, dir: &BackendHandle, name: &[u8]) -> BackendHandle {
    fs.create(&root(), dir, name, &CreateHow::Guarded(mode(0o644)))
        .map_err(|(e, _)| e)
        .unwrap_or_else(|e| panic!("create {:?}: {e:?}", String::from_utf8_lossy(name)))
        .handle
}

/// Creates a directory (mode 0o755) as root.
pub fn mkdir(fs: &dyn Filesystem, dir: &BackendHandle, name: &[u8]) -> BackendHandle {
    fs.mkdir(&root(), dir, name, &mode(0o755))
        .map_err(|(e, _)| e)
        .unwrap_or_else(|e| panic!("mkdir {:?}: {e:?}", String::from_utf8_lossy(name)))
        .handle
}

/// Writes `data` at `offset` as root (FileSync).
pub fn write(fs: &dyn Filesystem, fh: &BackendHandle, offset: u64, data: &[u8]) {
    let ok = fs
        .write(&root(), fh, offset, data, Stability::FileSync)
        .map_err(|(e, _)| e)
        .expect("write");
    assert_eq!(ok.count as usize, data.len(), "short write");
}

/// Reads the whole file as root.
pub fn read_all(fs: &dyn Filesystem, fh: &BackendHandle) -> Vec<u8> {
    let size = getattr(fs, fh).size;
    let mut out = Vec::new();
    let count = u32::try_from(size).expect("small file");
    let ok = fs.read(&root(), fh, 0, count, &mut out).expect("read");
    assert_eq!(u64::from(ok.count), size);
    assert_eq!(out.len() as u64, size);
    out
}

/// GETATTR as root.
pub fn getattr(fs: &dyn Filesystem, fh: &BackendHandle) -> Attr {
    fs.getattr(&root(), fh).expect("getattr")
}

/// LOOKUP as root: the handle, or the error.
pub fn lookup(
    fs: &dyn Filesystem,
    dir: &BackendHandle,
    name: &[u8],
) -> Result<BackendHandle, FsError> {
    fs.lookup(&root(), dir, name)
        .map(|(h, _, _)| h)
        .map_err(|(e, _)| e)
}

/// Sets attributes as root.
pub fn setattr(fs: &dyn Filesystem, fh: &BackendHandle, set: SetAttr) {
    fs.setattr(&root(), fh, &set, None)
        .map_err(|(e, _)| e)
        .expect("setattr");
}

/// Gives `fh` to `uid:gid` and sets its mode (as root).
pub fn chown_chmod(fs: &dyn Filesystem, fh: &BackendHandle, uid: u32, gid: u32, mode: u32) {
    setattr(
        fs,
        fh,
        SetAttr {
            uid: Some(uid),
            gid: Some(gid),
            mode: Some(mode),
            ..SetAttr::default()
        },
    );
}

/// Asserts that a wcc carries both sides and that time did not run backwards.
#[track_caller]
pub fn assert_wcc(wcc: &Wcc) {
    let before = wcc.before.expect("wcc before");
    let after = wcc.after.expect("wcc after");
    assert!(
        before.mtime <= after.mtime,
        "mtime went backwards: {before:?} -> {after:?}"
    );
    assert!(
        before.ctime <= after.ctime,
        "ctime went backwards: {before:?} -> {after:?}"
    );
}

/// Asserts the result is `Err(want)`, whatever else the error carries.
#[track_caller]
pub fn assert_err<T: std::fmt::Debug, E: std::fmt::Debug>(
    res: Result<T, E>,
    want: &[FsError],
    pick: impl Fn(&E) -> FsError,
) {
    match res {
        Ok(v) => panic!("expected one of {want:?}, got Ok({v:?})"),
        Err(e) => {
            let got = pick(&e);
            assert!(want.contains(&got), "expected one of {want:?}, got {got:?}");
        }
    }
}

/// One entry as a READDIR sink saw it.
#[derive(Debug, Clone)]
pub struct Listed {
    /// Name bytes.
    pub name: Vec<u8>,
    /// File id.
    pub fileid: u64,
    /// Resume cookie.
    pub cookie: u64,
    /// Handle and attributes, with `plus`.
    pub plus: Option<(BackendHandle, Attr)>,
}

/// One READDIR call whose sink accepts at most `max` entries.
pub fn readdir_page(
    fs: &dyn Filesystem,
    dir: &BackendHandle,
    cookie: u64,
    verifier: CookieVerifier,
    plus: bool,
    max: usize,
) -> Result<(Vec<Listed>, CookieVerifier, bool), FsError> {
    let mut got = Vec::new();
    let mut sink = |e: DirEntry<'_>| {
        if got.len() >= max {
            return false;
        }
        got.push(Listed {
            name: e.name.to_vec(),
            fileid: e.fileid,
            cookie: e.cookie,
            plus: e.plus,
        });
        true
    };
    let end = fs
        .readdir(&root(), dir, cookie, verifier, plus, &mut sink)
        .map_err(|(e, _)| e)?;
    assert!(
        end.dir_attr.is_some(),
        "readdir without directory attributes"
    );
    if end.eof {
        assert!(got.len() <= max);
    } else {
        assert_eq!(got.len(), max, "not eof, yet the sink was never full");
    }
    Ok((got, end.verifier, end.eof))
}

/// The whole directory, `max` entries per call, resuming by cookie.
pub fn list_paged(fs: &dyn Filesystem, dir: &BackendHandle, plus: bool, max: usize) -> Vec<Listed> {
    let mut all = Vec::new();
    let (mut cookie, mut verifier) = (0, [0; 8]);
    for _ in 0..100_000 {
        let (page, verf, eof) =
            readdir_page(fs, dir, cookie, verifier, plus, max).expect("readdir");
        if let Some(last) = page.last() {
            cookie = last.cookie;
        }
        verifier = verf;
        all.extend(page);
        if eof {
            return all;
        }
    }
    panic!("readdir never reached eof");
}

/// The whole directory in one call.
pub fn list(fs: &dyn Filesystem, dir: &BackendHandle) -> Vec<Listed> {
    list_paged(fs, dir, false, usize::MAX)
}

/// Names in the directory, without `.` and `..`, sorted.
pub fn names(fs: &dyn Filesystem, dir: &BackendHandle) -> Vec<Vec<u8>> {
    let mut names: Vec<_> = list(fs, dir)
        .into_iter()
        .map(|e| e.name)
        .filter(|n| n != b"." && n != b"..")
        .collect();
    names.sort();
    names
}

/// Asserts the object's type.
#[track_caller]
pub fn assert_type(fs: &dyn Filesystem, fh: &BackendHandle, ftype: FileType) {
    assert_eq!(getattr(fs, fh).ftype, ftype);
}
