//! CREATE, MKDIR and MKNOD.

use rnfs_vfs::{CreateHow, FileType, Filesystem, FsError, SetAttr, SpecialNode};

use super::util::{
    assert_err, assert_wcc, getattr, lookup, mkdir, mkfile, mode, read_all, root, write,
};
use super::Fixture;

/// GUARDED refuses an existing name (file or directory) with Exist and wcc.
pub fn create_guarded_refuses_existing<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let f = mkfile(fs, &root_h, b"f");
    write(fs, &f, 0, b"keep");
    mkdir(fs, &root_h, b"d");
    for name in [&b"f"[..], b"d"] {
        let (e, wcc) = fs
            .create(&root(), &root_h, name, &CreateHow::Guarded(mode(0o600)))
            .unwrap_err();
        assert_eq!(e, FsError::Exist);
        assert!(
            wcc.after.is_some(),
            "error wcc has the directory's attributes"
        );
    }
    assert_eq!(read_all(fs, &f), b"keep");
}

/// UNCHECKED opens an existing file (same object), applying only the size.
pub fn create_unchecked_opens_existing<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let first = fs
        .create(&root(), &root_h, b"f", &CreateHow::Unchecked(mode(0o640)))
        .map_err(|(e, _)| e)
        .unwrap();
    assert_eq!(first.attr.mode, 0o640);
    write(fs, &first.handle, 0, b"content");
    let again = fs
        .create(&root(), &root_h, b"f", &CreateHow::Unchecked(mode(0o600)))
        .map_err(|(e, _)| e)
        .unwrap();
    assert_eq!(again.handle, first.handle);
    assert_eq!(again.attr.fileid, first.attr.fileid);
    assert_eq!(
        read_all(fs, &first.handle),
        b"content",
        "no size: no truncation"
    );
    let truncate = SetAttr {
        size: Some(0),
        ..SetAttr::default()
    };
    let third = fs
        .create(&root(), &root_h, b"f", &CreateHow::Unchecked(truncate))
        .map_err(|(e, _)| e)
        .unwrap();
    assert_eq!(third.attr.fileid, first.attr.fileid);
    assert_eq!(third.attr.size, 0);
    assert_eq!(getattr(fs, &first.handle).size, 0);
    // UNCHECKED over a directory does not make it a file.
    mkdir(fs, &root_h, b"d");
    assert!(fs
        .create(&root(), &root_h, b"d", &CreateHow::Unchecked(mode(0o600)))
        .is_err());
}

/// EXCLUSIVE: a retransmission with the same verifier gets the same file; a
/// different verifier gets Exist.
pub fn create_exclusive_retransmit<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let verf = *b"verifier";
    let first = fs
        .create(&root(), &root_h, b"x", &CreateHow::Exclusive(verf))
        .map_err(|(e, _)| e)
        .unwrap();
    assert_wcc(&first.dir_wcc);
    assert_eq!(first.attr.ftype, FileType::Regular);
    let again = fs
        .create(&root(), &root_h, b"x", &CreateHow::Exclusive(verf))
        .map_err(|(e, _)| e)
        .unwrap();
    assert_eq!(again.handle, first.handle);
    assert_err(
        fs.create(&root(), &root_h, b"x", &CreateHow::Exclusive(*b"other!!!")),
        &[FsError::Exist],
        |e| e.0,
    );
    // A file made another way never matches a verifier.
    mkfile(fs, &root_h, b"plain");
    assert_err(
        fs.create(&root(), &root_h, b"plain", &CreateHow::Exclusive(verf)),
        &[FsError::Exist],
        |e| e.0,
    );
}

