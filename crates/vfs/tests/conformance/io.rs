//! READ, WRITE and COMMIT.

use rnfs_vfs::{Filesystem, FsError, Stability};

use super::util::{assert_err, assert_wcc, getattr, mkdir, mkfile, read_all, root, write};
use super::Fixture;

/// `eof` is set exactly when the read reaches the end of the file.
pub fn read_eof_flag<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    write(fs, &f, 0, b"0123456789");
    let cases: [(u64, u32, &[u8], bool); 5] = [
        (0, 100, b"0123456789", true),
        (0, 5, b"01234", false),
        (5, 5, b"56789", true),
        (3, 4, b"3456", false),
        (9, 1, b"9", true),
    ];
    for (offset, count, want, eof) in cases {
        let mut out = Vec::new();
        let ok = fs.read(&root(), &f, offset, count, &mut out).unwrap();
        assert_eq!(out, want, "read({offset}, {count})");
        assert_eq!(ok.count as usize, want.len());
        assert_eq!(ok.eof, eof, "read({offset}, {count})");
        assert_eq!(ok.attr.map(|a| a.size), Some(10));
    }
}

/// Reading at or past the end returns nothing, with eof; an empty file too.
pub fn read_beyond_eof<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    let mut out = vec![7];
    let ok = fs.read(&root(), &f, 0, 10, &mut out).unwrap();
    assert_eq!((ok.count, ok.eof), (0, true));
    write(fs, &f, 0, b"abc");
    for offset in [3, 4, 1 << 40, u64::MAX] {
        let ok = fs.read(&root(), &f, offset, 10, &mut out).unwrap();
        assert_eq!((ok.count, ok.eof), (0, true), "offset {offset}");
    }
    assert_eq!(out, [7], "nothing appended");
}

/// A directory cannot be read as a file.
pub fn read_directory_is_isdir<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let d = mkdir(fs, &fs.root(), b"d");
    let mut out = Vec::new();
    assert_eq!(
        fs.read(&root(), &d, 0, 10, &mut out).map(|_| ()),
        Err(FsError::IsDir)
    );
}

/// Writes land at their offsets; the gaps read as zeros.
pub fn write_at_offsets_reads_holes_as_zeros<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    write(fs, &f, 0, b"abc");
    write(fs, &f, 10, b"xyz");
    write(fs, &f, 1, b"B");
    assert_eq!(read_all(fs, &f), b"aBc\0\0\0\0\0\0\0xyz");
    // Across a 64 KiB boundary, and overwriting in the middle.
    let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    write(fs, &f, 100, &big);
    write(fs, &f, 70_000, b"MIDDLE");
    let mut want = b"aBc\0\0\0\0\0\0\0xyz".to_vec();
    want.resize(100, 0);
    want.extend_from_slice(&big);
    want[70_000..70_006].copy_from_slice(b"MIDDLE");
    let mut got = Vec::new();
    let mut offset = 0;
    loop {
        let ok = fs.read(&root(), &f, offset, 65_536, &mut got).unwrap();
        offset += u64::from(ok.count);
        if ok.eof {
            break;
        }
        assert!(ok.count > 0, "no progress and no eof");
    }
    assert_eq!(got.len(), want.len());
    assert!(got == want, "content differs");
}

/// One byte far out makes a large, sparse file whose hole reads as zeros.
pub fn write_far_offset_is_sparse<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    let far = 4 << 30;
    write(fs, &f, far, b"Z");
    let attr = getattr(fs, &f);
    assert_eq!(attr.size, far + 1);
    assert!(
        attr.used < 1 << 30,
        "4 GiB hole allocated: used {}",
        attr.used
    );
    let mut out = Vec::new();
    let ok = fs.read(&root(), &f, far - 3, 10, &mut out).unwrap();
    assert_eq!(out, b"\0\0\0Z");
    assert!(ok.eof);
    let ok = fs.read(&root(), &f, 1 << 30, 4096, &mut out).unwrap();
    assert_eq!(ok.count, 4096);
    assert!(out[4..].iter().all(|&b| b == 0));
}

/// The stability reached is at least the one asked, and the count is all of it.
pub fn write_stability_at_least_requested<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    for (i, stable) in [
        Stability::Unstable,
        Stability::DataSync,
        Stability::FileSync,
    ]
    .into_iter()
    .enumerate()
    {
        let ok = fs
            .write(&root(), &f, i as u64 * 4, b"data", stable)
            .map_err(|(e, _)| e)
            .unwrap();
        assert_eq!(ok.count, 4);
        assert!(ok.committed >= stable, "{stable:?} -> {:?}", ok.committed);
        assert_wcc(&ok.wcc);
    }
    assert_eq!(read_all(fs, &f), b"datadatadata");
}

/// A directory cannot be written.
pub fn write_directory_is_isdir<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let d = mkdir(fs, &fs.root(), b"d");
    assert_err(
        fs.write(&root(), &d, 0, b"x", Stability::FileSync),
        &[FsError::IsDir],
        |e| e.0,
    );
}

/// The wcc of a write shows the size before and after.
pub fn write_wcc_tracks_size<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    write(fs, &f, 0, b"12345");
    let ok = fs
        .write(&root(), &f, 3, b"abcdef", Stability::FileSync)
        .map_err(|(e, _)| e)
        .unwrap();
    assert_wcc(&ok.wcc);
    assert_eq!(ok.wcc.before.unwrap().size, 5);
    let after = ok.wcc.after.unwrap();
    assert_eq!(after.size, 9);
    assert_eq!(after.fileid, getattr(fs, &f).fileid);
    // Overwriting inside the file leaves the size alone.
    let ok = fs
        .write(&root(), &f, 0, b"zz", Stability::Unstable)
        .map_err(|(e, _)| e)
        .unwrap();
    assert_eq!(ok.wcc.after.unwrap().size, 9);
    assert_eq!(read_all(fs, &f), b"zz3abcdef");
}

/// COMMIT after unstable writes succeeds with wcc and keeps the data.
pub fn commit_succeeds<F: Filesystem>(fx: &Fixture<F>) {
    let fs = fx.fs();
    let f = mkfile(fs, &fs.root(), b"f");
    let verifier = fs.write_verifier();
    fs.write(&root(), &f, 0, b"unstable", Stability::Unstable)
        .map_err(|(e, _)| e)
        .unwrap();
    for (offset, count) in [(0, 0), (0, 4), (4, 100)] {
        let wcc = fs
            .commit(&root(), &f, offset, count)
            .map_err(|(e, _)| e)
            .unwrap();
        assert_eq!(wcc.after.map(|a| a.size), Some(8));
    }
    assert_eq!(fs.write_verifier(), verifier);
    assert_eq!(read_all(fs, &f), b"unstable");
}
