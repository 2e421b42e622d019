//! FSSTAT, FSINFO facts and the write verifier.

use rnfs_vfs::{Filesystem, FsError};

use super::util::{getattr, mkfile, root, write};
use super::Fixture;

/// Free never exceeds total, available never exceeds free; the attributes are
/// the object's.
pub fn fsstat_is_sane<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let root_h = fs.root();
    let f = mkfile(fs, &root_h, b"f");
    write(fs, &f, 0, &[1; 10_000]);
    for fh in [root_h, f] {
        let (st, attr) = fs.fsstat(&root(), &fh).unwrap();
        assert!(st.total_bytes > 0);
        assert!(st.free_bytes <= st.total_bytes, "{st:?}");
        assert!(st.avail_bytes <= st.free_bytes, "{st:?}");
        assert!(st.free_files <= st.total_files, "{st:?}");
        assert!(st.avail_files <= st.free_files, "{st:?}");
        assert_eq!(attr.fileid, getattr(fs, &fh).fileid);
    }
    let bad = rnfs_vfs::BackendHandle::new(&[]).unwrap();
    assert_eq!(fs.fsstat(&root(), &bad).map(drop), Err(FsError::BadHandle));
}

/// FSINFO/PATHCONF facts match what the other cases rely on.
pub fn info_is_sane<F: Filesystem>(fx: &Fixture<F>) {
    let info = fx.fs().info();
    assert!(info.max_file_size >= 4 << 30, "{info:?}");
    assert_eq!(info.max_name, 255);
    assert!(info.link && info.symlink);
    assert!(info.no_trunc, "long names are refused, not truncated");
    assert!(info.case_preserving && !info.case_insensitive);
    assert!(info.max_link >= 2);
    assert!(info.time_delta.secs <= 1);
}

/// The write verifier does not change while nothing is lost.
pub fn write_verifier_is_stable<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let v = fs.write_verifier();
    let f = mkfile(fs, &fs.root(), b"f");
    write(fs, &f, 0, b"x");
    fs.commit(&root(), &f, 0, 0).map_err(|(e, _)| e).unwrap();
    assert_eq!(fs.write_verifier(), v);
}
