//! The streaming READDIR/READDIRPLUS encoders: exact budgets, dircount versus
//! maxcount, TOOSMALL, and (by property) never exceeding the budget while
//! producing what the decoder reads back.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod strategies;

use proptest::collection::vec;
use proptest::prelude::*;
use rnfs_nfs3::*;
use rnfs_xdr::{Decode, Reader, Writer};

const VERF: CookieVerf3 = *b"verifier";
/// status + post_op_attr(None) + cookieverf.
const EMPTY_HEADER: usize = 4 + 4 + 8;
const TRAILER: usize = 8;

fn name(i: usize) -> Vec<u8> {
    format!("e{i:03}").into_bytes()
}

fn attrs(fileid: u64) -> Fattr3 {
    Fattr3 {
        ftype: Ftype3::Reg,
        mode: 0o644,
        nlink: 1,
        uid: 0,
        gid: 0,
        size: 0,
        used: 0,
        rdev: Specdata3::default(),
        fsid: 1,
        fileid,
        atime: Nfstime3::default(),
        mtime: Nfstime3::default(),
        ctime: Nfstime3::default(),
    }
}

/// Pushes `e000`, `e001`, … until one is refused; returns entries, total size, bytes.
fn readdir(count: u32, overhead: usize, dir_attributes: PostOpAttr) -> (u32, usize, Vec<u8>) {
    let mut out = Vec::new();
    let mut w = Writer::new(&mut out);
    let mut enc = ReaddirEncoder::begin(&mut w, count, overhead, &dir_attributes, &VERF);
    let mut i = 0;
    while i < 1000 && enc.push(&mut w, i as u64 + 10, &name(i), i as u64 + 1) {
        i += 1;
    }
    let entries = enc.entries();
    let size = enc.finish(&mut w, true);
    (entries, size, out)
}

fn decode_readdir(bytes: &[u8]) -> ReaddirRes<'_> {
    let mut r = Reader::new(bytes);
    let res = ReaddirRes::decode(&mut r).unwrap();
    r.finish("READDIR3res").unwrap();
    res
}

#[test]
fn entry_sizes() {
    assert_eq!(entry3_size(4), 28);
    assert_eq!(entry3_size(5), 32);
    assert_eq!(dir_info_size(0), 20);
    assert_eq!(dir_info_size(1), 24);
    assert_eq!(entryplus3_size(4, false, None), 28 + 8);
    assert_eq!(entryplus3_size(4, true, Some(8)), 28 + 4 + 84 + 4 + 4 + 8);
}

#[test]
fn readdir_stops_exactly_at_count() {
    let per_entry = entry3_size(4);
    for k in [0, 1, 5, 40] {
        let count = (EMPTY_HEADER + TRAILER + k * per_entry) as u32;
        let (entries, size, out) = readdir(count, 0, None);
        assert_eq!(entries as usize, k);
        assert_eq!(size, count as usize, "fills the budget exactly");
        assert_eq!(out.len(), size);
        let ReaddirRes::Ok(ok) = decode_readdir(&out) else {
            panic!("not NFS3_OK")
        };
        assert_eq!(ok.entries.len(), k);
        assert!(!ok.eof, "a refused push forces eof = false");
        // One byte less loses one entry.
        let (fewer, size, _) = readdir(count - 1, 0, None);
        assert_eq!(fewer as usize, k.saturating_sub(1));
        if k > 0 {
            assert!(size < count as usize);
        } else {
            // Smaller than the empty reply: the one case that cannot fit.
            assert_eq!(size, EMPTY_HEADER + TRAILER);
        }
    }
}

#[test]
fn reply_overhead_counts_against_count() {
    let per_entry = entry3_size(4);
    let count = (EMPTY_HEADER + TRAILER + 5 * per_entry) as u32;
    let (entries, size, _) = readdir(count, per_entry, None);
    assert_eq!(entries, 4);
    assert!(size + per_entry <= count as usize);
    // Attributes count too: 84 + 4 - 4 more header bytes.
    let (entries, _, _) = readdir(count + 84, 0, Some(attrs(1)));
    assert_eq!(entries, 5);
    let (entries, _, _) = readdir(count + 83, 0, Some(attrs(1)));
    assert_eq!(entries, 4);
}

#[test]
fn refusal_is_final_and_clears_eof() {
    let mut out = Vec::new();
    let mut w = Writer::new(&mut out);
    let count = (EMPTY_HEADER + TRAILER + entry3_size(8)) as u32;
    let mut enc = ReaddirEncoder::begin(&mut w, count, 0, &None, &VERF);
    assert!(
        !enc.push(&mut w, 1, b"a-long-name", 1),
        "12 bytes do not fit"
    );
    assert!(enc.is_truncated());
    assert!(
        !enc.push(&mut w, 2, b"b", 2),
        "later, smaller entries neither"
    );
    assert_eq!(enc.entries(), 0);
    let before = w.len();
    assert!(!enc.push(&mut w, 3, b"c", 3));
    assert_eq!(w.len(), before, "a refused push writes nothing");
    let _ = enc.finish(&mut w, true);
    let ReaddirRes::Ok(ok) = decode_readdir(&out) else {
        panic!()
    };
    assert!(!ok.eof);
}