/// A new file has the requested mode and size, one link, and the directory's
/// wcc; the returned attributes match GETATTR.
pub fn create_sets_type_mode_and_size<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let set = SetAttr {
        mode: Some(0o600),
        size: Some(100),
        ..SetAttr::default()
    };
    let c = fs
        .create(&root(), &root_h, b"f", &CreateHow::Guarded(set))
        .map_err(|(e, _)| e)
        .unwrap();
    assert_wcc(&c.dir_wcc);
    let attr = getattr(fs, &c.handle);
    assert_eq!(attr.ftype, FileType::Regular);
    assert_eq!(attr.mode, 0o600);
    assert_eq!(attr.size, 100);
    assert_eq!(attr.nlink, 1);
    assert_eq!(attr.fileid, c.attr.fileid);
    assert_eq!((c.attr.mode, c.attr.size), (0o600, 100));
    assert_eq!(read_all(fs, &c.handle), vec![0; 100]);
    assert_eq!(lookup(fs, &root_h, b"f").unwrap(), c.handle);
}

/// Creating inside a regular file is NotDir.
pub fn create_in_file_is_notdir<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    assert_err(
        fs.create(&root(), &f, b"x", &CreateHow::Guarded(mode(0o600))),
        &[FsError::NotDir],
        |e| e.0,
    );
    assert_err(
        fs.mkdir(&root(), &f, b"x", &mode(0o700)),
        &[FsError::NotDir],
        |e| e.0,
    );
}

/// MKDIR makes an empty directory; an existing name is Exist.
pub fn mkdir_creates_directory<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let c = fs
        .mkdir(&root(), &root_h, b"d", &mode(0o750))
        .map_err(|(e, _)| e)
        .unwrap();
    assert_wcc(&c.dir_wcc);
    let attr = getattr(fs, &c.handle);
    assert_eq!(attr.ftype, FileType::Directory);
    assert_eq!(attr.mode, 0o750);
    assert!(attr.nlink >= 1);
    assert_eq!(lookup(fs, &root_h, b"d").unwrap(), c.handle);
    assert!(super::util::names(fs, &c.handle).is_empty());
    mkfile(fs, &root_h, b"f");
    for name in [&b"d"[..], b"f"] {
        assert_err(
            fs.mkdir(&root(), &root_h, name, &mode(0o755)),
            &[FsError::Exist],
            |e| e.0,
        );
    }
}

/// FIFOs and sockets.
pub fn mknod_fifo_and_socket<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    for (name, node, ftype) in [
        (&b"fifo"[..], SpecialNode::Fifo, FileType::Fifo),
        (b"sock", SpecialNode::Socket, FileType::Socket),
    ] {
        let c = fs
            .mknod(&root(), &root_h, name, &node, &mode(0o640))
            .map_err(|(e, _)| e)
            .unwrap();
        assert_wcc(&c.dir_wcc);
        let attr = getattr(fs, &c.handle);
        assert_eq!(attr.ftype, ftype);
        assert_eq!(attr.mode, 0o640);
        assert_eq!(lookup(fs, &root_h, name).unwrap(), c.handle);
        assert_err(
            fs.mknod(&root(), &root_h, name, &node, &mode(0o640)),
            &[FsError::Exist],
            |e| e.0,
        );
    }
}

/// Character and block devices keep their numbers.
pub fn mknod_devices<F: Filesystem>(fx: &Fixture<F>) {
    if !fx.caps.device_nodes {
        eprintln!("skipped: backend cannot make device nodes");
        return;
    }
    let fs = fx.fs();
    let root_h = fs.root();
    for (name, node, ftype, rdev) in [
        (
            &b"chr"[..],
            SpecialNode::Char(1, 3),
            FileType::CharDevice,
            (1, 3),
        ),
        (
            b"blk",
            SpecialNode::Block(7, 0),
            FileType::BlockDevice,
            (7, 0),
        ),
    ] {
        let c = fs
            .mknod(&root(), &root_h, name, &node, &mode(0o600))
            .map_err(|(e, _)| e)
            .unwrap();
        let attr = getattr(fs, &c.handle);
        assert_eq!(attr.ftype, ftype);
        assert_eq!(attr.rdev, rdev);
        assert_eq!(c.attr.rdev, rdev);
    }
}
