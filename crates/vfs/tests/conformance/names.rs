//! Names are bytes; some are never valid.

use rnfs_vfs::{BackendHandle, CreateHow, Filesystem, FsError, SetAttr, SpecialNode};

use super::util::{assert_err, lookup, mkdir, mkfile, mode, names, root};
use super::Fixture;

/// Non-UTF-8 names work everywhere and come back byte for byte.
pub fn names_are_bytes<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let file: &[u8] = b"\xff\xfe\x80file";
    let dir: &[u8] = b"\xc3\x28dir";
    let renamed: &[u8] = b"caf\xe9";
    let f = mkfile(fs, &root_h, file);
    let d = mkdir(fs, &root_h, dir);
    assert_eq!(lookup(fs, &root_h, file), Ok(f));
    assert_eq!(lookup(fs, &root_h, dir), Ok(d));
    assert_eq!(names(fs, &root_h), [dir.to_vec(), file.to_vec()]);
    fs.rename(&root(), &root_h, file, &d, renamed)
        .map_err(|(e, _, _)| e)
        .unwrap();
    assert_eq!(lookup(fs, &d, renamed), Ok(f));
    assert_eq!(names(fs, &d), [renamed.to_vec()]);
    fs.remove(&root(), &d, renamed).map_err(|(e, _)| e).unwrap();
    fs.rmdir(&root(), &root_h, dir).map_err(|(e, _)| e).unwrap();
    assert!(names(fs, &root_h).is_empty());
}

type Op<'a> = Box<dyn Fn(&[u8]) -> Result<(), FsError> + 'a>;

/// Every operation that makes a name, as a closure over the name.
fn makers<'a>(
    fs: &'a dyn Filesystem,
    dir: &'a BackendHandle,
    file: &'a BackendHandle,
) -> Vec<(&'static str, Op<'a>)> {
    vec![
        (
            "create",
            Box::new(move |n: &[u8]| {
                fs.create(&root(), dir, n, &CreateHow::Guarded(mode(0o644)))
                    .map(drop)
                    .map_err(|e| e.0)
            }),
        ),
        (
            "create unchecked",
            Box::new(move |n: &[u8]| {
                fs.create(&root(), dir, n, &CreateHow::Unchecked(mode(0o644)))
                    .map(drop)
                    .map_err(|e| e.0)
            }),
        ),
        (
            "mkdir",
            Box::new(move |n: &[u8]| {
                fs.mkdir(&root(), dir, n, &mode(0o755))
                    .map(drop)
                    .map_err(|e| e.0)
            }),
        ),
        (
            "symlink",
            Box::new(move |n: &[u8]| {
                fs.symlink(&root(), dir, n, b"target", &SetAttr::default())
                    .map(drop)
                    .map_err(|e| e.0)
            }),
        ),
        (
            "mknod",
            Box::new(move |n: &[u8]| {
                fs.mknod(&root(), dir, n, &SpecialNode::Fifo, &mode(0o644))
                    .map(drop)
                    .map_err(|e| e.0)
            }),
        ),
        (
            "link",
            Box::new(move |n: &[u8]| fs.link(&root(), file, dir, n).map(drop).map_err(|e| e.0)),
        ),
        (
            "rename to",
            Box::new(move |n: &[u8]| {
                fs.rename(&root(), dir, b"victim", dir, n)
                    .map(drop)
                    .map_err(|e| e.0)
            }),
        ),
    ]
}

/// `""`, `.`, `..`, and names with `/` or NUL are refused by every operation
/// that makes or removes a name, and nothing appears.
pub fn invalid_names_refused<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let d = mkdir(fs, &root_h, b"d");
    let file = mkfile(fs, &d, b"victim");
    let bad: [&[u8]; 6] = [b"", b".", b"..", b"a/b", b"/", b"a\0b"];
    for (op, make) in makers(fs, &d, &file) {
        for name in bad {
            let got = make(name);
            assert!(
                matches!(got, Err(FsError::Inval | FsError::Exist)),
                "{op} {name:?}: {got:?}"
            );
        }
    }
    for name in bad {
        assert_err(
            fs.remove(&root(), &d, name),
            &[FsError::Inval, FsError::Exist],
            |e| e.0,
        );
        assert_err(
            fs.rmdir(&root(), &d, name),
            &[FsError::Inval, FsError::Exist],
            |e| e.0,
        );
        assert_err(
            fs.rename(&root(), &d, name, &d, b"new"),
            &[FsError::Inval, FsError::Exist],
            |e| e.0,
        );
    }
    assert_eq!(names(fs, &d), [b"victim".to_vec()]);
    assert_eq!(lookup(fs, &d, b"victim"), Ok(file));
    assert_eq!(names(fs, &root_h), [b"d".to_vec()]);
}

/// 255 bytes is fine, 256 is NameTooLong for every operation.
pub fn name_length_limit<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let d = mkdir(fs, &root_h, b"d");
    let file = mkfile(fs, &d, b"victim");
    let longest = vec![b'x'; 255];
    let too_long = vec![b'y'; 256];
    for (op, make) in makers(fs, &d, &file) {
        assert_eq!(make(&too_long), Err(FsError::NameTooLong), "{op}");
    }
    assert_eq!(lookup(fs, &d, &too_long), Err(FsError::NameTooLong));
    let f = mkfile(fs, &d, &longest);
    assert_eq!(lookup(fs, &d, &longest), Ok(f));
    assert!(names(fs, &d).contains(&longest));
}