#[test]
fn empty_directory_is_eof_not_toosmall() {
    let mut out = Vec::new();
    let mut w = Writer::new(&mut out);
    let enc = ReaddirEncoder::begin(&mut w, 100, 0, &Some(attrs(2)), &VERF);
    assert!(!enc.is_too_small());
    let _ = enc.finish(&mut w, true);
    let ReaddirRes::Ok(ok) = decode_readdir(&out) else {
        panic!()
    };
    assert!(ok.eof && ok.entries.is_empty());
    assert_eq!(ok.dir_attributes, Some(attrs(2)));
    assert_eq!(ok.cookieverf, VERF);
}

#[test]
fn toosmall_replaces_the_partial_reply() {
    let mut out = b"RPC-HEADER".to_vec(); // bytes before `begin` are kept
    let mut w = Writer::new(&mut out);
    let dir = Some(attrs(2));
    let mut enc = ReaddirEncoder::begin(&mut w, 110, 0, &dir, &VERF);
    assert!(!enc.push(&mut w, 1, b"x", 1));
    assert!(enc.is_too_small());
    enc.too_small(&mut w, &dir);
    assert_eq!(&out[..10], b"RPC-HEADER");
    let res = decode_readdir(&out[10..]);
    assert_eq!(
        res,
        ReaddirRes::Fail {
            status: Nfsstat3::Toosmall,
            dir_attributes: dir
        }
    );

    let mut out = Vec::new();
    let mut w = Writer::new(&mut out);
    let mut enc = ReaddirplusEncoder::begin(&mut w, 10, 4096, 0, &None, &VERF);
    assert!(
        !enc.push(&mut w, 1, b"x", 1, None, None),
        "dircount 10 < 24"
    );
    assert!(enc.is_too_small());
    enc.too_small(&mut w, &None);
    let res = ReaddirplusRes::decode(&mut Reader::new(&out)).unwrap();
    assert_eq!(res.status(), Nfsstat3::Toosmall);
}

/// Pushes `e000`, … with attributes and an 8-byte handle until one is refused.
fn readdirplus(dircount: u32, maxcount: u32) -> (u32, usize, usize, Vec<u8>) {
    let mut out = Vec::new();
    let mut w = Writer::new(&mut out);
    let mut enc = ReaddirplusEncoder::begin(&mut w, dircount, maxcount, 0, &None, &VERF);
    let fh = FileHandle::new(b"handle-8").unwrap();
    let mut i = 0u64;
    while i < 1000 {
        let a = attrs(i);
        if !enc.push(&mut w, i, &name(i as usize), i + 1, Some(&a), Some(&fh)) {
            break;
        }
        i += 1;
    }
    let (entries, dir_bytes) = (enc.entries(), enc.dir_bytes());
    let size = enc.finish(&mut w, true);
    assert_eq!(size, out.len());
    (entries, dir_bytes, size, out)
}

#[test]
fn readdirplus_dircount_limits_directory_information_only() {
    let info = dir_info_size(4);
    let (entries, dir_bytes, size, out) = readdirplus((3 * info) as u32, 1 << 20);
    assert_eq!(entries, 3);
    assert_eq!(dir_bytes, 3 * info);
    assert_eq!(
        size,
        EMPTY_HEADER + TRAILER + 3 * entryplus3_size(4, true, Some(8))
    );
    let res = ReaddirplusRes::decode(&mut Reader::new(&out)).unwrap();
    let ReaddirplusRes::Ok(ok) = res else {
        panic!()
    };
    assert_eq!(ok.entries.len(), 3);
    assert_eq!(ok.entries[2].name, b"e002");
    assert_eq!(ok.entries[2].name_attributes, Some(attrs(2)));
    assert_eq!(ok.entries[2].name_handle.unwrap().as_bytes(), b"handle-8");
    assert!(!ok.eof);
    let (entries, _, _, _) = readdirplus((3 * info - 1) as u32, 1 << 20);
    assert_eq!(entries, 2);
}

#[test]
fn readdirplus_maxcount_limits_the_whole_reply() {
    let per_entry = entryplus3_size(4, true, Some(8));
    let maxcount = (EMPTY_HEADER + TRAILER + 2 * per_entry) as u32;
    let (entries, _, size, _) = readdirplus(1 << 20, maxcount);
    assert_eq!(entries, 2);
    assert_eq!(size, maxcount as usize);
    let (entries, _, _, _) = readdirplus(1 << 20, maxcount - 1);
    assert_eq!(entries, 1);
}

#[test]
fn linux_style_budgets() {
    // Linux clients send dircount = maxcount / 8; with 32 KiB the dircount
    // (4 KiB of names) binds first for short names.
    let (entries, dir_bytes, size, _) = readdirplus(4096, 32768);
    assert_eq!(entries as usize, 4096 / dir_info_size(4));
    assert!(dir_bytes <= 4096 && size <= 32768);
}

