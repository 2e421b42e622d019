//! ACCESS as root (the per-class cases are in `perms`).

use rnfs_vfs::{access, Filesystem};

use super::util::{mkdir, mkfile, mode, root, setattr};
use super::Fixture;

/// Root may read and modify a file and a directory; LOOKUP and DELETE apply to
/// directories only.
pub fn access_root_on_file_and_dir<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    let d = mkdir(fs, &fs.root(), b"d");
    let (got, attr) = fs.access(&root(), &f, access::ALL).unwrap();
    assert_eq!(attr.fileid, fs.getattr(&root(), &f).unwrap().fileid);
    let rw = access::READ | access::MODIFY | access::EXTEND;
    assert_eq!(got & rw, rw, "file: {got:#x}");
    assert_eq!(got & access::LOOKUP, 0, "LOOKUP on a file: {got:#x}");
    let (got, _) = fs.access(&root(), &d, access::ALL).unwrap();
    let dir_bits = access::READ | access::LOOKUP | access::MODIFY | access::EXTEND | access::DELETE;
    assert_eq!(got & dir_bits, dir_bits, "dir: {got:#x}");
}

/// EXECUTE on a file needs an x bit in its mode, even for root.
pub fn access_execute_needs_an_x_bit<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    setattr(fs, &f, mode(0o644));
    let (got, _) = fs.access(&root(), &f, access::EXECUTE).unwrap();
    assert_eq!(got, 0);
    setattr(fs, &f, mode(0o744));
    let (got, _) = fs.access(&root(), &f, access::EXECUTE).unwrap();
    assert_eq!(got, access::EXECUTE);
}

/// The answer never has bits outside the mask.
pub fn access_answers_only_the_mask<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    let d = mkdir(fs, &fs.root(), b"d");
    for fh in [f, d] {
        for mask in [
            0,
            access::READ,
            access::MODIFY | access::LOOKUP,
            access::ALL,
        ] {
            let (got, _) = fs.access(&root(), &fh, mask).unwrap();
            assert_eq!(got & !mask, 0, "mask {mask:#x} answered {got:#x}");
        }
        let (got, _) = fs.access(&root(), &fh, access::READ).unwrap();
        assert_eq!(got, access::READ);
    }
}