#[derive(Debug, Clone)]
struct PlusEntry {
    fileid: u64,
    name: Vec<u8>,
    cookie: u64,
    attrs: Option<Fattr3>,
    handle: Option<FileHandle>,
}

fn plus_entry() -> impl Strategy<Value = PlusEntry> {
    (
        any::<u64>(),
        vec(any::<u8>(), 0..300),
        any::<u64>(),
        proptest::option::of(strategies::fattr3()),
        proptest::option::of(strategies::file_handle()),
    )
        .prop_map(|(fileid, name, cookie, attrs, handle)| PlusEntry {
            fileid,
            name,
            cookie,
            attrs,
            handle,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Whatever the budgets, the reply fits them (when the empty reply does),
    /// decodes to exactly the accepted prefix, and the first refused entry really
    /// did not fit.
    #[test]
    fn readdirplus_respects_budgets(
        entries in vec(plus_entry(), 0..40),
        dircount in 0u32..4000,
        maxcount in 0u32..12000,
        overhead in 0usize..200,
        dir_attr in strategies::post_op_attr(),
        eof in any::<bool>(),
    ) {
        let mut out = vec![0xEE; 3];
        let mut w = Writer::new(&mut out);
        let mut enc = ReaddirplusEncoder::begin(&mut w, dircount, maxcount, overhead, &dir_attr, &VERF);
        let header = w.len() - 3;
        let mut accepted = 0;
        let mut dir_used = 0;
        for e in &entries {
            let before = w.len();
            let ok = enc.push(&mut w, e.fileid, &e.name, e.cookie, e.attrs.as_ref(), e.handle.as_ref());
            if ok {
                prop_assert_eq!(w.len() - before, entryplus3_size(e.name.len(), e.attrs.is_some(), e.handle.map(|h| h.len())));
                accepted += 1;
                dir_used += dir_info_size(e.name.len());
            } else {
                prop_assert_eq!(w.len(), before);
                let size = entryplus3_size(e.name.len(), e.attrs.is_some(), e.handle.map(|h| h.len()));
                let dir_over = dir_used + dir_info_size(e.name.len()) > dircount as usize;
                let max_over = overhead + (before - 3) + size + TRAILER > maxcount as usize;
                prop_assert!(dir_over || max_over, "refused an entry that fit");
                break;
            }
        }
        let truncated = accepted < entries.len();
        prop_assert_eq!(enc.is_too_small(), truncated && accepted == 0);
        let size = enc.finish(&mut w, eof);
        prop_assert_eq!(size, out.len() - 3);
        if overhead + header + TRAILER <= maxcount as usize {
            prop_assert!(overhead + size <= maxcount as usize);
        }
        prop_assert!(dir_used <= dircount as usize);
        let mut r = Reader::new(&out[3..]);
        let ReaddirplusRes::Ok(ok) = ReaddirplusRes::decode(&mut r).unwrap() else {
            panic!("not NFS3_OK");
        };
        prop_assert_eq!(r.remaining(), 0);
        prop_assert_eq!(ok.eof, eof && !truncated);
        prop_assert_eq!(ok.dir_attributes, dir_attr);
        prop_assert_eq!(ok.entries.len(), accepted);
        for (got, want) in ok.entries.iter().zip(&entries) {
            prop_assert_eq!(got.fileid, want.fileid);
            prop_assert_eq!(got.name, &want.name[..]);
            prop_assert_eq!(got.cookie, want.cookie);
            prop_assert_eq!(got.name_attributes, want.attrs);
            prop_assert_eq!(got.name_handle, want.handle);
        }
    }

    /// The same for READDIR, and the stream equals the `ReaddirResOk` encoding.
    #[test]
    fn readdir_respects_budget(
        entries in vec((any::<u64>(), vec(any::<u8>(), 0..300), any::<u64>()), 0..40),
        count in 0u32..6000,
        overhead in 0usize..200,
        eof in any::<bool>(),
    ) {
        let mut out = Vec::new();
        let mut w = Writer::new(&mut out);
        let mut enc = ReaddirEncoder::begin(&mut w, count, overhead, &None, &VERF);
        let mut accepted = Vec::new();
        for (fileid, name, cookie) in &entries {
            if !enc.push(&mut w, *fileid, name, *cookie) {
                let next = overhead + w.len() + entry3_size(name.len()) + TRAILER;
                prop_assert!(next > count as usize, "refused an entry that fit");
                break;
            }
            accepted.push(Entry3 { fileid: *fileid, name, cookie: *cookie });
        }
        let truncated = accepted.len() < entries.len();
        let size = enc.finish(&mut w, eof);
        if overhead + EMPTY_HEADER + TRAILER <= count as usize {
            prop_assert!(overhead + size <= count as usize);
        }
        let built = ReaddirRes::Ok(ReaddirResOk {
            dir_attributes: None,
            cookieverf: VERF,
            entries: accepted,
            eof: eof && !truncated,
        });
        let mut expected = Vec::new();
        rnfs_xdr::Encode::encode(&built, &mut Writer::new(&mut expected));
        prop_assert_eq!(&out, &expected);
        prop_assert_eq!(decode_readdir(&out), built);
    }
}
